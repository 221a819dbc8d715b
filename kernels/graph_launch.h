/* Device-launched replay (cgrt_graphs_options.device_launch): the layout shared by the
 * launcher kernels (kernels/graph_launch.cu), their C reference
 * (kernels/graph_launch_ref.c) and the host side (graphs/device_launch.c). Internal.
 *
 * The host triggers step q (q = 1, 2, ...) with no driver call: it writes the bucket's
 * executable graph into exec[q % CGRT__DL_SLOTS], then go = q (one release store). The
 * launcher, a 1-thread kernel in a graph instantiated for device launch, polls go; when go
 * passes the last step it launched it takes the next one (steps are never skipped),
 * launches that step's executable fire-and-forget, and relaunches itself as its own tail
 * launch, which the device starts once the step's graph has completed. Each step graph
 * ends with cgrt_graph_step_done, which stores the step number into `done`. When no step
 * comes for idle_ns the launcher exits (a Dekker handshake on `exited` / `go` makes sure a
 * step triggered meanwhile is never lost: one side always sees the other's store), and
 * the host restarts it with one cuGraphLaunch at its next step. So a context-wide
 * synchronization returns at most idle_ns after the last step. */
#ifndef CGRT_KERNELS_GRAPH_LAUNCH_H
#define CGRT_KERNELS_GRAPH_LAUNCH_H

/* Steps the host may trigger ahead of the launcher. */
#define CGRT__DL_SLOTS 64
/* go == CGRT__DL_QUIT: the launcher exits (the set stops it before destruction). */
#define CGRT__DL_QUIT (~0ull)

/* Pinned host memory, read and written by the GPU through unified addressing. The host
 * writes the first two lines, the GPU the third. */
typedef struct cgrt__dl_ctl {
  volatile unsigned long long go;   /* host: the last step triggered, or CGRT__DL_QUIT */
  unsigned long long pad0[15];
  volatile unsigned long long exec[CGRT__DL_SLOTS]; /* host: step q's CUgraphExec at q % SLOTS */
  volatile unsigned long long started; /* launcher: the last step it launched */
  volatile unsigned long long done;    /* cgrt_graph_step_done: the last step completed */
  volatile unsigned long long exited;  /* launcher: nonzero once it decided to exit (its
                                          last step + 1); 0 again when it took a step
                                          after all; the host clears it when it restarts
                                          the launcher */
  volatile unsigned long long err;     /* launcher: the first failure, CGRT__DL_ERR; 0 = none */
  volatile unsigned long long runs;    /* launcher instances started (tail relaunches count) */
  volatile unsigned long long launch_ns; /* launcher: %globaltimer right before its last launch */
  volatile unsigned long long done_ns;   /* cgrt_graph_step_done: %globaltimer before `done` */
  unsigned long long pad1[9];
} cgrt__dl_ctl;

/* err = ((unsigned long long)step << 32) | (where << 16) | cudaError_t. */
#define CGRT__DL_ERR(step, where, code) \
  (((unsigned long long)(step) << 32) | ((unsigned long long)(where) << 16) | (unsigned long long)(code))
#define CGRT__DL_ERR_STEP_LAUNCH 1 /* cudaGraphLaunch of the step's executable failed */
#define CGRT__DL_ERR_RELAUNCH 2    /* the launcher's tail relaunch failed */

/* Device memory of the set: the launcher's own state. */
typedef struct cgrt__dl_state {
  unsigned long long last;    /* the last step launched */
  unsigned long long current; /* the step whose graph runs now (read by cgrt_graph_step_done) */
} cgrt__dl_state;

#endif
