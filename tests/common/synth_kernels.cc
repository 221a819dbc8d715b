// C references of synth_kernels.cu for the emulation (see synth_kernels.h).
#include "tests/common/synth_kernels.h"

#include <cstring>
#include <mutex>

#include "cgrt/cgrt_module.h"

// The fatbin of synth_kernels.cu (//tests/common:synth_fatbin): one module image per .cu file.
struct cgrt_test_synth_fatbin_entry {
  const char *source;
  const unsigned char *image;
  size_t size;
  int optional;
};
extern "C" const cgrt_test_synth_fatbin_entry cgrt_test_synth_fatbin[];

namespace synth {

const void *kernels_image() { return cgrt_test_synth_fatbin[0].image; }

namespace {

template <class T>
T param(const unsigned char *p, const size_t *off, int i) {
  T v;
  memcpy(&v, p + off[i], sizeof v);
  return v;
}
template <class T>
T *ptr_param(const unsigned char *p, const size_t *off, int i) {
  return reinterpret_cast<T *>(static_cast<uintptr_t>(param<uint64_t>(p, off, i)));
}

void attn_ref(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  int rows = param<int>(p, off, 0);
  const int *seq = ptr_param<const int>(p, off, 1);
  const long long *pos = ptr_param<const long long>(p, off, 2);
  const long long *slots = ptr_param<const long long>(p, off, 3);
  const float *x = ptr_param<const float>(p, off, 4);
  float *kv = ptr_param<float>(p, off, 5);
  float *out = ptr_param<float>(p, off, 6);
  for (int i = 0; i < rows; i++) {
    int s = seq[i];
    if (s <= 0) {
      out[i] = 0.0f;
      continue;
    }
    float v = x[i] * 2.0f + (float)s * 0.5f + (float)(pos[i] % 97) * 0.25f;
    if (slots[i] >= 0) kv[slots[i]] = v;
    out[i] = out[i] * 0.5f + v;
  }
}

void scale_ref(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  int n = param<int>(p, off, 0);
  const float *in = ptr_param<const float>(p, off, 1);
  float *out = ptr_param<float>(p, off, 2);
  float a = param<float>(p, off, 3);
  for (int i = 0; i < n; i++) out[i] = in[i] * a + 1.0f;
}

void pair_ref(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  Pair s = param<Pair>(p, off, 0);
  float scale = param<float>(p, off, 1);
  const float *a = (const float *)(uintptr_t)s.a;
  float *b = (float *)(uintptr_t)s.b;
  for (int i = 0; i < s.n; i++) b[i] = a[(int64_t)i * s.stride] * scale + (float)s.pad;
}

cgrt_status register_now() {
  const size_t attn[] = {4, 8, 8, 8, 8, 8, 8}, scale[] = {4, 8, 8, 4}, pair[] = {sizeof(Pair), 4};
  cgrt_status st = cgrt_emulated_kernel_register("synth_attn", 7, attn, attn_ref);
  if (st == CGRT_SUCCESS) st = cgrt_emulated_kernel_register("synth_scale", 4, scale, scale_ref);
  if (st == CGRT_SUCCESS) st = cgrt_emulated_kernel_register("synth_pair", 2, pair, pair_ref);
  return st;
}

}  // namespace

cgrt_status register_refs(bool again) {
  static std::once_flag once;
  static cgrt_status st = CGRT_SUCCESS;
  std::call_once(once, [] { st = register_now(); });
  return again ? register_now() : st;
}

}  // namespace synth
