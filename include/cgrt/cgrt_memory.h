/* cgrt: copies and fills through cgrt's driver table, and device memory known to the
 * runtime (the buffer registry that checked replay relies on).
 *
 * For hosts that fill their buffers without linking the CUDA runtime, and for hosts that
 * run on the CPU emulation (where device addresses are only meaningful to cgrt's
 * emulated driver). On a GPU they are plain cuMemcpy/cuMemset calls on the runtime's
 * context. */
#ifndef CGRT_MEMORY_H
#define CGRT_MEMORY_H

#include "cgrt/cgrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies `bytes` from host memory to device memory. Complete on return: the data is in
 * device memory and visible to work the host launches afterwards on any stream
 * (cuMemcpyHtoD alone does not promise that for pageable memory). Statuses:
 * CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (NULL src or dst 0
 * with bytes > 0); CGRT_ERROR_CAPTURING (called by a thread that captures for a graph
 * set, e.g. from an enqueue callback under capture: nothing is done, the capture goes
 * on); CGRT_ERROR_DRIVER (message names the call and the CUresult). Thread-safe. Must
 * not be called during capture (it synchronizes). */
cgrt_status cgrt_memcpy_htod(cgrt_runtime *rt, CUdeviceptr dst, const void *src, size_t bytes);

/* Copies `bytes` from device memory to host memory (cuMemcpyDtoH; waits for prior work
 * of the legacy default stream). Statuses as cgrt_memcpy_htod. Thread-safe. Must not be
 * called during capture. */
cgrt_status cgrt_memcpy_dtoh(cgrt_runtime *rt, void *dst, CUdeviceptr src, size_t bytes);

/* Copies device to device on `stream` (NULL: the legacy default stream), asynchronously.
 * Statuses as cgrt_memcpy_htod but CGRT_ERROR_CAPTURING. Thread-safe. May be called
 * during capture (records a memcpy node when `stream` is capturing). */
cgrt_status cgrt_memcpy_dtod_async(cgrt_runtime *rt, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream);

/* Sets `bytes` bytes to `value`. Complete on return, like cgrt_memcpy_htod. Statuses as cgrt_memcpy_htod.
 * Thread-safe. Must not be called during capture. */
cgrt_status cgrt_memset_d8(cgrt_runtime *rt, CUdeviceptr dst, unsigned char value, size_t bytes);

/* ---- device memory known to the runtime -------------------------------------------
 *
 * The buffer registry: the live device ranges a runtime knows -- its workspaces and
 * counter buffer, allocations from cgrt_mem_alloc, and external memory the host
 * registers with cgrt_mem_register. Checked replay (cgrt_graphs.h,
 * options.checked_replay) accepts a pointer parameter only inside such a range (or a
 * set's buffers and declared ranges) and only while the range is the very allocation it
 * was when the range became known: every range carries an identity that is never reused
 * (for external memory the driver's buffer id, CU_POINTER_ATTRIBUTE_BUFFER_ID), so memory
 * freed and handed out again at the same address is told apart. */

/* Allocates `bytes` of device memory owned by the runtime, outside the locked
 * workspaces (it may be allocated and freed after cgrt_workspace_lock), 256-byte aligned,
 * and enters it in the buffer registry. Freed by cgrt_mem_free, or by
 * cgrt_runtime_destroy, which logs a CGRT_LOG_WARN for each allocation still live.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (out
 * NULL, bytes 0); CGRT_ERROR_CAPTURING (during a capture by this runtime's graph sets);
 * CGRT_ERROR_DRIVER (cuMemAlloc failed: the message names the CUresult, e.g.
 * CUDA_ERROR_OUT_OF_MEMORY); CGRT_ERROR_OUT_OF_MEMORY (host). *out is 0 on failure.
 * Thread-safe. */
cgrt_status cgrt_mem_alloc(cgrt_runtime *rt, size_t bytes, CUdeviceptr *out);

/* Frees an allocation of cgrt_mem_alloc (it leaves the registry first). ptr 0 is a no-op.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (ptr is
 * not the base of a live cgrt_mem_alloc allocation: nothing is freed);
 * CGRT_ERROR_CAPTURING (during capture: nothing is freed); CGRT_ERROR_DRIVER (cuMemFree
 * failed; the allocation has left the registry). Thread-safe. */
cgrt_status cgrt_mem_free(cgrt_runtime *rt, CUdeviceptr ptr);

/* Enters external memory in the buffer registry: [base, base + bytes) must lie inside one
 * allocation the driver knows (e.g. a PyTorch tensor's storage), whose buffer id
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID) the range keeps. cgrt never frees it; the host
 * unregisters it before freeing it (a registered range whose memory was freed is refused
 * by checked replay, and dropped with a CGRT_LOG_WARN when cgrt allocates over it).
 * On the CPU emulation host memory may be registered too ("host-backed arrays"): cgrt
 * then registers it with the emulated driver (cuMemHostRegister), and copies, memsets
 * and kernels on the emulation may read and write it until it is unregistered; every
 * page of it must be mapped in the process (an address never allocated, such as
 * 0xdead000, is refused). On a GPU host memory the driver does not know is refused.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (base 0,
 * bytes 0, a range wrapping past 2^64, memory the driver does not know, a range running
 * past its allocation, or overlapping a range already in the registry);
 * CGRT_ERROR_CAPTURING; CGRT_ERROR_DRIVER; CGRT_ERROR_OUT_OF_MEMORY. Thread-safe. */
cgrt_status cgrt_mem_register(cgrt_runtime *rt, CUdeviceptr base, size_t bytes);

/* Removes a range registered with cgrt_mem_register (base must be its base) from the
 * registry; on the emulation host memory is unregistered from the emulated driver.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (not the
 * base of a registered range); CGRT_ERROR_CAPTURING; CGRT_ERROR_DRIVER. Thread-safe. */
cgrt_status cgrt_mem_unregister(cgrt_runtime *rt, CUdeviceptr base);

/* Waits for all work on `stream` (NULL: the legacy default stream).
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_CAPTURING (as
 * cgrt_memcpy_htod), CGRT_ERROR_DRIVER (includes an earlier asynchronous kernel failure).
 * Thread-safe. Must not be called during capture. */
cgrt_status cgrt_stream_synchronize(cgrt_runtime *rt, CUstream stream);

#ifdef __cplusplus
}
#endif
#endif
