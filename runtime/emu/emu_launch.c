/* Emulated kernel launches: parameters packed like the driver packs them, the reference
 * kernel run on the calling thread, or a kernel node recorded when capturing. Also
 * cuLaunchHostFunc. */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

CUresult cgrt__emu_kernel_check(CUfunction f, const unsigned grid[3], const unsigned block[3],
                                unsigned shmem) {
  if (!cgrt__emu_reg_is(f, EMU_K_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (grid[0] > 2147483647u || grid[1] > 65535u || grid[2] > 65535u) return CUDA_ERROR_INVALID_VALUE;
  if (block[0] == 0 || block[1] == 0 || block[2] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (block[0] > 1024u || block[1] > 1024u || block[2] > 64u) return CUDA_ERROR_INVALID_VALUE;
  if ((unsigned long long)block[0] * block[1] * block[2] > 1024ull) return CUDA_ERROR_INVALID_VALUE;
  unsigned limit = f->max_dyn_shmem > EMU_SHMEM_DEFAULT ? (unsigned)f->max_dyn_shmem : EMU_SHMEM_DEFAULT;
  if (shmem > limit) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* Copies the parameters from kernelParams or from extra's parameter buffer. */
static CUresult pack(const struct CUfunc_st *f, unsigned char *buf, void **kp, void **extra) {
  if (kp != NULL && extra != NULL) return CUDA_ERROR_INVALID_VALUE;
  if (kp != NULL) {
    for (size_t i = 0; i < f->nparams; i++) {
      if (kp[i] == NULL) return CUDA_ERROR_INVALID_VALUE;
      memcpy(buf + f->offs[i], kp[i], f->ref->param_sizes[i]);
    }
    return CUDA_SUCCESS;
  }
  if (extra != NULL) {
    const void *bp = NULL;
    const size_t *bs = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        bp = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        bs = extra[i + 1];
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (f->total == 0) return CUDA_SUCCESS;
    if (bp == NULL || bs == NULL || *bs < f->total) return CUDA_ERROR_INVALID_VALUE;
    memcpy(buf, bp, f->total);
    return CUDA_SUCCESS;
  }
  return f->nparams == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void cgrt__emu_kernel_free(emu_kernel *k) {
  free(k->buf);
  free(k->offs);
  free(k->ptrs);
  free(k->attrs);
  memset(k, 0, sizeof(*k));
}

static CUresult kernel_alloc(emu_kernel *k, size_t nparams, size_t bufsize, unsigned nattrs) {
  k->buf = calloc(bufsize ? bufsize : 1, 1);
  k->offs = calloc(nparams ? nparams : 1, sizeof(size_t));
  k->ptrs = calloc(nparams ? nparams : 1, sizeof(void *));
  k->attrs = nattrs ? calloc(nattrs, sizeof(CUlaunchAttribute)) : NULL;
  if (k->buf == NULL || k->offs == NULL || k->ptrs == NULL || (nattrs && k->attrs == NULL)) {
    cgrt__emu_kernel_free(k);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  k->nparams = nparams;
  k->bufsize = bufsize;
  k->nattrs = nattrs;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_kernel_init(emu_kernel *k, CUfunction f, const unsigned grid[3],
                               const unsigned block[3], unsigned shmem, void **kernelParams,
                               void **extra, const CUlaunchAttribute *attrs, unsigned nattrs) {
  memset(k, 0, sizeof(*k));
  CUresult r = kernel_alloc(k, f->nparams, f->total, nattrs);
  if (r != CUDA_SUCCESS) return r;
  r = pack(f, k->buf, kernelParams, extra);
  if (r != CUDA_SUCCESS) {
    cgrt__emu_kernel_free(k);
    return r;
  }
  k->func = f;
  k->ref = f->ref;
  k->packed = extra != NULL;
  memcpy(k->grid, grid, sizeof(k->grid));
  memcpy(k->block, block, sizeof(k->block));
  k->shmem = shmem;
  for (size_t i = 0; i < f->nparams; i++) {
    k->offs[i] = f->offs[i];
    k->ptrs[i] = k->buf + f->offs[i];
  }
  if (nattrs) memcpy(k->attrs, attrs, nattrs * sizeof(*attrs));
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_kernel_copy(emu_kernel *dst, const emu_kernel *src) {
  emu_kernel k = *src;
  CUresult r = kernel_alloc(&k, src->nparams, src->bufsize, src->nattrs);
  if (r != CUDA_SUCCESS) {
    memset(dst, 0, sizeof(*dst));
    return r;
  }
  memcpy(k.buf, src->buf, src->bufsize);
  k.checked_gen = 0;
  for (size_t i = 0; i < src->nparams; i++) {
    k.offs[i] = src->offs[i];
    k.ptrs[i] = k.buf + src->offs[i];
  }
  if (src->nattrs) memcpy(k.attrs, src->attrs, src->nattrs * sizeof(*src->attrs));
  *dst = k;
  return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3],
                       unsigned shmem, CUstream h, void **kp, void **extra,
                       const CUlaunchAttribute *attrs, unsigned nattrs) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUstream_st *s;
  emu_capture *cap;
  emu_kernel k;
  r = cgrt__emu_stream_get(h, &s, &cap);
  if (r != CUDA_SUCCESS) goto out;
  r = cgrt__emu_kernel_check(f, grid, block, shmem);
  if (r == CUDA_SUCCESS) r = cgrt__emu_kernel_init(&k, f, grid, block, shmem, kp, extra, attrs, nattrs);
  if (r != CUDA_SUCCESS) {
    if (cap) cgrt__emu_capture_fail(cap, r);
    goto out;
  }
  if (cap != NULL) {
    struct CUgraphNode_st *n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_KERNEL);
    if (n == NULL) {
      cgrt__emu_kernel_free(&k);
      r = cgrt__emu_capture_fail(cap, CUDA_ERROR_OUT_OF_MEMORY);
      goto out;
    }
    n->u.k = k;
    r = cgrt__emu_capture_node(s, n);
    goto out;
  }
  r = cgrt__emu_params_check(k.ref, k.buf, k.offs);
  cgrt__emu_unlock();
  if (r == CUDA_SUCCESS) r = cgrt__emu_kernel_run(k.ref, k.grid, k.block, k.shmem, k.buf, k.offs);
  cgrt__emu_kernel_free(&k);
  return r;
out:
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                  unsigned int gridDimZ, unsigned int blockDimX,
                                  unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream,
                                  void **kernelParams, void **extra) {
  const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
  const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
  return launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra, NULL, 0);
}

CUresult cgrt__emu_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                    void **kernelParams, void **extra) {
  if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL)) {
    CUresult r = cgrt__emu_check_ctx();
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
  }
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  return launch(f, grid, block, config->sharedMemBytes, config->hStream, kernelParams, extra,
                config->attrs, config->numAttrs);
}

CUresult cgrt__emu_cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (fn == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUstream_st *s;
  emu_capture *cap;
  r = cgrt__emu_stream_get(hStream, &s, &cap);
  if (r == CUDA_SUCCESS && cap != NULL && cap->graph->parent != NULL) {
    /* Conditional bodies may hold kernel, memcpy, memset, empty, child-graph and
     * conditional nodes only: a host function captured into one is refused and the
     * capture invalidated. */
    r = cgrt__emu_capture_fail(cap, CUDA_ERROR_NOT_SUPPORTED);
    cgrt__emu_unlock();
    return r;
  }
  if (r == CUDA_SUCCESS && cap != NULL) {
    struct CUgraphNode_st *n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_HOST);
    if (n == NULL) {
      r = cgrt__emu_capture_fail(cap, CUDA_ERROR_OUT_OF_MEMORY);
    } else {
      n->u.host.fn = fn;
      n->u.host.user = userData;
      r = cgrt__emu_capture_node(s, n);
    }
    cgrt__emu_unlock();
    return r;
  }
  cgrt__emu_unlock();
  if (r == CUDA_SUCCESS) fn(userData);
  return r;
}
