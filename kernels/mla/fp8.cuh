// Building blocks of the FP8 e4m3 split kernels (kernels/mla/split_t64_fp8.cu: up to 16
// query rows per CTA; kernels/mla/split_t64_n64_fp8.cu: 17..64): the exact widening of
// e4m3 to f16, Q scaled per head row into f16 by a power of two, the f16 P store, and
// the f16 products (wgmma f32.f16.f16; mma.sync without sm_90a) over the shared-memory
// layout of kernels/mla/wgmma.cuh. Design: docs/mla_decode.md, "FP8 e4m3 KV cache".
#ifndef CGRT_KERNELS_MLA_FP8_CUH
#define CGRT_KERNELS_MLA_FP8_CUH

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kernels/mla/wgmma.cuh"

namespace cgrt_fp8 {

using namespace cgrt_wg;

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// Four e4m3 values as four f16 values (lo = values 0, 1), exact.
__device__ __forceinline__ void e4m3x4_to_f16x4(uint32_t w, uint32_t &lo, uint32_t &hi) {
  const __half2_raw a = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const __half2_raw b = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  lo = *reinterpret_cast<const uint32_t *>(&a);
  hi = *reinterpret_cast<const uint32_t *>(&b);
}

// Q of a head row (landed in shared memory: this thread's 9 chunks of row crow, column
// blocks QB bytes apart) to f16 in place, times 2^(14 - e) with 2^e <= max |q| of the head
// < 2^(e + 1) (the 8 threads of a head row are 8 consecutive lanes), so that every value
// stays in f16 range; s_qinv[qrow] = 2^(e - 14) scales S back (written by the row's first
// lane).
template <int QB>
__device__ __forceinline__ void q_to_f16(uint32_t s_q, int crow, int cch, float *s_qinv, int qrow) {
  uint4 v[9];
  float mx = 0.f;
#pragma unroll
  for (int cb = 0; cb < 9; cb++) {
    v[cb] = ld_shared_v4(s_q + cb * QB + swz(crow, cch));
    const uint32_t w[4] = {v[cb].x, v[cb].y, v[cb].z, v[cb].w};
#pragma unroll
    for (int e = 0; e < 4; e++)
      mx = fmaxf(mx, fmaxf(fabsf(__uint_as_float(w[e] << 16)), fabsf(__uint_as_float(w[e] & 0xffff0000u))));
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
  int ex = (int)((__float_as_uint(mx) >> 23) & 0xffu) - 127; // floor(log2 max) (max > 0 normal)
  ex = mx > 0.f ? max(ex, -112) : 14; // all zero (a padding head): 1; sc, 1 / sc normal
  const float sc = __uint_as_float((uint32_t)(127 + 14 - ex) << 23);
  if (cch == 0) s_qinv[qrow] = __uint_as_float((uint32_t)(127 - 14 + ex) << 23);
#pragma unroll
  for (int cb = 0; cb < 9; cb++) {
    const uint32_t w[4] = {v[cb].x, v[cb].y, v[cb].z, v[cb].w};
    uint32_t h[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const __half2 t = __floats2half2_rn(__uint_as_float(w[e] << 16) * sc, __uint_as_float(w[e] & 0xffff0000u) * sc);
      h[e] = *reinterpret_cast<const uint32_t *>(&t);
    }
    st_shared_v4(s_q + cb * QB + swz(crow, cch), h[0], h[1], h[2], h[3]);
  }
}
__device__ __forceinline__ void st_shared_f16(uint32_t addr, float v) {
  const __half h = __float2half_rn(v);
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(*reinterpret_cast<const unsigned short *>(&h)) : "memory");
}

#if CGRT_WG_HAS_WGMMA
// D[64 x 16] (+)= A[64 x 16] . B[16 x 16] in f16 (wgmma_m64n16 of kernels/mla/wgmma.cuh).
template <int TA>
__device__ __forceinline__ void wgmma_f16_m64n16(float (&d)[8], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7"
      "}, %8, %9, p, 1, 1, %11, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA));
}
// D[64 x 32] (+)= A[64 x 16] . B[16 x 32] in f16, B K-major; A K-major (TA = 0) or
// MN-major (TA = 1).
template <int TA>
__device__ __forceinline__ void wgmma_f16_m64n32(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
      "}, %16, %17, p, 1, 1, %19, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA));
}
#else
__device__ __forceinline__ void mma16816_f16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// The f16 products of t64_pv_run / t64_pv_tiles (kernels/mla/t64.cuh): 16 heads (m64n16)
// or 32 (m64n32) per warpgroup.
struct T64F16 {
#if CGRT_WG_HAS_WGMMA
  static __device__ __forceinline__ void wg(float (&d)[8], uint64_t da, uint64_t db) {
    wgmma_f16_m64n16<1>(d, da, db, 1);
  }
  static __device__ __forceinline__ void wg(float (&d)[16], uint64_t da, uint64_t db) {
    wgmma_f16_m64n32<1>(d, da, db, 1);
  }
#else
  static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    mma16816_f16(c, a, b0, b1);
  }
#endif
};

}  // namespace cgrt_fp8

#endif
