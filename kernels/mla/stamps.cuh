// Phase stamps of the t64 split kernels (kernels/mla/split_t64.cu), for a diagnostic
// build only:
//   bazel build --config=gpu --define=cgrt_mla_stamps=1 //bench/mla_decode:mla_decode_bench
// (tools/cuda.bzl then passes -DCGRT_MLA_STAMPS=1 to nvcc). Without that define every
// macro here is empty and the kernels are the library's. With it, thread 0 of each CTA
// stores %globaltimer (ns) at the bounds of the CTA's phases into the module variable
// cgrt_mla_t64_stamps: one plain global store per stamp, no printf (a printf build ran
// 1.4x slower than the library's kernel: docs/mla_decode.md), and the benchmark
// (mla_decode_bench --stamps) reports the stamped build's time per call next to the
// stamps so that a reader can compare it with the library's. Row c = blockIdx.y x
// gridDim.x + blockIdx.x (c < CGRT_MLA_STAMP_CTAS) holds CGRT_MLA_STAMP_SLOTS values
// (kernels/mla/common.h):
//   0 entry; 1 after the wait at the kernel's top (the entry again with early reads,
//   which wait inside t64_walk); 2 exit; 3 segments run;
//   4 + 5 s + (0 .. 4), segment s < CGRT_MLA_STAMP_SEGS: its start, its first tile landed,
//   its last tile's products done, its finish done (the counters merge included), and
//   (row << 32) | tiles.
// Every launch overwrites its CTAs' rows; readers take the last launch's, zeroing the
// buffer before it.
#ifndef CGRT_KERNELS_MLA_STAMPS_CUH
#define CGRT_KERNELS_MLA_STAMPS_CUH

#include "kernels/mla/common.h"

#ifdef CGRT_MLA_STAMPS
extern "C" {
__device__ unsigned long long cgrt_mla_t64_stamps[CGRT_MLA_STAMP_CTAS * CGRT_MLA_STAMP_SLOTS];
}
namespace cgrt_stamps {
__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void put(int slot, unsigned long long v) {
  const int c = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0 && c < CGRT_MLA_STAMP_CTAS) cgrt_mla_t64_stamps[c * CGRT_MLA_STAMP_SLOTS + slot] = v;
}
}  // namespace cgrt_stamps
// The segment counter of a CTA (declared once, at the kernel's top).
#define CGRT_STAMP_DECL int cgrt_stamp_seg_ = 0
#define CGRT_STAMP(slot) cgrt_stamps::put((slot), cgrt_stamps::now())
// Stamp k (0..3) of the current segment.
#define CGRT_STAMP_SEG(k)                                                                   \
  do {                                                                                      \
    if (cgrt_stamp_seg_ < CGRT_MLA_STAMP_SEGS) cgrt_stamps::put(4 + 5 * cgrt_stamp_seg_ + (k), cgrt_stamps::now()); \
  } while (0)
// The end of the current segment: its row and tile count, then the next segment.
#define CGRT_STAMP_SEG_END(r, n)                                                            \
  do {                                                                                      \
    if (cgrt_stamp_seg_ < CGRT_MLA_STAMP_SEGS)                                                  \
      cgrt_stamps::put(4 + 5 * cgrt_stamp_seg_ + 4,                                         \
                       ((unsigned long long)(unsigned)(r) << 32) | (unsigned)(n));          \
    cgrt_stamp_seg_++;                                                                      \
  } while (0)
#define CGRT_STAMP_EXIT()                                                                   \
  do {                                                                                      \
    CGRT_STAMP(2);                                                                          \
    cgrt_stamps::put(3, (unsigned long long)cgrt_stamp_seg_);                               \
  } while (0)
#else
#define CGRT_STAMP_DECL (void)0
#define CGRT_STAMP(slot) (void)0
#define CGRT_STAMP_SEG(k) (void)0
#define CGRT_STAMP_SEG_END(r, n) (void)0
#define CGRT_STAMP_EXIT() (void)0
#endif

#endif
