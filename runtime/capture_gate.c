/* Captures in progress, and the calls they exclude.
 *
 * Graph sets bracket each stream capture (cuStreamBeginCapture .. cuStreamEndCapture)
 * with cgrt__runtime_capture_begin/end. Two things follow from that bracket:
 *   - the calling thread is in capture mode (cgrt captures with
 *     CU_STREAM_CAPTURE_MODE_THREAD_LOCAL): calls that must not run during its capture
 *     (synchronous copies, synchronizations, module loads, event waits) are refused with
 *     CGRT_ERROR_CAPTURING before the driver sees them;
 *   - a synchronization of the whole context (cuCtxSynchronize) must not run while any
 *     thread captures: the driver cannot wait for a capturing stream, so it fails the
 *     synchronization (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture
 *     of the other thread, whatever its capture mode. cgrt__ctx_synchronize waits for the
 *     captures in progress to end, and holds new ones back while it runs.
 * The gate is process-wide: runtimes of one device share its primary context. */
#include <pthread.h>

#include "runtime/runtime_internal.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static unsigned g_captures; /* captures in progress, all threads */
static unsigned g_syncs;    /* whole-context synchronizations in progress */

static _Thread_local unsigned t_captures; /* captures in progress on this thread */

void cgrt__runtime_capture_begin(cgrt_runtime *rt) {
  /* rt->capturing first: a synchronization that holds rt->mu (counter growth) has seen
   * it 0 and waits at the gate below for captures to end; this one must not be counted
   * there before it can take rt->mu. */
  pthread_mutex_lock(&rt->mu);
  rt->capturing++;
  pthread_mutex_unlock(&rt->mu);
  /* Captures wait for a synchronization that runs; a synchronization only starts with no
   * capture in progress, so a capture begun inside another never waits here. */
  pthread_mutex_lock(&g_mu);
  while (g_syncs > 0) pthread_cond_wait(&g_cv, &g_mu);
  g_captures++;
  pthread_mutex_unlock(&g_mu);
  t_captures++;
}

void cgrt__runtime_capture_end(cgrt_runtime *rt) {
  pthread_mutex_lock(&rt->mu);
  if (rt->capturing > 0) rt->capturing--;
  pthread_mutex_unlock(&rt->mu);
  if (t_captures > 0) t_captures--;
  pthread_mutex_lock(&g_mu);
  if (g_captures > 0 && --g_captures == 0) pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

int cgrt__thread_capturing(void) { return t_captures > 0; }

cgrt_status cgrt__refuse_in_capture(const char *api) {
  if (t_captures == 0) return CGRT_SUCCESS;
  return cgrt__fail(CGRT_ERROR_CAPTURING,
                    "%s: called during graph capture on this thread (from an enqueue callback under capture); it "
                    "must not run during capture: nothing was done, the capture goes on",
                    api);
}

cgrt_status cgrt__runtime_enter_outside_capture(cgrt_runtime *rt, const char *api) {
  cgrt_status st = cgrt__runtime_enter(rt, api);
  return st != CGRT_SUCCESS ? st : cgrt__refuse_in_capture(api);
}

CUresult cgrt__ctx_synchronize_raw(const cgrt__driver *drv) {
  pthread_mutex_lock(&g_mu);
  while (g_captures > 0) pthread_cond_wait(&g_cv, &g_mu);
  g_syncs++;
  pthread_mutex_unlock(&g_mu);
  CUresult r = drv->cuCtxSynchronize();
  pthread_mutex_lock(&g_mu);
  if (--g_syncs == 0) pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  return r;
}

cgrt_status cgrt__ctx_synchronize(cgrt_runtime *rt, const char *api) {
  cgrt_status st = cgrt__refuse_in_capture(api);
  if (st != CGRT_SUCCESS) return st;
  CUresult r = cgrt__ctx_synchronize_raw(rt->drv);
  return r == CUDA_SUCCESS ? CGRT_SUCCESS : cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuCtxSynchronize", api);
}
