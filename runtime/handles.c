/* Registry of live handles (open addressing with tombstones) and the never-reused storage
 * of handle objects (page blocks of reserved address space), behind one mutex. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "runtime/handles.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* LeakSanitizer does not scan mapped memory: a live handle's pointers to heap blocks
 * must count as references. */
#define ROOT_ADD(p, n) __lsan_register_root_region((p), (n))
#define ROOT_DEL(p, n) __lsan_unregister_root_region((p), (n))
#else
#define ROOT_ADD(p, n) ((void)(p), (void)(n))
#define ROOT_DEL(p, n) ((void)(p), (void)(n))
#endif

#define CAP 4096 /* power of two; live handles at once, far above any real use */
#define TOMB ((const void *)1)
#define CHUNK_PAGES 16384u /* pages of address space reserved at a time (64 MiB of 4 KiB) */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const void *g_key[CAP];
static unsigned char g_kind[CAP];
static unsigned g_used; /* live + tombstones */

/* ---- storage ---- */

/* Reserved address space, handed out in increasing order and never again. */
typedef struct chunk {
  uintptr_t base;
  uint32_t next;      /* first page never handed out */
  uint16_t *npages;   /* [CHUNK_PAGES]: pages of the allocated block starting there, else 0 */
} chunk;

static chunk *g_chunks;
static size_t g_nchunks;
static size_t g_page;

static chunk *chunk_of(const void *h, uint32_t *page) {
  uintptr_t a = (uintptr_t)h;
  for (size_t i = g_nchunks; i-- > 0;) {
    chunk *c = &g_chunks[i];
    if (a >= c->base && a - c->base < (uintptr_t)CHUNK_PAGES * g_page) {
      if ((a - c->base) % g_page != 0) return NULL;
      *page = (uint32_t)((a - c->base) / g_page);
      return c;
    }
  }
  return NULL;
}

/* Pages of the allocated block at h, or 0 (lock held). */
static uint32_t block_pages(const void *h) {
  uint32_t page = 0;
  chunk *c = chunk_of(h, &page);
  return c ? c->npages[page] : 0;
}

static chunk *new_chunk(void) {
  chunk *grown = realloc(g_chunks, (g_nchunks + 1) * sizeof *grown);
  if (!grown) return NULL;
  g_chunks = grown;
  uint16_t *np = calloc(CHUNK_PAGES, sizeof *np);
  if (!np) return NULL;
  void *p = mmap(NULL, (size_t)CHUNK_PAGES * g_page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    free(np);
    return NULL;
  }
  chunk *c = &g_chunks[g_nchunks++];
  c->base = (uintptr_t)p;
  c->next = 0;
  c->npages = np;
  return c;
}

void *cgrt__handle_alloc(size_t bytes) {
  if (bytes == 0) return NULL;
  void *out = NULL;
  pthread_mutex_lock(&g_mu);
  if (g_page == 0) g_page = (size_t)sysconf(_SC_PAGESIZE);
  size_t n = (bytes + g_page - 1) / g_page;
  if (n < UINT16_MAX && n <= CHUNK_PAGES) {
    chunk *c = g_nchunks ? &g_chunks[g_nchunks - 1] : NULL;
    if (!c || CHUNK_PAGES - c->next < n) c = new_chunk();
    if (c) {
      void *p = (void *)(c->base + (uintptr_t)c->next * g_page);
      /* Never-touched pages of a fresh mapping: zero. */
      if (mprotect(p, n * g_page, PROT_READ | PROT_WRITE) == 0) {
        c->npages[c->next] = (uint16_t)n;
        c->next += (uint32_t)n;
        ROOT_ADD(p, n * g_page);
        out = p;
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  return out;
}

void cgrt__handle_free(void *h) {
  if (!h) return;
  pthread_mutex_lock(&g_mu);
  uint32_t page = 0;
  chunk *c = chunk_of(h, &page);
  if (c && c->npages[page]) {
    size_t len = (size_t)c->npages[page] * g_page;
    c->npages[page] = 0;
    ROOT_DEL(h, len);
    /* A fresh inaccessible mapping in place: the memory goes back to the system, the
     * addresses stay reserved. */
    if (mmap(h, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
      mprotect(h, len, PROT_NONE);
  }
  pthread_mutex_unlock(&g_mu);
}

/* ---- registry ---- */

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

static int find_any(const void *h) {
  unsigned i = slot_of(h);
  for (unsigned n = 0; n < CAP && g_key[i]; n++, i = (i + 1) & (CAP - 1))
    if (g_key[i] == h) return (int)i;
  return -1;
}

static int find(const void *h, cgrt__handle_kind kind) {
  int i = find_any(h);
  return i >= 0 && g_kind[i] == (unsigned char)kind ? i : -1;
}

int cgrt__handle_add(const void *h, cgrt__handle_kind kind) {
  if (!h || h == TOMB) return -1;
  int rc = -1;
  pthread_mutex_lock(&g_mu);
  if (g_used >= CAP * 3 / 4) rebuild();
  if (g_used < CAP * 3 / 4 && block_pages(h) != 0 && find_any(h) < 0) {
    unsigned i = slot_of(h);
    while (g_key[i] && g_key[i] != TOMB) i = (i + 1) & (CAP - 1);
    if (!g_key[i]) g_used++;
    g_key[i] = h, g_kind[i] = (unsigned char)kind, rc = 0;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
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
