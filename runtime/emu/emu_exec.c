/* Emulated executable graphs: instantiation (a deep copy), launch (nodes run in creation
 * order, a topological order, on the calling thread), per-node parameter updates,
 * whole-graph update and conditional nodes. */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

struct CUgraphExec_st {
  struct CUgraph_st *g; /* private deep copy of the instantiated graph */
  emu_cond *conds;      /* every conditional handle of g and its bodies, with values */
  size_t nconds;
  unsigned long long flags; /* CUDA_GRAPH_INSTANTIATE_FLAG_* it was instantiated with */
  int refs; /* launches in progress */
  int dead; /* destroyed while launching: freed by the last launch */
  /* Instantiated for device launch: the device runs the copy of the last upload (an
   * explicit cuGraphUpload or a launch from the host), so a host update after it leaves
   * that copy stale until the next one. The driver then runs the old copy; the emulation
   * refuses the device launch instead (cgrt__emu_graph_launch_device). */
  int device_stale;
};

static _Thread_local struct CUgraphExec_st *t_running;

/* ---- conditional handles ---- */
static CUresult collect_conds(const struct CUgraph_st *g, emu_cond **out, size_t *n) {
  if (g->nconds > 0) {
    emu_cond *nc = realloc(*out, (*n + g->nconds) * sizeof(*nc));
    if (nc == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < g->nconds; i++) {
      nc[*n + i] = g->conds[i];
      nc[*n + i].value = g->conds[i].dflt;
    }
    *out = nc;
    *n += g->nconds;
  }
  for (size_t i = 0; i < g->n; i++) {
    const struct CUgraphNode_st *nd = g->nodes[i];
    if (nd->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) continue;
    for (unsigned b = 0; b < nd->u.cond.size; b++) {
      CUresult r = collect_conds(nd->u.cond.bodies[b], out, n);
      if (r != CUDA_SUCCESS) return r;
    }
  }
  return CUDA_SUCCESS;
}

static struct CUgraphNode_st *find_copy(const struct CUgraph_st *g, uint64_t id);

static emu_cond *find_cond(struct CUgraphExec_st *e, CUgraphConditionalHandle h) {
  for (size_t i = 0; i < e->nconds; i++)
    if (e->conds[i].handle == h) return &e->conds[i];
  return NULL;
}

void cgrt__emu_set_conditional(CUgraphConditionalHandle handle, unsigned value) {
  struct CUgraphExec_st *e = t_running;
  if (e == NULL) return;
  cgrt__emu_lock();
  emu_cond *c = find_cond(e, handle);
  if (c != NULL) c->value = value;
  cgrt__emu_unlock();
}

int cgrt__emu_graph_kernel_node_set_param(uint64_t node, size_t offset, const void *value,
                                          size_t size) {
  struct CUgraphExec_st *e = t_running;
  if (e == NULL || value == NULL) return (int)CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = find_copy(e->g, node);
  CUresult r = CUDA_SUCCESS;
  if (n == NULL || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !n->u.k.dev_updatable ||
      offset > n->u.k.bufsize || size > n->u.k.bufsize - offset)
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    memcpy(n->u.k.buf + offset, value, size);
    n->u.k.checked_gen = 0; /* checked again before the node runs */
  }
  cgrt__emu_unlock();
  return (int)r;
}

/* ---- instantiate / destroy / upload ---- */
static void exec_free(struct CUgraphExec_st *e) {
  cgrt__emu_graph_free(e->g);
  free(e->conds);
  free(e);
}

static int functions_live(const struct CUgraph_st *g) {
  for (size_t i = 0; i < g->n; i++) {
    const struct CUgraphNode_st *n = g->nodes[i];
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && !cgrt__emu_reg_is(n->u.k.func, EMU_K_FUNC)) return 0;
    if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
      for (unsigned b = 0; b < n->u.cond.size; b++)
        if (!functions_live(n->u.cond.bodies[b])) return 0;
  }
  return 1;
}

#define EMU_INSTANTIATE_FLAGS                                                          \
  (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

CUresult cgrt__emu_cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                               unsigned long long flags) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (phGraphExec == NULL || (flags & ~(unsigned long long)EMU_INSTANTIATE_FLAGS) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphExec_st *e = NULL;
  if (!cgrt__emu_reg_is(hGraph, EMU_K_GRAPH)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (hGraph->parent != NULL || !functions_live(hGraph)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if ((e = calloc(1, sizeof(*e))) == NULL || (e->g = cgrt__emu_graph_clone(hGraph)) == NULL ||
             collect_conds(hGraph, &e->conds, &e->nconds) != CUDA_SUCCESS ||
             cgrt__emu_reg_add(e, EMU_K_EXEC) != 0) {
    if (e != NULL) exec_free(e);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    cgrt__emu_counts.execs++;
    e->flags = flags;
    e->device_stale = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0; /* not uploaded yet */
    *phGraphExec = e;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphExecDestroy(CUgraphExec hGraphExec) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hGraphExec, EMU_K_EXEC)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    cgrt__emu_reg_del(hGraphExec);
    cgrt__emu_counts.execs--;
    if (hGraphExec->refs > 0)
      hGraphExec->dead = 1;
    else
      exec_free(hGraphExec);
  }
  cgrt__emu_unlock();
  return r;
}

/* Resolves exec and stream for upload / launch. Lock held. */
static CUresult exec_stream(CUgraphExec e, CUstream h) {
  if (!cgrt__emu_reg_is(e, EMU_K_EXEC)) return CUDA_ERROR_INVALID_HANDLE;
  struct CUstream_st *s;
  emu_capture *cap;
  CUresult r = cgrt__emu_stream_get(h, &s, &cap);
  if (r != CUDA_SUCCESS) return r;
  if (cap != NULL) return cgrt__emu_capture_fail(cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  r = exec_stream(hGraphExec, hStream);
  if (r == CUDA_SUCCESS) hGraphExec->device_stale = 0;
  cgrt__emu_unlock();
  return r;
}

/* ---- launch ---- */
static CUresult run_graph(struct CUgraphExec_st *e, const struct CUgraph_st *g);

static CUresult run_kernel(struct CUgraphNode_st *n) {
  unsigned char stackbuf[1024];
  cgrt__emu_lock();
  emu_kernel *k = &n->u.k;
  if (!cgrt__emu_reg_is(k->func, EMU_K_FUNC)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_INVALID_HANDLE; /* its module was unloaded */
  }
  size_t need = k->bufsize + k->nparams * sizeof(size_t) + sizeof(size_t);
  unsigned char *mem = need <= sizeof(stackbuf) ? stackbuf : malloc(need);
  if (mem == NULL) {
    cgrt__emu_unlock();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  size_t *offs = (size_t *)(void *)mem;
  unsigned char *buf = mem + (k->nparams + 1) * sizeof(size_t);
  memcpy(offs, k->offs, k->nparams * sizeof(size_t));
  memcpy(buf, k->buf, k->bufsize);
  const cgrt__ref_kernel *ref = k->ref;
  unsigned grid[3], block[3], shmem = k->shmem;
  memcpy(grid, k->grid, sizeof(grid));
  memcpy(block, k->block, sizeof(block));
  CUresult r = CUDA_SUCCESS;
  if (k->checked_gen != cgrt__emu_free_gen) { /* written, or memory freed, since checked */
    r = cgrt__emu_params_check(ref, buf, offs);
    if (r == CUDA_SUCCESS) k->checked_gen = cgrt__emu_free_gen;
  }
  cgrt__emu_unlock();
  if (r == CUDA_SUCCESS) r = cgrt__emu_kernel_run(ref, grid, block, shmem, buf, offs);
  if (mem != stackbuf) free(mem);
  return r;
}

static CUresult run_memcpy(const struct CUgraphNode_st *n) {
  cgrt__emu_lock();
  CUDA_MEMCPY3D c = n->u.cp;
  int ok = cgrt__emu_memcpy_valid(&c);
  cgrt__emu_unlock();
  uintptr_t src, dst;
  size_t bytes;
  if (!ok || !cgrt__emu_memcpy_1d(&c, &src, &dst, &bytes)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  memmove((void *)dst, (const void *)src, bytes);
  return CUDA_SUCCESS;
}

static CUresult run_memset(const struct CUgraphNode_st *n) {
  cgrt__emu_lock();
  CUDA_MEMSET_NODE_PARAMS m = n->u.ms;
  int ok = cgrt__emu_memset_valid(&m);
  cgrt__emu_unlock();
  if (!ok) return CUDA_ERROR_ILLEGAL_ADDRESS;
  cgrt__emu_memset_run(&m);
  return CUDA_SUCCESS;
}

static unsigned cond_value(struct CUgraphExec_st *e, CUgraphConditionalHandle h) {
  cgrt__emu_lock();
  emu_cond *c = find_cond(e, h);
  unsigned v = c ? c->value : 0;
  cgrt__emu_unlock();
  return v;
}

static CUresult run_conditional(struct CUgraphExec_st *e, const struct CUgraphNode_st *n) {
  const struct CUgraphNode_st *c = n;
  switch (c->u.cond.type) {
    case CU_GRAPH_COND_TYPE_WHILE:
      for (unsigned it = 0; cond_value(e, c->u.cond.handle) != 0; it++) {
        if (it >= EMU_WHILE_LIMIT) return CUDA_ERROR_LAUNCH_TIMEOUT;
        CUresult r = run_graph(e, c->u.cond.bodies[0]);
        if (r != CUDA_SUCCESS) return r;
      }
      return CUDA_SUCCESS;
    case CU_GRAPH_COND_TYPE_IF: {
      unsigned v = cond_value(e, c->u.cond.handle);
      if (v != 0) return run_graph(e, c->u.cond.bodies[0]);
      return c->u.cond.size == 2 ? run_graph(e, c->u.cond.bodies[1]) : CUDA_SUCCESS;
    }
    case CU_GRAPH_COND_TYPE_SWITCH: {
      unsigned v = cond_value(e, c->u.cond.handle);
      return v < c->u.cond.size ? run_graph(e, c->u.cond.bodies[v]) : CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

static CUresult run_graph(struct CUgraphExec_st *e, const struct CUgraph_st *g) {
  for (size_t i = 0; i < g->n; i++) {
    struct CUgraphNode_st *n = g->nodes[i];
    CUresult r = CUDA_SUCCESS;
    switch (n->type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: r = run_kernel(n); break;
      case CU_GRAPH_NODE_TYPE_MEMCPY: r = run_memcpy(n); break;
      case CU_GRAPH_NODE_TYPE_MEMSET: r = run_memset(n); break;
      case CU_GRAPH_NODE_TYPE_HOST: n->u.host.fn(n->u.host.user); break;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL: r = run_conditional(e, n); break;
      default: break; /* empty */
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  r = exec_stream(hGraphExec, hStream);
  if (r != CUDA_SUCCESS) {
    cgrt__emu_unlock();
    return r;
  }
  struct CUgraphExec_st *e = hGraphExec;
  e->refs++;
  e->device_stale = 0; /* a host launch uploads the executable too */
  for (size_t i = 0; i < e->nconds; i++)
    if (e->conds[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT) e->conds[i].value = e->conds[i].dflt;
  cgrt__emu_unlock();
  struct CUgraphExec_st *prev = t_running;
  t_running = e;
  r = run_graph(e, e->g);
  t_running = prev;
  cgrt__emu_lock();
  if (--e->refs == 0 && e->dead) exec_free(e);
  cgrt__emu_unlock();
  return r;
}

int cgrt__emu_graph_launch_device(uint64_t exec) {
  struct CUgraphExec_st *e = (struct CUgraphExec_st *)(uintptr_t)exec;
  cgrt__emu_lock();
  if (t_running == NULL || !cgrt__emu_reg_is(e, EMU_K_EXEC) ||
      !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) || e->device_stale) {
    cgrt__emu_unlock();
    return (int)CUDA_ERROR_INVALID_VALUE; /* the device runtime's cudaErrorInvalidValue */
  }
  e->refs++;
  for (size_t i = 0; i < e->nconds; i++)
    if (e->conds[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT) e->conds[i].value = e->conds[i].dflt;
  cgrt__emu_unlock();
  struct CUgraphExec_st *prev = t_running;
  t_running = e;
  CUresult r = run_graph(e, e->g);
  t_running = prev;
  cgrt__emu_lock();
  if (--e->refs == 0 && e->dead) exec_free(e);
  cgrt__emu_unlock();
  return (int)r;
}

/* ---- per-node updates ---- */
static struct CUgraphNode_st *find_copy(const struct CUgraph_st *g, uint64_t id) {
  for (size_t i = 0; i < g->n; i++) {
    struct CUgraphNode_st *n = g->nodes[i];
    if (n->orig_id == id || n->upd_id == id) return n;
    if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
      for (unsigned b = 0; b < n->u.cond.size; b++) {
        struct CUgraphNode_st *m = find_copy(n->u.cond.bodies[b], id);
        if (m != NULL) return m;
      }
  }
  return NULL;
}

/* The exec's copy of hNode, of that type; sets *r on failure. Lock held. */
static struct CUgraphNode_st *exec_node(CUgraphExec e, CUgraphNode hNode, CUgraphNodeType type,
                                        CUresult *r) {
  if (!cgrt__emu_reg_is(e, EMU_K_EXEC)) {
    *r = CUDA_ERROR_INVALID_HANDLE;
    return NULL;
  }
  struct CUgraphNode_st *n = NULL;
  if (cgrt__emu_reg_is(hNode, EMU_K_NODE) && hNode->type == type) n = find_copy(e->g, hNode->id);
  if (n == NULL) *r = CUDA_ERROR_INVALID_VALUE;
  return n;
}

CUresult cgrt__emu_cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_KERNEL_NODE_PARAMS *p) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_KERNEL, &r);
  if (n != NULL) {
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    emu_kernel k;
    /* The function may change (same context); the node keeps its attributes. */
    if ((r = cgrt__emu_kernel_check(p->func, grid, block, p->sharedMemBytes)) == CUDA_SUCCESS &&
        (r = cgrt__emu_kernel_init(&k, p->func, grid, block, p->sharedMemBytes, p->kernelParams,
                                   p->extra, n->u.k.attrs, n->u.k.nattrs)) == CUDA_SUCCESS) {
      k.dev_updatable = n->u.k.dev_updatable;
      cgrt__emu_kernel_free(&n->u.k);
      n->u.k = k;
      hGraphExec->device_stale = 1;
    }
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_MEMCPY3D *copyParams, CUcontext ctx) {
  (void)ctx;
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (copyParams == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMCPY, &r);
  if (n != NULL) {
    if (copyParams->srcMemoryType != n->u.cp.srcMemoryType ||
        copyParams->dstMemoryType != n->u.cp.dstMemoryType || !cgrt__emu_memcpy_valid(copyParams))
      r = CUDA_ERROR_INVALID_VALUE;
    else {
      n->u.cp = *copyParams;
      hGraphExec->device_stale = 1;
    }
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                                  CUcontext ctx) {
  (void)ctx;
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (memsetParams == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUgraphNode_st *n = exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMSET, &r);
  if (n != NULL) {
    if (memsetParams->height != 1 || !cgrt__emu_memset_valid(memsetParams))
      r = CUDA_ERROR_INVALID_VALUE;
    else {
      n->u.ms = *memsetParams;
      hGraphExec->device_stale = 1;
    }
  }
  cgrt__emu_unlock();
  return r;
}

/* ---- whole-graph update ---- */
typedef struct pair {
  struct CUgraphNode_st *dst; /* the exec's copy */
  const struct CUgraphNode_st *src;
} pair;

typedef struct pairs {
  pair *v;
  size_t n, cap;
  int oom;
} pairs;

static void add_pair(pairs *ps, struct CUgraphNode_st *d, const struct CUgraphNode_st *s) {
  if (ps->n == ps->cap) {
    size_t ncap = ps->cap ? ps->cap * 2 : 64;
    pair *nv = realloc(ps->v, ncap * sizeof(*nv));
    if (nv == NULL) {
      ps->oom = 1;
      return;
    }
    ps->v = nv;
    ps->cap = ncap;
  }
  ps->v[ps->n++] = (pair){d, s};
}

static int has_dep_index(const struct CUgraphNode_st *n, size_t index) {
  for (size_t i = 0; i < n->ndeps; i++)
    if (n->deps[i]->index == index) return 1;
  return 0;
}

/* Compares the exec's copy c with the new graph s; fills info on the first difference. */
static CUgraphExecUpdateResult compare(const struct CUgraph_st *c, const struct CUgraph_st *s,
                                       pairs *ps, CUgraphExecUpdateResultInfo *info) {
  if (c->n != s->n) {
    info->errorNode = s->n > c->n ? s->nodes[c->n] : NULL;
    return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  }
  for (size_t i = 0; i < s->n; i++) {
    struct CUgraphNode_st *d = c->nodes[i];
    const struct CUgraphNode_st *n = s->nodes[i];
    info->errorNode = (CUgraphNode)n;
    if (d->type != n->type) return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    for (size_t j = 0; j < n->ndeps; j++) {
      if (!has_dep_index(d, n->deps[j]->index)) {
        info->errorFromNode = n->deps[j];
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
      }
    }
    if (d->ndeps != n->ndeps) return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    switch (n->type) {
      case CU_GRAPH_NODE_TYPE_KERNEL:
        if (d->u.k.func != n->u.k.func) return CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED;
        break;
      case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (d->u.cp.srcMemoryType != n->u.cp.srcMemoryType ||
            d->u.cp.dstMemoryType != n->u.cp.dstMemoryType)
          return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        break;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        if (d->u.cond.type != n->u.cond.type || d->u.cond.size != n->u.cond.size)
          return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        for (unsigned b = 0; b < n->u.cond.size; b++) {
          CUgraphExecUpdateResult res = compare(d->u.cond.bodies[b], n->u.cond.bodies[b], ps, info);
          if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS) return res;
        }
        break;
      default:
        break;
    }
    add_pair(ps, d, n);
  }
  info->errorNode = NULL;
  return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

static int has_dev_updatable(const struct CUgraph_st *g) {
  for (size_t i = 0; i < g->n; i++) {
    const struct CUgraphNode_st *n = g->nodes[i];
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && n->u.k.dev_updatable) return 1;
    if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
      for (unsigned b = 0; b < n->u.cond.size; b++)
        if (has_dev_updatable(n->u.cond.bodies[b])) return 1;
  }
  return 0;
}

CUresult cgrt__emu_cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                     CUgraphExecUpdateResultInfo *resultInfo) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (resultInfo == NULL) return CUDA_ERROR_INVALID_VALUE;
  memset(resultInfo, 0, sizeof(*resultInfo));
  resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hGraphExec, EMU_K_EXEC) || !cgrt__emu_reg_is(hGraph, EMU_K_GRAPH)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_INVALID_HANDLE;
  }
  struct CUgraphExec_st *e = hGraphExec;
  pairs ps = {0};
  emu_kernel *ks = NULL;
  emu_cond *conds = NULL;
  size_t nconds = 0, nks = 0;
  if (has_dev_updatable(e->g) || has_dev_updatable(hGraph)) {
    /* As the driver documents: no cuGraphExecUpdate with device-updatable kernel nodes. */
    r = CUDA_ERROR_INVALID_VALUE;
    goto out;
  }
  CUgraphExecUpdateResult res = compare(e->g, hGraph, &ps, resultInfo);
  if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
    resultInfo->result = res;
    r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    goto out;
  }
  if (ps.oom || !functions_live(hGraph)) {
    r = ps.oom ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    goto out;
  }
  /* Phase 1: everything that can fail; phase 2: swap (the exec is unchanged on failure). */
  ks = calloc(ps.n ? ps.n : 1, sizeof(*ks));
  if (ks == NULL || collect_conds(hGraph, &conds, &nconds) != CUDA_SUCCESS) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    goto out;
  }
  for (; nks < ps.n; nks++) {
    if (ps.v[nks].src->type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    if (cgrt__emu_kernel_copy(&ks[nks], &ps.v[nks].src->u.k) != CUDA_SUCCESS) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
      goto out;
    }
  }
  for (size_t i = 0; i < ps.n; i++) {
    struct CUgraphNode_st *d = ps.v[i].dst;
    const struct CUgraphNode_st *s = ps.v[i].src;
    d->upd_id = s->id;
    switch (s->type) {
      case CU_GRAPH_NODE_TYPE_KERNEL:
        cgrt__emu_kernel_free(&d->u.k);
        d->u.k = ks[i];
        memset(&ks[i], 0, sizeof(ks[i]));
        break;
      case CU_GRAPH_NODE_TYPE_MEMCPY: d->u.cp = s->u.cp; break;
      case CU_GRAPH_NODE_TYPE_MEMSET: d->u.ms = s->u.ms; break;
      case CU_GRAPH_NODE_TYPE_HOST: d->u.host = s->u.host; break;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL: d->u.cond.handle = s->u.cond.handle; break;
      default: break;
    }
  }
  free(e->conds);
  e->conds = conds;
  e->nconds = nconds;
  conds = NULL;
  e->device_stale = 1;
  resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
out:
  if (ks != NULL)
    for (size_t i = 0; i < nks && i < ps.n; i++) cgrt__emu_kernel_free(&ks[i]);
  free(ks);
  free(conds);
  free(ps.v);
  cgrt__emu_unlock();
  return r;
}
