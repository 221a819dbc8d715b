/* cgrt: copies and fills through cgrt's driver table.
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
 * (cuMemcpyHtoD alone does not promise that for pageable memory). Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE;
 * CGRT_ERROR_INVALID_ARGUMENT (NULL src or dst 0 with bytes > 0); CGRT_ERROR_DRIVER
 * (message names the call and the CUresult). Thread-safe. Must not be called during
 * capture (it synchronizes). */
cgrt_status cgrt_memcpy_htod(cgrt_runtime *rt, CUdeviceptr dst, const void *src, size_t bytes);

/* Copies `bytes` from device memory to host memory (cuMemcpyDtoH; waits for prior work
 * of the legacy default stream). Statuses as cgrt_memcpy_htod. Thread-safe. Must not be
 * called during capture. */
cgrt_status cgrt_memcpy_dtoh(cgrt_runtime *rt, void *dst, CUdeviceptr src, size_t bytes);

/* Copies device to device on `stream` (NULL: the legacy default stream), asynchronously.
 * Statuses as cgrt_memcpy_htod. Thread-safe. May be called during capture (records a
 * memcpy node when `stream` is capturing). */
cgrt_status cgrt_memcpy_dtod_async(cgrt_runtime *rt, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream);

/* Sets `bytes` bytes to `value`. Complete on return, like cgrt_memcpy_htod. Statuses as cgrt_memcpy_htod.
 * Thread-safe. Must not be called during capture. */
cgrt_status cgrt_memset_d8(cgrt_runtime *rt, CUdeviceptr dst, unsigned char value, size_t bytes);

/* Waits for all work on `stream` (NULL: the legacy default stream).
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_DRIVER (includes an
 * earlier asynchronous kernel failure). Thread-safe. Must not be called during capture. */
cgrt_status cgrt_stream_synchronize(cgrt_runtime *rt, CUstream stream);

#ifdef __cplusplus
}
#endif
#endif
