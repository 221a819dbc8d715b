// MLA decode split kernels over an FP8 e4m3 latent cache (cgrt_mla_options.kv_dtype
// CGRT_MLA_KV_FP8_E4M3; value = e4m3 x kv_scale), up to 16 query heads per CTA:
// cgrt_mla_split_t64_fp8, and cgrt_mla_split_t64_row1_fp8 for steps of one row (ROW1).
// The schedule, ranges, tiles, products (kernels/mla/t64.cuh), softmax, partials and
// merges are those of cgrt_mla_split_t64 / _row1 (kernels/mla/split_t64.cu); the KV
// pipeline differs. Host side: kernels/mla/plan.c; design: docs/mla_decode.md.
//
// Pipeline (one warpgroup, 128 threads). A 64-token tile is 3 sub-stages of 64 tokens x
// 192 e4m3 bytes (12 KB):
//   1. cp.async moves each thread's six 16-byte pieces of a sub-stage (token rows
//      tid / 4 and tid / 4 + 32, bytes 16 (tid % 4) + 64 b, b = 0..2, of the row's
//      192-byte slice) into a ring of kF8Slots = 5 sub-stages (60 KB in flight: the bf16
//      kernel's 5 sub-stages of 64 tokens at half the bytes);
//   2. the same thread widens its own pieces (no barrier: a thread reads back only what
//      it copied; the six loads first, then one cvt e4m3x2 -> f16x2 per pair, exact) into
//      one of two f16 tiles (9 column blocks of 64 tokens x 128 bytes, the 128-byte
//      swizzle of kernels/mla/wgmma.cuh, 72 KB each), and refills the freed slot at once
//      (sub-stage k + 5);
//   3. the products of tile i read f16 tile i & 1 while the threads widen tile i + 1 into
//      the other: two sub-stages while S = K . Q^T runs on the tensor cores, the third
//      while O += V^T . P^T runs.
// The products run in f16 (wgmma f32.f16.f16; f16, not bf16, because widening to bf16
// costs a cvt to f16, two to f32 and a pack per pair: measured 94.4 against 76.8 us at
// (32, 16, 8192), docs/mla_decode.md). Q lands as bf16 and each head row is scaled in
// place into f16 by a power of two, 2^(14 - e) with 2^e <= max |q| < 2^(e + 1): no value
// overflows, values down to 2^-29 of the head's largest stay exact and smaller ones round
// by at most 2^-39 of it; S is scaled back per head in the softmax (s_qinv). P is stored in f16 (values in [0, 1]).
// kv_scale is folded into the softmax scale (S = kv_scale q . e) and into the output
// (O = kv_scale sum p e / l). 1 CTA per SM (CGRT_MLA_T64_FP8_SMEM bytes of shared memory).
// Without sm_90a (the compute_90 PTX) the products run on f16 mma.sync over the same layout.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/fp8.cuh"
#include "kernels/mla/split.cuh"
#include "kernels/mla/t64.cuh"
#include "kernels/mla/wgmma.cuh"

namespace {

using namespace cgrt_wg;
using namespace cgrt_t64;
using namespace cgrt_fp8;

constexpr int kTile = 9 * kCB;   // an f16 tile (73728 bytes)
constexpr int kF8Sub = 64 * 192; // an e4m3 sub-stage: 64 tokens x 192 bytes
constexpr int kF8Slots = 5;      // e4m3 ring: sub-stages in flight
constexpr int kSmall = 64 * 4 + (2 * NT + 2) * 4 + (NT / 32) * 4 + 4 + 16 * 4;
constexpr int kBytes = 1024 + 9 * kQ16 + 2 * kTile + kF8Slots * kF8Sub + kP16 + kSmall;
static_assert(kF8Sub == 6 * NT * 16, "six 16-byte pieces per thread and sub-stage");
static_assert(kOStageBytes + kMergeBatch * 16 * DV * 4 <= 2 * kTile + kF8Slots * kF8Sub,
              "the output staging and the merge buffers fit over the tiles and the ring");
static_assert(kBytes == CGRT_MLA_T64_FP8_SMEM, "the kernel table passes CGRT_MLA_T64_FP8_SMEM");
static_assert(kBytes <= 227 * 1024, "one CTA per SM");

// S^T = K . Q^T of one tile as t64_qk_issue (kernels/mla/t64.cuh), in f16.
template <class KB>
__device__ __forceinline__ void qk_issue(float (&s)[8], KB kb, uint32_t q_s) {
#if CGRT_WG_HAS_WGMMA
  wg_fence();
#pragma unroll
  for (int cb = 0; cb < 9; cb++) {
    const uint64_t da = make_desc(kb(cb), 16, 1024), db = make_desc(q_s + cb * kQ16, 16, 1024);
#pragma unroll
    for (int k4 = 0; k4 < 4; k4++) wgmma_f16_m64n16<0>(s, da + 2 * k4, db + 2 * k4, cb + k4 > 0);
  }
  wg_commit();
  fence_regs(s);
#else
#pragma unroll
  for (int i = 0; i < 8; i++) s[i] = 0.f;
  const int lane = threadIdx.x & 31, wi = (threadIdx.x >> 5) & 3;
  const int ar = 16 * wi + (lane & 15), ac = lane >> 4;
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
#pragma unroll 4
  for (int ks = 0; ks < D / 16; ks++) {
    const int cb = ks >> 2, c0 = (ks & 3) * 2;
    uint32_t a4[4], b0, b1, b2, b3;
    ldsm_x4(kb(cb) + swz(ar, c0 + ac), a4[0], a4[1], a4[2], a4[3]);
    ldsm_x4(q_s + cb * kQ16 + swz(br, c0 + bc), b0, b1, b2, b3);
    mma16816_f16(s, a4, b0, b1);
    mma16816_f16(s + 4, a4, b2, b3);
  }
#endif
}

// O^T += V^T . P^T of one tile as t64_pv, in two halves: t64_pv_issue starts it (wgmma:
// one commit group; o untouched until t64_pv_wait), so that the threads widen the next
// tile's sub-stage meanwhile. The fallback computes it all in t64_pv_issue.
template <class KB>
__device__ __forceinline__ void t64_pv_issue(float (&o)[8][8], KB kb, uint32_t p_s) {
  t64_pv_run<T64F16, 0>(o, kb, p_s);
}
__device__ __forceinline__ void t64_pv_wait(float (&o)[8][8]) {
#if CGRT_WG_HAS_WGMMA
  wg_wait<0>();
#endif
#pragma unroll
  for (int i = 0; i < 8; i++) fence_regs(o[i]);
}

// ROW1 = 1 (cgrt_mla_split_t64_row1_fp8: steps of one row): the tiles of t64_walk's ROW1
// (kernels/mla/t64.cuh), as cgrt_mla_split_t64_row1.
template <int ROW1>
__device__ __forceinline__ void split_t64_fp8(const bf16 *__restrict__ q, const bf16 *__restrict__ kv,
                                              const int *__restrict__ bt, const int *__restrict__ meta,
                                              bf16 *__restrict__ out, float *__restrict__ lse,
                                              float *__restrict__ part_o, float *__restrict__ part_lse,
                                              unsigned *__restrict__ counters, int rows, int qh, int hg, int P,
                                              int mbps, int ps, int bl, float scale,
                                              const int *__restrict__ seq_lens, int cap, int min_tiles, int causal,
                                              int mk, float kv_scale) {
  (void)mk; // 0: one row per "row" (kernels/mla/plan.c runs blocks together on kernels of 17+ rows only)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_tile = s_q + 9 * kQ16;         // two f16 tiles
  const uint32_t s_f8 = s_tile + 2 * kTile;       // the e4m3 ring
  const uint32_t s_p = s_f8 + kF8Slots * kF8Sub;
  float *s_stage = reinterpret_cast<float *>(sm + 9 * kQ16); // [16][kOStr], over the tiles
  float *s_red = reinterpret_cast<float *>(sm + 9 * kQ16 + 2 * kTile + kF8Slots * kF8Sub + kP16); // [16][4]
  int *s_meta = reinterpret_cast<int *>(s_red + 64);                                                 // 2 NT + 2
  int *s_wsum = s_meta + 2 * NT + 2;                                                                 // NT / 32
  int *s_last = s_wsum + NT / 32;
  float *s_qinv = reinterpret_cast<float *>(s_last + 1); // [16]: 1 / the scale of Q of each head

  // Programmatic dependent launch: nothing above reads what the kernel before writes;
  // with early reads t64_walk waits after its reads of seq_lens and the block table.
  if (!t64_early<ROW1>(causal, seq_lens)) cgrt_mla::pdl_wait();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, t4 = lane & 3;
  const int g = blockIdx.x;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const int nh = h_end - h_begin; // 1..16
  const float sl2 = scale * kv_scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;
  const unsigned char *kv8 = reinterpret_cast<const unsigned char *>(kv);

  // Q copy roles: thread tid moves chunk tid & 7 of every column block of head row tid >> 3.
  const int crow = tid >> 3, cch = tid & 7;
  // e4m3 roles: token rows fr and fr + 32 of a tile, 16-byte pieces f4 + 4 b of a row's
  // 192-byte slice (column blocks 3 c + b of sub-stage c, chunks 2 f4 and 2 f4 + 1).
  const int fr = tid >> 2, f4 = tid & 3;
  // Accumulator roles (m64n16): token rows ta = 16 warp + gq and ta + 8 of S^T; heads
  // t64_head_of (kernels/mla/t64.cuh) of S^T and O^T; dims 64 i + 16 warp + gq (+ 8) of O^T.
  const int ta = 16 * warp + gq;

  // Block-table entries (row btr) of this thread's 2 e4m3 rows of the tile that starts at
  // token tb (0 at or past bound), read a step ahead of the copies that use them.
  auto entries = [&](const int *btr, int tb, int bound, int (&pg)[2]) {
    t64_entries(btr, tb, bound, fr, ps_shift, pg);
  };

  // One segment of row r: its n tiles start at tokens tb0, tb0 + stride, ..., its tokens
  // end at tend; its partial goes to slot r + p (nsplit > 1: one of the nsplit partials
  // in slots r + pf ..) or straight to out (nsplit == 1). pg0 .. pg3: the entries of
  // tiles 0-3.
  auto segment = [&](int r, int tb0, int stride, int tend, int /*len*/, int n, int pf, int nsplit, int (&pg0)[2],
                     int (&pg1)[2], int (&pg2)[2], int (&pg3)[2]) {
    const int *btr = bt + (long long)(r / bl) * mbps;
    // Sub-stage k = 3 i + c (bytes 192 c .. 192 c + 191 of the token rows of tile i,
    // entries pg) into e4m3 slot k % kF8Slots; one commit group each (empty past the
    // segment), so that wait_group counts sub-stages. Tokens at or past tend read as 0.
    auto issue = [&](int k, const int (&pg)[2]) {
      const int i = k / 3, c = k - 3 * i;
      if (i < n) {
        const uint32_t dst = s_f8 + (k % kF8Slots) * kF8Sub + tid * 16;
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
          const int tok = tb0 + stride * i + fr + 32 * rr;
          const bool ok = tok < tend;
          const unsigned char *src = kv8 + ((long long)pg[rr] * ps + (tok & (ps - 1))) * D + c * 192 + f4 * 16;
#pragma unroll
          for (int b = 0; b < 3; b++) cp_async16(dst + (3 * rr + b) * (NT * 16), ok ? src + 64 * b : kv8, ok ? 16 : 0);
        }
      }
      cp_commit();
    };
    // Sub-stage k (landed: this thread's pieces) widened to f16 into the tile buffer of
    // tile k / 3.
    auto widen = [&](int k) {
      const int i = k / 3, c = k - 3 * i;
      const uint32_t src = s_f8 + (k % kF8Slots) * kF8Sub + tid * 16;
      const uint32_t dst = s_tile + (i & 1) * kTile + 3 * c * kCB;
      // The six pieces loaded first (independent), then widened and stored.
      uint4 v[6];
#pragma unroll
      for (int j = 0; j < 6; j++) v[j] = ld_shared_v4(src + j * (NT * 16));
#pragma unroll
      for (int j = 0; j < 6; j++) {
        const int rr = j / 3, b = j - 3 * rr;
        uint32_t w[8];
        e4m3x4_to_f16x4(v[j].x, w[0], w[1]);
        e4m3x4_to_f16x4(v[j].y, w[2], w[3]);
        e4m3x4_to_f16x4(v[j].z, w[4], w[5]);
        e4m3x4_to_f16x4(v[j].w, w[6], w[7]);
        const int row = fr + 32 * rr;
        st_shared_v4(dst + b * kCB + swz(row, 2 * f4), w[0], w[1], w[2], w[3]);
        st_shared_v4(dst + b * kCB + swz(row, 2 * f4 + 1), w[4], w[5], w[6], w[7]);
      }
    };

    {
      // Q of the head group (rows past nh zero), in the first commit group.
      const bf16 *qr = q + ((long long)r * qh + h_begin) * D;
      const bool ok = crow < nh;
#pragma unroll
      for (int cb = 0; cb < 9; cb++)
        cp_async16(s_q + cb * kQ16 + swz(crow, cch), ok ? qr + (long long)crow * D + cb * 64 + cch * 8 : q,
                   ok ? 16 : 0);
    }
    // The ring at once, then tile 0 widened into tile buffer 0; each widened slot is
    // refilled at once. Before widen(k), sub-stages 0 .. k + 4 are committed: wait_group 4
    // leaves sub-stage k landed.
    issue(0, pg0);
    issue(1, pg0);
    issue(2, pg0);
    issue(3, pg1);
    issue(4, pg1);
    cp_wait<4>();
    widen(0);
    q_to_f16<kQ16>(s_q, crow, cch, s_qinv, crow); // Q landed: this thread's chunks
    issue(5, pg1);
    cp_wait<4>();
    widen(1);
    issue(6, pg2);
    cp_wait<4>();
    widen(2);
    issue(7, pg2);
    int pa[2] = {pg2[0], pg2[1]}, pb[2] = {pg3[0], pg3[1]}; // entries of tiles it + 2, it + 3 in step it

    float o[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) o[i][j] = 0.f;
    float m[4], l[4];
#pragma unroll
    for (int h = 0; h < 4; h++) {
      m[h] = -INFINITY;
      l[h] = 0.f;
    }

    for (int it = 0; it < n; it++) {
      // Tile it is in its buffer (widened by every thread, fenced for the tensor cores),
      // and every warp is done with tile it - 1 (its buffer is widened into below).
      fence_proxy_async();
      __syncthreads();
      const uint32_t tile = s_tile + (it & 1) * kTile;
      auto kb = [&](int cb) -> uint32_t { return tile + cb * kCB; };
      float s[8];
      qk_issue(s, kb, s_q);
      int pc[2];
      entries(btr, tb0 + stride * (it + 4), tend, pc);
      // Sub-stages 3 it + 3 .. 3 it + 5 (tile it + 1) widened while the products run;
      // sub-stages 3 it + 8 .. 3 it + 10 (the last of tile it + 2, the first two of tile
      // it + 3) issued into the freed slots.
      const bool more = it + 1 < n;
      if (more) {
        cp_wait<4>();
        widen(3 * it + 3);
      }
      issue(3 * it + 8, pa);
      if (more) {
        cp_wait<4>();
        widen(3 * it + 4);
      }
      issue(3 * it + 9, pb);
      t64_qk_wait(s);

      // Online softmax down the token rows (log2 domain; tokens past the segment masked;
      // S scaled back per head by s_qinv).
      const int tk = tb0 + stride * it + ta;
      const bool va = tk < tend, vb = tk + 8 < tend;
      t64_softmax(s, m, l, o, [&](int, int, int b) { return b ? vb : va; },
                  [&](int j, int e) { return sl2 * s_qinv[8 * j + 2 * t4 + e]; },
                  [](uint32_t a, float v) { st_shared_f16(a, v); }, s_red, s_p);
      fence_proxy_async();
      __syncthreads(); // P^T complete
      t64_pv_issue(o, kb, s_p);
      if (more) {
        cp_wait<4>();
        widen(3 * it + 5);
      }
      issue(3 * it + 10, pb);
      t64_pv_wait(o);
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        pa[rr] = pb[rr];
        pb[rr] = pc[rr];
      }
    }
    // O = kv_scale sum p e / l.
    t64_finish(o, m, l, kv_scale, s_red, s_stage, reinterpret_cast<float *>(sm + 9 * kQ16 + kOStageBytes), s_last,
               out, lse, part_o, part_lse, counters, r, qh, h_begin, nh, pf, nsplit);
  };

  t64_walk<ROW1, int[2]>(entries, segment, bt, meta, out, lse, rows, qh, h_begin, h_end, P, mbps, bl, seq_lens, cap,
                         min_tiles, causal, s_meta, s_wsum);
}

} // namespace

// Up to 16 query heads per CTA over an FP8 e4m3 cache: steps of any number of rows.
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_t64_fp8(CGRT_WG_PARAMS) {
  split_t64_fp8<0>(CGRT_WG_ARGS);
}
// Steps of one row (ROW1 above).
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_t64_row1_fp8(CGRT_WG_PARAMS) {
  split_t64_fp8<1>(CGRT_WG_ARGS);
}
