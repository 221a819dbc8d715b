/* Reference-kernel registry: the built-in tables of kernels/ plus run-time additions. */
#include "kernels/registry.h"

#include <pthread.h>
#include <string.h>

#include "kernels/ref_tables.h"

#define CGRT__REF_DYNAMIC_MAX 64

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cgrt__ref_kernel g_dynamic[CGRT__REF_DYNAMIC_MAX];
static size_t g_dynamic_count;

static const cgrt__ref_kernel *const g_tables[] = {
#define CGRT__REF_TABLE_PTR(t) t,
    CGRT__REF_TABLES(CGRT__REF_TABLE_PTR)
#undef CGRT__REF_TABLE_PTR
};

const cgrt__ref_kernel *cgrt__ref_kernel_find(const char *name) {
  if (name == NULL) return NULL;
  const cgrt__ref_kernel *found = NULL;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_dynamic_count && !found; i++)
    if (strcmp(g_dynamic[i].name, name) == 0) found = &g_dynamic[i];
  pthread_mutex_unlock(&g_mu);
  if (found) return found;
  for (size_t t = 0; t < sizeof(g_tables) / sizeof(g_tables[0]); t++)
    for (const cgrt__ref_kernel *k = g_tables[t]; k->name != NULL; k++)
      if (strcmp(k->name, name) == 0) return k;
  return NULL;
}

int cgrt__ref_kernel_register(const cgrt__ref_kernel *k) {
  if (k == NULL || k->name == NULL || k->fn == NULL || k->num_params > CGRT__REF_MAX_PARAMS)
    return -1;
  for (size_t i = 0; i < k->num_params; i++)
    if (k->param_sizes[i] == 0) return -1;
  int rc = -1;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_dynamic_count; i++) {
    if (strcmp(g_dynamic[i].name, k->name) == 0) { /* re-registration replaces */
      g_dynamic[i] = *k;
      rc = 0;
      goto out;
    }
  }
  if (g_dynamic_count < CGRT__REF_DYNAMIC_MAX) {
    g_dynamic[g_dynamic_count++] = *k;
    rc = 0;
  }
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
