/* The per-thread checked-view context of emu_view.h (the emulation fills it). */
#include "runtime/emu/emu_view.h"

static _Thread_local const cgrt__emu_view_ctx *t_ctx;

const cgrt__emu_view_ctx *cgrt__emu_view_set(const cgrt__emu_view_ctx *ctx) {
  const cgrt__emu_view_ctx *prev = t_ctx;
  t_ctx = ctx;
  return prev;
}

size_t cgrt__emu_view_bytes(const void *p) {
  const cgrt__emu_view_ctx *c = t_ctx;
  return c != NULL ? c->bytes(p) : SIZE_MAX;
}

void cgrt__emu_view_fault(const void *p, size_t n, const char *what) {
  const cgrt__emu_view_ctx *c = t_ctx;
  if (c != NULL) c->fault(p, n, what);
}
