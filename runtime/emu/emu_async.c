/* Emulated stream-ordered copies and memsets: run at once, or recorded as memcpy /
 * memset nodes when the stream captures (host operands must then be pinned, as on the
 * driver: pageable memory invalidates the capture). */
#include <string.h>

#include "runtime/emu/emu_internal.h"

static CUresult copy_async(CUmemorytype dt, uintptr_t dst, CUmemorytype st, uintptr_t src,
                           size_t n, CUstream h) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUstream_st *s;
  emu_capture *cap;
  r = cgrt__emu_stream_get(h, &s, &cap);
  if (r != CUDA_SUCCESS || n == 0) goto out;
  int dev_ok = (dt != CU_MEMORYTYPE_DEVICE || cgrt__emu_mem_range_ok(dst, n, EMU_MEM_ANY)) &&
               (st != CU_MEMORYTYPE_DEVICE || cgrt__emu_mem_range_ok(src, n, EMU_MEM_ANY));
  int host_null = (dt == CU_MEMORYTYPE_HOST && dst == 0) || (st == CU_MEMORYTYPE_HOST && src == 0);
  if (!dev_ok || host_null) {
    r = cap ? cgrt__emu_capture_fail(cap, CUDA_ERROR_INVALID_VALUE) : CUDA_ERROR_INVALID_VALUE;
    goto out;
  }
  if (cap != NULL) {
    int pinned = (dt != CU_MEMORYTYPE_HOST || cgrt__emu_mem_range_ok(dst, n, EMU_MEM_PINNED)) &&
                 (st != CU_MEMORYTYPE_HOST || cgrt__emu_mem_range_ok(src, n, EMU_MEM_PINNED));
    if (!pinned) {
      r = cgrt__emu_capture_fail(cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
      goto out;
    }
    struct CUgraphNode_st *node = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_MEMCPY);
    if (node == NULL) {
      r = cgrt__emu_capture_fail(cap, CUDA_ERROR_OUT_OF_MEMORY);
      goto out;
    }
    cgrt__emu_memcpy_params(&node->u.cp, dt, dst, st, src, n);
    r = cgrt__emu_capture_node(s, node);
    goto out;
  }
  cgrt__emu_unlock();
  memmove((void *)dst, (const void *)src, n);
  return CUDA_SUCCESS;
out:
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream) {
  return copy_async(CU_MEMORYTYPE_DEVICE, (uintptr_t)dstDevice, CU_MEMORYTYPE_HOST,
                    (uintptr_t)srcHost, ByteCount, hStream);
}

CUresult cgrt__emu_cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream) {
  return copy_async(CU_MEMORYTYPE_HOST, (uintptr_t)dstHost, CU_MEMORYTYPE_DEVICE,
                    (uintptr_t)srcDevice, ByteCount, hStream);
}

CUresult cgrt__emu_cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                     size_t ByteCount, CUstream hStream) {
  return copy_async(CU_MEMORYTYPE_DEVICE, (uintptr_t)dstDevice, CU_MEMORYTYPE_DEVICE,
                    (uintptr_t)srcDevice, ByteCount, hStream);
}

static CUresult memset_async(CUdeviceptr dst, unsigned value, unsigned es, size_t n, CUstream h) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUstream_st *s;
  emu_capture *cap;
  r = cgrt__emu_stream_get(h, &s, &cap);
  if (r != CUDA_SUCCESS || n == 0) goto out;
  CUDA_MEMSET_NODE_PARAMS m = {.dst = dst, .value = value, .elementSize = es, .width = n, .height = 1};
  if (n > SIZE_MAX / es || !cgrt__emu_memset_valid(&m)) {
    r = cap ? cgrt__emu_capture_fail(cap, CUDA_ERROR_INVALID_VALUE) : CUDA_ERROR_INVALID_VALUE;
    goto out;
  }
  if (cap != NULL) {
    struct CUgraphNode_st *node = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_MEMSET);
    if (node == NULL) {
      r = cgrt__emu_capture_fail(cap, CUDA_ERROR_OUT_OF_MEMORY);
      goto out;
    }
    node->u.ms = m;
    r = cgrt__emu_capture_node(s, node);
    goto out;
  }
  cgrt__emu_unlock();
  cgrt__emu_memset_run(&m);
  return CUDA_SUCCESS;
out:
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                   CUstream hStream) {
  return memset_async(dstDevice, uc, 1, N, hStream);
}

CUresult cgrt__emu_cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                    CUstream hStream) {
  return memset_async(dstDevice, ui, 4, N, hStream);
}
