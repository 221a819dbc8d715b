/* Reference-kernel registry: the built-in tables (filled by kernels/registry.c) plus
 * run-time additions. */
#include "runtime/ref_registry.h"

#include <pthread.h>
#include <string.h>

#define CGRT__REF_DYNAMIC_MAX 64   /* distinct names registered at run time */
#define CGRT__REF_PUBLISHED_MAX 1024 /* distinct entries ever published */

/* Run-time entries are immutable once published: a lookup hands out a pointer that
 * stays valid and unchanged for the life of the process (a launch may read it while
 * another thread re-registers the name). Re-registration publishes another entry (or
 * reuses an identical one published earlier) and repoints the name; entries are never
 * written again nor freed. g_published is filled under g_mu; g_dynamic points into it. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cgrt__ref_kernel g_published[CGRT__REF_PUBLISHED_MAX];
static size_t g_published_count;
static const cgrt__ref_kernel *g_dynamic[CGRT__REF_DYNAMIC_MAX];
static size_t g_dynamic_count;

const cgrt__ref_kernel *cgrt__ref_kernel_find(const char *name) {
  if (name == NULL) return NULL;
  const cgrt__ref_kernel *found = NULL;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_dynamic_count && !found; i++)
    if (strcmp(g_dynamic[i]->name, name) == 0) found = g_dynamic[i];
  pthread_mutex_unlock(&g_mu);
  if (found) return found;
  for (size_t t = 0; t < cgrt__ref_builtin_table_count; t++)
    for (const cgrt__ref_kernel *k = cgrt__ref_builtin_tables[t]; k->name != NULL; k++)
      if (strcmp(k->name, name) == 0) return k;
  return NULL;
}

int cgrt__ref_kernel_check(const cgrt__ref_kernel *k, size_t *bad_param) {
  if (bad_param) *bad_param = 0;
  if (k == NULL || k->name == NULL || k->fn == NULL || k->num_params > CGRT__REF_MAX_PARAMS) return -1;
  size_t off = 0;
  for (size_t i = 0; i < k->num_params; i++) {
    size_t sz = k->param_sizes[i];
    if (bad_param) *bad_param = i;
    if (sz == 0 || sz > CGRT__REF_MAX_PARAM_BYTES) return -1;
    size_t al = sz >= 8 ? 8 : (sz >= 4 ? 4 : (sz >= 2 ? 2 : 1));
    off = (off + al - 1) / al * al + sz; /* both terms <= 32 * 4 KiB: no overflow */
    if (off > CGRT__REF_MAX_PARAM_BYTES) return -1;
  }
  return 0;
}

static int same_entry(const cgrt__ref_kernel *a, const cgrt__ref_kernel *b) {
  if (a->name != b->name || a->fn != b->fn || a->num_params != b->num_params) return 0;
  for (size_t i = 0; i < a->num_params; i++)
    if (a->param_sizes[i] != b->param_sizes[i]) return 0;
  return 1;
}

int cgrt__ref_name_reserved(const char *name) {
  return name != NULL && strncmp(name, CGRT__REF_RESERVED_PREFIX, sizeof CGRT__REF_RESERVED_PREFIX - 1) == 0;
}

int cgrt__ref_kernel_register(const cgrt__ref_kernel *k) {
  if (cgrt__ref_kernel_check(k, NULL) != 0) return -1;
  if (cgrt__ref_name_reserved(k->name)) return -3;
  int rc = -2;
  pthread_mutex_lock(&g_mu);
  size_t slot = g_dynamic_count;
  for (size_t i = 0; i < g_dynamic_count; i++)
    if (strcmp(g_dynamic[i]->name, k->name) == 0) slot = i;
  if (slot == CGRT__REF_DYNAMIC_MAX) goto out;
  const cgrt__ref_kernel *entry = NULL;
  for (size_t i = 0; i < g_published_count && !entry; i++)
    if (same_entry(&g_published[i], k)) entry = &g_published[i];
  if (!entry) {
    if (g_published_count == CGRT__REF_PUBLISHED_MAX) goto out;
    cgrt__ref_kernel *e = &g_published[g_published_count++];
    memset(e, 0, sizeof *e);
    e->name = k->name;
    e->num_params = k->num_params;
    memcpy(e->param_sizes, k->param_sizes, k->num_params * sizeof k->param_sizes[0]);
    e->fn = k->fn;
    entry = e;
  }
  g_dynamic[slot] = entry;
  if (slot == g_dynamic_count) g_dynamic_count++;
  rc = 0;
out:
  pthread_mutex_unlock(&g_mu);
  return rc;
}

size_t cgrt__ref_param_layout(const cgrt__ref_kernel *k, size_t *offsets) {
  size_t off = 0;
  for (size_t i = 0; i < k->num_params; i++) {
    size_t sz = k->param_sizes[i];
    size_t al = sz >= 8 ? 8 : (sz >= 4 ? 4 : (sz >= 2 ? 2 : 1));
    off = (off + al - 1) / al * al;
    if (offsets) offsets[i] = off;
    off += sz;
  }
  return off;
}
