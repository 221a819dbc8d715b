/* Device-side patching of a graph's kernel nodes (cgrt_graphs_options.device_patch):
 * the layout shared by the patch kernel (kernels/graph_patch.cu), its C reference
 * (kernels/graph_patch_ref.c) and the host side (graphs/device_patch.c). Internal. */
#ifndef CGRT_KERNELS_GRAPH_PATCH_H
#define CGRT_KERNELS_GRAPH_PATCH_H

/* One patched site of a device-updatable kernel node: the new value is the group's
 * value + delta (a moved buffer's new address + the offset of the pointer inside it;
 * for the num_reqs group, num_reqs + 0), written as `size` bytes at byte `offset` of
 * the node's packed parameters (cudaGraphKernelNodeSetParam takes that byte offset: a
 * pointer parameter, or an 8-byte word inside a struct parameter). 24 bytes, written once
 * per bucket into the patch node's parameters (or device memory, below). */
typedef struct cgrt__dpatch_site {
  unsigned long long node;  /* cudaGraphDeviceNode_t of the node */
  unsigned long long delta;
  unsigned int offset;
  unsigned int size;        /* 4 or 8 */
} cgrt__dpatch_site;

/* Where the sites live. The patch kernel of a bucket takes its whole site table in its
 * kernel parameters when it fits (CUDA 12.1+ allows 32764 bytes of parameters on Volta
 * and newer): one kernel per parameter size class, the smallest class that holds the
 * table; the table then needs no device memory of cgrt's own. Parameters of class
 * `bytes` (a cgrt__dpatch_params_<name> struct, `bytes` bytes in all):
 *   unsigned long long ring;     the mailbox (below)
 *   unsigned cap, slots;         entries per slot, slots
 *   unsigned sites_off, nsites;  where the sites start in table[], how many
 *   unsigned char table[bytes - CGRT__DPATCH_PARAMS_HEAD]:
 *     unsigned group_start[cap + 1], then (8-aligned, at sites_off) cgrt__dpatch_site[nsites].
 * A table larger than the largest class goes to device memory (cuMemAlloc) and the
 * bucket's patch node is cgrt_graph_patch(sites, group_start, ring, cap, slots).
 * The list of classes, X(name, bytes), smallest first: */
#define CGRT__DPATCH_PARAM_CLASSES(X) \
  X(1k, 1024)                         \
  X(2k, 2048)                         \
  X(3k, 3072)                         \
  X(4k, 4096)                         \
  X(6k, 6144)                         \
  X(8k, 8192)                         \
  X(12k, 12288)                       \
  X(16k, 16384)                       \
  X(24k, 24576)                       \
  X(32k, 32760)
#define CGRT__DPATCH_PARAMS_HEAD 24
#define CGRT__DPATCH_PARAMS_STRUCT(name, bytes)                  \
  typedef struct cgrt__dpatch_params_##name {                    \
    unsigned long long ring;                                     \
    unsigned int cap, slots, sites_off, nsites;                  \
    unsigned char table[(bytes) - CGRT__DPATCH_PARAMS_HEAD];     \
  } cgrt__dpatch_params_##name;
CGRT__DPATCH_PARAM_CLASSES(CGRT__DPATCH_PARAMS_STRUCT)
#undef CGRT__DPATCH_PARAMS_STRUCT

/* The mailbox of one bucket, in pinned host memory the GPU reads through unified
 * addressing: a ring of `slots` slots (a power of two, CGRT__DPATCH_MIN_SLOTS to
 * CGRT__DPATCH_MAX_SLOTS, about 64 KB), one per launch, after a header.
 *
 * The launch number comes from the mailbox itself: launch q of the bucket's executable
 * stores q + 1 into `consumed` once it has read its slot, and the driver runs the
 * launches of one executable in order, each after the previous one completed
 * (cuGraphLaunch: "ordered behind ... any previous launches of hGraphExec"), whatever
 * stream each was launched on. So when launch q's patch node starts, `consumed` holds q:
 * no device counter. This holds for every launch of the executable, the bare launches of
 * cgrt_graphs_bucket_exec included, as long as each launch has its slot written before it
 * (a step; gx_dpatch_reserve for bare launches) and no launch is left out.
 *
 * Launch q reads slot q % slots, which the host wrote before cuGraphLaunch: the groups
 * that moved since the previous launch. The host never overwrites a slot that a pending
 * launch has yet to read (it waits for `consumed`). `moved` describes the latest launch k
 * whose slot the host filled with moves: (n << 32) | (k + 1), n its number of entries (0:
 * none yet), one 8-byte store after the slot and before that launch. The patch node reads
 * the header's first 16 bytes in one read over the bus; with L = (unsigned)moved:
 *   - L - q - 1 >= slots (unsigned): neither launch q nor a later one queued behind it has
 *     moves; nothing more to read (the common case: one read);
 *   - L == q + 1: launch q is the latest with moves: its count is moved >> 32, and only its
 *     entries are read from the slot (two dependent reads in all);
 *   - else a later launch has moves too: the slot's count is read, then its entries.
 * Groups are the registered buffers (id) and, last, num_reqs of the metadata kernels; the
 * sites of group g are sites[group_start[g] .. group_start[g + 1]). */
#define CGRT__DPATCH_MIN_SLOTS 32
#define CGRT__DPATCH_MAX_SLOTS 256
#define CGRT__DPATCH_HEADER 64 /* bytes before slot 0 */
#define CGRT__DPATCH_MAX_GROUPS 1022

typedef struct cgrt__dpatch_ring {
  volatile unsigned int consumed;   /* written by the GPU: launches that have read their slot */
  unsigned int pad;
  volatile unsigned long long moved; /* written by the host, one 8-byte store (see above) */
  unsigned int cap;                 /* entries per slot (= groups of the bucket) */
  unsigned int stride;              /* bytes per slot */
  unsigned int slots;
} cgrt__dpatch_ring;

/* Slot layout at ring + CGRT__DPATCH_HEADER + s * stride:
 *   unsigned n; unsigned pad; unsigned long long value[cap]; unsigned group[cap]. */
#define CGRT__DPATCH_SLOT_BYTES(cap) ((8u + 12u * (unsigned)(cap) + 63u) & ~63u)

#endif
