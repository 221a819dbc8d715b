/* Checked views of emulated device memory, for the C references (kernels/): the
 * emulation's sanitizer (docs/emulation.md).
 *
 * While the CPU emulation runs a reference kernel (an eager launch or a graph's kernel
 * node), a reference asks here how far it may access from a pointer before it follows a
 * data-dependent index (a block-table page into the KV cache): the emulation resolves the
 * pointer against its live-allocation table. An access that would leave the allocation
 * is reported with cgrt__emu_view_fault instead of made; the reference then stops, and
 * the call that launched it returns CUDA_ERROR_ILLEGAL_ADDRESS, as a GPU faults.
 *
 * Outside an emulated launch (a test calling a reference directly on host memory) every
 * access is allowed and a fault is ignored. Internal header: not installed. The state is
 * per thread (a reference runs on the thread that launched it); thread-safe. */
#ifndef CGRT_RUNTIME_EMU_EMU_VIEW_H
#define CGRT_RUNTIME_EMU_EMU_VIEW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the emulation installs around a reference kernel (emu_sanitize.c). */
typedef struct cgrt__emu_view_ctx {
  size_t (*bytes)(const void *p);
  void (*fault)(const void *p, size_t n, const char *what);
} cgrt__emu_view_ctx;

/* Installs ctx for the calling thread (NULL: none); returns the previous one. */
const cgrt__emu_view_ctx *cgrt__emu_view_set(const cgrt__emu_view_ctx *ctx);

/* The bytes a reference may access from p: up to the end of the live allocation (device
 * memory, pinned or registered host memory) that contains p; 0 when p points into
 * emulated device memory that is not allocated (freed); SIZE_MAX when unchecked (outside
 * a launch, or host memory the emulation does not know). */
size_t cgrt__emu_view_bytes(const void *p);

/* Reports that the running reference would access [p, p + n) (`what`: a short name of
 * the operand) outside a live allocation: the launch fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS. The reference must not make the access; it stops. */
void cgrt__emu_view_fault(const void *p, size_t n, const char *what);

#ifdef __cplusplus
}
#endif
#endif
