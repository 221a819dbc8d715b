/* Emulated events: CLOCK_MONOTONIC timestamps when recorded eagerly; recorded on a
 * capturing stream they mark a dependency point of the capture, which
 * cuStreamWaitEvent uses to fork and join streams into the capture. */
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu_internal.h"

#define EMU_EVENT_FLAGS \
  (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

CUresult cgrt__emu_cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (phEvent == NULL || (Flags & ~(unsigned)EMU_EVENT_FLAGS) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_VALUE;
  struct CUevent_st *e = calloc(1, sizeof(*e));
  if (e == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  e->flags = Flags;
  cgrt__emu_lock();
  if (cgrt__emu_reg_add(e, EMU_K_EVENT) != 0) {
    cgrt__emu_unlock();
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  cgrt__emu_counts.events++;
  cgrt__emu_unlock();
  *phEvent = e;
  return CUDA_SUCCESS;
}

CUresult cgrt__emu_cuEventDestroy(CUevent hEvent) {
  CUresult r = cgrt__emu_check_init();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hEvent, EMU_K_EVENT)) {
    cgrt__emu_unlock();
    return CUDA_ERROR_INVALID_HANDLE;
  }
  cgrt__emu_reg_del(hEvent);
  cgrt__emu_counts.events--;
  cgrt__emu_unlock();
  free(hEvent->deps);
  free(hEvent);
  return CUDA_SUCCESS;
}

/* The live capture the event was last recorded in, or NULL. Lock held. */
static emu_capture *event_capture(const struct CUevent_st *e) {
  return e->cap_id ? cgrt__emu_capture_by_id(e->cap_id) : NULL;
}

CUresult cgrt__emu_cuEventRecord(CUevent hEvent, CUstream hStream) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  struct CUstream_st *s;
  emu_capture *cap;
  if (!cgrt__emu_reg_is(hEvent, EMU_K_EVENT)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if ((r = cgrt__emu_stream_get(hStream, &s, &cap)) != CUDA_SUCCESS) {
    /* r set */
  } else if (cap != NULL) {
    struct CUgraphNode_st **d = NULL;
    if (s->ndeps > 0) {
      d = malloc(s->ndeps * sizeof(*d));
      if (d == NULL) {
        r = cgrt__emu_capture_fail(cap, CUDA_ERROR_OUT_OF_MEMORY);
        cgrt__emu_unlock();
        return r;
      }
      memcpy(d, s->deps, s->ndeps * sizeof(*d));
    }
    free(hEvent->deps);
    hEvent->deps = d;
    hEvent->ndeps = s->ndeps;
    hEvent->cap_id = cap->id;
  } else {
    free(hEvent->deps);
    hEvent->deps = NULL;
    hEvent->ndeps = 0;
    hEvent->cap_id = 0;
    hEvent->recorded = 1;
    hEvent->ns = cgrt__emu_now_ns();
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuEventSynchronize(CUevent hEvent) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hEvent, EMU_K_EVENT))
    r = CUDA_ERROR_INVALID_HANDLE;
  else if (event_capture(hEvent) != NULL)
    r = CUDA_ERROR_CAPTURED_EVENT;
  cgrt__emu_unlock();
  return r; /* recorded work has already run */
}

/* Work runs when it is enqueued, so a recorded event is always complete. Like the
 * driver, a query is an unsafe call while the calling thread captures. */
CUresult cgrt__emu_cuEventQuery(CUevent hEvent) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hEvent, EMU_K_EVENT))
    r = CUDA_ERROR_INVALID_HANDLE;
  else if ((r = cgrt__emu_unsafe_call()) != CUDA_SUCCESS)
    ; /* r set: the capture is invalidated */
  else if (event_capture(hEvent) != NULL)
    r = CUDA_ERROR_CAPTURED_EVENT;
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (pMilliseconds == NULL) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  if (!cgrt__emu_reg_is(hStart, EMU_K_EVENT) || !cgrt__emu_reg_is(hEnd, EMU_K_EVENT)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (event_capture(hStart) != NULL || event_capture(hEnd) != NULL) {
    r = CUDA_ERROR_CAPTURED_EVENT;
  } else if (((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING) || !hStart->recorded ||
             !hEnd->recorded) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    double ms = ((double)hEnd->ns - (double)hStart->ns) / 1e6;
    *pMilliseconds = (float)ms;
  }
  cgrt__emu_unlock();
  return r;
}

CUresult cgrt__emu_cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CUresult r = cgrt__emu_check_ctx();
  if (r != CUDA_SUCCESS) return r;
  if ((Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0) return CUDA_ERROR_INVALID_VALUE;
  cgrt__emu_lock();
  struct CUstream_st *s;
  emu_capture *cap;
  if (!cgrt__emu_reg_is(hEvent, EMU_K_EVENT)) {
    r = CUDA_ERROR_INVALID_HANDLE;
    goto out;
  }
  r = cgrt__emu_stream_get(hStream, &s, &cap);
  if (r != CUDA_SUCCESS) goto out;
  emu_capture *ec = event_capture(hEvent);
  if (Flags & CU_EVENT_WAIT_EXTERNAL) {
    /* An external event-wait node; the emulation does not record those. */
    r = cap ? cgrt__emu_capture_fail(cap, CUDA_ERROR_NOT_SUPPORTED) : CUDA_ERROR_INVALID_VALUE;
  } else if (ec != NULL) {
    if (ec->invalidated)
      r = cap ? cgrt__emu_capture_fail(cap, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
              : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (s == NULL)
      r = cgrt__emu_capture_fail(ec, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    else if (cap != NULL && cap != ec)
      r = cgrt__emu_capture_fail(ec, cgrt__emu_capture_fail(cap, CUDA_ERROR_STREAM_CAPTURE_MERGE));
    else
      r = cgrt__emu_capture_join(s, ec, hEvent->deps, hEvent->ndeps);
  } else if (cap != NULL && hEvent->recorded) {
    /* A capture may not depend on work recorded outside it. */
    r = cgrt__emu_capture_fail(cap, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  }
  /* Eager: the recorded work has already run. */
out:
  cgrt__emu_unlock();
  return r;
}
