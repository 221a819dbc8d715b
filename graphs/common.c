/* Small helpers shared by the files of graphs/: a bucket's name in messages, the clock,
 * what the set owns or passes that is never a buffer pointer, and the check of a device
 * range the host hands in. */
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

const char *gx_mode_name(const gx_exec *e) {
  if (e->is_while) return "draft-while";
  if (e->draft) return "draft";
  return gx_step_mode_name(e->mode);
}

int gx_set_owned(const cgrt_graphs *set, CUdeviceptr v) {
  return set->while_state != 0 && v >= set->while_state && v - set->while_state < GX_WHILE_STATE_BYTES;
}

int gx_is_handle_param(const cgrt_graphs *set, CUfunction f, uint32_t p) {
  if (f == NULL) return 0;
  return (f == set->f_while_begin && p == 4) || (f == set->f_advance_while && p == 11);
}

int gx_range_ok(CUdeviceptr base, size_t bytes) {
  return base != 0 && bytes != 0 && (uint64_t)bytes - 1 <= UINT64_MAX - (uint64_t)base;
}
