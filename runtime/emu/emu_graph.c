/* Emulated graphs: creation, nodes (creation order is a topological order, since a node
 * can only depend on nodes created before it), deep copies for instantiation, and the
 * node queries of the table. */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

struct CUgraph_st *cgrt__emu_graph_new(int registered, struct CUgraphNode_st *parent) {
  struct CUgraph_st *g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->parent = parent;
  g->registered = registered;
  if (registered) {
    if (cgrt__emu_reg_add(g, EMU_K_GRAPH) != 0) {
      free(g);
      return NULL;
    }
    if (parent == NULL) cgrt__emu_counts.graphs++;
  }
  return g;
}

void cgrt__emu_node_free(struct CUgraphNode_st *n) {
  if (n == NULL) return;
  cgrt__emu_reg_del(n);
  if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    cgrt__emu_kernel_free(&n->u.k);
  } else if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && n->u.cond.bodies != NULL) {
    for (unsigned i = 0; i < n->u.cond.size; i++) cgrt__emu_graph_free(n->u.cond.bodies[i]);
    free(n->u.cond.bodies);
  }
  free(n->deps);
  free(n);
}

void cgrt__emu_graph_free(struct CUgraph_st *g) {
  if (g == NULL) return;
  cgrt__emu_capture_graph_freed(g);
  for (size_t i = 0; i < g->n; i++) cgrt__emu_node_free(g->nodes[i]);
  free(g->nodes);
  free(g->conds);
  if (g->registered) {
    cgrt__emu_reg_del(g);
    if (g->parent == NULL) cgrt__emu_counts.graphs--;
  }
  free(g);
}

struct CUgraphNode_st *cgrt__emu_node_alloc(CUgraphNodeType type) {
  struct CUgraphNode_st *n = calloc(1, sizeof(*n));
  if (n != NULL) n->type = type;
  return n;
}

static CUresult append(struct CUgraph_st *g, struct CUgraphNode_st *n) {
  if (g->n == g->cap) {
    size_t ncap = g->cap ? g->cap * 2 : 16;
    struct CUgraphNode_st **nn = realloc(g->nodes, ncap * sizeof(*nn));
    if (nn == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes = nn;
    g->cap = ncap;
  }
  n->graph = g;
  n->index = g->n;
  n->id = cgrt__emu_next_id();
  g->nodes[g->n++] = n;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_graph_attach(struct CUgraph_st *g, struct CUgraphNode_st *n,
                                struct CUgraphNode_st *const *deps, size_t ndeps) {
  if (ndeps > 0) {
    n->deps = malloc(ndeps * sizeof(*n->deps));
    if (n->deps == NULL) {
      cgrt__emu_node_free(n);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < ndeps; i++) {
      int dup = 0;
      for (size_t j = 0; j < n->ndeps && !dup; j++) dup = n->deps[j] == deps[i];
      if (!dup) n->deps[n->ndeps++] = deps[i];
    }
  }
  if ((g->registered && cgrt__emu_reg_add(n, EMU_K_NODE) != 0)) {
    cgrt__emu_node_free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = append(g, n);
  if (r != CUDA_SUCCESS) cgrt__emu_node_free(n);
  return r;
}

CUresult cgrt__emu_check_deps(const struct CUgraph_st *g, const CUgraphNode *deps, size_t n) {
  if (n > 0 && deps == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; i++) {
    if (!cgrt__emu_reg_is(deps[i], EMU_K_NODE) || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < i; j++)
      if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* ---- deep copy ---- */
static struct CUgraph_st *clone_graph(const struct CUgraph_st *g, struct CUgraphNode_st *parent);

static struct CUgraphNode_st *clone_node(const struct CUgraphNode_st *src) {
  struct CUgraphNode_st *n = cgrt__emu_node_alloc(src->type);
  if (n == NULL) return NULL;
  n->orig_id = src->id;
  n->upd_id = src->id;
  if (src->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    if (cgrt__emu_kernel_copy(&n->u.k, &src->u.k) != CUDA_SUCCESS) goto fail;
  } else if (src->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    n->u.cond = src->u.cond;
    n->u.cond.bodies = calloc(src->u.cond.size, sizeof(*n->u.cond.bodies));
    if (n->u.cond.bodies == NULL) goto fail;
    for (unsigned i = 0; i < src->u.cond.size; i++) {
      n->u.cond.bodies[i] = clone_graph(src->u.cond.bodies[i], n);
      if (n->u.cond.bodies[i] == NULL) goto fail;
    }
  } else {
    n->u = src->u;
  }
  if (src->ndeps > 0) {
    n->deps = malloc(src->ndeps * sizeof(*n->deps));
    if (n->deps == NULL) goto fail;
    n->ndeps = src->ndeps;
  }
  return n;
fail:
  cgrt__emu_node_free(n);
  return NULL;
}

static struct CUgraph_st *clone_graph(const struct CUgraph_st *g, struct CUgraphNode_st *parent) {
  struct CUgraph_st *c = cgrt__emu_graph_new(0, parent);
  if (c == NULL) return NULL;
  if (g->nconds > 0) {
    c->conds = malloc(g->nconds * sizeof(*c->conds));
    if (c->conds == NULL) goto fail;
    memcpy(c->conds, g->conds, g->nconds * sizeof(*c->conds));
    c->nconds = g->nconds;
  }
  for (size_t i = 0; i < g->n; i++) {
    const struct CUgraphNode_st *s = g->nodes[i];
    struct CUgraphNode_st *n = clone_node(s);
    if (n == NULL) goto fail;
    for (size_t j = 0; j < s->ndeps; j++) n->deps[j] = c->nodes[s->deps[j]->index];
    if (append(c, n) != CUDA_SUCCESS) {
      cgrt__emu_node_free(n);
      goto fail;
    }
  }
  return c;
fail:
  cgrt__emu_graph_free(c);
  return NULL;
}

struct CUgraph_st *cgrt__emu_graph_clone(const struct CUgraph_st *g) { return clone_graph(g, NULL); }

/* ---- table entries ---- */
CUresult cgrt__emu_cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (phGraph == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraph_st *g = cgrt__emu_graph_new(1, NULL);
  cgrt__emu_unlock();
  if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *phGraph = g;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuGraphDestroy(CUgraph hGraph) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hGraph, EMU_K_GRAPH))
    r = CUDA_ERROR_INVALID_HANDLE;
  else if (hGraph->parent != NULL)
    r = CUDA_ERROR_INVALID_VALUE; /* a conditional body belongs to its node */
  else
    cgrt__emu_graph_free(hGraph);
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (numNodes == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hGraph, EMU_K_GRAPH)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (nodes == NULL) {
    *numNodes = hGraph->n;
  } else if (*numNodes == 0) {
    r = CUDA_ERROR_INVALID_VALUE; /* as driver 580 answers an array of 0 entries */
  } else {
    size_t want = *numNodes;
    size_t got = want < hGraph->n ? want : hGraph->n;
    for (size_t i = 0; i < got; i++) nodes[i] = hGraph->nodes[i];
    for (size_t i = got; i < want; i++) nodes[i] = NULL;
    *numNodes = got;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (type == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hNode, EMU_K_NODE))
    r = CUDA_ERROR_INVALID_VALUE;
  else
    *type = hNode->type;
  cgrt__emu_unlock();
  return r;
}

/* A live node of that type, or NULL. Lock held. */
static struct CUgraphNode_st *node_of(CUgraphNode h, CUgraphNodeType type) {
  if (!cgrt__emu_reg_is(h, EMU_K_NODE) || h->type != type) return NULL;
  return h;
}

/* Kernel-node attributes: the emulation models CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
 * only (others: CUDA_ERROR_NOT_SUPPORTED). As on the driver a node cannot opt out once
 * device-updatable; its device handle (the node's id) reaches the exec's copy through
 * cgrt__emu_graph_kernel_node_set_param. Not modeled: the driver's refusal to
 * instantiate such a graph twice. */
/* The kernel node of an attribute call, or NULL with *r set (lock held). */
static struct CUgraphNode_st *attr_node(CUgraphNode hNode, CUkernelNodeAttrID attr, const void *value,
                                        CUresult *r) {
  struct CUgraphNode_st *n = node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL);
  *r = value == NULL || n == NULL ? CUDA_ERROR_INVALID_VALUE
       : attr != CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE ? CUDA_ERROR_NOT_SUPPORTED
                                                                   : CUDA_SUCCESS;
  return *r == CUDA_SUCCESS ? n : NULL;
}

CUresult cgrt__emu_cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                 const CUkernelNodeAttrValue_v1 *value) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = attr_node(hNode, attr, value, &r);
  if (n != NULL) {
    int v = value->deviceUpdatableKernelNode.deviceUpdatable;
    if ((v != 0 && v != 1) || (v == 0 && n->u.k.dev_updatable))
      r = CUDA_ERROR_INVALID_VALUE;
    else
      n->u.k.dev_updatable = v;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                 CUkernelNodeAttrValue_v1 *value_out) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = attr_node(hNode, attr, value_out, &r);
  if (n != NULL) {
    memset(value_out, 0, sizeof(*value_out));
    value_out->deviceUpdatableKernelNode.deviceUpdatable = n->u.k.dev_updatable;
    value_out->deviceUpdatableKernelNode.devNode =
        n->u.k.dev_updatable ? (CUgraphDeviceNode)(uintptr_t)n->id : NULL;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = node_of(hNode, CU_GRAPH_NODE_TYPE_KERNEL);
  if (n == NULL) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    memset(p, 0, sizeof(*p));
    const emu_kernel *k = &n->u.k;
    p->func = k->func;
    p->gridDimX = k->grid[0];
    p->gridDimY = k->grid[1];
    p->gridDimZ = k->grid[2];
    p->blockDimX = k->block[0];
    p->blockDimY = k->block[1];
    p->blockDimZ = k->block[2];
    p->sharedMemBytes = k->shmem;
    if (n->u.k.packed) { /* as the driver: the packed buffer, no kernelParams */
      void **x = n->u.k.extra;
      x[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
      x[1] = n->u.k.buf;
      x[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
      x[3] = &n->u.k.bufsize;
      x[4] = CU_LAUNCH_PARAM_END;
      p->kernelParams = NULL;
      p->extra = x;
    } else {
      p->kernelParams = k->ptrs;
      p->extra = NULL;
    }
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *p) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = node_of(hNode, CU_GRAPH_NODE_TYPE_MEMCPY);
  if (n == NULL)
    r = CUDA_ERROR_INVALID_VALUE;
  else
    *p = n->u.cp;
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *p) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = node_of(hNode, CU_GRAPH_NODE_TYPE_MEMSET);
  if (n == NULL)
    r = CUDA_ERROR_INVALID_VALUE;
  else
    *p = n->u.ms;
  cgrt__emu_unlock();
  return r;
}

/* Builds a kernel node from driver parameters. Lock held. */
CUresult cgrt__emu_kernel_node(const CUDA_KERNEL_NODE_PARAMS *p, struct CUgraphNode_st **out) {
  if (p->func == NULL) return p->kern != NULL ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  CUresult r = cgrt__emu_kernel_check(p->func, grid, block, p->sharedMemBytes);
  if (r != CUDA_SUCCESS) return r;
  struct CUgraphNode_st *n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_KERNEL);
  if (n == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  r = cgrt__emu_kernel_init(&n->u.k, p->func, grid, block, p->sharedMemBytes, p->kernelParams,
                            p->extra, NULL, 0);
  if (r != CUDA_SUCCESS) {
    cgrt__emu_node_free(n);
    return r;
  }
  *out = n;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (phGraphNode == NULL || nodeParams == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = NULL;
  if (!cgrt__emu_reg_is(hGraph, EMU_K_GRAPH))
    r = CUDA_ERROR_INVALID_HANDLE;
  else if ((r = cgrt__emu_check_deps(hGraph, dependencies, numDependencies)) == CUDA_SUCCESS &&
           (r = cgrt__emu_kernel_node(nodeParams, &n)) == CUDA_SUCCESS &&
           (r = cgrt__emu_graph_attach(hGraph, n, dependencies, numDependencies)) == CUDA_SUCCESS)
    *phGraphNode = n;
  cgrt__emu_unlock();
  return r;
}

/* A node's dependencies in the order they were given; the emulation keeps no edge data,
 * so every edge reads as the default. */
CUresult cgrt__emu_cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                              CUgraphEdgeData *edgeData, size_t *numDependencies) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (numDependencies == NULL || (edgeData != NULL && dependencies == NULL)) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hNode, EMU_K_NODE)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (dependencies == NULL) {
    *numDependencies = hNode->ndeps;
  } else {
    size_t cap = *numDependencies, n = hNode->ndeps < cap ? hNode->ndeps : cap;
    for (size_t i = 0; i < cap; i++) {
      dependencies[i] = i < n ? hNode->deps[i] : NULL;
      if (edgeData != NULL) memset(&edgeData[i], 0, sizeof(edgeData[i]));
    }
    *numDependencies = n;
  }
  cgrt__emu_unlock();
  return r;
}

/* Copies the attributes the emulation models (device-updatable) from src to dst. */
CUresult cgrt__emu_cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUgraphNode_st *d = node_of(dst, CU_GRAPH_NODE_TYPE_KERNEL);
  const struct CUgraphNode_st *s = node_of(src, CU_GRAPH_NODE_TYPE_KERNEL);
  if (d == NULL || s == NULL)
    r = CUDA_ERROR_INVALID_VALUE;
  else if (d->u.k.dev_updatable && !s->u.k.dev_updatable)
    r = CUDA_ERROR_INVALID_VALUE; /* a node cannot opt out once device-updatable */
  else
    d->u.k.dev_updatable = s->u.k.dev_updatable;
  cgrt__emu_unlock();
  return r;
}

/* ---- test helpers (emu.h) ---- */
size_t cgrt__emu_node_dependencies(CUgraphNode node, CUgraphNode *deps, size_t cap) {
  size_t n = 0;
  cgrt__emu_lock();
  if (cgrt__emu_reg_is(node, EMU_K_NODE)) {
    n = node->ndeps;
    for (size_t i = 0; i < n && i < cap; i++) deps[i] = node->deps[i];
  }
  cgrt__emu_unlock();
  return n;
}

size_t cgrt__emu_node_launch_attributes(CUgraphNode node, CUlaunchAttribute *attrs, size_t cap) {
  size_t n = 0;
  cgrt__emu_lock();
  if (cgrt__emu_reg_is(node, EMU_K_NODE) && node->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    n = node->u.k.nattrs;
    for (size_t i = 0; i < n && i < cap; i++) attrs[i] = node->u.k.attrs[i];
  }
  cgrt__emu_unlock();
  return n;
}
