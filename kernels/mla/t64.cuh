// Building blocks of the token-major wgmma split kernels for up to 16 query heads per CTA
// (kernels/mla/split_t64.cu: bf16 cache; kernels/mla/split_t64_fp8.cu: FP8 e4m3 cache):
// the two tile products over a tile of 9 column blocks of 64 tokens x 128 bytes (the
// 128-byte swizzle of kernels/mla/wgmma.cuh), the accumulator walk, and the counters
// merge of the last CTA of a row. One warpgroup of NT = 128 threads.
#ifndef CGRT_KERNELS_MLA_T64_CUH
#define CGRT_KERNELS_MLA_T64_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"
#include "kernels/mla/wgmma.cuh"

typedef __nv_bfloat16 bf16;

namespace cgrt_t64 {

using namespace cgrt_wg;

constexpr int D = CGRT_MLA_D;    // 576
constexpr int DV = CGRT_MLA_DV;  // 512
constexpr int TN = CGRT_MLA_TILE;
constexpr int NT = 128;          // one warpgroup
constexpr int kQ16 = 16 * 128;   // a column block of Q (16 heads x 128 B)
constexpr int kCB = 64 * 128;    // a column block of a tile (64 tokens x 128 B)
constexpr int kP16 = 16 * 128;   // P^T: 16 heads x 64 tokens
constexpr int kOStr = DV + 4;    // row stride (floats) of the output staging (no bank conflicts)

// S^T = K . Q^T of one tile; kb(cb): shared address of column block cb (0..8) of the
// tile. t64_qk_issue starts the product (wgmma: one commit group), t64_qk_wait waits.
template <class KB>
__device__ __forceinline__ void t64_qk_issue(float (&s)[8], KB kb, uint32_t q_s) {
#if CGRT_WG_HAS_WGMMA
  wg_fence();
#pragma unroll
  for (int cb = 0; cb < 9; cb++) {
    const uint64_t da = make_desc(kb(cb), 16, 1024), db = make_desc(q_s + cb * kQ16, 16, 1024);
#pragma unroll
    for (int k4 = 0; k4 < 4; k4++) wgmma_m64n16_kk(s, da + 2 * k4, db + 2 * k4, cb + k4 > 0);
  }
  wg_commit();
  fence_regs(s);
#else
  mma_kk_sync(s, kb, [&](int cb) { return q_s + cb * kQ16; });
#endif
}
__device__ __forceinline__ void t64_qk_wait(float (&s)[8]) {
#if CGRT_WG_HAS_WGMMA
  wg_wait<0>();
#endif
  fence_regs(s);
}


// The products of t64_pv_run: bf16 operands (these kernels) or, for the FP8 kernels, f16
// (their T64F16 in split_t64_fp8.cu): wg is the wgmma m64n16k16 with A MN-major from
// shared memory, mma the mma.sync m16n8k16 of the fallback.
struct T64Bf16 {
#if CGRT_WG_HAS_WGMMA
  static __device__ __forceinline__ void wg(float (&d)[8], uint64_t da, uint64_t db) { wgmma_m64n16_mk(d, da, db, 1); }
#else
  static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    mma16816(c, a, b0, b1);
  }
#endif
};

// O^T += V^T . P^T of one tile: M tile i = dims 64 i .. 64 i + 63 = column block i of the
// tile, read MN-major; p_s = P^T (16 heads x 64 tokens, K-major). WAIT = 1: issued and
// waited for. WAIT = 0 (wgmma): one commit group left in flight, o untouched until
// t64_pv_wait; the fallback computes it all here either way.
template <class Prod, int WAIT, class KB>
__device__ __forceinline__ void t64_pv_run(float (&o)[8][8], KB kb, uint32_t p_s) {
#pragma unroll
  for (int i = 0; i < 8; i++) fence_regs(o[i]);
#if CGRT_WG_HAS_WGMMA
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    const uint64_t db = make_desc(p_s, 16, 1024) + 2 * kk;
#pragma unroll
    for (int i = 0; i < 8; i++) Prod::wg(o[i], make_desc(kb(i), kCB, 1024) + kk * 128, db);
  }
  wg_commit();
  if (WAIT) wg_wait<0>();
#else
  const int lane = threadIdx.x & 31, wi = (threadIdx.x >> 5) & 3;
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
  const int m4 = lane >> 3;
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t b0, b1, b2, b3;
    ldsm_x4(p_s + swz(br, kk * 2 + bc), b0, b1, b2, b3);
    const int tok = kk * 16 + (lane & 7) + ((m4 >> 1) << 3);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t a[4];
      ldsm_x4_t(kb(i) + swz(tok, 2 * wi + (m4 & 1)), a[0], a[1], a[2], a[3]);
      Prod::mma(o[i], a, b0, b1);
      Prod::mma(o[i] + 4, a, b2, b3);
    }
  }
#endif
#pragma unroll
  for (int i = 0; i < 8; i++) fence_regs(o[i]);
}
template <class KB>
__device__ __forceinline__ void t64_pv(float (&o)[8][8], KB kb, uint32_t p_s) {
  t64_pv_run<T64Bf16, 1>(o, kb, p_s);
}

// Calls f(i, j, e) for every O^T accumulator pair of a thread: o[i][4 j + e] and
// o[i][4 j + 2 + e] (M tile i, head index 2 j + e, dims 8 apart).
template <class F>
__device__ __forceinline__ void each_o(F f) {
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) f(i, j, e);
}

__device__ __forceinline__ void st_shared_u16(uint32_t addr, float v) {
  const bf16 b = __float2bfloat16_rn(v);
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(*reinterpret_cast<const unsigned short *>(&b))
               : "memory");
}

// COUNTERS, in the CTA that arrived last for row r: merges the row's nsplit partials
// (slots slot0..) of heads h_begin .. + nh into out and lse, in slot order whichever CTA
// is last (so the result does not depend on the arrival order). Up to kMergeSmemMax
// partials, folded in with a running maximum of the LSEs, batches of kMergeBatch land in
// shared memory behind the staging (buf) with cp.async, one round trip per batch, and
// the CTA's own partial (slot own) is read from the staging rows s_stage; past that
// (few long rows, e.g. one row split 32 ways), a pass over the LSEs, then one partial
// per round trip from global memory into registers, which measured faster there
// (figures: docs/mla_decode.md). Thread tid: head tid >> 3, float4 columns (tid & 7) +
// 8 k. Whole CTA.
constexpr int kMergeBatch = 4;
constexpr int kMergeSmemMax = 2 * kMergeBatch;
constexpr int kOStageBytes = 16 * kOStr * 4;
__device__ __forceinline__ void t64_merge(const float *__restrict__ part_o, const float *__restrict__ part_lse,
                                          bf16 *__restrict__ out, float *__restrict__ lse, int r, int qh,
                                          int h_begin, int nh, long long slot0, int nsplit, long long own,
                                          const float *s_stage, float *buf) {
  const int tid = threadIdx.x, h = tid >> 3, c = tid & 7;
  const int hh = h < nh ? h : 0; // threads past the heads compute head 0 and store nothing
  const float *lse_h = part_lse + slot0 * qh + h_begin + hh;
  float m = -INFINITY, wsum = 0.f;
  float4 acc[16];
#pragma unroll
  for (int k = 0; k < 16; k++) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  // Folds in a batch whose LSEs are lb[0 .. kMergeBatch) (-inf: not in the batch) and
  // whose columns row(j)[4 (c + 8 k)] come from src(j, k).
  auto fold = [&](const float (&lb)[kMergeBatch], auto src) {
    float mb = m;
#pragma unroll
    for (int j = 0; j < kMergeBatch; j++) mb = fmaxf(mb, lb[j]);
    const float sc = __expf(m - mb); // 0 in the first batch (m = -inf, acc = 0)
    wsum *= sc;
#pragma unroll
    for (int k = 0; k < 16; k++) {
      acc[k].x *= sc; acc[k].y *= sc; acc[k].z *= sc; acc[k].w *= sc;
    }
#pragma unroll
    for (int j = 0; j < kMergeBatch; j++) {
      if (lb[j] == -INFINITY) continue; // partials hold tokens: their LSEs are finite
      const float w = __expf(lb[j] - mb);
      wsum += w;
#pragma unroll
      for (int k = 0; k < 16; k++) {
        const float4 v = src(j, k);
        acc[k].x += w * v.x; acc[k].y += w * v.y; acc[k].z += w * v.z; acc[k].w += w * v.w;
      }
    }
    m = mb;
  };
  if (nsplit <= kMergeSmemMax) {
    const int own_i = (int)(own - slot0);
    for (int b0 = 0; b0 < nsplit; b0 += kMergeBatch) {
      const int nb = min(kMergeBatch, nsplit - b0);
      for (int j = 0; j < nb; j++) {
        if (b0 + j == own_i) continue;
        const float *src = part_o + ((slot0 + b0 + j) * qh + h_begin) * DV;
        const uint32_t dst = smem_addr(buf + j * 16 * DV);
#pragma unroll
        for (int k = 0; k < 16; k++) {
          const int id = tid + NT * k; // float4 id of head id >> 7, column 4 (id & 127)
          if ((id >> 7) < nh) cp_async16(dst + id * 16, src + 4 * id, 16);
        }
      }
      cp_commit();
      float lb[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; j++) lb[j] = j < nb ? __ldcg(lse_h + (long long)(b0 + j) * qh) : -INFINITY;
      cp_wait<0>();
      __syncthreads();
      fold(lb, [&](int j, int k) {
        const float *row = b0 + j == own_i ? s_stage + hh * kOStr : buf + (j * 16 + hh) * DV;
        return *reinterpret_cast<const float4 *>(row + 4 * (c + 8 * k));
      });
      __syncthreads(); // the buffers are read before the next batch lands
    }
  } else {
    // The maximum first, then one partial per round trip (a running maximum here measured
    // 24% slower at one row split 32 ways: 32.4 against 26.2 us).
    for (int i = 0; i < nsplit; i++) m = fmaxf(m, __ldcg(lse_h + (long long)i * qh));
    for (int i = 0; i < nsplit; i++) {
      const float w = __expf(__ldcg(lse_h + (long long)i * qh) - m);
      const float4 *src = reinterpret_cast<const float4 *>(part_o + ((slot0 + i) * qh + h_begin + hh) * DV) + c;
      wsum += w;
      float4 v[16];
#pragma unroll
      for (int k = 0; k < 16; k++) v[k] = __ldcg(src + 8 * k);
#pragma unroll
      for (int k = 0; k < 16; k++) {
        acc[k].x += w * v[k].x; acc[k].y += w * v[k].y; acc[k].z += w * v[k].z; acc[k].w += w * v[k].w;
      }
    }
  }
  if (h < nh) {
    const float inv = 1.f / wsum;
    bf16 *o = out + ((long long)r * qh + h_begin + h) * DV + 4 * c;
#pragma unroll
    for (int k = 0; k < 16; k++) cgrt_mla::store_bf16x4(o + 32 * k, acc[k], inv);
    if (c == 0) lse[(long long)r * qh + h_begin + h] = m + logf(wsum);
  }
}


}  // namespace cgrt_t64

#endif
