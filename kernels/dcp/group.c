/* DCP groups (cgrt/cgrt_dcp.h): creation at warm-up (communicator, MLA plan, buffers),
 * the failure protocol (abort, failed group, bounded waits), agreement and info. The
 * step itself is in kernels/dcp/step.c. Design: docs/dcp.md. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cgrt/cgrt_memory.h"
#include "kernels/dcp/dcp_internal.h"
#include "runtime/handles.h"

void cgrt_dcp_options_init(cgrt_dcp_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->world_size = 1;
  o->timeout_ms = 60000;
  o->gather_q = 1;
  o->merge = CGRT_DCP_MERGE_AUTO;
  cgrt_mla_options_init(&o->mla);
}

int cgrt_dcp_local_len(int global_len, int rank, int world, int interleave) {
  if (world < 1 || rank < 0 || rank >= world || interleave < 1) return -1;
  if (global_len <= 0) return 0;
  const long long cycle = (long long)interleave * world;
  const long long full = global_len / cycle, rem = global_len % cycle;
  long long tail = rem - (long long)rank * interleave;
  tail = tail < 0 ? 0 : (tail > interleave ? interleave : tail);
  return (int)(full * interleave + tail);
}

/* The NCCL of a runtime: the emulated one over the emulation, else libnccl.so.2; wrapped
 * for fault injection when the runtime's driver is. */
static cgrt_status pick_nccl(cgrt_runtime *rt, const char *library, const cgrt__nccl **out, const char *api) {
  const cgrt__nccl *t = NULL;
  if (rt->drv->is_emulated) {
    t = cgrt__nccl_emulated();
  } else {
    char msg[1024] = "";
    t = cgrt__nccl_real(library, msg, sizeof msg);
    if (!t) return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: %s", api, msg);
  }
  if (strncmp(rt->drv->name, "fault", 5) == 0) {
    t = cgrt__nccl_fault(t);
    if (!t) return cgrt__fail(CGRT_ERROR_NOT_SUPPORTED, "%s: four NCCL tables are wrapped already", api);
  }
  *out = t;
  return CGRT_SUCCESS;
}

cgrt_status cgrt_dcp_unique_id(cgrt_runtime *rt, const char *nccl_library, cgrt_dcp_id *out) {
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_dcp_unique_id");
  if (st) return st;
  if (!out) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_dcp_unique_id: out is NULL");
  const cgrt__nccl *t = NULL;
  if ((st = pick_nccl(rt, nccl_library, &t, "cgrt_dcp_unique_id"))) return st;
  _Static_assert(sizeof(ncclUniqueId) == CGRT_DCP_ID_BYTES, "cgrt_dcp_id holds an ncclUniqueId");
  ncclUniqueId id;
  ncclResult_t r = t->ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    return cgrt__fail(CGRT_ERROR_DRIVER, "cgrt_dcp_unique_id: ncclGetUniqueId failed with %s (%s)",
                      cgrt__nccl_result_name(r), t->ncclGetErrorString(r));
  memcpy(out->bytes, id.internal, sizeof id.internal);
  return CGRT_SUCCESS;
}

uint64_t cgrt__dcp_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap(void) {
  struct timespec ts = {0, 20000}; /* 20 us */
  nanosleep(&ts, NULL);
}

cgrt_status cgrt__dcp_fail(cgrt_dcp_group *g, const char *what, ncclResult_t r) {
  const char *name = cgrt__nccl_result_name(r), *text = g->nccl->ncclGetErrorString(r);
  if (g->comm) {
    g->nccl->ncclCommAbort(g->comm);
    g->comm = NULL;
  }
  g->failed = 1;
  return cgrt__fail(CGRT_ERROR_DRIVER,
                    "%s failed with %s (%s) on rank %d of %d; the group's communicator is aborted: destroy the "
                    "group and create a new one",
                    what, name, text ? text : "", g->o.rank, g->o.world_size);
}

cgrt_status cgrt__dcp_failed(const cgrt_dcp_group *g, const char *api) {
  return cgrt__fail(CGRT_ERROR_DRIVER,
                    "%s: the group (rank %d of %d) failed earlier and its communicator is aborted: destroy it and "
                    "create a new one",
                    api, g->o.rank, g->o.world_size);
}

cgrt_status cgrt__dcp_settle(cgrt_dcp_group *g, ncclResult_t r, const char *what) {
  if (r == ncclInProgress) {
    /* A non-blocking communicator may still be enqueueing: poll, bounded. */
    const uint64_t until = cgrt__dcp_now_ms() + (uint64_t)g->o.timeout_ms;
    for (;;) {
      ncclResult_t a = ncclSuccess;
      r = g->nccl->ncclCommGetAsyncError(g->comm, &a);
      if (r != ncclSuccess) break;
      r = a;
      if (a != ncclInProgress) break;
      if (cgrt__dcp_now_ms() > until) {
        cgrt__dcp_fail(g, what, ncclInProgress);
        return cgrt__fail(CGRT_ERROR_DRIVER, "%s: still in progress after %d ms; %s", what, g->o.timeout_ms,
                          cgrt_last_error());
      }
      nap();
    }
  }
  return r == ncclSuccess ? CGRT_SUCCESS : cgrt__dcp_fail(g, what, r);
}

cgrt_status cgrt__dcp_check_async(cgrt_dcp_group *g, const char *api) {
  ncclResult_t a = ncclSuccess;
  ncclResult_t r = g->nccl->ncclCommGetAsyncError(g->comm, &a);
  if (r != ncclSuccess) return cgrt__dcp_fail(g, "ncclCommGetAsyncError", r);
  if (a == ncclSuccess || a == ncclInProgress) return CGRT_SUCCESS;
  char what[96];
  snprintf(what, sizeof what, "%s: an NCCL operation", api);
  return cgrt__dcp_fail(g, what, a);
}

/* Waits for the work on `stream` (an event recorded now), bounded by timeout_ms,
 * watching NCCL's asynchronous error. */
static cgrt_status wait_stream(cgrt_dcp_group *g, CUstream stream, const char *api) {
  const cgrt__driver *d = g->rt->drv;
  cgrt_status st = CGRT__CU(d, cuEventRecord, (g->event, stream), CGRT_ERROR_DRIVER, api);
  if (st) return st;
  const uint64_t until = cgrt__dcp_now_ms() + (uint64_t)g->o.timeout_ms;
  for (;;) {
    CUresult q = d->cuEventQuery(g->event);
    if (q == CUDA_SUCCESS) break;
    if (q != CUDA_ERROR_NOT_READY) return cgrt__fail_cu(CGRT_ERROR_DRIVER, q, "cuEventQuery", api);
    if ((st = cgrt__dcp_check_async(g, api))) return st;
    if (cgrt__dcp_now_ms() > until) {
      cgrt__dcp_fail(g, api, ncclInProgress);
      return cgrt__fail(CGRT_ERROR_DRIVER, "%s: the stream's work did not finish within %d ms (a rank missing?); %s",
                        api, g->o.timeout_ms, cgrt_last_error());
    }
    nap();
  }
  return cgrt__dcp_check_async(g, api);
}

static cgrt_status enter(cgrt_dcp_group *g, const char *api) {
  if (!cgrt__handle_live(g, CGRT__HANDLE_DCP_GROUP))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "%s: group is NULL or destroyed", api);
  cgrt_status st = cgrt__runtime_enter(g->rt, api);
  if (st) return st;
  return g->failed ? cgrt__dcp_failed(g, api) : CGRT_SUCCESS;
}

cgrt_status cgrt_dcp_wait(cgrt_dcp_group *g, CUstream stream) {
  cgrt_status st = enter(g, "cgrt_dcp_wait");
  if (st) return st;
  if ((st = cgrt__refuse_in_capture("cgrt_dcp_wait"))) return st;
  return wait_stream(g, stream, "cgrt_dcp_wait");
}

cgrt_status cgrt_dcp_agree(cgrt_dcp_group *g, int ok, int *all_ok) {
  if (all_ok) *all_ok = 0;
  cgrt_status st = enter(g, "cgrt_dcp_agree");
  if (st) return st;
  if (!all_ok) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_dcp_agree: all_ok is NULL");
  if ((st = cgrt__refuse_in_capture("cgrt_dcp_agree"))) return st;
  const cgrt__driver *d = g->rt->drv;
  st = CGRT__CU(d, cuMemsetD32Async, (g->flag, ok ? 1u : 0u, 1, g->stream), CGRT_ERROR_DRIVER, "cgrt_dcp_agree");
  if (st) return st;
  ncclResult_t r = g->nccl->ncclAllReduce((const void *)(uintptr_t)g->flag, (void *)(uintptr_t)g->flag, 1, ncclInt32,
                                          ncclMin, g->comm, g->stream);
  if ((st = cgrt__dcp_settle(g, r, "cgrt_dcp_agree: ncclAllReduce"))) return st;
  int v = 0;
  st = CGRT__CU(d, cuMemcpyDtoHAsync, (&v, g->flag, sizeof v, g->stream), CGRT_ERROR_DRIVER, "cgrt_dcp_agree");
  if (st) return st;
  if ((st = wait_stream(g, g->stream, "cgrt_dcp_agree"))) return st;
  *all_ok = v == 1;
  return CGRT_SUCCESS;
}

/* ---- creation ---- */
static cgrt_status check_options(const cgrt_dcp_options *o) {
  const char *api = "cgrt_dcp_group_create";
  if (o->size < sizeof(cgrt_dcp_options))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: options->size %zu is below %zu (sizeof(cgrt_dcp_options))",
                      api, o->size, sizeof(cgrt_dcp_options));
  if (o->world_size < 1 || o->world_size > CGRT__DCP_MAX_RANKS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: world_size %d is not in 1..%d", api, o->world_size,
                      CGRT__DCP_MAX_RANKS);
  if (o->rank < 0 || o->rank >= o->world_size)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: rank %d is not in 0..%d", api, o->rank, o->world_size - 1);
  if (o->timeout_ms < 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: timeout_ms %d is not >= 1", api, o->timeout_ms);
  if (o->gather_q != 0 && o->gather_q != 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: gather_q %d is not 0 or 1", api, o->gather_q);
  if (o->merge < CGRT_DCP_MERGE_AUTO || o->merge > CGRT_DCP_MERGE_REDUCE_SCATTER)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: merge %d is not a cgrt_dcp_merge", api, (int)o->merge);
  if (o->mla.size < sizeof(cgrt_mla_options))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: options->mla.size %zu is below %zu (cgrt_mla_options_init)",
                      api, o->mla.size, sizeof(cgrt_mla_options));
  return CGRT_SUCCESS;
}

static cgrt_status alloc_buf(cgrt_dcp_group *g, size_t bytes, CUdeviceptr *out) {
  cgrt_status st = cgrt_mem_alloc(g->rt, bytes, out);
  if (st == CGRT_SUCCESS) g->buffer_bytes += bytes;
  return st;
}

static void release(cgrt_dcp_group *g) {
  const cgrt__driver *d = g->rt->drv;
  if (g->comm) {
    if (g->failed) g->nccl->ncclCommAbort(g->comm);
    else g->nccl->ncclCommDestroy(g->comm);
    g->comm = NULL;
  }
  cgrt_mla_plan_destroy(g->plan);
  CUdeviceptr *bufs[] = {&g->q_local, &g->q_raw, &g->q_full, &g->part_out, &g->part_lse, &g->send, &g->recv, &g->lse_all, &g->flag};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (*bufs[i]) {
      cgrt_status st = cgrt_mem_free(g->rt, *bufs[i]);
      if (st) cgrt__log(CGRT_LOG_WARN, "cgrt_dcp_group_destroy: %s", cgrt_last_error());
    }
  if (g->event) CGRT__CU_WARN(d, cuEventDestroy, (g->event), "cgrt_dcp_group_destroy");
  if (g->stream) CGRT__CU_WARN(d, cuStreamDestroy, (g->stream), "cgrt_dcp_group_destroy");
}

static void destroy_child(void *obj) { cgrt_dcp_group_destroy((cgrt_dcp_group *)obj); }

/* Joins the communicator without blocking and waits, bounded, for every rank. */
static cgrt_status join(cgrt_dcp_group *g) {
  cgrt__nccl_config cfg = {sizeof cfg, CGRT__NCCL_CONFIG_MAGIC, CGRT__NCCL_CONFIG_VERSION, 0 /* non-blocking */,
                           CGRT__NCCL_UNDEF_INT, CGRT__NCCL_UNDEF_INT, CGRT__NCCL_UNDEF_INT, NULL,
                           CGRT__NCCL_UNDEF_INT};
  ncclUniqueId id;
  memcpy(id.internal, g->o.id.bytes, sizeof id.internal);
  ncclComm_t comm = NULL;
  ncclResult_t r = g->nccl->ncclCommInitRankConfig(&comm, g->o.world_size, id, g->o.rank, &cfg);
  g->comm = comm;
  if (r != ncclSuccess && r != ncclInProgress) {
    char what[96];
    snprintf(what, sizeof what, "cgrt_dcp_group_create: ncclCommInitRankConfig");
    return cgrt__dcp_fail(g, what, r);
  }
  const uint64_t until = cgrt__dcp_now_ms() + (uint64_t)g->o.timeout_ms;
  for (;;) {
    ncclResult_t a = ncclSuccess;
    r = g->nccl->ncclCommGetAsyncError(g->comm, &a);
    if (r != ncclSuccess) return cgrt__dcp_fail(g, "cgrt_dcp_group_create: ncclCommGetAsyncError", r);
    if (a == ncclSuccess) return CGRT_SUCCESS;
    if (a != ncclInProgress) return cgrt__dcp_fail(g, "cgrt_dcp_group_create: joining the communicator", a);
    if (cgrt__dcp_now_ms() > until) {
      cgrt__dcp_fail(g, "cgrt_dcp_group_create: joining the communicator", ncclInProgress);
      return cgrt__fail(CGRT_ERROR_DRIVER, "cgrt_dcp_group_create: not every rank joined within %d ms; %s",
                        g->o.timeout_ms, cgrt_last_error());
    }
    nap();
  }
}

cgrt_status cgrt_dcp_group_create(cgrt_runtime *rt, const cgrt_dcp_options *opts, cgrt_dcp_group **out) {
  if (out) *out = NULL;
  const char *api = "cgrt_dcp_group_create";
  cgrt_status st = cgrt__runtime_enter_outside_capture(rt, api);
  if (st) return st;
  if (!opts || !out) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, !opts ? "options" : "out");
  if ((st = check_options(opts))) return st;
  const cgrt__nccl *nccl = NULL;
  if ((st = pick_nccl(rt, opts->nccl_library, &nccl, api))) return st;

  cgrt_dcp_group *g = (cgrt_dcp_group *)cgrt__handle_alloc(sizeof *g);
  if (!g) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "%s: host allocation", api);
  g->rt = rt;
  g->nccl = nccl;
  g->o = *opts;
  g->o.nccl_library = NULL; /* not kept: the caller's string */
  g->o.mla.dcp_world_size = opts->world_size;
  if ((st = cgrt_mla_plan_create(rt, &g->o.mla, &g->plan))) {
    cgrt__error_prefix("%s", api);
    goto fail;
  }
  {
    const size_t W = (size_t)g->o.world_size, H = (size_t)g->o.mla.heads;
    g->max_rows = g->o.mla.max_num_seqs * g->o.mla.block_len;
    const size_t R = (size_t)g->max_rows;
    const size_t seg = cgrt__dcp_segment_bytes(g->max_rows, g->o.mla.heads);
    if (g->o.gather_q) {
      if ((st = alloc_buf(g, R * H * CGRT__DCP_D * 2, &g->q_local))) goto fail;
      if ((st = alloc_buf(g, W * R * H * CGRT__DCP_D * 2, &g->q_raw))) goto fail;
      if ((st = alloc_buf(g, W * R * H * CGRT__DCP_D * 2, &g->q_full))) goto fail;
    }
    if ((st = alloc_buf(g, W * R * H * CGRT_DCP_DV * 2, &g->part_out))) goto fail;
    if ((st = alloc_buf(g, W * R * H * 4, &g->part_lse))) goto fail;
    if ((st = alloc_buf(g, W * seg, &g->send))) goto fail;
    if ((st = alloc_buf(g, W * seg, &g->recv))) goto fail;
    if ((st = alloc_buf(g, W * R * W * H * 4, &g->lse_all))) goto fail;
    if ((st = alloc_buf(g, 256, &g->flag))) goto fail;
  }
  if ((st = cgrt__runtime_function(rt, "cgrt_dcp_merge", &g->merge_fn))) goto fail;
  if ((st = cgrt__runtime_function(rt, "cgrt_dcp_transpose", &g->transpose_fn))) goto fail;
  if ((st = cgrt__runtime_function(rt, "cgrt_dcp_rescale", &g->rescale_fn))) goto fail;
  if ((st = CGRT__CU(rt->drv, cuStreamCreate, (&g->stream, CU_STREAM_NON_BLOCKING), CGRT_ERROR_DRIVER, api))) goto fail;
  if ((st = CGRT__CU(rt->drv, cuEventCreate, (&g->event, CU_EVENT_DISABLE_TIMING), CGRT_ERROR_DRIVER, api))) goto fail;
  if ((st = join(g))) goto fail;
  if ((st = cgrt__runtime_adopt(rt, g, CGRT__HANDLE_DCP_GROUP, &g->child, destroy_child, "dcp group", api))) {
    g->failed = 1; /* the others joined: abort so that they do not wait on this rank */
    goto fail;
  }
  *out = g;
  return CGRT_SUCCESS;
fail:
  release(g);
  cgrt__handle_free(g);
  return st;
}

void cgrt_dcp_group_destroy(cgrt_dcp_group *g) {
  if (!g || !cgrt__handle_remove(g, CGRT__HANDLE_DCP_GROUP)) return;
  if (cgrt__runtime_enter(g->rt, "cgrt_dcp_group_destroy") != CGRT_SUCCESS)
    cgrt__log(CGRT_LOG_WARN, "%s", cgrt_last_error());
  release(g);
  cgrt__runtime_detach(g->rt, &g->child);
  cgrt__handle_free(g);
}

cgrt_status cgrt_dcp_group_get_info(const cgrt_dcp_group *g, cgrt_dcp_info *info) {
  if (!cgrt__handle_live(g, CGRT__HANDLE_DCP_GROUP))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_dcp_group_get_info: group is NULL or destroyed");
  if (!info || info->size < sizeof *info)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_dcp_group_get_info: info is NULL or info->size is too small");
  info->world_size = g->o.world_size;
  info->rank = g->o.rank;
  info->nccl_version = g->nccl->version;
  if (g->nccl->path[0])
    snprintf(info->nccl, sizeof info->nccl, "%s %s", g->nccl->name, g->nccl->path);
  else
    snprintf(info->nccl, sizeof info->nccl, "%s", g->nccl->name);
  info->failed = g->failed;
  info->buffer_bytes = g->buffer_bytes;
  info->merge = cgrt__dcp_pick_merge(g, g->max_rows);
  info->plan = g->plan;
  return CGRT_SUCCESS;
}
