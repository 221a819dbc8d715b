/* Emulation core: the global lock, the handle registry, initialization, the one device,
 * its primary context and the live-object count. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/emu/emu_internal.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_initialized;
emu_counts cgrt__emu_counts;

void cgrt__emu_lock(void) { pthread_mutex_lock(&g_mu); }
void cgrt__emu_unlock(void) { pthread_mutex_unlock(&g_mu); }

/* ---- registry: open addressing on the pointer value, kind 0 = empty, -1 = deleted ---- */
typedef struct reg_slot {
  const void *p;
  int kind;
} reg_slot;

static reg_slot *g_slots;
static size_t g_cap, g_used, g_tomb;

static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static int reg_grow(void) {
  size_t ncap = g_cap ? g_cap * 2 : 256;
  if (g_used * 4 < g_cap) ncap = g_cap; /* mostly tombstones: rehash in place size */
  reg_slot *ns = calloc(ncap, sizeof(*ns));
  if (ns == NULL) return -1;
  for (size_t i = 0; i < g_cap; i++) {
    if (g_slots[i].kind <= 0) continue;
    size_t j = hash_ptr(g_slots[i].p) & (ncap - 1);
    while (ns[j].kind != 0) j = (j + 1) & (ncap - 1);
    ns[j] = g_slots[i];
  }
  free(g_slots);
  g_slots = ns;
  g_cap = ncap;
  g_tomb = 0;
  return 0;
}

int cgrt__emu_reg_add(const void *p, int kind) {
  if ((g_used + g_tomb + 1) * 2 > g_cap && reg_grow() != 0) return -1;
  size_t j = hash_ptr(p) & (g_cap - 1);
  while (g_slots[j].kind > 0) j = (j + 1) & (g_cap - 1);
  if (g_slots[j].kind < 0) g_tomb--;
  g_slots[j].p = p;
  g_slots[j].kind = kind;
  g_used++;
  return 0;
}

static reg_slot *reg_find(const void *p) {
  if (g_cap == 0 || p == NULL) return NULL;
  size_t j = hash_ptr(p) & (g_cap - 1);
  while (g_slots[j].kind != 0) {
    if (g_slots[j].kind > 0 && g_slots[j].p == p) return &g_slots[j];
    j = (j + 1) & (g_cap - 1);
  }
  return NULL;
}

int cgrt__emu_reg_is(const void *p, int kind) {
  reg_slot *s = reg_find(p);
  return s != NULL && s->kind == kind;
}

void cgrt__emu_reg_del(const void *p) {
  reg_slot *s = reg_find(p);
  if (s == NULL) return;
  s->kind = -1;
  s->p = NULL;
  g_used--;
  g_tomb++;
}

/* ---- ids, threads, time ---- */
static uint64_t g_next_id;
uint64_t cgrt__emu_next_id(void) { return ++g_next_id; }

static atomic_uint_fast64_t g_thread_counter;
static _Thread_local uint64_t t_thread_id;
uint64_t cgrt__emu_thread_id(void) {
  if (t_thread_id == 0) t_thread_id = atomic_fetch_add(&g_thread_counter, 1) + 1;
  return t_thread_id;
}

uint64_t cgrt__emu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- initialization, device, context ---- */
struct CUctx_st {
  int refcount;
};
static struct CUctx_st g_primary;
static _Thread_local CUcontext t_current;

CUresult cgrt__emu_check_init(void) {
  return atomic_load(&g_initialized) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cgrt__emu_check_ctx(void) {
  if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  cgrt__emu_lock();
  int active = g_primary.refcount > 0;
  cgrt__emu_unlock();
  return active ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult cgrt__emu_cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  atomic_store(&g_initialized, 1);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuDriverGetVersion(int *driverVersion) {
  if (driverVersion == NULL) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = EMU_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuDeviceGetCount(int *count) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

static const char k_device_name[] = "cgrt CPU emulation (H200-like)";

CUresult cgrt__emu_cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  size_t n = strlen(k_device_name);
  if (n > (size_t)len - 1) n = (size_t)len - 1;
  memcpy(name, k_device_name, n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

static int attribute_value(CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return EMU_SHMEM_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return EMU_SHMEM_OPTIN;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32505856;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    default: return 0;
  }
}

CUresult cgrt__emu_cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (pi == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if ((int)attrib < 1 || (int)attrib >= (int)CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *pi = attribute_value(attrib);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = EMU_TOTAL_MEM;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  cgrt__emu_lock();
  g_primary.refcount++;
  cgrt__emu_unlock();
  *pctx = &g_primary;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuDevicePrimaryCtxRelease(CUdevice dev) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  cgrt__emu_lock();
  if (g_primary.refcount > 0) {
    g_primary.refcount--;
    r = CUDA_SUCCESS;
  } else {
    r = CUDA_ERROR_INVALID_CONTEXT;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (ctx != NULL && ctx != &g_primary) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuCtxGetCurrent(CUcontext *pctx) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pctx = t_current;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuCtxSynchronize(void) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  r = cgrt__emu_ctx_sync_call();
  cgrt__emu_unlock();
  return r; /* everything already ran: streams execute synchronously */
}

size_t cgrt__emu_graphs_freed_under_capture(void) {
  cgrt__emu_lock();
  size_t n = cgrt__emu_counts.freed_under_capture;
  cgrt__emu_unlock();
  return n;
}

size_t cgrt__emu_live_objects(void) {
  cgrt__emu_lock();
  emu_counts c = cgrt__emu_counts;
  cgrt__emu_unlock();
  return c.allocs + c.streams + c.events + c.graphs + c.execs + c.modules;
}
