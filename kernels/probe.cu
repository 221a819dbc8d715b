// Probe kernel: launched once by cgrt_runtime_create to prove the embedded code runs.
// Reference: kernels/probe_ref.c.
extern "C" __global__ void cgrt_probe(int *out, int value) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = value + (int)i;
}
