// Kernels of the adversarial suite's synthetic host engine (foreign to cgrt), loaded with
// cgrt_module_load. The C references with the same semantics are in engine.cc, registered
// with cgrt_emulated_kernel_register for the emulation.

// One "attention" row per thread: inert when seq_len is 0 (output 0, no KV write).
extern "C" __global__ void adv_attn(int rows, const int *seq_lens, const long long *positions,
                                    const long long *slots, const float *x, float *kv, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  int s = seq_lens[i];
  if (s <= 0) {
    out[i] = 0.0f;
    return;
  }
  float v = x[i] * 2.0f + (float)s * 0.5f + (float)(positions[i] % 97) * 0.25f;
  long long sl = slots[i];
  if (sl >= 0) kv[sl] = v;
  out[i] = out[i] * 0.5f + v;
}

extern "C" __global__ void adv_scale(int n, const float *in, float *out, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * a + 1.0f;
}
