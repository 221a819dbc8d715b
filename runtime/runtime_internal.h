/* Internal view of a cgrt_runtime, shared by runtime/, graphs/ and kernels/ plans. */
#ifndef CGRT_RUNTIME_INTERNAL_H
#define CGRT_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/driver.h"
#include "runtime/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt__reservation cgrt__reservation; /* runtime/workspace.c */

/* A live device allocation made by cgrt (for checked replay and leak accounting). */
typedef struct cgrt__alloc_range {
  CUdeviceptr base;
  size_t bytes;
  const char *what; /* static or owned by the reservation */
} cgrt__alloc_range;

/* An object made from a runtime (graph set, kernel plan). cgrt_runtime_destroy destroys
 * children still attached (newest first) and logs a warning for each. */
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
};

/* 1 if rt is a live runtime (never dereferences a dead pointer). Thread-safe. */
int cgrt__runtime_is_live(const cgrt_runtime *rt);

/* Validates the handle and makes the runtime's context current on this thread.
 * Returns CGRT_ERROR_INVALID_HANDLE (with message naming `api`) or a driver error. */
cgrt_status cgrt__runtime_enter(cgrt_runtime *rt, const char *api);

/* Looks up a kernel of the embedded module by name (cached after the first lookup).
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INTERNAL (no such kernel), CGRT_ERROR_DRIVER. */
cgrt_status cgrt__runtime_function(cgrt_runtime *rt, const char *name, CUfunction *out);

/* Enumerates cgrt's own live device allocations (workspaces, counters) into ranges;
 * returns how many there are (may exceed cap; only cap are written). Caller holds no
 * lock; takes rt->mu. */
size_t cgrt__runtime_ranges(cgrt_runtime *rt, cgrt__alloc_range *ranges, size_t cap);

/* Marks the start/end of a capture by this runtime: allocations and growth then fail
 * with CGRT_ERROR_CAPTURING. */
void cgrt__runtime_capture_begin(cgrt_runtime *rt);
void cgrt__runtime_capture_end(cgrt_runtime *rt);

/* Attaches/detaches a child object (the child struct is owned by the caller, typically
 * embedded in the object). Thread-safe. */
void cgrt__runtime_attach(cgrt_runtime *rt, cgrt__child *child);
void cgrt__runtime_detach(cgrt_runtime *rt, cgrt__child *child);

/* Frees everything the workspace manager holds (used by cgrt_runtime_destroy). */
void cgrt__workspace_release_all(cgrt_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
