// MLA decode: the value up-projection after the merge (cgrt_mla_options.v_head_dim; host
// side kernels/mla/plan.c, C reference kernels/mla/ref.c, design docs/mla_decode.md, "The
// value projection").
//
//   cgrt_mla_vproj   out[r, h, c] = sum_k bf16 O[r, h, k] x W[h, k, c], fp32 sums, bf16 out
//                    (O: the step's latent output, [rows, qh, 512]; W: w_uv, [qh, 512, dv]).
//
// Grid (qh, dv / 32, ceil(rows / 64)), 128 threads: CTA (h, n, z) computes columns
// [32 n, 32 n + 32) of head h for rows [64 z, 64 z + 64). Its 32 KiB slice of W is a
// weight, written by nothing in the step, so the CTA loads it into shared memory BEFORE
// its programmatic wait: launched with programmatic stream serialization behind the merge
// (combine or split kernel), the CTAs land while the merge runs and the weight read is off
// the critical path; after the wait only O (a few KiB per CTA, in L2) is read. The
// products are tensor-core mma.sync m16n8k16 (bf16 in, fp32 accumulate): warp w sums
// k in [128 w, 128 w + 128) for every 16-row tile of the CTA, and the four warps' sums
// meet in shared memory in a fixed order (deterministic). Rows past `rows` read as 0 and
// are not written; padding rows (O = 0) give 0.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"  // cgrt_mla::mma16816

namespace {

using cgrt_mla::mma16816;

constexpr int DV = CGRT_MLA_DV;           // 512: the latent width (K of the product)
constexpr int NC = CGRT_MLA_VPROJ_COLS;   // 32 output columns per CTA
constexpr int RT = CGRT_MLA_VPROJ_ROWS;   // 64 rows per CTA (4 tiles of 16)
constexpr int WP = DV + 8;                // padded row of the transposed W slice (bf16):
                                          // 1040 bytes, 4 banks apart per column
constexpr int RP = NC + 8;                // padded row of the reduction (floats): conflict-free float2
constexpr int KW = DV / 4;                // k per warp
static_assert(NC * WP * 2 <= CGRT_MLA_VPROJ_SMEM && 4 * RT * RP * 4 <= CGRT_MLA_VPROJ_SMEM,
              "cgrt_mla_vproj: shared memory layout");

} // namespace

extern "C" __global__ void __launch_bounds__(128)
    cgrt_mla_vproj(const __nv_bfloat16 *__restrict__ lat, const __nv_bfloat16 *__restrict__ w,
                   __nv_bfloat16 *__restrict__ out, int rows, int qh, int dv) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t *wt = reinterpret_cast<uint16_t *>(smem);  // [NC][WP]: W[h][k][c0 + n] at wt[n][k]
  float *red = reinterpret_cast<float *>(smem);       // after the products: [4][RT][RP]
  const int h = blockIdx.x, c0 = blockIdx.y * NC, r0 = blockIdx.z * RT;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;

  // 1. The W slice, transposed into shared memory (before the wait: W is a weight). Each
  // warp takes 32 consecutive k of one 8-column chunk: the scattered 2-byte stores of a
  // warp fall in 16 words of one row.
  const __nv_bfloat16 *wh = w + (long long)h * DV * dv + c0;
#pragma unroll 4
  for (int it = 0; it < DV * (NC / 8) / 128; it++) {
    const int idx = it * 128 + tid, k = idx % DV, j = (idx / DV) * 8;
    const uint4 v = __ldg(reinterpret_cast<const uint4 *>(wh + (long long)k * dv + j));
    const uint16_t *e = reinterpret_cast<const uint16_t *>(&v);
#pragma unroll
    for (int u = 0; u < 8; u++) wt[(j + u) * WP + k] = e[u];
  }
  __syncthreads();

  // 2. Wait for the merge (programmatic dependent launch; a no-op when launched plainly).
  cgrt_mla::pdl_wait();

  const int nm = min(RT / 16, (rows - r0 + 15) / 16); // 16-row tiles in use
  float acc[4][4][4];
#pragma unroll
  for (int m = 0; m < 4; m++)
#pragma unroll
    for (int n = 0; n < 4; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[m][n][i] = 0.f;
  const int kb = warp * KW;
#pragma unroll
  for (int m = 0; m < 4; m++) {
    if (m >= nm) break;
    const int ra = r0 + m * 16 + g, rb = ra + 8;
    const uint32_t *pa = reinterpret_cast<const uint32_t *>(lat + ((long long)ra * qh + h) * DV + kb) + t;
    const uint32_t *pb = reinterpret_cast<const uint32_t *>(lat + ((long long)rb * qh + h) * DV + kb) + t;
    uint32_t a[KW / 16][4];
#pragma unroll
    for (int s = 0; s < KW / 16; s++) {  // A fragments: (row g | g + 8, k 2t | 2t + 8) of each k step
      a[s][0] = ra < rows ? __ldcg(pa + s * 8) : 0u;
      a[s][1] = rb < rows ? __ldcg(pb + s * 8) : 0u;
      a[s][2] = ra < rows ? __ldcg(pa + s * 8 + 4) : 0u;
      a[s][3] = rb < rows ? __ldcg(pb + s * 8 + 4) : 0u;
    }
#pragma unroll
    for (int s = 0; s < KW / 16; s++)
#pragma unroll
      for (int n = 0; n < 4; n++) {  // B fragment: (k 2t | 2t + 8, column g) of tile n
        const uint16_t *bp = wt + (n * 8 + g) * WP + kb + s * 16 + 2 * t;
        mma16816(acc[m][n], a[s], *reinterpret_cast<const uint32_t *>(bp),
                 *reinterpret_cast<const uint32_t *>(bp + 8));
      }
  }

  // 3. The four warps' sums, in warp order.
  __syncthreads(); // every warp is done with wt: red overlays it
#pragma unroll
  for (int m = 0; m < 4; m++) {
    if (m >= nm) break;
#pragma unroll
    for (int n = 0; n < 4; n++) {
      float *p = red + ((size_t)warp * RT + m * 16 + g) * RP + n * 8 + 2 * t;
      *reinterpret_cast<float2 *>(p) = make_float2(acc[m][n][0], acc[m][n][1]);
      *reinterpret_cast<float2 *>(p + 8 * RP) = make_float2(acc[m][n][2], acc[m][n][3]);
    }
  }
  __syncthreads();
  for (int i = tid; i < nm * 16 * (NC / 8); i += 128) {
    const int rr = i / (NC / 8), cc = (i % (NC / 8)) * 8, r = r0 + rr;
    if (r >= rows) continue;
    float s[8];
#pragma unroll
    for (int u = 0; u < 8; u++) s[u] = 0.f;
#pragma unroll
    for (int wq = 0; wq < 4; wq++) {
      const float *p = red + ((size_t)wq * RT + rr) * RP + cc;
#pragma unroll
      for (int u = 0; u < 8; u++) s[u] += p[u];
    }
    __align__(16) __nv_bfloat16 o[8];
#pragma unroll
    for (int u = 0; u < 8; u++) o[u] = __float2bfloat16_rn(s[u]);
    *reinterpret_cast<uint4 *>(out + ((long long)r * qh + h) * dv + c0 + cc) = *reinterpret_cast<const uint4 *>(o);
  }
}
