/* cuGraphAddNode (kernel, memcpy, memset, host, empty and conditional nodes) and
 * conditional handles. A conditional node owns its body graphs; its handle's value is
 * set by reference kernels through cgrt__emu_set_conditional (emu.h). */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

/* 1 when handle h was created on g or on a graph enclosing it. Lock held. */
static int handle_visible(const struct CUgraph_st *g, CUgraphConditionalHandle h) {
  while (g != NULL) {
    for (size_t i = 0; i < g->nconds; i++)
      if (g->conds[i].handle == h) return 1;
    g = g->parent ? g->parent->graph : NULL;
  }
  return 0;
}

CUresult cgrt__emu_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                                  CUgraph hGraph, CUcontext ctx,
                                                  unsigned int defaultLaunchValue,
                                                  unsigned int flags) {
  (void)ctx;
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (pHandle_out == NULL || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hGraph, EMU_K_GRAPH)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    emu_cond *nc = realloc(hGraph->conds, (hGraph->nconds + 1) * sizeof(*nc));
    if (nc == NULL) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      hGraph->conds = nc;
      emu_cond *c = &nc[hGraph->nconds++];
      c->handle = (CUgraphConditionalHandle)cgrt__emu_next_id();
      c->dflt = defaultLaunchValue;
      c->flags = flags;
      c->value = defaultLaunchValue;
      *pHandle_out = c->handle;
    }
  }
  cgrt__emu_unlock();
  return r;
}

static CUresult conditional_node(struct CUgraph_st *g, CUDA_CONDITIONAL_NODE_PARAMS *p,
                                 struct CUgraphNode_st **out) {
  if (!handle_visible(g, p->handle)) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
    case CU_GRAPH_COND_TYPE_WHILE:
      if (p->size != 1) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_GRAPH_COND_TYPE_IF:
      if (p->size != 1 && p->size != 2) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_GRAPH_COND_TYPE_SWITCH:
      if (p->size == 0) return CUDA_ERROR_INVALID_VALUE;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  struct CUgraphNode_st *n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_CONDITIONAL);
  if (n == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  n->u.cond.handle = p->handle;
  n->u.cond.type = p->type;
  n->u.cond.size = p->size;
  n->u.cond.bodies = calloc(p->size, sizeof(*n->u.cond.bodies));
  if (n->u.cond.bodies == NULL) {
    cgrt__emu_node_free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (unsigned i = 0; i < p->size; i++) {
    n->u.cond.bodies[i] = cgrt__emu_graph_new(1, n);
    if (n->u.cond.bodies[i] == NULL) {
      cgrt__emu_node_free(n);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  *out = n;
  return CUDA_SUCCESS;
}

static CUresult build_node(struct CUgraph_st *g, CUgraphNodeParams *p, struct CUgraphNode_st **out) {
  struct CUgraphNode_st *n = NULL;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
      CUDA_KERNEL_NODE_PARAMS kp = {k->func, k->gridDimX, k->gridDimY, k->gridDimZ,
                                    k->blockDimX, k->blockDimY, k->blockDimZ, k->sharedMemBytes,
                                    k->kernelParams, k->extra, k->kern, k->ctx};
      return cgrt__emu_kernel_node(&kp, out);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (p->memcpy.flags != 0 || p->memcpy.reserved != 0 || !cgrt__emu_memcpy_valid(&p->memcpy.copyParams))
        return CUDA_ERROR_INVALID_VALUE;
      n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_MEMCPY);
      if (n) n->u.cp = p->memcpy.copyParams;
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS m = {p->memset.dst, p->memset.pitch, p->memset.value,
                                   p->memset.elementSize, p->memset.width, p->memset.height};
      if (!cgrt__emu_memset_valid(&m)) return CUDA_ERROR_INVALID_VALUE;
      n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_MEMSET);
      if (n) n->u.ms = m;
      break;
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      /* Conditional bodies may not contain host nodes. */
      if (p->host.fn == NULL || g->parent != NULL) return CUDA_ERROR_INVALID_VALUE;
      n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_HOST);
      if (n) {
        n->u.host.fn = p->host.fn;
        n->u.host.user = p->host.userData;
      }
      break;
    case CU_GRAPH_NODE_TYPE_EMPTY:
      n = cgrt__emu_node_alloc(CU_GRAPH_NODE_TYPE_EMPTY);
      break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return conditional_node(g, &p->conditional, out);
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (n == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = n;
  return CUDA_SUCCESS;
}

static int edges_default(const CUgraphEdgeData *d, size_t n) {
  static const CUgraphEdgeData zero;
  for (size_t i = 0; d != NULL && i < n; i++)
    if (memcmp(&d[i], &zero, sizeof(zero)) != 0) return 0;
  return 1;
}

CUresult cgrt__emu_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies,
                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                  CUgraphNodeParams *nodeParams) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (phGraphNode == NULL || nodeParams == NULL || nodeParams->reserved0[0] ||
      nodeParams->reserved0[1] || nodeParams->reserved0[2] || nodeParams->reserved2)
    return CUDA_ERROR_INVALID_VALUE;
  if (!edges_default(dependencyData, numDependencies)) return CUDA_ERROR_NOT_SUPPORTED;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = NULL;
  if (!cgrt__emu_reg_is(hGraph, EMU_K_GRAPH)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if ((r = cgrt__emu_check_deps(hGraph, dependencies, numDependencies)) == CUDA_SUCCESS &&
             (r = build_node(hGraph, nodeParams, &n)) == CUDA_SUCCESS &&
             (r = cgrt__emu_graph_attach(hGraph, n, dependencies, numDependencies)) == CUDA_SUCCESS) {
    if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) nodeParams->conditional.phGraph_out = n->u.cond.bodies;
    *phGraphNode = n;
  }
  cgrt__emu_unlock();
  return r;
}
