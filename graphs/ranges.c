/* The memory a set knows: its buffers at their current addresses, the runtime's buffer
 * registry (workspaces, counters, cgrt_mem_alloc, registered memory), the ranges the host
 * declared with cgrt_graphs_set_ranges, and the set's own memory; and the identities of
 * their allocations, which checked replay compares (the driver's buffer ids, and the
 * registry's own for cgrt's allocations). Read by the parameter index and by checked
 * replay. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "graphs/graphs_internal.h"

int gx_set_owned(const cgrt_graphs *set, CUdeviceptr v) {
  return set->while_state != 0 && v >= set->while_state && v - set->while_state < GX_WHILE_STATE_BYTES;
}

int gx_find_buffer(const cgrt_graphs *set, const CUdeviceptr *addr, CUdeviceptr v) {
  for (size_t b = 0; b < set->nbuf; b++)
    if (v >= addr[b] && v - addr[b] < set->cur_bytes[b]) return (int)b;
  return -1;
}

long gx_find_declared(const cgrt_graphs *set, CUdeviceptr v) {
  for (size_t i = 0; i < set->nranges; i++)
    if (v >= set->ranges[i].base && v - set->ranges[i].base < set->ranges[i].bytes) return (long)i;
  return -1;
}

cgrt_status gx_ranges_refresh(cgrt_graphs *set) {
  for (;;) {
    size_t n = cgrt__buffers_snapshot(set->rt, set->rt_ranges, set->rt_cap, NULL);
    if (n <= set->rt_cap) {
      set->nrt = n;
      return CGRT_SUCCESS;
    }
    size_t cap = 2 * n;
    cgrt__alloc_range *r = (cgrt__alloc_range *)realloc(set->rt_ranges, cap * sizeof(*r));
    if (r != NULL) set->rt_ranges = r;
    unsigned char *seen = (unsigned char *)realloc(set->rt_seen, cap);
    if (seen != NULL) set->rt_seen = seen;
    if (r == NULL || seen == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: buffer registry copy");
    set->rt_cap = cap;
  }
}

uint64_t gx_range_key(const cgrt_graphs *set, CUdeviceptr v) {
  if (gx_set_owned(set, v)) return 0;
  long i = cgrt__ranges_find(set->rt_ranges, set->nrt, v);
  if (i >= 0) return set->rt_ranges[i].id;
  i = gx_find_declared(set, v);
  return i >= 0 ? set->range_key[i] : 0;
}

CUresult gx_key_buffer(cgrt_graphs *set, size_t b) {
  uint64_t id = 0;
  CUresult r = cgrt__buffer_id(set->drv, set->current[b], set->cur_bytes[b], &id);
  set->cur_key[b] = r == CUDA_SUCCESS ? id : cgrt__buffer_id_answered(r) ? 0 : GX_KEY_UNKNOWN;
  return r;
}
