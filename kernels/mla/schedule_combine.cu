// MLA decode: the schedule and combine kernels (host side kernels/mla/plan.c, C references
// kernels/mla/ref.c; the step's flow: docs/mla_decode.md).
//
//   cgrt_mla_schedule  1 CTA: expands the per-request seq_lens to rows, clamps them
//                      (causal rows shortened: cgrt__mla_row_len), and
//                      writes the per-row tile prefix sums (meta) from which every other
//                      kernel derives its balanced share of the KV tiles. Steps of at most
//                      the split kernel's block size of rows skip it: the split kernel
//                      computes the same schedule itself (kernels/mla/split.cuh).
//   cgrt_mla_combine   merges the partial results of the rows that more than one range
//                      split (the workspace strategy).
//
// Work split: the T = sum_r ceil(len_r / 32) KV tiles of the batch are cut into Pe equal
// ranges (P fixed at plan creation from the SM count and occupancy; Pe <= P in use per
// step, rounded down to a multiple of rows where that keeps ranges inside rows, see
// CGRT_MLA_ALIGN_MAX_TILES); CTA (g, p) of the split kernel runs range p for head group g.
// A row touched by n > 1 ranges leaves n partials in slots r + p (unique: ranges are
// monotone in rows), so the workspace holds rows + P slots.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"

typedef __nv_bfloat16 bf16;

namespace {

using cgrt_mla::part_of;
using cgrt_mla::store_bf16x4;

constexpr int DV = CGRT_MLA_DV;   // 512
constexpr int TN = CGRT_MLA_TILE; // 32 tokens per tile

} // namespace

extern "C" __global__ void __launch_bounds__(1024)
    cgrt_mla_schedule(const int *__restrict__ seq_lens, int *__restrict__ meta, int rows, int bl, int cap,
                      int P, int min_tiles, int causal) {
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
      len = cgrt__mla_row_len(seq_lens[r / bl], cap, r, bl, causal);
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

// Grid (q_heads, rows, nz), 256 threads: CTA (h, r, z) merges columns [z*W, (z+1)*W) of
// head h of row r, W = 512 / nz (nz = 8 for steps of up to 32 (row, head) pairs, so
// that they still spread over the SMs, else 1: kernels/mla/plan.c). The lanes of a warp form LPP-lane groups, each on
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
  // Partials of LSE -inf (a causal query row without tokens in that range) weigh 0: the
  // exponents are taken against mu, 0 while every partial so far is empty.
  auto merge = [&](float(&w)[U], float4(&v)[U][K4]) {
    float mn = mx;
#pragma unroll
    for (int u = 0; u < U; u++) mn = fmaxf(mn, w[u]);
    const float mu = mn == -INFINITY ? 0.f : mn;
    const float al = __expf(mx - mu);
    mx = mn;
    wsum *= al;
#pragma unroll
    for (int k = 0; k < K4; k++) {
      acc[k].x *= al; acc[k].y *= al; acc[k].z *= al; acc[k].w *= al;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const float e = __expf(w[u] - mu);
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
  float M = swmax[0];
#pragma unroll
  for (int g = 1; g < NG; g++) M = fmaxf(M, swmax[g]);
  const float Mu = M == -INFINITY ? 0.f : M; // -inf: every partial empty (output 0, LSE -inf)
  const int t = threadIdx.x;
  if (t < W4) {
    float ws = 0.f;
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int g = 0; g < NG; g++) {
      const float f = __expf(swmax[g] - Mu); // 0 for a group without partials
      const float4 x = sacc[g * W4 + t];
      ws += swsum[g] * f;
      a.x += f * x.x; a.y += f * x.y; a.z += f * x.z; a.w += f * x.w;
    }
    // Float4 column t = cl + LPP k of every group (lane cl, its k-th float4).
    store_bf16x4(out + ((long long)r * qh + h) * DV + col0 + t * 4, a, ws > 0.f ? 1.f / ws : 0.f);
    if (t == 0 && col0 == 0) lse[(long long)r * qh + h] = ws > 0.f ? M + logf(ws) : -INFINITY;
  }
}

// The combine kernel; steps of one row in 64-column slices take the form that loads
// before the metadata (SPEC in combine_pass).
__device__ __forceinline__ void combine_kernel(const int *__restrict__ meta, const float *__restrict__ part_o,
                                               const float *__restrict__ part_lse, bf16 *__restrict__ out,
                                               float *__restrict__ lse, int rows, int qh) {
  __shared__ float4 sacc[8 * 128];
  __shared__ float swsum[16], swmax[16];
  // Programmatic dependent launch: wait for the split kernel's partials; the next
  // kernel (e.g. the next layer's split) may then launch and run its prologue.
  cgrt_mla::pdl_wait();
  const int h = blockIdx.x, r = blockIdx.y, nz = gridDim.z;
  const int col0 = blockIdx.z * (DV / nz);
  // One row with 64-column slices: 16 lane groups x 9 slots, all reserved by every plan.
  static_assert(8 * (32 / 16) * 9 == CGRT_MLA_COMB_SPEC_SLOTS, "the one-row form loads the reserved slots");
  if (nz == 8 && rows == 1) {
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
  // nz 8: 64 columns, 16-lane groups (16 per CTA), U from n: one pass where n allows
  // it; nz 1: the whole 512 columns, 32-lane groups (8).
  if (nz == 8) {
    if (n > 64) combine_pass<1, 16, 9>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
    else combine_pass<1, 16, 4>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
  } else {
    combine_pass<4, 32, 2>(part_o, part_lse, out, lse, r, h, qh, slot0, n, col0, sacc, swsum, swmax);
  }
}

extern "C" __global__ void __launch_bounds__(256)
    cgrt_mla_combine(const int *__restrict__ meta, const float *__restrict__ part_o,
                     const float *__restrict__ part_lse, bf16 *__restrict__ out, float *__restrict__ lse,
                     int rows, int qh) {
  combine_kernel(meta, part_o, part_lse, out, lse, rows, qh);
}
