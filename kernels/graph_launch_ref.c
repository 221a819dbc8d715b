/* C reference of kernels/graph_launch.cu (device-launched replay), for the emulation.
 *
 * The emulation runs a stream's work on the calling thread, so the launcher cannot poll:
 * it takes every step triggered so far, each launched through the emulation's device-side
 * cudaGraphLaunch (which runs the step's graph to completion, the tail relaunch's order),
 * and then exits at once as if its idle time had passed. The host side therefore restarts
 * it at every step, the path the GPU takes after an idle launcher exits. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "kernels/graph_launch.h"
#include "kernels/ref_tables.h"

/* The emulation's device-side cudaGraphLaunch (runtime/emu/emu.h). Weak: a binary without
 * the emulation never runs these references. */
extern int cgrt__emu_graph_launch_device(uint64_t exec) __attribute__((weak));

/* %globaltimer: nanoseconds of a monotonic clock. */
static unsigned long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void launcher_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  cgrt__dl_ctl *ctl;
  cgrt__dl_state *st;
  memcpy(&ctl, p + off[0], sizeof ctl);
  memcpy(&st, p + off[1], sizeof st);
  if (ctl == NULL || st == NULL) return;
  for (;;) {
    ctl->runs = ctl->runs + 1;
    const unsigned long long last = st->last, g = ctl->go;
    if (g == CGRT__DL_QUIT || g <= last) { /* quit, or idle: exit */
      ctl->exited = last + 1;
      return;
    }
    const unsigned long long q = last + 1;
    const uint64_t x = ctl->exec[q % CGRT__DL_SLOTS];
    st->last = q;
    st->current = q;
    ctl->started = q;
    ctl->launch_ns = now_ns();
    int e = cgrt__emu_graph_launch_device != NULL ? cgrt__emu_graph_launch_device(x) : 1;
    if (e != 0) {
      if (ctl->err == 0) ctl->err = CGRT__DL_ERR(q, CGRT__DL_ERR_STEP_LAUNCH, (unsigned)e);
      ctl->done = q;
    }
    /* the tail relaunch: the next iteration */
  }
}

static void step_done_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  cgrt__dl_ctl *ctl;
  const cgrt__dl_state *st;
  memcpy(&ctl, p + off[0], sizeof ctl);
  memcpy(&st, p + off[1], sizeof st);
  if (ctl == NULL || st == NULL) return;
  ctl->done_ns = now_ns();
  ctl->done = st->current;
}

const cgrt__ref_kernel cgrt__ref_table_graph_launch[] = {
    {"cgrt_graph_launcher", 3, {8, 8, 8}, launcher_ref},
    {"cgrt_graph_step_done", 2, {8, 8}, step_done_ref},
    {0},
};
