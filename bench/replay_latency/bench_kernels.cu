// Kernels of the synthetic decode step timed by bench/replay_latency: one tiny block per
// node, each node reading its own bound input buffer and updating a shared accumulator,
// so consecutive nodes depend on each other. C references: replay_latency.cc.
extern "C" __global__ void bench_node(const float *in, float *acc) {
  unsigned t = threadIdx.x;
  acc[t] = acc[t] * 0.5f + in[t];
}

// The same with programmatic dependent launch: wait for the previous grid's memory, and
// let the next grid start its prologue early.
// The trigger comes first: the next grid may be scheduled at once, and its
// griddepcontrol.wait still waits for this whole grid to finish and flush its memory.
extern "C" __global__ void bench_node_pdl(const float *in, float *acc) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned t = threadIdx.x;
  acc[t] = acc[t] * 0.5f + in[t];
}
