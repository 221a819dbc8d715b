/* Capture of a list of buckets: this thread warms up and captures (the host's callback
 * runs here), a worker thread indexes, instantiates and uploads the bucket captured
 * before (gx_capture_back), so that instantiation overlaps the next capture. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <string.h>

#include "graphs/graphs_internal.h"

#define GX_MSG 1024

typedef struct gx_pipe {
  cgrt_graphs *set;
  gx_exec **todo;
  cgrt_status *status;
  char *msg;
  CUstream upload;
  size_t ready;  /* buckets whose front half is done */
  int closed;    /* no more buckets come */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} gx_pipe;

static void keep_msg(char *msg, size_t i) {
  strncpy(msg + i * GX_MSG, cgrt_last_error(), GX_MSG - 1);
  msg[i * GX_MSG + GX_MSG - 1] = '\0';
}

static void *worker(void *arg) {
  gx_pipe *p = (gx_pipe *)arg;
  for (size_t i = 0;; i++) {
    pthread_mutex_lock(&p->mu);
    while (p->ready <= i && !p->closed) pthread_cond_wait(&p->cv, &p->mu);
    const int have = p->ready > i;
    pthread_mutex_unlock(&p->mu);
    if (!have) break;
    if (p->status[i] != CGRT_SUCCESS) continue; /* its front half failed */
    gx_exec *e = p->todo[i];
    /* The driver's current context is per thread (asked again per bucket: one failed
     * call costs one bucket). */
    cgrt_status st = cgrt__runtime_enter(p->set->rt, "cgrt_graphs_capture");
    if (st != CGRT_SUCCESS) {
      gx_exec_release(p->set, e);
      cgrt__error_prefix("%s bucket %d rows, on the instantiation thread", gx_mode_name(e), e->rows);
    } else {
      st = gx_capture_back(p->set, e, p->upload);
    }
    p->status[i] = st;
    if (st != CGRT_SUCCESS) keep_msg(p->msg, i);
  }
  return NULL;
}

static void publish(gx_pipe *p, size_t ready, int closed) {
  pthread_mutex_lock(&p->mu);
  p->ready = ready;
  p->closed = closed;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void gx_capture_buckets(cgrt_graphs *set, gx_exec **todo, size_t n, cgrt_status *status, char *msg) {
  const cgrt__driver *drv = set->drv;
  gx_pipe p;
  memset(&p, 0, sizeof(p));
  p.set = set;
  p.todo = todo;
  p.status = status;
  p.msg = msg;
  int threaded = !set->o.serial_capture && n > 1;
  pthread_t th;
  if (threaded) {
    /* Uploads go to a stream of their own: the capture stream is capturing meanwhile. */
    CUresult r = drv->cuStreamCreate(&p.upload, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) {
      pthread_mutex_init(&p.mu, NULL);
      pthread_cond_init(&p.cv, NULL);
      if (pthread_create(&th, NULL, worker, &p) != 0) {
        pthread_mutex_destroy(&p.mu);
        pthread_cond_destroy(&p.cv);
        CGRT__CU_WARN(drv, cuStreamDestroy, (p.upload), "cgrt_graphs_capture: upload stream");
        r = CUDA_ERROR_OPERATING_SYSTEM;
      }
    }
    if (r != CUDA_SUCCESS) {
      cgrt__log(CGRT_LOG_INFO, "cgrt graphs: no instantiation thread (%s); buckets are instantiated in turn",
                cgrt__curesult_name(r));
      threaded = 0;
    }
  }
  int warm = 1; /* warm-up runs still due (options.warmup_once) */
  for (size_t i = 0; i < n; i++) {
    const int runs = warm ? set->o.warmup_runs : 0;
    if (todo[i]->is_while && set->while_unsupported) { /* found out at an earlier bucket */
      status[i] = CGRT_ERROR_NOT_SUPPORTED;
      msg[i * GX_MSG] = '\0';
      if (threaded) publish(&p, i + 1, 0);
      continue;
    }
    status[i] = gx_capture_front(set, todo[i], runs);
    if (todo[i]->is_while && status[i] == CGRT_ERROR_NOT_SUPPORTED) {
      /* No conditional nodes on this driver: the unrolled draft loops serve. */
      cgrt__log(CGRT_LOG_INFO, "cgrt graphs: WHILE draft loops unavailable (%s); draft loops stay unrolled",
                cgrt_last_error());
      set->while_unsupported = 1;
    }
    if (status[i] == CGRT_SUCCESS && !threaded) status[i] = gx_capture_back(set, todo[i], set->cap_stream);
    if (status[i] != CGRT_SUCCESS) keep_msg(msg, i);
    else if (set->o.warmup_once) warm = 0;
    if (threaded) publish(&p, i + 1, 0);
  }
  if (threaded) {
    publish(&p, n, 1);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    CGRT__CU_WARN(drv, cuStreamDestroy, (p.upload), "cgrt_graphs_capture: upload stream");
  }
}
