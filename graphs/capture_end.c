/* Ending a stream capture whatever happened: the capture stream, and with it the thread
 * that captured, must leave capture mode even when cuStreamEndCapture fails. Used by the
 * capture of a bucket (capture.c), of a WHILE body (while.c) and by destroy (graphs.c). */
#include "graphs/graphs_internal.h"

CUresult gx_capture_end(cgrt_graphs *set, CUstream s, int to_graph, CUgraph *out) {
  CUgraph g = NULL;
  CUresult r = set->drv->cuStreamEndCapture(s, &g);
  if (r == CUDA_SUCCESS && g == NULL) r = CUDA_ERROR_UNKNOWN;
  if (r != CUDA_SUCCESS) {
    /* A failed end may leave the stream, and with it this thread, capturing. */
    if (g != NULL && !to_graph) set->drv->cuGraphDestroy(g);
    g = NULL;
    set->open_capture = to_graph ? GX_OPEN_TO_GRAPH : GX_OPEN_OWNED;
    gx_capture_abandon(set);
  }
  *out = g;
  return r;
}

int gx_capture_abandon(cgrt_graphs *set) {
  if (set->open_capture == GX_OPEN_NONE) return 1;
  const cgrt__driver *drv = set->drv;
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = drv->cuStreamIsCapturing(set->cap_stream, &cs);
  if (r == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) {
    CUgraph g = NULL;
    drv->cuStreamEndCapture(set->cap_stream, &g); /* ended or not: asked again below */
    /* A body captured into a graph belongs to its conditional node. */
    if (g != NULL && set->open_capture == GX_OPEN_OWNED) drv->cuGraphDestroy(g);
    r = drv->cuStreamIsCapturing(set->cap_stream, &cs);
  }
  if (r == CUDA_SUCCESS && cs == CU_STREAM_CAPTURE_STATUS_NONE) {
    set->open_capture = GX_OPEN_NONE;
    if (set->open_parent != NULL) { /* nothing records into it any more */
      CGRT__CU_WARN(drv, cuGraphDestroy, (set->open_parent), "a WHILE draft graph whose capture was left open");
      set->open_parent = NULL;
    }
  }
  return set->open_capture == GX_OPEN_NONE;
}
