/* Registry of live handles: open addressing with tombstones, one mutex. */
#include "runtime/handles.h"

#include <pthread.h>
#include <stdint.h>

#define CAP 4096 /* power of two; live handles at once, far above any real use */
#define TOMB ((const void *)1)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const void *g_key[CAP];
static unsigned char g_kind[CAP];
static unsigned g_used; /* live + tombstones */

static unsigned slot_of(const void *h) {
  uint64_t x = (uint64_t)(uintptr_t)h;
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
  return (unsigned)x & (CAP - 1);
}

static void rebuild(void) { /* drop tombstones when the table fills up with them */
  const void *k[CAP];
  unsigned char t[CAP];
  unsigned n = 0;
  for (unsigned i = 0; i < CAP; i++)
    if (g_key[i] && g_key[i] != TOMB) k[n] = g_key[i], t[n++] = g_kind[i];
  for (unsigned i = 0; i < CAP; i++) g_key[i] = 0;
  g_used = 0;
  for (unsigned j = 0; j < n; j++) {
    unsigned i = slot_of(k[j]);
    while (g_key[i]) i = (i + 1) & (CAP - 1);
    g_key[i] = k[j], g_kind[i] = t[j], g_used++;
  }
}

int cgrt__handle_add(const void *h, cgrt__handle_kind kind) {
  if (!h || h == TOMB) return -1;
  int rc = -1;
  pthread_mutex_lock(&g_mu);
  if (g_used >= CAP * 3 / 4) rebuild();
  if (g_used < CAP * 3 / 4) {
    unsigned i = slot_of(h);
    while (g_key[i] && g_key[i] != TOMB) i = (i + 1) & (CAP - 1);
    if (!g_key[i]) g_used++;
    g_key[i] = h, g_kind[i] = (unsigned char)kind, rc = 0;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int find(const void *h, cgrt__handle_kind kind) {
  unsigned i = slot_of(h);
  for (unsigned n = 0; n < CAP && g_key[i]; n++, i = (i + 1) & (CAP - 1))
    if (g_key[i] == h) return g_kind[i] == (unsigned char)kind ? (int)i : -1;
  return -1;
}

int cgrt__handle_remove(const void *h, cgrt__handle_kind kind) {
  if (!h) return 0;
  pthread_mutex_lock(&g_mu);
  int i = find(h, kind);
  if (i >= 0) g_key[i] = TOMB;
  pthread_mutex_unlock(&g_mu);
  return i >= 0;
}

int cgrt__handle_live(const void *h, cgrt__handle_kind kind) {
  if (!h) return 0;
  pthread_mutex_lock(&g_mu);
  int i = find(h, kind);
  pthread_mutex_unlock(&g_mu);
  return i >= 0;
}
