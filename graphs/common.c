/* The bottom of graphs/: the clock, the check of a device range the host hands in, the
 * checks every public entry point makes first, and a graph's node list. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
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

cgrt_status gx_graph_nodes(const cgrt__driver *d, CUgraph g, const char *api, CUgraphNode **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t cnt = 0;
  CUresult r = d->cuGraphGetNodes(g, NULL, &cnt);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphGetNodes", api);
  CUgraphNode *v = (CUgraphNode *)calloc(cnt ? cnt : 1, sizeof *v);
  if (v == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  if (cnt && (r = d->cuGraphGetNodes(g, v, &cnt)) != CUDA_SUCCESS) {
    free(v);
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphGetNodes", api);
  }
  *out = v;
  *n = cnt;
  return CGRT_SUCCESS;
}
