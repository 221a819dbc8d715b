/* Capture segments (include/cgrt/cgrt_segment.h): the nodes a capture gains between
 * begin and end, copied out with their parameters and edges, and appended again with
 * addresses remapped.
 *
 * A segment's nodes are the capture graph's nodes at the end that were not there at the
 * begin (a sorted snapshot of handles), kept in a topological order of their edges (ties
 * in the driver's listing order, so two layers captured alike list alike). Each edge of a
 * segment node points at one of:
 *   INNER  another node of the segment (by index): the copy's edge points at that
 *          node's copy;
 *   START  a node of the capture's dependency set at the begin (what the layer followed):
 *          the copy's edge points at every node of the dependency set at the append;
 *   OUTER  any other node (e.g. metadata captured before the layer on a joined stream):
 *          the copy keeps the edge as it is.
 * The dependency set at the end (the layer's last nodes) maps the same way and becomes
 * the stream's dependency set after the append. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "cgrt/cgrt_segment.h"
#include "runtime/error.h"
#include "runtime/handles.h"
#include "runtime/runtime_internal.h"

#define SEG_MAX_PARAMS 1024

enum { DEP_INNER = 0, DEP_START = 1, DEP_OUTER = 2 };

typedef struct seg_dep {
  int kind;
  size_t idx;       /* DEP_INNER: index into nodes */
  CUgraphNode node; /* DEP_START / DEP_OUTER: the node */
  CUgraphEdgeData edge;
} seg_dep;

typedef struct seg_node {
  CUgraphNode node;
  CUgraphNodeType type;
  seg_dep *deps;
  size_t ndeps;
  CUDA_KERNEL_NODE_PARAMS kp; /* kernel: kernelParams/extra cleared (argv holds them) */
  const char *name;           /* kernel name (cuFuncGetName), or NULL */
  size_t nparams, args_bytes;
  int packed; /* launched with `extra`: copies are added the same way */
  size_t *offs, *sizes;
  unsigned char *args;
  CUDA_MEMSET_NODE_PARAMS ms;
  CUDA_MEMCPY3D cp;
} seg_node;

struct cgrt_segment {
  cgrt_runtime *rt;
  CUstream stream;
  uint64_t capture_id;
  CUgraph graph;
  int ended, failed;
  CUgraphNode *before; /* graph nodes at the begin, sorted by handle */
  size_t nbefore;
  CUgraphNode *start; /* the capture's dependencies at the begin */
  size_t nstart;
  seg_node *nodes; /* topological order */
  size_t n;
  seg_dep *sinks; /* the capture's dependencies at the end */
  size_t nsinks;
  cgrt__child child;
};

/* ---- small helpers ---- */
static int by_handle(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (const CUgraphNode *)a, y = (uintptr_t) * (const CUgraphNode *)b;
  return x < y ? -1 : x > y;
}

static int sorted_has(const CUgraphNode *v, size_t n, CUgraphNode h) {
  return n && bsearch(&h, v, n, sizeof *v, by_handle) != NULL;
}

typedef struct node_ix {
  CUgraphNode node;
  size_t idx;
} node_ix;

static int by_ix_handle(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const node_ix *)a)->node, y = (uintptr_t)((const node_ix *)b)->node;
  return x < y ? -1 : x > y;
}

static const node_ix *ix_find(const node_ix *v, size_t n, CUgraphNode h) {
  node_ix key = {h, 0};
  return n ? (const node_ix *)bsearch(&key, v, n, sizeof *v, by_ix_handle) : NULL;
}

static int edge_default(const CUgraphEdgeData *e) {
  static const CUgraphEdgeData zero;
  return memcmp(e, &zero, sizeof zero) == 0;
}

static cgrt_status enter(const cgrt_segment *seg, const char *api) {
  if (!cgrt__handle_live(seg, CGRT__HANDLE_SEGMENT))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "%s: segment %p is not live (NULL, destroyed or never created)",
                      api, (const void *)seg);
  return cgrt__runtime_enter(seg->rt, api);
}

/* The capture of `stream`: status ACTIVE with id/graph/dependencies, else a failure. */
static cgrt_status capture_info(const cgrt__driver *d, CUstream stream, const char *api, uint64_t *id,
                                CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                                size_t *ndeps) {
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t cid = 0;
  CUresult r = d->cuStreamGetCaptureInfo(stream, &cs, &cid, graph, deps, edges, ndeps);
  if (r != CUDA_SUCCESS)
    return cgrt__fail_cu(r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? CGRT_ERROR_CAPTURING : CGRT_ERROR_DRIVER, r,
                         "cuStreamGetCaptureInfo", api);
  if (cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    return cgrt__fail(CGRT_ERROR_CAPTURING, "%s: the stream's capture was invalidated", api);
  if (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: stream %p is not capturing", api, (void *)stream);
  *id = cid;
  return CGRT_SUCCESS;
}

static void node_free(seg_node *x) {
  free(x->deps);
  free(x->offs);
  free(x->sizes);
  free(x->args);
}

static void segment_release(cgrt_segment *seg) {
  for (size_t i = 0; i < seg->n; i++) node_free(&seg->nodes[i]);
  free(seg->nodes);
  free(seg->before);
  free(seg->start);
  free(seg->sinks);
  seg->nodes = NULL;
  seg->before = seg->start = NULL;
  seg->sinks = NULL;
  seg->n = seg->nbefore = seg->nstart = seg->nsinks = 0;
}

static void destroy_child(void *obj) { cgrt_segment_destroy((cgrt_segment *)obj); }

/* ---- public: queries, begin, destroy ---- */
cgrt_status cgrt_stream_capturing(cgrt_runtime *rt, CUstream stream, int *capturing) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_stream_capturing");
  if (st) return st;
  if (capturing == NULL) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_stream_capturing: capturing is NULL");
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = rt->drv->cuStreamIsCapturing(stream, &cs);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuStreamIsCapturing", "cgrt_stream_capturing");
  if (cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    return cgrt__fail(CGRT_ERROR_CAPTURING, "cgrt_stream_capturing: the stream's capture was invalidated");
  *capturing = cs == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CGRT_SUCCESS;
}

cgrt_status cgrt_segment_begin(cgrt_runtime *rt, CUstream stream, cgrt_segment **out) {
  static const char api[] = "cgrt_segment_begin";
  if (out) *out = NULL;
  cgrt_status st = cgrt__runtime_enter(rt, api);
  if (st) return st;
  if (out == NULL) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: out is NULL", api);
  const cgrt__driver *d = rt->drv;
  uint64_t id = 0;
  CUgraph graph = NULL;
  const CUgraphNode *deps = NULL;
  const CUgraphEdgeData *edges = NULL; /* asked for: without it non-default data fails the query */
  size_t ndeps = 0;
  if ((st = capture_info(d, stream, api, &id, &graph, &deps, &edges, &ndeps))) return st;
  cgrt_segment *seg = (cgrt_segment *)cgrt__handle_alloc(sizeof *seg);
  if (seg == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  seg->rt = rt;
  seg->stream = stream;
  seg->capture_id = id;
  seg->graph = graph;
  seg->start = (CUgraphNode *)calloc(ndeps ? ndeps : 1, sizeof(CUgraphNode));
  if (seg->start == NULL) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
    goto fail;
  }
  if (ndeps) memcpy(seg->start, deps, ndeps * sizeof(CUgraphNode));
  seg->nstart = ndeps;
  qsort(seg->start, seg->nstart, sizeof(CUgraphNode), by_handle);
  if ((st = gx_graph_nodes(d, graph, api, &seg->before, &seg->nbefore))) goto fail;
  qsort(seg->before, seg->nbefore, sizeof(CUgraphNode), by_handle);
  if ((st = cgrt__runtime_adopt(rt, seg, CGRT__HANDLE_SEGMENT, &seg->child, destroy_child, "capture segment",
                                api)))
    goto fail;
  *out = seg;
  return CGRT_SUCCESS;
fail:
  segment_release(seg);
  cgrt__handle_free(seg);
  return st;
}

void cgrt_segment_destroy(cgrt_segment *seg) {
  if (!seg || !cgrt__handle_remove(seg, CGRT__HANDLE_SEGMENT)) return;
  if (cgrt__runtime_is_live(seg->rt)) cgrt__runtime_detach(seg->rt, &seg->child);
  segment_release(seg);
  cgrt__handle_free(seg);
}

cgrt_status cgrt_segment_nodes(const cgrt_segment *seg, size_t *count) {
  if (!cgrt__handle_live(seg, CGRT__HANDLE_SEGMENT))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_segment_nodes: segment %p is not live", (const void *)seg);
  if (count == NULL) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_segment_nodes: count is NULL");
  if (!seg->ended || seg->failed)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_segment_nodes: the segment has not ended");
  *count = seg->n;
  return CGRT_SUCCESS;
}

/* ---- end: the nodes, their parameters and edges ---- */
static const char *type_name(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_HOST: return "host";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "child graph";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "memory allocation";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "memory free";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "other";
  }
}

static int is_device(CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; }

static cgrt_status read_kernel(const cgrt__driver *d, seg_node *x, size_t i, const char *api) {
  CUresult r = d->cuGraphKernelNodeGetParams(x->node, &x->kp);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphKernelNodeGetParams", api);
  if (d->cuFuncGetName == NULL || d->cuFuncGetName(&x->name, x->kp.func) != CUDA_SUCCESS) x->name = NULL;
  /* `extra`-packed parameters (cuBLAS's nvjet kernels are launched so): the buffer the
   * node owns, read in the layout cuFuncGetParamInfo gives. */
  const void *packed = NULL;
  size_t packed_bytes = 0;
  if (x->kp.kernelParams == NULL) {
    int bad = x->kp.extra == NULL, have_size = 0;
    for (size_t k = 0; !bad && x->kp.extra[k] != CU_LAUNCH_PARAM_END; k += 2) {
      if (x->kp.extra[k] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        packed = x->kp.extra[k + 1];
      } else if (x->kp.extra[k] == CU_LAUNCH_PARAM_BUFFER_SIZE && x->kp.extra[k + 1] != NULL) {
        packed_bytes = *(const size_t *)x->kp.extra[k + 1];
        have_size = 1;
      } else {
        bad = 1;
      }
    }
    if (bad || !have_size || (packed == NULL && packed_bytes > 0))
      return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED,
                        "%s: node %zu, kernel '%s', has neither kernelParams nor an `extra` buffer cgrt can read",
                        api, i, x->name ? x->name : "?");
    x->packed = 1;
  }
  size_t offs[SEG_MAX_PARAMS], sizes[SEG_MAX_PARAMS], n = 0, total = 0;
  for (; n < SEG_MAX_PARAMS; n++) {
    r = d->cuFuncGetParamInfo(x->kp.func, n, &offs[n], &sizes[n]);
    if (r != CUDA_SUCCESS) break;
    if (offs[n] + sizes[n] > total) total = offs[n] + sizes[n];
  }
  /* CUDA_ERROR_INVALID_VALUE marks the end of the list. */
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuFuncGetParamInfo", api);
  if (x->packed && total > packed_bytes)
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: node %zu, kernel '%s': %zu packed bytes, parameters need %zu",
                      api, i, x->name ? x->name : "?", packed_bytes, total);
  if (x->packed) total = packed_bytes; /* the whole buffer is copied, padding included */
  if (x->packed && n == 0 && total > 0) { /* no layout known: one parameter, the buffer */
    offs[0] = 0;
    sizes[0] = total;
    n = 1;
  }
  x->nparams = n;
  x->args_bytes = total;
  x->offs = (size_t *)calloc(n ? n : 1, sizeof(size_t));
  x->sizes = (size_t *)calloc(n ? n : 1, sizeof(size_t));
  x->args = (unsigned char *)calloc(total ? total : 1, 1);
  if (!x->offs || !x->sizes || !x->args) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  for (size_t p = 0; p < n; p++) {
    x->offs[p] = offs[p];
    x->sizes[p] = sizes[p];
    if (!x->packed) memcpy(x->args + offs[p], x->kp.kernelParams[p], sizes[p]);
  }
  if (x->packed && total) memcpy(x->args, packed, total);
  x->kp.kernelParams = NULL;
  x->kp.extra = NULL;
  return CGRT_SUCCESS;
}

static cgrt_status read_node(const cgrt__driver *d, seg_node *x, size_t i, const char *api) {
  CUresult r = d->cuGraphNodeGetType(x->node, &x->type);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphNodeGetType", api);
  switch (x->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return read_kernel(d, x, i, api);
    case CU_GRAPH_NODE_TYPE_MEMSET:
      r = d->cuGraphMemsetNodeGetParams(x->node, &x->ms);
      return r == CUDA_SUCCESS ? CGRT_SUCCESS : cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphMemsetNodeGetParams", api);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      r = d->cuGraphMemcpyNodeGetParams(x->node, &x->cp);
      if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphMemcpyNodeGetParams", api);
      if (x->cp.srcMemoryType == CU_MEMORYTYPE_ARRAY || x->cp.dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: node %zu is a memcpy to or from a CUDA array", api, i);
      return CGRT_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return CGRT_SUCCESS;
    default:
      return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED,
                        "%s: node %zu is a %s node; a segment holds kernel, memset, memcpy and empty nodes", api, i,
                        type_name(x->type));
  }
}

/* The edges of node x, classified against the segment (ix: its nodes sorted by handle). */
static cgrt_status read_deps(const cgrt__driver *d, const cgrt_segment *seg, const node_ix *ix, seg_node *x,
                             const char *api) {
  size_t n = 0;
  CUresult r = d->cuGraphNodeGetDependencies(x->node, NULL, NULL, &n);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphNodeGetDependencies", api);
  if (n == 0) { /* a root: it follows the start (the capture's first node) */
    x->deps = (seg_dep *)calloc(1, sizeof(seg_dep));
    if (x->deps == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
    x->deps[0].kind = DEP_START;
    x->ndeps = 1;
    return CGRT_SUCCESS;
  }
  CUgraphNode *nodes = (CUgraphNode *)calloc(n, sizeof *nodes);
  CUgraphEdgeData *edges = (CUgraphEdgeData *)calloc(n, sizeof *edges);
  x->deps = (seg_dep *)calloc(n, sizeof(seg_dep));
  cgrt_status st = CGRT_SUCCESS;
  if (!nodes || !edges || !x->deps) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  } else if ((r = d->cuGraphNodeGetDependencies(x->node, nodes, edges, &n)) != CUDA_SUCCESS) {
    st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphNodeGetDependencies", api);
  } else {
    for (size_t k = 0; k < n; k++) {
      seg_dep *e = &x->deps[x->ndeps++];
      const node_ix *in = ix_find(ix, seg->n, nodes[k]);
      e->edge = edges[k];
      e->node = nodes[k];
      if (in != NULL) {
        e->kind = DEP_INNER;
        e->idx = in->idx;
      } else {
        e->kind = sorted_has(seg->start, seg->nstart, nodes[k]) ? DEP_START : DEP_OUTER;
      }
    }
  }
  free(nodes);
  free(edges);
  return st;
}

/* Orders the segment's nodes topologically (Kahn; ties in listing order) and rewrites
 * the INNER edges to the new indices. */
static cgrt_status topo_sort(cgrt_segment *seg, const char *api) {
  size_t n = seg->n;
  size_t *indeg = (size_t *)calloc(n ? n : 1, sizeof(size_t));
  size_t *order = (size_t *)calloc(n ? n : 1, sizeof(size_t));
  size_t *pos = (size_t *)calloc(n ? n : 1, sizeof(size_t));
  seg_node *sorted = (seg_node *)calloc(n ? n : 1, sizeof(seg_node));
  cgrt_status st = CGRT_SUCCESS;
  if (!indeg || !order || !pos || !sorted) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < seg->nodes[i].ndeps; k++) indeg[i] += seg->nodes[i].deps[k].kind == DEP_INNER;
  /* O(n^2) in the worst case, n being one layer's nodes (tens): simple and ordered. */
  size_t done = 0;
  char *taken = (char *)calloc(n ? n : 1, 1);
  if (taken == NULL) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
    goto out;
  }
  while (done < n) {
    size_t pick = n;
    for (size_t i = 0; i < n && pick == n; i++)
      if (!taken[i] && indeg[i] == 0) pick = i;
    if (pick == n) break; /* a cycle: the driver never builds one */
    taken[pick] = 1;
    pos[pick] = done;
    order[done++] = pick;
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < seg->nodes[i].ndeps; k++)
        if (seg->nodes[i].deps[k].kind == DEP_INNER && seg->nodes[i].deps[k].idx == pick) indeg[i]--;
  }
  free(taken);
  if (done < n) {
    st = cgrt__fail(CGRT_ERROR_INTERNAL, "%s: the segment's edges form a cycle", api);
    goto out;
  }
  for (size_t j = 0; j < n; j++) {
    sorted[j] = seg->nodes[order[j]];
    for (size_t k = 0; k < sorted[j].ndeps; k++)
      if (sorted[j].deps[k].kind == DEP_INNER) sorted[j].deps[k].idx = pos[sorted[j].deps[k].idx];
  }
  for (size_t k = 0; k < seg->nsinks; k++)
    if (seg->sinks[k].kind == DEP_INNER) seg->sinks[k].idx = pos[seg->sinks[k].idx];
  free(seg->nodes);
  seg->nodes = sorted;
  sorted = NULL;
out:
  free(indeg);
  free(order);
  free(pos);
  free(sorted);
  return st;
}

static int dep_order(const void *a, const void *b) {
  const seg_dep *x = (const seg_dep *)a, *y = (const seg_dep *)b;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  if (x->kind == DEP_INNER) return x->idx < y->idx ? -1 : x->idx > y->idx;
  uintptr_t p = (uintptr_t)x->node, q = (uintptr_t)y->node;
  return p < q ? -1 : p > q;
}

/* One START edge per node at most (it stands for "after what preceded the segment",
 * however many nodes that was), a START edge for a root of the segment (a node with no
 * edge follows the start of the capture, where the dependency set was empty), and the
 * edges in a canonical order (START, INNER by index, OUTER by handle), so that two
 * layers captured alike have equal edge lists. */
static void canonical_deps(seg_node *x) {
  size_t w = 0;
  int start = 0;
  for (size_t k = 0; k < x->ndeps; k++) {
    if (x->deps[k].kind == DEP_START) {
      if (start) continue;
      start = 1;
      x->deps[k].node = NULL;
    }
    x->deps[w++] = x->deps[k];
  }
  x->ndeps = w;
  qsort(x->deps, x->ndeps, sizeof(seg_dep), dep_order);
}

cgrt_status cgrt_segment_end(cgrt_segment *seg) {
  static const char api[] = "cgrt_segment_end";
  cgrt_status st = enter(seg, api);
  if (st) return st;
  if (seg->ended) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: the segment has ended already", api);
  seg->ended = 1;
  seg->failed = 1; /* until everything below succeeds */
  const cgrt__driver *d = seg->rt->drv;
  uint64_t id = 0;
  CUgraph graph = NULL;
  const CUgraphNode *deps = NULL;
  const CUgraphEdgeData *edges = NULL;
  size_t ndeps = 0;
  CUgraphNode *all = NULL;
  node_ix *ix = NULL;
  size_t nall = 0;
  if ((st = capture_info(d, seg->stream, api, &id, &graph, &deps, &edges, &ndeps))) return st;
  if (id != seg->capture_id || graph != seg->graph)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: the stream's capture is not the one the segment began in", api);
  seg->sinks = (seg_dep *)calloc(ndeps ? ndeps : 1, sizeof(seg_dep));
  if (seg->sinks == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  seg->nsinks = ndeps;
  for (size_t k = 0; k < ndeps; k++) {
    seg->sinks[k].node = deps[k];
    if (edges != NULL) seg->sinks[k].edge = edges[k];
  }
  if ((st = gx_graph_nodes(d, graph, api, &all, &nall))) return st;
  seg->nodes = (seg_node *)calloc(nall ? nall : 1, sizeof(seg_node));
  ix = (node_ix *)calloc(nall ? nall : 1, sizeof(node_ix));
  if (seg->nodes == NULL || ix == NULL) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
    goto out;
  }
  for (size_t i = 0; i < nall; i++) {
    if (sorted_has(seg->before, seg->nbefore, all[i])) continue;
    ix[seg->n].node = all[i];
    ix[seg->n].idx = seg->n;
    seg->nodes[seg->n++].node = all[i];
  }
  qsort(ix, seg->n, sizeof *ix, by_ix_handle);
  for (size_t i = 0; i < seg->n; i++) {
    if ((st = read_node(d, &seg->nodes[i], i, api))) goto out;
    if ((st = read_deps(d, seg, ix, &seg->nodes[i], api))) goto out;
  }
  for (size_t k = 0; k < seg->nsinks; k++) {
    const node_ix *in = ix_find(ix, seg->n, seg->sinks[k].node);
    if (in != NULL) {
      seg->sinks[k].kind = DEP_INNER;
      seg->sinks[k].idx = in->idx;
    } else {
      seg->sinks[k].kind = sorted_has(seg->start, seg->nstart, seg->sinks[k].node) ? DEP_START : DEP_OUTER;
    }
  }
  if ((st = topo_sort(seg, api))) goto out;
  for (size_t i = 0; i < seg->n; i++) canonical_deps(&seg->nodes[i]);
  free(seg->before); /* not needed any more */
  seg->before = NULL;
  seg->nbefore = 0;
  seg->failed = 0;
out:
  free(all);
  free(ix);
  return st;
}

/* ---- remaps ---- */
/* The remaps of one call, sorted by `from`: src[i] is remap i's source range (looked up
 * with the runtime's range search, cgrt__ranges_find), to[i] its destination. */
typedef struct remap_set {
  cgrt__alloc_range *src;
  CUdeviceptr *to;
  size_t n;
} remap_set;

static int by_from(const void *a, const void *b) {
  CUdeviceptr x = ((const cgrt_remap *)a)->from, y = ((const cgrt_remap *)b)->from;
  return x < y ? -1 : x > y;
}

static void remaps_free(remap_set *m) {
  free(m->src);
  free(m->to);
  m->src = NULL;
  m->to = NULL;
  m->n = 0;
}

static cgrt_status remaps_load(const cgrt_remap *remaps, size_t n, const char *api, remap_set *out) {
  out->src = NULL;
  out->to = NULL;
  out->n = 0;
  if (n == 0) return CGRT_SUCCESS;
  if (remaps == NULL) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: remaps is NULL and num_remaps %zu", api, n);
  for (size_t i = 0; i < n; i++) {
    const cgrt_remap *m = &remaps[i];
    if (m->bytes == 0) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: remap %zu has 0 bytes", api, i);
    if (m->from + m->bytes < m->from || m->to + m->bytes < m->to)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: remap %zu wraps past the end of the address space", api,
                        i);
    if ((m->to - m->from) % CGRT_SEGMENT_ALIGN != 0)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "%s: remap %zu moves 0x%llx to 0x%llx, not by a multiple of %d bytes (kernels specialize on "
                        "pointer alignment)",
                        api, i, (unsigned long long)m->from, (unsigned long long)m->to, CGRT_SEGMENT_ALIGN);
  }
  cgrt_remap *sorted = (cgrt_remap *)malloc(n * sizeof(cgrt_remap));
  out->src = (cgrt__alloc_range *)calloc(n, sizeof(cgrt__alloc_range));
  out->to = (CUdeviceptr *)calloc(n, sizeof(CUdeviceptr));
  if (!sorted || !out->src || !out->to) {
    free(sorted);
    remaps_free(out);
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  }
  memcpy(sorted, remaps, n * sizeof(cgrt_remap));
  qsort(sorted, n, sizeof(cgrt_remap), by_from);
  cgrt_status st = CGRT_SUCCESS;
  for (size_t i = 0; i < n && st == CGRT_SUCCESS; i++) {
    if (i > 0 && sorted[i].from < sorted[i - 1].from + sorted[i - 1].bytes)
      st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: remaps from 0x%llx (%zu bytes) and from 0x%llx overlap", api,
                      (unsigned long long)sorted[i - 1].from, sorted[i - 1].bytes, (unsigned long long)sorted[i].from);
    out->src[i].base = sorted[i].from;
    out->src[i].bytes = sorted[i].bytes;
    out->to[i] = sorted[i].to;
  }
  free(sorted);
  out->n = n;
  if (st != CGRT_SUCCESS) remaps_free(out);
  return st;
}

static uint64_t remap_value(const remap_set *m, uint64_t v) {
  long i = cgrt__ranges_find(m->src, m->n, v);
  return i < 0 ? v : m->to[i] + (v - m->src[i].base);
}

/* The remapped parameter bytes of a kernel node into buf (args_bytes long). */
static void remap_args(const seg_node *x, const remap_set *m, unsigned char *buf) {
  memcpy(buf, x->args, x->args_bytes);
  if (m->n == 0) return;
  for (size_t p = 0; p < x->nparams; p++) {
    size_t off = x->offs[p], end = off + x->sizes[p];
    if (x->sizes[p] < 8) continue;
    for (size_t w = (off + 7) & ~(size_t)7; w + 8 <= end; w += 8) {
      uint64_t v;
      memcpy(&v, buf + w, 8);
      v = remap_value(m, v);
      memcpy(buf + w, &v, 8);
    }
  }
}

static void remap_mem(const seg_node *x, const remap_set *m, CUDA_MEMSET_NODE_PARAMS *ms, CUDA_MEMCPY3D *cp) {
  *ms = x->ms;
  *cp = x->cp;
  if (x->type == CU_GRAPH_NODE_TYPE_MEMSET) ms->dst = remap_value(m, ms->dst);
  if (x->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    if (is_device(cp->srcMemoryType)) cp->srcDevice = remap_value(m, cp->srcDevice);
    if (is_device(cp->dstMemoryType)) cp->dstDevice = remap_value(m, cp->dstDevice);
  }
}

/* ---- append ---- */
typedef struct edge_vec {
  CUgraphNode *nodes;
  CUgraphEdgeData *edges;
  size_t n, cap;
} edge_vec;

static int edge_push(edge_vec *v, CUgraphNode node, const CUgraphEdgeData *edge) {
  for (size_t i = 0; i < v->n; i++)
    if (v->nodes[i] == node) return 0; /* one edge per pair; the first's data */
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    CUgraphNode *a = (CUgraphNode *)realloc(v->nodes, cap * sizeof *a);
    if (a == NULL) return -1;
    v->nodes = a;
    CUgraphEdgeData *b = (CUgraphEdgeData *)realloc(v->edges, cap * sizeof *b);
    if (b == NULL) return -1;
    v->edges = b;
    v->cap = cap;
  }
  v->nodes[v->n] = node;
  v->edges[v->n] = *edge;
  v->n++;
  return 0;
}

static int edges_all_default(const edge_vec *v) {
  for (size_t i = 0; i < v->n; i++)
    if (!edge_default(&v->edges[i])) return 0;
  return 1;
}

/* Where an edge of the segment points in a copy: INNER to the copy of that node, START
 * to every node of the dependency set `now` (keeping the edge's data when both the
 * segment's start and `now` are one node: a layer's first kernel launched with
 * programmatic dependence keeps it), OUTER to the same node. */
static int map_dep(const cgrt_segment *seg, const seg_dep *e, const CUgraphNode *copies, const CUgraphNode *now,
                   const CUgraphEdgeData *now_edges, size_t nnow, edge_vec *out) {
  static const CUgraphEdgeData zero;
  switch (e->kind) {
    case DEP_INNER: return edge_push(out, copies[e->idx], &e->edge);
    case DEP_OUTER: return edge_push(out, e->node, &e->edge);
    default:
      for (size_t k = 0; k < nnow; k++) {
        const CUgraphEdgeData *data = seg->nstart == 1 && nnow == 1 ? &e->edge : now_edges ? &now_edges[k] : &zero;
        if (edge_push(out, now[k], data) != 0) return -1;
      }
      return 0;
  }
}

static cgrt_status add_copy(const cgrt__driver *d, const cgrt_segment *seg, const seg_node *x, size_t i,
                            const remap_set *m, const edge_vec *deps, unsigned char *argbuf, void **argv,
                            CUgraphNode *out, const char *api) {
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = x->type;
  void *extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, NULL, CU_LAUNCH_PARAM_BUFFER_SIZE, NULL, CU_LAUNCH_PARAM_END};
  CUDA_MEMSET_NODE_PARAMS ms;
  CUDA_MEMCPY3D cp;
  switch (x->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      remap_args(x, m, argbuf);
      for (size_t k = 0; k < x->nparams; k++) argv[k] = argbuf + x->offs[k];
      p.kernel.func = x->kp.func;
      p.kernel.gridDimX = x->kp.gridDimX;
      p.kernel.gridDimY = x->kp.gridDimY;
      p.kernel.gridDimZ = x->kp.gridDimZ;
      p.kernel.blockDimX = x->kp.blockDimX;
      p.kernel.blockDimY = x->kp.blockDimY;
      p.kernel.blockDimZ = x->kp.blockDimZ;
      p.kernel.sharedMemBytes = x->kp.sharedMemBytes;
      if (x->packed) {
        extra[1] = argbuf;
        extra[3] = (void *)&x->args_bytes;
        p.kernel.extra = extra;
      } else {
        p.kernel.kernelParams = argv;
      }
      p.kernel.kern = x->kp.kern;
      p.kernel.ctx = x->kp.ctx;
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
      remap_mem(x, m, &ms, &cp);
      p.memset.dst = ms.dst;
      p.memset.pitch = ms.pitch;
      p.memset.value = ms.value;
      p.memset.elementSize = ms.elementSize;
      p.memset.width = ms.width;
      p.memset.height = ms.height;
      p.memset.ctx = seg->rt->ctx;
      break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      remap_mem(x, m, &ms, &cp);
      p.memcpy.copyCtx = seg->rt->ctx;
      p.memcpy.copyParams = cp;
      break;
    default: /* empty */
      break;
  }
  CUresult r = d->cuGraphAddNode(out, seg->graph, deps->nodes, edges_all_default(deps) ? NULL : deps->edges,
                                 deps->n, &p);
  if (r != CUDA_SUCCESS) {
    cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphAddNode", api);
    cgrt__error_prefix("%s: node %zu (%s%s%s)", api, i, type_name(x->type), x->name ? " " : "",
                       x->name ? x->name : "");
    return CGRT_ERROR_DRIVER;
  }
  if (x->type == CU_GRAPH_NODE_TYPE_KERNEL && (r = d->cuGraphKernelNodeCopyAttributes(*out, x->node)) != CUDA_SUCCESS)
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphKernelNodeCopyAttributes", api);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_segment_append(cgrt_segment *seg, const cgrt_remap *remaps, size_t num_remaps) {
  static const char api[] = "cgrt_segment_append";
  cgrt_status st = enter(seg, api);
  if (st) return st;
  if (!seg->ended || seg->failed)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: the segment has not ended (or ending it failed)", api);
  const cgrt__driver *d = seg->rt->drv;
  if (d->cuGraphAddNode == NULL)
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: the driver has no cuGraphAddNode (CUDA 12.3 or newer)", api);
  uint64_t id = 0;
  CUgraph graph = NULL;
  const CUgraphNode *deps = NULL;
  const CUgraphEdgeData *edges = NULL;
  size_t ndeps = 0;
  if ((st = capture_info(d, seg->stream, api, &id, &graph, &deps, &edges, &ndeps))) return st;
  if (id != seg->capture_id || graph != seg->graph)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: the segment's capture has ended", api);
  remap_set m;
  if ((st = remaps_load(remaps, num_remaps, api, &m))) return st;
  /* The dependency set is the driver's array, valid until the next call on the stream:
   * copied, since adding nodes to the graph does not touch the stream but keep it simple. */
  CUgraphNode *now = (CUgraphNode *)calloc(ndeps ? ndeps : 1, sizeof *now);
  CUgraphEdgeData *now_edges = (CUgraphEdgeData *)calloc(ndeps ? ndeps : 1, sizeof *now_edges);
  CUgraphNode *copies = (CUgraphNode *)calloc(seg->n ? seg->n : 1, sizeof *copies);
  size_t maxargs = 1, maxparams = 1;
  for (size_t i = 0; i < seg->n; i++) {
    if (seg->nodes[i].args_bytes > maxargs) maxargs = seg->nodes[i].args_bytes;
    if (seg->nodes[i].nparams > maxparams) maxparams = seg->nodes[i].nparams;
  }
  unsigned char *argbuf = (unsigned char *)malloc(maxargs);
  void **argv = (void **)calloc(maxparams, sizeof(void *));
  edge_vec ev = {NULL, NULL, 0, 0};
  if (!now || !now_edges || !copies || !argbuf || !argv) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
    goto out;
  }
  if (ndeps) memcpy(now, deps, ndeps * sizeof *now);
  if (ndeps && edges) memcpy(now_edges, edges, ndeps * sizeof *now_edges);
  for (size_t i = 0; i < seg->n; i++) {
    const seg_node *x = &seg->nodes[i];
    ev.n = 0;
    for (size_t k = 0; k < x->ndeps; k++)
      if (map_dep(seg, &x->deps[k], copies, now, now_edges, ndeps, &ev) != 0) {
        st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
        goto out;
      }
    if ((st = add_copy(d, seg, x, i, &m, &ev, argbuf, argv, &copies[i], api))) goto out;
  }
  ev.n = 0;
  for (size_t k = 0; k < seg->nsinks; k++)
    if (map_dep(seg, &seg->sinks[k], copies, now, now_edges, ndeps, &ev) != 0) {
      st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
      goto out;
    }
  CUresult r = d->cuStreamUpdateCaptureDependencies(seg->stream, ev.nodes, edges_all_default(&ev) ? NULL : ev.edges,
                                                    ev.n, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
  if (r != CUDA_SUCCESS) st = cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuStreamUpdateCaptureDependencies", api);
out:
  remaps_free(&m);
  free(now);
  free(now_edges);
  free(copies);
  free(argbuf);
  free(argv);
  free(ev.nodes);
  free(ev.edges);
  return st;
}

/* ---- compare ---- */
static cgrt_status differ(const char *api, size_t i, const seg_node *x, const char *what) {
  return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: node %zu (%s%s%s) differs: %s", api, i, type_name(x->type),
                    x->name ? " " : "", x->name ? x->name : "", what);
}

static int same_dep(const seg_dep *a, const seg_dep *b) {
  if (a->kind != b->kind || memcmp(&a->edge, &b->edge, sizeof a->edge) != 0) return 0;
  if (a->kind == DEP_INNER) return a->idx == b->idx;
  return a->kind == DEP_START || a->node == b->node;
}

static cgrt_status compare_kernel(const char *api, size_t i, const seg_node *a, const seg_node *b,
                                  const remap_set *m) {
  const CUDA_KERNEL_NODE_PARAMS *p = &a->kp, *q = &b->kp;
  if (p->func != q->func) return differ(api, i, a, "another kernel");
  if (p->gridDimX != q->gridDimX || p->gridDimY != q->gridDimY || p->gridDimZ != q->gridDimZ ||
      p->blockDimX != q->blockDimX || p->blockDimY != q->blockDimY || p->blockDimZ != q->blockDimZ ||
      p->sharedMemBytes != q->sharedMemBytes)
    return differ(api, i, a, "launch shape (grid, block or shared memory)");
  if (a->nparams != b->nparams || a->args_bytes != b->args_bytes || a->packed != b->packed)
    return differ(api, i, a, "parameter layout");
  unsigned char *buf = (unsigned char *)malloc(a->args_bytes ? a->args_bytes : 1);
  if (buf == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", api);
  remap_args(a, m, buf);
  cgrt_status st = CGRT_SUCCESS;
  for (size_t k = 0; k < a->nparams && st == CGRT_SUCCESS; k++) {
    size_t off = a->offs[k], size = a->sizes[k];
    if (memcmp(buf + off, b->args + off, size) == 0) continue;
    size_t at = 0;
    while (at < size && buf[off + at] == b->args[off + at]) at++;
    size_t w = size >= 8 ? ((off + at) & ~(size_t)7) : off;
    uint64_t x = 0, y = 0;
    size_t len = size >= 8 ? 8 : size;
    if (w + len > off + size) w = off + size - len;
    memcpy(&x, buf + w, len);
    memcpy(&y, b->args + w, len);
    st = cgrt__fail(CGRT_ERROR_NOT_SUPPORTED,
                    "%s: node %zu (kernel %s) differs: parameter %zu, byte %zu: 0x%llx remapped vs 0x%llx captured "
                    "(an address outside every remap, or a value that changes from layer to layer)",
                    api, i, a->name ? a->name : "?", k, at, (unsigned long long)x, (unsigned long long)y);
  }
  free(buf);
  return st;
}

cgrt_status cgrt_segment_compare(const cgrt_segment *seg, const cgrt_segment *other, const cgrt_remap *remaps,
                                 size_t num_remaps) {
  static const char api[] = "cgrt_segment_compare";
  cgrt_status st = enter(seg, api);
  if (st) return st;
  if ((st = enter(other, api))) return st;
  if (!seg->ended || seg->failed || !other->ended || other->failed)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: both segments must have ended", api);
  if (seg->capture_id != other->capture_id)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: the segments belong to different captures", api);
  remap_set m;
  if ((st = remaps_load(remaps, num_remaps, api, &m))) return st;
  if (seg->n != other->n) {
    st = cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: %zu nodes vs %zu captured", api, seg->n, other->n);
    goto out;
  }
  for (size_t i = 0; i < seg->n && st == CGRT_SUCCESS; i++) {
    const seg_node *a = &seg->nodes[i], *b = &other->nodes[i];
    if (a->type != b->type) {
      st = cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: node %zu is a %s node vs a %s node captured", api, i,
                      type_name(a->type), type_name(b->type));
      break;
    }
    if (a->ndeps != b->ndeps) {
      st = differ(api, i, a, "number of dependencies");
      break;
    }
    for (size_t k = 0; k < a->ndeps; k++)
      if (!same_dep(&a->deps[k], &b->deps[k])) {
        st = differ(api, i, a, "dependencies (another node, or another edge type)");
        break;
      }
    if (st) break;
    if (a->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      st = compare_kernel(api, i, a, b, &m);
    } else if (a->type != CU_GRAPH_NODE_TYPE_EMPTY) {
      CUDA_MEMSET_NODE_PARAMS ms;
      CUDA_MEMCPY3D cp;
      remap_mem(a, &m, &ms, &cp);
      if (a->type == CU_GRAPH_NODE_TYPE_MEMSET &&
          (ms.dst != b->ms.dst || ms.value != b->ms.value || ms.elementSize != b->ms.elementSize ||
           ms.width != b->ms.width || ms.height != b->ms.height || (ms.height > 1 && ms.pitch != b->ms.pitch)))
        st = differ(api, i, a, "memset operands (remapped)");
      if (a->type == CU_GRAPH_NODE_TYPE_MEMCPY &&
          (cp.srcMemoryType != b->cp.srcMemoryType || cp.dstMemoryType != b->cp.dstMemoryType ||
           cp.srcDevice != b->cp.srcDevice || cp.dstDevice != b->cp.dstDevice || cp.srcHost != b->cp.srcHost ||
           cp.dstHost != b->cp.dstHost || cp.WidthInBytes != b->cp.WidthInBytes || cp.Height != b->cp.Height ||
           cp.Depth != b->cp.Depth || cp.srcPitch != b->cp.srcPitch || cp.dstPitch != b->cp.dstPitch ||
           cp.srcXInBytes != b->cp.srcXInBytes || cp.dstXInBytes != b->cp.dstXInBytes || cp.srcY != b->cp.srcY ||
           cp.dstY != b->cp.dstY))
        st = differ(api, i, a, "memcpy operands (remapped)");
    }
  }
  if (st == CGRT_SUCCESS && seg->nsinks != other->nsinks)
    st = cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: the segments end on %zu vs %zu nodes", api, seg->nsinks,
                    other->nsinks);
  for (size_t k = 0; st == CGRT_SUCCESS && k < seg->nsinks; k++)
    if (!same_dep(&seg->sinks[k], &other->sinks[k]))
      st = cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: the segments end on different nodes", api);
out:
  remaps_free(&m);
  return st;
}
