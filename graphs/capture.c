/* Warm-up, stream capture, instantiate and upload of one bucket. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"

/* Launches cgrt_graph_meta_prepare for a batch (num_reqs real requests of padded_rows). */
static cgrt_status launch_prepare(cgrt_graphs *set, CUstream s, int num_reqs, int padded_rows,
                                  int block_len, const CUdeviceptr *addr) {
  gx_meta_args a;
  gx_meta_prepare(set, addr, num_reqs, padded_rows, block_len, &a);
  return CGRT__CU(set->drv, cuLaunchKernel,
                  (set->f_prepare, gx_meta_grid(padded_rows), 1, 1, GX_META_THREADS, 1, 1, 0, s, a.args, NULL),
                  CGRT_ERROR_DRIVER, "graph set: launching the metadata kernel");
}

/* Launches cgrt_graph_meta_advance (draft loops). */
static cgrt_status launch_advance(cgrt_graphs *set, CUstream s, int num_reqs, int padded_rows,
                                  const CUdeviceptr *addr) {
  gx_meta_args a;
  gx_meta_advance(set, addr, num_reqs, padded_rows, &a);
  return CGRT__CU(set->drv, cuLaunchKernel,
                  (set->f_advance, gx_meta_grid(padded_rows), 1, 1, GX_META_THREADS, 1, 1, 0, s, a.args, NULL),
                  CGRT_ERROR_DRIVER, "graph set: launching the metadata advance kernel");
}

/* One step (or a draft loop) launched on s: metadata kernels and the host's callback. */
static cgrt_status enqueue_body(cgrt_graphs *set, CUstream s, const gx_exec *e,
                                const cgrt_batch_desc *d0, int meta_reqs,
                                const CUdeviceptr *addr) {
  cgrt_status st;
  if (set->o.meta.enabled) {
    st = launch_prepare(set, s, meta_reqs, d0->padded_rows, d0->block_len, addr);
    if (st != CGRT_SUCCESS) return st;
  }
  st = gx_call_enqueue(set, s, d0);
  if (st != CGRT_SUCCESS || e == NULL || !e->draft) return st;
  cgrt_batch_desc d = *d0;
  for (int i = 1; i < set->o.draft_steps; i++) {
    st = launch_advance(set, s, meta_reqs, d.padded_rows, addr);
    if (st != CGRT_SUCCESS) return st;
    d.draft_step = i;
    st = gx_call_enqueue(set, s, &d);
    if (st != CGRT_SUCCESS) return st;
  }
  return CGRT_SUCCESS;
}

cgrt_status gx_run_eager(cgrt_graphs *set, CUstream stream, const cgrt_batch_desc *d, int meta_reqs,
                         const CUdeviceptr *addr) {
  return enqueue_body(set, stream, NULL, d, meta_reqs, addr);
}

/* Before work on the capture stream: a capture left open must be ended first. */
static cgrt_status stream_usable(cgrt_graphs *set, const gx_exec *e) {
  if (gx_capture_abandon(set)) return CGRT_SUCCESS;
  return cgrt__fail(CGRT_ERROR_CAPTURE_FAILED,
                    "capture of %s bucket %d rows: the capture stream is still capturing (an earlier "
                    "cuStreamEndCapture failed and ending it again fails too)",
                    gx_mode_name(e), e->rows);
}

cgrt_status gx_capture_graph(cgrt_graphs *set, gx_exec *e, CUgraph *out, CUgraph *body) {
  *out = NULL;
  *body = NULL;
  cgrt_status usable = stream_usable(set, e);
  if (usable != CGRT_SUCCESS) return usable;
  if (e->is_while) return gx_while_build(set, e, out, body);
  cgrt_batch_desc d;
  gx_fill_desc(set, e, set->current, &d);
  d.capturing = 1;
  CUstream s = set->cap_stream;
  cgrt__runtime_capture_begin(set->rt);
  CUresult r = set->drv->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) {
    cgrt__runtime_capture_end(set->rt);
    return cgrt__fail_cu(CGRT_ERROR_CAPTURE_FAILED, r, "cuStreamBeginCapture", "capturing a bucket");
  }
  /* Device patching: the patch node first, so that every other node depends on it. */
  cgrt_status st = set->f_patch != NULL ? gx_dpatch_launch(set, s) : CGRT_SUCCESS;
  /* Metadata nodes are captured with num_reqs 0 (all rows inert); steps patch it. */
  if (st == CGRT_SUCCESS) st = enqueue_body(set, s, e, &d, 0, set->current);
  /* Device launch: the step-done node last, after everything the step enqueued. */
  if (st == CGRT_SUCCESS && set->dl.enabled) st = gx_dl_step_done(set, s);
  CUgraph g = NULL;
  r = gx_capture_end(set, s, 0, &g); /* always end: the stream must stay usable */
  cgrt__runtime_capture_end(set->rt);
  if (st != CGRT_SUCCESS || r != CUDA_SUCCESS) {
    if (g != NULL) set->drv->cuGraphDestroy(g);
    if (st == CGRT_SUCCESS) cgrt__fail_cu(CGRT_ERROR_CAPTURE_FAILED, r, "cuStreamEndCapture", "ending the capture");
    /* A capture-time driver error may have left a sticky stream state on some drivers;
     * the emulation and the real driver both leave the stream usable after EndCapture. */
    cgrt__error_prefix("capture of %s bucket %d rows failed", gx_mode_name(e), e->rows);
    return CGRT_ERROR_CAPTURE_FAILED;
  }
  *out = g;
  return CGRT_SUCCESS;
}

void gx_exec_release(cgrt_graphs *set, gx_exec *e) {
  gx_dpatch_free(set, e);
  gx_index_free(e);
  if (e->exec != NULL) CGRT__CU_WARN(set->drv, cuGraphExecDestroy, (e->exec), "releasing a bucket");
  if (e->graph != NULL) CGRT__CU_WARN(set->drv, cuGraphDestroy, (e->graph), "releasing a bucket");
  e->exec = NULL;
  e->graph = NULL;
  e->body = NULL;
  e->body_patch_refused = 0;
  e->captured = 0;
  e->nodes = 0;
  e->dlaunch = 0;
}

cgrt_status gx_capture_front(cgrt_graphs *set, gx_exec *e, int warmup) {
  const cgrt__driver *drv = set->drv;
  cgrt_status st;
  gx_exec_release(set, e);
  if ((st = stream_usable(set, e)) != CGRT_SUCCESS) return st;
  if (warmup > 0) {
    cgrt_batch_desc d;
    gx_fill_desc(set, e, set->current, &d);
    d.warmup = 1;
    for (int w = 0; w < warmup; w++) {
      st = enqueue_body(set, set->cap_stream, e, &d, 0, set->current);
      if (st != CGRT_SUCCESS) {
        cgrt__error_prefix("warm-up of %s bucket %d rows", gx_mode_name(e), e->rows);
        return CGRT_ERROR_CAPTURE_FAILED;
      }
    }
    st = CGRT__CU(drv, cuStreamSynchronize, (set->cap_stream), CGRT_ERROR_CAPTURE_FAILED,
                  "warm-up before capture");
    if (st != CGRT_SUCCESS) return st;
  }
  double t0 = gx_now();
  CUgraph g = NULL, body = NULL;
  st = gx_capture_graph(set, e, &g, &body);
  if (st != CGRT_SUCCESS) return st;
  e->graph = g;
  e->body = body;
  e->capture_s = gx_now() - t0;
  return CGRT_SUCCESS;
}

cgrt_status gx_capture_back(cgrt_graphs *set, gx_exec *e, CUstream upload) {
  const cgrt__driver *drv = set->drv;
  cgrt_status st;
  /* Graph memory the driver attributes to this bucket: what its memory nodes hold once
   * instantiated and uploaded (the device-wide count's change; 0 when unknown). Only
   * instantiation and upload allocate graph memory, and they run one bucket at a time. */
  cuuint64_t used0 = 0, used1 = 0;
  int have_used = drv->cuDeviceGetGraphMemAttribute(set->rt->dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used0) ==
                  CUDA_SUCCESS;
  double t1 = gx_now();
  /* The index reads the captured graph; device patching marks its nodes before
   * instantiation (the attribute must be set on the graph's nodes). */
  st = gx_index_build(set, e);
  if (st == CGRT_SUCCESS) st = gx_dpatch_mark(set, e);
  if (st != CGRT_SUCCESS) {
    gx_exec_release(set, e);
    cgrt__error_prefix("indexing %s bucket %d rows", gx_mode_name(e), e->rows);
    return st == CGRT_ERROR_OUT_OF_MEMORY ? st : CGRT_ERROR_CAPTURE_FAILED;
  }
  /* Instantiated, uploaded and complete before the first replay; a failure names its call. */
  CUgraphExec x = NULL;
  e->dlaunch = 0;
  if (set->dl.enabled && !e->is_while) {
    /* Device launch: a graph the driver refuses for it (memory nodes, say) keeps the host
     * launch. */
    CUresult r = drv->cuGraphInstantiateWithFlags(&x, e->graph, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
    if (r == CUDA_SUCCESS) {
      e->dlaunch = 1;
    } else {
      x = NULL;
      if (!set->dl.refused_logged) {
        cgrt__log(CGRT_LOG_INFO, "cgrt graphs: %s bucket %d rows cannot be instantiated for device launch (%s); "
                  "its steps are launched from the host", gx_mode_name(e), e->rows, cgrt__curesult_name(r));
        set->dl.refused_logged = 1;
      }
    }
  }
  st = x != NULL ? CGRT_SUCCESS
                 : CGRT__CU(drv, cuGraphInstantiateWithFlags, (&x, e->graph, 0), CGRT_ERROR_CAPTURE_FAILED,
                            "instantiating a bucket");
  if (st != CGRT_SUCCESS) {
    gx_exec_release(set, e); /* destroys the graph */
    cgrt__error_prefix("%s bucket %d rows", gx_mode_name(e), e->rows);
    return CGRT_ERROR_CAPTURE_FAILED;
  }
  e->exec = x; /* released with the bucket from here on */
  /* The patch node's parameters (its table and mailbox) are set in the executable before
   * the upload: a device-launched executable runs the uploaded copy, which a later host
   * update would leave stale until the next upload. */
  st = gx_dpatch_finish(set, e);
  if (st != CGRT_SUCCESS) {
    gx_exec_release(set, e);
    cgrt__error_prefix("device patch table of %s bucket %d rows", gx_mode_name(e), e->rows);
    return st == CGRT_ERROR_OUT_OF_MEMORY ? st : CGRT_ERROR_CAPTURE_FAILED;
  }
  st = CGRT__CU(drv, cuGraphUpload, (x, upload), CGRT_ERROR_CAPTURE_FAILED, "uploading a bucket");
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuStreamSynchronize, (upload), CGRT_ERROR_CAPTURE_FAILED, "waiting for the upload of a bucket");
  if (st != CGRT_SUCCESS) {
    gx_exec_release(set, e); /* destroys the executable and the graph */
    cgrt__error_prefix("%s bucket %d rows", gx_mode_name(e), e->rows);
    return CGRT_ERROR_CAPTURE_FAILED;
  }
  double t2 = gx_now();
  if (!have_used ||
      drv->cuDeviceGetGraphMemAttribute(set->rt->dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used1) != CUDA_SUCCESS)
    used1 = used0;
  e->instantiate_s = t2 - t1;
  e->memory_bytes = used1 > used0 ? (size_t)(used1 - used0) : 0;
  e->captured = 1;
  e->replays = 0;
  cgrt__log(CGRT_LOG_INFO, "cgrt graphs: captured %s bucket %d rows: %zu nodes, %zu patch sites%s, "
            "capture %.3f ms, instantiate %.3f ms, %zu bytes",
            gx_mode_name(e), e->rows, e->nodes, e->nsites, e->dpatch ? " (patched on the device)" : "",
            1e3 * e->capture_s,
            1e3 * e->instantiate_s, e->memory_bytes);
  return CGRT_SUCCESS;
}
