/* The CUDA driver table: every driver call cgrt makes goes through one of these.
 *
 * One X-macro list names each entry point with the ABI version cgrt was written
 * against (the version passed to cuGetProcAddress and the suffix of the PFN type
 * in cudaTypedefs.h), whether the runtime can work without it, its parameter list
 * and its argument list. From that list come:
 *   - the table type (cgrt__driver),
 *   - the real table, resolved once from libcuda.so.1 (runtime/driver_cuda.c),
 *   - the CPU emulation (runtime/emu/), which implements the same table on the host,
 *   - the fault-injection wrapper (runtime/driver_fault.c) used by tests.
 * Internal header: not installed, not part of the public API. */
#ifndef CGRT_RUNTIME_DRIVER_H
#define CGRT_RUNTIME_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CGRT__REQUIRED 1
#define CGRT__OPTIONAL 0

/* X(symbol, abi_version, required, (parameters), (arguments)) */
#define CGRT_DRIVER_API(X)                                                                          \
  X(cuGetErrorName, 6000, CGRT__REQUIRED, (CUresult error, const char **pStr), (error, pStr))        \
  X(cuGetErrorString, 6000, CGRT__REQUIRED, (CUresult error, const char **pStr), (error, pStr))      \
  X(cuInit, 2000, CGRT__REQUIRED, (unsigned int Flags), (Flags))                                     \
  X(cuDriverGetVersion, 2020, CGRT__REQUIRED, (int *driverVersion), (driverVersion))                 \
  X(cuDeviceGetCount, 2000, CGRT__REQUIRED, (int *count), (count))                                   \
  X(cuDeviceGet, 2000, CGRT__REQUIRED, (CUdevice * device, int ordinal), (device, ordinal))         \
  X(cuDeviceGetName, 2000, CGRT__REQUIRED, (char *name, int len, CUdevice dev), (name, len, dev))    \
  X(cuDeviceGetAttribute, 2000, CGRT__REQUIRED,                                                      \
    (int *pi, CUdevice_attribute attrib, CUdevice dev), (pi, attrib, dev))                           \
  X(cuDeviceTotalMem, 3020, CGRT__REQUIRED, (size_t * bytes, CUdevice dev), (bytes, dev))           \
  X(cuDevicePrimaryCtxRetain, 7000, CGRT__REQUIRED, (CUcontext * pctx, CUdevice dev), (pctx, dev))  \
  X(cuDevicePrimaryCtxRelease, 11000, CGRT__REQUIRED, (CUdevice dev), (dev))                         \
  X(cuCtxSetCurrent, 4000, CGRT__REQUIRED, (CUcontext ctx), (ctx))                                   \
  X(cuCtxGetCurrent, 4000, CGRT__REQUIRED, (CUcontext * pctx), (pctx))                               \
  X(cuCtxSynchronize, 2000, CGRT__REQUIRED, (void), ())                                              \
  X(cuMemGetInfo, 3020, CGRT__REQUIRED, (size_t * free, size_t *total), (free, total))              \
  X(cuMemAlloc, 3020, CGRT__REQUIRED, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))      \
  X(cuMemFree, 3020, CGRT__REQUIRED, (CUdeviceptr dptr), (dptr))                                     \
  X(cuMemAllocHost, 3020, CGRT__REQUIRED, (void **pp, size_t bytesize), (pp, bytesize))              \
  X(cuMemFreeHost, 2000, CGRT__REQUIRED, (void *p), (p))                                             \
  X(cuMemHostRegister, 6050, CGRT__REQUIRED, (void *p, size_t bytesize, unsigned int Flags),       \
    (p, bytesize, Flags))                                                                            \
  X(cuMemHostUnregister, 4000, CGRT__REQUIRED, (void *p), (p))                                       \
  X(cuPointerGetAttribute, 4000, CGRT__REQUIRED,                                                     \
    (void *data, CUpointer_attribute attribute, CUdeviceptr ptr), (data, attribute, ptr))            \
  X(cuMemcpyHtoD, 3020, CGRT__REQUIRED,                                                              \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount)) \
  X(cuMemcpyDtoH, 3020, CGRT__REQUIRED,                                                              \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount))       \
  X(cuMemcpyHtoDAsync, 3020, CGRT__REQUIRED,                                                         \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),                \
    (dstDevice, srcHost, ByteCount, hStream))                                                        \
  X(cuMemcpyDtoHAsync, 3020, CGRT__REQUIRED,                                                         \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),                      \
    (dstHost, srcDevice, ByteCount, hStream))                                                        \
  X(cuMemcpyDtoDAsync, 3020, CGRT__REQUIRED,                                                         \
    (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),              \
    (dstDevice, srcDevice, ByteCount, hStream))                                                      \
  X(cuMemsetD8, 3020, CGRT__REQUIRED, (CUdeviceptr dstDevice, unsigned char uc, size_t N),           \
    (dstDevice, uc, N))                                                                              \
  X(cuMemsetD32, 3020, CGRT__REQUIRED, (CUdeviceptr dstDevice, unsigned int ui, size_t N),           \
    (dstDevice, ui, N))                                                                              \
  X(cuMemsetD8Async, 3020, CGRT__REQUIRED,                                                           \
    (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream),                           \
    (dstDevice, uc, N, hStream))                                                                     \
  X(cuMemsetD32Async, 3020, CGRT__REQUIRED,                                                          \
    (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream),                            \
    (dstDevice, ui, N, hStream))                                                                     \
  X(cuModuleLoadData, 2000, CGRT__REQUIRED, (CUmodule * module, const void *image),                 \
    (module, image))                                                                                 \
  X(cuModuleUnload, 2000, CGRT__REQUIRED, (CUmodule hmod), (hmod))                                   \
  X(cuModuleGetFunction, 2000, CGRT__REQUIRED, (CUfunction * hfunc, CUmodule hmod, const char *name), \
    (hfunc, hmod, name))                                                                             \
  X(cuModuleGetGlobal, 3020, CGRT__OPTIONAL,                                                        \
    (CUdeviceptr * dptr, size_t *bytes, CUmodule hmod, const char *name), (dptr, bytes, hmod, name)) \
  X(cuFuncGetParamInfo, 12040, CGRT__REQUIRED,                                                       \
    (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize),                    \
    (func, paramIndex, paramOffset, paramSize))                                                      \
  X(cuFuncGetName, 12030, CGRT__OPTIONAL, (const char **name, CUfunction hfunc), (name, hfunc))      \
  X(cuFuncSetAttribute, 9000, CGRT__REQUIRED,                                                        \
    (CUfunction hfunc, CUfunction_attribute attrib, int value), (hfunc, attrib, value))              \
  X(cuLaunchKernel, 4000, CGRT__REQUIRED,                                                            \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,              \
     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                         \
     unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),              \
    (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,      \
     kernelParams, extra))                                                                           \
  X(cuLaunchKernelEx, 11060, CGRT__REQUIRED,                                                         \
    (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),                 \
    (config, f, kernelParams, extra))                                                                \
  X(cuLaunchHostFunc, 10000, CGRT__REQUIRED, (CUstream hStream, CUhostFn fn, void *userData),        \
    (hStream, fn, userData))                                                                         \
  X(cuStreamCreate, 2000, CGRT__REQUIRED, (CUstream * phStream, unsigned int Flags),                \
    (phStream, Flags))                                                                               \
  X(cuStreamDestroy, 4000, CGRT__REQUIRED, (CUstream hStream), (hStream))                            \
  X(cuStreamSynchronize, 2000, CGRT__REQUIRED, (CUstream hStream), (hStream))                        \
  X(cuStreamWaitEvent, 3020, CGRT__REQUIRED, (CUstream hStream, CUevent hEvent, unsigned int Flags), \
    (hStream, hEvent, Flags))                                                                        \
  X(cuStreamBeginCapture, 10010, CGRT__REQUIRED, (CUstream hStream, CUstreamCaptureMode mode),       \
    (hStream, mode))                                                                                 \
  X(cuStreamBeginCaptureToGraph, 12030, CGRT__OPTIONAL,                                             \
    (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,                             \
     const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),      \
    (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))                          \
  X(cuStreamEndCapture, 10000, CGRT__REQUIRED, (CUstream hStream, CUgraph * phGraph),               \
    (hStream, phGraph))                                                                              \
  X(cuStreamIsCapturing, 10000, CGRT__REQUIRED,                                                      \
    (CUstream hStream, CUstreamCaptureStatus * captureStatus), (hStream, captureStatus))            \
  X(cuStreamGetCaptureInfo, 12030, CGRT__REQUIRED,                                                  \
    (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,                \
     CUgraph *graph_out, const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out, \
     size_t *numDependencies_out),                                                                  \
    (hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,                  \
     numDependencies_out))                                                                           \
  X(cuStreamUpdateCaptureDependencies, 12030, CGRT__REQUIRED,                                        \
    (CUstream hStream, CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,            \
     size_t numDependencies, unsigned int flags),                                                    \
    (hStream, dependencies, dependencyData, numDependencies, flags))                                 \
  X(cuEventCreate, 2000, CGRT__REQUIRED, (CUevent * phEvent, unsigned int Flags), (phEvent, Flags)) \
  X(cuEventDestroy, 4000, CGRT__REQUIRED, (CUevent hEvent), (hEvent))                                \
  X(cuEventRecord, 2000, CGRT__REQUIRED, (CUevent hEvent, CUstream hStream), (hEvent, hStream))      \
  X(cuEventSynchronize, 2000, CGRT__REQUIRED, (CUevent hEvent), (hEvent))                            \
  X(cuEventQuery, 2000, CGRT__REQUIRED, (CUevent hEvent), (hEvent))                                  \
  X(cuEventElapsedTime, 12080, CGRT__REQUIRED, (float *pMilliseconds, CUevent hStart, CUevent hEnd), \
    (pMilliseconds, hStart, hEnd))                                                                   \
  X(cuDeviceGetGraphMemAttribute, 11040, CGRT__REQUIRED,                                            \
    (CUdevice device, CUgraphMem_attribute attr, void *value), (device, attr, value))                \
  X(cuGraphCreate, 10000, CGRT__REQUIRED, (CUgraph * phGraph, unsigned int flags), (phGraph, flags)) \
  X(cuGraphDestroy, 10000, CGRT__REQUIRED, (CUgraph hGraph), (hGraph))                               \
  X(cuGraphGetNodes, 10000, CGRT__REQUIRED, (CUgraph hGraph, CUgraphNode * nodes, size_t *numNodes), \
    (hGraph, nodes, numNodes))                                                                       \
  X(cuGraphNodeGetType, 10000, CGRT__REQUIRED, (CUgraphNode hNode, CUgraphNodeType * type),         \
    (hNode, type))                                                                                   \
  X(cuGraphNodeGetDependencies, 12030, CGRT__REQUIRED,                                              \
    (CUgraphNode hNode, CUgraphNode *dependencies, CUgraphEdgeData *edgeData,                       \
     size_t *numDependencies),                                                                       \
    (hNode, dependencies, edgeData, numDependencies))                                                \
  X(cuGraphKernelNodeCopyAttributes, 11000, CGRT__REQUIRED, (CUgraphNode dst, CUgraphNode src),      \
    (dst, src))                                                                                      \
  X(cuGraphKernelNodeGetParams, 12000, CGRT__REQUIRED,                                               \
    (CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS * nodeParams), (hNode, nodeParams))                 \
  X(cuGraphKernelNodeSetAttribute, 11000, CGRT__REQUIRED,                                            \
    (CUgraphNode hNode, CUkernelNodeAttrID attr, const CUkernelNodeAttrValue_v1 *value),            \
    (hNode, attr, value))                                                                            \
  X(cuGraphKernelNodeGetAttribute, 11000, CGRT__REQUIRED,                                            \
    (CUgraphNode hNode, CUkernelNodeAttrID attr, CUkernelNodeAttrValue_v1 *value_out),              \
    (hNode, attr, value_out))                                                                        \
  X(cuGraphMemcpyNodeGetParams, 10000, CGRT__REQUIRED,                                               \
    (CUgraphNode hNode, CUDA_MEMCPY3D * nodeParams), (hNode, nodeParams))                           \
  X(cuGraphMemsetNodeGetParams, 10000, CGRT__REQUIRED,                                               \
    (CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS * nodeParams), (hNode, nodeParams))                 \
  X(cuGraphAddKernelNode, 12000, CGRT__REQUIRED,                                                     \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                    \
     size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams),                             \
    (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))                                \
  X(cuGraphAddNode, 12030, CGRT__OPTIONAL,                                                           \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                    \
     const CUgraphEdgeData *dependencyData, size_t numDependencies, CUgraphNodeParams *nodeParams),  \
    (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams))                \
  X(cuGraphConditionalHandleCreate, 12030, CGRT__OPTIONAL,                                           \
    (CUgraphConditionalHandle * pHandle_out, CUgraph hGraph, CUcontext ctx,                         \
     unsigned int defaultLaunchValue, unsigned int flags),                                           \
    (pHandle_out, hGraph, ctx, defaultLaunchValue, flags))                                           \
  X(cuGraphInstantiateWithFlags, 11040, CGRT__REQUIRED,                                              \
    (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags),                          \
    (phGraphExec, hGraph, flags))                                                                    \
  X(cuGraphExecDestroy, 10000, CGRT__REQUIRED, (CUgraphExec hGraphExec), (hGraphExec))               \
  X(cuGraphUpload, 11010, CGRT__REQUIRED, (CUgraphExec hGraphExec, CUstream hStream),                \
    (hGraphExec, hStream))                                                                           \
  X(cuGraphLaunch, 10000, CGRT__REQUIRED, (CUgraphExec hGraphExec, CUstream hStream),                \
    (hGraphExec, hStream))                                                                           \
  X(cuGraphExecKernelNodeSetParams, 12000, CGRT__REQUIRED,                                           \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams),          \
    (hGraphExec, hNode, nodeParams))                                                                 \
  X(cuGraphExecMemcpyNodeSetParams, 10020, CGRT__REQUIRED,                                           \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMCPY3D *copyParams, CUcontext ctx),     \
    (hGraphExec, hNode, copyParams, ctx))                                                            \
  X(cuGraphExecMemsetNodeSetParams, 10020, CGRT__REQUIRED,                                           \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *memsetParams,         \
     CUcontext ctx),                                                                                 \
    (hGraphExec, hNode, memsetParams, ctx))                                                          \
  X(cuGraphExecUpdate, 12000, CGRT__REQUIRED,                                                        \
    (CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo * resultInfo),             \
    (hGraphExec, hGraph, resultInfo))

/* The table: one function pointer per entry, typed by cudaTypedefs.h's PFN for the
 * pinned ABI version, so a wrong signature anywhere is a compile error. */
typedef struct cgrt__driver {
  const char *name; /* "cuda", "emulated", "fault(cuda)", ... */
  int is_emulated;
#define CGRT__DRIVER_FIELD(sym, ver, req, params, args) PFN_##sym##_v##ver sym;
  CGRT_DRIVER_API(CGRT__DRIVER_FIELD)
#undef CGRT__DRIVER_FIELD
} cgrt__driver;

/* One row of the list, as data (for diagnostics and the resolver). */
typedef struct cgrt__driver_entry {
  const char *symbol;
  int abi_version;
  int required;
  size_t offset; /* offsetof(cgrt__driver, symbol) */
} cgrt__driver_entry;

extern const cgrt__driver_entry cgrt__driver_entries[];
extern const size_t cgrt__driver_entry_count;

/* The real driver, resolved once (pthread_once) from `library` (NULL: "libcuda.so.1").
 * Returns NULL and writes a message naming the cause (dlopen error, missing required
 * symbol, driver too old) into msg when it cannot be used; *absent (when not NULL) is
 * then 1 if the library could not be opened at all (no driver installed), 0 if it
 * loaded but is unusable. Later calls with the same library return the same table or
 * the same failure. */
const cgrt__driver *cgrt__driver_cuda(const char *library, char *msg, size_t msg_len, int *absent);

/* The CPU emulation (runtime/emu/). Always available. */
const cgrt__driver *cgrt__driver_emulated(void);

/* The fault-injection wrapper around `base` (runtime/driver_fault.c): the same table for
 * the same base every time, never changed once made (thread-safe with calls through
 * wrappers of other bases). NULL when CGRT__FAULT_SLOTS (4) other bases are wrapped
 * already (runtime/fault_slots.h). */
const cgrt__driver *cgrt__driver_fault(const cgrt__driver *base);

/* Name of a CUresult that never fails ("CUDA_ERROR_OUT_OF_MEMORY"); also for codes the
 * driver does not know. */
const char *cgrt__curesult_name(CUresult r);

#ifdef __cplusplus
}
#endif
#endif
