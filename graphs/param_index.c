/* The parameter index of an executable graph: every kernel node's parameters (layout from
 * cuFuncGetParamInfo) copied into storage cgrt owns, and every (node, parameter) or
 * memcpy/memset pointer that lies inside a registered buffer, grouped by buffer, so that
 * a step patches exactly the nodes whose buffers moved. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"

#define GX_MAX_PARAMS 1024

int gx_find_buffer(const cgrt_graphs *set, const CUdeviceptr *addr, CUdeviceptr v) {
  for (size_t b = 0; b < set->nbuf; b++)
    if (v >= addr[b] && v - addr[b] < set->cur_bytes[b]) return (int)b;
  return -1;
}

static int in_host_ranges(const cgrt_graphs *set, CUdeviceptr v) {
  for (size_t i = 0; i < set->nranges; i++)
    if (v >= set->ranges[i].base && v - set->ranges[i].base < set->ranges[i].bytes) return 1;
  return 0;
}

/* A value that looks like a device address: 8-byte aligned, above 4 GiB, below 2^48. */
static int looks_like_pointer(uint64_t v) {
  return v >= (1ull << 32) && v < (1ull << 48) && (v & 7u) == 0;
}

/* The kind of v against the set's buffers, the runtime's registry (set->rt_ranges, read
 * by gx_index_build), the declared ranges and the set's own memory; *key: the identity of
 * the known range (checked replay). */
static uint8_t classify(const cgrt_graphs *set, CUdeviceptr v, int *buf, uint64_t *key) {
  *key = 0;
  *buf = gx_find_buffer(set, set->current, v);
  if (*buf >= 0) return GX_PTR_BUFFER;
  if (cgrt__ranges_find(set->rt_ranges, set->nrt, v) >= 0 || in_host_ranges(set, v) || gx_set_owned(set, v)) {
    *key = gx_range_key(set, v);
    return GX_PTR_KNOWN;
  }
  return looks_like_pointer(v) ? GX_PTR_UNKNOWN : GX_PTR_NONE;
}

void gx_index_free(gx_exec *e) {
  for (size_t i = 0; i < e->nk; i++) {
    gx_knode *k = &e->knodes[i];
    free(k->argv);
    free(k->args);
    free(k->offsets);
    free(k->sizes);
    free(k->ptrkind);
    free(k->ptrbuf);
    free(k->ptrkey);
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

typedef struct site_vec {
  gx_site *v;
  int32_t *buf;
  size_t n, cap;
} site_vec;

static int push_site(site_vec *sv, int buf, uint32_t node, uint16_t kind, uint16_t param,
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
  gx_site s = {node, kind, param, delta};
  sv->v[sv->n] = s;
  sv->buf[sv->n] = buf;
  sv->n++;
  return 0;
}

static cgrt_status index_kernel(cgrt_graphs *set, gx_exec *e, CUgraphNode node, gx_knode *k,
                                uint32_t kidx, site_vec *sv) {
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
  k->nparams = (uint32_t)n;
  k->argv = (void **)calloc(n ? n : 1, sizeof(void *));
  k->args = (unsigned char *)calloc(total ? total : 1, 1);
  k->offsets = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  k->sizes = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  k->ptrkind = (uint8_t *)calloc(n ? n : 1, 1);
  k->ptrbuf = (int32_t *)calloc(n ? n : 1, sizeof(int32_t));
  if (set->o.checked_replay) k->ptrkey = (uint64_t *)calloc(n ? n : 1, sizeof(uint64_t));
  if (!k->argv || !k->args || !k->offsets || !k->sizes || !k->ptrkind || !k->ptrbuf ||
      (set->o.checked_replay && !k->ptrkey))
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
  for (size_t i = 0; i < n; i++) {
    k->offsets[i] = (uint32_t)offs[i];
    k->sizes[i] = (uint32_t)sizes[i];
    k->argv[i] = k->args + offs[i];
    memcpy(k->args + offs[i], k->p.kernelParams[i], sizes[i]);
    k->ptrbuf[i] = -1;
    if (sizes[i] != 8 || gx_is_handle_param(set, k->p.func, (uint32_t)i)) continue;
    uint64_t v;
    memcpy(&v, k->args + offs[i], 8);
    int b;
    uint64_t key;
    k->ptrkind[i] = classify(set, v, &b, &key);
    if (k->ptrkey != NULL) k->ptrkey[i] = key;
    if (k->ptrkind[i] == GX_PTR_BUFFER) {
      k->ptrbuf[i] = b;
      if (push_site(sv, b, kidx, GX_SITE_KPARAM, (uint16_t)i, v - set->current[b]) != 0)
        return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    }
  }
  k->p.kernelParams = k->argv;
  k->p.extra = NULL;
  if (set->f_prepare != NULL && (k->p.func == set->f_prepare || k->p.func == set->f_advance ||
                                 (set->f_while_begin != NULL && k->p.func == set->f_while_begin))) {
    e->meta_k[e->nmeta++] = kidx;
  }
  return CGRT_SUCCESS;
}

static int is_device(CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; }

static cgrt_status index_mem(cgrt_graphs *set, CUgraphNode node, int is_memset, gx_mnode *m,
                             uint32_t midx, site_vec *sv) {
  const cgrt__driver *drv = set->drv;
  memset(m, 0, sizeof(*m));
  m->node = node;
  m->is_memset = is_memset;
  int b;
  if (is_memset) {
    CUresult r = drv->cuGraphMemsetNodeGetParams(node, &m->ms);
    if (r != CUDA_SUCCESS)
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphMemsetNodeGetParams", "indexing a graph");
    m->dst_kind = classify(set, m->ms.dst, &b, &m->dst_key);
    if (m->dst_kind == GX_PTR_BUFFER &&
        push_site(sv, b, midx, GX_SITE_MEMSET_DST, 0, m->ms.dst - set->current[b]) != 0)
      return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    return CGRT_SUCCESS;
  }
  CUresult r = drv->cuGraphMemcpyNodeGetParams(node, &m->cp);
  if (r != CUDA_SUCCESS)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphMemcpyNodeGetParams", "indexing a graph");
  if (is_device(m->cp.srcMemoryType)) {
    m->src_kind = classify(set, m->cp.srcDevice, &b, &m->src_key);
    if (m->src_kind == GX_PTR_BUFFER &&
        push_site(sv, b, midx, GX_SITE_MEMCPY_SRC, 0, m->cp.srcDevice - set->current[b]) != 0)
      return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
  }
  if (is_device(m->cp.dstMemoryType)) {
    m->dst_kind = classify(set, m->cp.dstDevice, &b, &m->dst_key);
    if (m->dst_kind == GX_PTR_BUFFER &&
        push_site(sv, b, midx, GX_SITE_MEMCPY_DST, 0, m->cp.dstDevice - set->current[b]) != 0)
      return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
  }
  return CGRT_SUCCESS;
}

cgrt_status gx_index_build(cgrt_graphs *set, gx_exec *e) {
  const cgrt__driver *drv = set->drv;
  cgrt_status st = CGRT_SUCCESS;
  CUgraphNode *nodes = NULL;
  site_vec sv = {0};
  size_t n = 0;
  gx_index_free(e);
  /* The graph's nodes, then (WHILE draft loops) the nodes of the conditional body. */
  CUgraph graphs[2] = {e->graph, e->body};
  size_t ng = e->body != NULL ? 2 : 1, counts[2] = {0, 0};
  CUresult r = CUDA_SUCCESS;
  for (size_t gi = 0; gi < ng; gi++) {
    r = drv->cuGraphGetNodes(graphs[gi], NULL, &counts[gi]);
    if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphGetNodes", "indexing a graph");
  }
  n = counts[0] + counts[1];
  nodes = (CUgraphNode *)calloc(n ? n : 1, sizeof(CUgraphNode));
  CUgraphNodeType *types = (CUgraphNodeType *)calloc(n ? n : 1, sizeof(CUgraphNodeType));
  e->knodes = (gx_knode *)calloc(n ? n : 1, sizeof(gx_knode));
  e->mnodes = (gx_mnode *)calloc(n ? n : 1, sizeof(gx_mnode));
  e->dirty_k = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  e->dirty_m = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  e->meta_k = (uint32_t *)calloc(n ? n : 1, sizeof(uint32_t));
  e->applied = (CUdeviceptr *)calloc(set->nbuf ? set->nbuf : 1, sizeof(CUdeviceptr));
  e->site_start = (uint32_t *)calloc(set->nbuf + 1, sizeof(uint32_t));
  e->moved = (uint32_t *)calloc(set->nbuf ? set->nbuf : 1, sizeof(uint32_t));
  if (!nodes || !types || !e->knodes || !e->mnodes || !e->dirty_k || !e->dirty_m || !e->meta_k ||
      !e->applied || !e->site_start || !e->moved) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: parameter index");
    goto out;
  }
  memcpy(e->applied, set->current, set->nbuf * sizeof(CUdeviceptr));
  e->synced_gen = set->gen;
  n = 0;
  for (size_t gi = 0; gi < ng; gi++) {
    size_t got = counts[gi];
    r = drv->cuGraphGetNodes(graphs[gi], nodes + n, &got);
    if (r != CUDA_SUCCESS) {
      st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphGetNodes", "indexing a graph");
      goto out;
    }
    n += got < counts[gi] ? got : counts[gi];
  }
  size_t body_from = counts[0]; /* nodes[i] with i >= body_from lie in the body */
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
      st = index_kernel(set, e, nodes[i], &e->knodes[e->nk], (uint32_t)e->nk, &sv);
      e->knodes[e->nk].in_body = i >= body_from;
      e->nk++;
    } else if (types[i] == CU_GRAPH_NODE_TYPE_MEMCPY || types[i] == CU_GRAPH_NODE_TYPE_MEMSET) {
      st = index_mem(set, nodes[i], types[i] == CU_GRAPH_NODE_TYPE_MEMSET, &e->mnodes[e->nm],
                     (uint32_t)e->nm, &sv);
      e->mnodes[e->nm].in_body = i >= body_from;
      e->nm++;
    }
  }
  if (st != CGRT_SUCCESS) goto out;
  /* Group the sites by buffer (counting sort). */
  for (size_t i = 0; i < sv.n; i++) e->site_start[sv.buf[i] + 1]++;
  for (size_t b = 0; b < set->nbuf; b++) e->site_start[b + 1] += e->site_start[b];
  e->sites = (gx_site *)calloc(sv.n ? sv.n : 1, sizeof(gx_site));
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
    for (size_t i = 0; i < sv.n; i++) e->sites[fill[sv.buf[i]]++] = sv.v[i];
    free(fill);
  }
  e->nsites = sv.n;
  e->last_reqs = 0; /* metadata nodes were captured with num_reqs 0 */
out:
  free(nodes);
  free(types);
  free(sv.v);
  free(sv.buf);
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
static size_t apply_buffer(cgrt_graphs *set, gx_exec *e, size_t b, CUdeviceptr a, size_t *ndk,
                           size_t *ndm) {
  size_t changed = 0;
  e->applied[b] = a;
  if (e->site_start[b + 1] > e->site_start[b] && e->nmoved < set->nbuf) e->moved[e->nmoved++] = (uint32_t)b;
  for (uint32_t i = e->site_start[b]; i < e->site_start[b + 1]; i++) {
    const gx_site *s = &e->sites[i];
    uint64_t v = a + s->delta;
    switch (s->kind) {
      case GX_SITE_KPARAM: {
        gx_knode *k = &e->knodes[s->node];
        memcpy(k->args + k->offsets[s->param], &v, 8);
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
    changed++;
  }
  return changed;
}

size_t gx_index_apply(cgrt_graphs *set, gx_exec *e, const CUdeviceptr *addr, size_t *ndk,
                      size_t *ndm) {
  size_t changed = 0;
  for (size_t b = 0; b < set->nbuf; b++)
    if (addr[b] != e->applied[b]) changed += apply_buffer(set, e, b, addr[b], ndk, ndm);
  return changed;
}

size_t gx_index_catch_up(cgrt_graphs *set, gx_exec *e, size_t *ndk, size_t *ndm) {
  size_t changed = 0;
  const uint64_t behind = set->gen - e->synced_gen;
  if (set->move_log != NULL && e->synced_gen <= set->gen && behind <= GX_MOVE_LOG) {
    for (uint64_t g = e->synced_gen + 1; g <= set->gen; g++) {
      const uint32_t b = set->move_log[g % GX_MOVE_LOG];
      if (set->current[b] != e->applied[b]) changed += apply_buffer(set, e, b, set->current[b], ndk, ndm);
    }
  } else {
    changed = gx_index_apply(set, e, set->current, ndk, ndm);
  }
  e->synced_gen = set->gen;
  return changed;
}

void gx_index_set_reqs(gx_exec *e, int reqs, size_t *ndk) {
  for (size_t i = 0; i < e->nmeta; i++) {
    gx_knode *k = &e->knodes[e->meta_k[i]];
    memcpy(k->args + k->offsets[0], &reqs, sizeof(int));
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
