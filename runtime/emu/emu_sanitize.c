/* The emulation as a sanitizer (docs/emulation.md): a launch whose pointer parameters
 * point into freed device memory fails before its reference runs, and a reference that
 * would leave a live allocation through a checked view (emu_view.h) stops; both return
 * CUDA_ERROR_ILLEGAL_ADDRESS from the call that launched (cuLaunchKernel*, or the
 * cuGraphLaunch whose kernel node it was) and touch nothing they should not. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"
#include "runtime/emu/emu_view.h"

static size_t g_faults; /* atomic */
static _Thread_local char t_fault[256];
/* The reference running on this thread (references do not launch: no nesting). */
static _Thread_local struct {
  const char *kernel;
  int faulted;
} t_run;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_fault, sizeof t_fault, fmt, ap);
  va_end(ap);
  __atomic_add_fetch(&g_faults, 1, __ATOMIC_RELAXED);
}

size_t cgrt__emu_faults(void) { return __atomic_load_n(&g_faults, __ATOMIC_RELAXED); }

const char *cgrt__emu_last_fault(void) { return t_fault; }

CUresult cgrt__emu_params_check(const cgrt__ref_kernel *ref, const unsigned char *buf,
                                const size_t *offs) {
  if (cgrt__emu_arena.bytes == 0) return CUDA_SUCCESS; /* nothing ever allocated */
  for (size_t i = 0; i < ref->num_params; i++) {
    const size_t sz = ref->param_sizes[i];
    if (sz < sizeof(uint64_t)) continue;
    const size_t o = offs[i];
    for (size_t w = (o + 7) & ~(size_t)7; w + sizeof(uint64_t) <= o + sz; w += sizeof(uint64_t)) {
      uint64_t v;
      memcpy(&v, buf + w, sizeof v);
      if (!cgrt__emu_mem_freed((uintptr_t)v)) continue;
      record("%s: parameter %zu (byte %zu) points into freed device memory (0x%" PRIx64 ")",
             ref->name, i, w - o, v);
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
  }
  return CUDA_SUCCESS;
}

static size_t view_bytes(const void *p) {
  cgrt__emu_lock();
  size_t n = cgrt__emu_mem_bytes_from((uintptr_t)p);
  cgrt__emu_unlock();
  return n;
}

static void view_fault(const void *p, size_t n, const char *what) {
  if (t_run.faulted) return;
  t_run.faulted = 1;
  record("%s: %s [0x%" PRIxPTR ", +%zu) lies outside every live allocation", t_run.kernel ? t_run.kernel : "?",
         what ? what : "access", (uintptr_t)p, n);
}

static const cgrt__emu_view_ctx g_ctx = {view_bytes, view_fault};

CUresult cgrt__emu_kernel_run(const cgrt__ref_kernel *ref, const unsigned grid[3],
                              const unsigned block[3], unsigned shmem, const unsigned char *buf,
                              const size_t *offs) {
  cgrt__ref_launch l;
  memcpy(l.grid, grid, sizeof(l.grid));
  memcpy(l.block, block, sizeof(l.block));
  l.shared_bytes = shmem;
  t_run.kernel = ref->name;
  t_run.faulted = 0;
  cgrt__emu_view_set(&g_ctx);
  ref->fn(&l, buf, offs);
  cgrt__emu_view_set(NULL);
  const int faulted = t_run.faulted;
  return faulted ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}
