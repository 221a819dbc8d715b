// MLA decode (DeepSeek-V2/V3 latent attention), split-KV with device-side scheduling.
// Host side: kernels/mla_plan.c. C references: kernels/mla_decode_ref.c (same names,
// same parameters, same semantics over the whole grid).
//
// Kernels (one decode step = [schedule], split, [combine]; short batches, rows <= the
// split block size, schedule inside the split kernel):
//   cgrt_mla_schedule   1 CTA: expands per-request seq_lens to rows, clamps them, and
//                       writes the per-row tile prefix sums (meta) from which every
//                       other kernel derives its balanced share of the KV tiles.
//   cgrt_mla_split_m16  split-KV attention, 16 query heads (rows of mma) per CTA
//                       (five 16-token stages); _auto (the default from the third
//                       to the fifth session) picks per CTA between that and two 32-token stages from
//                       its range length; _ts32 and _s3 (3 CTAs/SM) for A/B runs.
//                       _deep: one CTA per SM, four 32-token stages (steps of one row,
//                       CGRT_MLA_DEFAULT_DEEP_ROWS); _auto_early / _deep_early: the fused
//                       schedule before the PDL wait (options.programmatic_launch = 2);
//                       _chunk / _nobta: the previous KV copies / block-table reads (A/B).
//   cgrt_mla_split_m64  same with 64 query heads per CTA (16 warps).
//   (The default split kernels of multi-row steps are in kernels/mla_decode_t64.cu, up to
//   16 heads per CTA, and kernels/mla_decode_wgmma.cu, 64 heads. The split kernels here
//   serve steps of one row (_deep) and A/B runs, e.g. CGRT_MLA_SPLIT=auto.)
//   cgrt_mla_combine    merges the partial results of the rows that were split
//                       (_nospec: without the one-row loads before the metadata; A/B).
//   cgrt_mla_noop_split / _combine  return at once (CGRT_MLA_NOOP, timing floor only).
//
// Work split: the T = sum_r ceil(len_r / 32) KV tiles of the batch are cut into Pe equal
// ranges (P fixed at plan creation from the SM count and occupancy; Pe <= P in use per
// step, rounded down to a multiple of rows where that keeps ranges inside rows, see
// CGRT_MLA_ALIGN_MAX_TILES); CTA (g, p) runs range p for head group g. A row touched by
// n > 1 ranges leaves n partials in slots r + p (unique: ranges are monotone in rows),
// so the workspace holds rows + P slots.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"

typedef __nv_bfloat16 bf16;

namespace {

using cgrt_mla::combine_heads;
using cgrt_mla::cp_async16;
using cgrt_mla::cp_commit;
using cgrt_mla::cp_wait;
using cgrt_mla::ldsm_x4;
using cgrt_mla::ldsm_x4_t;
using cgrt_mla::mma16816;
using cgrt_mla::ex2;
using cgrt_mla::pack_bf16;
using cgrt_mla::part_of;
using cgrt_mla::store_bf16x4;
using cgrt_mla::warp_accum;
using cgrt_mla::warp_max_lse;

constexpr int D = CGRT_MLA_D;     // 576
constexpr int DV = CGRT_MLA_DV;   // 512
constexpr int TN = CGRT_MLA_TILE; // 32 tokens per tile
constexpr int KSTR = 584;         // smem row stride in elements (1168 B: ldmatrix conflict-free)
constexpr int CHUNKS = D / 8;     // 16-byte chunks per token

__device__ __forceinline__ unsigned smem_u32(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void bar_named(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// R row groups of 16 query heads; each row group is 4 warps that split the 576-wide
// dot products (144 each, Q fragments held in registers) and the 512 output columns
// (128 each). S partials are summed through shared memory, every warp then holds the
// whole 16 x TS score tile in mma-accumulator layout and reuses it as the A operand.
// The pipeline runs in stages of TS tokens (16 or 32); the schedule's ranges are in
// 32-token tiles, a range's last stage stops at the row's length.
template <int V>
struct IC {
  static constexpr int value = V;
};

// ALT = 1: a CTA whose range holds at most alt_max 32-token tiles runs the two-stage
// 32-token pipeline (less fill and restart cost per range), longer ranges the
// STAGES x TS pipeline; the choice is uniform per CTA. Dynamic shared memory must hold
// the larger of the two layouts.
// PROF = 1 (cgrt_mla_split_m16_prof, CGRT_MLA_SPLIT=prof with CGRT_MLA_NOOP=2, A/B
// diagnostics only): thread 0 of each CTA stamps %globaltimer at entry, after the
// schedule, when the first block-table entry is in, after the first stage's copies are
// issued, when it has landed, after its scores, after the last stage and after the
// stores, and writes the stamps, %smid and whether it had work to out as 16 x u64 per
// CTA (the no-op combine leaves them there). A one-stage range runs its stage twice
// (stamps 8 and 9: scores and end of the second pass), so the second pass shows the
// stage's cost with warm instruction caches; its results are wrong (diagnostics only).
// WROW = 1 (the default since the fourth session): KV stages copied one token row per
// warp; WROW = 0 (cgrt_mla_split_m16_chunk, CGRT_MLA_COPY=chunk, A/B only): the previous
// copies, 16-byte chunk i of the stage to thread i % NT (a division and selects each).
// BTA = 1 (default since the fourth session): block-table entries read one stage ahead
// of the copies; BTA = 0 (cgrt_mla_split_m16_nobta, CGRT_MLA_BTA=0, A/B only): read by
// the stage's own copy issue.
// EARLY = 1 (cgrt_mla_split_m16_auto_early / _deep_early; cgrt_mla_options
// .programmatic_launch = 2): with the fused schedule, the kernel reads seq_lens and the
// first block-table entry before griddepcontrol.wait, so that under programmatic
// dependent launch this prologue overlaps the kernel before it. Everything that kernel
// may write (q, kv, the workspace and meta, out, lse) is read or written after the wait.
template <int R, int STAGES0, int TS0, int ALT, int PROF = 0, int WROW = 1, int BTA = 1, int EARLY = 0>
__device__ __forceinline__ void mla_split(const bf16 *__restrict__ q, const bf16 *__restrict__ kv,
                                          const int *__restrict__ bt, const int *__restrict__ meta,
                                          bf16 *__restrict__ out, float *__restrict__ lse,
                                          float *__restrict__ part_o, float *__restrict__ part_lse,
                                          unsigned *__restrict__ counters, int rows, int qh, int hg,
                                          int P, int mbps, int ps, int bl, float scale,
                                          const int *__restrict__ seq_lens, int cap, int min_tiles,
                                          int alt_max) {
  static_assert(TS0 == 16 || TS0 == 32, "stage of 16 or 32 tokens");
  constexpr int NT = 128 * R;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *skv = reinterpret_cast<bf16 *>(smem);
  __shared__ int s_last;

  // Programmatic dependent launch: nothing above reads what the kernel before writes.
  // EARLY with the fused schedule waits after the schedule instead (below).
  const bool early = EARLY && seq_lens != nullptr;
  if (!early) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  }
  unsigned long long stamp[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  auto mark = [&](int k) {
    if (PROF && threadIdx.x == 0) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(stamp[k]));
  };
  mark(0);
  if (PROF && threadIdx.x == 0) stamp[12] = clock64();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wr = warp >> 2, wc = warp & 3;
  const int gq = lane >> 2, t4 = lane & 3;
  const int G = gridDim.x;
  // Fused schedule (seq_lens != nullptr, rows <= NT): every CTA derives the per-row
  // lengths and tile prefix sums itself, as cgrt_mla_schedule would, in shared memory;
  // CTA (0, 0) also writes them to meta for the combine kernel. Saves a launch and a
  // dependent kernel boundary for short batches.
  __shared__ int s_meta[2 * NT + 2];
  __shared__ int s_wsum[NT / 32];
  const int *mb = cgrt_mla::fused_schedule<NT>(s_meta, s_wsum, seq_lens, meta, rows, bl, cap, P, min_tiles, !early);
  mark(1);
  const int g = blockIdx.x, p = blockIdx.y;
  if (early) {
    // The first block-table entry of this CTA's range into L1 while the kernel before
    // runs (seq_lens and block_table are not written by it: the option's contract).
    const int T0 = mb[2 * rows], Pe0 = mb[2 * rows + 1];
    if (T0 > 0 && p < Pe0) {
      const int t0 = (int)((long long)p * T0 / Pe0);
      const int r0 = cgrt_mla::first_row(mb + rows, rows, t0);
      const int tok = (t0 - mb[rows + r0]) * TN;
      const int *e = bt + (long long)(r0 / bl) * mbps + (tok >> (__ffs(ps) - 1));
      asm volatile("prefetch.global.L1 [%0];" ::"l"(e));
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
    cgrt_mla::publish_meta<NT>(mb, meta, rows);
  }
  const int *row_len = mb;
  const int *ts = mb + rows;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const float sl2 = scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;

  const cgrt_mla::CtaRange cr = cgrt_mla::cta_range<NT>(mb, rows, out, lse, qh, h_begin, h_end, p, P);
  const int T = cr.T, Pe = cr.Pe;
  const bool work = cr.work;
  if (!PROF && !work) return;
  const int b0 = cr.b0, b1 = cr.b1, lo = cr.lo;

  const int hrow0 = h_begin + wr * 16 + gq, hrow1 = hrow0 + 8;
  const bool v0 = hrow0 < h_end, v1 = hrow1 < h_end;

  // The range's segments (one per row it touches) through a STAGES x TS pipeline.
  auto run = [&](auto stages_c, auto ts_c) {
  constexpr int STAGES = decltype(stages_c)::value;
  constexpr int TS = decltype(ts_c)::value;
  constexpr int NB = TS / 8;  // n8 blocks of scores per stage
  constexpr int KK = TS / 16; // k16 steps of P.V per stage
  constexpr int SRED = 16 * TS; // floats of one warp's S partial
  float *sred = reinterpret_cast<float *>(smem + (size_t)STAGES * TS * KSTR * sizeof(bf16));
  int par = 0;

  for (int r = lo, t = b0; t < b1; r++) {
    cgrt_mla::Segment sg;
    if (!cgrt_mla::next_segment(ts, row_len, r, t, b1, T, Pe, sg)) continue;
    const int ja = sg.ja, jb = sg.jb, len = sg.len, pf = sg.pf, nsplit = sg.nsplit;
    // Stages [sa, sa + n) of TS tokens: from the first token of tile ja to the last of
    // tile jb - 1 that lies below len (tile ja holds at least one such token).
    const int sa = ja * (TN / TS);
    const int n = (min(jb * TN, len) + TS - 1) / TS - sa;
    const int *btr = bt + (long long)(r / bl) * mbps;

    // A 32-token stage (page size >= 16) spans at most two pages: tokens 0-15 lie in
    // the page of tb, tokens 16-31 in the page of tb + 16; a 16-token stage lies in one.
    // The block-table entries are read up front so that the copies do not wait on one
    // lookup each.
    // The entries are read one stage ahead of the copies that use them (bt_of below), so
    // that issuing a stage does not wait for a dependent global load: on the H200 that
    // wait was ~15% of the warps' stall samples at (32,16,8192) (NOTES.md, seventh pass).
    auto bt_of = [&](int j, long long &pg0, long long &pg1) {
      const int tb = j * TS;
      pg0 = __ldg(btr + (tb >> ps_shift));
      pg1 = TS > 16 && tb + 16 < len ? (long long)__ldg(btr + ((tb + 16) >> ps_shift)) : pg0;
    };
    auto load_tile = [&](int j, int stage, long long pg0, long long pg1) {
      bf16 *dst = skv + stage * TS * KSTR;
      const int tb = j * TS;
      const bf16 *base0 = kv + (pg0 * ps + (tb & (ps - 1))) * D;
      const bf16 *base1 = base0;
      if (TS > 16) base1 = kv + (pg1 * ps + ((tb + 16) & (ps - 1))) * D;
      if (PROF && stamp[2] == 0) {
        if (threadIdx.x == 0 && base0 == nullptr) stamp[11] = 1; // waits for the entry
        mark(2);
      }
      if (WROW) {
        // Warp w copies token rows w, w + NW, ...: the 72 chunks of a row as lane, lane +
        // 32 and (lanes < 8) lane + 64, so a row costs one address and three copies with
        // immediate offsets instead of a division and a select per chunk.
        constexpr int NW = NT / 32;
        static_assert(TS % NW == 0, "whole rows per warp");
#pragma unroll
        for (int k = 0; k < TS / NW; k++) {
          const int tok = warp + k * NW;
          const bool ok = tb + tok < len;
          // Past the row's length the copies zero-fill (0 source bytes); their address
          // stays inside the stage's page, as for the tokens before it.
          const bf16 *src = (TS <= 16 || tok < 16 ? base0 + tok * D : base1 + (tok - 16) * D) + lane * 8;
          const unsigned d = smem_u32(dst + tok * KSTR + lane * 8);
          const int nb = ok ? 16 : 0;
          cp_async16(d, src, nb);
          cp_async16(d + 512, src + 256, nb);
          if (lane < CHUNKS - 64) cp_async16(d + 1024, src + 512, nb);
        }
      } else {
#pragma unroll
        for (int i = 0; i < (TS * CHUNKS + NT - 1) / NT; i++) {
          const int id = tid + i * NT;
          if ((TS * CHUNKS) % NT == 0 || id < TS * CHUNKS) {
            const int tok = id / CHUNKS, ch = id - tok * CHUNKS;
            const bool ok = tb + tok < len;
            const bf16 *src = tok < 16 ? base0 + tok * D : base1 + (tok - 16) * D;
            cp_async16(smem_u32(dst + tok * KSTR + ch * 8), ok ? src + ch * 8 : kv, ok ? 16 : 0);
          }
        }
      }
    };

    // R == 1: Q of this segment's row (16 heads x 576) comes through the stage slot the
    // loop fills last (STAGES - 1) in 16-byte copies, the oldest copy group, and reaches
    // the fragments through ldmatrix. Every CTA of a short batch reads the same Q row:
    // 4-byte fragment loads straight from global memory put 4x the requests on those
    // few hot L2 lines, and at batch 1 the S products waited ~6 us for them (per-CTA
    // timeline, bench/mla_decode/NOTES.md, sixth pass). R > 1 keeps the direct loads.
    constexpr bool QS = R == 1;
    bf16 *sq = skv + (STAGES - 1) * TS * KSTR;
    if (QS) {
#pragma unroll
      for (int i = 0; i < (16 * CHUNKS + NT - 1) / NT; i++) {
        const int id = tid + i * NT;
        if ((16 * CHUNKS) % NT == 0 || id < 16 * CHUNKS) {
          const int hr = id / CHUNKS, ch = id - hr * CHUNKS;
          const bool ok = h_begin + hr < h_end;
          cp_async16(smem_u32(sq + hr * KSTR + ch * 8), ok ? q + ((long long)r * qh + h_begin + hr) * D + ch * 8 : q,
                     ok ? 16 : 0);
        }
      }
      cp_commit();
    }
    {
      long long pe0[STAGES - 1], pe1[STAGES - 1]; // all entries first: their loads overlap
#pragma unroll
      for (int s = 0; s < STAGES - 1; s++)
        if (s < n) bt_of(sa + s, pe0[s], pe1[s]);
#pragma unroll
      for (int s = 0; s < STAGES - 1; s++) {
        if (s < n) load_tile(sa + s, s, pe0[s], pe1[s]);
        cp_commit();
      }
    }
    long long ne0 = 0, ne1 = 0; // entries of the next stage to issue (sa + STAGES - 1 + it)
    if (BTA && STAGES - 1 < n) bt_of(sa + STAGES - 1, ne0, ne1);
    if (r == lo) mark(3);

    // Q fragments of this warp's 144 columns (A operand layout of m16n8k16).
    uint32_t qf[9][4];
    if (QS) {
      cp_wait<STAGES - 1>(); // the Q group
      __syncthreads();
      const unsigned qb = smem_u32(sq + (lane & 15) * KSTR + wc * 144 + (lane >> 4) * 8);
#pragma unroll
      for (int ks = 0; ks < 9; ks++) ldsm_x4(qb + ks * 32, qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3]);
      // The slot is overwritten only after the loop's first barrier.
    } else {
      const bf16 *q0 = q + ((long long)r * qh + hrow0) * D + wc * 144 + 2 * t4;
      const bf16 *q1 = q0 + 8 * D;
#pragma unroll
      for (int ks = 0; ks < 9; ks++) {
        qf[ks][0] = v0 ? __ldg(reinterpret_cast<const unsigned *>(q0 + ks * 16)) : 0u;
        qf[ks][1] = v1 ? __ldg(reinterpret_cast<const unsigned *>(q1 + ks * 16)) : 0u;
        qf[ks][2] = v0 ? __ldg(reinterpret_cast<const unsigned *>(q0 + ks * 16 + 8)) : 0u;
        qf[ks][3] = v1 ? __ldg(reinterpret_cast<const unsigned *>(q1 + ks * 16 + 8)) : 0u;
      }
    }

    float o[16][4];
#pragma unroll
    for (int j = 0; j < 16; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

    const int reps = PROF && n == 1 ? 2 : n;
    for (int it = 0; it < reps; it++) {
      const int is = PROF && n == 1 ? 0 : it;
      cp_wait<STAGES - 2>();
      __syncthreads();
      if (r == lo && it == 0) mark(4);
      {
        const int nx = it + STAGES - 1;
        if (!BTA && nx < n) bt_of(sa + nx, ne0, ne1);
        if (nx < n) load_tile(sa + nx, nx % STAGES, ne0, ne1);
        cp_commit();
        if (BTA && nx + 1 < n) bt_of(sa + nx + 1, ne0, ne1);
      }
      const bf16 *sk = skv + (is % STAGES) * TS * KSTR;

      float sacc[NB][4];
#pragma unroll
      for (int j = 0; j < NB; j++) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.f;
      {
        const unsigned kb = smem_u32(sk + ((lane >> 4) * 8 + (lane & 7)) * KSTR + wc * 144 +
                                     ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int ks = 0; ks < 9; ks++) {
#pragma unroll
          for (int np = 0; np < NB / 2; np++) {
            uint32_t b00, b01, b10, b11;
            ldsm_x4(kb + (np * 16 * KSTR + ks * 16) * 2, b00, b01, b10, b11);
            mma16816(sacc[2 * np], qf[ks], b00, b01);
            mma16816(sacc[2 * np + 1], qf[ks], b10, b11);
          }
        }
      }
      // Sum the four column-slice partials of this row group.
      float s[NB][4];
      {
        float *sb = sred + (size_t)((par * R + wr) * 4) * SRED;
#pragma unroll
        for (int i = 0; i < NB * 4; i++) sb[wc * SRED + i * 32 + lane] = sacc[i / 4][i % 4];
        bar_named(1 + wr, 128);
#pragma unroll
        for (int i = 0; i < NB * 4; i++)
          s[i / 4][i % 4] = ((sb[i * 32 + lane] + sb[SRED + i * 32 + lane]) + sb[2 * SRED + i * 32 + lane]) +
                            sb[3 * SRED + i * 32 + lane];
        par ^= 1;
      }
      if (r == lo && it == 0) mark(5);
      if (r == lo && it == 1) mark(9);
      // Scores stay unscaled until the exponent: softmax_scale > 0 (cgrt_mla_decode checks
      // it), so the row maximum commutes with the scale and ex2(s * sl2 - m) is one FFMA
      // and one MUFU per score. Tokens past len only exist in a row's last stage.
      const int tok0 = (sa + is) * TS + 2 * t4;
      if ((sa + is + 1) * TS > len) {
#pragma unroll
        for (int j = 0; j < NB; j++) {
#pragma unroll
          for (int e = 0; e < 2; e++) {
            if (tok0 + j * 8 + e >= len) s[j][e] = s[j][2 + e] = -INFINITY;
          }
        }
      }
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int j = 0; j < NB; j++) {
        mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
        mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
      }
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      // Every stage holds a token below len, so mx is finite and so are mn0 and mn1.
      const float mn0 = fmaxf(m0, mx0 * sl2), mn1 = fmaxf(m1, mx1 * sl2);
      float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
      for (int j = 0; j < NB; j++) {
        s[j][0] = ex2(fmaf(s[j][0], sl2, -mn0));
        s[j][1] = ex2(fmaf(s[j][1], sl2, -mn0));
        s[j][2] = ex2(fmaf(s[j][2], sl2, -mn1));
        s[j][3] = ex2(fmaf(s[j][3], sl2, -mn1));
        rs0 += s[j][0] + s[j][1];
        rs1 += s[j][2] + s[j][3];
      }
      // Rescale O and l only when a row maximum of the warp grew (after the first stages
      // it rarely does); the first stage takes this branch with m = -inf (factor 0).
      if (__any_sync(0xffffffffu, mn0 != m0 || mn1 != m1)) {
        const float al0 = ex2(m0 - mn0), al1 = ex2(m1 - mn1);
        l0 *= al0;
        l1 *= al1;
#pragma unroll
        for (int j = 0; j < 16; j++) {
          o[j][0] *= al0; o[j][1] *= al0; o[j][2] *= al1; o[j][3] *= al1;
        }
      }
      m0 = mn0;
      m1 = mn1;
      l0 += rs0;
      l1 += rs1;
      uint32_t pa[KK][4];
#pragma unroll
      for (int kk = 0; kk < KK; kk++) {
        pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
      {
        const unsigned vb = smem_u32(sk + (((lane >> 3) & 1) * 8 + (lane & 7)) * KSTR + wc * 128 +
                                     (lane >> 4) * 8);
#pragma unroll
        for (int kk = 0; kk < KK; kk++) {
#pragma unroll
          for (int dp = 0; dp < 8; dp++) {
            uint32_t b0_, b1_, b2_, b3_;
            ldsm_x4_t(vb + (kk * 16 * KSTR + dp * 16) * 2, b0_, b1_, b2_, b3_);
            mma16816(o[2 * dp], pa[kk], b0_, b1_);
            mma16816(o[2 * dp + 1], pa[kk], b2_, b3_);
          }
        }
      }
      if (PROF && r == lo && it == 0) {
        __syncthreads();
        mark(8);
      }
    }
    mark(14);
    cp_wait<0>();
    mark(15);
    __syncthreads(); // stages free for the next segment
    mark(6);

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.f / l0, i1 = 1.f / l1;
    const float lse0 = (m0 + __log2f(l0)) * 0.6931471805599453f;
    const float lse1 = (m1 + __log2f(l1)) * 0.6931471805599453f;
    if (nsplit == 1) {
      bf16 *o0 = out + ((long long)r * qh + hrow0) * DV + wc * 128 + 2 * t4;
      bf16 *o1 = o0 + 8 * DV;
#pragma unroll
      for (int j = 0; j < 16; j++) {
        if (v0) *reinterpret_cast<uint32_t *>(o0 + j * 8) = pack_bf16(o[j][0] * i0, o[j][1] * i0);
        if (v1) *reinterpret_cast<uint32_t *>(o1 + j * 8) = pack_bf16(o[j][2] * i1, o[j][3] * i1);
      }
      if (wc == 0 && t4 == 0) {
        if (v0) lse[(long long)r * qh + hrow0] = lse0;
        if (v1) lse[(long long)r * qh + hrow1] = lse1;
      }
    } else {
      const long long slot = (long long)r + p;
      float *o0 = part_o + (slot * qh + hrow0) * DV + wc * 128 + 2 * t4;
      float *o1 = o0 + 8 * DV;
#pragma unroll
      for (int j = 0; j < 16; j++) {
        if (v0) *reinterpret_cast<float2 *>(o0 + j * 8) = make_float2(o[j][0] * i0, o[j][1] * i0);
        if (v1) *reinterpret_cast<float2 *>(o1 + j * 8) = make_float2(o[j][2] * i1, o[j][3] * i1);
      }
      if (wc == 0 && t4 == 0) {
        if (v0) part_lse[slot * qh + hrow0] = lse0;
        if (v1) part_lse[slot * qh + hrow1] = lse1;
      }
      if (counters != nullptr) {
        cgrt_mla::last_cta_merge<NT>(counters, part_o, part_lse, out, lse, r, qh, h_begin, h_end, g, G, r + pf,
                                     nsplit, &s_last);
      }
    }
  }
  };
  if (ALT && b1 - b0 <= alt_max) run(IC<2>{}, IC<32>{});
  else run(IC<STAGES0>{}, IC<TS0>{});
  if (PROF) {
    mark(7);
    if (threadIdx.x == 0) {
      stamp[13] = clock64();
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      stamp[10] = sm;
      stamp[11] = work;
      unsigned long long *dst = reinterpret_cast<unsigned long long *>(out) +
                                ((long long)blockIdx.y * gridDim.x + blockIdx.x) * 16;
#pragma unroll
      for (int k = 0; k < 16; k++) dst[k] = stamp[k];
    }
    return;
  }
}

} // namespace

extern "C" __global__ void __launch_bounds__(1024)
    cgrt_mla_schedule(const int *__restrict__ seq_lens, int *__restrict__ meta, int rows, int bl, int cap,
                      int P, int min_tiles) {
  __shared__ int warp_sums[32];
  __shared__ int carry;
  // The split kernel (launched with programmatic stream serialization) may start its
  // CTAs now; its griddepcontrol.wait still waits for this grid to finish.
  asm volatile("griddepcontrol.launch_dependents;");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int *row_len = meta;
  int *ts = meta + rows;
  if (tid == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < rows; base += 1024) {
    const int r = base + tid;
    int len = 0;
    if (r < rows) {
      len = seq_lens[r / bl];
      len = len < 0 ? 0 : (len > cap ? cap : len);
      row_len[r] = len;
    }
    const int tiles = (len + TN - 1) / TN;
    int x = tiles;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, x, off);
      if (lane >= off) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
      int w = warp_sums[lane];
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, w, off);
        if (lane >= off) w += y;
      }
      warp_sums[lane] = w;
    }
    __syncthreads();
    const int incl = carry + (warp ? warp_sums[warp - 1] : 0) + x;
    if (r < rows) ts[r] = incl - tiles;
    __syncthreads();
    if (tid == 1023) carry = incl;
    __syncthreads();
  }
  if (tid == 0) {
    const int T = carry;
    ts[rows] = T;
    meta[2 * rows + 1] = cgrt_mla::ranges_in_use(T, P, min_tiles, rows);
  }
}

#define CGRT_MLA_SPLIT_PARAMS                                                                    \
  const bf16 *__restrict__ q, const bf16 *__restrict__ kv, const int *__restrict__ bt,            \
      const int *__restrict__ meta, bf16 *__restrict__ out, float *__restrict__ lse,              \
      float *__restrict__ part_o, float *__restrict__ part_lse, unsigned *__restrict__ counters,  \
      int rows, int qh, int hg, int P, int mbps, int ps, int bl, float scale,                      \
      const int *__restrict__ seq_lens, int cap, int min_tiles, int alt_max
#define CGRT_MLA_SPLIT_ARGS                                                                    \
  q, kv, bt, meta, out, lse, part_o, part_lse, counters, rows, qh, hg, P, mbps, ps, bl, scale, \
      seq_lens, cap, min_tiles, alt_max

extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS, 0>(CGRT_MLA_SPLIT_ARGS);
}
// The previous m16 pipeline (two 32-token stages), for A/B runs (CGRT_MLA_SPLIT=ts32).
extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16_ts32(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, 2, 32, 0>(CGRT_MLA_SPLIT_ARGS);
}
// Per-CTA choice (CGRT_MLA_SPLIT=auto): ranges of at most alt_max tiles take the
// two-stage 32-token pipeline, longer ones the default m16 pipeline.
extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16_auto(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS, 1>(CGRT_MLA_SPLIT_ARGS);
}
// The auto kernel with the previous chunk-per-thread KV copies (CGRT_MLA_COPY=chunk,
// A/B; see WROW).
extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16_chunk(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS, 1, 0, 0>(CGRT_MLA_SPLIT_ARGS);
}
// The auto kernel with the block-table entries read by each stage's copy issue
// (CGRT_MLA_BTA=0, A/B; see BTA).
extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16_nobta(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS, 1, 0, 1, 0>(CGRT_MLA_SPLIT_ARGS);
}
// The auto and deep kernels with the early schedule (programmatic_launch = 2; see EARLY).
extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16_auto_early(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS, 1, 0, 1, 1, 1>(CGRT_MLA_SPLIT_ARGS);
}
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_m16_deep_early(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, 4, 32, 0, 0, 1, 1, 1>(CGRT_MLA_SPLIT_ARGS);
}
// One CTA per SM with four 32-token stages, three of them in flight while it computes
// one (CGRT_MLA_SPLIT=deep, A/B): for short batches, whose ranges of a few tiles then
// load at once instead of one stage per compute step.
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_m16_deep(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, 4, 32, 0>(CGRT_MLA_SPLIT_ARGS);
}
// The auto kernel with per-CTA timestamps into out (CGRT_MLA_SPLIT=prof, diagnostics).
extern "C" __global__ void __launch_bounds__(128, 2) cgrt_mla_split_m16_prof(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS, 1, 1>(CGRT_MLA_SPLIT_ARGS);
}
// Kernels that return at once, with the split and combine kernels' parameters
// (CGRT_MLA_NOOP=1, A/B only): the floor of a step's graph (launch, event, node costs).
extern "C" __global__ void __launch_bounds__(512) cgrt_mla_noop_split(CGRT_MLA_SPLIT_PARAMS) {}
extern "C" __global__ void __launch_bounds__(256)
    cgrt_mla_noop_combine(const int *__restrict__ meta, const float *__restrict__ part_o,
                          const float *__restrict__ part_lse, bf16 *__restrict__ out, float *__restrict__ lse,
                          int rows, int qh) {}
// Three CTAs per SM (12 warps), three 16-token stages each (CGRT_MLA_SPLIT=s3).
extern "C" __global__ void __launch_bounds__(128, 3) cgrt_mla_split_m16_s3(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<1, 3, 16, 0>(CGRT_MLA_SPLIT_ARGS);
}
extern "C" __global__ void __launch_bounds__(512, 1) cgrt_mla_split_m64(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<4, CGRT_MLA_M64_STAGES, CGRT_MLA_M64_TS, 0>(CGRT_MLA_SPLIT_ARGS);
}
// The previous m64 pipeline (two 32-token stages; spills registers), for A/B runs
// (CGRT_MLA_SPLIT=m64ts32).
extern "C" __global__ void __launch_bounds__(512, 1) cgrt_mla_split_m64_ts32(CGRT_MLA_SPLIT_PARAMS) {
  mla_split<4, 2, 32, 0>(CGRT_MLA_SPLIT_ARGS);
}

// Grid (q_heads, rows, nz), 256 threads: CTA (h, r, z) merges columns [z*W, (z+1)*W) of
// head h of row r, W = 512 / nz (nz = 1, 2, 4 or 8, chosen per launch so that short
// batches still spread over the SMs). The lanes of a warp form LPP-lane groups, each on
// one partial per load (K4 float4 per lane), and each group keeps U partials in flight,
// chosen so that a short batch's many partials (132 for one row on the H200) load in one
// pass rather than three dependent ones (H200, eighth pass: -5.5% at (1,16,8192)). Each
// group merges its partials online (LSE and values in the same load round trip, against
// its running maximum); the groups' maxima and sums meet in shared memory at the end.
//
// SPEC (steps of one row, nz 8; cgrt_mla_combine): the row's partials start at slot 0,
// so the first NG x U slots are loaded before the metadata that says how many there are
// (the loads and the metadata take one round trip instead of two); slots past the count
// are then dropped. The host launches this form only when the workspace holds at least
// NG x U slots. Returns without writing when the row was not split (or is padding).
template <int K4, int LPP, int U, bool SPEC = false>
__device__ __forceinline__ void combine_pass(const float *__restrict__ part_o, const float *__restrict__ part_lse,
                                             bf16 *__restrict__ out, float *__restrict__ lse, int r, int h, int qh,
                                             int slot0, int n, int col0, float4 *sacc, float *swsum, float *swmax,
                                             const int *__restrict__ meta = nullptr) {
  constexpr int PPW = 32 / LPP;  // partials per warp and load
  constexpr int NG = 8 * PPW;    // lane groups of the CTA
  constexpr int W4 = LPP * K4;   // float4 columns of the CTA
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sub = lane / LPP, cl = lane - sub * LPP, grp = warp * PPW + sub;
  float4 acc[K4];
#pragma unroll
  for (int k = 0; k < K4; k++) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  float wsum = 0.f, mx = -INFINITY; // a group without partials keeps -inf and adds 0
  // Online merge of a batch of U partials whose first one is valid.
  auto merge = [&](float(&w)[U], float4(&v)[U][K4]) {
    float mn = mx; // partial 0 of the batch is valid, so mn is finite from here on
#pragma unroll
    for (int u = 0; u < U; u++) mn = fmaxf(mn, w[u]);
    const float al = __expf(mx - mn);
    mx = mn;
    wsum *= al;
#pragma unroll
    for (int k = 0; k < K4; k++) {
      acc[k].x *= al; acc[k].y *= al; acc[k].z *= al; acc[k].w *= al;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const float e = __expf(w[u] - mn);
      wsum += e;
#pragma unroll
      for (int k = 0; k < K4; k++) {
        acc[k].x += e * v[u][k].x; acc[k].y += e * v[u][k].y;
        acc[k].z += e * v[u][k].z; acc[k].w += e * v[u][k].w;
      }
    }
  };
  int i0 = grp;
  if (SPEC) {
    float w[U];
    float4 v[U][K4];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const long long sl = (long long)(grp + NG * u) * qh + h;
      const float4 *src = reinterpret_cast<const float4 *>(part_o + sl * DV) + col0 / 4 + cl;
      w[u] = __ldcg(part_lse + sl);
#pragma unroll
      for (int k = 0; k < K4; k++) v[u][k] = __ldcg(src + LPP * k);
    }
    const int *ts = meta + 1; // one row: meta = {len, ts[0], ts[1] = T, Pe}
    const int T = ts[1], Pe = meta[3];
    if (T <= 0) return; // padding row: the split kernel wrote it
    const int pl = part_of(T - 1, T, Pe);
    if (pl == 0) return; // one range: the split kernel wrote the output
    n = pl + 1;
#pragma unroll
    for (int u = 0; u < U; u++)
      if (grp + NG * u >= n) { // a stale slot: dropped
        w[u] = -INFINITY;
#pragma unroll
        for (int k = 0; k < K4; k++) v[u][k] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    if (grp < n) merge(w, v);
    i0 = grp + NG * U;
  }
  for (int i = i0; i < n; i += NG * U) {
    float w[U];
    float4 v[U][K4];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int idx = i + NG * u;
      const bool ok = idx < n;
      const long long sl = (long long)(slot0 + (ok ? idx : 0)) * qh + h;
      const float4 *src = reinterpret_cast<const float4 *>(part_o + sl * DV) + col0 / 4 + cl;
      w[u] = ok ? __ldcg(part_lse + sl) : -INFINITY;
#pragma unroll
      for (int k = 0; k < K4; k++) v[u][k] = ok ? __ldcg(src + LPP * k) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    merge(w, v);
  }
#pragma unroll
  for (int k = 0; k < K4; k++) sacc[grp * W4 + cl + LPP * k] = acc[k];
  if (cl == 0) {
    swsum[grp] = wsum;
    swmax[grp] = mx;
  }
  __syncthreads();
  float M = swmax[0]; // group 0 holds partial 0: finite
#pragma unroll
  for (int g = 1; g < NG; g++) M = fmaxf(M, swmax[g]);
  const int t = threadIdx.x;
  if (t < W4) {
    float ws = 0.f;
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int g = 0; g < NG; g++) {
      const float f = __expf(swmax[g] - M); // 0 for a group without partials
      const float4 x = sacc[g * W4 + t];
      ws += swsum[g] * f;
      a.x += f * x.x; a.y += f * x.y; a.z += f * x.z; a.w += f * x.w;
    }
    // Float4 column t = cl + LPP k of every group (lane cl, its k-th float4).
    store_bf16x4(out + ((long long)r * qh + h) * DV + col0 + t * 4, a, 1.f / ws);
    if (t == 0 && col0 == 0) lse[(long long)r * qh + h] = M + logf(ws);
  }
}

// The combine kernel (SPEC: the one-row form that loads before the metadata, see
// combine_pass; cgrt_mla_combine_nospec, CGRT_MLA_COMB=nospec, is the same without it,
// for A/B runs).
template <bool SPEC>
__device__ __forceinline__ void combine_kernel(const int *__restrict__ meta, const float *__restrict__ part_o,
                                               const float *__restrict__ part_lse, bf16 *__restrict__ out,
                                               float *__restrict__ lse, int rows, int qh) {
  __shared__ float4 sacc[8 * 128];
  __shared__ float swsum[16], swmax[16];
  // Programmatic dependent launch: wait for the split kernel's partials; the next
  // kernel (e.g. the next layer's split) may then launch and run its prologue.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const int h = blockIdx.x, r = blockIdx.y, nz = gridDim.z;
  const int col0 = blockIdx.z * (DV / nz);
  // One row with 64-column slices: 16 lane groups x 9 slots, all reserved by every plan.
  static_assert(8 * (32 / 16) * 9 == CGRT_MLA_COMB_SPEC_SLOTS, "the one-row form loads the reserved slots");
  if (SPEC && nz == 8 && rows == 1) {
    combine_pass<1, 16, 9, true>(part_o, part_lse, out, lse, 0, h, qh, 0, 0, col0, sacc, swsum, swmax, meta);
    return;
  }
  const int *ts = meta + rows;
  const int T = ts[rows], Pe = meta[2 * rows + 1];
  const int rs = ts[r], re = ts[r + 1];
  if (re <= rs) return;
  const int pf = part_of(rs, T, Pe), pl = part_of(re - 1, T, Pe);
  if (pl == pf) return;
  const int slot0 = r + pf, n = pl - pf + 1;
  // nz 8: 64 columns, 16-lane groups (16 per CTA); nz 4: 128 columns, 32-lane groups
  // (8); nz 2 / 1: 256 / 512 columns. U from n: one pass where n allows it.
  if (nz == 8) {
    if (n > 64) combine_pass<1, 16, 9>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
    else combine_pass<1, 16, 4>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
  } else if (nz == 4) {
    if (n > 64) combine_pass<1, 32, 17>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
    else combine_pass<1, 32, 8>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
  } else if (nz == 2) {
    combine_pass<2, 32, 4>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
  } else {
    combine_pass<4, 32, 2>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
  }
}

extern "C" __global__ void __launch_bounds__(256)
    cgrt_mla_combine(const int *__restrict__ meta, const float *__restrict__ part_o,
                     const float *__restrict__ part_lse, bf16 *__restrict__ out, float *__restrict__ lse,
                     int rows, int qh) {
  combine_kernel<true>(meta, part_o, part_lse, out, lse, rows, qh);
}
extern "C" __global__ void __launch_bounds__(256)
    cgrt_mla_combine_nospec(const int *__restrict__ meta, const float *__restrict__ part_o,
                            const float *__restrict__ part_lse, bf16 *__restrict__ out, float *__restrict__ lse,
                            int rows, int qh) {
  combine_kernel<false>(meta, part_o, part_lse, out, lse, rows, qh);
}

