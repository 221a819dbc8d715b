/* Internal: recording failures (per-thread message) and logging through the host's
 * callback. */
#ifndef CGRT_RUNTIME_ERROR_H
#define CGRT_RUNTIME_ERROR_H

#include "cgrt/cgrt_status.h"
#include "runtime/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CGRT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CGRT__PRINTF(a, b)
#endif

/* Capacity of the per-thread message, terminator included. A longer message ends with
 * " [... N more bytes cut]". */
#define CGRT__MSG_CAP 2048

/* Sets the calling thread's last-error message and returns `status`. The arguments may
 * point into the current message (cgrt_last_error()): the new one is composed apart. */
cgrt_status cgrt__fail(cgrt_status status, const char *fmt, ...) CGRT__PRINTF(2, 3);

/* For a failed driver call: message "<what>: <symbol> failed with <CUDA_ERROR_X>" and a
 * status mapped from the CUresult (OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, else
 * `status`). */
cgrt_status cgrt__fail_cu(cgrt_status status, CUresult r, const char *symbol, const char *what);

/* Puts context before the thread's message: "<prefix>: <old message>" (composed apart
 * from the old message; a cut is marked, see CGRT__MSG_CAP). */
void cgrt__error_prefix(const char *fmt, ...) CGRT__PRINTF(1, 2);

/* Failures recorded on the calling thread so far: tells whether a callback's failure
 * left a cgrt message (the count moved) or whatever the message holds is older. */
unsigned long cgrt__error_count(void);

/* For teardown, where a failure is not returned: logs "<what>: <symbol> failed with
 * <CUDA_ERROR_X>" at CGRT_LOG_WARN when r is not CUDA_SUCCESS. */
void cgrt__warn_cu(CUresult r, const char *symbol, const char *what);

/* Logs through the host's callback (nothing when unset or above its level). */
void cgrt__log(cgrt_log_level level, const char *fmt, ...) CGRT__PRINTF(2, 3);
int cgrt__log_enabled(cgrt_log_level level);

/* Calls a driver entry, jumping to the failure path with a message when it fails:
 *   CGRT__CU(rt->drv, cuMemAlloc, (&p, n), CGRT_ERROR_OUT_OF_MEMORY, "reserving x");
 * evaluates to a cgrt_status (CGRT_SUCCESS when the call succeeded). */
#define CGRT__CU(drv, sym, args, status, what)                                  \
  ({                                                                            \
    CUresult cgrt__r_ = (drv)->sym args;                                        \
    cgrt__r_ == CUDA_SUCCESS ? CGRT_SUCCESS                                     \
                             : cgrt__fail_cu((status), cgrt__r_, #sym, (what)); \
  })

/* A teardown driver call: failures are logged at CGRT_LOG_WARN (cgrt__warn_cu), not
 * returned.  CGRT__CU_WARN(d, cuStreamDestroy, (s), "cgrt_graphs_destroy"); */
#define CGRT__CU_WARN(drv, sym, args, what) cgrt__warn_cu((drv)->sym args, #sym, (what))

#ifdef __cplusplus
}
#endif
#endif
