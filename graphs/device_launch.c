/* Device-launched replay (cgrt_graphs_options.device_launch).
 *
 * A step's graph is launched by a launcher kernel on the GPU, not by cuGraphLaunch on the
 * host: the host writes the bucket's executable into a slot of a control block in pinned
 * memory and stores the step number into `go` (kernels/graph_launch.h). The launcher
 * (the one node of the set's scheduler graph, instantiated for device launch, running on
 * a stream of the set's own) launches the step fire-and-forget and relaunches itself as
 * its tail launch, which the device starts once the step has completed; the step graph's
 * last node (captured at the end of every bucket of such a set) stores the step number
 * into `done`. So a step costs the host a few stores and no driver call while the
 * launcher runs.
 *
 * The launcher exits when no step comes for options.device_launch_idle_us; the next step
 * finds it gone (`exited`, or no launch of it in flight) and starts it again with one
 * cuGraphLaunch of the scheduler graph. A handshake on `exited` and `go`, each side
 * storing, fencing, then reading the other's word, makes sure that a step triggered while
 * the launcher decides to exit is taken by it or starts a new one, never lost.
 *
 * Ordering: device-launched steps run in trigger order, one at a time, ordered with no
 * stream. Work of the set launched on the host (eager fallbacks, WHILE draft loops,
 * buckets that could not be instantiated for device launch, host patching) waits for the
 * device-launched steps first (gx_dl_quiesce), and the next device-launched step waits
 * for that host work (a cuStreamSynchronize of the replay stream, only after such work). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"
#include "kernels/graph_launch.h"

/* Steps triggered ahead of the last completed one: at most the device patch mailbox's
 * smallest ring, so that a queued launch never finds its mailbox slot unread. */
#define GX_DL_AHEAD 31u
/* Polls of a word before each sched_yield while waiting for the GPU. */
#define GX_DL_SPINS 4096

static uint64_t load(const volatile unsigned long long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/* A store the GPU sees in order, then a full fence (the handshake's host half). */
static void store_fence(volatile unsigned long long *p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

cgrt_status gx_dl_init(cgrt_graphs *set) {
  const cgrt__driver *drv = set->drv;
  gx_dl *d = &set->dl;
  cgrt_status st = cgrt__runtime_function(set->rt, "cgrt_graph_launcher", &d->f_launcher);
  if (st == CGRT_SUCCESS) st = cgrt__runtime_function(set->rt, "cgrt_graph_step_done", &d->f_done);
  if (st != CGRT_SUCCESS && st != CGRT_ERROR_INTERNAL) return st; /* a driver failure, named */
  if (st != CGRT_SUCCESS) /* not in the module */
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED,
                      "cgrt_graphs_create: device_launch needs cgrt's launcher kernels, which this build has no "
                      "code for on %s (sm_90a SASS with the device runtime)",
                      set->rt->device_name);
  /* The launcher may share an SM with a step's largest CTAs while it hands over. */
  (void)drv->cuFuncSetAttribute(d->f_launcher, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100);
  st = CGRT__CU(drv, cuMemAllocHost, ((void **)&d->ctl, sizeof(cgrt__dl_ctl)), CGRT_ERROR_DRIVER,
                "cgrt_graphs_create: device launch control block (pinned)");
  if (st != CGRT_SUCCESS) return st;
  memset((void *)d->ctl, 0, sizeof(cgrt__dl_ctl));
  st = CGRT__CU(drv, cuMemAlloc, (&d->state, sizeof(cgrt__dl_state)), CGRT_ERROR_DRIVER,
                "cgrt_graphs_create: device launch state");
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuMemsetD8, (d->state, 0, sizeof(cgrt__dl_state)), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: zeroing the device launch state");
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuStreamCreate, (&d->stream, CU_STREAM_NON_BLOCKING), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: the launcher's stream");
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuEventCreate, (&d->ev, CU_EVENT_DISABLE_TIMING), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: the launcher's event");
  /* The scheduler graph: the launcher alone, instantiated for device launch (it must be a
   * device graph to relaunch itself). */
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuGraphCreate, (&d->graph, 0), CGRT_ERROR_DRIVER, "cgrt_graphs_create: the scheduler graph");
  if (st == CGRT_SUCCESS) {
    CUdeviceptr ctl = (CUdeviceptr)(uintptr_t)d->ctl; /* unified addressing */
    unsigned long long idle_ns = 1000ull * (unsigned long long)set->o.device_launch_idle_us;
    void *args[3] = {&ctl, &d->state, &idle_ns};
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof(p));
    p.func = d->f_launcher;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraphNode node = NULL;
    st = CGRT__CU(drv, cuGraphAddKernelNode, (&node, d->graph, NULL, 0, &p), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: the launcher node");
  }
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuGraphInstantiateWithFlags, (&d->exec, d->graph, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH),
                  CGRT_ERROR_NOT_SUPPORTED, "cgrt_graphs_create: instantiating the scheduler graph for device launch");
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuGraphUpload, (d->exec, d->stream), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: uploading the scheduler graph");
  if (st == CGRT_SUCCESS)
    st = CGRT__CU(drv, cuStreamSynchronize, (d->stream), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: uploading the scheduler graph");
  if (st == CGRT_SUCCESS) d->enabled = 1;
  return st;
}

cgrt_status gx_dl_step_done(cgrt_graphs *set, CUstream s) {
  gx_dl *d = &set->dl;
  CUdeviceptr ctl = (CUdeviceptr)(uintptr_t)d->ctl;
  void *args[2] = {&ctl, &d->state};
  return CGRT__CU(set->drv, cuLaunchKernel, (d->f_done, 1, 1, 1, 32, 1, 1, 0, s, args, NULL), CGRT_ERROR_DRIVER,
                  "graph set: launching the step-done kernel");
}

/* The first failure the launcher reported, as a status (sticky: the set's later steps
 * fail the same way; its mailbox counts may be off by the launch that never ran). */
static cgrt_status check_err(cgrt_graphs *set) {
  gx_dl *d = &set->dl;
  if (d->lost != 0)
    return cgrt__fail(CGRT_ERROR_DRIVER,
                      "device-launched step %llu: a driver call failed while the launcher was deciding to exit, so "
                      "whether the step runs is unknown; the set launches no more steps: destroy it",
                      (unsigned long long)d->lost);
  uint64_t err = load(&d->ctl->err);
  if (err == 0) return CGRT_SUCCESS;
  unsigned where = (unsigned)(err >> 16) & 0xffffu;
  return cgrt__fail(CGRT_ERROR_DRIVER,
                    "device-launched step %llu: %s from the device failed (cudaError %u); the set launches no more "
                    "steps: destroy it",
                    (unsigned long long)(err >> 32),
                    where == CGRT__DL_ERR_RELAUNCH ? "the launcher's tail relaunch" : "cudaGraphLaunch of the step",
                    (unsigned)(err & 0xffffu));
}

/* Starts the launcher when no launch of it is in flight (the host's only driver calls of
 * this path). */
static cgrt_status start(cgrt_graphs *set) {
  gx_dl *d = &set->dl;
  const cgrt__driver *drv = set->drv;
  d->ctl->exited = 0; /* no launcher runs now: nobody else writes it */
  cgrt_status st = CGRT__CU(drv, cuGraphLaunch, (d->exec, d->stream), CGRT_ERROR_DRIVER,
                            "device launch: starting the launcher");
  if (st != CGRT_SUCCESS) return st;
  d->running = 1; /* it runs now, whatever follows */
  set->st.launcher_starts++;
  /* Without its event the host learns that it ended by synchronizing its stream. */
  d->ev_stale = drv->cuEventRecord(d->ev, d->stream) != CUDA_SUCCESS;
  return CGRT_SUCCESS;
}

/* 1 when the launch of the launcher the host made last has ended (its stream is idle),
 * 0 while it runs; a status on a driver failure. */
static cgrt_status ended(cgrt_graphs *set, int *yes) {
  if (set->dl.ev_stale) { /* the event of this launch was not recorded: wait for the stream */
    cgrt_status st = CGRT__CU(set->drv, cuStreamSynchronize, (set->dl.stream), CGRT_ERROR_DRIVER,
                              "device launch: waiting for the launcher to end");
    if (st != CGRT_SUCCESS) return st;
    set->dl.ev_stale = 0;
    *yes = 1;
    return CGRT_SUCCESS;
  }
  CUresult r = set->drv->cuEventQuery(set->dl.ev);
  if (r == CUDA_ERROR_NOT_READY) {
    *yes = 0;
    return CGRT_SUCCESS;
  }
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuEventQuery", "device launch: the launcher");
  *yes = 1;
  return CGRT_SUCCESS;
}

/* Before a trigger: a launcher that announced its exit is waited out (it sees no new
 * step, so it does exit), so that the trigger knows whether one runs. */
static cgrt_status settle(cgrt_graphs *set) {
  gx_dl *d = &set->dl;
  if (!d->running || load(&d->ctl->exited) == 0) return CGRT_SUCCESS;
  for (long spin = 0;; spin++) {
    int gone = 0;
    cgrt_status st = ended(set, &gone);
    if (st != CGRT_SUCCESS) return st;
    if (gone) {
      d->running = 0;
      return CGRT_SUCCESS;
    }
    if (spin % GX_DL_SPINS == GX_DL_SPINS - 1) sched_yield();
  }
}

/* After go = want was stored while a launcher ran: it takes the step, unless it decided
 * to exit meanwhile (the handshake in kernels/graph_launch.h): then it either takes the
 * step after all or ends, and the host starts a new one. */
static cgrt_status after_race(cgrt_graphs *set, uint64_t want) {
  gx_dl *d = &set->dl;
  if (load(&d->ctl->exited) == 0) return CGRT_SUCCESS; /* it will see go */
  for (long spin = 0;; spin++) {
    if (load(&d->ctl->started) >= want) return CGRT_SUCCESS;
    int gone = 0;
    cgrt_status st = ended(set, &gone);
    if (st != CGRT_SUCCESS) {
      d->lost = want; /* it may run or not: the set cannot tell any more */
      return st;
    }
    if (gone) {
      d->running = 0;
      if (load(&d->ctl->started) >= want) return CGRT_SUCCESS; /* took it, then idled out */
      return start(set);
    }
    if (spin % GX_DL_SPINS == GX_DL_SPINS - 1) sched_yield();
  }
}

/* Waits until the steps up to `upto` have completed, polling `done` (the host stays on
 * its core, as an engine waiting for its tokens: a yield could hand the core away for a
 * time slice; it yields only after 100 ms). */
static cgrt_status wait_done(cgrt_graphs *set, uint64_t upto) {
  gx_dl *d = &set->dl;
  double t0 = 0;
  for (long spin = 0; load(&d->ctl->done) < upto; spin++) {
    cgrt_status st = check_err(set);
    if (st != CGRT_SUCCESS) return st;
    if (spin % GX_DL_SPINS == GX_DL_SPINS - 1) {
      /* No launcher with steps left (its relaunch failed, or an earlier start did): start
       * one rather than wait forever. */
      int gone = !d->running;
      if (d->running) {
        st = ended(set, &gone);
        if (st != CGRT_SUCCESS) return st;
      }
      if (gone && load(&d->ctl->done) < upto) {
        d->running = 0;
        st = start(set);
        if (st != CGRT_SUCCESS) return st;
      }
      if (t0 == 0) t0 = gx_now();
      else if (gx_now() - t0 > 0.1) sched_yield();
    }
  }
  return check_err(set);
}

cgrt_status gx_dl_trigger(cgrt_graphs *set, CUgraphExec x) {
  gx_dl *d = &set->dl;
  cgrt_status st = check_err(set);
  if (st != CGRT_SUCCESS) return st;
  if (d->host_pending) { /* host-launched work of the set comes first */
    st = CGRT__CU(set->drv, cuStreamSynchronize, (set->stream), CGRT_ERROR_DRIVER,
                  "device launch: waiting for the set's host-launched work");
    if (st != CGRT_SUCCESS) return st;
    d->host_pending = 0;
  }
  const uint64_t q = d->go + 1;
  if (q > GX_DL_AHEAD) {
    st = wait_done(set, q - GX_DL_AHEAD);
    if (st != CGRT_SUCCESS) return st;
  }
  st = settle(set);
  if (st != CGRT_SUCCESS) return st; /* nothing triggered */
  d->ctl->exec[q % CGRT__DL_SLOTS] = (unsigned long long)(uintptr_t)x;
  store_fence(&d->ctl->go, q);
  d->go = q;
  st = d->running ? after_race(set, q) : start(set);
  if (st != CGRT_SUCCESS) {
    if (!d->running && d->lost == 0) { /* no launcher reads go: the step is taken back */
      store_fence(&d->ctl->go, q - 1);
      d->go = q - 1;
    }
    return st;
  }
  set->st.device_launches++;
  return CGRT_SUCCESS;
}

cgrt_status gx_dl_quiesce(cgrt_graphs *set) {
  if (!set->dl.enabled) return CGRT_SUCCESS;
  return wait_done(set, set->dl.go);
}

void gx_dl_host_launched(cgrt_graphs *set) {
  if (set->dl.enabled) set->dl.host_pending = 1;
}

cgrt_status gx_dl_synchronize(cgrt_graphs *set) {
  cgrt_status st = gx_dl_quiesce(set);
  if (st != CGRT_SUCCESS) return st;
  st = CGRT__CU(set->drv, cuStreamSynchronize, (set->stream), CGRT_ERROR_DRIVER, "cgrt_graphs_synchronize");
  if (st == CGRT_SUCCESS) set->dl.host_pending = 0;
  return st;
}

uint64_t gx_dl_last_step_ns(const cgrt_graphs *set) {
  const gx_dl *d = &set->dl;
  if (!d->enabled || d->go == 0 || load(&d->ctl->done) != d->go) return 0;
  const uint64_t a = load(&d->ctl->launch_ns), b = load(&d->ctl->done_ns);
  return b > a ? b - a : 0;
}

void gx_dl_free(cgrt_graphs *set) {
  gx_dl *d = &set->dl;
  const cgrt__driver *drv = set->drv;
  if (d->ctl != NULL && d->running) {
    /* Let the triggered steps finish, then stop the launcher and wait for its stream. */
    if (load(&d->ctl->err) == 0 && wait_done(set, d->go) != CGRT_SUCCESS)
      cgrt__log(CGRT_LOG_WARN, "cgrt_graphs_destroy: %s", cgrt_last_error());
    store_fence(&d->ctl->go, CGRT__DL_QUIT);
    CGRT__CU_WARN(drv, cuStreamSynchronize, (d->stream), "cgrt_graphs_destroy: stopping the launcher");
    d->running = 0;
  }
  if (d->exec != NULL) CGRT__CU_WARN(drv, cuGraphExecDestroy, (d->exec), "cgrt_graphs_destroy: scheduler graph");
  if (d->graph != NULL) CGRT__CU_WARN(drv, cuGraphDestroy, (d->graph), "cgrt_graphs_destroy: scheduler graph");
  if (d->ev != NULL) CGRT__CU_WARN(drv, cuEventDestroy, (d->ev), "cgrt_graphs_destroy: launcher event");
  if (d->stream != NULL) CGRT__CU_WARN(drv, cuStreamDestroy, (d->stream), "cgrt_graphs_destroy: launcher stream");
  if (d->state != 0) CGRT__CU_WARN(drv, cuMemFree, (d->state), "cgrt_graphs_destroy: device launch state");
  if (d->ctl != NULL) CGRT__CU_WARN(drv, cuMemFreeHost, ((void *)d->ctl), "cgrt_graphs_destroy: control block");
  memset(d, 0, sizeof(*d));
}
