/* Events through the runtime's driver table (include/cgrt/cgrt_event.h). */
#include <stdlib.h>

#include "cgrt/cgrt_event.h"
#include "runtime/handles.h"
#include "runtime/runtime_internal.h"

struct cgrt_event {
  cgrt_runtime *rt;
  CUevent ev;
  int captured;      /* its last record was on a capturing stream (atomic: records and
                        waits may come from several threads) */
  cgrt__child child; /* destroyed with the runtime if the host forgets */
};

static void destroy_child(void *obj) { cgrt_event_destroy((cgrt_event *)obj); }

/* A failed driver call on an event: capture-related results become CGRT_ERROR_CAPTURING. */
static cgrt_status event_fail(CUresult r, const char *symbol, const char *api) {
  int capture = r == CUDA_ERROR_CAPTURED_EVENT || r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ||
                r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  cgrt_status st = cgrt__fail_cu(capture ? CGRT_ERROR_CAPTURING : CGRT_ERROR_DRIVER, r, symbol, api);
  if (r == CUDA_ERROR_CAPTURED_EVENT) cgrt__error_prefix("the event was last recorded inside a capture");
  return st;
}

/* Validates the event and makes its runtime's context current. */
static cgrt_status enter(const cgrt_event *e, const char *api) {
  if (!cgrt__handle_live(e, CGRT__HANDLE_EVENT))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "%s: event %p is not live (NULL, destroyed or never created)", api,
                      (const void *)e);
  return cgrt__runtime_enter(e->rt, api);
}

/* enter(), then what a wait for the event (synchronize, query, elapsed time) needs before
 * the driver sees it: the calling thread does not capture (a wait there is an unsafe
 * call that invalidates its capture), and the event's last record was not a capture
 * point, which has no completion to wait for (the driver answers that with
 * CUDA_ERROR_CAPTURED_EVENT during the capture, and with CUDA_ERROR_INVALID_VALUE once
 * the capture has ended). */
static cgrt_status enter_to_wait(const cgrt_event *e, const char *api) {
  cgrt_status st = enter(e, api);
  if (st) return st;
  if ((st = cgrt__refuse_in_capture(api))) return st;
  if (__atomic_load_n(&e->captured, __ATOMIC_ACQUIRE))
    return cgrt__fail(CGRT_ERROR_CAPTURING,
                      "%s: event %p was last recorded inside a capture (a capture point has nothing to wait "
                      "for or time); record it again outside capture",
                      api, (const void *)e);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_event_create(cgrt_runtime *rt, cgrt_event **out) {
  if (out) *out = NULL;
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_event_create");
  if (st) return st;
  if (!out) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_event_create: out is NULL");
  cgrt_event *e = cgrt__handle_alloc(sizeof *e);
  if (!e) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_event_create: out of host memory");
  e->rt = rt;
  CUresult r = rt->drv->cuEventCreate(&e->ev, CU_EVENT_DEFAULT);
  if (r != CUDA_SUCCESS) {
    cgrt__handle_free(e);
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuEventCreate", "cgrt_event_create");
  }
  st = cgrt__runtime_adopt(rt, e, CGRT__HANDLE_EVENT, &e->child, destroy_child, "cgrt_event",
                           "cgrt_event_create");
  if (st != CGRT_SUCCESS) {
    rt->drv->cuEventDestroy(e->ev);
    cgrt__handle_free(e);
    return st;
  }
  *out = e;
  return CGRT_SUCCESS;
}

void cgrt_event_destroy(cgrt_event *e) {
  if (!e || !cgrt__handle_remove(e, CGRT__HANDLE_EVENT)) return;
  cgrt_runtime *rt = e->rt;
  if (cgrt__runtime_is_live(rt)) {
    cgrt__runtime_detach(rt, &e->child);
    CUresult r = rt->drv->cuCtxSetCurrent(rt->ctx);
    if (r == CUDA_SUCCESS) r = rt->drv->cuEventDestroy(e->ev);
    if (r != CUDA_SUCCESS)
      cgrt__log(CGRT_LOG_WARN, "cgrt_event_destroy: cuEventDestroy failed with %s", cgrt__curesult_name(r));
  }
  cgrt__handle_free(e);
}

cgrt_status cgrt_event_record(cgrt_event *e, CUstream stream) {
  cgrt_status st = enter(e, "cgrt_event_record");
  if (st) return st;
  /* Whether this record is a capture point: the stream's capture status now (a failed
   * query leaves it to cuEventRecord to report the stream). */
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  const cgrt__driver *d = e->rt->drv;
  int captured = d->cuStreamIsCapturing(stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = d->cuEventRecord(e->ev, stream);
  if (r != CUDA_SUCCESS) return event_fail(r, "cuEventRecord", "cgrt_event_record");
  __atomic_store_n(&e->captured, captured, __ATOMIC_RELEASE);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_event_synchronize(cgrt_event *e) {
  cgrt_status st = enter_to_wait(e, "cgrt_event_synchronize");
  if (st) return st;
  CUresult r = e->rt->drv->cuEventSynchronize(e->ev);
  return r == CUDA_SUCCESS ? CGRT_SUCCESS : event_fail(r, "cuEventSynchronize", "cgrt_event_synchronize");
}

cgrt_status cgrt_event_query(cgrt_event *e, int *done) {
  cgrt_status st = enter_to_wait(e, "cgrt_event_query");
  if (st) return st;
  if (!done) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_event_query: done is NULL");
  CUresult r = e->rt->drv->cuEventQuery(e->ev);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) {
    *done = r == CUDA_SUCCESS;
    return CGRT_SUCCESS;
  }
  return event_fail(r, "cuEventQuery", "cgrt_event_query");
}

cgrt_status cgrt_event_elapsed_ms(const cgrt_event *start, const cgrt_event *end, float *ms) {
  cgrt_status st = enter_to_wait(start, "cgrt_event_elapsed_ms");
  if (!st) st = enter_to_wait(end, "cgrt_event_elapsed_ms");
  if (st) return st;
  if (!ms) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_event_elapsed_ms: ms is NULL");
  if (start->rt != end->rt)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_event_elapsed_ms: the events belong to two runtimes");
  const cgrt__driver *d = end->rt->drv;
  CUresult r = d->cuEventSynchronize(end->ev);
  if (r != CUDA_SUCCESS) return event_fail(r, "cuEventSynchronize", "cgrt_event_elapsed_ms");
  float v = 0.0f;
  r = d->cuEventElapsedTime(&v, start->ev, end->ev);
  if (r == CUDA_ERROR_INVALID_HANDLE)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_event_elapsed_ms: an event was never recorded outside capture (cuEventElapsedTime "
                      "failed with CUDA_ERROR_INVALID_HANDLE)");
  if (r != CUDA_SUCCESS) return event_fail(r, "cuEventElapsedTime", "cgrt_event_elapsed_ms");
  *ms = v;
  return CGRT_SUCCESS;
}
