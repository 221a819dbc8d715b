/* Internal view of a cgrt_runtime, shared by runtime/, graphs/ and kernels/ plans. */
#ifndef CGRT_RUNTIME_INTERNAL_H
#define CGRT_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/driver.h"
#include "runtime/error.h"
#include "runtime/handles.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt__reservation cgrt__reservation; /* runtime/workspace.c */

/* Kinds of a range in a runtime's buffer registry (runtime/buffers.c). */
enum {
  CGRT__RANGE_WORKSPACE = 1, /* a reservation's storage (runtime/workspace.c) */
  CGRT__RANGE_COUNTERS = 2,  /* the counter buffer */
  CGRT__RANGE_MEM_ALLOC = 3, /* cgrt_mem_alloc */
  CGRT__RANGE_REGISTERED = 4 /* cgrt_mem_register: external memory */
};

/* Identities of ranges cgrt allocates itself carry this bit; identities of external
 * ranges are the driver's buffer ids (CU_POINTER_ATTRIBUTE_BUFFER_ID, counted from 1 per
 * process, far below 2^63). */
#define CGRT__OWNED_ID_BIT (1ull << 63)

/* A live device range the runtime knows (for checked replay). */
typedef struct cgrt__alloc_range {
  CUdeviceptr base;
  size_t bytes;
  /* Identity, never reused in a process: for ranges cgrt allocated (workspaces,
   * counters, cgrt_mem_alloc) a cgrt serial | CGRT__OWNED_ID_BIT, exact because cgrt
   * frees them itself; for registered ranges the driver's buffer id of their allocation,
   * read when the range was registered (the host may free the memory behind cgrt's back:
   * checked replay reads the id again). */
  uint64_t id;
  int kind;            /* CGRT__RANGE_* */
  int host_registered; /* emulation: host memory cgrt registered (cuMemHostRegister) */
  char what[48];       /* for messages */
} cgrt__alloc_range;

/* An object made from a runtime (graph set, kernel plan). cgrt_runtime_destroy destroys
 * children still attached (newest first, each unlinked before its destroy runs) and logs
 * a warning for each. */
typedef struct cgrt__child {
  void (*destroy)(void *obj);
  void *obj;
  const char *kind; /* "graph set", "mla plan", ... */
  struct cgrt__child *next, *prev;
} cgrt__child;

struct cgrt_runtime {
  const cgrt__driver *drv;
  cgrt_driver_kind kind;
  int ordinal;
  CUdevice dev;
  CUcontext ctx;
  int driver_version;
  char device_name[256];
  int cc_major, cc_minor, sm_count;
  size_t total_memory;
  CUmodule modules[16]; /* the embedded kernels: one module per kernels/ .cu file */
  int module_count;

  pthread_mutex_t mu; /* guards workspaces and counters */
  int locked;
  int capturing; /* >0 while a graph set of this runtime captures */
  cgrt__reservation *reservations; /* singly linked, creation order */
  cgrt__reservation *reservations_tail;

  cgrt__child *children;

  /* kernel lookups of the embedded module, cached */
  struct {
    char name[64];
    CUfunction fn;
  } functions[32];
  int function_count;

  CUdeviceptr counters;
  size_t counter_bytes_reserved;
  size_t counter_bytes_allocated;

  /* The buffer registry (runtime/buffers.c), guarded by mu: live ranges sorted by base,
   * non-overlapping; buffers_gen changes with every change. */
  cgrt__alloc_range *buffers;
  size_t nbuffers, buffers_cap;
  uint64_t buffers_gen;
};

/* 1 if rt is a live runtime (never dereferences a dead pointer). Thread-safe. */
int cgrt__runtime_is_live(const cgrt_runtime *rt);

/* Validates the handle and makes the runtime's context current on this thread.
 * Returns CGRT_ERROR_INVALID_HANDLE (with message naming `api`) or a driver error. */
cgrt_status cgrt__runtime_enter(cgrt_runtime *rt, const char *api);

/* Looks up a kernel of the embedded module by name (cached after the first lookup).
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INTERNAL (no such kernel), CGRT_ERROR_DRIVER. */
cgrt_status cgrt__runtime_function(cgrt_runtime *rt, const char *name, CUfunction *out);

/* Looks up a device variable of the embedded module by name (diagnostic builds:
 * kernels/mla/stamps.cuh): its address and size in bytes. Statuses: CGRT_SUCCESS,
 * CGRT_ERROR_NOT_SUPPORTED (no such variable, as in every build without the diagnostic
 * and under the emulation, or no cuModuleGetGlobal in the driver), CGRT_ERROR_DRIVER. */
cgrt_status cgrt__runtime_global(cgrt_runtime *rt, const char *name, CUdeviceptr *ptr, size_t *bytes);

/* ---- the buffer registry (runtime/buffers.c) ----
 * Adds a range cgrt allocated (kind WORKSPACE, COUNTERS or MEM_ALLOC) with a fresh owned
 * identity, or an external one (REGISTERED) with its driver buffer id. A stale external
 * range it overlaps (memory freed without cgrt_mem_unregister, address reused by cgrt)
 * is dropped with a CGRT_LOG_WARN. Returns 0, or -1 when out of host memory. rt->mu held. */
int cgrt__buffers_add(cgrt_runtime *rt, const cgrt__alloc_range *range);
/* Removes the range starting at base (none: no-op). rt->mu held. */
void cgrt__buffers_remove(cgrt_runtime *rt, CUdeviceptr base);
/* Index of the range containing v, or -1. rt->mu held. */
long cgrt__buffers_find(const cgrt_runtime *rt, CUdeviceptr v);
/* Index of the range containing v in a sorted array of n ranges, or -1. */
long cgrt__ranges_find(const cgrt__alloc_range *ranges, size_t n, CUdeviceptr v);
/* Copies the registry (sorted by base) into ranges[0..cap); returns how many ranges
 * there are (may exceed cap; only cap are written) and, if gen is not NULL, the
 * registry's generation. Takes rt->mu. */
size_t cgrt__buffers_snapshot(cgrt_runtime *rt, cgrt__alloc_range *ranges, size_t cap, uint64_t *gen);
/* The driver's buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID) of the allocation holding
 * [p, p + bytes) in *id. CUDA_ERROR_INVALID_VALUE when the driver knows no allocation at
 * p; CUDA_ERROR_NOT_FOUND when [p, p + bytes) runs past its end (bytes 0: only p is
 * looked at, one driver call; else three); other driver errors as returned. */
CUresult cgrt__buffer_id(const cgrt__driver *drv, CUdeviceptr p, size_t bytes, uint64_t *id);
/* 1 when r, a result of cgrt__buffer_id, is the driver's answer about the memory
 * (CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND); 0 when the call itself
 * failed (any other CUresult), which says nothing about the memory: a driver failure,
 * never a verdict on a pointer. */
int cgrt__buffer_id_answered(CUresult r);

/* Frees what cgrt_mem_alloc allocations are still live (a CGRT_LOG_WARN each), releases
 * the registrations and empties the registry (used by cgrt_runtime_destroy after the
 * workspaces). */
void cgrt__device_memory_release_all(cgrt_runtime *rt);

/* ---- captures in progress (runtime/capture_gate.c) ----
 * Mark the start/end of a stream capture by a graph set of this runtime, around
 * cuStreamBeginCapture .. cuStreamEndCapture on the calling thread: allocations and
 * growth on the runtime then fail with CGRT_ERROR_CAPTURING, the thread counts as
 * capturing (cgrt__thread_capturing), and whole-context synchronizations wait for the
 * end (begin waits for one that runs). Thread-safe; may nest on a thread. */
void cgrt__runtime_capture_begin(cgrt_runtime *rt);
void cgrt__runtime_capture_end(cgrt_runtime *rt);
/* 1 while the calling thread is inside a capture by any runtime's graph set (the host's
 * enqueue callback under capture runs there). */
int cgrt__thread_capturing(void);
/* CGRT_ERROR_CAPTURING (message names api) when the calling thread captures, else
 * CGRT_SUCCESS: for calls that must not run during capture. */
cgrt_status cgrt__refuse_in_capture(const char *api);
/* cgrt__runtime_enter, then cgrt__refuse_in_capture. */
cgrt_status cgrt__runtime_enter_outside_capture(cgrt_runtime *rt, const char *api);
/* cuCtxSynchronize that breaks no capture: CGRT_ERROR_CAPTURING on a thread that
 * captures; otherwise waits until no capture is in progress in the process (the driver
 * fails a context synchronization while any thread captures, and invalidates that
 * capture), holds new captures back while it runs, and returns CGRT_ERROR_DRIVER
 * naming api when the driver fails it. Must not be called with rt->mu held unless
 * rt->capturing is 0 (a capture of this runtime needs rt->mu to end). */
cgrt_status cgrt__ctx_synchronize(cgrt_runtime *rt, const char *api);
/* The same wait around drv->cuCtxSynchronize, returning its CUresult (teardown). The
 * calling thread must not capture (it would wait for itself). */
CUresult cgrt__ctx_synchronize_raw(const cgrt__driver *drv);

/* Detaches a child object attached by cgrt__runtime_adopt (the child struct is owned by
 * the caller, typically embedded in the object). Detaching a child that is not linked
 * (cgrt_runtime_destroy unlinks each child before calling its destroy) is a no-op. A
 * child's destroy must detach it whatever else fails, before its storage is freed.
 * Thread-safe. */
void cgrt__runtime_detach(cgrt_runtime *rt, cgrt__child *child);

/* The last step of every cgrt_x_create: makes `obj` a live handle of `handle_kind`
 * (runtime/handles.h) and attaches it to rt as the child `child` (destroyed by `destroy`
 * at runtime teardown; `what` names it in the teardown's log). On failure
 * (CGRT_ERROR_OUT_OF_MEMORY, "<api>: the live-handle table is full") nothing is changed:
 * the caller releases what it built. Thread-safe. */
cgrt_status cgrt__runtime_adopt(cgrt_runtime *rt, void *obj, cgrt__handle_kind handle_kind, cgrt__child *child,
                                void (*destroy)(void *obj), const char *what, const char *api);

/* Frees everything the workspace manager holds (used by cgrt_runtime_destroy). */
void cgrt__workspace_release_all(cgrt_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
