/* The parameter index of an executable graph: every kernel node's parameters (layout from
 * cuFuncGetParamInfo) copied into storage cgrt owns, and every 8-byte word of them (a
 * pointer parameter, or 8 bytes of a struct parameter) or memcpy/memset pointer that lies
 * inside a registered buffer, grouped by buffer, so that a step patches exactly the nodes
 * whose buffers moved. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"

#define GX_MAX_PARAMS 1024

/* A value that looks like a device address: 8-byte aligned, above 4 GiB, below 2^48. */
static int looks_like_pointer(uint64_t v) {
  return v >= (1ull << 32) && v < (1ull << 48) && (v & 7u) == 0;
}

/* The set's buffers at their current addresses, sorted by address: a word is looked up
 * in O(log buffers), so the index costs time linear in the parameter bytes. maxend[i] is
 * the largest end among entries 0..i (buffers may overlap: the lowest id wins, as in
 * gx_find_buffer). */
typedef struct buf_entry {
  CUdeviceptr base, end, maxend;
  uint32_t id;
} buf_entry;

typedef struct site_vec {
  gx_site *v;
  int32_t *buf;
  size_t n, cap;
} site_vec;

/* What one gx_index_build works with. */
typedef struct index_ctx {
  cgrt_graphs *set;
  gx_exec *e;
  site_vec sv;
  buf_entry *bufs; /* [nbufs], sorted by base */
  size_t nbufs;
} index_ctx;

static int by_base(const void *a, const void *b) {
  const buf_entry *x = (const buf_entry *)a, *y = (const buf_entry *)b;
  if (x->base != y->base) return x->base < y->base ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int lookup_build(index_ctx *c) {
  const cgrt_graphs *set = c->set;
  c->bufs = (buf_entry *)calloc(set->nbuf ? set->nbuf : 1, sizeof(buf_entry));
  if (c->bufs == NULL) return -1;
  c->nbufs = 0;
  for (size_t b = 0; b < set->nbuf; b++) {
    if (set->cur_bytes[b] == 0) continue;
    buf_entry *x = &c->bufs[c->nbufs++];
    x->base = set->current[b];
    x->end = set->cur_bytes[b] > ~(CUdeviceptr)0 - x->base ? ~(CUdeviceptr)0 : x->base + set->cur_bytes[b];
    x->id = (uint32_t)b;
  }
  qsort(c->bufs, c->nbufs, sizeof(buf_entry), by_base);
  for (size_t i = 0; i < c->nbufs; i++)
    c->bufs[i].maxend = i && c->bufs[i - 1].maxend > c->bufs[i].end ? c->bufs[i - 1].maxend : c->bufs[i].end;
  return 0;
}

/* The buffer holding v (the lowest id when several do), else -1. */
static int lookup(const index_ctx *c, CUdeviceptr v) {
  size_t lo = 0, hi = c->nbufs; /* first entry with base > v */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->bufs[mid].base <= v)
      lo = mid + 1;
    else
      hi = mid;
  }
  int best = -1;
  for (size_t i = lo; i > 0 && c->bufs[i - 1].maxend > v; i--) {
    const buf_entry *x = &c->bufs[i - 1];
    if (v < x->end && (best < 0 || x->id < (uint32_t)best)) best = (int)x->id;
  }
  return best;
}

/* The kind of v against the set's buffers and, for checked replay, the runtime's registry
 * (set->rt_ranges, read by gx_index_build), the declared ranges and the set's own memory;
 * *key: the identity of the known range (checked replay). `whole`: v is a whole 8-byte
 * parameter or a memcpy/memset operand (else a word of a larger parameter, never
 * GX_PTR_UNKNOWN or GX_PTR_FOREIGN: struct words are often pairs of 4-byte integers that
 * look like addresses). Without checked replay only GX_PTR_BUFFER matters. */
static uint8_t classify(const index_ctx *c, CUdeviceptr v, int whole, int *buf, uint64_t *key) {
  const cgrt_graphs *set = c->set;
  *key = 0;
  *buf = lookup(c, v);
  if (*buf >= 0) return GX_PTR_BUFFER;
  if (!set->o.checked_replay) return GX_PTR_NONE;
  if (cgrt__ranges_find(set->rt_ranges, set->nrt, v) >= 0 || gx_find_declared(set, v) >= 0 ||
      gx_set_owned(set, v)) {
    *key = gx_range_key(set, v);
    return GX_PTR_KNOWN;
  }
  if (!whole || !looks_like_pointer(v)) return GX_PTR_NONE;
  /* Nothing cgrt knows holds it: ask the driver. Device memory cgrt does not manage (a
   * library's own workspace) is checked by its buffer id; an address the driver knows no
   * allocation at is no device pointer (a host address a kernel receives but does not
   * dereference, e.g. cuBLAS's host-mode alpha, or an integer); no answer stays unknown. */
  uint64_t id = 0;
  CUresult r = cgrt__buffer_id(set->drv, v, 0, &id);
  if (r == CUDA_SUCCESS) {
    *key = id;
    return GX_PTR_FOREIGN;
  }
  return cgrt__buffer_id_answered(r) ? GX_PTR_NONE : GX_PTR_UNKNOWN;
}

void gx_index_free(gx_exec *e) {
  for (size_t i = 0; i < e->nk; i++) {
    gx_knode *k = &e->knodes[i];
    free(k->argv);
    free(k->args);
    free(k->offsets);
    free(k->sizes);
    free(k->words);
  }
  free(e->knodes);
  free(e->mnodes);
  free(e->site_start);
  free(e->sites);
  free(e->applied);
  free(e->dirty_k);
  free(e->dirty_m);
  free(e->meta_k);
  free(e->moved);
  free(e->dgroup_n);
  e->moved = NULL;
  e->dgroup_n = NULL;
  e->nmoved = 0;
  e->reqs_moved = 0;
  e->dpatch = 0;
  e->knodes = NULL;
  e->mnodes = NULL;
  e->site_start = NULL;
  e->sites = NULL;
  e->applied = NULL;
  e->dirty_k = e->dirty_m = e->meta_k = NULL;
  e->nk = e->nm = e->nsites = e->nmeta = 0;
}

static int push_site(site_vec *sv, int buf, uint32_t node, uint16_t kind, uint16_t offset,
                     uint64_t delta) {
  if (sv->n == sv->cap) {
    size_t cap = sv->cap ? sv->cap * 2 : 64;
    gx_site *v = (gx_site *)realloc(sv->v, cap * sizeof(gx_site));
    if (v == NULL) return -1;
    sv->v = v;
    int32_t *b = (int32_t *)realloc(sv->buf, cap * sizeof(int32_t));
    if (b == NULL) return -1;
    sv->buf = b;
    sv->cap = cap;
  }
  gx_site s = {node, kind, offset, delta};
  sv->v[sv->n] = s;
  sv->buf[sv->n] = buf;
  sv->n++;
  return 0;
}

/* Checked replay: records a pointer word of k other than a site. */
static int push_word(gx_knode *k, uint32_t *cap, uint16_t offset, uint16_t param, uint8_t kind, uint64_t key) {
  if (k->nwords == *cap) {
    uint32_t n = *cap ? *cap * 2 : 4;
    gx_kword *w = (gx_kword *)realloc(k->words, n * sizeof(gx_kword));
    if (w == NULL) return -1;
    k->words = w;
    *cap = n;
  }
  gx_kword w = {offset, param, kind, key};
  k->words[k->nwords++] = w;
  return 0;
}

/* Indexes the 8-byte words of parameter p of k (at offset off, `size` bytes): a whole
 * 8-byte parameter, else every word 8-byte aligned in the packed args (a struct holding
 * pointers is 8-byte aligned in the device ABI). Linear in the parameter's bytes. */
static cgrt_status index_param(index_ctx *c, gx_knode *k, uint32_t kidx, uint32_t p, size_t off,
                               size_t size, uint32_t *wcap) {
  const int whole = size == 8;
  const size_t end = off + size;
  for (size_t w = whole ? off : (off + 7) & ~(size_t)7; w + 8 <= end; w += 8) {
    uint64_t v, key;
    int b;
    memcpy(&v, k->args + w, 8);
    const uint8_t kind = classify(c, v, whole, &b, &key);
    if (kind == GX_PTR_BUFFER) {
      if (push_site(&c->sv, b, kidx, GX_SITE_KPARAM, (uint16_t)w, v - c->set->current[b]) != 0)
        return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
      k->nsites++;
    } else if (kind != GX_PTR_NONE && push_word(k, wcap, (uint16_t)w, (uint16_t)p, kind, key) != 0) {
      return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    }
  }
  return CGRT_SUCCESS;
}

static cgrt_status index_kernel(index_ctx *c, CUgraphNode node, gx_knode *k, uint32_t kidx) {
  cgrt_graphs *set = c->set;
  gx_exec *e = c->e;
  const cgrt__driver *drv = set->drv;
  memset(k, 0, sizeof(*k));
  k->node = node;
  CUresult r = drv->cuGraphKernelNodeGetParams(node, &k->p);
  if (r != CUDA_SUCCESS)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphKernelNodeGetParams", "indexing a graph");
  if (k->p.kernelParams == NULL) {
    /* Launched with `extra` packing: cgrt cannot see the parameters; leave it alone. */
    k->nparams = 0;
    return CGRT_SUCCESS;
  }
  size_t offs[GX_MAX_PARAMS], sizes[GX_MAX_PARAMS];
  size_t n = 0, total = 0;
  for (; n < GX_MAX_PARAMS; n++) {
    r = drv->cuFuncGetParamInfo(k->p.func, n, &offs[n], &sizes[n]);
    if (r != CUDA_SUCCESS) break;
    if (offs[n] + sizes[n] > total) total = offs[n] + sizes[n];
  }
  /* CUDA_ERROR_INVALID_VALUE marks the end of the list; anything else is a failure. */
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuFuncGetParamInfo", "indexing kernel parameters");
  if (drv->cuFuncGetName != NULL && drv->cuFuncGetName(&k->name, k->p.func) != CUDA_SUCCESS)
    k->name = NULL;
  if (total > GX_MAX_PARAM_BYTES)
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "graph set: kernel '%s' has %zu bytes of parameters (at most %u)",
                      k->name ? k->name : "?", total, GX_MAX_PARAM_BYTES);
  k->nparams = (uint32_t)n;
  k->argv = (void **)calloc(n ? n : 1, sizeof(void *));
  k->args = (unsigned char *)calloc(total ? total : 1, 1);
  k->offsets = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  k->sizes = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  if (!k->argv || !k->args || !k->offsets || !k->sizes)
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
  uint32_t wcap = 0;
  for (size_t i = 0; i < n; i++) {
    k->offsets[i] = (uint32_t)offs[i];
    k->sizes[i] = (uint32_t)sizes[i];
    k->argv[i] = k->args + offs[i];
    memcpy(k->args + offs[i], k->p.kernelParams[i], sizes[i]);
    if (sizes[i] < 8 || gx_is_handle_param(set, k->p.func, (uint32_t)i)) continue;
    cgrt_status st = index_param(c, k, kidx, (uint32_t)i, offs[i], sizes[i], &wcap);
    if (st != CGRT_SUCCESS) return st;
  }
  k->p.kernelParams = k->argv;
  k->p.extra = NULL;
  if (gx_meta_takes_reqs(set, k->p.func)) e->meta_k[e->nmeta++] = kidx;
  return CGRT_SUCCESS;
}

static int is_device(CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; }

/* Classifies one memcpy/memset operand v of node midx; a site when it lies in a buffer. */
static int index_operand(index_ctx *c, uint32_t midx, uint16_t kind, CUdeviceptr v, uint8_t *ptrkind,
                         uint64_t *key) {
  int b;
  *ptrkind = classify(c, v, 1, &b, key);
  return *ptrkind == GX_PTR_BUFFER ? push_site(&c->sv, b, midx, kind, 0, v - c->set->current[b]) : 0;
}

static cgrt_status index_mem(index_ctx *c, CUgraphNode node, int is_memset, gx_mnode *m, uint32_t midx) {
  const cgrt__driver *drv = c->set->drv;
  memset(m, 0, sizeof(*m));
  m->node = node;
  m->is_memset = is_memset;
  int bad = 0;
  if (is_memset) {
    CUresult r = drv->cuGraphMemsetNodeGetParams(node, &m->ms);
    if (r != CUDA_SUCCESS)
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphMemsetNodeGetParams", "indexing a graph");
    bad = index_operand(c, midx, GX_SITE_MEMSET_DST, m->ms.dst, &m->dst_kind, &m->dst_key);
  } else {
    CUresult r = drv->cuGraphMemcpyNodeGetParams(node, &m->cp);
    if (r != CUDA_SUCCESS)
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphMemcpyNodeGetParams", "indexing a graph");
    if (is_device(m->cp.srcMemoryType))
      bad = index_operand(c, midx, GX_SITE_MEMCPY_SRC, m->cp.srcDevice, &m->src_kind, &m->src_key);
    if (!bad && is_device(m->cp.dstMemoryType))
      bad = index_operand(c, midx, GX_SITE_MEMCPY_DST, m->cp.dstDevice, &m->dst_kind, &m->dst_key);
  }
  return bad ? cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index") : CGRT_SUCCESS;
}

cgrt_status gx_index_build(cgrt_graphs *set, gx_exec *e) {
  const cgrt__driver *drv = set->drv;
  cgrt_status st = CGRT_SUCCESS;
  CUgraphNode *nodes = NULL;
  index_ctx c;
  memset(&c, 0, sizeof(c));
  c.set = set;
  c.e = e;
  site_vec *sv = &c.sv;
  size_t n = 0;
  gx_index_free(e);
  /* The graph's nodes, then (WHILE draft loops) the nodes of the conditional body. */
  CUgraphNode *body = NULL;
  size_t nbody = 0;
  st = gx_graph_nodes(drv, e->graph, "indexing a graph", &nodes, &n);
  if (st == CGRT_SUCCESS && e->body != NULL) st = gx_graph_nodes(drv, e->body, "indexing a graph", &body, &nbody);
  if (st == CGRT_SUCCESS && nbody != 0) {
    CUgraphNode *all = (CUgraphNode *)realloc(nodes, (n + nbody) * sizeof(CUgraphNode));
    if (all == NULL) st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    else {
      memcpy(all + n, body, nbody * sizeof(CUgraphNode));
      nodes = all;
    }
  }
  free(body);
  if (st != CGRT_SUCCESS) {
    free(nodes);
    return st;
  }
  const size_t body_from = n; /* nodes[i] with i >= body_from lie in the body */
  n += nbody;
  CUresult r = CUDA_SUCCESS;
  CUgraphNodeType *types = (CUgraphNodeType *)calloc(n ? n : 1, sizeof(CUgraphNodeType));
  e->knodes = (gx_knode *)calloc(n ? n : 1, sizeof(gx_knode));
  e->mnodes = (gx_mnode *)calloc(n ? n : 1, sizeof(gx_mnode));
  e->dirty_k = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  e->dirty_m = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  e->meta_k = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  e->applied = (CUdeviceptr *)calloc(set->nbuf ? set->nbuf : 1, sizeof(CUdeviceptr));
  e->site_start = (uint32_t *)calloc(set->nbuf + 1, sizeof(uint32_t));
  e->moved = (uint32_t *)calloc(set->nbuf ? set->nbuf : 1, sizeof(uint32_t));
  if (!types || !e->knodes || !e->mnodes || !e->dirty_k || !e->dirty_m || !e->meta_k ||
      !e->applied || !e->site_start || !e->moved || lookup_build(&c) != 0) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    goto out;
  }
  memcpy(e->applied, set->current, set->nbuf * sizeof(CUdeviceptr));
  e->synced_gen = set->gen;
  e->nodes = n;
  st = gx_ranges_refresh(set);
  if (st != CGRT_SUCCESS) goto out;
  for (size_t i = 0; i < n && st == CGRT_SUCCESS; i++) {
    r = drv->cuGraphNodeGetType(nodes[i], &types[i]);
    if (r != CUDA_SUCCESS) {
      st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphNodeGetType", "indexing a graph");
      break;
    }
    if (types[i] == CU_GRAPH_NODE_TYPE_KERNEL) {
      st = index_kernel(&c, nodes[i], &e->knodes[e->nk], (uint32_t)e->nk);
      e->knodes[e->nk].in_body = i >= body_from;
      e->nk++;
    } else if (types[i] == CU_GRAPH_NODE_TYPE_MEMCPY || types[i] == CU_GRAPH_NODE_TYPE_MEMSET) {
      st = index_mem(&c, nodes[i], types[i] == CU_GRAPH_NODE_TYPE_MEMSET, &e->mnodes[e->nm],
                     (uint32_t)e->nm);
      e->mnodes[e->nm].in_body = i >= body_from;
      e->nm++;
    }
  }
  if (st != CGRT_SUCCESS) goto out;
  /* Group the sites by buffer (counting sort). */
  for (size_t i = 0; i < sv->n; i++) e->site_start[sv->buf[i] + 1]++;
  for (size_t b = 0; b < set->nbuf; b++) e->site_start[b + 1] += e->site_start[b];
  e->sites = (gx_site *)calloc(sv->n ? sv->n : 1, sizeof(gx_site));
  if (e->sites == NULL) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    goto out;
  }
  {
    uint32_t *fill = (uint32_t *)calloc(set->nbuf + 1, sizeof(uint32_t));
    if (fill == NULL) {
      st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
      goto out;
    }
    memcpy(fill, e->site_start, set->nbuf * sizeof(uint32_t));
    for (size_t i = 0; i < sv->n; i++) e->sites[fill[sv->buf[i]]++] = sv->v[i];
    free(fill);
  }
  e->nsites = sv->n;
  e->last_reqs = 0; /* metadata nodes were captured with num_reqs 0 */
out:
  free(nodes);
  free(types);
  free(sv->v);
  free(sv->buf);
  free(c.bufs);
  if (st != CGRT_SUCCESS) gx_index_free(e);
  return st;
}


static void mark_k(gx_exec *e, uint32_t k, size_t *ndk) {
  if (!e->knodes[k].dirty) {
    e->knodes[k].dirty = 1;
    e->dirty_k[(*ndk)++] = k;
  }
}

static void mark_m(gx_exec *e, uint32_t m, size_t *ndm) {
  if (!e->mnodes[m].dirty) {
    e->mnodes[m].dirty = 1;
    e->dirty_m[(*ndm)++] = m;
  }
}

/* Points the sites of buffer b at address a (it differs from e->applied[b]). */
static void apply_buffer(cgrt_graphs *set, gx_exec *e, size_t b, CUdeviceptr a, size_t *ndk, size_t *ndm) {
  e->applied[b] = a;
  if (e->site_start[b + 1] > e->site_start[b] && e->nmoved < set->nbuf) e->moved[e->nmoved++] = (uint32_t)b;
  for (uint32_t i = e->site_start[b]; i < e->site_start[b + 1]; i++) {
    const gx_site *s = &e->sites[i];
    uint64_t v = a + s->delta;
    switch (s->kind) {
      case GX_SITE_KPARAM: {
        gx_knode *k = &e->knodes[s->node];
        memcpy(k->args + s->offset, &v, 8);
        mark_k(e, s->node, ndk);
        break;
      }
      case GX_SITE_MEMCPY_SRC:
        e->mnodes[s->node].cp.srcDevice = v;
        mark_m(e, s->node, ndm);
        break;
      case GX_SITE_MEMCPY_DST:
        e->mnodes[s->node].cp.dstDevice = v;
        mark_m(e, s->node, ndm);
        break;
      default:
        e->mnodes[s->node].ms.dst = v;
        mark_m(e, s->node, ndm);
        break;
    }
  }
}

void gx_index_apply(cgrt_graphs *set, gx_exec *e, const CUdeviceptr *addr, size_t *ndk, size_t *ndm) {
  for (size_t b = 0; b < set->nbuf; b++)
    if (addr[b] != e->applied[b]) apply_buffer(set, e, b, addr[b], ndk, ndm);
}

void gx_index_catch_up(cgrt_graphs *set, gx_exec *e, size_t *ndk, size_t *ndm) {
  const uint64_t behind = set->gen - e->synced_gen;
  if (set->move_log != NULL && e->synced_gen <= set->gen && behind <= GX_MOVE_LOG) {
    for (uint64_t g = e->synced_gen + 1; g <= set->gen; g++) {
      const uint32_t b = set->move_log[g % GX_MOVE_LOG];
      if (set->current[b] != e->applied[b]) apply_buffer(set, e, b, set->current[b], ndk, ndm);
    }
  } else {
    gx_index_apply(set, e, set->current, ndk, ndm);
  }
  e->synced_gen = set->gen;
}

void gx_index_set_reqs(gx_exec *e, int reqs, size_t *ndk) {
  for (size_t i = 0; i < e->nmeta; i++) {
    gx_knode *k = &e->knodes[e->meta_k[i]];
    _Static_assert(sizeof reqs == CGRT__META_NUM_REQS_BYTES, "num_reqs is an int");
    memcpy(k->args + k->offsets[CGRT__META_NUM_REQS], &reqs, sizeof reqs);
    mark_k(e, e->meta_k[i], ndk);
  }
  e->last_reqs = reqs;
  e->reqs_moved = 1;
}

void gx_index_clear(gx_exec *e, size_t ndk, size_t ndm) {
  if (!e->dpatch) { /* device patching delivers them at the next successful launch */
    e->nmoved = 0;
    e->reqs_moved = 0;
  }
  for (size_t i = 0; i < ndk; i++) e->knodes[e->dirty_k[i]].dirty = 0;
  for (size_t i = 0; i < ndm; i++) e->mnodes[e->dirty_m[i]].dirty = 0;
}

size_t gx_index_host_dirty(const gx_exec *e, size_t ndk, size_t ndm) {
  size_t n = ndm;
  for (size_t i = 0; i < ndk; i++) n += e->knodes[e->dirty_k[i]].devnode == 0;
  return n;
}

cgrt_status gx_index_flush(cgrt_graphs *set, gx_exec *e, size_t ndk, size_t ndm) {
  const cgrt__driver *drv = set->drv;
  cgrt_status st = CGRT_SUCCESS;
  set->flush_cu = CUDA_SUCCESS;
  set->flush_in_body = 0;
  size_t host_k = 0;
  /* Device-updatable nodes are rewritten by the patch node (gx_dpatch_before_launch). */
  for (size_t i = 0; i < ndk && st == CGRT_SUCCESS; i++) {
    gx_knode *k = &e->knodes[e->dirty_k[i]];
    if (k->devnode != 0) {
      set->st.device_nodes_patched++;
      continue;
    }
    host_k++;
    CUresult r = drv->cuGraphExecKernelNodeSetParams(e->exec, k->node, &k->p);
    if (r != CUDA_SUCCESS) {
      set->flush_cu = r;
      set->flush_in_body = k->in_body;
      st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphExecKernelNodeSetParams",
                         k->in_body ? "patching a kernel node inside a WHILE body" : "patching a kernel node");
    }
  }
  for (size_t i = 0; i < ndm && st == CGRT_SUCCESS; i++) {
    gx_mnode *m = &e->mnodes[e->dirty_m[i]];
    CUresult r = m->is_memset
                     ? drv->cuGraphExecMemsetNodeSetParams(e->exec, m->node, &m->ms, set->rt->ctx)
                     : drv->cuGraphExecMemcpyNodeSetParams(e->exec, m->node, &m->cp, set->rt->ctx);
    if (r != CUDA_SUCCESS) {
      set->flush_cu = r;
      set->flush_in_body = m->in_body;
      st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r,
                         m->is_memset ? "cuGraphExecMemsetNodeSetParams" : "cuGraphExecMemcpyNodeSetParams",
                         m->in_body ? "patching a memory node inside a WHILE body" : "patching a memory node");
    }
  }
  set->st.nodes_patched += host_k + ndm;
  gx_index_clear(e, ndk, ndm);
  return st;
}
