/* The step: dispatch, bindings, padding, patch, launch (and the eager fallback). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "graphs/graphs_internal.h"

/* After a failed node update the executable's state is unknown: force a full re-patch. */
static void poison_applied(cgrt_graphs *set, gx_exec *e) {
  for (size_t b = 0; b < set->nbuf; b++) e->applied[b] = ~(CUdeviceptr)0;
  e->last_reqs = -1;
  e->synced_gen = ~(uint64_t)0;
  e->nmoved = 0; /* the next step moves every buffer again */
  e->reqs_moved = 0;
}

static int buffers_moved(const cgrt_graphs *set, const gx_exec *e) {
  for (size_t b = 0; b < set->nbuf; b++)
    if (e->applied[b] != set->current[b] && e->site_start[b + 1] > e->site_start[b]) return 1;
  return 0;
}

/* Whole-graph update: re-capture with the current addresses, cuGraphExecUpdate, and
 * re-instantiate when the update is refused (topology or node kind changed). */
static cgrt_status exec_update(cgrt_graphs *set, gx_exec *e) {
  const cgrt__driver *drv = set->drv;
  CUgraph g = NULL, body = NULL;
  cgrt_status st = gx_capture_graph(set, e, &g, &body);
  if (st != CGRT_SUCCESS) {
    if (st == CGRT_ERROR_NOT_SUPPORTED) st = CGRT_ERROR_CAPTURE_FAILED;
    return st;
  }
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof(info));
  /* A WHILE graph is always re-instantiated: the new graph has its own conditional handle,
   * which the stored parameters of its loop kernels must match. */
  CUresult r = e->is_while ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE : drv->cuGraphExecUpdate(e->exec, g, &info);
  if (r == CUDA_SUCCESS) {
    /* Bring the stored copies in line with what the executable now holds. */
    size_t ndk = 0, ndm = 0;
    gx_index_apply(set, e, set->current, &ndk, &ndm);
    gx_index_clear(e, ndk, ndm);
    if (e->nmeta > 0) {
      ndk = 0;
      gx_index_set_reqs(e, 0, &ndk); /* the new graph holds num_reqs 0 */
      gx_index_clear(e, ndk, 0);
    }
    drv->cuGraphDestroy(g);
    set->st.exec_updates++;
    return CGRT_SUCCESS;
  }
  if (!e->is_while)
    cgrt__log(CGRT_LOG_DEBUG, "cgrt graphs: cuGraphExecUpdate refused (%s, result %d); re-instantiating",
              cgrt__curesult_name(r), (int)info.result);
  CUgraphExec x = NULL;
  r = drv->cuGraphInstantiateWithFlags(&x, g, 0);
  if (r == CUDA_SUCCESS) r = drv->cuGraphUpload(x, set->stream);
  if (r != CUDA_SUCCESS) {
    if (x != NULL) drv->cuGraphExecDestroy(x);
    drv->cuGraphDestroy(g);
    poison_applied(set, e);
    return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphInstantiateWithFlags",
                         "re-instantiating after a refused cuGraphExecUpdate");
  }
  gx_index_free(e);
  drv->cuGraphExecDestroy(e->exec);
  drv->cuGraphDestroy(e->graph);
  e->exec = x;
  e->graph = g;
  e->body = body;
  st = gx_index_build(set, e);
  if (st != CGRT_SUCCESS) {
    gx_exec_release(set, e);
    gx_lut_build(set);
    return st;
  }
  set->st.reinstantiations++;
  return CGRT_SUCCESS;
}

static cgrt_status copy_bindings(cgrt_graphs *set, int out) {
  const cgrt__driver *drv = set->drv;
  for (size_t b = 0; b < set->nbuf; b++) {
    const cgrt_binding *bd = set->copy_bind[b];
    if (bd == NULL) continue;
    int dir = (int)set->bufs[b].dir;
    if (!(dir & (out ? CGRT_BUFFER_OUT : CGRT_BUFFER_IN))) continue;
    size_t n = bd->bytes ? bd->bytes : set->bufs[b].bytes;
    CUresult r = out ? drv->cuMemcpyDtoDAsync(bd->ptr, set->current[b], n, set->stream)
                     : drv->cuMemcpyDtoDAsync(set->current[b], bd->ptr, n, set->stream);
    if (r != CUDA_SUCCESS)
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuMemcpyDtoDAsync",
                           out ? "copy-out replay" : "copy-in replay");
    set->st.copies++;
  }
  return CGRT_SUCCESS;
}

/* The driver refused a node update inside a WHILE body: from now on this bucket is
 * re-captured and re-instantiated whenever one of its buffers moves. */
static cgrt_status while_refused(cgrt_graphs *set, gx_exec *e) {
  if (!set->while_refuse_logged) {
    cgrt__log(CGRT_LOG_WARN, "cgrt graphs: the driver refuses node updates inside a conditional body (%s); "
              "WHILE draft graphs are re-instantiated when a buffer they use moves",
              cgrt__curesult_name(set->flush_cu));
    set->while_refuse_logged = 1;
  }
  e->body_patch_refused = 1;
  poison_applied(set, e);
  return exec_update(set, e);
}

cgrt_status gx_replay(cgrt_graphs *set, gx_exec *e, int num_reqs) {
  cgrt_status st;
  size_t ndk, ndm;
  if (set->o.checked_replay) { /* before anything is re-captured, patched or launched */
    st = gx_check_buffers(set, e);
    if (st != CGRT_SUCCESS) return st;
  }
retry:
  ndk = ndm = 0;
  switch (set->o.replay_mode) {
    case CGRT_REPLAY_POINTER_UPDATE:
      if (e->body_patch_refused) {
        if (buffers_moved(set, e)) {
          st = exec_update(set, e);
          if (st != CGRT_SUCCESS) return st;
        }
        e->synced_gen = set->gen;
      } else if (e->synced_gen != set->gen) { /* O(1) when nothing moved since this bucket's last step */
        gx_index_catch_up(set, e, &ndk, &ndm);
      }
      break;
    case CGRT_REPLAY_EXEC_UPDATE:
      if (buffers_moved(set, e)) {
        st = exec_update(set, e);
        if (st != CGRT_SUCCESS) return st;
      }
      break;
    default:
      break;
  }
  if (e->nmeta > 0 && e->last_reqs != num_reqs) gx_index_set_reqs(e, num_reqs, &ndk);
  if (set->o.checked_replay) { /* the host copies hold this step's pointers; no node updated yet */
    st = gx_check_pointers(set, e);
    if (st != CGRT_SUCCESS) {
      gx_index_clear(e, ndk, ndm);
      poison_applied(set, e); /* the next step patches every site again */
      return st;
    }
  }
  /* Of a device-launched bucket: the nodes the host updates itself, which need the
   * executable idle and a re-upload (device patching delivers the others at the launch). */
  const size_t nhost = e->dlaunch && ndk + ndm > 0 ? gx_index_host_dirty(e, ndk, ndm) : 0;
  if (nhost > 0) {
    /* A host update of a device-launched executable: none of its launches may be queued,
     * and the device sees the update only after a new upload. */
    st = gx_dl_quiesce(set);
    if (st != CGRT_SUCCESS) {
      gx_index_clear(e, ndk, ndm);
      poison_applied(set, e);
      return st;
    }
  }
  if (ndk + ndm > 0) {
    st = gx_index_flush(set, e, ndk, ndm);
    if (st != CGRT_SUCCESS) {
      if (e->is_while && !e->body_patch_refused && set->o.replay_mode == CGRT_REPLAY_POINTER_UPDATE &&
          set->flush_in_body &&
          (set->flush_cu == CUDA_ERROR_NOT_SUPPORTED || set->flush_cu == CUDA_ERROR_INVALID_VALUE)) {
        st = while_refused(set, e);
        if (st != CGRT_SUCCESS) return st;
        goto retry;
      }
      poison_applied(set, e);
      return st;
    }
  }
  if (set->o.replay_mode == CGRT_REPLAY_COPY_IN) {
    st = copy_bindings(set, 0);
    if (st != CGRT_SUCCESS) return st;
  }
  if (nhost > 0) {
    st = CGRT__CU(set->drv, cuGraphUpload, (e->exec, set->stream), CGRT_ERROR_DRIVER,
                  "device launch: uploading a bucket after a host patch");
    if (st == CGRT_SUCCESS)
      st = CGRT__CU(set->drv, cuStreamSynchronize, (set->stream), CGRT_ERROR_DRIVER,
                    "device launch: uploading a bucket after a host patch");
    if (st != CGRT_SUCCESS) {
      poison_applied(set, e);
      return st;
    }
  }
  if (!e->dlaunch) { /* a host launch comes after the set's device-launched steps */
    st = gx_dl_quiesce(set);
    if (st != CGRT_SUCCESS) return st;
  }
  if (e->dpatch) {
    st = gx_dpatch_before_launch(set, e); /* this launch's mailbox slot */
    if (st != CGRT_SUCCESS) return st;
  }
  if (e->dlaunch) {
    st = gx_dl_trigger(set, e->exec);
    if (st != CGRT_SUCCESS) {
      if (e->dpatch) poison_applied(set, e);
      return st;
    }
  } else {
    CUresult r = set->drv->cuGraphLaunch(e->exec, set->stream);
    if (r != CUDA_SUCCESS) {
      if (e->dpatch) poison_applied(set, e);
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuGraphLaunch", "replaying a bucket");
    }
    gx_dl_host_launched(set);
  }
  if (e->dpatch) gx_dpatch_launched(e);
  e->replays++;
  set->st.replays++;
  if (set->o.replay_mode == CGRT_REPLAY_COPY_IN) {
    st = copy_bindings(set, 1);
    if (st != CGRT_SUCCESS) return st;
  }
  if (set->o.checked_replay) {
    st = gx_dl_quiesce(set);
    if (st == CGRT_SUCCESS) st = gx_check_after(set);
    if (st == CGRT_SUCCESS && e->is_while) st = gx_while_check_state(set, e);
    if (st != CGRT_SUCCESS) return st;
  }
  return CGRT_SUCCESS;
}

/* Applies bindings (lock held). Pointer/exec update: current addresses change for good.
 * Copy-in: remembered for this step only. */
static cgrt_status apply_bindings(cgrt_graphs *set, const cgrt_binding *bindings, size_t n,
                                  int *moved) {
  for (size_t i = 0; i < n; i++) {
    const cgrt_binding *bd = &bindings[i];
    if (bd->buffer < 0 || (size_t)bd->buffer >= set->nbuf || bd->ptr == 0)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_step: binding %zu: bad buffer id %d or null address",
                        i, bd->buffer);
    size_t reg = set->bufs[bd->buffer].bytes;
    if (!gx_range_ok(bd->ptr, bd->bytes ? bd->bytes : reg))
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                        "cgrt_graphs_step: binding %zu of '%s': address 0x%llx, %zu bytes: the bound range must end "
                        "at or below 2^64",
                        i, set->bufs[bd->buffer].name, (unsigned long long)bd->ptr, bd->bytes ? bd->bytes : reg);
    if (set->o.replay_mode == CGRT_REPLAY_COPY_IN) {
      if (bd->bytes > reg)
        return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                          "cgrt_graphs_step: binding of '%s' copies %zu bytes into a %zu-byte static buffer",
                          set->bufs[bd->buffer].name, bd->bytes, reg);
      set->copy_bind[bd->buffer] = bd;
    } else {
      if (bd->bytes != 0 && bd->bytes < reg)
        return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                          "cgrt_graphs_step: new '%s' holds %zu bytes, the graph was captured with %zu",
                          set->bufs[bd->buffer].name, bd->bytes, reg);
      if (set->current[bd->buffer] != bd->ptr) {
        *moved = 1;
        set->gen++;
        set->move_log[set->gen % GX_MOVE_LOG] = (uint32_t)bd->buffer;
      }
      set->current[bd->buffer] = bd->ptr;
      if (set->o.checked_replay) /* this allocation, from now on (a failure: asked again when checked) */
        (void)gx_key_buffer(set, (size_t)bd->buffer);
    }
  }
  return CGRT_SUCCESS;
}

static void clear_copy(cgrt_graphs *set, const cgrt_binding *bindings, size_t n) {
  if (set->o.replay_mode != CGRT_REPLAY_COPY_IN) return;
  for (size_t i = 0; i < n; i++)
    if (bindings[i].buffer >= 0 && (size_t)bindings[i].buffer < set->nbuf)
      set->copy_bind[bindings[i].buffer] = NULL;
}

static cgrt_status run_eagerly(cgrt_graphs *set, cgrt_graph_mode mode, int num_reqs) {
  int k = gx_rows_per_req(set, mode);
  cgrt_batch_desc d;
  memset(&d, 0, sizeof(d));
  d.mode = mode;
  d.block_len = k;
  d.num_reqs = d.padded_reqs = num_reqs;
  d.rows = d.padded_rows = num_reqs * k;
  d.buffers = set->current;
  d.num_buffers = set->nbuf;
  cgrt_status st = set->o.checked_replay ? gx_check_buffers(set, NULL) : CGRT_SUCCESS;
  if (st == CGRT_SUCCESS) st = gx_dl_quiesce(set); /* after the device-launched steps */
  if (st == CGRT_SUCCESS && set->o.replay_mode == CGRT_REPLAY_COPY_IN) st = copy_bindings(set, 0);
  if (st == CGRT_SUCCESS) {
    st = gx_run_eager(set, set->stream, &d, num_reqs, set->current);
    gx_dl_host_launched(set);
  }
  if (st == CGRT_SUCCESS && set->o.replay_mode == CGRT_REPLAY_COPY_IN) st = copy_bindings(set, 1);
  return st;
}

cgrt_status cgrt_graphs_step(cgrt_graphs *set, cgrt_graph_mode mode, int num_reqs,
                             const cgrt_binding *bindings, size_t num_bindings) {
  cgrt_status st = gx_enter_outside_capture(set, "cgrt_graphs_step");
  if (st != CGRT_SUCCESS) return st;
  if (!gx_is_step_mode(mode) || num_reqs < 1 ||
      num_reqs > set->o.max_num_seqs || (num_bindings > 0 && bindings == NULL))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_graphs_step: mode %d, num_reqs %d (max_num_seqs %d), %zu bindings",
                      (int)mode, num_reqs, set->o.max_num_seqs, num_bindings);
  if (!gx_mode_enabled(set, mode))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_step: mode %s is not enabled in this set",
                      gx_step_mode_name(mode));
  pthread_mutex_lock(&set->mu);
  int moved = 0;
  /* Every bucket of a mode holds one request: none for one request means none at all. */
  if (set->lut[gx_lut_of(mode)][1] == 0)
    st = cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                    "cgrt_graphs_step: mode %s is not captured (call cgrt_graphs_capture first; a mode whose every "
                    "bucket failed to capture has no graph either)",
                    gx_step_mode_name(mode));
  else
    st = apply_bindings(set, bindings, num_bindings, &moved);
  if (st == CGRT_SUCCESS) {
    uint32_t idx = set->lut[gx_lut_of(mode)][num_reqs];
    if (idx != 0) {
      st = gx_replay(set, &set->execs[idx - 1], num_reqs);
    } else if (set->o.fail_past_largest) {
      st = cgrt__fail(CGRT_ERROR_NO_BUCKET, "cgrt_graphs_step: %d %s requests exceed every captured bucket",
                      num_reqs, gx_step_mode_name(mode));
    } else {
      st = run_eagerly(set, mode, num_reqs);
      if (st == CGRT_SUCCESS) set->st.eager_fallbacks++;
    }
  }
  clear_copy(set, bindings, num_bindings);
  if (st == CGRT_SUCCESS) {
    set->st.steps++;
    if (moved || (set->o.replay_mode == CGRT_REPLAY_COPY_IN && num_bindings > 0)) set->st.rebinds++;
  }
  pthread_mutex_unlock(&set->mu);
  return st;
}

cgrt_status cgrt_graphs_draft(cgrt_graphs *set, int num_reqs, const cgrt_binding *bindings,
                              size_t num_bindings) {
  cgrt_status st = gx_enter_outside_capture(set, "cgrt_graphs_draft");
  if (st != CGRT_SUCCESS) return st;
  if (num_reqs < 1 || num_reqs > set->o.max_num_seqs || (num_bindings > 0 && bindings == NULL))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_graphs_draft: num_reqs %d (max_num_seqs %d)",
                      num_reqs, set->o.max_num_seqs);
  if (set->o.draft_steps < 2 || !set->o.enable_decode)
    return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "cgrt_graphs_draft: the set has no draft loop (draft_steps %d)",
                      set->o.draft_steps);
  pthread_mutex_lock(&set->mu);
  int moved = 0;
  st = apply_bindings(set, bindings, num_bindings, &moved);
  if (st != CGRT_SUCCESS) goto out;
  if (set->o.dcp_world_size > 1) {
    /* Rank-local lengths do not advance by one under DCP: one replay per step, the host
     * rebuilds the metadata in between. */
    if (!set->dcp_logged) {
      cgrt__log(CGRT_LOG_INFO, "cgrt graphs: dcp_world_size %d: draft loop runs as %d single-step "
                "replays with host-rebuilt metadata", set->o.dcp_world_size, set->o.draft_steps);
      set->dcp_logged = 1;
    }
    if (set->o.draft_rebuild == NULL) {
      st = cgrt__fail(CGRT_ERROR_NOT_SUPPORTED,
                      "cgrt_graphs_draft: dcp_world_size %d needs options.draft_rebuild",
                      set->o.dcp_world_size);
      goto out;
    }
    uint32_t idx = set->lut[GX_LUT_DECODE][num_reqs];
    cgrt_batch_desc d;
    memset(&d, 0, sizeof(d));
    d.mode = CGRT_GRAPH_DECODE;
    d.block_len = 1;
    d.num_reqs = d.rows = num_reqs;
    d.padded_reqs = d.padded_rows = idx ? set->execs[idx - 1].rows : num_reqs;
    d.buffers = set->current;
    d.num_buffers = set->nbuf;
    for (int i = 0; i < set->o.draft_steps && st == CGRT_SUCCESS; i++) {
      if (i > 0) {
        d.draft_step = i;
        /* The callback's work goes on the replay stream: after the device-launched step
         * before it, and before the next one (device_launch). */
        st = gx_dl_quiesce(set);
        if (st != CGRT_SUCCESS) break;
        gx_dl_host_launched(set);
        cgrt_status cb = set->o.draft_rebuild(set->o.user, set->stream, i, &d);
        if (cb != CGRT_SUCCESS) {
          st = cgrt__fail(CGRT_ERROR_CALLBACK_FAILED, "draft_rebuild for step %d returned %s", i,
                          cgrt_status_name(cb));
          break;
        }
      }
      if (idx) {
        st = gx_replay(set, &set->execs[idx - 1], num_reqs);
      } else if (set->o.fail_past_largest) {
        st = cgrt__fail(CGRT_ERROR_NO_BUCKET, "cgrt_graphs_draft: %d requests exceed every bucket", num_reqs);
      } else {
        st = run_eagerly(set, CGRT_GRAPH_DECODE, num_reqs);
        if (st == CGRT_SUCCESS) set->st.eager_fallbacks++;
      }
    }
  } else {
    uint32_t idx = set->lut[GX_LUT_DRAFT_WHILE][num_reqs]; /* the WHILE loop when captured, else unrolled */
    int is_while = idx != 0;
    if (idx == 0) idx = set->lut[GX_LUT_DRAFT][num_reqs];
    if (idx == 0) {
      st = cgrt__fail(CGRT_ERROR_NO_BUCKET, "cgrt_graphs_draft: no draft loop captured for %d requests",
                      num_reqs);
      goto out;
    }
    st = gx_replay(set, &set->execs[idx - 1], num_reqs);
    if (st == CGRT_SUCCESS && is_while) set->st.draft_while_loops++;
  }
  if (st == CGRT_SUCCESS) {
    set->st.draft_loops++;
    if (moved) set->st.rebinds++;
  }
out:
  clear_copy(set, bindings, num_bindings);
  pthread_mutex_unlock(&set->mu);
  return st;
}
