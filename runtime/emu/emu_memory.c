/* Emulated memory: device memory and pinned host memory are carved (256-byte aligned,
 * first fit, a 256-byte red zone after each allocation) from one arena of address space
 * reserved at the first allocation, so that a pointer into the arena that is not inside a
 * live allocation is known to be freed or unallocated device memory, never the host's own
 * memory (docs/emulation.md). Allocations and registered host ranges (cuMemHostRegister:
 * the host's own memory, usable by copies and kernels) are kept in a table sorted by
 * address; every entry has a buffer id that is never reused
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID); a state byte per 256-byte granule of the arena
 * says live / freed for the per-launch pointer checks. Synchronous copies and memsets. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/emu/emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION((void *)(p), (n))
#define EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((void *)(p), (n))
#else
#define EMU_POISON(p, n) ((void)(p), (void)(n))
#define EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define EMU_REDZONE EMU_ALIGN

typedef struct emu_alloc {
  uintptr_t base;
  size_t size; /* requested bytes */
  size_t charged; /* rounded to EMU_ALIGN; 0 for a registered host range */
  int pinned;     /* page-locked host memory: cuMemAllocHost or cuMemHostRegister */
  int registered; /* cuMemHostRegister: the host owns the memory */
  uint64_t id;    /* buffer id: unique over the process, never reused */
} emu_alloc;

static emu_alloc *g_allocs; /* sorted by base; entries never overlap */
static size_t g_nallocs, g_capallocs;
static size_t g_device_bytes;
emu_arena cgrt__emu_arena;
uint64_t cgrt__emu_free_gen = 1;

/* Reserves the arena (address space only: MAP_NORESERVE, pages are backed when touched
 * and given back when freed), the largest of a few sizes the system grants. */
static int arena_reserve(void) {
  if (cgrt__emu_arena.bytes != 0) return 0;
  for (size_t bytes = EMU_ARENA_BYTES; bytes >= ((size_t)512 << 20); bytes /= 4) {
    void *a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED) continue;
    void *st = mmap(NULL, bytes / EMU_ALIGN, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (st == MAP_FAILED) {
      munmap(a, bytes);
      continue;
    }
    cgrt__emu_arena.base = (uintptr_t)a;
    cgrt__emu_arena.state = st;
    cgrt__emu_arena.bytes = bytes;
    return 0;
  }
  return -1;
}

static void set_state(uintptr_t p, size_t n, unsigned char st) {
  memset(cgrt__emu_arena.state + (p - cgrt__emu_arena.base) / EMU_ALIGN, st, n / EMU_ALIGN);
}

/* Index of the first entry with base > p. */
static size_t upper(uintptr_t p) {
  size_t lo = 0, hi = g_nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_allocs[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static emu_alloc *find_containing(uintptr_t p) {
  size_t i = upper(p);
  if (i == 0) return NULL;
  emu_alloc *a = &g_allocs[i - 1];
  return p - a->base < a->size ? a : NULL;
}

int cgrt__emu_mem_range_ok(uintptr_t p, size_t n, int want) {
  const emu_alloc *a = find_containing(p);
  if (a == NULL) return 0;
  if (want == EMU_MEM_PINNED && !a->pinned) return 0;
  return n <= a->size - (p - a->base);
}

size_t cgrt__emu_mem_bytes_from(uintptr_t p) {
  const emu_alloc *a = find_containing(p);
  if (a != NULL) return a->size - (p - a->base);
  return p - cgrt__emu_arena.base < cgrt__emu_arena.bytes ? 0 : SIZE_MAX;
}

static int grow_table(void) {
  if (g_nallocs < g_capallocs) return 0;
  size_t ncap = g_capallocs ? g_capallocs * 2 : 64;
  emu_alloc *na = realloc(g_allocs, ncap * sizeof(*na));
  if (na == NULL) return -1;
  g_allocs = na;
  g_capallocs = ncap;
  return 0;
}

/* Inserts e in address order (the table has room). */
static void insert(emu_alloc e) {
  size_t i = upper(e.base);
  memmove(&g_allocs[i + 1], &g_allocs[i], (g_nallocs - i) * sizeof(*g_allocs));
  g_allocs[i] = e;
  g_nallocs++;
}

static void remove_at(size_t i) {
  memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - i - 1) * sizeof(*g_allocs));
  g_nallocs--;
}

/* First fit: the lowest address of the arena with `need` free bytes, or 0. */
static uintptr_t arena_place(size_t need) {
  const uintptr_t lo = cgrt__emu_arena.base, hi = lo + cgrt__emu_arena.bytes;
  uintptr_t cur = lo;
  for (size_t i = upper(lo - 1); i < g_nallocs && g_allocs[i].base < hi; i++) {
    if (g_allocs[i].base - cur >= need) return cur;
    cur = g_allocs[i].base + g_allocs[i].charged + EMU_REDZONE;
  }
  return hi - cur >= need ? cur : 0;
}

static CUresult alloc_locked(void **out, size_t bytes, int pinned) {
  size_t charged = (bytes + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
  if (charged < bytes || charged > SIZE_MAX - EMU_REDZONE) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!pinned && charged > EMU_TOTAL_MEM - g_device_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  if (grow_table() != 0 || arena_reserve() != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t p = arena_place(charged + EMU_REDZONE);
  if (p == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  insert((emu_alloc){p, bytes, charged, pinned, 0, cgrt__emu_next_id()});
  set_state(p, charged, EMU_GRANULE_LIVE);
  set_state(p + charged, EMU_REDZONE, EMU_GRANULE_NONE);
  EMU_UNPOISON(p, charged);
  EMU_POISON(p + charged, EMU_REDZONE);
  if (!pinned) g_device_bytes += charged;
  cgrt__emu_counts.allocs++;
  *out = (void *)p;
  return CUDA_SUCCESS;
}

static CUresult free_locked(uintptr_t p, int pinned) {
  size_t i = upper(p);
  if (i == 0 || g_allocs[i - 1].base != p) return CUDA_ERROR_INVALID_VALUE;
  const emu_alloc a = g_allocs[--i];
  if (a.pinned != pinned || a.registered) return CUDA_ERROR_INVALID_VALUE;
  if (!pinned) g_device_bytes -= a.charged;
  remove_at(i);
  set_state(p, a.charged, EMU_GRANULE_FREED);
  cgrt__emu_free_gen++;
  /* Whole pages of the allocation go back to the system (no live neighbour shares them). */
  const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (ps > 0 && (ps & (ps - 1)) == 0) {
    uintptr_t b = (p + ps - 1) & ~(ps - 1), e = (p + a.charged) & ~(ps - 1);
    if (e > b) madvise((void *)b, e - b, MADV_DONTNEED);
  }
  EMU_POISON(p, a.charged);
  cgrt__emu_counts.allocs--;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuMemGetInfo(size_t *free_bytes, size_t *total) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (free_bytes == NULL || total == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  *free_bytes = EMU_TOTAL_MEM - g_device_bytes;
  *total = EMU_TOTAL_MEM;
  cgrt__emu_unlock();
  return CUDA_SUCCESS;
}

static CUresult alloc_api(void **out, size_t bytes, int pinned) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  r = cgrt__emu_unsafe_call();
  if (r == CUDA_SUCCESS) r = alloc_locked(out, bytes, pinned);
  cgrt__emu_unlock();
  return r;
}

static CUresult free_api(uintptr_t p, int pinned) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  r = cgrt__emu_unsafe_call();
  if (r == CUDA_SUCCESS && p != 0) r = free_locked(p, pinned);
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  if (dptr == NULL) {
    CUresult r = cgrt__emu_check_ctx();
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
  }
  void *p = NULL;
  CUresult r = alloc_api(&p, bytesize, 0);
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult cgrt__emu_cuMemFree(CUdeviceptr dptr) { return free_api((uintptr_t)dptr, 0); }

CUresult cgrt__emu_cuMemAllocHost(void **pp, size_t bytesize) { return alloc_api(pp, bytesize, 1); }

CUresult cgrt__emu_cuMemFreeHost(void *p) { return free_api((uintptr_t)p, 1); }

#define EMU_HOST_REGISTER_FLAGS \
  (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY | \
   CU_MEMHOSTREGISTER_READ_ONLY)

/* 1 when every page of [b, b + n) is mapped in this process (b + n does not wrap): the
 * driver cannot register memory that is not there. */
static int host_mapped(uintptr_t b, size_t n) {
  long ps = sysconf(_SC_PAGESIZE);
  if (ps <= 0) return 1;
  unsigned char vec[256];
  for (uintptr_t p = b / (uintptr_t)ps * (uintptr_t)ps, end = b + n; p < end;) {
    size_t pages = (end - p + (uintptr_t)ps - 1) / (uintptr_t)ps;
    if (pages > sizeof vec) pages = sizeof vec;
    if (mincore((void *)p, pages * (size_t)ps, vec) != 0) return 0; /* ENOMEM: a page is not mapped */
    p += pages * (size_t)ps;
  }
  return 1;
}

CUresult cgrt__emu_cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  uintptr_t b = (uintptr_t)p;
  if (p == NULL || bytesize == 0 || bytesize > UINTPTR_MAX - b || (Flags & ~EMU_HOST_REGISTER_FLAGS) != 0 ||
      !host_mapped(b, bytesize))
    return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  r = cgrt__emu_unsafe_call();
  for (size_t i = 0; r == CUDA_SUCCESS && i < g_nallocs; i++)
    if (b < g_allocs[i].base + g_allocs[i].size && g_allocs[i].base < b + bytesize)
      r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  /* The arena is device memory: freed or unallocated parts of it are not the host's. */
  if (r == CUDA_SUCCESS && b < cgrt__emu_arena.base + cgrt__emu_arena.bytes &&
      cgrt__emu_arena.base < b + bytesize)
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && grow_table() != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    insert((emu_alloc){b, bytesize, 0, 1, 1, cgrt__emu_next_id()});
    cgrt__emu_counts.allocs++;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuMemHostUnregister(void *p) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  r = cgrt__emu_unsafe_call();
  if (r == CUDA_SUCCESS) {
    r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    size_t i = upper((uintptr_t)p);
    if (i > 0 && g_allocs[i - 1].base == (uintptr_t)p && g_allocs[i - 1].registered) {
      remove_at(i - 1);
      cgrt__emu_counts.allocs--;
      r = CUDA_SUCCESS;
    }
  }
  cgrt__emu_unlock();
  return r;
}

/* The attributes cgrt reads (and a few neighbours); others: CUDA_ERROR_INVALID_VALUE. */
CUresult cgrt__emu_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (data == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  const emu_alloc *a = find_containing((uintptr_t)ptr);
  emu_alloc v = a != NULL ? *a : (emu_alloc){0};
  cgrt__emu_unlock();
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned int *)data = v.pinned ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *(CUdeviceptr *)data = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!v.pinned) return CUDA_ERROR_INVALID_VALUE;
      *(void **)data = (void *)(uintptr_t)ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *(unsigned long long *)data = (unsigned long long)v.id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *(unsigned int *)data = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *(int *)data = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr *)data = (CUdeviceptr)v.base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *(size_t *)data = v.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *(int *)data = 1;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

/* No graph memory nodes on the emulation: nothing is ever associated with graphs. */
CUresult cgrt__emu_cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (value == NULL || (int)attr < (int)CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT ||
      (int)attr > (int)CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
    return CUDA_ERROR_INVALID_VALUE;
  *(cuuint64_t *)value = 0;
  return CUDA_SUCCESS;
}

/* A synchronous memory operation: context, unsafe-call and legacy-stream rules, then
 * the device range check. `dev` must lie in device (or pinned, UVA) memory. */
static CUresult sync_begin(uintptr_t dev, size_t n) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  r = cgrt__emu_sync_op();
  if (r == CUDA_SUCCESS && n > 0 && !cgrt__emu_mem_range_ok(dev, n, EMU_MEM_ANY))
    r = CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  CUresult r = sync_begin((uintptr_t)dstDevice, ByteCount);
  if (r != CUDA_SUCCESS) return r;
  if (ByteCount > 0 && srcHost == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (ByteCount > 0) memmove((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  CUresult r = sync_begin((uintptr_t)srcDevice, ByteCount);
  if (r != CUDA_SUCCESS) return r;
  if (ByteCount > 0 && dstHost == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (ByteCount > 0) memmove(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  CUresult r = sync_begin((uintptr_t)dstDevice, N);
  if (r != CUDA_SUCCESS) return r;
  CUDA_MEMSET_NODE_PARAMS m = {.dst = dstDevice, .value = uc, .elementSize = 1, .width = N, .height = 1};
  cgrt__emu_memset_run(&m);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  if (N > SIZE_MAX / 4) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = sync_begin((uintptr_t)dstDevice, N * 4);
  if (r != CUDA_SUCCESS) return r;
  if (dstDevice % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMSET_NODE_PARAMS m = {.dst = dstDevice, .value = ui, .elementSize = 4, .width = N, .height = 1};
  cgrt__emu_memset_run(&m);
  return CUDA_SUCCESS;
}

/* ---- 1-D copy / memset descriptions shared with graph nodes ---- */
void cgrt__emu_memcpy_params(CUDA_MEMCPY3D *c, CUmemorytype dt, uintptr_t dst, CUmemorytype st,
                             uintptr_t src, size_t bytes) {
  memset(c, 0, sizeof(*c));
  c->srcMemoryType = st;
  if (st == CU_MEMORYTYPE_HOST)
    c->srcHost = (const void *)src;
  else
    c->srcDevice = (CUdeviceptr)src;
  c->dstMemoryType = dt;
  if (dt == CU_MEMORYTYPE_HOST)
    c->dstHost = (void *)dst;
  else
    c->dstDevice = (CUdeviceptr)dst;
  c->WidthInBytes = bytes;
  c->Height = 1;
  c->Depth = 1;
}

static int side_addr(CUmemorytype t, const void *host, CUdeviceptr dev, size_t x, uintptr_t *out) {
  if (t == CU_MEMORYTYPE_HOST)
    *out = (uintptr_t)host + x;
  else if (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED)
    *out = (uintptr_t)dev + x;
  else
    return 0; /* arrays are not emulated */
  return 1;
}

int cgrt__emu_memcpy_1d(const CUDA_MEMCPY3D *c, uintptr_t *src, uintptr_t *dst, size_t *bytes) {
  if (c->Height > 1 || c->Depth > 1 || c->srcY || c->srcZ || c->dstY || c->dstZ) return 0;
  if (c->srcLOD || c->dstLOD || c->reserved0 || c->reserved1) return 0;
  if (!side_addr(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, src)) return 0;
  if (!side_addr(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, dst)) return 0;
  *bytes = c->WidthInBytes;
  return 1;
}

/* Host operands of graph copies must be pinned; device operands must be live. */
static int side_valid(CUmemorytype t, uintptr_t a, size_t n) {
  return cgrt__emu_mem_range_ok(a, n, t == CU_MEMORYTYPE_HOST ? EMU_MEM_PINNED : EMU_MEM_ANY);
}

int cgrt__emu_memcpy_valid(const CUDA_MEMCPY3D *c) {
  uintptr_t s, d;
  size_t n;
  if (!cgrt__emu_memcpy_1d(c, &s, &d, &n) || n == 0) return 0;
  return side_valid(c->srcMemoryType, s, n) && side_valid(c->dstMemoryType, d, n);
}

int cgrt__emu_memset_valid(const CUDA_MEMSET_NODE_PARAMS *m) {
  size_t es = m->elementSize;
  if (es != 1 && es != 2 && es != 4) return 0;
  if (m->width == 0 || m->height == 0 || m->dst % es != 0) return 0;
  size_t row = m->width * es;
  if (row / es != m->width) return 0;
  size_t pitch = m->height > 1 ? m->pitch : row;
  if (pitch < row) return 0;
  size_t span = (m->height - 1) * pitch + row;
  return cgrt__emu_mem_range_ok((uintptr_t)m->dst, span, EMU_MEM_ANY);
}

void cgrt__emu_memset_run(const CUDA_MEMSET_NODE_PARAMS *m) {
  size_t es = m->elementSize, rows = m->height ? m->height : 1;
  size_t pitch = rows > 1 ? m->pitch : m->width * es;
  for (size_t y = 0; y < rows; y++) {
    unsigned char *p = (unsigned char *)(uintptr_t)m->dst + y * pitch;
    if (es == 1) {
      memset(p, (int)(m->value & 0xff), m->width);
    } else if (es == 2) {
      uint16_t v = (uint16_t)m->value;
      for (size_t i = 0; i < m->width; i++) memcpy(p + 2 * i, &v, 2);
    } else {
      uint32_t v = m->value;
      for (size_t i = 0; i < m->width; i++) memcpy(p + 4 * i, &v, 4);
    }
  }
}
