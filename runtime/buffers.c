/* The buffer registry: the live device ranges a runtime knows (its workspaces, the
 * counter buffer, cgrt_mem_alloc allocations, registered external memory), each with an
 * identity that is never reused, for checked replay. A sorted array under rt->mu. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

static atomic_uint_fast64_t g_owned_serial;

long cgrt__ranges_find(const cgrt__alloc_range *r, size_t n, CUdeviceptr v) {
  size_t lo = 0, hi = n; /* first range with base > v */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r[mid].base <= v) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return -1;
  const cgrt__alloc_range *c = &r[lo - 1];
  return v - c->base < c->bytes ? (long)(lo - 1) : -1;
}

long cgrt__buffers_find(const cgrt_runtime *rt, CUdeviceptr v) {
  return cgrt__ranges_find(rt->buffers, rt->nbuffers, v);
}

static void erase(cgrt_runtime *rt, size_t i) {
  memmove(&rt->buffers[i], &rt->buffers[i + 1], (rt->nbuffers - i - 1) * sizeof(cgrt__alloc_range));
  rt->nbuffers--;
  rt->buffers_gen++;
}

int cgrt__buffers_add(cgrt_runtime *rt, const cgrt__alloc_range *range) {
  cgrt__alloc_range e = *range;
  if (e.kind != CGRT__RANGE_REGISTERED) e.id = (atomic_fetch_add(&g_owned_serial, 1) + 1) | CGRT__OWNED_ID_BIT;
  /* Overlapped ranges are stale: their memory went back to the driver unannounced. */
  for (size_t i = 0; i < rt->nbuffers;) {
    const cgrt__alloc_range *o = &rt->buffers[i];
    if (o->base < e.base + e.bytes && e.base < o->base + o->bytes) {
      cgrt__log(CGRT_LOG_WARN, "cgrt: %s at 0x%llx (%zu bytes) overlaps the new %s at 0x%llx: its memory was freed "
                "without telling cgrt; dropped from the buffer registry",
                o->what, (unsigned long long)o->base, o->bytes, e.what, (unsigned long long)e.base);
      erase(rt, i);
      continue;
    }
    i++;
  }
  if (rt->nbuffers == rt->buffers_cap) {
    size_t cap = rt->buffers_cap ? 2 * rt->buffers_cap : 16;
    cgrt__alloc_range *g = realloc(rt->buffers, cap * sizeof *g);
    if (!g) return -1;
    rt->buffers = g;
    rt->buffers_cap = cap;
  }
  size_t at = 0;
  while (at < rt->nbuffers && rt->buffers[at].base < e.base) at++;
  memmove(&rt->buffers[at + 1], &rt->buffers[at], (rt->nbuffers - at) * sizeof e);
  rt->buffers[at] = e;
  rt->nbuffers++;
  rt->buffers_gen++;
  return 0;
}

void cgrt__buffers_remove(cgrt_runtime *rt, CUdeviceptr base) {
  long i = cgrt__buffers_find(rt, base);
  if (i >= 0 && rt->buffers[i].base == base) erase(rt, (size_t)i);
}

size_t cgrt__buffers_snapshot(cgrt_runtime *rt, cgrt__alloc_range *ranges, size_t cap, uint64_t *gen) {
  pthread_mutex_lock(&rt->mu);
  size_t n = rt->nbuffers;
  memcpy(ranges, rt->buffers, (n < cap ? n : cap) * sizeof *ranges);
  if (gen) *gen = rt->buffers_gen;
  pthread_mutex_unlock(&rt->mu);
  return n;
}

CUresult cgrt__buffer_id(const cgrt__driver *drv, CUdeviceptr p, size_t bytes, uint64_t *id) {
  unsigned long long bid = 0;
  CUresult r = drv->cuPointerGetAttribute(&bid, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
  if (r != CUDA_SUCCESS) return r;
  if (bytes > 0) {
    CUdeviceptr start = 0;
    size_t size = 0;
    r = drv->cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p);
    if (r == CUDA_SUCCESS) r = drv->cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
    if (r != CUDA_SUCCESS) return r;
    if (bytes > size || p - start > size - bytes) return CUDA_ERROR_NOT_FOUND;
  }
  *id = bid;
  return CUDA_SUCCESS;
}

int cgrt__buffer_id_answered(CUresult r) {
  return r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_FOUND;
}
