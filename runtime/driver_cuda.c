/* The real driver table: libcuda.so.1 opened with dlopen, every entry resolved once
 * (pthread_once) with cuGetProcAddress pinned to the ABI version in the list. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/driver.h"

#define CGRT__MIN_DRIVER_VERSION 12040 /* cuFuncGetParamInfo */

const cgrt__driver_entry cgrt__driver_entries[] = {
#define CGRT__ENTRY(sym, ver, req, params, args) {#sym, ver, req, offsetof(cgrt__driver, sym)},
    CGRT_DRIVER_API(CGRT__ENTRY)
#undef CGRT__ENTRY
};
const size_t cgrt__driver_entry_count = sizeof(cgrt__driver_entries) / sizeof(cgrt__driver_entries[0]);

typedef struct {
  char library[256];
  cgrt__driver table;
  int ok;
  int absent; /* dlopen failed: no driver installed under that name */
  char msg[512];
  void *handle;
} cuda_slot;

/* The default library is resolved once with pthread_once; an explicit other path (tests
 * of the driver-absent path, custom installs) is resolved once per distinct path. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cuda_slot g_default;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
#define CGRT__MAX_OTHER_LIBS 4
static cuda_slot g_other[CGRT__MAX_OTHER_LIBS];
static int g_other_count;

static void resolve(cuda_slot *s) {
  s->ok = 0;
  dlerror();
  s->handle = dlopen(s->library, RTLD_NOW | RTLD_LOCAL);
  if (!s->handle) {
    s->absent = 1;
    const char *e = dlerror();
    snprintf(s->msg, sizeof s->msg, "dlopen(\"%s\") failed: %s", s->library, e ? e : "unknown error");
    return;
  }
  PFN_cuGetProcAddress_v12000 gpa = (PFN_cuGetProcAddress_v12000)dlsym(s->handle, "cuGetProcAddress_v2");
  PFN_cuDriverGetVersion_v2020 ver = (PFN_cuDriverGetVersion_v2020)dlsym(s->handle, "cuDriverGetVersion");
  if (!gpa || !ver) {
    snprintf(s->msg, sizeof s->msg,
             "%s has no cuGetProcAddress_v2/cuDriverGetVersion: driver older than CUDA 12.0",
             s->library);
    return;
  }
  int v = 0;
  CUresult vr = ver(&v);
  if (vr != CUDA_SUCCESS) {
    snprintf(s->msg, sizeof s->msg, "%s: cuDriverGetVersion failed with %s (%d): a stub library or a broken install",
             s->library, cgrt__curesult_name(vr), (int)vr);
    return;
  }
  if (v < CGRT__MIN_DRIVER_VERSION) {
    snprintf(s->msg, sizeof s->msg, "driver supports CUDA %d.%d; cgrt needs %d.%d or newer",
             v / 1000, (v % 1000) / 10, CGRT__MIN_DRIVER_VERSION / 1000,
             (CGRT__MIN_DRIVER_VERSION % 1000) / 10);
    return;
  }
  memset(&s->table, 0, sizeof s->table);
  for (size_t i = 0; i < cgrt__driver_entry_count; i++) {
    const cgrt__driver_entry *e = &cgrt__driver_entries[i];
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = gpa(e->symbol, &fn, e->abi_version, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS) fn = NULL;
    if (!fn && e->required) {
      snprintf(s->msg, sizeof s->msg,
               "%s: required symbol %s (ABI %d) not found (cuGetProcAddress: %s, query %d)",
               s->library, e->symbol, e->abi_version, cgrt__curesult_name(r), (int)q);
      return;
    }
    memcpy((char *)&s->table + e->offset, &fn, sizeof fn);
  }
  s->table.name = "cuda";
  s->table.is_emulated = 0;
  s->ok = 1;
  /* The handle stays open for the life of the process: the table points into it. */
}

static void resolve_default(void) {
  snprintf(g_default.library, sizeof g_default.library, "%s", "libcuda.so.1");
  resolve(&g_default);
}

static const cgrt__driver *result(const cuda_slot *s, char *msg, size_t msg_len, int *absent) {
  if (absent) *absent = s->absent;
  if (s->ok) return &s->table;
  if (msg && msg_len) snprintf(msg, msg_len, "%s", s->msg);
  return NULL;
}

const cgrt__driver *cgrt__driver_cuda(const char *library, char *msg, size_t msg_len, int *absent) {
  if (absent) *absent = 0;
  if (library == NULL || strcmp(library, "libcuda.so.1") == 0) {
    pthread_once(&g_once, resolve_default);
    return result(&g_default, msg, msg_len, absent);
  }
  const cgrt__driver *d = NULL;
  pthread_mutex_lock(&g_mu);
  cuda_slot *s = NULL;
  for (int i = 0; i < g_other_count; i++)
    if (strcmp(g_other[i].library, library) == 0) s = &g_other[i];
  if (!s) {
    if (g_other_count == CGRT__MAX_OTHER_LIBS || strlen(library) >= sizeof g_other[0].library) {
      if (msg && msg_len) snprintf(msg, msg_len, "too many distinct driver libraries, or path too long: %s", library);
      pthread_mutex_unlock(&g_mu);
      return NULL;
    }
    s = &g_other[g_other_count++];
    snprintf(s->library, sizeof s->library, "%s", library);
    resolve(s);
  }
  d = result(s, msg, msg_len, absent);
  pthread_mutex_unlock(&g_mu);
  return d;
}
