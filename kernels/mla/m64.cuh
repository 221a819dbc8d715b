// The serial 64-row MLA split body (17 to 64 query rows per CTA): the former kernel
// cgrt_mla_split_m64_wgmma, now the body of cgrt_mla_split_m64_ws / _ws_causal
// (kernels/mla/split_m64_ws.cu) where the fatbin has no sm_90a code (compute_90 PTX:
// CUDA_FORCE_PTX_JIT=1, GPUs past sm_90). Same parameters, schedule, ranges, partial
// slots and last-CTA counter merge as every split kernel (kernels/mla/split.cuh), so the
// schedule and combine kernels and the C reference (kernels/mla/ref.c) serve it.
// Design: docs/mla_decode.md.
//
// Two compute warpgroups (threads 0..255). Per row segment, Q (64 heads x 576) sits in
// shared memory; KV tiles of 32 tokens stream through a 3-stage cp.async pipeline. Per
// stage, warpgroup w computes S_w = Q . K[16w .. 16w+15]^T (wgmma m64n16k16 x 36, or its
// mma.sync form; no S exchange), the two warpgroups swap only their 64 row maxima, write
// P (bf16) to shared memory, and each accumulates O[:, 256w .. 256w+255] += P . V (V = the
// first 512 columns of the same stage, MN-major). NT = 384 (the ws kernels' block): the
// third warpgroup takes its share of the copies, the schedule and the counters merge and
// joins every CTA barrier, nothing else.
// Shared-memory layouts and the wgmma / mma.sync building blocks: kernels/mla/wgmma.cuh.
#ifndef CGRT_KERNELS_MLA_M64_CUH
#define CGRT_KERNELS_MLA_M64_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"
#include "kernels/mla/wgmma.cuh"

namespace cgrt_m64 {

typedef __nv_bfloat16 bf16;

using namespace cgrt_wg;
using cgrt_mla::ex2;
using cgrt_mla::pack_bf16;
using cgrt_mla::part_of;

constexpr int D = CGRT_MLA_D;   // 576
constexpr int DV = CGRT_MLA_DV; // 512
constexpr int TN = CGRT_MLA_TILE;
constexpr int NC = 256;         // compute threads (two warpgroups)
constexpr int CHUNKS = D / 8;   // 16-byte chunks per token
constexpr int STAGES = 3;       // KV stages of 32 tokens
// Dynamic shared memory for a block of NT threads: 1 KB of alignment slack, Q, the KV
// stages, P, then the small arrays (row maxima / sums of both warpgroups, fused schedule,
// flags).
template <int NT>
constexpr int smem_bytes() {
  return 1024 + kQBytes + STAGES * kStageBytes + kPBytes + 2 * 64 * 4 + (2 * NT + 2) * 4 + (NT / 32) * 4 + 4;
}
static_assert(smem_bytes<384>() <= 227 * 1024, "one CTA per SM");

// A thread's share of an m64 accumulator (S or O) holds two rows, tr0 and tr1:
// d[4 j + 0..1] belong to row tr0, d[4 j + 2..3] to row tr1. The helpers below work on
// that layout for both 64-row bodies.
// d *= a0 on row tr0 and a1 on row tr1 (the rescale of O by a new running maximum).
template <int N>
__device__ __forceinline__ void scale_rows(float (&d)[N], float a0, float a1) {
#pragma unroll
  for (int j = 0; j < N / 4; j++) {
    d[4 * j + 0] *= a0; d[4 * j + 1] *= a0; d[4 * j + 2] *= a1; d[4 * j + 3] *= a1;
  }
}
// s = exp2(s - m) per row (P from S); rs0 / rs1: this thread's sums of each row.
template <int N>
__device__ __forceinline__ void exp_rows(float (&s)[N], float m0, float m1, float &rs0, float &rs1) {
  rs0 = 0.f;
  rs1 = 0.f;
#pragma unroll
  for (int j = 0; j < N / 4; j++) {
    s[4 * j + 0] = cgrt_mla::ex2(s[4 * j + 0] - m0);
    s[4 * j + 1] = cgrt_mla::ex2(s[4 * j + 1] - m0);
    s[4 * j + 2] = cgrt_mla::ex2(s[4 * j + 2] - m1);
    s[4 * j + 3] = cgrt_mla::ex2(s[4 * j + 3] - m1);
    rs0 += s[4 * j + 0] + s[4 * j + 1];
    rs1 += s[4 * j + 2] + s[4 * j + 3];
  }
}
// Scales S by sl2 (log2 domain), masks token columns past len0 (row tr0) / len1 (row
// tr1) to -inf (column 8 j + e of this thread is token tok0 + 8 j + e) and returns the
// rows' maxima over the quad (mx0 / mx1).
template <int N>
__device__ __forceinline__ void mask_max(float (&s)[N], int tok0, int len0, int len1, float sl2, float &mx0,
                                         float &mx1) {
  mx0 = -INFINITY;
  mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < N / 4; j++) {
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const bool ok0 = tok0 + 8 * j + e < len0, ok1 = tok0 + 8 * j + e < len1;
      s[4 * j + e] = ok0 ? s[4 * j + e] * sl2 : -INFINITY;
      s[4 * j + 2 + e] = ok1 ? s[4 * j + 2 + e] * sl2 : -INFINITY;
      mx0 = fmaxf(mx0, s[4 * j + e]);
      mx1 = fmaxf(mx1, s[4 * j + 2 + e]);
    }
  }
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
}
// Sums l0 / l1 over the quad of lanes (lane & ~3 .. lane | 3) that holds the two rows.
__device__ __forceinline__ void quad_sum(float &l0, float &l1) {
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
}

// The end of a row segment in a compute thread of the 64-row kernels (accumulator rows
// hrow0 / hrow1, valid v0 / v1; l0, l1: the rows' sums over all tokens, m0, m1: their
// maxima, log2 domain): O / l and the natural-log LSE, to out / lse when one range holds
// the row (nsplit 1), else as the partial of slot r + p. Columns 256 wg .. 256 wg + 255.
template <int BLOCK>
__device__ __forceinline__ void store_rows(const float (&o)[128], float l0, float l1, float m0, float m1, int wg,
                                           int t4, int hrow0, int hrow1, bool v0, bool v1, int r, int qh, int nsplit,
                                           int p, bf16 *__restrict__ out, float *__restrict__ lse,
                                           float *__restrict__ part_o, float *__restrict__ part_lse) {
  float i0 = 1.f / l0, i1 = 1.f / l1;
  float lse0 = (m0 + __log2f(l0)) * 0.6931471805599453f;
  float lse1 = (m1 + __log2f(l1)) * 0.6931471805599453f;
  if (BLOCK) { // a row without tokens here: output (or partial) 0, LSE -inf
    if (!(l0 > 0.f)) { i0 = 0.f; lse0 = -INFINITY; }
    if (!(l1 > 0.f)) { i1 = 0.f; lse1 = -INFINITY; }
  }
  const int c0 = wg * 256 + 2 * t4;
  if (nsplit == 1) {
    bf16 *o0 = out + ((long long)r * qh + hrow0) * DV + c0;
    bf16 *o1 = o0 + 8 * DV;
#pragma unroll
    for (int j = 0; j < 32; j++) {
      if (v0) *reinterpret_cast<uint32_t *>(o0 + j * 8) = pack_bf16(o[4 * j + 0] * i0, o[4 * j + 1] * i0);
      if (v1) *reinterpret_cast<uint32_t *>(o1 + j * 8) = pack_bf16(o[4 * j + 2] * i1, o[4 * j + 3] * i1);
    }
    if (wg == 0 && t4 == 0) {
      if (v0) lse[(long long)r * qh + hrow0] = lse0;
      if (v1) lse[(long long)r * qh + hrow1] = lse1;
    }
  } else {
    const long long slot = (long long)r + p;
    float *o0 = part_o + (slot * qh + hrow0) * DV + c0;
    float *o1 = o0 + 8 * DV;
#pragma unroll
    for (int j = 0; j < 32; j++) {
      if (v0) *reinterpret_cast<float2 *>(o0 + j * 8) = make_float2(o[4 * j + 0] * i0, o[4 * j + 1] * i0);
      if (v1) *reinterpret_cast<float2 *>(o1 + j * 8) = make_float2(o[4 * j + 2] * i1, o[4 * j + 3] * i1);
    }
    if (wg == 0 && t4 == 0) {
      if (v0) part_lse[slot * qh + hrow0] = lse0;
      if (v1) part_lse[slot * qh + hrow1] = lse1;
    }
  }
}

// BLOCK = 1 (cgrt_mla_split_m64_ws_causal): each "row" is a request whose qh query rows are
// mk causal block rows of qh / mk heads (the plan runs a block's rows together so that
// each KV tile is read once per request); query row h sees
// cgrt__mla_row_len(len, cap, h / (qh / mk), mk, 1) tokens, len being the request's.
// Rows may then see no token of a stage, a segment or the whole request: their maxima
// stay -inf (exponents taken against 0), their sums 0, and they leave output 0 / LSE
// -inf (a partial of LSE -inf weighs 0 in both merges).
template <int BLOCK, int NT>
__device__ __forceinline__ void split_m64_serial(
    const bf16 *__restrict__ q, const bf16 *__restrict__ kv, const int *__restrict__ bt,
    const int *__restrict__ meta, bf16 *__restrict__ out, float *__restrict__ lse, float *__restrict__ part_o,
    float *__restrict__ part_lse, unsigned *__restrict__ counters, int rows, int qh, int hg, int P, int mbps,
    int ps, int bl, float scale, const int *__restrict__ seq_lens, int cap, int min_tiles, int causal, int mk,
    float kv_scale) {
  (void)kv_scale; // bf16 cache
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_kv = s_q + kQBytes;
  const uint32_t s_p = s_kv + STAGES * kStageBytes;
  float *s_red = reinterpret_cast<float *>(sm + kQBytes + STAGES * kStageBytes + kPBytes); // [2][64]
  int *s_meta = reinterpret_cast<int *>(s_red + 128);                                      // 2 NT + 2
  int *s_wsum = s_meta + 2 * NT + 2;                                                       // NT / 32
  int *s_last = s_wsum + NT / 32;

  // Programmatic dependent launch: nothing above reads what the schedule kernel writes.
  cgrt_mla::pdl_wait();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = tid >> 7, wi = warp & 3;
  static_assert(NT == NC || NT == NC + 128, "two compute warpgroups, at most one more");
  const bool compute = NT == NC || wg < 2; // the third warpgroup (NT 384) copies and waits
  const int gq = lane >> 2, t4 = lane & 3;
  const int g = blockIdx.x, p = blockIdx.y, G = gridDim.x;

  // Fused schedule (seq_lens != nullptr, rows <= NT): as cgrt_mla_schedule computes it.
  const int *mb = cgrt_mla::fused_schedule<NT>(s_meta, s_wsum, seq_lens, meta, rows, bl, cap, P, min_tiles,
                                                        causal);
  const int *row_len = mb;
  const int *ts = mb + rows;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const float sl2 = scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;

  const cgrt_mla::CtaRange cr = cgrt_mla::cta_range<NT>(mb, rows, out, lse, qh, h_begin, h_end, p, P);
  if (!cr.work) return;
  const int T = cr.T, Pe = cr.Pe, b1 = cr.b1;

  // Accumulator rows of this thread: tile rows 16 wi + gq and + 8.
  const int tr0 = 16 * wi + gq, tr1 = tr0 + 8;
  const int hrow0 = h_begin + tr0, hrow1 = h_begin + tr1;
  const bool v0 = hrow0 < h_end, v1 = hrow1 < h_end;

  for (int r = cr.lo, t = cr.b0; t < b1; r++) {
    cgrt_mla::Segment sg;
    if (!cgrt_mla::next_segment(ts, row_len, r, t, b1, T, Pe, sg)) continue;
    const int ja = sg.ja, jb = sg.jb, len = sg.len, pf = sg.pf, nsplit = sg.nsplit;
    // Stages [ja, ja + n) of 32 tokens, the last one holding a token below len.
    const int n = (min(jb * TN, len) + kTS - 1) / kTS - ja;
    const int *btr = bt + (long long)(r / bl) * mbps;
    // Tokens each of this thread's two query rows sees (BLOCK: its block row's length).
    int len0 = len, len1 = len;
    if (BLOCK) {
      const int per = qh / mk;
      len0 = cgrt__mla_row_len(len, cap, min(hrow0, qh - 1) / per, mk, 1);
      len1 = cgrt__mla_row_len(len, cap, min(hrow1, qh - 1) / per, mk, 1);
    }

    // A 32-token stage spans at most two pages (page size >= 16): the pages of tokens
    // 0-15 and 16-31 of tile j.
    auto fetch_pages = [&](int j, long long &pg0, long long &pg1) {
      const int tb = j * kTS;
      pg0 = __ldg(btr + (tb >> ps_shift));
      pg1 = tb + 16 < len ? (long long)__ldg(btr + ((tb + 16) >> ps_shift)) : pg0;
    };
    auto load_tile_pg = [&](int j, int stage, long long pg0, long long pg1) {
      const uint32_t dst = s_kv + stage * kStageBytes;
      const int tb = j * kTS;
      const bf16 *base0 = kv + (pg0 * ps + (tb & (ps - 1))) * D;
      const bf16 *base1 = kv + (pg1 * ps + ((tb + 16) & (ps - 1))) * D;
      auto copy = [&](int i) {
        const int id = tid + i * NT;
        const int tok = id / CHUNKS, ch = id - tok * CHUNKS;
        const bool ok = tb + tok < len;
        const bf16 *src = tok < 16 ? base0 + tok * D : base1 + (tok - 16) * D;
        cp_async16(dst + (ch >> 3) * kKBlock + swz(tok, ch & 7), ok ? src + ch * 8 : kv, ok ? 16 : 0);
      };
      // Unrolled: the per-thread offsets are hoisted out of the stage loop (more
      // registers; the loop form measured 19% slower).
#pragma unroll
      for (int i = 0; i < kTS * CHUNKS / NT; i++) copy(i);
    };
    auto load_tile = [&](int j, int stage) {
      long long pg0, pg1;
      fetch_pages(j, pg0, pg1);
      load_tile_pg(j, stage, pg0, pg1);
    };
    static_assert(kTS * CHUNKS % NT == 0 && 64 * CHUNKS % NT == 0, "copy split");

    // Q of the 64 heads (rows past h_end zero), in the first commit group.
    {
      const bf16 *qr = q + ((long long)r * qh + h_begin) * D;
#pragma unroll
      for (int i = 0; i < 64 * CHUNKS / NT; i++) {
        const int id = tid + i * NT;
        const int hr = id / CHUNKS, ch = id - hr * CHUNKS;
        const bool ok = h_begin + hr < h_end;
        cp_async16(s_q + (ch >> 3) * kQBlock + swz(hr, ch & 7), ok ? qr + (long long)hr * D + ch * 8 : q,
                   ok ? 16 : 0);
      }
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < n) load_tile(ja + s, s);
      cp_commit();
    }

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    fence_regs(o); // zeroed before any wgmma is issued
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

    // Online softmax of stage it: part 1 scales S(it) (this warpgroup's 16 tokens, log2
    // domain), masks tokens past len and takes the row maxima of this half; part 2
    // swaps them with the other warpgroup (bar 1), rescales O and l and
    // writes P(it) (bf16) to shared memory, visible to both warpgroups after bar 2.
    // O must not be in flight in part 2.
    auto softmax1 = [&](float (&s)[8], int it, float &mx0, float &mx1) {
      mask_max(s, (ja + it) * kTS + wg * 16 + 2 * t4, len0, len1, sl2, mx0, mx1);
    };
    auto softmax2 = [&](float (&s)[8], float mx0, float mx1) {
      // Tokens 0-15 of a stage always hold one below len: the merged maximum is finite
      // (BLOCK: but for rows of a shorter block row; exponents against 0 then).
      if (t4 == 0) {
        s_red[wg * 64 + tr0] = mx0;
        s_red[wg * 64 + tr1] = mx1;
      }
      bar_named(1, NC);
      mx0 = fmaxf(mx0, s_red[(wg ^ 1) * 64 + tr0]);
      mx1 = fmaxf(mx1, s_red[(wg ^ 1) * 64 + tr1]);
      float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
      const float al0 = ex2(m0 - (BLOCK && mn0 == -INFINITY ? 0.f : mn0));
      const float al1 = ex2(m1 - (BLOCK && mn1 == -INFINITY ? 0.f : mn1));
      m0 = mn0;
      m1 = mn1;
      if (BLOCK) {
        mn0 = mn0 == -INFINITY ? 0.f : mn0;
        mn1 = mn1 == -INFINITY ? 0.f : mn1;
      }
      float rs0, rs1;
      exp_rows(s, mn0, mn1, rs0, rs1);
      l0 = l0 * al0 + rs0;
      l1 = l1 * al1 + rs1;
      scale_rows(o, al0, al1);
      // P (bf16) columns 16 wg .. 16 wg + 15 of the 64 x 32 tile.
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const int chunk = wg * 2 + j;
        st_shared_u32(s_p + swz(tr0, chunk) + 4 * t4, pack_bf16(s[4 * j + 0], s[4 * j + 1]));
        st_shared_u32(s_p + swz(tr1, chunk) + 4 * t4, pack_bf16(s[4 * j + 2], s[4 * j + 3]));
      }
      fence_proxy_async();
      bar_named(2, NC);
    };

    // Per stage S, softmax, P.V in turn; loads two stages ahead.
    for (int it = 0; it < n; it++) {
      cp_wait<STAGES - 2>();
      fence_proxy_async();
      __syncthreads(); // stage it landed for all; every warpgroup is done with stage it - 1
      const uint32_t sk = s_kv + (it % STAGES) * kStageBytes;
      float s[8];
      if (compute) mma_qk_issue(s, s_q, sk + wg * 16 * 128);
      {
        // Refill stage it - 1 while the tensor cores work (its block-table lookups too).
        const int nx = it + STAGES - 1;
        if (nx < n) load_tile(ja + nx, nx % STAGES);
        cp_commit();
      }
      if (compute) {
        mma_qk_wait(s);
        float mx0, mx1;
        softmax1(s, it, mx0, mx1);
        softmax2(s, mx0, mx1);
        mma_pv(o, s_p, sk + wg * 4 * kKBlock);
      }
    }
    cp_wait<0>();
    __syncthreads(); // Q and the stages free for the next segment

    // Row sums: this thread's quad, then the other warpgroup's half of the tokens.
    quad_sum(l0, l1);
    if (compute && t4 == 0) {
      s_red[wg * 64 + tr0] = l0;
      s_red[wg * 64 + tr1] = l1;
    }
    __syncthreads();
    if (!compute) { // the third warpgroup: only the counters merge below
      if (nsplit > 1 && counters != nullptr)
        cgrt_mla::last_cta_merge<NT>(counters, part_o, part_lse, out, lse, r, qh, h_begin, h_end, g, G, r + pf,
                                     nsplit, s_last);
      continue;
    }
    l0 += s_red[(wg ^ 1) * 64 + tr0];
    l1 += s_red[(wg ^ 1) * 64 + tr1];
    store_rows<BLOCK>(o, l0, l1, m0, m1, wg, t4, hrow0, hrow1, v0, v1, r, qh, nsplit, p, out, lse, part_o,
                      part_lse);
    if (nsplit > 1 && counters != nullptr)
      cgrt_mla::last_cta_merge<NT>(counters, part_o, part_lse, out, lse, r, qh, h_begin, h_end, g, G, r + pf,
                                   nsplit, s_last);
  }
}

} // namespace cgrt_m64

#endif
