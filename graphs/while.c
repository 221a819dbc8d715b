/* Draft loops as a conditional WHILE node (CUDA 12.4+ drivers):
 *
 *   prepare (num_reqs patched) -> while_begin (num_reqs patched; state = {0, num_reqs},
 *   condition = some request active) -> WHILE node { the host's step, captured into the
 *   body with cuStreamBeginCaptureToGraph -> advance_while (advances the metadata, counts
 *   the step, sets the condition) }.
 *
 * Nothing in the body changes from one launch to the next except buffer addresses:
 * num_reqs reaches advance_while through state[1], so a body node is patched only when a
 * buffer it points into moves. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "graphs/graphs_internal.h"

#define GX_WHILE_THREADS 256

static int unsupported(CUresult r) { return r == CUDA_ERROR_NOT_SUPPORTED; }

static cgrt_status fail_build(CUresult r, const char *call, const char *what) {
  if (unsupported(r))
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s returned CUDA_ERROR_NOT_SUPPORTED (%s)", call, what);
  return cgrt__fail_cu(CGRT_ERROR_CAPTURE_FAILED, r, call, what);
}

/* The body: the host's step, then advance_while, captured on the capture stream. */
static cgrt_status capture_body(cgrt_graphs *set, gx_exec *e, CUgraph body,
                                CUgraphConditionalHandle h) {
  const cgrt__driver *drv = set->drv;
  CUstream s = set->cap_stream;
  cgrt_batch_desc d;
  gx_fill_desc(set, e, set->current, &d);
  d.capturing = 1;
  d.while_body = 1;
  cgrt__runtime_capture_begin(set->rt);
  CUresult r = drv->cuStreamBeginCaptureToGraph(s, body, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) {
    cgrt__runtime_capture_end(set->rt);
    return fail_build(r, "cuStreamBeginCaptureToGraph", "capturing the body of a WHILE draft loop");
  }
  cgrt_status st = gx_call_enqueue(set, s, &d);
  if (st == CGRT_SUCCESS) {
    gx_meta_args a;
    gx_meta_advance_while(set, set->current, e->rows, (uint64_t)h, &a);
    st = CGRT__CU(drv, cuLaunchKernel,
                  (set->f_advance_while, 1, 1, 1, GX_WHILE_THREADS, 1, 1, 0, s, a.args, NULL),
                  CGRT_ERROR_CAPTURE_FAILED, "graph set: launching the WHILE metadata advance kernel");
  }
  CUgraph ended = NULL; /* the body itself: owned by its node */
  r = gx_capture_end(set, s, 1, &ended);
  cgrt__runtime_capture_end(set->rt);
  if (st == CGRT_SUCCESS && r != CUDA_SUCCESS)
    st = cgrt__fail_cu(CGRT_ERROR_CAPTURE_FAILED, r, "cuStreamEndCapture", "ending the capture of a WHILE body");
  if (st != CGRT_SUCCESS && st != CGRT_ERROR_NOT_SUPPORTED) {
    cgrt__error_prefix("capture of %s bucket %d rows failed", gx_mode_name(e), e->rows);
    st = CGRT_ERROR_CAPTURE_FAILED;
  }
  return st;
}

cgrt_status gx_while_build(cgrt_graphs *set, gx_exec *e, CUgraph *out, CUgraph *body_out) {
  const cgrt__driver *drv = set->drv;
  *out = NULL;
  *body_out = NULL;
  if (drv->cuGraphConditionalHandleCreate == NULL || drv->cuGraphAddNode == NULL ||
      drv->cuStreamBeginCaptureToGraph == NULL)
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED,
                      "the driver has no %s (conditional graph nodes need CUDA 12.4+)",
                      drv->cuGraphConditionalHandleCreate == NULL ? "cuGraphConditionalHandleCreate"
                      : drv->cuGraphAddNode == NULL               ? "cuGraphAddNode"
                                                                  : "cuStreamBeginCaptureToGraph");
  if (set->f_while_begin == NULL || set->f_advance_while == NULL || set->while_state == 0)
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "the set has no WHILE draft kernels or state");
  CUgraph g = NULL;
  CUresult r = drv->cuGraphCreate(&g, 0);
  if (r != CUDA_SUCCESS) return fail_build(r, "cuGraphCreate", "creating a WHILE draft graph");
  cgrt_status st = CGRT_SUCCESS;
  CUgraphConditionalHandle h = 0;
  r = drv->cuGraphConditionalHandleCreate(&h, g, set->rt->ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT);
  if (r != CUDA_SUCCESS) {
    st = fail_build(r, "cuGraphConditionalHandleCreate", "creating the condition of a WHILE draft loop");
    goto fail;
  }
  /* Head: the metadata kernels, captured with num_reqs 0 (all rows inert); steps patch it. */
  {
    gx_meta_args prep_args, begin_args;
    gx_meta_prepare(set, set->current, 0, e->rows, 1, &prep_args);
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof(kp));
    kp.func = set->f_prepare;
    kp.gridDimX = gx_meta_grid(e->rows);
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = GX_META_THREADS;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = prep_args.args;
    CUgraphNode prep = NULL, begin = NULL, cn = NULL;
    r = drv->cuGraphAddKernelNode(&prep, g, NULL, 0, &kp);
    if (r != CUDA_SUCCESS) {
      st = fail_build(r, "cuGraphAddKernelNode", "adding the metadata kernel of a WHILE draft loop");
      goto fail;
    }
    gx_meta_while_begin(set, set->current, 0, (uint64_t)h, &begin_args);
    kp.func = set->f_while_begin;
    kp.gridDimX = 1;
    kp.blockDimX = GX_WHILE_THREADS;
    kp.kernelParams = begin_args.args;
    r = drv->cuGraphAddKernelNode(&begin, g, &prep, 1, &kp);
    if (r != CUDA_SUCCESS) {
      st = fail_build(r, "cuGraphAddKernelNode", "adding the WHILE begin kernel");
      goto fail;
    }
    CUgraphNodeParams np;
    memset(&np, 0, sizeof(np));
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    np.conditional.size = 1;
    np.conditional.ctx = set->rt->ctx;
    r = drv->cuGraphAddNode(&cn, g, &begin, NULL, 1, &np);
    if (r != CUDA_SUCCESS || np.conditional.phGraph_out == NULL || np.conditional.phGraph_out[0] == NULL) {
      st = fail_build(r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN, "cuGraphAddNode",
                      "adding the conditional WHILE node of a draft loop");
      goto fail;
    }
    CUgraph body = np.conditional.phGraph_out[0];
    st = capture_body(set, e, body, h);
    if (st != CGRT_SUCCESS) goto fail;
    *out = g;
    *body_out = body;
    return CGRT_SUCCESS;
  }
fail:
  /* A body capture that could not be ended still records into g's body: g goes once it
   * has ended (gx_capture_abandon), never under it. */
  if (set->open_capture == GX_OPEN_TO_GRAPH)
    set->open_parent = g;
  else
    drv->cuGraphDestroy(g);
  return st;
}

cgrt_status gx_while_check_state(cgrt_graphs *set, const gx_exec *e) {
  uint32_t v[2] = {0, 0};
  CUresult r = set->drv->cuMemcpyDtoH(v, set->while_state, sizeof(v));
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuMemcpyDtoH", "checked replay: WHILE loop state");
  if (v[0] != 0)
    return cgrt__fail(CGRT_ERROR_COUNTERS_DIRTY,
                      "checked replay, after launch: the step counter of the WHILE draft loop (bucket %d rows) "
                      "is %u, not 0: the loop did not run to its end",
                      e->rows, v[0]);
  return CGRT_SUCCESS;
}
