/* Graph set lifetime: options, create/destroy, capture of all buckets, queries. The top
 * of graphs/ (public entry points only): nothing else in graphs/ calls into this file. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"
#include "kernels/graph_patch.h"

void cgrt_graphs_options_init(cgrt_graphs_options *o) {
  if (o == NULL) return;
  memset(o, 0, sizeof(*o));
  o->size = sizeof(*o);
  o->dcp_world_size = 1;
  o->enable_decode = 1;
  o->warmup_runs = 1;
  o->replay_mode = CGRT_REPLAY_POINTER_UPDATE;
  o->meta.req_seq_lens = o->meta.req_positions = o->meta.block_table = -1;
  o->meta.seq_lens = o->meta.positions = o->meta.slot_mapping = -1;
  o->meta.draft_remaining = -1;
}

/* WHILE draft loops are wanted and possible for these options. */
static int while_wanted(const cgrt_graphs_options *o) {
  return o->draft_while && o->draft_steps >= 2 && o->enable_decode && o->dcp_world_size <= 1 && o->meta.enabled;
}

static void graphs_free(cgrt_graphs *set);

static cgrt_status check_meta_buffer(const cgrt_graphs_options *o, int id, size_t need,
                                     const char *role) {
  if (id < 0 || (size_t)id >= o->num_buffers)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: meta.%s: buffer id %d is not registered",
                      role, id);
  if (o->buffers[id].bytes < need)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_create: meta.%s ('%s') holds %zu bytes, the largest bucket needs %zu",
                      role, o->buffers[id].name ? o->buffers[id].name : "?", o->buffers[id].bytes, need);
  return CGRT_SUCCESS;
}

static cgrt_status validate(const cgrt_graphs_options *o) {
  if (o->max_num_seqs < 1 || o->max_num_seqs > CGRT_GRAPHS_MAX_ROWS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: max_num_seqs %d out of [1, %d]",
                      o->max_num_seqs, CGRT_GRAPHS_MAX_ROWS);
  if (o->max_model_len < 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: max_model_len %d", o->max_model_len);
  if (o->enqueue == NULL)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: enqueue callback is NULL");
  if (o->block_len == 1 || o->block_len < 0 || (long)o->block_len * o->max_num_seqs > CGRT_GRAPHS_MAX_ROWS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: block_len %d (0 = none, or >= 2)",
                      o->block_len);
  if (o->verify_len == 1 || o->verify_len < 0 || (long)o->verify_len * o->max_num_seqs > CGRT_GRAPHS_MAX_ROWS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: verify_len %d (0 = none, or >= 2)",
                      o->verify_len);
  if (!o->enable_decode && o->block_len < 2 && o->verify_len < 2)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: no mode is enabled");
  if (o->dcp_world_size < 1 || o->warmup_runs < 0)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: dcp_world_size %d, warmup_runs %d",
                      o->dcp_world_size, o->warmup_runs);
  if (o->draft_steps < 0 || o->draft_steps == 1 || o->draft_steps > CGRT_GRAPHS_MAX_DRAFT_STEPS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_create: draft_steps %d (0: no draft loops, or 2 to %d)", o->draft_steps,
                      CGRT_GRAPHS_MAX_DRAFT_STEPS);
  if ((int)o->replay_mode < 0 || (int)o->replay_mode > CGRT_REPLAY_EXEC_UPDATE)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: replay_mode %d", (int)o->replay_mode);
  if (o->device_patch != 0 && o->device_patch != 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: device_patch %d is not 0 or 1",
                      o->device_patch);
  if (o->device_patch && o->replay_mode != CGRT_REPLAY_POINTER_UPDATE)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_create: device_patch needs replay_mode CGRT_REPLAY_POINTER_UPDATE "
                      "(device-updatable nodes cannot go through cuGraphExecUpdate)");
  if (o->device_patch && o->num_buffers + 1 > CGRT__DPATCH_MAX_GROUPS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_create: device_patch supports up to %d buffers, %zu registered",
                      CGRT__DPATCH_MAX_GROUPS - 1, o->num_buffers);
  if (o->device_launch != 0 && o->device_launch != 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: device_launch %d is not 0 or 1",
                      o->device_launch);
  if (o->device_launch && o->replay_mode != CGRT_REPLAY_POINTER_UPDATE)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_create: device_launch needs replay_mode CGRT_REPLAY_POINTER_UPDATE (copy-in "
                      "replay copies on the replay stream around each launch)");
  if (o->device_launch_idle_us > 60000000u)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_create: device_launch_idle_us %u (at most 60 s: a context-wide synchronization "
                      "waits that long)",
                      o->device_launch_idle_us);
  if (o->num_buffers > CGRT_GRAPHS_MAX_BUFFERS || (o->num_buffers > 0 && o->buffers == NULL))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: %zu buffers (max %d)",
                      o->num_buffers, CGRT_GRAPHS_MAX_BUFFERS);
  for (size_t i = 0; i < o->num_buffers; i++) {
    const cgrt_buffer_desc *b = &o->buffers[i];
    if (!gx_range_ok(b->ptr, b->bytes) || (int)b->dir < 1 || (int)b->dir > 3)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "cgrt_graphs_create: buffer %zu ('%s'): address 0x%llx, %zu bytes, direction %d: a buffer "
                        "needs a non-zero address and size, must end at or below 2^64, and a direction of 1 to 3",
                        i, b->name ? b->name : "?", (unsigned long long)b->ptr, b->bytes, (int)b->dir);
    for (size_t j = 0; j < i; j++) {
      const cgrt_buffer_desc *c = &o->buffers[j];
      /* Both ranges end at or below 2^64: distances from the lower base do not wrap. */
      if (b->ptr >= c->ptr ? b->ptr - c->ptr < c->bytes : c->ptr - b->ptr < b->bytes)
        return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: buffers %zu and %zu overlap", j, i);
    }
  }
  if (o->capture_sizes != NULL || o->num_capture_sizes > 0) {
    if (o->capture_sizes == NULL || o->num_capture_sizes == 0 || o->num_capture_sizes > GX_MAX_CAPTURE_SIZES)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "cgrt_graphs_create: capture_sizes %s with num_capture_sizes %zu (1 to %d sizes, or NULL and 0)",
                        o->capture_sizes ? "set" : "NULL", o->num_capture_sizes, GX_MAX_CAPTURE_SIZES);
    for (size_t i = 0; i < o->num_capture_sizes; i++)
      if (o->capture_sizes[i] < 1 || o->capture_sizes[i] > CGRT_GRAPHS_MAX_ROWS)
        return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: capture_sizes[%zu] = %d is outside [1, %d]",
                          i, o->capture_sizes[i], CGRT_GRAPHS_MAX_ROWS);
  }
  if (o->max_capture_rows < 0 || o->max_capture_rows > CGRT_GRAPHS_MAX_ROWS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: max_capture_rows %d is outside [0, %d] (0: default)",
                      o->max_capture_rows, CGRT_GRAPHS_MAX_ROWS);
  if (o->draft_steps >= 2 && !o->meta.enabled)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: draft loops need meta.enabled");
  if (o->meta.enabled) {
    const cgrt_graph_meta *m = &o->meta;
    const int k = o->block_len > o->verify_len ? o->block_len : o->verify_len;
    size_t rows = (size_t)o->max_num_seqs * (size_t)(k > 1 ? k : 1);
    size_t reqs = (size_t)o->max_num_seqs;
    if (m->block_size < 1 || m->max_blocks_per_seq < 1)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: meta.block_size %d, max_blocks_per_seq %d",
                        m->block_size, m->max_blocks_per_seq);
    cgrt_status st;
    if ((st = check_meta_buffer(o, m->req_seq_lens, reqs * 4, "req_seq_lens")) ||
        (st = check_meta_buffer(o, m->req_positions, reqs * 8, "req_positions")) ||
        (st = check_meta_buffer(o, m->block_table, reqs * (size_t)m->max_blocks_per_seq * 4, "block_table")) ||
        (st = check_meta_buffer(o, m->seq_lens, rows * 4, "seq_lens")) ||
        (st = check_meta_buffer(o, m->positions, rows * 8, "positions")) ||
        (st = check_meta_buffer(o, m->slot_mapping, rows * 8, "slot_mapping")))
      return st;
    if (m->draft_remaining < -1)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "cgrt_graphs_create: meta.draft_remaining %d is neither -1 (none) nor a buffer id",
                        m->draft_remaining);
    if (m->draft_remaining >= 0 &&
        (st = check_meta_buffer(o, m->draft_remaining, reqs * 4, "draft_remaining")))
      return st;
  }
  return CGRT_SUCCESS;
}

static void destroy_child(void *obj) { cgrt_graphs_destroy((cgrt_graphs *)obj); }  /* runtime teardown */

cgrt_status cgrt_graphs_create(cgrt_runtime *rt, const cgrt_graphs_options *options,
                               cgrt_graphs **out) {
  if (out == NULL) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: out is NULL");
  *out = NULL;
  cgrt_status st = cgrt__runtime_enter_outside_capture(rt, "cgrt_graphs_create");
  if (st != CGRT_SUCCESS) return st;
  if (options == NULL || options->size < sizeof(cgrt_graphs_options))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_create: options NULL or size %zu < %zu",
                      options ? options->size : 0, sizeof(cgrt_graphs_options));
  st = validate(options);
  if (st != CGRT_SUCCESS) return st;

  cgrt_graphs *set = (cgrt_graphs *)cgrt__handle_alloc(sizeof(cgrt_graphs));
  if (set == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_graphs_create");
  set->rt = rt;
  set->drv = rt->drv;
  set->o = *options;
  set->o.capture_sizes = NULL;
  set->o.buffers = NULL;
  pthread_mutex_init(&set->mu, NULL);
  size_t nb = options->num_buffers;
  set->nbuf = nb;
  set->bufs = (cgrt_buffer_desc *)calloc(nb ? nb : 1, sizeof(cgrt_buffer_desc));
  set->current = (CUdeviceptr *)calloc(nb ? nb : 1, sizeof(CUdeviceptr));
  set->cur_bytes = (size_t *)calloc(nb ? nb : 1, sizeof(size_t));
  set->copy_bind = (const cgrt_binding **)calloc(nb ? nb : 1, sizeof(cgrt_binding *));
  set->move_log = (uint32_t *)calloc(GX_MOVE_LOG, sizeof(uint32_t));
  set->rt_cap = 64;
  set->rt_ranges = (cgrt__alloc_range *)calloc(set->rt_cap, sizeof(cgrt__alloc_range));
  set->rt_seen = (unsigned char *)calloc(set->rt_cap, 1);
  set->cur_key = (uint64_t *)calloc(nb ? nb : 1, sizeof(uint64_t));
  int *sizes = NULL;
  if (options->capture_sizes != NULL && options->num_capture_sizes > 0) {
    sizes = (int *)malloc(options->num_capture_sizes * sizeof(int));
    if (sizes) memcpy(sizes, options->capture_sizes, options->num_capture_sizes * sizeof(int));
  }
  if (!set->bufs || !set->current || !set->cur_bytes || !set->copy_bind || !set->move_log ||
      !set->rt_ranges || !set->rt_seen || !set->cur_key ||
      (options->capture_sizes && options->num_capture_sizes && !sizes)) {
    free(sizes);
    graphs_free(set); /* not registered yet */
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_graphs_create");
  }
  set->o.capture_sizes = sizes;
  for (size_t i = 0; i < nb; i++) {
    set->bufs[i] = options->buffers[i];
    set->bufs[i].name = strdup(options->buffers[i].name ? options->buffers[i].name : "");
    set->current[i] = options->buffers[i].ptr;
    set->cur_bytes[i] = options->buffers[i].bytes;
    if (set->bufs[i].name == NULL) {
      graphs_free(set); /* not registered yet */
      return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_graphs_create");
    }
    if (set->o.checked_replay) (void)gx_key_buffer(set, i); /* a failure: asked again when checked */
  }
  if (set->o.meta.enabled) {
    st = cgrt__runtime_function(rt, "cgrt_graph_meta_prepare", &set->f_prepare);
    if (st == CGRT_SUCCESS) st = cgrt__runtime_function(rt, "cgrt_graph_meta_advance", &set->f_advance);
    if (st == CGRT_SUCCESS && while_wanted(&set->o)) {
      st = cgrt__runtime_function(rt, "cgrt_graph_meta_while_begin", &set->f_while_begin);
      if (st == CGRT_SUCCESS)
        st = cgrt__runtime_function(rt, "cgrt_graph_meta_advance_while", &set->f_advance_while);
      /* The loop's state: {steps done, num_reqs}, zero between launches. */
      if (st == CGRT_SUCCESS)
        st = CGRT__CU(set->drv, cuMemAlloc, (&set->while_state, GX_WHILE_STATE_BYTES), CGRT_ERROR_DRIVER,
                      "cgrt_graphs_create: the WHILE draft loop's state");
      if (st == CGRT_SUCCESS)
        st = CGRT__CU(set->drv, cuMemsetD8, (set->while_state, 0, GX_WHILE_STATE_BYTES), CGRT_ERROR_DRIVER,
                      "cgrt_graphs_create: zeroing the WHILE draft loop's state");
    }
    if (st != CGRT_SUCCESS) {
      graphs_free(set); /* not registered yet */
      return st;
    }
  }
  if (set->o.device_patch &&
      cgrt__runtime_function(rt, "cgrt_graph_patch", &set->f_patch) != CGRT_SUCCESS) {
    /* The patch kernel lives in an optional image (SASS with the device runtime): a
     * device without it patches on the host. */
    set->f_patch = NULL;
    cgrt__log(CGRT_LOG_INFO, "cgrt graphs: device_patch unavailable on %s (no patch kernel for "
              "this device); pointer-updated replay patches on the host", rt->device_name);
  }
  if (set->f_patch != NULL) {
    /* The kernels with the site table in their parameters; a missing one leaves its class
     * to the table in device memory. */
    static const char *const cls[] = {
#define GX_DPATCH_CLASS_NAME(name, bytes) "cgrt_graph_patch_" #name,
        CGRT__DPATCH_PARAM_CLASSES(GX_DPATCH_CLASS_NAME)
#undef GX_DPATCH_CLASS_NAME
    };
    for (size_t i = 0; i < GX_DPATCH_CLASSES; i++)
      if (cgrt__runtime_function(rt, cls[i], &set->f_patch_cls[i]) != CGRT_SUCCESS) set->f_patch_cls[i] = NULL;
  }
  if (set->o.device_launch) {
    if (set->o.device_launch_idle_us == 0) set->o.device_launch_idle_us = 2000;
    st = gx_dl_init(set);
    if (st != CGRT_SUCCESS) {
      graphs_free(set); /* not registered yet */
      return st;
    }
  }
  st = CGRT__CU(set->drv, cuStreamCreate, (&set->cap_stream, CU_STREAM_NON_BLOCKING), CGRT_ERROR_DRIVER,
                "cgrt_graphs_create: capture stream");
  if (st == CGRT_SUCCESS && options->stream == NULL)
    st = CGRT__CU(set->drv, cuStreamCreate, (&set->own_stream, CU_STREAM_NON_BLOCKING), CGRT_ERROR_DRIVER,
                  "cgrt_graphs_create: replay stream");
  if (st == CGRT_SUCCESS) {
    set->stream = options->stream ? options->stream : set->own_stream;
    st = gx_buckets_build(set);
  }
  if (st == CGRT_SUCCESS)
    st = cgrt__runtime_adopt(rt, set, CGRT__HANDLE_GRAPHS, &set->child, destroy_child, "graph set",
                             "cgrt_graphs_create");
  if (st != CGRT_SUCCESS) {
    graphs_free(set);
    return st;
  }
  set->attached = 1;
  *out = set;
  return CGRT_SUCCESS;
}

cgrt_status cgrt_graphs_destroy(cgrt_graphs *set) {
  if (set == NULL) return CGRT_SUCCESS;
  if (!cgrt__handle_remove(set, CGRT__HANDLE_GRAPHS))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE,
                      "cgrt_graphs_destroy: %p is not a live graph set (destroyed twice or never created)", (void *)set);
  graphs_free(set);
  return CGRT_SUCCESS;
}

/* Releases everything of a set that is no longer (or was never) registered. */
static void graphs_free(cgrt_graphs *set) {
  if (cgrt__runtime_is_live(set->rt)) {
    const cgrt__driver *d = set->drv;
    if (cgrt__runtime_enter(set->rt, "cgrt_graphs_destroy") != CGRT_SUCCESS)
      cgrt__log(CGRT_LOG_WARN, "%s", cgrt_last_error());
    /* First, so that this thread leaves capture mode before the calls below. */
    if (!gx_capture_abandon(set))
      cgrt__log(CGRT_LOG_WARN, "cgrt_graphs_destroy: the capture stream is still capturing (cuStreamEndCapture "
                "keeps failing, or this is not the thread that captured); its capture is left open");
    gx_dl_free(set); /* the triggered steps first, then the launcher stops */
    if (set->stream) CGRT__CU_WARN(d, cuStreamSynchronize, (set->stream), "cgrt_graphs_destroy");
    for (size_t i = 0; i < set->nexec; i++) gx_exec_release(set, &set->execs[i]);
    if (set->cap_stream) CGRT__CU_WARN(d, cuStreamDestroy, (set->cap_stream), "cgrt_graphs_destroy: capture stream");
    if (set->own_stream) CGRT__CU_WARN(d, cuStreamDestroy, (set->own_stream), "cgrt_graphs_destroy: replay stream");
    if (set->while_state) CGRT__CU_WARN(d, cuMemFree, (set->while_state), "cgrt_graphs_destroy: WHILE loop state");
  } else {
    for (size_t i = 0; i < set->nexec; i++) gx_index_free(&set->execs[i]);
  }
  if (set->attached) cgrt__runtime_detach(set->rt, &set->child);
  for (size_t i = 0; i < set->nbuf; i++) free((void *)set->bufs[i].name);
  for (size_t i = 0; i < set->nranges; i++) free((void *)set->ranges[i].what);
  free(set->ranges);
  free(set->range_key);
  free(set->range_seen);
  free(set->rt_seen);
  free(set->cur_key);
  free(set->bufs);
  free(set->current);
  free(set->cur_bytes);
  free(set->copy_bind);
  free(set->move_log);
  free(set->rt_ranges);
  free(set->execs);
  for (int m = 0; m < GX_LUTS; m++) free(set->lut[m]);
  free((void *)set->o.capture_sizes);
  pthread_mutex_destroy(&set->mu);
  cgrt__handle_free(set);
}

static cgrt_status capture_locked(cgrt_graphs *set, gx_exec *only) {
  /* Re-capture releases executables: none of them may still be queued on the device. */
  cgrt_status quiet = gx_dl_quiesce(set);
  if (quiet != CGRT_SUCCESS) return quiet;
  cgrt_status first = CGRT_SUCCESS;
  char first_msg[1024] = "";
  size_t ok = 0, failed = 0, n = 0;
  double t0 = gx_now();
  gx_exec **todo = (gx_exec **)calloc(set->nexec ? set->nexec : 1, sizeof(gx_exec *));
  cgrt_status *status = (cgrt_status *)calloc(set->nexec ? set->nexec : 1, sizeof(cgrt_status));
  char *msg = (char *)calloc(set->nexec ? set->nexec : 1, 1024);
  if (!todo || !status || !msg) {
    free(todo);
    free(status);
    free(msg);
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_graphs_capture");
  }
  for (size_t i = 0; i < set->nexec; i++) {
    gx_exec *e = &set->execs[i];
    if (only != NULL ? e != only : e->captured) continue;
    if (e->is_while && set->while_unsupported) continue;
    todo[n++] = e;
  }
  gx_capture_buckets(set, todo, n, status, msg);
  for (size_t i = 0; i < n; i++) {
    gx_exec *e = todo[i];
    cgrt_status st = status[i];
    if (st == CGRT_SUCCESS) {
      ok++;
      continue;
    }
    if (e->is_while && st == CGRT_ERROR_NOT_SUPPORTED) {
      /* No conditional nodes on this driver (logged by gx_capture_buckets): the unrolled
       * draft loops serve. */
      set->while_unsupported = 1;
      continue;
    }
    failed++;
    cgrt__log(CGRT_LOG_WARN, "cgrt graphs: %s", msg + i * 1024);
    if (first == CGRT_SUCCESS) {
      first = st;
      strncpy(first_msg, msg + i * 1024, sizeof(first_msg) - 1);
    }
  }
  free(todo);
  free(status);
  free(msg);
  gx_lut_build(set);
  cgrt__log(CGRT_LOG_INFO, "cgrt graphs: captured %zu graphs (%zu failed) in %.3f s", ok, failed,
            gx_now() - t0);
  if (first != CGRT_SUCCESS) {
    if (first != CGRT_ERROR_OUT_OF_MEMORY) first = CGRT_ERROR_CAPTURE_FAILED;
    return cgrt__fail(first, "%s%s", first_msg,
                      failed > 1 ? " (and more buckets failed; see the log)" : "");
  }
  return CGRT_SUCCESS;
}

cgrt_status cgrt_graphs_capture(cgrt_graphs *set) {
  cgrt_status st = gx_enter_outside_capture(set, "cgrt_graphs_capture");
  if (st != CGRT_SUCCESS) return st;
  pthread_mutex_lock(&set->mu);
  st = capture_locked(set, NULL);
  pthread_mutex_unlock(&set->mu);
  return st;
}

cgrt_status cgrt_graphs_recapture(cgrt_graphs *set, cgrt_graph_mode mode, int rows) {
  cgrt_status st = gx_enter_outside_capture(set, "cgrt_graphs_recapture");
  if (st != CGRT_SUCCESS) return st;
  if (!gx_is_step_mode(mode) || rows < 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_recapture: mode %d, rows %d (rows must be >= 1)",
                      (int)mode, rows);
  pthread_mutex_lock(&set->mu);
  gx_exec *best = NULL;
  for (size_t i = 0; i < set->nexec; i++) {
    gx_exec *e = &set->execs[i];
    if (e->draft || e->mode != mode || e->rows < rows) continue;
    if (best == NULL || e->rows < best->rows) best = e;
  }
  if (best == NULL)
    st = cgrt__fail(CGRT_ERROR_NO_BUCKET, "cgrt_graphs_recapture: no bucket holds %d rows", rows);
  else
    st = capture_locked(set, best);
  pthread_mutex_unlock(&set->mu);
  return st;
}

static void free_ranges(cgrt_range *r, size_t n, uint64_t *key, unsigned char *seen) {
  for (size_t i = 0; i < n; i++) free((void *)r[i].what);
  free(r);
  free(key);
  free(seen);
}

cgrt_status cgrt_graphs_set_ranges(cgrt_graphs *set, const cgrt_range *ranges, size_t count) {
  cgrt_status st = gx_enter(set, "cgrt_graphs_set_ranges");
  if (st != CGRT_SUCCESS) return st;
  if (count > 0 && ranges == NULL)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_set_ranges: ranges is NULL");
  if (count > CGRT_GRAPHS_MAX_RANGES) /* before any entry is read */
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_set_ranges: %zu ranges (max %d)", count,
                      CGRT_GRAPHS_MAX_RANGES);
  for (size_t i = 0; i < count; i++)
    if (!gx_range_ok(ranges[i].base, ranges[i].bytes))
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "cgrt_graphs_set_ranges: ranges[%zu] ('%s'): base 0x%llx, %zu bytes: a range needs a non-zero "
                        "base and size and must end at or below 2^64",
                        i, ranges[i].what ? ranges[i].what : "", (unsigned long long)ranges[i].base, ranges[i].bytes);
  cgrt_range *copy = (cgrt_range *)calloc(count ? count : 1, sizeof(cgrt_range));
  uint64_t *key = (uint64_t *)calloc(count ? count : 1, sizeof(uint64_t));
  unsigned char *seen = (unsigned char *)calloc(count ? count : 1, 1);
  if (copy == NULL || key == NULL || seen == NULL) {
    free_ranges(copy, 0, key, seen);
    return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_graphs_set_ranges");
  }
  for (size_t i = 0; i < count; i++) {
    copy[i] = ranges[i];
    copy[i].what = strdup(ranges[i].what ? ranges[i].what : "");
    if (copy[i].what == NULL) {
      free_ranges(copy, i, key, seen);
      return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_graphs_set_ranges");
    }
    /* The identity of the range's allocation now: checked replay compares it. */
    CUresult r = cgrt__buffer_id(set->drv, ranges[i].base, ranges[i].bytes, &key[i]);
    if (r != CUDA_SUCCESS) {
      free_ranges(copy, i + 1, key, seen);
      if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_FOUND)
        return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                          "cgrt_graphs_set_ranges: range %zu ('%s', 0x%llx, %zu bytes) is not inside one live device "
                          "allocation", i, ranges[i].what ? ranges[i].what : "", (unsigned long long)ranges[i].base,
                          ranges[i].bytes);
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuPointerGetAttribute", "cgrt_graphs_set_ranges");
    }
  }
  pthread_mutex_lock(&set->mu);
  cgrt_range *old = set->ranges;
  uint64_t *old_key = set->range_key;
  unsigned char *old_seen = set->range_seen;
  size_t nold = set->nranges;
  set->ranges = copy;
  set->range_key = key;
  set->range_seen = seen;
  set->nranges = count;
  pthread_mutex_unlock(&set->mu);
  free_ranges(old, nold, old_key, old_seen);
  return CGRT_SUCCESS;
}

CUstream cgrt_graphs_stream(cgrt_graphs *set) {
  return gx_enter(set, "cgrt_graphs_stream") == CGRT_SUCCESS ? set->stream : NULL;
}

cgrt_status cgrt_graphs_synchronize(cgrt_graphs *set) {
  cgrt_status st = gx_enter_outside_capture(set, "cgrt_graphs_synchronize");
  if (st != CGRT_SUCCESS) return st;
  pthread_mutex_lock(&set->mu);
  st = set->dl.enabled ? gx_dl_synchronize(set)
                       : CGRT__CU(set->drv, cuStreamSynchronize, (set->stream), CGRT_ERROR_DRIVER,
                                  "cgrt_graphs_synchronize");
  pthread_mutex_unlock(&set->mu);
  return st;
}

cgrt_status cgrt_graphs_get_stats(cgrt_graphs *set, cgrt_graphs_stats *stats) {
  cgrt_status st = gx_enter(set, "cgrt_graphs_get_stats");
  if (st != CGRT_SUCCESS) return st;
  if (stats == NULL || stats->size < sizeof(cgrt_graphs_stats))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_get_stats: stats NULL or size too small");
  pthread_mutex_lock(&set->mu);
  cgrt_graphs_stats s = set->st;
  s.size = sizeof(s);
  s.last_device_step_ns = gx_dl_last_step_ns(set);
  s.buckets = 0;
  s.nodes = 0;
  s.capture_seconds = 0;
  s.graph_memory_bytes = 0;
  for (size_t i = 0; i < set->nexec; i++) {
    const gx_exec *e = &set->execs[i];
    if (!e->captured) continue;
    s.buckets++;
    s.nodes += e->nodes;
    s.capture_seconds += e->capture_s + e->instantiate_s;
    s.graph_memory_bytes += e->memory_bytes;
    if (e->is_while) s.draft_while_available = 1;
  }
  pthread_mutex_unlock(&set->mu);
  *stats = s;
  return CGRT_SUCCESS;
}

size_t cgrt_graphs_bucket_count(cgrt_graphs *set) {
  return gx_enter(set, "cgrt_graphs_bucket_count") == CGRT_SUCCESS ? set->nexec : 0;
}

cgrt_status cgrt_graphs_get_bucket(cgrt_graphs *set, size_t index, cgrt_bucket_info *info) {
  cgrt_status st = gx_enter(set, "cgrt_graphs_get_bucket");
  if (st != CGRT_SUCCESS) return st;
  if (info == NULL || info->size < sizeof(cgrt_bucket_info) || index >= set->nexec)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_get_bucket: index %zu of %zu", index, set->nexec);
  pthread_mutex_lock(&set->mu);
  const gx_exec *e = &set->execs[index];
  memset(info, 0, sizeof(*info));
  info->size = sizeof(*info);
  info->mode = e->mode;
  info->draft = e->draft;
  info->draft_while = e->is_while;
  info->rows = e->rows;
  info->captured = e->captured;
  info->nodes = e->nodes;
  info->patch_sites = e->nsites;
  info->capture_seconds = e->capture_s;
  info->instantiate_seconds = e->instantiate_s;
  info->memory_bytes = e->memory_bytes;
  info->replays = e->replays;
  info->device_patch = e->dpatch;
  info->table_bytes = e->table_bytes;
  info->pinned_bytes = e->pinned_bytes;
  info->patch_param_bytes = e->param_bytes;
  /* Nodes a move patches through a driver call: kernel nodes with sites that the patch
   * node does not rewrite, and every memcpy/memset node with a site. */
  size_t host = 0;
  for (size_t i = 0; i < e->nk; i++)
    if (e->knodes[i].nsites > 0 && e->knodes[i].devnode == 0) host++;
  for (size_t i = 0; i < e->nm; i++) {
    for (size_t j = 0; j < e->nsites; j++)
      if (e->sites[j].kind != GX_SITE_KPARAM && e->sites[j].node == i) {
        host++;
        break;
      }
  }
  info->host_patch_nodes = host;
  info->device_launch = e->captured && e->dlaunch;
  pthread_mutex_unlock(&set->mu);
  return CGRT_SUCCESS;
}

cgrt_status cgrt_graphs_bucket_exec(cgrt_graphs *set, size_t index, unsigned launches, CUgraphExec *exec) {
  cgrt_status st = gx_enter(set, "cgrt_graphs_bucket_exec");
  if (st != CGRT_SUCCESS) return st;
  if (exec == NULL || index >= set->nexec || launches > GX_DIRECT_LAUNCHES)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_bucket_exec: exec %s, index %zu of %zu, %u launches "
                      "(at most %d)", exec ? "given" : "NULL", index, set->nexec, launches, GX_DIRECT_LAUNCHES);
  pthread_mutex_lock(&set->mu);
  gx_exec *e = &set->execs[index];
  if (!e->captured)
    st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_bucket_exec: bucket %zu (%s, %d rows) is not captured",
                    index, gx_mode_name(e), e->rows);
  else
    st = gx_dl_quiesce(set); /* bare host launches come after the device-launched steps */
  if (st == CGRT_SUCCESS) {
    st = gx_dpatch_reserve(set, e, launches);
    gx_dl_host_launched(set);
  }
  CUgraphExec x = e->exec;
  pthread_mutex_unlock(&set->mu);
  if (st == CGRT_SUCCESS) *exec = x;
  return st;
}
