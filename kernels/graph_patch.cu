// Device-side patching of kernel-node parameters (cgrt_graphs_options.device_patch).
//
// The patch kernel runs as the first node of a graph whose other kernel nodes that point
// into registered buffers are device-updatable (CUDA 12.4+). Each launch reads the
// mailbox header (kernels/graph_patch.h): its launch number q (`consumed`) and whether
// launch q or a later one has moves (`moved`), in one 16-byte read over the bus. Only
// then does it read slot q % slots (the groups that moved since the previous launch,
// written by the host into pinned memory before cuGraphLaunch, no driver call), tell the
// host the slot is free again, and write value + delta into every site of those groups
// with the device runtime's cudaGraphKernelNodeSetParam, one thread per site, before
// those nodes launch (they all depend on this one). The updates persist in the
// executable graph until overwritten.
//
// The site table is in the kernel's parameters (cgrt_graph_patch_<class>, a
// __grid_constant__ struct: read in place, no copy), or, when too large for them, in
// device memory (cgrt_graph_patch, also the capture-time stub with null pointers).
//
// This file is compiled with -rdc and linked against libcudadevrt (see kernels/BUILD),
// for sm_ targets only: a device without SASS here simply has no device patching.
// Reference: graph_patch_ref.c.
#include "kernels/graph_patch.h"

static __device__ __forceinline__ void patch(const cgrt__dpatch_site *sites, const unsigned *group_start,
                                             unsigned char *ring, unsigned cap, unsigned slots) {
  __shared__ unsigned s_q, s_n, s_total;
  __shared__ unsigned long long s_value[256];
  __shared__ unsigned s_first[256], s_end[256];
  volatile unsigned *consumed = reinterpret_cast<volatile unsigned *>(ring);
  const unsigned slot_bytes = CGRT__DPATCH_SLOT_BYTES(cap);
  if (threadIdx.x == 0) {
    // One read over the bus for the common case: {consumed = q, pad, moved}.
    unsigned long long hx, hy;  // one 16-byte volatile load
    asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(hx), "=l"(hy) : "l"(ring) : "memory");
    const ulonglong2 h = make_ulonglong2(hx, hy);
    const unsigned q = static_cast<unsigned>(h.x), last = static_cast<unsigned>(h.y);
    s_q = q;
    unsigned n = 0;
    if (last == q + 1u) {  // launch q is the latest with moves: its count is in the header
      n = static_cast<unsigned>(h.y >> 32);
    } else if (last - q - 1u < slots) {  // a queued later launch has moves too: read the count
      const unsigned char *slot = ring + CGRT__DPATCH_HEADER + (unsigned long long)(q % slots) * slot_bytes;
      n = *reinterpret_cast<const volatile unsigned *>(slot);
    }
    s_n = n < cap ? n : cap;
    if (s_n == 0) *consumed = q + 1;
  }
  __syncthreads();
  const unsigned n = s_n, q = s_q;
  if (n == 0) return;
  const unsigned char *slot = ring + CGRT__DPATCH_HEADER + (unsigned long long)(q % slots) * slot_bytes;
  const volatile unsigned long long *value = reinterpret_cast<const volatile unsigned long long *>(slot + 8);
  const volatile unsigned *group = reinterpret_cast<const volatile unsigned *>(slot + 8 + 8ull * cap);
  for (unsigned base = 0; base < n; base += blockDim.x) {
    const unsigned m = n - base < blockDim.x ? n - base : blockDim.x;
    const unsigned j = base + threadIdx.x;
    if (threadIdx.x < m) {
      const unsigned g = group[j];
      s_value[threadIdx.x] = value[j];
      s_first[threadIdx.x] = group_start[g];
      s_end[threadIdx.x] = group_start[g + 1] - group_start[g];  // count; prefix below
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (base + blockDim.x >= n) *consumed = q + 1;  // every read of the slot is done
      unsigned t = 0;
      for (unsigned e = 0; e < m; e++) {
        t += s_end[e];
        s_end[e] = t;  // inclusive prefix: sites of entries 0..e
      }
      s_total = t;
    }
    __syncthreads();
    // Every (entry, site) pair in parallel: one thread per site update.
    const unsigned total = s_total;
    for (unsigned u = threadIdx.x; u < total; u += blockDim.x) {
      unsigned lo = 0, hi = m - 1;  // first entry with s_end[e] > u
      while (lo < hi) {
        const unsigned mid = (lo + hi) >> 1;
        if (s_end[mid] > u) hi = mid; else lo = mid + 1;
      }
      const unsigned k = u - (lo ? s_end[lo - 1] : 0u);
      const cgrt__dpatch_site st = sites[s_first[lo] + k];
      const unsigned long long val = s_value[lo] + st.delta;
      cudaGraphKernelNodeSetParam((cudaGraphDeviceNode_t)st.node, st.offset, &val, st.size);
    }
    __syncthreads();
  }
}

// The table in device memory (too large for the parameters), and the capture-time stub.
extern "C" __global__ void __launch_bounds__(256)
    cgrt_graph_patch(const cgrt__dpatch_site *sites, const unsigned *group_start, unsigned char *ring,
                     unsigned cap, unsigned slots) {
  if (sites == nullptr || ring == nullptr) return;  // as captured, before the set filled the parameters
  patch(sites, group_start, ring, cap, slots);
}

// The table in the parameters, one kernel per size class.
#define CGRT__DPATCH_KERNEL(name, bytes)                                                               \
  extern "C" __global__ void __launch_bounds__(256)                                                    \
      cgrt_graph_patch_##name(const __grid_constant__ cgrt__dpatch_params_##name p) {                  \
    if (p.ring == 0) return;                                                                           \
    patch(reinterpret_cast<const cgrt__dpatch_site *>(p.table + p.sites_off),                          \
          reinterpret_cast<const unsigned *>(p.table), reinterpret_cast<unsigned char *>(p.ring), p.cap, \
          p.slots);                                                                                    \
  }
CGRT__DPATCH_PARAM_CLASSES(CGRT__DPATCH_KERNEL)
#undef CGRT__DPATCH_KERNEL
