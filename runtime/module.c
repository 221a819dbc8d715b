/* The host's own kernels through cgrt's driver table (include/cgrt/cgrt_module.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "cgrt/cgrt_module.h"
#include "runtime/handles.h"
#include "runtime/ref_registry.h"
#include "runtime/runtime_internal.h"

_Static_assert(sizeof(cgrt_emulated_launch) == sizeof(cgrt__ref_launch), "launch layout");
_Static_assert(CGRT_EMULATED_MAX_PARAMS <= CGRT__REF_MAX_PARAMS, "parameter count");
_Static_assert(CGRT_EMULATED_MAX_PARAM_BYTES == CGRT__REF_MAX_PARAM_BYTES, "parameter bytes");

/* A child of its runtime: cgrt_runtime_destroy unloads a module still loaded, and its
 * handle is no longer live (CGRT_ERROR_INVALID_HANDLE from then on). */
struct cgrt_module {
  cgrt_runtime *rt;
  CUmodule mod;
  cgrt__child child;
};

static void destroy_child(void *obj) { cgrt_module_unload((cgrt_module *)obj); } /* runtime teardown */

static cgrt_status module_status(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return CGRT_ERROR_UNSUPPORTED_DEVICE;
    default:
      return CGRT_ERROR_DRIVER;
  }
}

cgrt_status cgrt_module_load(cgrt_runtime *rt, const void *image, cgrt_module **out) {
  if (out != NULL) *out = NULL;
  cgrt_status st = cgrt__runtime_enter_outside_capture(rt, "cgrt_module_load");
  if (st != CGRT_SUCCESS) return st;
  if (image == NULL || out == NULL)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_module_load: image or out is NULL");
  cgrt_module *m = (cgrt_module *)cgrt__handle_alloc(sizeof(*m));
  if (m == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_module_load");
  CUresult r = rt->drv->cuModuleLoadData(&m->mod, image);
  if (r != CUDA_SUCCESS) {
    cgrt__handle_free(m);
    return cgrt__fail_cu(module_status(r), r, "cuModuleLoadData", "cgrt_module_load");
  }
  m->rt = rt;
  st = cgrt__runtime_adopt(rt, m, CGRT__HANDLE_MODULE, &m->child, destroy_child, "module",
                           "cgrt_module_load");
  if (st != CGRT_SUCCESS) {
    rt->drv->cuModuleUnload(m->mod);
    cgrt__handle_free(m);
    return st;
  }
  *out = m;
  return CGRT_SUCCESS;
}

cgrt_status cgrt_module_unload(cgrt_module *m) {
  if (m == NULL) return CGRT_SUCCESS;
  cgrt_status st = cgrt__refuse_in_capture("cgrt_module_unload"); /* nothing unloaded */
  if (st != CGRT_SUCCESS) return st;
  if (!cgrt__handle_remove(m, CGRT__HANDLE_MODULE))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_module_unload: %p is not a live module (unloaded twice?)",
                      (void *)m);
  /* A live module's runtime is live: runtime teardown unloads its modules first. */
  cgrt_runtime *rt = m->rt;
  st = cgrt__runtime_enter(rt, "cgrt_module_unload");
  if (st == CGRT_SUCCESS) {
    CUresult r = rt->drv->cuModuleUnload(m->mod);
    if (r != CUDA_SUCCESS) st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuModuleUnload", "cgrt_module_unload");
  }
  cgrt__runtime_detach(rt, &m->child);
  cgrt__handle_free(m);
  return st;
}

cgrt_status cgrt_module_function(cgrt_module *m, const char *name, CUfunction *out) {
  if (!cgrt__handle_live(m, CGRT__HANDLE_MODULE))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_module_function: %p is not a live module", (void *)m);
  cgrt_status st = cgrt__runtime_enter(m->rt, "cgrt_module_function");
  if (st != CGRT_SUCCESS) return st;
  if (name == NULL || out == NULL || name[0] == '\0')
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_module_function: NULL name or out, or an empty name");
  CUresult r = m->rt->drv->cuModuleGetFunction(out, m->mod, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_module_function: no kernel '%s' in the module%s", name,
                      m->rt->drv->is_emulated ? " (on the emulation: no C reference registered under that name)" : "");
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuModuleGetFunction", name);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_launch_kernel(cgrt_runtime *rt, CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
                               unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                               void **args) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_launch_kernel");
  if (st != CGRT_SUCCESS) return st;
  if (fn == NULL || !gx || !gy || !gz || !bx || !by || !bz)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_launch_kernel: NULL function or a zero dimension");
  CUresult r = rt->drv->cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared_bytes, stream, args, NULL);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernel", "cgrt_launch_kernel");
  return CGRT_SUCCESS;
}

cgrt_status cgrt_emulated_kernel_register(const char *name, size_t num_params, const size_t *param_sizes,
                                          cgrt_emulated_kernel_fn fn) {
  if (name == NULL || fn == NULL || num_params > CGRT_EMULATED_MAX_PARAMS || (num_params && !param_sizes))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_emulated_kernel_register: NULL name or fn, NULL param_sizes, or %zu parameters (max %d)",
                      num_params, CGRT_EMULATED_MAX_PARAMS);
  if (cgrt__ref_name_reserved(name))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_emulated_kernel_register: '%s': names beginning with \"%s\" are reserved for cgrt's own "
                      "kernels (their references are built in)",
                      name, CGRT__REF_RESERVED_PREFIX);
  cgrt__ref_kernel k;
  memset(&k, 0, sizeof k);
  k.name = name;
  k.num_params = num_params;
  for (size_t i = 0; i < num_params; i++) k.param_sizes[i] = param_sizes[i];
  /* Same layout (static assertions above): the reference receives cgrt__ref_launch. */
  k.fn = (cgrt__ref_fn)(void (*)(void))fn;
  size_t bad = 0;
  if (cgrt__ref_kernel_check(&k, &bad) != 0)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_emulated_kernel_register: '%s' parameter %zu has size %zu: each parameter needs 1 to "
                      "%d bytes and all of them, packed, at most %d bytes (the driver's limit)",
                      name, bad, param_sizes[bad], CGRT_EMULATED_MAX_PARAM_BYTES, CGRT_EMULATED_MAX_PARAM_BYTES);
  /* The registry keeps the name pointer for the process lifetime: reuse the one of an
   * earlier registration (a replacement), else copy. */
  const cgrt__ref_kernel *old = cgrt__ref_kernel_find(name);
  int owned = old == NULL;
  k.name = old ? old->name : strdup(name);
  if (k.name == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_emulated_kernel_register");
  if (cgrt__ref_kernel_register(&k) != 0) {
    if (owned) free((void *)k.name);
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_emulated_kernel_register: the reference table is full");
  }
  return CGRT_SUCCESS;
}
