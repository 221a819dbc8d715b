/* CPU emulation of the CUDA driver table: internal helpers for tests and reference
 * kernels (the table itself is cgrt__driver_emulated() in runtime/driver.h).
 * Internal header: not installed, not part of the public API. */
#ifndef CGRT_RUNTIME_EMU_EMU_H
#define CGRT_RUNTIME_EMU_EMU_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Live objects of the emulation: allocations (device and pinned host) + streams +
 * events + graphs (not counting conditional bodies) + executable graphs + modules.
 * Tests compare it before and after to find leaks. Thread-safe. */
size_t cgrt__emu_live_objects(void);

/* Graphs destroyed while a stream capture still recorded into them (a conditional body
 * a capture to graph fills, or its parent), since the process started. The emulation
 * then invalidates the capture; on the real driver that is undefined (it crashes), so
 * tests check that this stays put. Thread-safe. */
size_t cgrt__emu_graphs_freed_under_capture(void);

/* The device-side cudaGraphSetConditional(handle, value) for reference kernels: sets
 * the value of `handle` in the executable graph that the calling thread is running.
 * No effect outside a graph launch or for a handle the running graph does not own. */
void cgrt__emu_set_conditional(CUgraphConditionalHandle handle, unsigned value);

/* The device-side cudaGraphKernelNodeSetParam(node, offset, value, size) for reference
 * kernels: writes into the copy of the device-updatable kernel node `node` (the handle
 * cuGraphKernelNodeGetAttribute returned) in the executable graph that the calling
 * thread is running; later nodes of that launch and later launches see it. Returns 0, or
 * CUDA_ERROR_INVALID_VALUE (not inside a launch, unknown or not device-updatable node,
 * out of range). */
int cgrt__emu_graph_kernel_node_set_param(uint64_t node, size_t offset, const void *value,
                                          size_t size);

/* The device-side cudaGraphLaunch(exec, cudaStreamGraphFireAndForget) for reference
 * kernels: runs the executable graph `exec` to completion on the calling thread, as a
 * launch that the running graph waits for (the emulation's fire-and-forget work
 * completes before the launching kernel goes on, which keeps the device's order: a tail
 * launch starts after it). Returns 0, CUDA_ERROR_INVALID_VALUE (not called inside a graph
 * launch, unknown executable, or one not instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH, as the device runtime refuses it), or the
 * launch's own failure. */
int cgrt__emu_graph_launch_device(uint64_t exec);

/* The dependencies (incoming edges) of a graph node, in the order they were added:
 * writes up to `cap` of them to `deps` (may be NULL when cap is 0) and returns how many
 * there are; 0 for an unknown node. Test helper (the table has no cuGraphGetEdges). */
size_t cgrt__emu_node_dependencies(CUgraphNode node, CUgraphNode *deps, size_t cap);

/* Launch attributes recorded on a kernel node (cuLaunchKernelEx during capture):
 * writes up to `cap` of them and returns how many there are; 0 for other nodes. */
size_t cgrt__emu_node_launch_attributes(CUgraphNode node, CUlaunchAttribute *attrs, size_t cap);

/* The emulation's sanitizer (docs/emulation.md): launches that failed with
 * CUDA_ERROR_ILLEGAL_ADDRESS because a pointer parameter pointed into freed device
 * memory or a reference would have accessed memory outside every live allocation, since
 * the process started; and the calling thread's last such fault, described (kernel,
 * parameter or operand, address; "" before the first). Thread-safe. */
size_t cgrt__emu_faults(void);
const char *cgrt__emu_last_fault(void);

#ifdef __cplusplus
}
#endif
#endif
