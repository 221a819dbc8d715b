// The DCP kernels (rows of kernel_table.h; references in ref.c; design in docs/dcp.md).
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/dcp/kernel_table.h"

// cgrt_dcp_merge(parts, rank_stride, lse_offset, part_fp32, nranks, items, out, out_lse)
//
// Merges nranks partial attention outputs of `items` (row, head) pairs into one. Rank
// w's partial of item i is 512 values (bf16, or fp32 when part_fp32) at
// parts + w * rank_stride + i * 512 * element size, its natural-log LSE an fp32 at
// parts + w * rank_stride + lse_offset + 4 i (byte offsets). With m = max_w lse_w and
// L = m + log(sum_w exp(lse_w - m)), out[i] = sum_w exp(lse_w - L) * part_w, summed in
// fp32 in rank order 0..nranks-1 (deterministic), rounded to bf16 (round to nearest
// even); out_lse[i] = L when out_lse is not NULL. Ranks whose LSE is -inf are skipped
// (their partial is not read); an item whose LSEs are all -inf (a padding row) gets
// zeros and LSE -inf. Grid: items CTAs of 128 threads, 4 values per thread.
extern "C" __global__ void __launch_bounds__(128) cgrt_dcp_merge(const void *parts, long long rank_stride,
                                                                 long long lse_offset, int part_fp32, int nranks,
                                                                 int items, __nv_bfloat16 *out, float *out_lse) {
  const long long i = blockIdx.x;
  if (i >= items) return;
  const char *base = (const char *)parts;
  float m = -INFINITY;
  for (int w = 0; w < nranks; w++) {
    const float l = *(const float *)(base + w * rank_stride + lse_offset + 4 * i);
    m = fmaxf(m, l);
  }
  const int c = threadIdx.x * 4;
  __nv_bfloat16 *o = out + i * CGRT_DCP_DV + c;
  if (m == -INFINITY) {
    for (int k = 0; k < 4; k++) o[k] = __float2bfloat16_rn(0.f);
    if (out_lse && threadIdx.x == 0) out_lse[i] = -INFINITY;
    return;
  }
  float s = 0.f;
  for (int w = 0; w < nranks; w++) {
    const float l = *(const float *)(base + w * rank_stride + lse_offset + 4 * i);
    if (l != -INFINITY) s += expf(l - m);
  }
  const float total = m + logf(s);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int w = 0; w < nranks; w++) {
    const char *rb = base + w * rank_stride;
    const float l = *(const float *)(rb + lse_offset + 4 * i);
    if (l == -INFINITY) continue;
    const float scale = expf(l - total);
    if (part_fp32) {
      const float4 v = *(const float4 *)(rb + (i * CGRT_DCP_DV + c) * 4);
      acc[0] += scale * v.x;
      acc[1] += scale * v.y;
      acc[2] += scale * v.z;
      acc[3] += scale * v.w;
    } else {
      const __nv_bfloat16 *v = (const __nv_bfloat16 *)(rb + (i * CGRT_DCP_DV + c) * 2);
      for (int k = 0; k < 4; k++) acc[k] += scale * __bfloat162float(v[k]);
    }
  }
  for (int k = 0; k < 4; k++) o[k] = __float2bfloat16_rn(acc[k]);
  if (out_lse && threadIdx.x == 0) out_lse[i] = total;
}

// cgrt_dcp_transpose(src, dst, n_a, n_b, block_bytes, src_sa, src_sb, dst_sa, dst_sb)
//
// Copies n_a x n_b blocks of block_bytes bytes (a multiple of 4): block (a, b) from
// src + a src_sa + b src_sb to dst + a dst_sa + b dst_sb (byte offsets, 64-bit). The
// DCP step packs and unpacks per-rank slices with it. Grid: (n_b, n_a) CTAs of 128
// threads; 16-byte moves when every address and the size are 16-byte aligned.
extern "C" __global__ void __launch_bounds__(128) cgrt_dcp_transpose(const char *src, char *dst, int n_a, int n_b,
                                                                     long long block_bytes, long long src_sa,
                                                                     long long src_sb, long long dst_sa,
                                                                     long long dst_sb) {
  const long long a = blockIdx.y, b = blockIdx.x;
  if (a >= n_a || b >= n_b) return;
  const char *s = src + a * src_sa + b * src_sb;
  char *d = dst + a * dst_sa + b * dst_sb;
  if ((((uintptr_t)s | (uintptr_t)d | (uintptr_t)block_bytes) & 15) == 0) {
    for (long long k = threadIdx.x; k < block_bytes / 16; k += blockDim.x)
      ((uint4 *)d)[k] = ((const uint4 *)s)[k];
  } else {
    for (long long k = threadIdx.x; k < block_bytes / 4; k += blockDim.x)
      ((uint32_t *)d)[k] = ((const uint32_t *)s)[k];
  }
}
