// Building blocks of the token-major split kernels of 33..64 query rows per CTA, two
// warpgroups of the 32-row t64 arithmetic over one KV ring (kernels/mla/split_t64_n64.cu:
// bf16 cache; kernels/mla/split_t64_n64_fp8.cu: FP8 e4m3 cache, 17..64 rows): Q of the
// CTA's 64 query rows, the causal kernels' per-row token ends, and the end of a segment.
// 256 threads; copy roles crow = tid >> 3, cch = tid & 7 (Q rows crow and crow + 32).
#ifndef CGRT_KERNELS_MLA_N64_CUH
#define CGRT_KERNELS_MLA_N64_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"
#include "kernels/mla/t64.cuh"
#include "kernels/mla/wgmma.cuh"

namespace cgrt_n64 {

using namespace cgrt_wg;
using namespace cgrt_t64;

constexpr int kNW = 32;             // query rows per warpgroup
constexpr int kThreads = 256;       // two warpgroups
constexpr int kQW = 9 * kNW * 128;  // Q of one warpgroup: 9 column blocks of 32 rows (bf16 or f16)
constexpr int kPW = kNW * 128;      // P^T of one warpgroup (32 rows x 64 tokens, 16-bit)

// Q of the head group of row r (rows past nh zero) into s_q (warpgroup x's 32 rows at
// s_q + x kQW, the n32 layout), as cp.async of the calling thread (no commit).
__device__ __forceinline__ void n64_load_q(const bf16 *__restrict__ q, uint32_t s_q, int r, int qh, int h_begin,
                                           int nh, int crow, int cch) {
  const bf16 *qr = q + ((long long)r * qh + h_begin) * CGRT_MLA_D;
#pragma unroll
  for (int x = 0; x < 2; x++) {
    const int hr = crow + kNW * x;
    const bool ok = hr < nh;
#pragma unroll
    for (int cb = 0; cb < 9; cb++)
      cp_async16(s_q + x * kQW + cb * (kNW * 128) + swz(crow, cch),
                 ok ? qr + (long long)hr * CGRT_MLA_D + cb * 64 + cch * 8 : q, ok ? 16 : 0);
  }
}

// The _causal kernels (causal verify rows of a block run together: query row h of a
// request of length len sees cgrt__mla_row_len(len, cap, h / (qh / mk), mk, 1) tokens):
// the token end of each query row of the CTA, min(tend, that), in s_end as [warpgroup]
// [quad lane t4][head index h] (the thread's 8 columns contiguous), read per tile:
// long-lived registers here spill at 255. Threads 0..63 write; the caller's next
// barrier publishes it.
__device__ __forceinline__ void n64_row_ends(int *s_end, int tid, int qh, int mk, int h_begin, int tend, int len,
                                             int cap) {
  if (tid < 2 * kNW) {
    const int x = tid & (kNW - 1), t4 = (x >> 1) & 3, h = 2 * (x >> 3) + (x & 1);
    const int per = qh / mk, hq = min(h_begin + tid, qh - 1);
    s_end[(tid & kNW) + 8 * t4 + h] = min(tend, cgrt__mla_row_len(len, cap, hq / per, mk, 1));
  }
}
// Bit 2 h + b of the result: token row ta + 8 b of the tile (token tk + 8 b) counts for
// head index h of the thread (warpgroup w, quad lane lane & 3).
__device__ __forceinline__ uint32_t n64_row_mask(const int *s_end, int w, int lane, int tk) {
  const int4 *e4 = reinterpret_cast<const int4 *>(s_end + kNW * w + 8 * (lane & 3));
  const int4 ea = e4[0], eb = e4[1];
  const int e[8] = {ea.x, ea.y, ea.z, ea.w, eb.x, eb.y, eb.z, eb.w};
  uint32_t vm = 0u;
#pragma unroll
  for (int h = 0; h < 8; h++)
#pragma unroll
    for (int b = 0; b < 2; b++) vm |= (uint32_t)(tk + 8 * b < e[h]) << (2 * h + b);
  return vm;
}

// The end of a segment of row r (all 256 threads, after the last tile's products):
// t64_rows_out of kernels/mla/t64.cuh (the rows summed per warpgroup w through s_red_w,
// its 32 heads from kNW w; onum: 1, or kv_scale for the FP8 kernel) writes O^T x onum / l
// and the LSE to out / lse (nsplit == 1) or to partial slot r + p; under
// the counters strategy the CTA that arrives last for the row merges its nh heads
// (combine_heads, one warp per head, from global memory: the merge buffers of t64_merge
// do not fit beside a 64-row staging). s_stage ([64][kOStr] floats) lies over Q and the
// ring; ends with a __syncthreads, after which they are free again. EMPTY: a query row
// without tokens in the segment gets output 0 and LSE -inf (both merges weigh such a
// partial as 0).
template <bool EMPTY>
__device__ __forceinline__ void n64_finish(float (&o)[8][16], const float (&m)[8], float (&l)[8], int w,
                                           float onum, float *s_red_w, float *s_stage, int *s_last,
                                           bf16 *__restrict__ out,
                                           float *__restrict__ lse, float *__restrict__ part_o,
                                           float *__restrict__ part_lse, unsigned *__restrict__ counters, int r,
                                           int qh, int h_begin, int nh, int pf, int nsplit) {
  const int tid = threadIdx.x, g = blockIdx.x, G = gridDim.x;
  t64_rows_out<EMPTY, 16, 8, kThreads>(o, m, l, onum, kNW * w, (tid >> 5) & 3, s_red_w, s_stage, out, lse, part_o,
                                       part_lse, r, qh, h_begin, nh, nsplit);
  if (nsplit > 1 && counters != nullptr)
    cgrt_mla::last_cta_merge<kThreads, 0>(counters, part_o, part_lse, out, lse, r, qh, h_begin, h_begin + nh, g, G,
                                          r + pf, nsplit, s_last);
  __syncthreads(); // the staging is read before the next segment's loads
}

}  // namespace cgrt_n64

#endif
