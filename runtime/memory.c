/* Copies and fills through the runtime's driver table (include/cgrt/cgrt_memory.h). */
#include "cgrt/cgrt_memory.h"
#include "runtime/runtime_internal.h"

/* Enters the runtime and checks the arguments. A call that synchronizes (`syncs`) is
 * refused on a thread that captures for a graph set (an enqueue callback under capture):
 * the driver would invalidate that capture, or refuse the call. */
static cgrt_status check(cgrt_runtime *rt, const char *api, int bad_args, int syncs) {
  cgrt_status st = cgrt__runtime_enter(rt, api);
  if (st) return st;
  if (bad_args) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: NULL source or destination", api);
  return syncs ? cgrt__refuse_in_capture(api) : CGRT_SUCCESS;
}

/* cuMemcpyHtoD from pageable memory may return before the DMA reached device memory,
 * and cuMemsetD8 is asynchronous: neither is ordered with work on non-blocking streams
 * (graph replay streams are). Waiting for the legacy stream makes the data visible to
 * whatever the host launches next, on any stream. */
static cgrt_status complete(cgrt_runtime *rt, const char *api) {
  return CGRT__CU(rt->drv, cuStreamSynchronize, (NULL), CGRT_ERROR_DRIVER, api);
}

cgrt_status cgrt_memcpy_htod(cgrt_runtime *rt, CUdeviceptr dst, const void *src, size_t bytes) {
  cgrt_status st = check(rt, "cgrt_memcpy_htod", bytes && (!dst || !src), 1);
  if (st || !bytes) return st;
  st = CGRT__CU(rt->drv, cuMemcpyHtoD, (dst, src, bytes), CGRT_ERROR_DRIVER, "cgrt_memcpy_htod");
  return st ? st : complete(rt, "cgrt_memcpy_htod");
}

cgrt_status cgrt_memcpy_dtoh(cgrt_runtime *rt, void *dst, CUdeviceptr src, size_t bytes) {
  cgrt_status st = check(rt, "cgrt_memcpy_dtoh", bytes && (!dst || !src), 1);
  if (st || !bytes) return st;
  return CGRT__CU(rt->drv, cuMemcpyDtoH, (dst, src, bytes), CGRT_ERROR_DRIVER, "cgrt_memcpy_dtoh");
}

cgrt_status cgrt_memcpy_dtod_async(cgrt_runtime *rt, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream) {
  cgrt_status st = check(rt, "cgrt_memcpy_dtod_async", bytes && (!dst || !src), 0);
  if (st || !bytes) return st;
  return CGRT__CU(rt->drv, cuMemcpyDtoDAsync, (dst, src, bytes, stream), CGRT_ERROR_DRIVER,
                  "cgrt_memcpy_dtod_async");
}

cgrt_status cgrt_memset_d8(cgrt_runtime *rt, CUdeviceptr dst, unsigned char value, size_t bytes) {
  cgrt_status st = check(rt, "cgrt_memset_d8", bytes && !dst, 1);
  if (st || !bytes) return st;
  st = CGRT__CU(rt->drv, cuMemsetD8, (dst, value, bytes), CGRT_ERROR_DRIVER, "cgrt_memset_d8");
  return st ? st : complete(rt, "cgrt_memset_d8");
}

cgrt_status cgrt_stream_synchronize(cgrt_runtime *rt, CUstream stream) {
  cgrt_status st = check(rt, "cgrt_stream_synchronize", 0, 1);
  if (st) return st;
  return CGRT__CU(rt->drv, cuStreamSynchronize, (stream), CGRT_ERROR_DRIVER, "cgrt_stream_synchronize");
}
