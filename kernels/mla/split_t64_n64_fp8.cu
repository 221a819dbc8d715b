// MLA decode split kernels over an FP8 e4m3 latent cache (cgrt_mla_options.kv_dtype
// CGRT_MLA_KV_FP8_E4M3; value = e4m3 x kv_scale) for 17..64 query rows per CTA:
// cgrt_mla_split_t64_n64_fp8, and cgrt_mla_split_t64_n64_fp8_causal for causal blocks whose
// rows run together (MK, as cgrt_mla_split_t64_n64_causal). The arithmetic of
// cgrt_mla_split_t64_n64 (kernels/mla/split_t64_n64.cu: two warpgroups of the 32-row t64
// arithmetic, warpgroup w on query rows 32 w .. 32 w + 31, over the same 64-token tiles;
// n64_finish of kernels/mla/n64.cuh) with the f16 products and Q scaling of
// cgrt_mla_split_t64_fp8 (kernels/mla/split_t64_fp8.cu, kernels/mla/fp8.cuh): each
// 64-token tile is read from HBM once per 64 query rows and widened once for both
// warpgroups. With 17..32 rows (32 heads, 16 heads x k 2 together) warpgroup 1 runs no
// products: it copies and widens its half of every tile. Same parameters, schedule,
// ranges and partial slots as every split kernel (kernels/mla/split.cuh); C reference
// split_fp8_ref (kernels/mla/ref.c). Host side: kernels/mla/plan.c; design and byte
// counts: docs/mla_decode.md ("FP8 e4m3 KV cache", 64 query rows).
//
// Shared memory (CGRT_MLA_T64_N64_FP8_SMEM = 225840 bytes, 1 CTA per SM): 1 KB alignment
// slack, Q of 64 rows in f16 (72 KB, the n32 layout per warpgroup), ONE f16 tile (9 column
// blocks of 64 tokens x 128 B = 72 KB; P^T of both warpgroups in its rope block 8, as in
// t64_n64), an e4m3 ring of 18 column-block slots of 64 tokens x 64 bytes (4 KB each, 72
// KB: two raw tiles, tile j in slots 9 (j & 1) .. + 8), then the small arrays (s_red, the
// fused schedule of 256 rows, the causal kernel's 64 token ends, s_qinv of 64 rows). Two
// f16 tiles and Q (216 KB) would leave no room for a ring, so the single f16 tile is
// widened in two halves in the shadow of the products that do not read them:
//   H0 = column blocks 0..3 (V dims 0..255), H1 = blocks 4..8 (V dims 256..511, rope).
// Step it (tile it; H0 of it already widened):
//   B1  __syncthreads: H0 of tile it widened by every thread, every P.V of tile it - 1 done
//       S part 1 = K[:, blocks 0..3] . Q^T issued (wgmma, one commit group)
//       H1 of tile it widened (the ring slots refilled with H1 of tile it + 2)
//   B2  __syncthreads: H1 widened; S part 2 (blocks 4..8) issued into the same
//       accumulators, waited; softmax (its __syncthreads: both S done, the rope block is
//       P^T's); P^T complete (named barrier 1 + w)
//       P.V issued as two commit groups: M tiles 0..3 (V blocks 0..3), then 4..7
//   B3  __syncthreads after wgmma.wait_group 1: both warpgroups' P.V of blocks 0..3 done
//       H0 of tile it + 1 widened (the ring slots refilled with H0 of tile it + 3) while
//       the P.V of blocks 4..7 runs; wait_group 0.
// The e4m3 copies: thread tid moves token row tid >> 2, bytes 16 (tid & 3) .. + 15 of each
// column block's 64-byte slice (one cp.async of 16 bytes per block and tile) and widens
// exactly those bytes itself (no barrier between its copy and its widening; one cvt
// e4m3x2 -> f16x2 per pair, exact), one commit group per half and tile, two tiles ahead.
// Tokens at or past the segment's end read as 0 (cp.async of 0 bytes): no bits of the
// cache past a length reach S or V. Q lands as bf16 and is scaled per head row into f16
// by a power of two (s_qinv scales S back); kv_scale is folded into the softmax scale and
// into the output numerator. Without sm_90a (the compute_90 PTX) the products run on f16
// mma.sync + ldmatrix over the same layout, the synchronisation unchanged.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/fp8.cuh"
#include "kernels/mla/n64.cuh"
#include "kernels/mla/split.cuh"
#include "kernels/mla/t64.cuh"
#include "kernels/mla/wgmma.cuh"

namespace {

using namespace cgrt_wg;
using namespace cgrt_t64;
using namespace cgrt_n64;
using namespace cgrt_fp8;

constexpr int kTile = 9 * kCB;    // the f16 tile (73728 bytes)
constexpr int kF8Blk = 64 * 64;   // an e4m3 column block: 64 tokens x 64 bytes
constexpr int kRing = 18 * kF8Blk; // two raw tiles
constexpr int kSmall = 2 * kNW * 4 * 4 + (2 * kThreads + 2) * 4 + (kThreads / 32) * 4 + 4 + 4 + 2 * kNW * 4 + 2 * kNW * 4;
constexpr int kEndAt = 2 * kNW * 4 * 4 + (2 * kThreads + 2) * 4 + (kThreads / 32) * 4 + 4 + 4; // s_end in the small arrays
static_assert(kEndAt % 16 == 0, "s_end 16-byte aligned");
constexpr int kBytes = 1024 + 2 * kQW + kTile + kRing + kSmall;
static_assert(kBytes == CGRT_MLA_T64_N64_FP8_SMEM, "the kernel table passes CGRT_MLA_T64_N64_FP8_SMEM");
static_assert(kBytes <= 227 * 1024, "one CTA per SM");
static_assert(2 * kNW * kOStr * 4 <= 2 * kQW + kTile, "the output staging fits over Q and the f16 tile");
static_assert(2 * kPW <= kCB, "P^T of both warpgroups in the rope block");
static_assert(kF8Blk == kThreads * 16, "one 16-byte piece per thread and column block");

// S^T = K[:, column blocks CB0 .. CB1 - 1] . Q_w^T of the f16 tile for one warpgroup (32
// query rows, q_s its Q): wgmma one commit group, CB0 == 0 overwrites s (the second part
// accumulates behind the first, its own fence before it); without sm_90a computed here
// (mma.sync).
template <int CB0, int CB1>
__device__ __forceinline__ void qk_part(float (&s)[16], uint32_t tile, uint32_t q_s) {
#if CGRT_WG_HAS_WGMMA
  wg_fence();
#pragma unroll
  for (int cb = CB0; cb < CB1; cb++) {
    const uint64_t da = make_desc(tile + cb * kCB, 16, 1024), db = make_desc(q_s + cb * (kNW * 128), 16, 1024);
#pragma unroll
    for (int k4 = 0; k4 < 4; k4++) wgmma_f16_m64n32<0>(s, da + 2 * k4, db + 2 * k4, cb + k4 > 0);
  }
  wg_commit();
  fence_regs(s);
#else
  if constexpr (CB0 == 0) {
#pragma unroll
    for (int i = 0; i < 16; i++) s[i] = 0.f;
  }
  const int lane = threadIdx.x & 31, wi = (threadIdx.x >> 5) & 3;
  const int ar = 16 * wi + (lane & 15), ac = lane >> 4;
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
#pragma unroll 4
  for (int ks = 4 * CB0; ks < 4 * CB1; ks++) {
    const int cb = ks >> 2, c0 = (ks & 3) * 2;
    uint32_t a4[4];
    ldsm_x4(tile + cb * kCB + swz(ar, c0 + ac), a4[0], a4[1], a4[2], a4[3]);
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      // Rows 16..31 of a Q column block start 16 rows (2048 bytes) in: the same swizzle.
      uint32_t b0, b1, b2, b3;
      ldsm_x4(q_s + cb * (kNW * 128) + hh * 16 * 128 + swz(br, c0 + bc), b0, b1, b2, b3);
      mma16816_f16(s + 8 * hh, a4, b0, b1);
      mma16816_f16(s + 8 * hh + 4, a4, b2, b3);
    }
  }
#endif
}

// Column blocks B0 .. B1 - 1 of a raw tile (this thread's pieces at src, kF8Blk apart)
// widened into the f16 tile's blocks (token row fr, chunks 2 f4 and 2 f4 + 1): the loads
// first (independent), then one cvt per pair and two 16-byte stores per block.
template <int B0, int B1>
__device__ __forceinline__ void widen_blocks(uint32_t src, uint32_t tile, int fr, int f4) {
  uint4 v[B1 - B0];
#pragma unroll
  for (int j = 0; j < B1 - B0; j++) v[j] = ld_shared_v4(src + (B0 + j) * kF8Blk);
#pragma unroll
  for (int j = 0; j < B1 - B0; j++) {
    uint32_t x[8];
    e4m3x4_to_f16x4(v[j].x, x[0], x[1]);
    e4m3x4_to_f16x4(v[j].y, x[2], x[3]);
    e4m3x4_to_f16x4(v[j].z, x[4], x[5]);
    e4m3x4_to_f16x4(v[j].w, x[6], x[7]);
    const uint32_t dst = tile + (B0 + j) * kCB;
    st_shared_v4(dst + swz(fr, 2 * f4), x[0], x[1], x[2], x[3]);
    st_shared_v4(dst + swz(fr, 2 * f4 + 1), x[4], x[5], x[6], x[7]);
  }
}

// MK (the _causal kernel): each "row" is a request whose qh query rows are mk block rows
// of qh / mk heads (kernels/mla/n64.cuh n64_row_ends).
template <bool MK>
__device__ __forceinline__ void split_t64_n64_fp8(const bf16 *__restrict__ q, const bf16 *__restrict__ kv,
                                                  const int *__restrict__ bt, const int *__restrict__ meta,
                                                  bf16 *__restrict__ out, float *__restrict__ lse,
                                                  float *__restrict__ part_o, float *__restrict__ part_lse,
                                                  unsigned *__restrict__ counters, int rows, int qh, int hg, int P,
                                                  int mbps, int ps, int bl, float scale,
                                                  const int *__restrict__ seq_lens, int cap, int min_tiles,
                                                  int causal, int mk, float kv_scale) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_tile = s_q + 2 * kQW;
  const uint32_t s_f8 = s_tile + kTile;
  unsigned char *small = sm + 2 * kQW + kTile + kRing;
  float *s_stage = reinterpret_cast<float *>(sm);       // [64][kOStr], over Q and the f16 tile
  float *s_red = reinterpret_cast<float *>(small);      // [2][32 heads][4 warps]
  int *s_meta = reinterpret_cast<int *>(s_red + 2 * kNW * 4); // 2 kThreads + 2
  int *s_wsum = s_meta + 2 * kThreads + 2;              // kThreads / 32
  int *s_last = s_wsum + kThreads / 32;
  int *s_end = reinterpret_cast<int *>(small + kEndAt);  // MK: [64], 16-byte aligned
  float *s_qinv = reinterpret_cast<float *>(s_end + 2 * kNW); // [64]: 1 / the scale of Q of each row

  // Programmatic dependent launch: nothing above reads what the kernel before writes;
  // with early reads t64_walk waits after its reads of seq_lens and the block table.
  if (!t64_early<0>(causal, seq_lens)) cgrt_mla::pdl_wait();

  const int tid = threadIdx.x, lane = tid & 31;
  // The warpgroup, warp-uniform to ptxas (a branch or address on a value it takes for
  // divergent can serialize the wgmma pipeline: docs/mla_decode.md).
  const int w = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int wq = (tid >> 5) & 3, gq = lane >> 2, t4 = lane & 3;
  const int g = blockIdx.x;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const int nh = h_end - h_begin; // 1..64
  // Whether this warpgroup has query rows (warpgroup 1 only above 32 rows); CTA-uniform.
  const bool act = __shfl_sync(0xffffffffu, (int)(w == 0 || nh > kNW), 0) != 0;
  const float sl2 = scale * kv_scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;
  float *s_red_w = s_red + kNW * 4 * w;
  const uint32_t s_qw = s_q + kQW * w;
  const unsigned char *kv8 = reinterpret_cast<const unsigned char *>(kv);

  // Q copy roles: chunk tid & 7 of every column block of query rows (tid >> 3) + 32 x.
  const int crow = tid >> 3, cch = tid & 7;
  // e4m3 roles: token row fr of a tile, 16-byte piece f4 of each column block's 64 bytes.
  const int fr = tid >> 2, f4 = tid & 3;
  // Accumulator roles (m64n32 per warpgroup): token rows ta and ta + 8 of S^T.
  const int ta = 16 * wq + gq;

  // Block-table entry (row btr) of this thread's token row of the tile that starts at
  // token tb (0 at or past bound): tiles 0-3 before the prologue, then tile it + 4 in step
  // it, two steps before its first copy.
  auto entries = [&](const int *btr, int tb, int bound, int (&pg)[1]) {
    t64_entries(btr, tb, bound, fr, ps_shift, pg);
  };

  // One segment of row r (kernels/mla/t64.cuh t64_walk): its n tiles start at tokens
  // tb0, tb0 + stride, ..., its tokens end at tend; its partial goes to slot r + p
  // (nsplit > 1) or straight to out (nsplit == 1).
  auto segment = [&](int r, int tb0, int stride, int tend, int len, int n, int pf, int nsplit, int (&pg0)[1],
                     int (&pg1)[1], int (&pg2)[1], int (&pg3)[1]) {
    const int *btr = bt + (long long)(r / bl) * mbps;
    // Half H (0: column blocks 0..3, 1: blocks 4..8) of tile i (entry pg) into its ring
    // slots, one commit group (empty past the segment); tokens at or past tend read as 0.
    auto issue = [&](int i, int H, int pg) {
      if (i < n) {
        const int tok = tb0 + stride * i + fr;
        const bool ok = tok < tend;
        const unsigned char *src = kv8 + ((long long)pg * ps + (tok & (ps - 1))) * D + f4 * 16;
        const uint32_t dst = s_f8 + (i & 1) * 9 * kF8Blk + tid * 16;
        if (H == 0) {
#pragma unroll
          for (int b = 0; b < 4; b++) cp_async16(dst + b * kF8Blk, ok ? src + 64 * b : kv8, ok ? 16 : 0);
        } else {
#pragma unroll
          for (int b = 4; b < 9; b++) cp_async16(dst + b * kF8Blk, ok ? src + 64 * b : kv8, ok ? 16 : 0);
        }
      }
      cp_commit();
    };
    auto raw = [&](int i) { return s_f8 + (i & 1) * 9 * kF8Blk + tid * 16; };

    // Q (rows past nh zero) in the first commit group, then both halves of tiles 0 and 1.
    n64_load_q(q, s_q, r, qh, h_begin, nh, crow, cch);
    if constexpr (MK) n64_row_ends(s_end, tid, qh, mk, h_begin, tend, len, cap);
    (void)len;
    issue(0, 0, pg0[0]);
    issue(0, 1, pg0[0]);
    issue(1, 0, pg1[0]);
    issue(1, 1, pg1[0]);
    // Before each widening, the half it widens and the three halves after it are
    // committed: wait_group 3 leaves it landed.
    cp_wait<3>();
    q_to_f16<kNW * 128>(s_q, crow, cch, s_qinv, crow); // Q landed: this thread's chunks
    q_to_f16<kNW * 128>(s_q + kQW, crow, cch, s_qinv, crow + kNW);
    widen_blocks<0, 4>(raw(0), s_tile, fr, f4);
    issue(2, 0, pg2[0]);
    int pa = pg2[0], pb = pg3[0]; // entries of tiles it + 2, it + 3 in step it

    float o[8][16];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 16; j++) o[i][j] = 0.f;
    float m[8], l[8];
#pragma unroll
    for (int h = 0; h < 8; h++) {
      m[h] = -INFINITY;
      l[h] = 0.f;
    }

    for (int it = 0; it < n; it++) {
      // B1: H0 of tile it widened by every thread (fenced for the tensor cores), every
      // P.V of tile it - 1 done (H1 and the rope block free).
      fence_proxy_async();
      __syncthreads();
      // P^T of this warpgroup: in the tile's rope block (dead once both S are done).
      const uint32_t s_p = s_tile + 8 * kCB + kPW * w;
      float s[16];
      if (act) qk_part<0, 4>(s, s_tile, s_qw);
      int pc[1];
      entries(btr, tb0 + stride * (it + 4), tend, pc);
      cp_wait<3>();
      widen_blocks<4, 9>(raw(it), s_tile, fr, f4);
      issue(it + 2, 1, pa);
      // B2: H1 of tile it widened by every thread.
      fence_proxy_async();
      __syncthreads();
      const int tk = tb0 + stride * it + ta;
      if (act) {
        qk_part<4, 9>(s, s_tile, s_qw);
        // Online softmax down the token rows (log2 domain; tokens past the segment masked;
        // S scaled back per head row by s_qinv). Its __syncthreads (CTA-wide) orders both
        // warpgroups' S before any P^T store.
        const bool va = tk < tend, vb = tk + 8 < tend;
        uint32_t vm = 0u; // MK: bit 2 h + b: token row ta + 8 b counts for head column h
        if constexpr (MK) vm = n64_row_mask(s_end, w, lane, tk);
        t64_qk_wait(s);
        auto fac = [&](int j, int e) { return sl2 * s_qinv[kNW * w + 8 * j + 2 * t4 + e]; };
        auto store_p = [](uint32_t a, float v) { st_shared_f16(a, v); };
        if constexpr (MK)
          t64_softmax<true, 2>(s, m, l, o,
                               [&](int j, int e, int b) { return ((vm >> (2 * (2 * j + e) + b)) & 1u) != 0u; },
                               fac, store_p, s_red_w, s_p);
        else
          t64_softmax<false, 2>(s, m, l, o, [&](int, int, int b) { return b ? vb : va; }, fac, store_p, s_red_w,
                                s_p);
        fence_proxy_async();
        bar_named(1 + w, 128); // this warpgroup's P^T complete (only it reads it)
#pragma unroll
        for (int i = 0; i < 8; i++) fence_regs(o[i]);
#if CGRT_WG_HAS_WGMMA
        wg_fence();
#endif
        // V blocks 0..3, then 4..7: two commit groups (kernels/mla/t64.cuh t64_pv_tiles).
        auto vcb = [&](int i) { return s_tile + i * kCB; };
        t64_pv_tiles<T64F16, 32, 0, 4>(o, vcb, s_p);
        t64_pv_tiles<T64F16, 32, 4, 4>(o, vcb, s_p);
#if CGRT_WG_HAS_WGMMA
        wg_wait<1>();
#endif
      } else {
        __syncthreads(); // the softmax's barrier
      }
      // B3: both warpgroups' P.V of V blocks 0..3 done; H0 of tile it + 1 widened while
      // the P.V of blocks 4..7 runs.
      __syncthreads();
      if (it + 1 < n) {
        cp_wait<3>();
        widen_blocks<0, 4>(raw(it + 1), s_tile, fr, f4);
      }
      issue(it + 3, 0, pb);
      // Every warpgroup waits (no product in flight in an idle one): ptxas sees the
      // accumulators settled on both paths.
#if CGRT_WG_HAS_WGMMA
      wg_wait<0>();
#endif
#pragma unroll
      for (int i = 0; i < 8; i++) fence_regs(o[i]);
      pa = pb;
      pb = pc[0];
    }
    // O = kv_scale sum p e / l.
    n64_finish<MK>(o, m, l, w, kv_scale, s_red_w, s_stage, s_last, out, lse, part_o, part_lse, counters, r, qh,
                   h_begin, nh, pf, nsplit);
  };

  t64_walk<0, int[1], kThreads>(entries, segment, bt, meta, out, lse, rows, qh, h_begin, h_end, P, mbps, bl, seq_lens,
                                cap, min_tiles, causal, s_meta, s_wsum);
}

} // namespace

// 17 to 64 query rows per CTA over an FP8 e4m3 cache: steps of any number of rows, and
// causal verify blocks whose rows run together (MK above).
extern "C" __global__ void __launch_bounds__(256, 1) cgrt_mla_split_t64_n64_fp8(CGRT_WG_PARAMS) {
  split_t64_n64_fp8<false>(CGRT_WG_ARGS);
}
extern "C" __global__ void __launch_bounds__(256, 1) cgrt_mla_split_t64_n64_fp8_causal(CGRT_WG_PARAMS) {
  split_t64_n64_fp8<true>(CGRT_WG_ARGS);
}
