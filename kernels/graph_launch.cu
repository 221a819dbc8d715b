// Device-launched replay (cgrt_graphs_options.device_launch): the launcher and the step
// graphs' last node. Protocol and layout: kernels/graph_launch.h.
//
// cgrt_graph_launcher is the only node of the set's scheduler graph, instantiated for
// device launch. One thread polls the pinned `go` word; for the next step it launches
// that step's executable fire-and-forget and relaunches the scheduler as its own tail
// launch, which starts once the step's graph has completed, so steps run one after the
// other and the launcher spins only between them. After idle_ns without a step it exits.
//
// This file is compiled with -rdc and linked against libcudadevrt (see kernels/BUILD),
// for sm_ targets only: a device without SASS here has no device-launched replay.
// Reference: graph_launch_ref.c.
#include "kernels/graph_launch.h"

static __device__ __forceinline__ unsigned long long gl_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ __forceinline__ unsigned long long gl_load(const volatile unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ void gl_store(volatile unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

extern "C" __global__ void cgrt_graph_launcher(cgrt__dl_ctl *ctl, cgrt__dl_state *st, unsigned long long idle_ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  gl_store(&ctl->runs, ctl->runs + 1);
  const unsigned long long last = st->last;
  const unsigned long long t0 = gl_timer();
  for (;;) {
    const unsigned long long g = gl_load(&ctl->go);
    if (g == CGRT__DL_QUIT) {
      gl_store(&ctl->exited, last + 1);
      return;
    }
    if (g > last) break;
    if (gl_timer() - t0 >= idle_ns) {
      // Idle: announce the exit, then look at go once more. The host stores go, fences,
      // then reads exited; with a full fence on both sides one of them sees the other's
      // store, so a step triggered now is taken here or restarts the launcher there.
      gl_store(&ctl->exited, last + 1);
      asm volatile("fence.sc.sys;" ::: "memory");
      const unsigned long long g2 = gl_load(&ctl->go);
      if (g2 == CGRT__DL_QUIT || g2 <= last) return;
      gl_store(&ctl->exited, 0);
      break;
    }
    __nanosleep(64);
  }
  const unsigned long long q = last + 1;
  const cudaGraphExec_t x = reinterpret_cast<cudaGraphExec_t>(ctl->exec[q % CGRT__DL_SLOTS]);
  st->last = q;
  st->current = q;
  __threadfence();
  gl_store(&ctl->started, q);
  gl_store(&ctl->launch_ns, gl_timer());
  cudaError_t e = cudaGraphLaunch(x, cudaStreamGraphFireAndForget);
  if (e != cudaSuccess) {
    if (ctl->err == 0) gl_store(&ctl->err, CGRT__DL_ERR(q, CGRT__DL_ERR_STEP_LAUNCH, e));
    gl_store(&ctl->done, q);  // the host's wait ends and reports err
  }
  e = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
  if (e != cudaSuccess) {
    if (ctl->err == 0) gl_store(&ctl->err, CGRT__DL_ERR(q, CGRT__DL_ERR_RELAUNCH, e));
    gl_store(&ctl->exited, q + 1);  // the host restarts it
  }
}

// The last node of every step graph of a device-launched set: the step is complete.
extern "C" __global__ void cgrt_graph_step_done(cgrt__dl_ctl *ctl, const cgrt__dl_state *st) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  __threadfence_system();
  gl_store(&ctl->done_ns, gl_timer());
  gl_store(&ctl->done, *reinterpret_cast<const volatile unsigned long long *>(&st->current));
}
