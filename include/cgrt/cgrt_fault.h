/* cgrt: fault injection into the driver table, for tests of cgrt and of hosts.
 *
 * A runtime created with cgrt_runtime_options.fault_injection = 1 sends every driver
 * call through a wrapper that counts calls and can make a chosen call fail with a
 * chosen CUresult instead of reaching the driver. The plan is process-wide (one test
 * at a time), like SQLite's malloc fault tests: run a scenario once to count the
 * driver calls it makes, then once per call with that call failing, and check that
 * every failure gives a clean status, a message, and no leak. */
#ifndef CGRT_FAULT_H
#define CGRT_FAULT_H

#include <stddef.h>

#include "cgrt/cgrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_fault_plan {
  size_t size;        /* sizeof(cgrt_fault_plan) */
  /* Fail the fail_at-th counted call (1-based) after the plan is set; 0: none. */
  unsigned long fail_at;
  /* Only calls to this driver symbol ("cuMemAlloc") are counted and failed; NULL: all. */
  const char *symbol;
  /* The CUresult the failing call returns (e.g. 2 = CUDA_ERROR_OUT_OF_MEMORY). 0 means
   * 999 (CUDA_ERROR_UNKNOWN). */
  int result;
  /* 1: every counted call from fail_at on fails (a persistent fault); 0: only one. */
  int sticky;
} cgrt_fault_plan;

/* Installs a plan (copied; symbol string copied) and resets the call counter. NULL
 * clears the plan (calls pass through, still counted).
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_ARGUMENT (size too small; the message
 * gives the sizes). Thread-safe;
 * may be called during capture. */
cgrt_status cgrt_fault_set(const cgrt_fault_plan *plan);

/* Driver calls counted since the last cgrt_fault_set (those matching its symbol). */
unsigned long cgrt_fault_calls(void);

/* Number of calls the current plan has failed. */
unsigned long cgrt_fault_injected(void);

/* Symbol of the most recent counted call ("" if none): names the call that failed. */
const char *cgrt_fault_last_symbol(void);

#ifdef __cplusplus
}
#endif
#endif
