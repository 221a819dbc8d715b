/* Emulated streams and stream capture. Streams execute in order on the calling thread;
 * a capturing stream records nodes into its capture's graph instead. */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

static struct CUstream_st *g_streams;
static emu_capture *g_captures;

/* ---- dependency sets ---- */
static int deps_reserve(struct CUstream_st *s, size_t n) {
  if (n <= s->capdeps) return 0;
  size_t ncap = s->capdeps ? s->capdeps : 4;
  while (ncap < n) ncap *= 2;
  struct CUgraphNode_st **nd = realloc(s->deps, ncap * sizeof(*nd));
  if (nd == NULL) return -1;
  s->deps = nd;
  s->capdeps = ncap;
  return 0;
}

static CUresult deps_add(struct CUstream_st *s, struct CUgraphNode_st *const *d, size_t n) {
  if (deps_reserve(s, s->ndeps + n) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < n; i++) {
    int dup = 0;
    for (size_t j = 0; j < s->ndeps && !dup; j++) dup = s->deps[j] == d[i];
    if (!dup) s->deps[s->ndeps++] = d[i];
  }
  return CUDA_SUCCESS;
}

static CUresult deps_set(struct CUstream_st *s, struct CUgraphNode_st *const *d, size_t n) {
  s->ndeps = 0;
  return deps_add(s, d, n);
}

/* ---- capture helpers ---- */
CUresult cgrt__emu_capture_fail(emu_capture *cap, CUresult r) {
  if (cap != NULL) cap->invalidated = 1;
  return r;
}

void cgrt__emu_capture_graph_freed(const struct CUgraph_st *g) {
  for (emu_capture *c = g_captures; c != NULL; c = c->next) {
    if (c->graph != g) continue;
    c->graph = NULL;
    c->invalidated = 1;
    cgrt__emu_counts.freed_under_capture++;
    for (struct CUstream_st *s = g_streams; s != NULL; s = s->next)
      if (s->cap == c) s->ndeps = 0; /* its nodes are gone */
  }
}

emu_capture *cgrt__emu_capture_by_id(uint64_t id) {
  for (emu_capture *c = g_captures; c != NULL; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static int blocking_capture(int invalidate) {
  int hit = 0;
  for (struct CUstream_st *s = g_streams; s != NULL; s = s->next) {
    if (s->cap == NULL || (s->flags & CU_STREAM_NON_BLOCKING)) continue;
    hit = 1;
    if (invalidate) s->cap->invalidated = 1;
  }
  return hit;
}

static int is_default(CUstream h) {
  return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

CUresult cgrt__emu_stream_get(CUstream h, struct CUstream_st **s, emu_capture **cap) {
  *s = NULL;
  *cap = NULL;
  if (h == NULL || h == CU_STREAM_LEGACY)
    return blocking_capture(1) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
  if (h == CU_STREAM_PER_THREAD) return CUDA_SUCCESS;
  if (!cgrt__emu_reg_is(h, EMU_K_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
  *s = h;
  if (h->cap != NULL) {
    if (h->cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    *cap = h->cap;
  }
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_capture_node(struct CUstream_st *s, struct CUgraphNode_st *n) {
  CUresult r = cgrt__emu_graph_attach(s->cap->graph, n, s->deps, s->ndeps);
  if (r == CUDA_SUCCESS) r = deps_set(s, &n, 1);
  return r == CUDA_SUCCESS ? r : cgrt__emu_capture_fail(s->cap, r);
}

CUresult cgrt__emu_unsafe_call(void) {
  uint64_t me = cgrt__emu_thread_id();
  int hit = 0;
  for (emu_capture *c = g_captures; c != NULL; c = c->next) {
    int mine = c->thread == me;
    if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
        (!mine && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
      c->invalidated = 1;
      hit = 1;
    }
  }
  return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult cgrt__emu_ctx_sync_call(void) {
  int hit = 0;
  for (emu_capture *c = g_captures; c != NULL; c = c->next) {
    c->invalidated = 1;
    hit = 1;
  }
  return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult cgrt__emu_sync_op(void) {
  CUresult r = cgrt__emu_unsafe_call();
  if (r != CUDA_SUCCESS) return r;
  return blocking_capture(1) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

/* Joins stream s to capture c with dependencies d (fork), or adds them (join). */
CUresult cgrt__emu_capture_join(struct CUstream_st *s, emu_capture *c,
                                struct CUgraphNode_st *const *d, size_t n) {
  if (s->cap == NULL) {
    CUresult r = deps_set(s, d, n);
    if (r != CUDA_SUCCESS) return cgrt__emu_capture_fail(c, r);
    s->cap = c;
    return CUDA_SUCCESS;
  }
  CUresult r = deps_add(s, d, n);
  return r == CUDA_SUCCESS ? r : cgrt__emu_capture_fail(c, r);
}

/* ---- streams ---- */
CUresult cgrt__emu_cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (phStream == NULL || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUstream_st *s = calloc(1, sizeof(*s));
  if (s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  s->flags = Flags;
  cgrt__emu_lock();
  if (cgrt__emu_reg_add(s, EMU_K_STREAM) != 0) {
    cgrt__emu_unlock();
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->next = g_streams;
  if (g_streams) g_streams->prev = s;
  g_streams = s;
  cgrt__emu_counts.streams++;
  cgrt__emu_unlock();
  *phStream = s;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuStreamDestroy(CUstream hStream) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hStream, EMU_K_STREAM)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (hStream->cap != NULL) {
    /* Destroying a stream that takes part in a capture would orphan the capture. */
    r = cgrt__emu_capture_fail(hStream->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  } else {
    struct CUstream_st *s = hStream;
    cgrt__emu_reg_del(s);
    if (s->prev) s->prev->next = s->next;
    else g_streams = s->next;
    if (s->next) s->next->prev = s->prev;
    cgrt__emu_counts.streams--;
    free(s->deps);
    free(s->edges);
    free(s);
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuStreamSynchronize(CUstream hStream) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (hStream == NULL || hStream == CU_STREAM_LEGACY) {
    if (blocking_capture(1)) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  } else if (hStream != CU_STREAM_PER_THREAD) {
    if (!cgrt__emu_reg_is(hStream, EMU_K_STREAM))
      r = CUDA_ERROR_INVALID_HANDLE;
    else if (hStream->cap != NULL)
      r = cgrt__emu_capture_fail(hStream->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }
  cgrt__emu_unlock();
  return r;
}

/* ---- capture ---- */
static int capture_mode_ok(CUstreamCaptureMode mode) {
  return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
         mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

/* Starts capturing hStream (lock held): into hGraph after its nodes `deps`, or into a new
 * graph when hGraph is NULL. */
static CUresult capture_start(CUstream hStream, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                              CUstreamCaptureMode mode) {
  if (is_default(hStream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!cgrt__emu_reg_is(hStream, EMU_K_STREAM) || (hGraph != NULL && !cgrt__emu_reg_is(hGraph, EMU_K_GRAPH)))
    return CUDA_ERROR_INVALID_HANDLE;
  if (hStream->cap != NULL) return CUDA_ERROR_ILLEGAL_STATE;
  if (hGraph != NULL) {
    CUresult r = cgrt__emu_check_deps(hGraph, deps, ndeps);
    if (r != CUDA_SUCCESS) return r;
  }
  emu_capture *c = calloc(1, sizeof(*c));
  struct CUgraph_st *g = hGraph != NULL ? hGraph : c != NULL ? cgrt__emu_graph_new(1, NULL) : NULL;
  if (c == NULL || g == NULL || deps_set(hStream, (struct CUgraphNode_st *const *)deps, ndeps) != CUDA_SUCCESS) {
    free(c);
    if (hGraph == NULL) cgrt__emu_graph_free(g);
    hStream->ndeps = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  c->id = cgrt__emu_next_id();
  c->graph = g;
  c->to_graph = hGraph != NULL;
  c->mode = mode;
  c->thread = cgrt__emu_thread_id();
  c->origin = hStream;
  c->next = g_captures;
  g_captures = c;
  hStream->cap = c;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!capture_mode_ok(mode)) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  r = capture_start(hStream, NULL, NULL, 0, mode);
  cgrt__emu_unlock();
  return r;
}

/* Capture into an existing graph (a conditional body, typically): the captured nodes
 * are appended to hGraph after `dependencies`; EndCapture returns hGraph. On a failed
 * capture the nodes already appended stay in hGraph (the caller owns it). */
CUresult cgrt__emu_cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               const CUgraphEdgeData *dependencyData,
                                               size_t numDependencies, CUstreamCaptureMode mode) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!capture_mode_ok(mode) || (numDependencies > 0 && dependencies == NULL)) return CUDA_ERROR_INVALID_VALUE;
  static const CUgraphEdgeData zero;
  for (size_t i = 0; dependencyData != NULL && i < numDependencies; i++)
    if (memcmp(&dependencyData[i], &zero, sizeof(zero)) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  cgrt__emu_lock();
  r = hGraph == NULL ? CUDA_ERROR_INVALID_HANDLE : capture_start(hStream, hGraph, dependencies, numDependencies, mode);
  cgrt__emu_unlock();
  return r;
}

/* Marks n and its ancestors (by index) in `seen`. */
static void mark_ancestors(const struct CUgraphNode_st *n, unsigned char *seen) {
  if (seen[n->index]) return;
  seen[n->index] = 1;
  for (size_t i = 0; i < n->ndeps; i++) mark_ancestors(n->deps[i], seen);
}

/* 1 when every stream forked into c has been joined back into its origin. */
static int all_joined(emu_capture *c, int *oom) {
  size_t n = c->graph->n;
  unsigned char *seen = calloc(n ? n : 1, 1);
  if (seen == NULL) {
    *oom = 1;
    return 0;
  }
  for (size_t i = 0; i < c->origin->ndeps; i++) mark_ancestors(c->origin->deps[i], seen);
  int ok = 1;
  for (struct CUstream_st *s = g_streams; s != NULL && ok; s = s->next) {
    if (s->cap != c || s == c->origin) continue;
    for (size_t i = 0; i < s->ndeps && ok; i++) ok = seen[s->deps[i]->index];
  }
  free(seen);
  return ok;
}

CUresult cgrt__emu_cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (phGraph == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (is_default(hStream)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  if (!cgrt__emu_reg_is(hStream, EMU_K_STREAM)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_INVALID_HANDLE;
  }
  emu_capture *c = hStream->cap;
  if (c == NULL) {
    cgrt__emu_unlock();
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  if (c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c->thread != cgrt__emu_thread_id()) {
    cgrt__emu_unlock();
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  if (c->origin != hStream) {
    r = cgrt__emu_capture_fail(c, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    cgrt__emu_unlock();
    return r;
  }
  int oom = 0;
  if (c->invalidated || c->graph == NULL)
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  else if (!all_joined(c, &oom))
    r = oom ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  for (struct CUstream_st *s = g_streams; s != NULL; s = s->next) {
    if (s->cap != c) continue;
    s->cap = NULL;
    s->ndeps = 0;
  }
  for (emu_capture **pp = &g_captures; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  }
  if (r == CUDA_SUCCESS) {
    *phGraph = c->graph;
  } else {
    if (!c->to_graph && c->graph != NULL) cgrt__emu_graph_free(c->graph);
    *phGraph = NULL;
  }
  free(c);
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (captureStatus == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (hStream == NULL || hStream == CU_STREAM_LEGACY) {
    if (blocking_capture(0))
      r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    else
      *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
  } else if (hStream == CU_STREAM_PER_THREAD) {
    *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
  } else if (!cgrt__emu_reg_is(hStream, EMU_K_STREAM)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (hStream->cap == NULL) {
    *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    *captureStatus = hStream->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  cgrt__emu_unlock();
  return r;
}

/* The capture's dependency set as the driver reports it: the emulation keeps no edge
 * data, so every edge is the default (full completion) and the edge array is zeros. */
CUresult cgrt__emu_cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out,
                                          const CUgraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (captureStatus_out == NULL || (edgeData_out != NULL && dependencies_out == NULL))
    return CUDA_ERROR_INVALID_VALUE;
  r = cgrt__emu_cuStreamIsCapturing(hStream, captureStatus_out);
  if (r != CUDA_SUCCESS || *captureStatus_out != CU_STREAM_CAPTURE_STATUS_ACTIVE) return r;
  cgrt__emu_lock();
  struct CUstream_st *s = hStream;
  if (!cgrt__emu_reg_is(s, EMU_K_STREAM) || s->cap == NULL) {
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* ended by another thread meanwhile */
  } else {
    if (edgeData_out != NULL && s->ndeps > s->capedges) {
      CUgraphEdgeData *e = realloc(s->edges, s->ndeps * sizeof(*e));
      if (e == NULL) r = CUDA_ERROR_OUT_OF_MEMORY;
      else {
        s->edges = e;
        s->capedges = s->ndeps;
      }
    }
    if (r == CUDA_SUCCESS) {
      if (s->capedges) memset(s->edges, 0, s->capedges * sizeof(*s->edges));
      if (id_out != NULL) *id_out = s->cap->id;
      if (graph_out != NULL) *graph_out = s->cap->graph;
      if (dependencies_out != NULL) *dependencies_out = (const CUgraphNode *)s->deps;
      if (edgeData_out != NULL) *edgeData_out = s->ndeps ? s->edges : NULL;
      if (numDependencies_out != NULL) *numDependencies_out = s->ndeps;
    }
  }
  cgrt__emu_unlock();
  return r;
}

/* Replaces (CU_STREAM_SET_CAPTURE_DEPENDENCIES) or extends (CU_STREAM_ADD_CAPTURE_DEPENDENCIES,
 * 0) the capture's dependency set with nodes of its graph. Non-default edge data is not
 * modeled: CUDA_ERROR_NOT_SUPPORTED. */
CUresult cgrt__emu_cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                     const CUgraphEdgeData *dependencyData,
                                                     size_t numDependencies, unsigned int flags) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; dependencyData != NULL && i < numDependencies; i++) {
    static const CUgraphEdgeData zero;
    if (memcmp(&dependencyData[i], &zero, sizeof zero) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  }
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hStream, EMU_K_STREAM)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (hStream->cap == NULL) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else if (hStream->cap->invalidated) {
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else if ((r = cgrt__emu_check_deps(hStream->cap->graph, dependencies, numDependencies)) == CUDA_SUCCESS) {
    struct CUgraphNode_st *const *d = (struct CUgraphNode_st *const *)dependencies;
    r = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES ? deps_set(hStream, d, numDependencies)
                                                    : deps_add(hStream, d, numDependencies);
  }
  cgrt__emu_unlock();
  return r;
}
