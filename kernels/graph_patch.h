/* Device-side patching of a graph's kernel nodes (cgrt_graphs_options.device_patch):
 * the layout shared by the patch kernel (kernels/graph_patch.cu), its C reference
 * (kernels/graph_patch_ref.c) and the host side (graphs/device_patch.c). Internal. */
#ifndef CGRT_KERNELS_GRAPH_PATCH_H
#define CGRT_KERNELS_GRAPH_PATCH_H

/* One patched site of a device-updatable kernel node: the new value is the group's
 * value + delta (a moved buffer's new address + the offset of the pointer inside it;
 * for the num_reqs group, num_reqs + 0), written as `size` bytes at byte `offset` of
 * the node's packed parameters (cudaGraphKernelNodeSetParam takes that byte offset: a
 * pointer parameter, or an 8-byte word inside a struct parameter). 24 bytes, in device
 * memory, written once per bucket. */
typedef struct cgrt__dpatch_site {
  unsigned long long node;  /* cudaGraphDeviceNode_t of the node */
  unsigned long long delta;
  unsigned int offset;
  unsigned int size;        /* 4 or 8 */
} cgrt__dpatch_site;

/* The mailbox of one bucket, in pinned host memory the GPU reads through unified
 * addressing: a ring of `slots` slots (a power of two, CGRT__DPATCH_MIN_SLOTS to
 * CGRT__DPATCH_MAX_SLOTS, about 64 KB), one per launch. Launch number q (the patch
 * kernel counts its launches in device memory) reads slot q % slots,
 * which the host wrote before cuGraphLaunch: the groups that moved since the previous
 * launch. The kernel then stores q + 1 into `consumed`, so the host never overwrites a
 * slot that a pending launch has yet to read. Groups are the registered buffers (id)
 * and, last, num_reqs of the metadata kernels; the sites of group g are
 * sites[group_start[g] .. group_start[g + 1]). */
#define CGRT__DPATCH_MIN_SLOTS 32
#define CGRT__DPATCH_MAX_SLOTS 256
#define CGRT__DPATCH_HEADER 64 /* bytes before slot 0 */
#define CGRT__DPATCH_MAX_GROUPS 1022

typedef struct cgrt__dpatch_ring {
  volatile unsigned int consumed; /* written by the GPU */
  unsigned int cap;               /* entries per slot (= groups of the bucket) */
  unsigned int stride;            /* bytes per slot */
  unsigned int slots;
} cgrt__dpatch_ring;

/* Slot layout at ring + CGRT__DPATCH_HEADER + s * stride:
 *   unsigned n; unsigned pad; unsigned long long value[cap]; unsigned group[cap]. */
#define CGRT__DPATCH_SLOT_BYTES(cap) ((8u + 12u * (unsigned)(cap) + 63u) & ~63u)

#endif
