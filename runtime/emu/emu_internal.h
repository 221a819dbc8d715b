/* Internals of the CPU emulation driver: object layouts, the global lock, the handle
 * registry and helpers shared by the emu_*.c files. All state is guarded by one global
 * mutex (cgrt__emu_lock); reference kernels and host functions run without it. */
#ifndef CGRT_RUNTIME_EMU_EMU_INTERNAL_H
#define CGRT_RUNTIME_EMU_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/driver.h"
#include "runtime/emu/emu.h"
#include "runtime/ref_registry.h"

#define EMU_TOTAL_MEM ((size_t)16 << 30)
#define EMU_ALIGN 256u
#define EMU_SHMEM_DEFAULT 49152
#define EMU_SHMEM_OPTIN 232448
#define EMU_DRIVER_VERSION 13000
#define EMU_WHILE_LIMIT (1u << 24) /* conditional WHILE iterations before giving up */
#define EMU_ARENA_BYTES ((size_t)32 << 30) /* address space reserved for device + pinned memory */

/* ---- handle registry (emu_core.c) ---- */
enum {
  EMU_K_STREAM = 1,
  EMU_K_EVENT,
  EMU_K_GRAPH,
  EMU_K_NODE,
  EMU_K_EXEC,
  EMU_K_MODULE,
  EMU_K_FUNC,
};

void cgrt__emu_lock(void);
void cgrt__emu_unlock(void);
int cgrt__emu_reg_add(const void *p, int kind); /* 0, or -1 when out of memory */
int cgrt__emu_reg_is(const void *p, int kind);   /* p != NULL and live with that kind */
void cgrt__emu_reg_del(const void *p);

typedef struct emu_counts {
  size_t allocs, streams, events, graphs, execs, modules;
  size_t freed_under_capture; /* graphs freed while a capture still records into them */
} emu_counts;
extern emu_counts cgrt__emu_counts; /* guarded by the lock */

CUresult cgrt__emu_check_init(void); /* CUDA_ERROR_NOT_INITIALIZED before cuInit */
CUresult cgrt__emu_check_ctx(void);  /* also CUDA_ERROR_INVALID_CONTEXT without a current context */
uint64_t cgrt__emu_thread_id(void);
uint64_t cgrt__emu_next_id(void); /* unique, > 0; lock held */
uint64_t cgrt__emu_now_ns(void);

/* ---- memory (emu_memory.c), lock held ---- */
enum { EMU_MEM_ANY = 0, EMU_MEM_PINNED = 1 };
/* 1 when [p, p + n) lies inside one live allocation (EMU_MEM_ANY: device or pinned host;
 * EMU_MEM_PINNED: pinned host only). */
int cgrt__emu_mem_range_ok(uintptr_t p, size_t n, int want);
/* Bytes from p to the end of the live allocation (device, pinned or registered host
 * memory) that contains p; 0 when p is in the arena but in none (freed or never
 * allocated device memory); SIZE_MAX when p is host memory the emulation does not know. */
size_t cgrt__emu_mem_bytes_from(uintptr_t p);

/* The arena that device and pinned memory are carved from (emu_memory.c; reserved at
 * the first allocation, then fixed), with one state byte per EMU_ALIGN granule. */
enum { EMU_GRANULE_NONE = 0, EMU_GRANULE_LIVE = 1, EMU_GRANULE_FREED = 2 };
typedef struct emu_arena {
  uintptr_t base;
  size_t bytes; /* 0 until reserved */
  unsigned char *state;
} emu_arena;
extern emu_arena cgrt__emu_arena; /* state bytes guarded by the lock */
/* Advances at every free of device or pinned memory (starts at 1). Lock held. */
extern uint64_t cgrt__emu_free_gen;

/* 1 when p points into a granule of the arena whose allocation was freed (and that no
 * live allocation took again). Lock held. */
static inline int cgrt__emu_mem_freed(uintptr_t p) {
  const uintptr_t off = p - cgrt__emu_arena.base;
  return off < cgrt__emu_arena.bytes && cgrt__emu_arena.state[off / EMU_ALIGN] == EMU_GRANULE_FREED;
}

/* ---- modules and functions (emu_module.c) ---- */
struct CUfunc_st {
  struct CUmod_st *mod;
  const cgrt__ref_kernel *ref;
  char *name;
  size_t nparams;
  size_t offs[CGRT__REF_MAX_PARAMS];
  size_t total; /* packed parameter bytes */
  int max_dyn_shmem;
  struct CUfunc_st *next;
};

struct CUmod_st {
  struct CUfunc_st *funcs;
};

/* ---- kernels (emu_launch.c) ---- */
typedef struct emu_kernel {
  CUfunction func;
  const cgrt__ref_kernel *ref;
  unsigned grid[3], block[3], shmem;
  size_t nparams;
  unsigned char *buf; /* packed parameters (node-owned) */
  size_t bufsize;
  size_t *offs;
  void **ptrs; /* ptrs[i] = buf + offs[i]: what cuGraphKernelNodeGetParams returns */
  CUlaunchAttribute *attrs;
  unsigned nattrs;
  int dev_updatable; /* CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE set on the node */
  /* Launched (or added) with `extra`-packed parameters: cuGraphKernelNodeGetParams then
   * answers as the driver does, kernelParams NULL and `extra` pointing at the node's
   * buffer (extra[], filled by the query). */
  int packed;
  void *extra[5];
  /* cgrt__emu_free_gen when buf last passed cgrt__emu_params_check (0: not since it was
   * written); an exec's node skips the check while no memory was freed since. */
  uint64_t checked_gen;
} emu_kernel;

/* Validates f (live), dimensions and shared memory. Lock held. */
CUresult cgrt__emu_kernel_check(CUfunction f, const unsigned grid[3], const unsigned block[3],
                                unsigned shmem);
/* Fills k from a launch; on failure k is left empty (nothing to free). Lock held, f valid. */
CUresult cgrt__emu_kernel_init(emu_kernel *k, CUfunction f, const unsigned grid[3],
                               const unsigned block[3], unsigned shmem, void **kernelParams,
                               void **extra, const CUlaunchAttribute *attrs, unsigned nattrs);
CUresult cgrt__emu_kernel_copy(emu_kernel *dst, const emu_kernel *src);
void cgrt__emu_kernel_free(emu_kernel *k);
/* ---- the sanitizer (emu_sanitize.c; docs/emulation.md) ---- */
/* The per-launch pointer check: every pointer-sized word of the parameters (parameters
 * of 8 bytes or more, at 8-byte aligned offsets) that points into freed device memory
 * fails the launch before the reference runs: CUDA_ERROR_ILLEGAL_ADDRESS, the fault
 * recorded (cgrt__emu_last_fault). Lock held. */
CUresult cgrt__emu_params_check(const cgrt__ref_kernel *ref, const unsigned char *buf,
                                const size_t *offs);
/* Runs the reference (no lock held) with the checked views of emu_view.h installed:
 * CUDA_ERROR_ILLEGAL_ADDRESS when it reported a fault (cgrt__emu_view_fault). */
CUresult cgrt__emu_kernel_run(const cgrt__ref_kernel *ref, const unsigned grid[3],
                              const unsigned block[3], unsigned shmem, const unsigned char *buf,
                              const size_t *offs);

/* ---- graphs (emu_graph.c) ---- */
typedef struct emu_cond {
  CUgraphConditionalHandle handle;
  unsigned dflt;
  unsigned flags;
  unsigned value;
} emu_cond;

struct CUgraphNode_st {
  struct CUgraph_st *graph;
  CUgraphNodeType type;
  uint64_t id;
  uint64_t orig_id; /* in an exec's copy: the node it was instantiated from */
  uint64_t upd_id;  /* in an exec's copy: the node of the last cuGraphExecUpdate source */
  size_t index;     /* position in graph->nodes (creation order, a topological order) */
  struct CUgraphNode_st **deps;
  size_t ndeps;
  union {
    emu_kernel k;
    CUDA_MEMCPY3D cp;
    CUDA_MEMSET_NODE_PARAMS ms;
    struct {
      CUhostFn fn;
      void *user;
    } host;
    struct {
      CUgraphConditionalHandle handle;
      CUgraphConditionalNodeType type;
      unsigned size;
      struct CUgraph_st **bodies;
    } cond;
  } u;
};

struct CUgraph_st {
  struct CUgraphNode_st **nodes;
  size_t n, cap;
  struct CUgraphNode_st *parent; /* the conditional node owning this body, else NULL */
  int registered;                /* handle-visible (not an exec's private copy) */
  emu_cond *conds;               /* conditional handles created on this graph */
  size_t nconds;
};

/* Creates an empty graph; registered graphs get a handle (and count as live when
 * top-level). Lock held. NULL when out of memory. */
struct CUgraph_st *cgrt__emu_graph_new(int registered, struct CUgraphNode_st *parent);
void cgrt__emu_graph_free(struct CUgraph_st *g);
/* A detached node of `type` with zeroed parameters. */
struct CUgraphNode_st *cgrt__emu_node_alloc(CUgraphNodeType type);
void cgrt__emu_node_free(struct CUgraphNode_st *n);
/* Appends a node (parameters filled) to g with the given dependencies (duplicates
 * dropped). On failure the node is freed. */
CUresult cgrt__emu_graph_attach(struct CUgraph_st *g, struct CUgraphNode_st *n,
                                struct CUgraphNode_st *const *deps, size_t ndeps);
/* Deep copy (an exec's private, unregistered graph); copies record orig_id. */
struct CUgraph_st *cgrt__emu_graph_clone(const struct CUgraph_st *g);
/* Dependencies for a node of g: live nodes of g, no duplicates (else INVALID_VALUE). */
CUresult cgrt__emu_check_deps(const struct CUgraph_st *g, const CUgraphNode *deps, size_t n);
/* A detached kernel node built from driver parameters (validated). */
CUresult cgrt__emu_kernel_node(const CUDA_KERNEL_NODE_PARAMS *p, struct CUgraphNode_st **out);
/* 1 when CUDA_MEMCPY3D describes a supported 1-D copy; fills src/dst addresses. */
int cgrt__emu_memcpy_1d(const CUDA_MEMCPY3D *c, uintptr_t *src, uintptr_t *dst, size_t *bytes);
/* Validates a memcpy / memset node's operands against live memory. */
int cgrt__emu_memcpy_valid(const CUDA_MEMCPY3D *c);
int cgrt__emu_memset_valid(const CUDA_MEMSET_NODE_PARAMS *m);
void cgrt__emu_memset_run(const CUDA_MEMSET_NODE_PARAMS *m);
/* Builds 1-D memcpy / memset node parameters. */
void cgrt__emu_memcpy_params(CUDA_MEMCPY3D *c, CUmemorytype dt, uintptr_t dst, CUmemorytype st,
                             uintptr_t src, size_t bytes);

/* ---- streams, events, capture (emu_stream.c), lock held ---- */
typedef struct emu_capture {
  uint64_t id;
  struct CUgraph_st *graph;
  CUstreamCaptureMode mode;
  uint64_t thread;
  int invalidated;
  struct CUstream_st *origin;
  int to_graph; /* cuStreamBeginCaptureToGraph: graph belongs to the caller, kept on failure */
  struct emu_capture *next;
} emu_capture;

struct CUstream_st {
  unsigned flags;
  emu_capture *cap;
  struct CUgraphNode_st **deps; /* capture: what the next node depends on */
  size_t ndeps, capdeps;
  CUgraphEdgeData *edges; /* cuStreamGetCaptureInfo's edge data: [capedges], all default */
  size_t capedges;
  struct CUstream_st *prev, *next;
};

struct CUevent_st {
  unsigned flags;
  int recorded;
  uint64_t ns;
  uint64_t cap_id; /* recorded in that capture (0: not captured) */
  struct CUgraphNode_st **deps;
  size_t ndeps;
};

/* Resolves a stream for an operation: *s = NULL for the default streams. Fails with
 * INVALID_HANDLE, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (legacy stream while a blocking
 * stream captures; invalidates those captures) or ..._INVALIDATED (capture already
 * invalidated). *cap is the active capture of the stream, or NULL (eager). */
CUresult cgrt__emu_stream_get(CUstream h, struct CUstream_st **s, emu_capture **cap);
/* Records a node on a capturing stream (depends on the stream's previous nodes). On
 * failure the node is freed and the capture invalidated. */
CUresult cgrt__emu_capture_node(struct CUstream_st *s, struct CUgraphNode_st *n);
/* A graph is being freed (cuGraphDestroy, or its conditional node's graph): a capture
 * into it (cuStreamBeginCaptureToGraph) is invalidated and loses it, so that ending the
 * capture returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED instead of a freed graph. */
void cgrt__emu_capture_graph_freed(const struct CUgraph_st *g);
/* Invalidates a capture and returns r. */
CUresult cgrt__emu_capture_fail(emu_capture *cap, CUresult r);
/* For a potentially unsafe call (allocation, synchronous copy, synchronization, ...):
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that forbid it, when
 * the calling thread holds a non-relaxed capture or another thread a global one. */
CUresult cgrt__emu_unsafe_call(void);
/* The live capture with that id, or NULL (ended). */
emu_capture *cgrt__emu_capture_by_id(uint64_t id);
/* Makes stream s take part in capture c after nodes d (fork), or adds d to its
 * dependencies when it already does (join). Invalidates c on failure. */
CUresult cgrt__emu_capture_join(struct CUstream_st *s, emu_capture *c,
                                struct CUgraphNode_st *const *d, size_t n);
/* For a synchronization of the whole context (cuCtxSynchronize): it cannot wait for a
 * stream that captures, whichever thread captures it and in whichever mode, so the driver
 * fails it with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates every capture in
 * progress (thread-local ones of other threads too). */
CUresult cgrt__emu_ctx_sync_call(void);
/* Unsafe call check plus the legacy-stream rule, for synchronous memory operations. */
CUresult cgrt__emu_sync_op(void);

#endif
