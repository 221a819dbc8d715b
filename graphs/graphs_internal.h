/* Internal state of a graph set (graphs/). Not installed. */
#ifndef CGRT_GRAPHS_INTERNAL_H
#define CGRT_GRAPHS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cgrt/cgrt_graphs.h"
#include "kernels/graph_meta.h"
#include "kernels/graph_patch.h"
#include "runtime/handles.h"
#include "runtime/runtime_internal.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Moves remembered per set: a bucket that fell at most this many moves behind catches up
 * through the log (O(moves)), else by comparing every buffer (O(buffers)). */
#define GX_MOVE_LOG 256u

/* Bytes of the WHILE loops' state ({steps done, num_reqs}), owned by the set. */
#define GX_WHILE_STATE_BYTES 256
/* Most direct launches one cgrt_graphs_bucket_exec prepares (<= CGRT__DPATCH_MIN_SLOTS). */
#define GX_DIRECT_LAUNCHES 32
/* Parameter size classes of the patch kernel (kernels/graph_patch.h). */
#define GX_DPATCH_CLASS_COUNT(name, bytes) +1
#define GX_DPATCH_CLASSES (0 CGRT__DPATCH_PARAM_CLASSES(GX_DPATCH_CLASS_COUNT))

/* Most capture sizes per mode (options.num_capture_sizes, and the default sizes). */
#define GX_MAX_CAPTURE_SIZES 1024

/* Kinds of an indexed pointer site. */
enum { GX_SITE_KPARAM = 0, GX_SITE_MEMCPY_SRC = 1, GX_SITE_MEMCPY_DST = 2, GX_SITE_MEMSET_DST = 3 };

/* Classification of an 8-byte word of a kernel node's parameters, or of a memcpy/memset
 * node's pointer, at index time. */
enum {
  GX_PTR_NONE = 0,     /* not a pointer */
  GX_PTR_BUFFER = 1,   /* inside a registered buffer: patched when it moves */
  GX_PTR_KNOWN = 2,    /* inside a runtime allocation or a host-declared range */
  GX_PTR_UNKNOWN = 3,  /* looks like a device pointer, inside nothing known, and the
                          driver could not say what it is (whole 8-byte parameters only: a
                          word of a larger parameter may be integers) */
  GX_PTR_FOREIGN = 4   /* inside nothing cgrt knows, but a live device allocation to the
                          driver (e.g. a library's own workspace): its buffer id is kept */
};

/* Most bytes of a kernel's packed parameters the index takes (more: CGRT_ERROR_NOT_SUPPORTED):
 * site offsets are 16 bits. The driver's limit is 32764 bytes. */
#define GX_MAX_PARAM_BYTES 65535u

/* The dispatch tables of a set, one per kind of bucket: set->lut[slot][num_reqs] is 1 +
 * the index of the smallest captured bucket of that kind holding num_reqs requests (0:
 * none). A step mode's slot is gx_lut_of(mode); a bucket's is gx_exec.lut. */
typedef enum gx_lut_slot {
  GX_LUT_DECODE = 0,      /* CGRT_GRAPH_DECODE steps */
  GX_LUT_BLOCK = 1,       /* CGRT_GRAPH_BLOCK steps */
  GX_LUT_DRAFT = 2,       /* unrolled draft loops (decode buckets) */
  GX_LUT_DRAFT_WHILE = 3, /* draft loops as a conditional WHILE node (decode buckets) */
  GX_LUT_VERIFY = 4,      /* CGRT_GRAPH_VERIFY steps */
  GX_LUTS = 5
} gx_lut_slot;

/* A place in an executable graph that points into a registered buffer: an 8-byte word of
 * a kernel node's packed parameters (a pointer parameter, or 8 bytes of a struct) or a
 * memcpy/memset operand. */
typedef struct gx_site {
  uint32_t node;    /* index into knodes (kernel params) or mnodes (memcpy/memset) */
  uint16_t kind;    /* GX_SITE_* */
  uint16_t offset;  /* GX_SITE_KPARAM: byte offset of the word in the node's packed args */
  uint64_t delta;   /* value - buffer address at capture */
} gx_site;

/* Checked replay: an 8-byte word of a kernel node's parameters that pointed into known
 * memory other than a registered buffer at index time (GX_PTR_KNOWN, or GX_PTR_UNKNOWN for
 * a whole 8-byte parameter); checked before each launch. */
typedef struct gx_kword {
  uint16_t offset;  /* byte offset in the node's packed args */
  uint16_t param;   /* the parameter holding it (messages) */
  uint8_t kind;     /* GX_PTR_KNOWN, GX_PTR_UNKNOWN or GX_PTR_FOREIGN */
  uint64_t key;     /* identity of the range a GX_PTR_KNOWN word pointed into (gx_range_key),
                       the driver's buffer id for GX_PTR_FOREIGN */
} gx_kword;

/* A kernel node with its own copy of its parameters (patched in place). */
typedef struct gx_knode {
  CUgraphNode node;
  CUDA_KERNEL_NODE_PARAMS p; /* p.kernelParams == argv */
  void **argv;
  unsigned char *args;       /* packed parameter storage */
  uint32_t nparams;
  uint32_t *offsets;
  uint32_t *sizes;
  uint32_t nsites;           /* words of this node that are sites (point into a buffer) */
  gx_kword *words;           /* checked replay: the other pointer words, else NULL */
  uint32_t nwords;
  const char *name;          /* kernel name (driver-owned) or NULL */
  int dirty;
  int in_body;               /* inside a conditional body (WHILE draft loops) */
  uint64_t devnode;          /* device_patch: device-updatable node's handle, else 0 */
} gx_knode;

/* A memcpy or memset node. */
typedef struct gx_mnode {
  CUgraphNode node;
  int is_memset;
  CUDA_MEMCPY3D cp;
  CUDA_MEMSET_NODE_PARAMS ms;
  uint8_t src_kind, dst_kind; /* GX_PTR_* */
  uint64_t src_key, dst_key;  /* checked replay: as gx_kword.key */
  int dirty;
  int in_body;
} gx_mnode;

/* One bucket: a captured graph, its executable and its parameter index. */
typedef struct gx_exec {
  cgrt_graph_mode mode;
  gx_lut_slot lut;    /* the dispatch table that holds this bucket */
  int draft;          /* 1 for a draft-loop graph */
  int is_while;       /* 1 for a draft loop as a conditional WHILE node (draft is 1 too) */
  CUgraph body;       /* WHILE: the body graph (owned by the conditional node of graph) */
  int body_patch_refused; /* WHILE: the driver refused a body node update: re-instantiate */
  int rows, reqs;     /* bucket size */
  int captured;
  CUgraph graph;
  CUgraphExec exec;
  size_t nodes;
  gx_knode *knodes;
  size_t nk;
  gx_mnode *mnodes;
  size_t nm;
  uint32_t *site_start; /* [num_buffers + 1]: sites of buffer b are sites[site_start[b]..] */
  gx_site *sites;
  size_t nsites;
  CUdeviceptr *applied; /* [num_buffers]: addresses the executable uses now */
  uint64_t synced_gen;  /* set->gen when applied[] last caught up with set->current */
  uint32_t *dirty_k;    /* [nk] scratch list of dirty kernel nodes */
  uint32_t *dirty_m;    /* [nm] */
  uint32_t *meta_k;     /* kernel nodes of the graph-meta kernels that take num_reqs
                           (parameter CGRT__META_NUM_REQS; gx_meta_takes_reqs) */
  size_t nmeta;
  int last_reqs;        /* num_reqs the metadata nodes hold now */
  double capture_s, instantiate_s;
  size_t memory_bytes;
  size_t table_bytes, pinned_bytes; /* cgrt's own per-bucket memory (device patching) */
  size_t param_bytes;   /* device patching: the patch node's kernel parameters (its site table) */
  uint64_t replays;
  /* device_patch (graphs/device_patch.c): kernel sites patched on the device by the
   * graph's first node, which reads the moved groups from a mailbox in pinned memory. */
  int dpatch;           /* 1 when this bucket patches its kernel nodes on the device */
  uint32_t patch_k;     /* knodes index of the patch node */
  CUdeviceptr dmem;     /* device: cgrt__dpatch_site[] and group starts, when too large for the
                           patch node's parameters (else 0) */
  unsigned char *ring;  /* pinned host: the mailbox (cgrt__dpatch_ring + slots) */
  uint32_t dcap;        /* groups per slot: nbuf + 1 */
  uint32_t dslots;      /* mailbox slots (power of two) */
  uint32_t *dgroup_n;   /* [nbuf + 1]: device sites per group (buffers, then num_reqs) */
  uint64_t launches;    /* successful launches of this bucket (host side of the counter) */
  uint32_t *moved;      /* [nbuf]: buffers moved since the last successful launch */
  size_t nmoved;
  int reqs_moved;       /* num_reqs changed since the last successful launch */
  int dlaunch;          /* device_launch: instantiated for device launch, ends with the
                           step-done node: its steps are launched by the launcher */
} gx_exec;

/* device_launch (graphs/device_launch.c): the launcher, its control block and stream. */
typedef struct gx_dl {
  int enabled;                 /* the set launches steps from the device */
  CUfunction f_launcher, f_done;
  struct cgrt__dl_ctl *ctl;    /* pinned: go, exec slots; started, done, exited, err */
  CUdeviceptr state;           /* cgrt__dl_state */
  CUstream stream;             /* the launcher's own stream */
  CUevent ev;                  /* recorded after each host launch of the launcher */
  CUgraph graph;
  CUgraphExec exec;            /* the scheduler graph, instantiated for device launch */
  uint64_t go;                 /* the last step triggered */
  int running;                 /* a host launch of the launcher may still be in flight */
  int ev_stale;                /* ev was not recorded after the last start: ended() waits
                                  for the launcher's stream instead */
  int host_pending;            /* host-launched work of the set on the replay stream since
                                  the last device-launched step */
  int refused_logged;          /* a bucket could not be instantiated for device launch */
  uint64_t lost;               /* a step whose launch the host cannot tell any more (a driver
                                  failure in the exit handshake): the set is failed */
} gx_dl;

/* A capture of the capture stream that a failed cuStreamEndCapture left open. */
enum { GX_OPEN_NONE = 0, GX_OPEN_OWNED = 1, GX_OPEN_TO_GRAPH = 2 };

struct cgrt_graphs {
  cgrt_runtime *rt;
  const cgrt__driver *drv;
  cgrt_graphs_options o;
  pthread_mutex_t mu;
  CUstream cap_stream, own_stream, stream;
  int open_capture; /* GX_OPEN_*: see gx_capture_end */
  CUgraph open_parent; /* a WHILE draft graph whose body the open capture still records
                          into: destroyed once that capture has ended (gx_capture_abandon) */

  size_t nbuf;
  cgrt_buffer_desc *bufs; /* names owned */
  CUdeviceptr *current;   /* current address of each buffer */
  uint64_t gen;           /* bumped whenever a binding moves a buffer */
  uint32_t *move_log;     /* [GX_MOVE_LOG]: move_log[g % GX_MOVE_LOG] = buffer moved at gen g */
  size_t *cur_bytes;
  const cgrt_binding **copy_bind; /* scratch: copy-in bindings of this step, by buffer */

  gx_exec *execs; /* decode buckets (largest first), block buckets, draft loops */
  size_t nexec;
  uint32_t *lut[GX_LUTS]; /* [gx_lut_slot][max_num_seqs + 1] -> exec index + 1 (0: none) */

  CUfunction f_prepare, f_advance, f_while_begin, f_advance_while;
  CUfunction f_patch;       /* device_patch: the patch kernel (else NULL): the capture-time
                               stub, and the kernel of a table in device memory */
  CUfunction f_patch_cls[GX_DPATCH_CLASSES]; /* the kernels with the table in their parameters
                                                (kernels/graph_patch.h), NULL when missing */
  int dpatch_refused_logged;
  int dpatch_params_refused_logged; /* the driver refused a patch node's parameter table */
  CUdeviceptr while_state;  /* WHILE loops: {steps done, num_reqs} (set-owned, 256 bytes) */
  int while_unsupported;    /* the driver lacks conditional nodes: WHILE graphs skipped */
  int while_refuse_logged;
  CUresult flush_cu;        /* the CUresult of the last failed node update */
  int flush_in_body;        /* 1 when that node lies in a conditional body */

  cgrt_range *ranges; /* host-declared, names owned */
  uint64_t *range_key; /* [nranges]: driver buffer id of each range's allocation when declared */
  size_t nranges;
  cgrt__alloc_range *rt_ranges; /* scratch: the runtime's buffer registry (index, checked replay) */
  size_t rt_cap, nrt;
  unsigned char *rt_seen, *range_seen; /* checked replay: per-step verdicts on external ranges */
  /* checked replay: identity (driver buffer id) of the allocation that held current[b]
   * (all of its bytes) when that address became current, at create or by a binding; 0
   * when the driver knew no such allocation; GX_KEY_UNKNOWN when the driver call failed
   * (the next checked step asks again). */
  uint64_t *cur_key;
  CUresult check_cu; /* checked replay: a failed driver call met while checking pointers */

  int dcp_logged;
  gx_dl dl;
  cgrt_graphs_stats st;
  cgrt__child child; /* attached to the runtime: destroyed with it */
  int attached;
};

/* The files of graphs/ call each other in one direction only, from the public entry
 * points down (docs/replay.md, "The files of graphs/"). The declarations below go from
 * the bottom layer up: a file calls only the files declared above its own section. */

/* common.c: the clock, the check of a device range, the entry checks, a graph's nodes. */
/* Monotonic seconds. */
double gx_now(void);
/* 1 when [base, base + bytes) is a usable device range: base and bytes non-zero, and the
 * end at or below 2^64 (base + bytes does not wrap). Registered buffers, bindings and
 * declared ranges all pass it, so every later "v - base < bytes" test is exact. */
int gx_range_ok(CUdeviceptr base, size_t bytes);
/* Makes the set's runtime context current for a public entry point, after checking the
 * handle (CGRT_ERROR_INVALID_HANDLE naming `api`). */
cgrt_status gx_enter(cgrt_graphs *set, const char *api);
/* gx_enter, and CGRT_ERROR_CAPTURING on a thread that is capturing (a set's enqueue
 * callback under capture): the calls that launch, capture or take the set's lock. A step
 * of the capturing set itself would wait for its own lock; another set's work would run
 * outside the capture that the caller means to record. */
cgrt_status gx_enter_outside_capture(cgrt_graphs *set, const char *api);
/* A graph's nodes into a malloc'd array (*out, freed by the caller; *n their count,
 * possibly 0). The driver is never asked for an array of 0 entries (driver 580 refuses
 * one with CUDA_ERROR_INVALID_VALUE: an empty capture). CGRT_ERROR_DRIVER or
 * CGRT_ERROR_OUT_OF_MEMORY naming `api`, *out NULL. */
cgrt_status gx_graph_nodes(const cgrt__driver *d, CUgraph g, const char *api, CUgraphNode **out, size_t *n);

/* buckets.c: step modes, capture sizes and the dispatch tables (requests -> bucket). */
int gx_rows_per_req(const cgrt_graphs *set, cgrt_graph_mode mode);
/* 1 for the modes a step can take: decode, block, verify. */
int gx_is_step_mode(cgrt_graph_mode mode);
/* The dispatch table of a step mode. */
gx_lut_slot gx_lut_of(cgrt_graph_mode mode);
/* 1 when the set captures buckets of this step mode. */
int gx_mode_enabled(const cgrt_graphs *set, cgrt_graph_mode mode);
/* "decode", "block", "verify" (step modes). */
const char *gx_step_mode_name(cgrt_graph_mode mode);
/* A bucket's kind in messages: the step mode's name, "draft" or "draft-while". */
const char *gx_mode_name(const gx_exec *e);
cgrt_status gx_buckets_build(cgrt_graphs *set);
void gx_lut_build(cgrt_graphs *set);

/* ranges.c: the memory a set knows -- its buffers at their current addresses, the
 * runtime's buffer registry, the ranges the host declared, the set's own memory -- and
 * the identities of their allocations (checked replay). */
/* 1 when v lies inside device memory the set owns itself (the WHILE loop state). */
int gx_set_owned(const cgrt_graphs *set, CUdeviceptr v);
/* The buffer that holds v at the addresses addr[] (the lowest id when several do), or -1. */
int gx_find_buffer(const cgrt_graphs *set, const CUdeviceptr *addr, CUdeviceptr v);
/* The declared range (cgrt_graphs_set_ranges) that holds v, or -1. */
long gx_find_declared(const cgrt_graphs *set, CUdeviceptr v);
/* Reads the runtime's buffer registry into set->rt_ranges / set->nrt (grows the scratch). */
cgrt_status gx_ranges_refresh(cgrt_graphs *set);
/* Identity of the known range holding v for the parameter index (registry ranges first,
 * then declared ranges; 0 for the set's own memory or nothing). */
uint64_t gx_range_key(const cgrt_graphs *set, CUdeviceptr v);
/* cur_key[b] when the driver failed to say which allocation holds current[b]. */
#define GX_KEY_UNKNOWN UINT64_MAX
/* Records cur_key[b] for the address current[b] now has (driver calls). Returns the
 * driver's answer: the failure that left cur_key[b] GX_KEY_UNKNOWN, if any (a binding
 * records the key and leaves a failure to the next checked step, which asks again). */
CUresult gx_key_buffer(cgrt_graphs *set, size_t b);

/* meta.c: the graph-meta kernels (kernels/graph_meta.h) as graphs/ launches and indexes
 * them. */
/* Block size of prepare and advance, and their grid for `rows` rows. */
#define GX_META_THREADS 256
unsigned gx_meta_grid(int rows);
/* The arguments of one launch or kernel node of a graph-meta kernel: args[i] points at
 * parameter i (an int, or an 8-byte pointer or handle, at the start of val[i]). */
typedef struct gx_meta_args {
  uint64_t val[CGRT__META_MAX_PARAMS];
  void *args[CGRT__META_MAX_PARAMS];
} gx_meta_args;
/* cgrt_graph_meta_prepare: num_reqs real requests of block_len rows each, padded_rows
 * rows in all, with the metadata buffers at addr[]. */
void gx_meta_prepare(const cgrt_graphs *set, const CUdeviceptr *addr, int num_reqs, int padded_rows,
                     int block_len, gx_meta_args *a);
/* cgrt_graph_meta_advance (unrolled draft loops). */
void gx_meta_advance(const cgrt_graphs *set, const CUdeviceptr *addr, int num_reqs, int padded_rows,
                     gx_meta_args *a);
/* cgrt_graph_meta_while_begin with the loop's condition `handle`. */
void gx_meta_while_begin(const cgrt_graphs *set, const CUdeviceptr *addr, int num_reqs, uint64_t handle,
                         gx_meta_args *a);
/* cgrt_graph_meta_advance_while (no num_reqs: it reads the loop's state). */
void gx_meta_advance_while(const cgrt_graphs *set, const CUdeviceptr *addr, int padded_rows, uint64_t handle,
                           gx_meta_args *a);
/* 1 when f is a graph-meta kernel whose parameter CGRT__META_NUM_REQS a step patches
 * (prepare, advance, while_begin). */
int gx_meta_takes_reqs(const cgrt_graphs *set, CUfunction f);
/* 1 when parameter p of a kernel node of function f is a conditional handle (never a
 * pointer): the last parameter of the WHILE kernels. */
int gx_is_handle_param(const cgrt_graphs *set, CUfunction f, uint32_t p);

/* enqueue.c */
void gx_fill_desc(const cgrt_graphs *set, const gx_exec *e, const CUdeviceptr *addr,
                  cgrt_batch_desc *d);
/* Calls the host's enqueue callback; CGRT_ERROR_CALLBACK_FAILED with its message. */
cgrt_status gx_call_enqueue(cgrt_graphs *set, CUstream s, const cgrt_batch_desc *d);

/* capture_end.c */
/* Ends the capture of s whatever happened, so that the stream and the calling thread
 * leave capture mode: *out is the graph, or NULL when the end failed (a graph the driver
 * returned with the failure is destroyed unless to_graph: a body belongs to its node).
 * When the stream still captures after a failed end, the set remembers it
 * (open_capture) and gx_capture_abandon ends it at the next chance. */
CUresult gx_capture_end(cgrt_graphs *set, CUstream s, int to_graph, CUgraph *out);
/* Ends a capture of the capture stream left open by a failed gx_capture_end (before
 * each capture, and at destroy). 1 when none is open any more; then the graph the capture
 * recorded into (open_parent) is destroyed too. While the capture stays open that graph
 * is kept (destroying it under the capture is undefined on the driver): at destroy it is
 * left behind, with the stream, and a warning says so. Must run on the thread that
 * captured (thread-local capture mode). */
int gx_capture_abandon(cgrt_graphs *set);

/* param_index.c */
cgrt_status gx_index_build(cgrt_graphs *set, gx_exec *e);
void gx_index_free(gx_exec *e);
/* Writes the new addresses of moved buffers into the stored parameters and marks their
 * nodes dirty: dirty_k[*ndk..] / dirty_m[*ndm..] (the counts grow). */
void gx_index_apply(cgrt_graphs *set, gx_exec *e, const CUdeviceptr *addr, size_t *ndk, size_t *ndm);
/* The same for the set's current addresses, visiting only the buffers moved since the
 * bucket last caught up (e->synced_gen) when the move log still holds them; then
 * e->synced_gen = set->gen. */
void gx_index_catch_up(cgrt_graphs *set, gx_exec *e, size_t *ndk, size_t *ndm);
/* Sets parameter CGRT__META_NUM_REQS of the metadata nodes; marks them dirty. */
void gx_index_set_reqs(gx_exec *e, int reqs, size_t *ndk);
/* Of the dirty nodes, those the host must update (memory nodes, and kernel nodes the
 * patch node does not rewrite on the device): 0 when device patching delivers them all. */
size_t gx_index_host_dirty(const gx_exec *e, size_t ndk, size_t ndm);
/* Issues the node updates for dirty nodes (and clears them). */
cgrt_status gx_index_flush(cgrt_graphs *set, gx_exec *e, size_t ndk, size_t ndm);
/* Clears dirty marks without issuing updates (after cuGraphExecUpdate). */
void gx_index_clear(gx_exec *e, size_t ndk, size_t ndm);

/* checked.c: checked replay (options.checked_replay). */
/* Before anything is patched or launched: every buffer e points into (e NULL: every
 * buffer) is still the allocation it was when its address became current, and every
 * copy-in binding of this step lies inside a live allocation. CGRT_ERROR_STALE_POINTER
 * otherwise (message names the buffer); CGRT_ERROR_DRIVER when the driver cannot be
 * asked (cuPointerGetAttribute failed: no verdict). */
cgrt_status gx_check_buffers(cgrt_graphs *set, const gx_exec *e);
/* After patching the host copies, before any node update or launch: every other pointer
 * of every node (GX_PTR_KNOWN / GX_PTR_UNKNOWN) lies inside a live known range with the
 * identity it had at index time. CGRT_ERROR_DRIVER when a driver call it needed failed. */
cgrt_status gx_check_pointers(cgrt_graphs *set, gx_exec *e);
cgrt_status gx_check_after(cgrt_graphs *set);

/* device_patch.c */
/* Launches the patch node (nothing to patch yet) at the head of a capture. */
cgrt_status gx_dpatch_launch(cgrt_graphs *set, CUstream s);
/* After gx_index_build, before instantiate: makes every kernel node with sites (and the
 * metadata nodes) device-updatable and records its handle. Leaves e->dpatch 0, without
 * error, when the graph has no patch node or the driver refuses the attribute on the
 * first node. */
cgrt_status gx_dpatch_mark(cgrt_graphs *set, gx_exec *e);
/* After instantiate + upload: the mailbox, and the patch node: the kernel of the smallest
 * parameter class that holds the site table, with the table in its parameters, or (too
 * large, or refused by the driver) the table in device memory and the pointer kernel. */
cgrt_status gx_dpatch_finish(cgrt_graphs *set, gx_exec *e);
/* Right before cuGraphLaunch: writes this launch's slot of the mailbox (the groups moved
 * since the last successful launch; possibly none). No driver call unless the ring is
 * full (then it synchronizes the replay stream). */
cgrt_status gx_dpatch_before_launch(cgrt_graphs *set, gx_exec *e);
/* Fills the mailbox slots of the bucket's next `launches` launches with "nothing moved"
 * (waiting for free slots as a step does) and counts them as made: for launches of the
 * executable that do not go through a step (cgrt_graphs_bucket_exec). No-op without
 * device patching. */
cgrt_status gx_dpatch_reserve(cgrt_graphs *set, gx_exec *e, unsigned launches);
/* After a successful cuGraphLaunch: the moved groups are delivered. */
void gx_dpatch_launched(gx_exec *e);
void gx_dpatch_free(cgrt_graphs *set, gx_exec *e);

/* device_launch.c */
/* At create (options.device_launch): the launcher kernels, control block, state, stream
 * and scheduler graph. CGRT_ERROR_NOT_SUPPORTED without launcher kernels for the device
 * or a driver that refuses device launch. */
cgrt_status gx_dl_init(cgrt_graphs *set);
/* Captures the step-done node (the last node of each bucket of a device-launched set). */
cgrt_status gx_dl_step_done(cgrt_graphs *set, CUstream s);
/* Triggers the next step: executable x, launched by the launcher on the device (waits
 * first for host-launched work of the set, and for a free slot). */
cgrt_status gx_dl_trigger(cgrt_graphs *set, CUgraphExec x);
/* Waits until every triggered step has completed (no-op without device launch): before
 * any host launch of the set's work and any host update of a device-launched executable. */
cgrt_status gx_dl_quiesce(cgrt_graphs *set);
/* Host work of the set was launched on the replay stream: the next trigger waits for it. */
void gx_dl_host_launched(cgrt_graphs *set);
/* cgrt_graphs_synchronize: the triggered steps, then the replay stream. */
cgrt_status gx_dl_synchronize(cgrt_graphs *set);
/* GPU nanoseconds of the last completed step (launch to its last node), or 0 (no step
 * yet, or one still in flight). */
uint64_t gx_dl_last_step_ns(const cgrt_graphs *set);
/* Stops the launcher (after the triggered steps) and frees everything of gx_dl. */
void gx_dl_free(cgrt_graphs *set);

/* while.c */
/* Builds the WHILE draft graph of e with the current addresses: head kernels (prepare,
 * while_begin), the conditional WHILE node, and its body captured with
 * cuStreamBeginCaptureToGraph (the host's step, then advance_while). Returns the graph
 * and its body. CGRT_ERROR_NOT_SUPPORTED when the driver lacks conditional nodes (the
 * message names the call); CGRT_ERROR_CAPTURE_FAILED otherwise. */
cgrt_status gx_while_build(cgrt_graphs *set, gx_exec *e, CUgraph *out, CUgraph *body);
/* Checked replay, after launch (stream synchronized): the loop's step counter is 0. */
cgrt_status gx_while_check_state(cgrt_graphs *set, const gx_exec *e);

/* capture.c */
/* Captures e: front (this thread: warm-up runs, stream capture of the host's callback;
 * leaves e->graph, e->body and e->capture_s) then back (index, device-patch marks,
 * instantiate, upload on `upload` and wait, device patch table; e->captured). back only
 * makes driver calls on e's own objects and `upload`, never on the capture stream, and
 * calls no host callback: it may run on another thread while front captures the next
 * bucket (capture_pipeline.c). Each returns the bucket's status with e released on
 * failure. */
cgrt_status gx_capture_front(cgrt_graphs *set, gx_exec *e, int warmup);
cgrt_status gx_capture_back(cgrt_graphs *set, gx_exec *e, CUstream upload);
/* Captures e's graph with the current addresses; *body: the WHILE body (else NULL). */
cgrt_status gx_capture_graph(cgrt_graphs *set, gx_exec *e, CUgraph *out, CUgraph *body);
cgrt_status gx_run_eager(cgrt_graphs *set, CUstream stream, const cgrt_batch_desc *d, int meta_reqs,
                         const CUdeviceptr *addr);
void gx_exec_release(cgrt_graphs *set, gx_exec *e);

/* capture_pipeline.c: captures the buckets todo[0..n) in order, with warmup_runs eager
 * runs before each (options.warmup_once: before the first only). Unless
 * options.serial_capture, the back half of bucket i runs on a worker thread while this
 * thread captures bucket i + 1. status[i] is each bucket's status; msg[i] (1024 bytes
 * each) its cgrt_last_error() on failure. Without a worker thread (or its stream) the
 * buckets are captured in turn. set->mu held. */
void gx_capture_buckets(cgrt_graphs *set, gx_exec **todo, size_t n, cgrt_status *status, char *msg);

/* replay.c: the step and the draft loop (cgrt_graphs_step, cgrt_graphs_draft). */
/* Patches e for the current addresses and num_reqs, then launches it (lock held). */
cgrt_status gx_replay(cgrt_graphs *set, gx_exec *e, int num_reqs);

/* graphs.c: the set's lifetime, the capture of all buckets, queries (public entry points
 * only: nothing calls into it). */

#ifdef __cplusplus
}
#endif
#endif
