/* Emulated modules and functions: any image loads; a function is the reference kernel
 * of the same name (kernels/registry.h), with the driver's packed parameter layout. */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

CUresult cgrt__emu_cuModuleLoadData(CUmodule *module, const void *image) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (module == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
  struct CUmod_st *m = calloc(1, sizeof(*m));
  if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  cgrt__emu_lock();
  if (cgrt__emu_reg_add(m, EMU_K_MODULE) != 0) {
    cgrt__emu_unlock();
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  cgrt__emu_counts.modules++;
  cgrt__emu_unlock();
  *module = m;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuModuleUnload(CUmodule hmod) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hmod, EMU_K_MODULE)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_INVALID_HANDLE;
  }
  cgrt__emu_reg_del(hmod);
  struct CUfunc_st *f = hmod->funcs;
  while (f != NULL) {
    struct CUfunc_st *next = f->next;
    cgrt__emu_reg_del(f);
    free(f->name);
    free(f);
    f = next;
  }
  cgrt__emu_counts.modules--;
  cgrt__emu_unlock();
  free(hmod);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (hfunc == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hmod, EMU_K_MODULE)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (struct CUfunc_st *f = hmod->funcs; f != NULL; f = f->next) {
    if (strcmp(f->name, name) == 0) {
      *hfunc = f;
      cgrt__emu_unlock();
      return CUDA_SUCCESS;
    }
  }
  const cgrt__ref_kernel *ref = cgrt__ref_kernel_find(name);
  if (ref == NULL) {
    cgrt__emu_unlock();
    return CUDA_ERROR_NOT_FOUND;
  }
  struct CUfunc_st *f = calloc(1, sizeof(*f));
  size_t len = strlen(name);
  char *copy = malloc(len + 1);
  if (f == NULL || copy == NULL || cgrt__emu_reg_add(f, EMU_K_FUNC) != 0) {
    cgrt__emu_unlock();
    free(f);
    free(copy);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(copy, name, len + 1);
  f->mod = hmod;
  f->ref = ref;
  f->name = copy;
  f->nparams = ref->num_params;
  f->total = cgrt__ref_param_layout(ref, f->offs);
  f->next = hmod->funcs;
  hmod->funcs = f;
  cgrt__emu_unlock();
  *hfunc = f;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                      size_t *paramSize) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (paramOffset == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(func, EMU_K_FUNC)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (paramIndex >= func->nparams) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    *paramOffset = func->offs[paramIndex];
    if (paramSize != NULL) *paramSize = func->ref->param_sizes[paramIndex];
  }
  cgrt__emu_unlock();
  return r;
}

/* The emulated modules hold kernels (their C references) and no device variables: every
 * name is CUDA_ERROR_NOT_FOUND once the arguments are valid (dptr and bytes may be NULL,
 * as for the driver). */
CUresult cgrt__emu_cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (name == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  const int ok = cgrt__emu_reg_is(hmod, EMU_K_MODULE);
  cgrt__emu_unlock();
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  (void)dptr;
  (void)bytes;
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cgrt__emu_cuFuncGetName(const char **name, CUfunction hfunc) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (name == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hfunc, EMU_K_FUNC))
    r = CUDA_ERROR_INVALID_HANDLE;
  else
    *name = hfunc->name;
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hfunc, EMU_K_FUNC)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value < 0 || value > EMU_SHMEM_OPTIN)
          r = CUDA_ERROR_INVALID_VALUE;
        else
          hfunc->max_dyn_shmem = value;
        break;
      case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (value < -1 || value > 100) r = CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        if (value < 0) r = CUDA_ERROR_INVALID_VALUE;
        break;
      default:
        r = CUDA_ERROR_INVALID_VALUE; /* read-only or unknown */
        break;
    }
  }
  cgrt__emu_unlock();
  return r;
}
