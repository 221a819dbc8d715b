// The kernels of the tests' synthetic host engine (synth_kernels.cu): their module image
// and their C references for the emulation. Public headers only.
//   synth_attn(rows, seq_lens, positions, slots, x, kv, out): one "attention" row per
//     thread, inert when seq_len is 0;
//   synth_scale(n, in, out, a): out = in * a + 1;
//   synth_pair(Pair p, s): p.b[i] = p.a[i * p.stride] * s + p.pad (pointers inside a
//     struct parameter).
#ifndef CGRT_TESTS_COMMON_SYNTH_KERNELS_H
#define CGRT_TESTS_COMMON_SYNTH_KERNELS_H

#include <cstdint>

#include "cgrt/cgrt_status.h"

namespace synth {

// The module image of synth_kernels.cu (for cgrt_module_load).
const void *kernels_image();

// The layout of synth_pair's struct parameter: 32 bytes, 8-byte aligned.
struct Pair {
  int32_t n;
  int32_t pad;
  uint64_t a, b;
  int64_t stride;
};
static_assert(sizeof(Pair) == 32, "Pair as the device packs it");

// Registers the C references of the three kernels (cgrt_emulated_kernel_register): once
// per process (later calls return the first one's status), or again when `again` is set.
cgrt_status register_refs(bool again = false);

}  // namespace synth

#endif
