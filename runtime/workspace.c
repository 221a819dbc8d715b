/* Workspace manager: named, per-lane reservations of several 256-byte-aligned buffers
 * carved from one allocation, guard words after each buffer, lock after warm-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

#define GUARD_BYTES 64u
#define GUARD_BYTE 0xCBu /* byte pattern: buffers need not end on a word boundary */
#define NAME_CAP 64

struct cgrt__reservation {
  cgrt__reservation *next;
  int lane;
  char name[NAME_CAP];
  size_t count;
  size_t *cap;     /* reserved bytes per buffer */
  size_t *offset;  /* offset of each buffer inside the allocation */
  CUdeviceptr base;
  size_t alloc_bytes;
};

size_t cgrt_dtype_size(cgrt_dtype dtype) {
  switch (dtype) {
    case CGRT_DTYPE_U8: return 1;
    case CGRT_DTYPE_I32: return 4;
    case CGRT_DTYPE_I64: return 8;
    case CGRT_DTYPE_F16: return 2;
    case CGRT_DTYPE_BF16: return 2;
    case CGRT_DTYPE_F32: return 4;
  }
  return 0;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static cgrt_status desc_bytes(const char *name, size_t i, const cgrt_tensor_desc *d, size_t *out) {
  size_t es = cgrt_dtype_size(d->dtype);
  if (es == 0) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "workspace '%s' buffer %zu: unknown dtype %d", name, i, (int)d->dtype);
  if (d->ndim < 0 || d->ndim > CGRT_MAX_TENSOR_DIMS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "workspace '%s' buffer %zu: ndim %d outside 0..%d", name, i,
                      d->ndim, CGRT_MAX_TENSOR_DIMS);
  size_t n = es;
  for (int k = 0; k < d->ndim; k++) {
    if (d->shape[k] < 0)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "workspace '%s' buffer %zu: dimension %d is negative (%lld)",
                        name, i, k, (long long)d->shape[k]);
    size_t s = (size_t)d->shape[k];
    if (s != 0 && n > (SIZE_MAX / 4) / s)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "workspace '%s' buffer %zu: size overflows", name, i);
    n *= s;
  }
  *out = n;
  return CGRT_SUCCESS;
}

static cgrt__reservation *find(cgrt_runtime *rt, int lane, const char *name) {
  for (cgrt__reservation *r = rt->reservations; r; r = r->next)
    if (r->lane == lane && strcmp(r->name, name) == 0) return r;
  return NULL;
}

/* Allocates storage for caps[0..count), writes guards. On success fills base/offset. */
static cgrt_status allocate(cgrt_runtime *rt, const char *name, int lane, size_t count, const size_t *cap,
                            size_t *offset, CUdeviceptr *base, size_t *total) {
  size_t off = 0;
  for (size_t i = 0; i < count; i++) {
    offset[i] = off;
    if (cap[i] > SIZE_MAX / 2 - off)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "workspace '%s': total size overflows", name);
    off = align_up(off + cap[i] + GUARD_BYTES, CGRT_WORKSPACE_ALIGNMENT);
  }
  const cgrt__driver *d = rt->drv;
  CUdeviceptr p = 0;
  CUresult r = d->cuMemAlloc(&p, off);
  if (r != CUDA_SUCCESS) {
    cgrt_status st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuMemAlloc", "workspace reservation");
    cgrt__error_prefix("workspace '%s' (lane %d), %zu bytes", name, lane, off);
    return st;
  }
  for (size_t i = 0; i < count; i++) {
    r = d->cuMemsetD8(p + offset[i] + cap[i], (unsigned char)GUARD_BYTE, GUARD_BYTES);
    if (r != CUDA_SUCCESS) {
      cgrt_status st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuMemsetD8", "writing workspace guard words");
      cgrt__error_prefix("workspace '%s' (lane %d)", name, lane);
      d->cuMemFree(p);
      return st;
    }
  }
  cgrt__alloc_range e = {p, off, 0, CGRT__RANGE_WORKSPACE, 0, ""};
  snprintf(e.what, sizeof e.what, "workspace '%s'", name);
  if (cgrt__buffers_add(rt, &e) != 0) {
    d->cuMemFree(p);
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "workspace '%s': out of host memory", name);
  }
  *base = p;
  *total = off;
  return CGRT_SUCCESS;
}

static void reservation_free(cgrt__reservation *r) {
  if (!r) return;
  free(r->cap);
  free(r->offset);
  free(r);
}

cgrt_status cgrt_workspace_request(cgrt_runtime *rt, int lane, const char *name, const cgrt_tensor_desc *descs,
                                   size_t count, CUdeviceptr *ptrs) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_workspace_request");
  if (st) return st;
  if (!name || !*name || strlen(name) >= NAME_CAP)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_workspace_request: name is NULL, empty or longer than %d",
                      NAME_CAP - 1);
  if (!descs || !ptrs || count == 0 || count > 4096)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_workspace_request('%s'): descs/ptrs NULL or count %zu outside 1..4096", name, count);
  if (lane < 0 || lane >= CGRT_MAX_LANES)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_workspace_request('%s'): lane %d outside 0..%d", name, lane,
                      CGRT_MAX_LANES - 1);
  size_t *need = malloc(count * sizeof *need);
  if (!need) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_workspace_request: out of host memory");
  for (size_t i = 0; i < count; i++) {
    if ((st = desc_bytes(name, i, &descs[i], &need[i]))) {
      free(need);
      return st;
    }
  }

  pthread_mutex_lock(&rt->mu);
  cgrt__reservation *r = find(rt, lane, name);
  int fits = r != NULL && count <= r->count;
  size_t bad = 0;
  for (size_t i = 0; fits && i < count; i++)
    if (need[i] > r->cap[i]) fits = 0, bad = i;
  if (r && count > r->count) bad = r->count;
  if (fits) {
    for (size_t i = 0; i < count; i++) ptrs[i] = r->base + r->offset[i];
    goto out;
  }
  if (rt->locked) {
    if (!r)
      st = cgrt__fail(CGRT_ERROR_WORKSPACE_LOCKED,
                      "workspace '%s' (lane %d) is locked: new reservation of %zu buffer(s) requested after "
                      "cgrt_workspace_lock (reserve every buffer during warm-up)",
                      name, lane, count);
    else if (bad >= r->count)
      st = cgrt__fail(CGRT_ERROR_WORKSPACE_LOCKED,
                      "workspace '%s' (lane %d) is locked: requested %zu buffers, reserved %zu (buffer %zu needs "
                      "%zu bytes, reserved 0)",
                      name, lane, count, r->count, bad, need[bad]);
    else
      st = cgrt__fail(CGRT_ERROR_WORKSPACE_LOCKED,
                      "workspace '%s' (lane %d) is locked: requested %zu bytes for buffer %zu, reserved %zu",
                      name, lane, need[bad], bad, r->cap[bad]);
    goto out;
  }
  if (rt->capturing) {
    st = cgrt__fail(CGRT_ERROR_CAPTURING,
                    "workspace '%s' (lane %d) would be %s during graph capture (needs %zu bytes for buffer %zu)",
                    name, lane, r ? "grown" : "allocated", need[bad], bad);
    goto out;
  }
  {
    size_t n = r && r->count > count ? r->count : count;
    cgrt__reservation *nr = calloc(1, sizeof *nr);
    size_t *cap = calloc(n, sizeof *cap), *offset = calloc(n, sizeof *offset);
    if (!nr || !cap || !offset) {
      free(nr), free(cap), free(offset);
      st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_workspace_request: out of host memory");
      goto out;
    }
    for (size_t i = 0; i < n; i++) {
      size_t old = r && i < r->count ? r->cap[i] : 0, want = i < count ? need[i] : 0;
      cap[i] = old > want ? old : want;
    }
    nr->cap = cap;
    nr->offset = offset;
    nr->count = n;
    nr->lane = lane;
    snprintf(nr->name, sizeof nr->name, "%s", name);
    if ((st = allocate(rt, name, lane, n, cap, offset, &nr->base, &nr->alloc_bytes))) {
      reservation_free(nr);
      goto out;
    }
    if (r) { /* growth before lock: replace in place in the list */
      cgrt__buffers_remove(rt, r->base);
      CUresult cr = rt->drv->cuMemFree(r->base);
      if (cr != CUDA_SUCCESS)
        cgrt__log(CGRT_LOG_WARN, "workspace '%s': cuMemFree of the old storage failed with %s", name,
                  cgrt__curesult_name(cr));
      cgrt__log(CGRT_LOG_DEBUG, "workspace '%s' (lane %d) grown to %zu bytes", name, lane, nr->alloc_bytes);
      r->count = n;
      free(r->cap), free(r->offset);
      r->cap = cap, r->offset = offset, r->base = nr->base, r->alloc_bytes = nr->alloc_bytes;
      free(nr);
    } else {
      if (rt->reservations_tail) rt->reservations_tail->next = nr;
      else rt->reservations = nr;
      rt->reservations_tail = nr;
      r = nr;
      cgrt__log(CGRT_LOG_DEBUG, "workspace '%s' (lane %d): %zu buffer(s), %zu bytes", name, lane, n, nr->alloc_bytes);
    }
    for (size_t i = 0; i < count; i++) ptrs[i] = r->base + r->offset[i];
  }
out:
  pthread_mutex_unlock(&rt->mu);
  free(need);
  return st;
}

cgrt_status cgrt_workspace_lock(cgrt_runtime *rt) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_workspace_lock");
  if (st) return st;
  pthread_mutex_lock(&rt->mu);
  if (rt->capturing) st = cgrt__fail(CGRT_ERROR_CAPTURING, "cgrt_workspace_lock called during graph capture");
  else rt->locked = 1;
  pthread_mutex_unlock(&rt->mu);
  return st;
}

int cgrt_workspace_is_locked(cgrt_runtime *rt) {
  if (cgrt__runtime_enter(rt, "cgrt_workspace_is_locked") != CGRT_SUCCESS) return 0;
  pthread_mutex_lock(&rt->mu);
  int l = rt->locked;
  pthread_mutex_unlock(&rt->mu);
  return l;
}

cgrt_status cgrt_workspace_get_stats(cgrt_runtime *rt, cgrt_workspace_stats *stats) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_workspace_get_stats");
  if (st) return st;
  if (!stats || stats->size < sizeof *stats)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_workspace_get_stats: stats NULL or stats->size too small");
  cgrt_workspace_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  pthread_mutex_lock(&rt->mu);
  for (cgrt__reservation *r = rt->reservations; r; r = r->next) {
    s.reservations++;
    s.buffers += r->count;
    for (size_t i = 0; i < r->count; i++) s.bytes_requested += r->cap[i];
    s.bytes_allocated += r->alloc_bytes;
  }
  s.counter_bytes = rt->counter_bytes_allocated;
  s.bytes_allocated += rt->counter_bytes_allocated;
  s.locked = rt->locked;
  pthread_mutex_unlock(&rt->mu);
  *stats = s;
  return CGRT_SUCCESS;
}

/* What cgrt_workspace_visit reports of one reservation. */
typedef struct visit_entry {
  int lane;
  char name[NAME_CAP];
  size_t buffers, bytes;
} visit_entry;

cgrt_status cgrt_workspace_visit(cgrt_runtime *rt, cgrt_workspace_visit_fn fn, void *user) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_workspace_visit");
  if (st) return st;
  if (!fn) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_workspace_visit: fn is NULL");
  /* A copy taken under the lock; fn runs without it, so that it may call cgrt. */
  visit_entry *v = NULL;
  size_t n = 0;
  pthread_mutex_lock(&rt->mu);
  for (cgrt__reservation *r = rt->reservations; r; r = r->next) n++;
  if (n > 0 && (v = (visit_entry *)calloc(n, sizeof *v)) == NULL) {
    pthread_mutex_unlock(&rt->mu);
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_workspace_visit: a copy of %zu reservations", n);
  }
  size_t k = 0;
  for (cgrt__reservation *r = rt->reservations; r; r = r->next, k++) {
    v[k].lane = r->lane;
    memcpy(v[k].name, r->name, sizeof v[k].name);
    v[k].buffers = r->count;
    for (size_t i = 0; i < r->count; i++) v[k].bytes += r->cap[i];
  }
  pthread_mutex_unlock(&rt->mu);
  for (k = 0; k < n; k++) fn(user, v[k].lane, v[k].name, v[k].buffers, v[k].bytes);
  free(v);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_workspace_verify(cgrt_runtime *rt) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_workspace_verify");
  if (st) return st;
  if ((st = cgrt__ctx_synchronize(rt, "cgrt_workspace_verify"))) return st;
  unsigned char guard[GUARD_BYTES];
  pthread_mutex_lock(&rt->mu);
  for (cgrt__reservation *r = rt->reservations; r && !st; r = r->next) {
    for (size_t i = 0; i < r->count && !st; i++) {
      CUdeviceptr g = r->base + r->offset[i] + r->cap[i];
      st = CGRT__CU(rt->drv, cuMemcpyDtoH, (guard, g, sizeof guard), CGRT_ERROR_DRIVER, "cgrt_workspace_verify");
      for (size_t w = 0; !st && w < GUARD_BYTES; w++)
        if (guard[w] != GUARD_BYTE)
          st = cgrt__fail(CGRT_ERROR_GUARD_CORRUPTED,
                          "workspace '%s' (lane %d) buffer %zu (%zu bytes): guard byte at byte offset %zu past "
                          "the end was overwritten (0x%02x, expected 0x%02x)",
                          r->name, r->lane, i, r->cap[i], w, guard[w], GUARD_BYTE);
    }
  }
  pthread_mutex_unlock(&rt->mu);
  return st;
}

/* ---- counters ---- */
size_t cgrt_counters_decode_bytes(size_t max_rows, size_t heads, int sm_count) {
  if (heads != 0 && max_rows > SIZE_MAX / heads) return SIZE_MAX; /* saturates, never wraps */
  size_t n = max_rows * heads;
  if (sm_count > 0 && (size_t)sm_count > n) n = (size_t)sm_count;
  if (n > SIZE_MAX / 4 - 8) return SIZE_MAX;
  return align_up(n, 8) * 4;
}

cgrt_status cgrt_counters_reserve(cgrt_runtime *rt, size_t bytes) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_counters_reserve");
  if (st) return st;
  if (bytes == 0 || bytes > ((size_t)1 << 40))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_counters_reserve: %zu bytes is outside 1..2^40", bytes);
  bytes = align_up(bytes, 32);
  pthread_mutex_lock(&rt->mu);
  if (bytes <= rt->counter_bytes_allocated) {
    if (bytes > rt->counter_bytes_reserved) rt->counter_bytes_reserved = bytes;
  } else if (rt->locked) {
    st = cgrt__fail(CGRT_ERROR_WORKSPACE_LOCKED,
                    "counter buffer is locked: requested %zu bytes, reserved %zu", bytes, rt->counter_bytes_allocated);
  } else if (rt->capturing) {
    st = cgrt__fail(CGRT_ERROR_CAPTURING, "counter buffer would grow to %zu bytes during graph capture", bytes);
  } else {
    CUdeviceptr p = 0;
    st = CGRT__CU(rt->drv, cuMemAlloc, (&p, bytes), CGRT_ERROR_DRIVER, "allocating the counter buffer");
    if (!st) {
      /* Zeroed once, here; kernels leave every counter at zero after each launch. */
      st = CGRT__CU(rt->drv, cuMemsetD32, (p, 0, bytes / 4), CGRT_ERROR_DRIVER, "zeroing the counter buffer");
      /* cuMemsetD32 is asynchronous; kernels on non-blocking streams must see zeros. Its
       * stream, not the context: a context synchronization breaks other threads' captures. */
      if (!st) st = CGRT__CU(rt->drv, cuStreamSynchronize, (NULL), CGRT_ERROR_DRIVER, "zeroing the counter buffer");
      cgrt__alloc_range e = {p, bytes, 0, CGRT__RANGE_COUNTERS, 0, "counter buffer"};
      if (!st && cgrt__buffers_add(rt, &e) != 0)
        st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "counter buffer: out of host memory");
      if (st) rt->drv->cuMemFree(p);
    }
    if (!st) {
      if (rt->counters) {
        cgrt__buffers_remove(rt, rt->counters);
        CUresult r = rt->drv->cuMemFree(rt->counters);
        if (r != CUDA_SUCCESS)
          cgrt__log(CGRT_LOG_WARN, "counter buffer: cuMemFree of the old buffer failed with %s",
                    cgrt__curesult_name(r));
      }
      rt->counters = p;
      rt->counter_bytes_allocated = rt->counter_bytes_reserved = bytes;
    }
  }
  pthread_mutex_unlock(&rt->mu);
  return st;
}

cgrt_status cgrt_counters_get(cgrt_runtime *rt, CUdeviceptr *ptr, size_t *bytes) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_counters_get");
  if (st) return st;
  if (!ptr) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_counters_get: ptr is NULL");
  pthread_mutex_lock(&rt->mu);
  *ptr = rt->counters;
  if (bytes) *bytes = rt->counter_bytes_allocated;
  pthread_mutex_unlock(&rt->mu);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_counters_verify(cgrt_runtime *rt) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_counters_verify");
  if (st) return st;
  pthread_mutex_lock(&rt->mu);
  CUdeviceptr p = rt->counters;
  size_t n = rt->counter_bytes_allocated / 4;
  pthread_mutex_unlock(&rt->mu);
  if (!p) return CGRT_SUCCESS;
  if ((st = cgrt__ctx_synchronize(rt, "cgrt_counters_verify"))) return st;
  uint32_t *h = malloc(n * 4);
  if (!h) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_counters_verify: out of host memory");
  st = CGRT__CU(rt->drv, cuMemcpyDtoH, (h, p, n * 4), CGRT_ERROR_DRIVER, "cgrt_counters_verify");
  size_t dirty = 0, first = 0;
  for (size_t i = 0; !st && i < n; i++)
    if (h[i] != 0 && dirty++ == 0) first = i;
  if (!st && dirty)
    st = cgrt__fail(CGRT_ERROR_COUNTERS_DIRTY,
                    "%zu of %zu counters are non-zero after the kernels ran (first: counter %zu = %u); a multi-CTA "
                    "kernel did not reset its counter",
                    dirty, n, first, h[first]);
  free(h);
  return st;
}

void cgrt__workspace_release_all(cgrt_runtime *rt) {
  pthread_mutex_lock(&rt->mu);
  cgrt__reservation *r = rt->reservations;
  while (r) {
    cgrt__reservation *next = r->next;
    cgrt__buffers_remove(rt, r->base);
    CUresult cr = rt->drv->cuMemFree(r->base);
    if (cr != CUDA_SUCCESS)
      cgrt__log(CGRT_LOG_WARN, "workspace '%s': cuMemFree failed with %s", r->name, cgrt__curesult_name(cr));
    reservation_free(r);
    r = next;
  }
  rt->reservations = rt->reservations_tail = NULL;
  if (rt->counters) {
    cgrt__buffers_remove(rt, rt->counters);
    CUresult cr = rt->drv->cuMemFree(rt->counters);
    if (cr != CUDA_SUCCESS) cgrt__log(CGRT_LOG_WARN, "counter buffer: cuMemFree failed with %s", cgrt__curesult_name(cr));
    rt->counters = 0;
  }
  rt->counter_bytes_allocated = rt->counter_bytes_reserved = 0;
  pthread_mutex_unlock(&rt->mu);
}
