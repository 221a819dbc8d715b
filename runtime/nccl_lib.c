/* The real NCCL table: libnccl.so.2 opened with dlopen, every entry resolved once per
 * distinct library path with dlsym (NCCL exports its API under the plain names). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/nccl.h"

typedef struct {
  char library[256]; /* as asked ("" for the default search) */
  cgrt__nccl table;
  int ok;
  char msg[1024];
} nccl_slot;

#define CGRT__NCCL_SLOTS 4
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static nccl_slot g_slots[CGRT__NCCL_SLOTS];
static int g_count;

static const struct {
  const char *symbol;
  int required;
  size_t offset;
} k_entries[] = {
#define CGRT__NCCL_ENTRY(sym, req, counted, ret, params, args) {#sym, req, offsetof(cgrt__nccl, sym)},
    CGRT_NCCL_API(CGRT__NCCL_ENTRY)
#undef CGRT__NCCL_ENTRY
};

const char *cgrt__nccl_result_name(ncclResult_t r) {
  static const char *const names[] = {"ncclSuccess",        "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError",  "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",    "ncclInProgress"};
  return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "ncclResult(unknown)";
}

/* Resolves the table from an opened handle; 0 on success, else msg says why. */
static int resolve(nccl_slot *s, void *h, const char *path) {
  cgrt__nccl *t = &s->table;
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < sizeof k_entries / sizeof k_entries[0]; i++) {
    void *fn = dlsym(h, k_entries[i].symbol);
    if (!fn && k_entries[i].required) {
      snprintf(s->msg, sizeof s->msg, "%s has no %s: not NCCL, or older than 2.17", path, k_entries[i].symbol);
      return -1;
    }
    memcpy((char *)t + k_entries[i].offset, &fn, sizeof fn);
  }
  int v = 0;
  ncclResult_t r = t->ncclGetVersion(&v);
  if (r != ncclSuccess) {
    snprintf(s->msg, sizeof s->msg, "%s: ncclGetVersion failed with %s", path, cgrt__nccl_result_name(r));
    return -1;
  }
  if (v < CGRT__NCCL_MIN_VERSION) {
    snprintf(s->msg, sizeof s->msg, "%s is NCCL %d.%d.%d; cgrt needs 2.17 or newer", path, v / 10000,
             (v / 100) % 100, v % 100);
    return -1;
  }
  t->name = "nccl";
  t->is_emulated = 0;
  t->version = v;
  snprintf(t->path, sizeof t->path, "%s", path);
  return 0;
}

/* Tries one path; 1 when it opened (resolved or not: s->ok says), 0 when dlopen failed
 * (its error appended to the list of places tried). */
static int try_path(nccl_slot *s, const char *path, char *tried, size_t tried_len) {
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    size_t n = strlen(tried);
    if (n < tried_len) snprintf(tried + n, tried_len - n, "%s%s", n ? ", " : "", path);
    return 0;
  }
  s->ok = resolve(s, h, path) == 0;
  if (!s->ok) dlclose(h);
  /* An opened library stays open for the life of the process: the table points into it. */
  return 1;
}

/* The usual places: the loader's search (a process that loaded NCCL already, e.g.
 * through PyTorch, gets that copy), the NVIDIA NCCL pip package (nvidia-nccl-cu12/-cu13
 * installs nvidia/nccl/lib/libnccl.so.2) in the system's Python folders, then system
 * folders. */
static void resolve_default(nccl_slot *s) {
  char tried[768] = "";
  if (try_path(s, "libnccl.so.2", tried, sizeof tried)) return;
  char path[512];
  const char *const roots[] = {"/usr/local/lib", "/usr/lib"};
  const char *const kinds[] = {"dist-packages", "site-packages"};
  for (int v = 13; v >= 8; v--)
    for (int r = 0; r < 2; r++)
      for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/python3.%d/%s/nvidia/nccl/lib/libnccl.so.2", roots[r], v, kinds[k]);
        if (try_path(s, path, tried, sizeof tried)) return;
      }
  const char *const sys[] = {"/usr/local/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                             "/usr/local/nccl/lib/libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
  for (int i = 0; i < 4; i++)
    if (try_path(s, sys[i], tried, sizeof tried)) return;
  snprintf(s->msg, sizeof s->msg,
           "NCCL not found: libnccl.so.2 is not on the loader's path, and not in the NVIDIA NCCL pip package "
           "(nvidia/nccl/lib under /usr{,/local}/lib/python3.*/{dist,site}-packages) nor in /usr/local/cuda/lib{,64}, "
           "/usr/local/nccl/lib or /usr/lib/x86_64-linux-gnu; install it or set cgrt_dcp_options.nccl_library");
}

const cgrt__nccl *cgrt__nccl_real(const char *library, char *msg, size_t msg_len) {
  const char *key = library ? library : "";
  const cgrt__nccl *out = NULL;
  pthread_mutex_lock(&g_mu);
  nccl_slot *s = NULL;
  for (int i = 0; i < g_count && !s; i++)
    if (strcmp(g_slots[i].library, key) == 0) s = &g_slots[i];
  if (!s) {
    if (g_count == CGRT__NCCL_SLOTS || strlen(key) >= sizeof s->library) {
      if (msg && msg_len) snprintf(msg, msg_len, "too many distinct NCCL libraries, or path too long: %s", key);
      pthread_mutex_unlock(&g_mu);
      return NULL;
    }
    s = &g_slots[g_count++];
    snprintf(s->library, sizeof s->library, "%s", key);
    if (library) {
      char tried[768] = "";
      if (!try_path(s, library, tried, sizeof tried)) {
        const char *e = dlerror();
        snprintf(s->msg, sizeof s->msg, "dlopen(\"%s\") failed: %s", library, e ? e : "unknown error");
      }
    } else {
      resolve_default(s);
    }
  }
  if (s->ok) out = &s->table;
  else if (msg && msg_len) snprintf(msg, msg_len, "%s", s->msg);
  pthread_mutex_unlock(&g_mu);
  return out;
}
