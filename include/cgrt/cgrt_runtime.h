/* cgrt: the runtime — one device, one driver (real or emulated), its workspaces.
 *
 * A cgrt_runtime binds cgrt to one CUDA device through its primary context (the same
 * context the CUDA runtime and PyTorch use), or to the CPU emulation of the driver.
 * Everything else in cgrt (workspaces, counters, graph sets, kernels) hangs off it.
 *
 * Context: every cgrt function that takes a handle (a runtime, or a graph set, plan or
 * module made from one) makes the runtime's context current on the calling thread
 * before it does anything else (cuCtxSetCurrent, only when another context or none is
 * current), and leaves it current. So any cgrt call on a new thread prepares that thread
 * for the next ones. Such a function can also fail with CGRT_ERROR_DRIVER when the
 * driver refuses that (the message names cuCtxGetCurrent or cuCtxSetCurrent). */
#ifndef CGRT_RUNTIME_H
#define CGRT_RUNTIME_H

#include "cgrt/cgrt_status.h"
#include "cgrt/cgrt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_runtime cgrt_runtime;

typedef enum cgrt_driver_kind {
  /* The environment variable CGRT_DRIVER decides: "cuda", "emulated" or "auto" (case
   * insensitive; unset or empty means "auto"; any other value fails cgrt_runtime_create
   * with CGRT_ERROR_INVALID_ARGUMENT). It is read at each cgrt_runtime_create whose
   * options.driver is CGRT_DRIVER_AUTO, and only then.
   * "auto" uses the real driver when an NVIDIA driver is installed, and the CPU emulation
   * only when there is none: libcuda.so.1 (options.driver_library) cannot be opened, or
   * the driver reports no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE, or 0 devices). The
   * fallback is logged at CGRT_LOG_WARN at every creation, and
   * cgrt_runtime_info.driver says CGRT_DRIVER_EMULATED. A driver that is installed but
   * not usable is never silently replaced: when libcuda.so.1 loads but is too old or
   * lacks a required entry point, cuInit or cuDeviceGetCount fails otherwise, there is
   * no device at the ordinal, or that device's compute capability is below 9.0,
   * cgrt_runtime_create fails with CGRT_ERROR_DRIVER and a message giving the reason and
   * that CGRT_DRIVER=emulated selects the emulation on purpose. */
  CGRT_DRIVER_AUTO = 0,
  CGRT_DRIVER_CUDA = 1,     /* libcuda.so.1 only; no fallback */
  CGRT_DRIVER_EMULATED = 2  /* the CPU emulation of the driver */
} cgrt_driver_kind;

typedef struct cgrt_runtime_options {
  size_t size;              /* sizeof(cgrt_runtime_options): lets the struct grow */
  int device_ordinal;       /* CUDA device ordinal; default 0 */
  cgrt_driver_kind driver;  /* default CGRT_DRIVER_AUTO */
  /* Path handed to dlopen for the real driver; NULL means "libcuda.so.1". */
  const char *driver_library;
  /* Route every driver call through the fault-injection wrapper (cgrt_fault.h).
   * For tests; costs a lock and an atomic load per driver call. Default 0. Runtimes with
   * it may be created and used from several threads at once, over the emulation and the
   * real driver alike; at most 4 distinct driver libraries are wrapped per process
   * (CGRT_ERROR_NOT_SUPPORTED beyond). */
  int fault_injection;
  /* Compute capability the emulated device reports, as major*10+minor; 0 means 90.
   * For tests of the unsupported-device path. Ignored by the real driver. */
  int emulated_compute_capability;
} cgrt_runtime_options;

/* Fills *options with the defaults (and its size). Thread-safe. */
void cgrt_runtime_options_init(cgrt_runtime_options *options);

typedef struct cgrt_runtime_info {
  size_t size;              /* set by the caller to sizeof(cgrt_runtime_info) */
  cgrt_driver_kind driver;  /* the driver in use: CGRT_DRIVER_CUDA or CGRT_DRIVER_EMULATED
                               (never AUTO: what AUTO chose) */
  int driver_version;       /* cuDriverGetVersion, e.g. 13000 */
  int device_ordinal;
  char device_name[256];
  int compute_capability_major;
  int compute_capability_minor;
  int sm_count;
  size_t total_memory;      /* bytes */
  size_t free_memory;       /* bytes, at the time of the call */
} cgrt_runtime_info;

/* Creates a runtime. options may be NULL (defaults). On success *out owns a runtime
 * that the caller releases with cgrt_runtime_destroy; on failure *out is NULL and
 * nothing is leaked.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_ARGUMENT (out NULL, options->size too
 * small, bad enum, negative ordinal, CGRT_DRIVER set to an unknown value);
 * CGRT_ERROR_NO_DRIVER (CGRT_DRIVER_CUDA: dlopen or symbol resolution failed, driver
 * older than 12.4; the message carries the dlopen error); CGRT_ERROR_NO_DEVICE (cuInit
 * or device lookup failed, ordinal out of range; the message names the CUresult);
 * CGRT_ERROR_UNSUPPORTED_DEVICE (compute capability below 9.0, or the embedded fatbin
 * does not load); CGRT_ERROR_CAPTURING (the calling thread captures a graph of a cgrt
 * graph set, e.g. from an enqueue callback under capture); CGRT_ERROR_OUT_OF_MEMORY;
 * CGRT_ERROR_DRIVER (a driver call failed; with CGRT_DRIVER_AUTO also: an NVIDIA driver
 * is installed but not usable, see CGRT_DRIVER_AUTO).
 * Thread-safe. Must not be called while the calling thread captures a stream. */
cgrt_status cgrt_runtime_create(const cgrt_runtime_options *options, cgrt_runtime **out);

/* Destroys a runtime and everything it owns (workspaces, counters, streams, module).
 * NULL is a no-op. Graph sets and kernel plans made from the runtime must be destroyed
 * first; those still alive are destroyed here too, and a warning is logged.
 * Returns CGRT_ERROR_INVALID_HANDLE for a pointer that is not a live runtime (a second
 * destroy), CGRT_ERROR_CAPTURING when the calling thread captures a graph (e.g. from an
 * enqueue callback: nothing is destroyed), CGRT_SUCCESS otherwise (driver failures
 * during teardown are logged, not returned: the runtime is gone either way). Its
 * context synchronization waits, like cgrt_runtime_synchronize, for captures other
 * threads have in progress. Not thread-safe with other calls on the same runtime. Must
 * not be called during capture. */
cgrt_status cgrt_runtime_destroy(cgrt_runtime *rt);

/* Reports the driver, device and memory. info->size must be set by the caller.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_INVALID_ARGUMENT,
 * CGRT_ERROR_DRIVER. Thread-safe. May be called during capture. */
cgrt_status cgrt_runtime_get_info(cgrt_runtime *rt, cgrt_runtime_info *info);

/* "auto", "cuda" or "emulated" ("unknown" for another value). Static string. */
const char *cgrt_driver_kind_name(cgrt_driver_kind kind);

/* Synchronizes the runtime's context (cuCtxSynchronize).
 * The driver cannot synchronize a context while a stream in it captures: it fails the
 * call and invalidates that capture, even one another thread runs in thread-local mode.
 * So this waits until no cgrt graph set captures in the process (runtimes on one device
 * share its context), and a capture that begins meanwhile waits for it: threads may
 * synchronize while others capture their own graph sets. Captures the host makes
 * itself, outside cgrt, are not waited for.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_CAPTURING (the calling
 * thread captures a graph, e.g. from an enqueue callback under capture: nothing waited
 * for, the capture unharmed), CGRT_ERROR_DRIVER (an earlier asynchronous failure, e.g.
 * an illegal address in a kernel). Thread-safe. Must not be called during capture. */
cgrt_status cgrt_runtime_synchronize(cgrt_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
