// Kernels of the tests' synthetic host engine (foreign to cgrt; tests/common/synth_engine.h),
// loaded with cgrt_module_load. Their C references, with the same semantics, are in
// synth_kernels.cc, registered for the emulation by synth::register_refs.

// One "attention" row per thread: inert when seq_len is 0 (output 0, no KV write).
extern "C" __global__ void synth_attn(int rows, const int *seq_lens, const long long *positions,
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

extern "C" __global__ void synth_scale(int n, const float *in, float *out, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * a + 1.0f;
}

// Pointers inside a struct parameter, as PyTorch passes its tensors (TensorIterator's
// Array<char*, N>, TensorInfo): 32 bytes, 8-byte aligned; synth::Pair (synth_kernels.h)
// is the host's view of it.
struct SynthPair {
  int n;
  int pad;  // set by the host; nonzero makes the first word look like an address
  const float *a;
  float *b;
  long long stride;  // elements between two reads of a
};

extern "C" __global__ void synth_pair(SynthPair p, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.b[i] = p.a[(long long)i * p.stride] * s + (float)p.pad;
}
