/* The bottom of graphs/: the clock, the check of a device range the host hands in, and
 * the checks every public entry point makes first. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <time.h>

#include "graphs/graphs_internal.h"

double gx_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int gx_range_ok(CUdeviceptr base, size_t bytes) {
  return base != 0 && bytes != 0 && (uint64_t)bytes - 1 <= UINT64_MAX - (uint64_t)base;
}

cgrt_status gx_enter(cgrt_graphs *set, const char *api) {
  if (!cgrt__handle_live(set, CGRT__HANDLE_GRAPHS))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "%s: %p is not a live graph set (NULL, destroyed or never created)",
                      api, (void *)set);
  return cgrt__runtime_enter(set->rt, api);
}

cgrt_status gx_enter_outside_capture(cgrt_graphs *set, const char *api) {
  cgrt_status st = gx_enter(set, api);
  return st != CGRT_SUCCESS ? st : cgrt__refuse_in_capture(api);
}
