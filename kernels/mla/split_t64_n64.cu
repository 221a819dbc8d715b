// MLA decode split kernels for 33..64 query rows per CTA, token-major on wgmma (sm_90a):
// cgrt_mla_split_t64_n64, and cgrt_mla_split_t64_n64_causal for causal blocks whose rows
// run together (MK, as cgrt_mla_split_t64_n32_causal). The plan picks them where one CTA
// holds all of a request's query rows (33..64 rows, one head group: the table's g_max 1,
// kernels/mla/kernel_table.h); with two or more head groups per request (128 heads) the
// warp-specialised kernels (kernels/mla/split_m64_ws.cu) are faster. Same parameters, schedule,
// ranges and partial slots as every split kernel (kernels/mla/split.cuh), so the
// schedule and combine kernels and the C reference split_ref (kernels/mla/ref.c) serve
// them; under the counters strategy the last CTA of a row merges with combine_heads.
//
// Two consumer warpgroups (256 threads) side by side: warpgroup w runs the arithmetic of
// cgrt_mla_split_t64_n32 (kernels/mla/split_t64.cu, NH = 32) for query rows 32 w ..
// 32 w + 31 of the CTA's head group:
//   S^T[64 x 32]  = K[64 x 576] . Q_w[32 x 576]^T   (wgmma m64n32k16 x 36)
//   O^T[512 x 32] += V^T[512 x 64] . P_w^T[64 x 32] (wgmma m64n32k16 x 32)
// S^T in 16 and O^T in 128 registers a thread, the softmax down the token rows
// (t64_softmax with NWG = 2). Both warpgroups read the same KV tiles: each 64-token tile
// is loaded from HBM once per 64 query rows (twice with two CTAs of 32 rows).
//
// Shared memory (225584 bytes, 1 CTA per SM): 1 KB alignment slack, Q of both warpgroups
// (2 x 9 column blocks of 32 rows x 128 B = 72 KB; each warpgroup's Q is the n32 layout),
// a ring of two 64-token tiles (2 x 9 column blocks of 64 tokens x 128 B = 144 KB: tile i
// in buffer i & 1), then the small arrays (s_red [2][32 heads][4 warps], the fused
// schedule of up to 256 rows, counters flag, the causal kernel's 64 token ends). P^T of warpgroup w (32 heads x 64 tokens,
// 4 KB, 1024-byte aligned for the 128-byte swizzle) lies in the rope column block (block
// 8) of the tile it belongs to: the P.V products read blocks 0..7 only, and the block is
// dead once both warpgroups' S of the tile completed, which the CTA-wide barrier inside
// the softmax guarantees before the first P^T store. The output staging ([64][kOStr]
// floats) lies over Q and the ring at the end of a segment.
//
// Pipeline: a segment loads Q and tiles 0 and 1 (two commit groups); step it waits for
// tile it (cp.async.wait_group + fence + __syncthreads: every thread's copies landed,
// every warp done with tile it - 1), issues S, then refills tile it - 1's buffer with
// tile it + 1 (one commit group; block-table entries read two tiles ahead), softmax
// (one __syncthreads inside), P^T complete per warpgroup (named barrier 1 + w of 128
// threads), P.V (waited). One tile (72 KB) is in flight while a tile computes.
//
// Without sm_90a (the compute_90 PTX of the fatbin) the two products run on mma.sync +
// ldmatrix over the same layout (t64.cuh), the synchronisation unchanged.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/n64.cuh"
#include "kernels/mla/split.cuh"
#include "kernels/mla/t64.cuh"
#include "kernels/mla/wgmma.cuh"

namespace {

using namespace cgrt_wg;
using namespace cgrt_t64;
using namespace cgrt_n64;

constexpr int kTile = 9 * kCB;      // a 64-token tile: 9 column blocks
constexpr int kRing = 2 * kTile;    // tiles i & 1
constexpr int kSmall = 2 * kNW * 4 * 4 + (2 * kThreads + 2) * 4 + (kThreads / 32) * 4 + 4 + 4 + 2 * kNW * 4;
static_assert((2 * kNW * 4 * 4 + (2 * kThreads + 2) * 4 + (kThreads / 32) * 4 + 4 + 4) % 16 == 0, "s_end 16-byte aligned");
constexpr int kBytes = 1024 + 2 * kQW + kRing + kSmall;
constexpr int kStageBytes = 2 * kNW * kOStr * 4;
static_assert(kBytes == CGRT_MLA_T64_N64_SMEM, "the kernel table passes CGRT_MLA_T64_N64_SMEM");
static_assert(kBytes <= 227 * 1024, "one CTA per SM");
static_assert(kStageBytes <= 2 * kQW + kRing, "the output staging fits over Q and the ring");
static_assert(2 * kPW <= kCB && (kCB % 1024) == 0 && (kPW % 1024) == 0, "P^T of both warpgroups in a rope block");

// MK (the _causal kernel, causal verify rows of a block run together): each "row" is a
// request whose qh query rows are mk block rows of qh / mk heads; query row h sees
// cgrt__mla_row_len(len, cap, h / (qh / mk), mk, 1) tokens, len being the request's.
template <bool MK>
__device__ __forceinline__ void split_t64_n64(const bf16 *__restrict__ q, const bf16 *__restrict__ kv,
                                              const int *__restrict__ bt, const int *__restrict__ meta,
                                              bf16 *__restrict__ out, float *__restrict__ lse,
                                              float *__restrict__ part_o, float *__restrict__ part_lse,
                                              unsigned *__restrict__ counters, int rows, int qh, int hg, int P,
                                              int mbps, int ps, int bl, float scale, const int *__restrict__ seq_lens,
                                              int cap, int min_tiles, int causal, int mk, float kv_scale) {
  (void)kv_scale; // read by the FP8 kernels only
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_ring = s_q + 2 * kQW;
  float *s_stage = reinterpret_cast<float *>(sm);                               // [64][kOStr]
  float *s_red = reinterpret_cast<float *>(sm + 2 * kQW + kRing);              // [2][32 heads][4 warps]
  int *s_meta = reinterpret_cast<int *>(s_red + 2 * kNW * 4);                  // 2 kThreads + 2
  int *s_wsum = s_meta + 2 * kThreads + 2;                                     // kThreads / 32
  int *s_last = s_wsum + kThreads / 32;
  int *s_end = reinterpret_cast<int *>(sm + 2 * kQW + kRing + kSmall - 2 * kNW * 4); // MK: [64], 16-byte aligned

  // Programmatic dependent launch: nothing above reads what the kernel before writes;
  // with early reads t64_walk waits after its reads of seq_lens and the block table.
  if (!t64_early<0>(causal, seq_lens)) cgrt_mla::pdl_wait();

  const int tid = threadIdx.x, lane = tid & 31;
  // The warpgroup, warp-uniform to ptxas (a branch or address on a value it takes for
  // divergent can serialize the wgmma pipeline: docs/mla_decode.md).
  const int w = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int wq = (tid >> 5) & 3, gq = lane >> 2;
  const int g = blockIdx.x;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const int nh = h_end - h_begin; // 1..64
  const float sl2 = scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;
  float *s_red_w = s_red + kNW * 4 * w;
  const uint32_t s_qw = s_q + kQW * w;

  // Copy roles: thread tid moves chunk tid & 7 of every column block for token rows
  // (tid >> 3) and (tid >> 3) + 32 of a tile (and of Q: query rows (tid >> 3) + 32 x,
  // the rows of warpgroup x).
  const int crow = tid >> 3, cch = tid & 7;
  // Accumulator roles (m64n32 per warpgroup): token rows ta and ta + 8 of S^T.
  const int ta = 16 * wq + gq;

  // Block-table entries (row btr) of this thread's 2 copy rows of the tile that starts at
  // token tb (0 at or past bound): tiles 0-3 before the prologue, then tile it + 3 in
  // step it, so that no copy waits for its entry.
  auto entries = [&](const int *btr, int tb, int bound, int (&pg)[2]) {
    t64_entries(btr, tb, bound, crow, ps_shift, pg);
  };

  // One segment of row r (kernels/mla/t64.cuh t64_walk): its n tiles start at tokens
  // tb0, tb0 + stride, ..., its tokens end at tend; its partial goes to slot r + p
  // (nsplit > 1) or straight to out (nsplit == 1).
  auto segment = [&](int r, int tb0, int stride, int tend, int len, int n, int pf, int nsplit, int (&pg0)[2],
                     int (&pg1)[2], int (&pga)[2], int (&pgb)[2]) {
    const int *btr = bt + (long long)(r / bl) * mbps;
    // Tile i (entries pg) into buffer i & 1, one commit group (empty past the segment),
    // tokens at or past tend read as 0 (no bits of the cache past a length reach S or V).
    auto load_tile = [&](int i, const int (&pg)[2]) {
      if (i < n) {
        const uint32_t dst = s_ring + (i & 1) * kTile + swz(crow, cch);
        const int tb = tb0 + stride * i + crow;
#pragma unroll
        for (int q2 = 0; q2 < 2; q2++) {
          const int tok = tb + 32 * q2;
          const bool ok = tok < tend;
          const bf16 *src = kv + ((long long)pg[q2] * ps + (tok & (ps - 1))) * D + cch * 8;
#pragma unroll
          for (int cb = 0; cb < 9; cb++)
            cp_async16(dst + q2 * 32 * 128 + cb * kCB, ok ? src + cb * 64 : kv, ok ? 16 : 0);
        }
      }
      cp_commit();
    };
    // Q of the head group (rows past nh zero), in the first commit group.
    n64_load_q(q, s_q, r, qh, h_begin, nh, crow, cch);
    // MK: the token end of each query row of the CTA (per-row lengths), in s_end.
    if constexpr (MK) n64_row_ends(s_end, tid, qh, mk, h_begin, tend, len, cap);
    (void)len;
    load_tile(0, pg0);
    load_tile(1, pg1);

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
      // Tile it landed for every thread (two groups committed at it = 0, one after), and
      // every warp is done with tile it - 1 (its buffer is refilled below).
      if (it == 0) cp_wait<1>();
      else cp_wait<0>();
      fence_proxy_async();
      __syncthreads();
      const uint32_t tile = s_ring + (it & 1) * kTile;
      auto kb = [&](int cb) -> uint32_t { return tile + cb * kCB; };
      // P^T of this warpgroup: in the tile's rope block (dead once both S are done).
      const uint32_t s_p = tile + 8 * kCB + kPW * w;
      float s[16];
      t64_qk_issue<32>(s, kb, s_qw);
      if (it > 0) {
        load_tile(it + 1, pga);
#pragma unroll
        for (int q2 = 0; q2 < 2; q2++) pga[q2] = pgb[q2];
        entries(btr, tb0 + stride * (it + 3), tend, pgb);
      }
      // Online softmax down the token rows (log2 domain; tokens past the segment masked).
      // Its __syncthreads (CTA-wide) orders both warpgroups' S before any P^T store.
      const int tk = tb0 + stride * it + ta;
      const bool va = tk < tend, vb = tk + 8 < tend;
      // MK: bit 2 h + b: token row ta + 8 b counts for head column h.
      uint32_t vm = 0u;
      if constexpr (MK) vm = n64_row_mask(s_end, w, lane, tk);
      t64_qk_wait(s);
      if constexpr (MK)
        t64_softmax<true, 2>(s, m, l, o,
                                [&](int j, int e, int b) { return ((vm >> (2 * (2 * j + e) + b)) & 1u) != 0u; },
                                [&](int, int) { return sl2; }, [](uint32_t a, float v) { st_shared_u16(a, v); },
                                s_red_w, s_p);
      else
        t64_softmax<false, 2>(s, m, l, o, [&](int, int, int b) { return b ? vb : va; },
                                 [&](int, int) { return sl2; }, [](uint32_t a, float v) { st_shared_u16(a, v); },
                                 s_red_w, s_p);
      fence_proxy_async();
      bar_named(1 + w, 128); // this warpgroup's P^T complete (only it reads it)
      t64_pv<32>(o, kb, s_p);
    }
    n64_finish<MK>(o, m, l, w, 1.f, s_red_w, s_stage, s_last, out, lse, part_o, part_lse, counters, r, qh, h_begin, nh,
                   pf, nsplit);
  };

  t64_walk<0, int[2], kThreads>(entries, segment, bt, meta, out, lse, rows, qh, h_begin, h_end, P, mbps, bl, seq_lens,
                                cap, min_tiles, causal, s_meta, s_wsum);
}

} // namespace

// 33 to 64 query rows per CTA, one head group per request: steps of any number of rows,
// and causal verify blocks whose rows run together (MK above).
extern "C" __global__ void __launch_bounds__(256, 1) cgrt_mla_split_t64_n64(CGRT_WG_PARAMS) {
  split_t64_n64<false>(CGRT_WG_ARGS);
}
extern "C" __global__ void __launch_bounds__(256, 1) cgrt_mla_split_t64_n64_causal(CGRT_WG_PARAMS) {
  split_t64_n64<true>(CGRT_WG_ARGS);
}
