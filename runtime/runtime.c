/* cgrt_runtime: driver selection, device and context, embedded module, handle checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/runtime_internal.h"

extern const unsigned char cgrt__kernels_fatbin[];
extern const size_t cgrt__kernels_fatbin_size;

/* ---- live-handle registry: lets every API reject destroyed handles safely ---- */
#define CGRT__MAX_RUNTIMES 64
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static const cgrt_runtime *g_live[CGRT__MAX_RUNTIMES];

static int live_add(const cgrt_runtime *rt) {
  int ok = 0;
  pthread_mutex_lock(&g_live_mu);
  for (int i = 0; i < CGRT__MAX_RUNTIMES && !ok; i++)
    if (!g_live[i]) g_live[i] = rt, ok = 1;
  pthread_mutex_unlock(&g_live_mu);
  return ok;
}

static int live_remove(const cgrt_runtime *rt) {
  int found = 0;
  pthread_mutex_lock(&g_live_mu);
  for (int i = 0; i < CGRT__MAX_RUNTIMES; i++)
    if (g_live[i] == rt) g_live[i] = NULL, found = 1;
  pthread_mutex_unlock(&g_live_mu);
  return found;
}

int cgrt__runtime_is_live(const cgrt_runtime *rt) {
  if (!rt) return 0;
  int found = 0;
  pthread_mutex_lock(&g_live_mu);
  for (int i = 0; i < CGRT__MAX_RUNTIMES && !found; i++) found = g_live[i] == rt;
  pthread_mutex_unlock(&g_live_mu);
  return found;
}

cgrt_status cgrt__runtime_enter(cgrt_runtime *rt, const char *api) {
  if (!cgrt__runtime_is_live(rt))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "%s: runtime %p is not live (NULL, destroyed or never created)",
                      api, (void *)rt);
  CUcontext cur = NULL;
  CUresult r = rt->drv->cuCtxGetCurrent(&cur);
  if (r == CUDA_SUCCESS && cur == rt->ctx) return CGRT_SUCCESS;
  if (r == CUDA_SUCCESS) r = rt->drv->cuCtxSetCurrent(rt->ctx);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuCtxSetCurrent", api);
  return CGRT_SUCCESS;
}

const char *cgrt_driver_kind_name(cgrt_driver_kind kind) {
  switch (kind) {
    case CGRT_DRIVER_AUTO: return "auto";
    case CGRT_DRIVER_CUDA: return "cuda";
    case CGRT_DRIVER_EMULATED: return "emulated";
  }
  return "unknown";
}

void cgrt_runtime_options_init(cgrt_runtime_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

/* ---- driver selection ---- */
static cgrt_status kind_from_env(cgrt_driver_kind *kind) {
  const char *e = getenv("CGRT_DRIVER");
  if (!e || !*e || strcasecmp(e, "auto") == 0) *kind = CGRT_DRIVER_AUTO;
  else if (strcasecmp(e, "cuda") == 0) *kind = CGRT_DRIVER_CUDA;
  else if (strcasecmp(e, "emulated") == 0) *kind = CGRT_DRIVER_EMULATED;
  else
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "CGRT_DRIVER=\"%s\" is not one of \"auto\", \"cuda\", \"emulated\"", e);
  return CGRT_SUCCESS;
}

/* AUTO: is the real driver usable for this ordinal? If not, why (for the log). */
static int real_driver_usable(const cgrt_runtime_options *o, char *why, size_t why_len) {
  const cgrt__driver *d = cgrt__driver_cuda(o->driver_library, why, why_len);
  if (!d) return 0;
  CUresult r = d->cuInit(0);
  int n = 0;
  if (r == CUDA_SUCCESS) r = d->cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) {
    snprintf(why, why_len, "cuInit/cuDeviceGetCount failed with %s", cgrt__curesult_name(r));
    return 0;
  }
  if (o->device_ordinal >= n) {
    snprintf(why, why_len, "no CUDA device at ordinal %d (%d found)", o->device_ordinal, n);
    return 0;
  }
  return 1;
}

static pthread_once_t g_auto_log_once = PTHREAD_ONCE_INIT;
static char g_auto_reason[512];
static void log_auto_fallback(void) {
  cgrt__log(CGRT_LOG_WARN, "cgrt: no usable GPU (%s); using the CPU emulation of the driver",
            g_auto_reason);
}

static cgrt_status select_driver(const cgrt_runtime_options *o, const cgrt__driver **out,
                                 cgrt_driver_kind *kind_out) {
  cgrt_driver_kind kind = o->driver;
  if (kind == CGRT_DRIVER_AUTO) {
    cgrt_status st = kind_from_env(&kind);
    if (st) return st;
  }
  if (kind == CGRT_DRIVER_AUTO) {
    char why[512];
    if (real_driver_usable(o, why, sizeof why)) {
      kind = CGRT_DRIVER_CUDA;
    } else {
      kind = CGRT_DRIVER_EMULATED;
      pthread_mutex_lock(&g_live_mu);
      if (!g_auto_reason[0]) snprintf(g_auto_reason, sizeof g_auto_reason, "%s", why);
      pthread_mutex_unlock(&g_live_mu);
      pthread_once(&g_auto_log_once, log_auto_fallback);
    }
  }
  if (kind == CGRT_DRIVER_CUDA) {
    char why[512];
    *out = cgrt__driver_cuda(o->driver_library, why, sizeof why);
    if (!*out) return cgrt__fail(CGRT_ERROR_NO_DRIVER, "cgrt_runtime_create: %s", why);
  } else {
    *out = cgrt__driver_emulated();
  }
  *kind_out = kind;
  return CGRT_SUCCESS;
}

static cgrt_status map_init_failure(CUresult r, const char *sym, const char *what) {
  cgrt_status st = CGRT_ERROR_NO_DRIVER;
  if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE) st = CGRT_ERROR_NO_DEVICE;
  return cgrt__fail_cu(st, r, sym, what);
}

/* Launches the probe kernel once: proves the embedded code runs on this device. */
static cgrt_status run_probe(cgrt_runtime *rt) {
  const cgrt__driver *d = rt->drv;
  CUfunction f;
  cgrt_status st = cgrt__runtime_function(rt, "cgrt_probe", &f);
  if (st) return st;
  CUdeviceptr buf = 0;
  enum { N = 32 };
  int host[N];
  st = CGRT__CU(d, cuMemAlloc, (&buf, sizeof host), CGRT_ERROR_DRIVER, "probe kernel");
  if (st) return st;
  int value = 7;
  void *params[] = {&buf, &value};
  st = CGRT__CU(d, cuLaunchKernel, (f, 1, 1, 1, N, 1, 1, 0, NULL, params, NULL),
                CGRT_ERROR_UNSUPPORTED_DEVICE, "probe kernel");
  if (!st) st = CGRT__CU(d, cuMemcpyDtoH, (host, buf, sizeof host), CGRT_ERROR_DRIVER, "probe kernel");
  for (int i = 0; !st && i < N; i++)
    if (host[i] != value + i)
      st = cgrt__fail(CGRT_ERROR_UNSUPPORTED_DEVICE, "probe kernel wrote %d at %d, expected %d", host[i], i,
                      value + i);
  CUresult r = d->cuMemFree(buf);
  if (!st && r != CUDA_SUCCESS) st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuMemFree", "probe kernel");
  return st;
}

cgrt_status cgrt_runtime_create(const cgrt_runtime_options *options, cgrt_runtime **out) {
  if (!out) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_runtime_create: out is NULL");
  *out = NULL;
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  if (options) {
    if (options->size < offsetof(cgrt_runtime_options, driver_library) || options->size > (1u << 16))
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "cgrt_runtime_create: options->size %zu is not a cgrt_runtime_options size (%zu)",
                        options->size, sizeof o);
    memcpy(&o, options, options->size < sizeof o ? options->size : sizeof o);
    o.size = sizeof o;
  }
  if (o.device_ordinal < 0)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_runtime_create: device_ordinal %d < 0", o.device_ordinal);
  if (o.driver != CGRT_DRIVER_AUTO && o.driver != CGRT_DRIVER_CUDA && o.driver != CGRT_DRIVER_EMULATED)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_runtime_create: unknown driver kind %d", (int)o.driver);

  const cgrt__driver *base = NULL;
  cgrt_driver_kind kind;
  cgrt_status st = select_driver(&o, &base, &kind);
  if (st) return st;

  cgrt_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_runtime_create: out of host memory");
  if (pthread_mutex_init(&rt->mu, NULL) != 0) {
    free(rt);
    return cgrt__fail(CGRT_ERROR_INTERNAL, "cgrt_runtime_create: pthread_mutex_init failed");
  }
  rt->drv = o.fault_injection ? cgrt__driver_fault(base) : base;
  rt->kind = kind;
  rt->ordinal = o.device_ordinal;
  const cgrt__driver *d = rt->drv;
  int retained = 0;
  CUresult r;
  CUcontext prev_ctx = NULL;

  if ((r = d->cuInit(0)) != CUDA_SUCCESS) { st = map_init_failure(r, "cuInit", "cgrt_runtime_create"); goto fail; }
  if ((r = d->cuDriverGetVersion(&rt->driver_version)) != CUDA_SUCCESS) {
    st = map_init_failure(r, "cuDriverGetVersion", "cgrt_runtime_create");
    goto fail;
  }
  int count = 0;
  if ((r = d->cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
    st = map_init_failure(r, "cuDeviceGetCount", "cgrt_runtime_create");
    goto fail;
  }
  if (o.device_ordinal >= count) {
    st = cgrt__fail(CGRT_ERROR_NO_DEVICE, "cgrt_runtime_create: no device at ordinal %d (%d %s device(s))",
                    o.device_ordinal, count, cgrt_driver_kind_name(kind));
    goto fail;
  }
  if ((r = d->cuDeviceGet(&rt->dev, o.device_ordinal)) != CUDA_SUCCESS) {
    st = map_init_failure(r, "cuDeviceGet", "cgrt_runtime_create");
    goto fail;
  }
  if ((st = CGRT__CU(d, cuDeviceGetName, (rt->device_name, (int)sizeof rt->device_name - 1, rt->dev),
                     CGRT_ERROR_DRIVER, "cgrt_runtime_create")))
    goto fail;
  if ((st = CGRT__CU(d, cuDeviceGetAttribute,
                     (&rt->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->dev),
                     CGRT_ERROR_DRIVER, "cgrt_runtime_create")))
    goto fail;
  if ((st = CGRT__CU(d, cuDeviceGetAttribute,
                     (&rt->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->dev),
                     CGRT_ERROR_DRIVER, "cgrt_runtime_create")))
    goto fail;
  if ((st = CGRT__CU(d, cuDeviceGetAttribute,
                     (&rt->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->dev),
                     CGRT_ERROR_DRIVER, "cgrt_runtime_create")))
    goto fail;
  if ((st = CGRT__CU(d, cuDeviceTotalMem, (&rt->total_memory, rt->dev), CGRT_ERROR_DRIVER,
                     "cgrt_runtime_create")))
    goto fail;
  if (kind == CGRT_DRIVER_EMULATED && o.emulated_compute_capability > 0) {
    rt->cc_major = o.emulated_compute_capability / 10;
    rt->cc_minor = o.emulated_compute_capability % 10;
  }
  if (rt->cc_major < 9) {
    st = cgrt__fail(CGRT_ERROR_UNSUPPORTED_DEVICE,
                    "cgrt_runtime_create: %s has compute capability %d.%d; cgrt's kernels need 9.0 "
                    "(sm_90a code and compute_90 PTX are embedded)",
                    rt->device_name, rt->cc_major, rt->cc_minor);
    goto fail;
  }
  if ((st = CGRT__CU(d, cuDevicePrimaryCtxRetain, (&rt->ctx, rt->dev), CGRT_ERROR_DRIVER,
                     "cgrt_runtime_create")))
    goto fail;
  retained = 1;
  if ((st = CGRT__CU(d, cuCtxGetCurrent, (&prev_ctx), CGRT_ERROR_DRIVER, "cgrt_runtime_create"))) goto fail;
  if (prev_ctx != rt->ctx &&
      (st = CGRT__CU(d, cuCtxSetCurrent, (rt->ctx), CGRT_ERROR_DRIVER, "cgrt_runtime_create")))
    goto fail;
  r = d->cuModuleLoadData(&rt->module, cgrt__kernels_fatbin);
  if (r != CUDA_SUCCESS) {
    rt->module = NULL;
    st = (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX ||
          r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_INVALID_SOURCE)
             ? CGRT_ERROR_UNSUPPORTED_DEVICE
             : CGRT_ERROR_DRIVER;
    st = cgrt__fail_cu(st, r, "cuModuleLoadData", "loading cgrt's embedded kernels");
    goto fail;
  }
  if (!live_add(rt)) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_runtime_create: more than %d live runtimes", CGRT__MAX_RUNTIMES);
    goto fail;
  }
  if ((st = run_probe(rt))) {
    live_remove(rt);
    goto fail;
  }
  cgrt__log(CGRT_LOG_INFO, "cgrt: runtime on %s (%s driver %d, cc %d.%d, %d SMs, %zu MiB)", rt->device_name,
            cgrt_driver_kind_name(kind), rt->driver_version, rt->cc_major, rt->cc_minor, rt->sm_count,
            rt->total_memory >> 20);
  *out = rt;
  return CGRT_SUCCESS;

fail:
  if (rt->module) d->cuModuleUnload(rt->module);
  if (retained) d->cuDevicePrimaryCtxRelease(rt->dev);
  pthread_mutex_destroy(&rt->mu);
  free(rt);
  return st;
}

void cgrt__runtime_attach(cgrt_runtime *rt, cgrt__child *c) {
  pthread_mutex_lock(&rt->mu);
  c->prev = NULL;
  c->next = rt->children;
  if (rt->children) rt->children->prev = c;
  rt->children = c;
  pthread_mutex_unlock(&rt->mu);
}

void cgrt__runtime_detach(cgrt_runtime *rt, cgrt__child *c) {
  pthread_mutex_lock(&rt->mu);
  if (c->prev) c->prev->next = c->next;
  else if (rt->children == c) rt->children = c->next;
  if (c->next) c->next->prev = c->prev;
  c->next = c->prev = NULL;
  pthread_mutex_unlock(&rt->mu);
}

cgrt_status cgrt_runtime_destroy(cgrt_runtime *rt) {
  if (!rt) return CGRT_SUCCESS;
  if (!cgrt__runtime_is_live(rt))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE,
                      "cgrt_runtime_destroy: runtime %p is not live (destroyed twice or never created)",
                      (void *)rt);
  cgrt__runtime_enter(rt, "cgrt_runtime_destroy");
  /* Children unlink themselves (cgrt__runtime_detach) in their destroy function. */
  while (rt->children) {
    cgrt__child *c = rt->children;
    cgrt__log(CGRT_LOG_WARN, "cgrt_runtime_destroy: destroying a %s that is still alive", c->kind);
    c->destroy(c->obj);
    if (rt->children == c) cgrt__runtime_detach(rt, c); /* a destroy that did not detach */
  }
  live_remove(rt);
  const cgrt__driver *d = rt->drv;
  CUresult r = d->cuCtxSynchronize();
  if (r != CUDA_SUCCESS)
    cgrt__log(CGRT_LOG_WARN, "cgrt_runtime_destroy: cuCtxSynchronize failed with %s", cgrt__curesult_name(r));
  cgrt__workspace_release_all(rt);
  if (rt->module && (r = d->cuModuleUnload(rt->module)) != CUDA_SUCCESS)
    cgrt__log(CGRT_LOG_WARN, "cgrt_runtime_destroy: cuModuleUnload failed with %s", cgrt__curesult_name(r));
  if ((r = d->cuDevicePrimaryCtxRelease(rt->dev)) != CUDA_SUCCESS)
    cgrt__log(CGRT_LOG_WARN, "cgrt_runtime_destroy: cuDevicePrimaryCtxRelease failed with %s",
              cgrt__curesult_name(r));
  pthread_mutex_destroy(&rt->mu);
  free(rt);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_runtime_get_info(cgrt_runtime *rt, cgrt_runtime_info *info) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_runtime_get_info");
  if (st) return st;
  if (!info || info->size < offsetof(cgrt_runtime_info, free_memory))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_runtime_get_info: info is NULL or info->size is too small");
  size_t size = info->size < sizeof *info ? info->size : sizeof *info;
  cgrt_runtime_info i;
  memset(&i, 0, sizeof i);
  i.size = size;
  i.driver = rt->kind;
  i.driver_version = rt->driver_version;
  i.device_ordinal = rt->ordinal;
  memcpy(i.device_name, rt->device_name, sizeof i.device_name);
  i.compute_capability_major = rt->cc_major;
  i.compute_capability_minor = rt->cc_minor;
  i.sm_count = rt->sm_count;
  i.total_memory = rt->total_memory;
  size_t free_b = 0, total_b = 0;
  st = CGRT__CU(rt->drv, cuMemGetInfo, (&free_b, &total_b), CGRT_ERROR_DRIVER, "cgrt_runtime_get_info");
  if (st) return st;
  i.free_memory = free_b;
  memcpy(info, &i, size);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_runtime_synchronize(cgrt_runtime *rt) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_runtime_synchronize");
  if (st) return st;
  return CGRT__CU(rt->drv, cuCtxSynchronize, (), CGRT_ERROR_DRIVER, "cgrt_runtime_synchronize");
}

cgrt_status cgrt__runtime_function(cgrt_runtime *rt, const char *name, CUfunction *out) {
  cgrt_status st = CGRT_SUCCESS;
  pthread_mutex_lock(&rt->mu);
  for (int i = 0; i < rt->function_count; i++) {
    if (strcmp(rt->functions[i].name, name) == 0) {
      *out = rt->functions[i].fn;
      pthread_mutex_unlock(&rt->mu);
      return CGRT_SUCCESS;
    }
  }
  CUfunction f = NULL;
  CUresult r = rt->drv->cuModuleGetFunction(&f, rt->module, name);
  if (r == CUDA_ERROR_NOT_FOUND) {
    st = cgrt__fail(CGRT_ERROR_INTERNAL, "kernel '%s' is not in cgrt's embedded module", name);
  } else if (r != CUDA_SUCCESS) {
    st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuModuleGetFunction", name);
  } else {
    *out = f;
    if (rt->function_count < (int)(sizeof rt->functions / sizeof rt->functions[0]) &&
        strlen(name) < sizeof rt->functions[0].name) {
      snprintf(rt->functions[rt->function_count].name, sizeof rt->functions[0].name, "%s", name);
      rt->functions[rt->function_count++].fn = f;
    }
  }
  pthread_mutex_unlock(&rt->mu);
  return st;
}

void cgrt__runtime_capture_begin(cgrt_runtime *rt) {
  pthread_mutex_lock(&rt->mu);
  rt->capturing++;
  pthread_mutex_unlock(&rt->mu);
}

void cgrt__runtime_capture_end(cgrt_runtime *rt) {
  pthread_mutex_lock(&rt->mu);
  if (rt->capturing > 0) rt->capturing--;
  pthread_mutex_unlock(&rt->mu);
}
