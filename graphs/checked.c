/* Checked replay: before launch every pointer of every node must lie inside a live
 * allocation known to cgrt; after launch the multi-CTA counters must be back at zero. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <string.h>

#include "graphs/graphs_internal.h"

static int live(const cgrt_graphs *set, const cgrt__alloc_range *rr, size_t nrr, CUdeviceptr v) {
  if (gx_find_buffer(set, set->current, v) >= 0 || gx_set_owned(set, v)) return 1;
  for (size_t i = 0; i < nrr; i++)
    if (v >= rr[i].base && v - rr[i].base < rr[i].bytes) return 1;
  for (size_t i = 0; i < set->nranges; i++)
    if (v >= set->ranges[i].base && v - set->ranges[i].base < set->ranges[i].bytes) return 1;
  return 0;
}

static const char *kind_name(uint8_t kind) {
  switch (kind) {
    case GX_PTR_BUFFER: return "inside a registered buffer";
    case GX_PTR_KNOWN: return "inside a cgrt allocation or a declared range";
    default: return "inside no known allocation";
  }
}

cgrt_status gx_check_pointers(cgrt_graphs *set, gx_exec *e) {
  size_t nrr = cgrt__runtime_ranges(set->rt, set->rt_ranges, set->rt_cap);
  if (nrr > set->rt_cap) nrr = set->rt_cap;
  const cgrt__alloc_range *rr = set->rt_ranges;
  for (size_t i = 0; i < e->nk; i++) {
    const gx_knode *k = &e->knodes[i];
    for (uint32_t p = 0; p < k->nparams; p++) {
      if (k->ptrkind[p] == GX_PTR_NONE) continue;
      uint64_t v;
      memcpy(&v, k->args + k->offsets[p], 8);
      if (live(set, rr, nrr, v)) continue;
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: %s bucket %d rows, kernel node %zu (kernel '%s'), "
                        "parameter %u (offset %u) = 0x%" PRIx64
                        " points outside every live allocation (at capture it was %s); nothing launched",
                        e->draft ? "draft" : (e->mode == CGRT_GRAPH_BLOCK ? "block" : "decode"), e->rows, i,
                        k->name ? k->name : "?", p, k->offsets[p], v, kind_name(k->ptrkind[p]));
    }
  }
  for (size_t i = 0; i < e->nm; i++) {
    const gx_mnode *m = &e->mnodes[i];
    CUdeviceptr ptrs[2] = {m->is_memset ? m->ms.dst : m->cp.dstDevice, m->cp.srcDevice};
    uint8_t kinds[2] = {m->dst_kind, m->is_memset ? (uint8_t)GX_PTR_NONE : m->src_kind};
    for (int j = 0; j < 2; j++) {
      if (kinds[j] == GX_PTR_NONE || live(set, rr, nrr, ptrs[j])) continue;
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: %s bucket %d rows, %s node %zu, %s = 0x%" PRIx64
                        " points outside every live allocation (at capture it was %s); nothing launched",
                        e->mode == CGRT_GRAPH_BLOCK ? "block" : "decode", e->rows,
                        m->is_memset ? "memset" : "memcpy", i, j ? "source" : "destination",
                        (uint64_t)ptrs[j], kind_name(kinds[j]));
    }
  }
  return CGRT_SUCCESS;
}

cgrt_status gx_check_after(cgrt_graphs *set) {
  CUresult r = set->drv->cuStreamSynchronize(set->stream);
  if (r != CUDA_SUCCESS)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuStreamSynchronize", "checked replay");
  /* Only when a counter buffer exists (cgrt_counters_verify has nothing to check else). */
  pthread_mutex_lock(&set->rt->mu);
  int have = set->rt->counters != 0;
  pthread_mutex_unlock(&set->rt->mu);
  if (!have) return CGRT_SUCCESS;
  cgrt_status st = cgrt_counters_verify(set->rt);
  if (st != CGRT_SUCCESS) cgrt__error_prefix("checked replay, after launch");
  return st;
}
