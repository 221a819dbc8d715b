/* Device memory outside the workspaces, and external memory made known to the runtime
 * (include/cgrt/cgrt_memory.h): both join the buffer registry (runtime/buffers.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgrt/cgrt_memory.h"
#include "runtime/runtime_internal.h"

/* Takes the runtime's lock, refusing during capture (then the lock is not held). */
static cgrt_status lock_outside_capture(cgrt_runtime *rt, const char *api) {
  pthread_mutex_lock(&rt->mu);
  if (rt->capturing) {
    pthread_mutex_unlock(&rt->mu);
    return cgrt__fail(CGRT_ERROR_CAPTURING, "%s during graph capture", api);
  }
  return CGRT_SUCCESS;
}

/* The registry entry starting at base with that kind, or -1. rt->mu held. */
static long entry_at(cgrt_runtime *rt, CUdeviceptr base, int kind) {
  long i = cgrt__buffers_find(rt, base);
  return i >= 0 && rt->buffers[i].base == base && rt->buffers[i].kind == kind ? i : -1;
}

cgrt_status cgrt_mem_alloc(cgrt_runtime *rt, size_t bytes, CUdeviceptr *out) {
  if (out) *out = 0;
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mem_alloc");
  if (st) return st;
  if (!out || bytes == 0) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mem_alloc: out is NULL or bytes is 0");
  if ((st = lock_outside_capture(rt, "cgrt_mem_alloc"))) return st;
  CUdeviceptr p = 0;
  st = CGRT__CU(rt->drv, cuMemAlloc, (&p, bytes), CGRT_ERROR_DRIVER, "cgrt_mem_alloc");
  if (!st) {
    cgrt__alloc_range e = {p, bytes, 0, CGRT__RANGE_MEM_ALLOC, 0, "cgrt_mem_alloc allocation"};
    if (cgrt__buffers_add(rt, &e) != 0) {
      rt->drv->cuMemFree(p);
      st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_mem_alloc: out of host memory");
    }
  }
  pthread_mutex_unlock(&rt->mu);
  if (!st) *out = p;
  return st;
}

cgrt_status cgrt_mem_free(cgrt_runtime *rt, CUdeviceptr ptr) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mem_free");
  if (st || !ptr) return st;
  if ((st = lock_outside_capture(rt, "cgrt_mem_free"))) return st;
  long i = entry_at(rt, ptr, CGRT__RANGE_MEM_ALLOC);
  if (i < 0) {
    st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                    "cgrt_mem_free: 0x%llx is not the base of a live cgrt_mem_alloc allocation",
                    (unsigned long long)ptr);
  } else {
    cgrt__buffers_remove(rt, ptr);
    st = CGRT__CU(rt->drv, cuMemFree, (ptr), CGRT_ERROR_DRIVER, "cgrt_mem_free");
  }
  pthread_mutex_unlock(&rt->mu);
  return st;
}

cgrt_status cgrt_mem_register(cgrt_runtime *rt, CUdeviceptr base, size_t bytes) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mem_register");
  if (st) return st;
  if (!base || !bytes || bytes - 1 > ~(CUdeviceptr)0 - base)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mem_register: base 0x%llx, %zu bytes (null, empty or wrapping)",
                      (unsigned long long)base, bytes);
  if ((st = lock_outside_capture(rt, "cgrt_mem_register"))) return st;
  const cgrt__driver *d = rt->drv;
  cgrt__alloc_range e = {base, bytes, 0, CGRT__RANGE_REGISTERED, 0, ""};
  snprintf(e.what, sizeof e.what, "registered range");
  for (size_t i = 0; i < rt->nbuffers && !st; i++) {
    const cgrt__alloc_range *o = &rt->buffers[i];
    if (o->base < base + bytes && base < o->base + o->bytes)
      st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mem_register: [0x%llx, +%zu) overlaps the %s at 0x%llx (%zu bytes)",
                      (unsigned long long)base, bytes, o->what, (unsigned long long)o->base, o->bytes);
  }
  CUresult r = CUDA_SUCCESS;
  if (!st) r = cgrt__buffer_id(d, base, bytes, &e.id);
  if (!st && r == CUDA_ERROR_INVALID_VALUE && d->is_emulated) {
    /* Host memory on the emulation ("host-backed arrays"): copies and kernels may use
     * it once the emulated driver knows it. */
    r = d->cuMemHostRegister((void *)(uintptr_t)base, bytes, 0);
    if (r == CUDA_SUCCESS) {
      e.host_registered = 1;
      r = cgrt__buffer_id(d, base, bytes, &e.id);
      if (r != CUDA_SUCCESS) d->cuMemHostUnregister((void *)(uintptr_t)base);
    }
  }
  if (!st && r == CUDA_ERROR_INVALID_VALUE)
    st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mem_register: [0x%llx, +%zu) is not inside memory the %s driver %s",
                    (unsigned long long)base, bytes, cgrt_driver_kind_name(rt->kind),
                    d->is_emulated ? "allocated, nor mapped host memory it can register" : "allocated");
  else if (!st && r == CUDA_ERROR_NOT_FOUND)
    st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mem_register: [0x%llx, +%zu) runs past the end of its allocation",
                    (unsigned long long)base, bytes);
  else if (!st && r != CUDA_SUCCESS)
    st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuPointerGetAttribute", "cgrt_mem_register");
  if (!st && cgrt__buffers_add(rt, &e) != 0) {
    if (e.host_registered) d->cuMemHostUnregister((void *)(uintptr_t)base);
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_mem_register: out of host memory");
  }
  pthread_mutex_unlock(&rt->mu);
  return st;
}

cgrt_status cgrt_mem_unregister(cgrt_runtime *rt, CUdeviceptr base) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mem_unregister");
  if (st || (st = lock_outside_capture(rt, "cgrt_mem_unregister"))) return st;
  long i = entry_at(rt, base, CGRT__RANGE_REGISTERED);
  if (i < 0) {
    st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mem_unregister: 0x%llx is not the base of a registered range",
                    (unsigned long long)base);
  } else {
    int host = rt->buffers[i].host_registered;
    cgrt__buffers_remove(rt, base);
    if (host)
      st = CGRT__CU(rt->drv, cuMemHostUnregister, ((void *)(uintptr_t)base), CGRT_ERROR_DRIVER,
                    "cgrt_mem_unregister");
  }
  pthread_mutex_unlock(&rt->mu);
  return st;
}

void cgrt__device_memory_release_all(cgrt_runtime *rt) {
  pthread_mutex_lock(&rt->mu);
  for (size_t i = 0; i < rt->nbuffers; i++) {
    const cgrt__alloc_range *e = &rt->buffers[i];
    CUresult r = CUDA_SUCCESS;
    if (e->kind == CGRT__RANGE_MEM_ALLOC) {
      cgrt__log(CGRT_LOG_WARN, "cgrt_runtime_destroy: freeing a cgrt_mem_alloc allocation still live "
                "(0x%llx, %zu bytes)", (unsigned long long)e->base, e->bytes);
      r = rt->drv->cuMemFree(e->base);
    } else if (e->host_registered) {
      r = rt->drv->cuMemHostUnregister((void *)(uintptr_t)e->base);
    }
    if (r != CUDA_SUCCESS)
      cgrt__log(CGRT_LOG_WARN, "cgrt_runtime_destroy: releasing the %s at 0x%llx failed with %s", e->what,
                (unsigned long long)e->base, cgrt__curesult_name(r));
  }
  free(rt->buffers);
  rt->buffers = NULL;
  rt->nbuffers = rt->buffers_cap = 0;
  rt->buffers_gen++;
  pthread_mutex_unlock(&rt->mu);
}
