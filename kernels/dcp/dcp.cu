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
// DCP step packs and unpacks per-rank slices with it. Grid: (n_a, n_b) CTAs of 128
// threads (n_a up to 2^31 - 1: the rows; n_b up to 65535: the ranks); 16-byte moves when
// every address and the size are 16-byte aligned.
extern "C" __global__ void __launch_bounds__(128) cgrt_dcp_transpose(const char *src, char *dst, int n_a, int n_b,
                                                                     long long block_bytes, long long src_sa,
                                                                     long long src_sb, long long dst_sa,
                                                                     long long dst_sb) {
  const long long a = blockIdx.x, b = blockIdx.y;
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

// cgrt_dcp_rescale(part, lse_all, rows, heads, world, rank, dst, out_lse)
//
// The local half of the reduce-scatter merge. part: this rank's partial outputs
// [rows][world x heads][512] bf16 over its shard; lse_all: every rank's LSEs as
// all-gathered, [world][rows][world x heads] fp32. For query head g = j x heads + h of a
// row, L = log(sum_w exp(lse_all[w][row][g])) (max-shifted; -inf when every rank's is
// -inf), and dst[j][row][h][:] = bf16(part[row][g][:] x exp(lse_own - L)), 0 where this
// rank's LSE is -inf (its partial is not read). Summing dst over the ranks (a
// reduce-scatter over j) gives the merged output of rank j's heads. out_lse (not NULL):
// [rows][heads], L of this rank's own heads (j = rank). Grid: rows x world x heads CTAs
// (item = (row x world + j) x heads + h) of 128 threads, 4 values per thread.
extern "C" __global__ void __launch_bounds__(128) cgrt_dcp_rescale(const __nv_bfloat16 *part, const float *lse_all,
                                                                   int rows, int heads, int world, int rank,
                                                                   __nv_bfloat16 *dst, float *out_lse) {
  const long long item = blockIdx.x;
  const long long qh = (long long)world * heads;
  const long long h = item % heads, j = (item / heads) % world, row = item / qh;
  if (row >= rows) return;
  const long long g = j * heads + h;
  float m = -INFINITY;
  for (int w = 0; w < world; w++) m = fmaxf(m, lse_all[((long long)w * rows + row) * qh + g]);
  float total = -INFINITY;
  if (m != -INFINITY) {
    float s = 0.f;
    for (int w = 0; w < world; w++) {
      const float l = lse_all[((long long)w * rows + row) * qh + g];
      if (l != -INFINITY) s += expf(l - m);
    }
    total = m + logf(s);
  }
  const float own = lse_all[((long long)rank * rows + row) * qh + g];
  const int c = threadIdx.x * 4;
  __nv_bfloat16 *o = dst + ((j * rows + row) * heads + h) * CGRT_DCP_DV + c;
  if (own == -INFINITY) {
    for (int k = 0; k < 4; k++) o[k] = __float2bfloat16_rn(0.f);
  } else {
    const float scale = expf(own - total);
    const __nv_bfloat16 *v = part + (row * qh + g) * CGRT_DCP_DV + c;
    for (int k = 0; k < 4; k++) o[k] = __float2bfloat16_rn(scale * __bfloat162float(v[k]));
  }
  if (out_lse && j == rank && threadIdx.x == 0) out_lse[row * heads + h] = total;
}
