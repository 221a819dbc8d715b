/* Checked replay: before anything is patched or launched, every pointer of every node
 * (the buffers its sites point into, and the other pointer words the parameter index
 * recorded: whole 8-byte parameters, words of larger ones that lay in known memory) must
 * lie inside a live allocation known to cgrt -- and still be the allocation it was
 * when it became known (identities that are never reused: the driver's buffer ids, and
 * the registry's own for cgrt's allocations); after launch the multi-CTA counters must be
 * back at zero.
 *
 * What is known: the set's buffers at their current addresses (the driver's buffer id of
 * their allocation recorded when the address became current: at create or by a binding),
 * the runtime's buffer registry (workspaces, counters, cgrt_mem_alloc, registered
 * memory), the ranges declared with cgrt_graphs_set_ranges, and the set's own memory.
 * Memory cgrt does not free itself (buffers, registered and declared ranges) is asked of
 * the driver again, once per range per checked step. What is known, and the identities,
 * come from ranges.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"

/* A driver failure while checking: no verdict on the pointer, nothing launched. */
static cgrt_status check_failed(CUresult r, const char *what, const char *name) {
  cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuPointerGetAttribute", "checked replay");
  cgrt__error_prefix("%s '%s' (nothing launched)", what, name);
  return CGRT_ERROR_DRIVER;
}

/* Why a buffer's allocation is not the one it was bound to (r: the driver's answer). */
static const char *why(CUresult r) {
  if (r == CUDA_ERROR_INVALID_VALUE) return "its allocation was freed";
  if (r == CUDA_ERROR_NOT_FOUND) return "it runs past the end of its allocation";
  if (r != CUDA_SUCCESS) return "the driver cannot confirm its allocation";
  return "its allocation was freed and the address reused by another allocation";
}

cgrt_status gx_check_buffers(cgrt_graphs *set, const gx_exec *e) {
  for (size_t b = 0; b < set->nbuf; b++) {
    if (e != NULL && e->site_start[b + 1] == e->site_start[b]) continue; /* nothing points into it */
    const CUdeviceptr a = set->current[b];
    if (set->cur_key[b] == GX_KEY_UNKNOWN) { /* the driver failed when it was bound: ask now */
      CUresult r = gx_key_buffer(set, b);
      if (set->cur_key[b] == GX_KEY_UNKNOWN) return check_failed(r, "buffer", set->bufs[b].name);
    }
    if (set->cur_key[b] == 0)
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: buffer '%s' is at 0x%" PRIx64 ", which was not inside a live device "
                        "allocation of %zu bytes when it was bound; nothing launched",
                        set->bufs[b].name, (uint64_t)a, set->cur_bytes[b]);
    uint64_t id = 0;
    CUresult r = cgrt__buffer_id(set->drv, a, 0, &id);
    if (!cgrt__buffer_id_answered(r)) return check_failed(r, "buffer", set->bufs[b].name);
    if (r != CUDA_SUCCESS || id != set->cur_key[b])
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: buffer '%s' at 0x%" PRIx64 ": %s (buffer id %" PRIu64 " when bound, %" PRIu64
                        " now); nothing launched",
                        set->bufs[b].name, (uint64_t)a, why(r), set->cur_key[b],
                        r == CUDA_SUCCESS ? id : 0);
  }
  if (set->o.replay_mode != CGRT_REPLAY_COPY_IN) return CGRT_SUCCESS;
  for (size_t b = 0; b < set->nbuf; b++) {
    const cgrt_binding *bd = set->copy_bind[b];
    if (bd == NULL) continue;
    uint64_t id = 0;
    size_t n = bd->bytes ? bd->bytes : set->bufs[b].bytes;
    CUresult r = cgrt__buffer_id(set->drv, bd->ptr, n, &id);
    if (!cgrt__buffer_id_answered(r)) return check_failed(r, "copy-in binding of", set->bufs[b].name);
    if (r != CUDA_SUCCESS)
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: copy-in binding of '%s' at 0x%" PRIx64 " (%zu bytes) is not inside a live "
                        "device allocation (%s); nothing launched",
                        set->bufs[b].name, (uint64_t)bd->ptr, n, cgrt__curesult_name(r));
  }
  return CGRT_SUCCESS;
}

/* 1 when the allocation holding v still has the buffer id `key` (asked of the driver); *r
 * its answer. A failed driver call is no verdict: it is kept in set->check_cu (the step
 * then fails with CGRT_ERROR_DRIVER) and counts as the same allocation. */
static int same_allocation(cgrt_graphs *set, CUdeviceptr v, uint64_t key, CUresult *r) {
  uint64_t id = 0;
  *r = cgrt__buffer_id(set->drv, v, 0, &id);
  if (!cgrt__buffer_id_answered(*r)) {
    set->check_cu = *r;
    return 1;
  }
  return *r == CUDA_SUCCESS && id == key;
}

/* 1 when the external range's allocation still has the identity it had (asked of the
 * driver once per checked step; see same_allocation). */
static int still_there(cgrt_graphs *set, unsigned char *seen, CUdeviceptr base, uint64_t key) {
  CUresult r;
  if (*seen == 0) *seen = same_allocation(set, base, key, &r) ? 1 : 2;
  return *seen == 1;
}

/* Checks one pointer v of kind `kind` (identity `key` at index time); 0 when it is fine,
 * else writes the reason. */
static int stale(cgrt_graphs *set, uint8_t kind, uint64_t key, CUdeviceptr v, const char **reason) {
  if (kind == GX_PTR_NONE || kind == GX_PTR_BUFFER || gx_set_owned(set, v)) return 0;
  if (kind == GX_PTR_FOREIGN) { /* device memory cgrt does not manage: the driver's id */
    CUresult r;
    if (same_allocation(set, v, key, &r)) return 0;
    *reason = r == CUDA_SUCCESS ? "its allocation was freed and the address reused by another allocation"
                                : "its allocation was freed";
    return 1;
  }
  long i = cgrt__ranges_find(set->rt_ranges, set->nrt, v);
  if (i >= 0) {
    const cgrt__alloc_range *r = &set->rt_ranges[i];
    if (kind == GX_PTR_KNOWN && r->id != key) {
      *reason = "its allocation was freed and the address reused by another allocation";
      return 1;
    }
    if (r->kind == CGRT__RANGE_REGISTERED && !still_there(set, &set->rt_seen[i], r->base, r->id)) {
      *reason = "its registered range's allocation was freed (cgrt_mem_unregister was not called)";
      return 1;
    }
    return 0;
  }
  i = gx_find_declared(set, v);
  if (i >= 0) {
    if ((kind == GX_PTR_KNOWN && set->range_key[i] != key) ||
        !still_there(set, &set->range_seen[i], set->ranges[i].base, set->range_key[i])) {
      *reason = "its declared range's allocation was freed";
      return 1;
    }
    return 0;
  }
  if (kind == GX_PTR_UNKNOWN) {
    int b = gx_find_buffer(set, set->current, v); /* a buffer moved onto it since */
    CUresult r;
    if (b >= 0 && set->cur_key[b] != 0 && same_allocation(set, set->current[b], set->cur_key[b], &r)) return 0;
  }
  *reason = kind == GX_PTR_KNOWN ? "its allocation was freed" : "it lies inside no known live allocation";
  return 1;
}

static const char *kind_name(uint8_t kind) {
  switch (kind) {
    case GX_PTR_BUFFER: return "inside a registered buffer";
    case GX_PTR_KNOWN: return "inside a cgrt allocation, a registered or a declared range";
    case GX_PTR_FOREIGN: return "inside a device allocation cgrt does not manage";
    default: return "inside no known allocation";
  }
}

cgrt_status gx_check_pointers(cgrt_graphs *set, gx_exec *e) {
  cgrt_status st = gx_ranges_refresh(set);
  if (st != CGRT_SUCCESS) return st;
  memset(set->rt_seen, 0, set->nrt);
  if (set->nranges) memset(set->range_seen, 0, set->nranges);
  set->check_cu = CUDA_SUCCESS;
  const char *reason = "";
  for (size_t i = 0; i < e->nk; i++) {
    const gx_knode *k = &e->knodes[i];
    for (uint32_t j = 0; j < k->nwords; j++) { /* the pointer words that are no site */
      const gx_kword *w = &k->words[j];
      uint64_t v;
      memcpy(&v, k->args + w->offset, 8);
      if (!stale(set, w->kind, w->key, v, &reason)) continue;
      const uint32_t p = w->param;
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: %s bucket %d rows, kernel node %zu (kernel '%s'), "
                        "parameter %u (offset %u, %u bytes), 8-byte word at offset %u = 0x%" PRIx64
                        ": %s (at capture it was %s); nothing launched",
                        gx_mode_name(e), e->rows, i, k->name ? k->name : "?", p, k->offsets[p], k->sizes[p],
                        (unsigned)w->offset, v, reason, kind_name(w->kind));
    }
  }
  for (size_t i = 0; i < e->nm; i++) {
    const gx_mnode *m = &e->mnodes[i];
    CUdeviceptr ptrs[2] = {m->is_memset ? m->ms.dst : m->cp.dstDevice, m->cp.srcDevice};
    uint8_t kinds[2] = {m->dst_kind, m->is_memset ? (uint8_t)GX_PTR_NONE : m->src_kind};
    uint64_t keys[2] = {m->dst_key, m->src_key};
    for (int j = 0; j < 2; j++) {
      if (!stale(set, kinds[j], keys[j], ptrs[j], &reason)) continue;
      return cgrt__fail(CGRT_ERROR_STALE_POINTER,
                        "checked replay: %s bucket %d rows, %s node %zu, %s = 0x%" PRIx64
                        ": %s (at capture it was %s); nothing launched",
                        gx_mode_name(e), e->rows, m->is_memset ? "memset" : "memcpy", i,
                        j ? "source" : "destination", (uint64_t)ptrs[j], reason, kind_name(kinds[j]));
    }
  }
  if (set->check_cu != CUDA_SUCCESS)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, set->check_cu, "cuPointerGetAttribute",
                         "checked replay: asking for a range's allocation (nothing launched)");
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
