/* bf16 <-> fp32 on the host, as the GPU converts: round to nearest even, NaN kept NaN.
 * For the emulated NCCL's bf16 reductions (runtime/emu/emu_nccl.c) and the C references
 * of kernels/dcp/ (in runtime/, below both: runtime/ includes nothing of kernels/). */
#ifndef CGRT_RUNTIME_BF16_H
#define CGRT_RUNTIME_BF16_H

#include <stdint.h>
#include <string.h>

static inline float cgrt__bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t cgrt__f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

#endif
