/* The DCP decode step (cgrt/cgrt_dcp.h): query all-gather, MLA over the shard, and the
 * all-to-all merge. Design: docs/dcp.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/dcp/dcp_internal.h"
#include "runtime/handles.h"

cgrt_dcp_merge cgrt__dcp_pick_merge(const cgrt_dcp_group *g, int rows) {
  (void)rows; /* AUTO: the all-to-all, as fast or faster at every shape measured on 2 H200s
               * (docs/dcp.md, "Measured on two H200s") */
  return g->o.merge == CGRT_DCP_MERGE_AUTO ? CGRT_DCP_MERGE_ALL_TO_ALL : g->o.merge;
}

/* cgrt_dcp_transpose: n_a x n_b blocks of `bytes` (see kernels/dcp/dcp.cu). */
static cgrt_status transpose(cgrt_dcp_group *g, CUstream s, CUdeviceptr src, CUdeviceptr dst, int na, int nb,
                             long long bytes, long long ssa, long long ssb, long long dsa, long long dsb) {
  void *params[] = {&src, &dst, &na, &nb, &bytes, &ssa, &ssb, &dsa, &dsb};
  return CGRT__CU(g->rt->drv, cuLaunchKernel,
                  (g->transpose_fn, (unsigned)na, (unsigned)nb, 1, 128, 1, 1, 0, s, params, NULL), CGRT_ERROR_DRIVER,
                  "cgrt_dcp_step: cgrt_dcp_transpose");
}

static cgrt_status check_args(const cgrt_dcp_group *g, const cgrt_dcp_args *a) {
  const char *api = "cgrt_dcp_step";
  if (!a) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: args is NULL", api);
  if (a->size < sizeof *a)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: args->size %zu is below %zu", api, a->size, sizeof *a);
  const struct {
    const char *name;
    CUdeviceptr p;
    unsigned align;
  } t[] = {{"q", a->q, 16},          {"kv_cache", a->kv_cache, 16}, {"block_table", a->block_table, 4},
           {"seq_lens", a->seq_lens, 4}, {"out", a->out, 16},         {"lse", a->lse, 4}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (!t[i].p && i != 5) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: args->%s is 0", api, t[i].name);
    if (t[i].p % t[i].align)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: args->%s is not %u-byte aligned", api, t[i].name,
                        t[i].align);
  }
  if (a->num_rows < 1 || a->num_rows > g->max_rows || a->num_rows % g->o.mla.block_len)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: num_rows %d is not a multiple of block_len %d in 1..%d", api,
                      a->num_rows, g->o.mla.block_len, g->max_rows);
  if (!isfinite(a->softmax_scale) || !(a->softmax_scale > 0))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "%s: softmax_scale %g is not finite and > 0", api,
                      (double)a->softmax_scale);
  return CGRT_SUCCESS;
}

/* The all-to-all merge: this rank's partials of rank j's heads go to rank j; the slices
 * received are merged in rank order into out/lse. */
static cgrt_status merge_all_to_all(cgrt_dcp_group *g, CUstream s, const cgrt_dcp_args *a) {
  const int W = g->o.world_size, H = g->o.mla.heads, rows = a->num_rows;
  const long long seg = (long long)cgrt__dcp_segment_bytes(rows, H), lse_off = (long long)rows * H * CGRT_DCP_DV * 2;
  const long long ob = (long long)H * CGRT_DCP_DV * 2, lb = (long long)H * 4;
  cgrt_status st;
  if ((st = transpose(g, s, g->part_out, g->send, rows, W, ob, W * ob, ob, ob, seg))) return st;
  if ((st = transpose(g, s, g->part_lse, g->send + lse_off, rows, W, lb, W * lb, lb, lb, seg))) return st;
  const cgrt__nccl *n = g->nccl;
  ncclResult_t r = n->ncclGroupStart();
  if (r != ncclSuccess) return cgrt__dcp_fail(g, "cgrt_dcp_step: ncclGroupStart", r);
  for (int j = 0; j < W && r == ncclSuccess; j++) {
    r = n->ncclSend((const void *)(uintptr_t)(g->send + j * seg), (size_t)seg, ncclUint8, j, g->comm, s);
    if (r == ncclSuccess)
      r = n->ncclRecv((void *)(uintptr_t)(g->recv + j * seg), (size_t)seg, ncclUint8, j, g->comm, s);
  }
  if (r != ncclSuccess) {
    n->ncclGroupEnd(); /* close the group; the communicator is aborted next */
    return cgrt__dcp_fail(g, "cgrt_dcp_step: ncclSend/ncclRecv", r);
  }
  if ((st = cgrt__dcp_settle(g, n->ncclGroupEnd(), "cgrt_dcp_step: ncclGroupEnd"))) return st;
  CUdeviceptr parts = g->recv, out = a->out, lse = a->lse;
  long long stride = seg;
  int fp32 = 0, items = rows * H;
  void *params[] = {&parts, &stride, (void *)&lse_off, &fp32, (void *)&W, &items, &out, &lse};
  return CGRT__CU(g->rt->drv, cuLaunchKernel,
                  (g->merge_fn, (unsigned)items, 1, 1, 128, 1, 1, 0, s, params, NULL), CGRT_ERROR_DRIVER,
                  "cgrt_dcp_step: cgrt_dcp_merge");
}

/* The reduce-scatter merge: all-gather the LSEs, rescale this rank's partials into
 * per-rank slices [j][rows][heads][512], and sum the slices over the ranks into out. */
static cgrt_status merge_reduce_scatter(cgrt_dcp_group *g, CUstream s, const cgrt_dcp_args *a) {
  int W = g->o.world_size, H = g->o.mla.heads, rows = a->num_rows, rank = g->o.rank;
  const size_t per_rank = (size_t)rows * W * H;
  ncclResult_t r = g->nccl->ncclAllGather((const void *)(uintptr_t)g->part_lse, (void *)(uintptr_t)g->lse_all,
                                          per_rank, ncclFloat32, g->comm, s);
  cgrt_status st = cgrt__dcp_settle(g, r, "cgrt_dcp_step: ncclAllGather of the LSEs");
  if (st) return st;
  CUdeviceptr part = g->part_out, lse_all = g->lse_all, dst = g->send, lse = a->lse;
  void *params[] = {&part, &lse_all, &rows, &H, &W, &rank, &dst, &lse};
  st = CGRT__CU(g->rt->drv, cuLaunchKernel,
                (g->rescale_fn, (unsigned)per_rank, 1, 1, 128, 1, 1, 0, s, params, NULL), CGRT_ERROR_DRIVER,
                "cgrt_dcp_step: cgrt_dcp_rescale");
  if (st) return st;
  /* Into the group's buffer, then copied to out: NCCL's operands stay the group's, so
   * that a captured step follows a rebound out (see the q copy). */
  const size_t bytes = (size_t)rows * H * CGRT_DCP_DV * 2;
  r = g->nccl->ncclReduceScatter((const void *)(uintptr_t)g->send, (void *)(uintptr_t)g->recv, bytes / 2,
                                 ncclBfloat16, ncclSum, g->comm, s);
  if ((st = cgrt__dcp_settle(g, r, "cgrt_dcp_step: ncclReduceScatter"))) return st;
  return CGRT__CU(g->rt->drv, cuMemcpyDtoDAsync, (a->out, g->recv, bytes, s), CGRT_ERROR_DRIVER,
                  "cgrt_dcp_step: copying out");
}

cgrt_status cgrt_dcp_step(cgrt_dcp_group *g, CUstream s, const cgrt_dcp_args *a) {
  if (!cgrt__handle_live(g, CGRT__HANDLE_DCP_GROUP))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_dcp_step: group is NULL or destroyed");
  cgrt_status st = cgrt__runtime_enter(g->rt, "cgrt_dcp_step");
  if (st) return st;
  if (g->failed) return cgrt__dcp_failed(g, "cgrt_dcp_step");
  if ((st = check_args(g, a))) return st;
  /* From here on every rank enqueues collectives: any failure fails the group (aborts
   * the communicator), as the ranks' sequences no longer match; this rank returning
   * early alone would leave the others waiting in a collective. */
  const int W = g->o.world_size, H = g->o.mla.heads, rows = a->num_rows;
  CUdeviceptr q = a->q;
  if (g->o.gather_q) {
    const long long qb = (long long)H * CGRT__DCP_D * 2;
    /* NCCL's operands are the group's own buffers: a captured step's NCCL work keeps
     * them, while the copy node follows a rebound q like any node (cgrt_graphs). */
    st = CGRT__CU(g->rt->drv, cuMemcpyDtoDAsync, (g->q_local, a->q, (size_t)rows * qb, s), CGRT_ERROR_DRIVER,
                  "cgrt_dcp_step: copying q");
    if (st) goto fail;
    ncclResult_t r = g->nccl->ncclAllGather((const void *)(uintptr_t)g->q_local, (void *)(uintptr_t)g->q_raw,
                                            (size_t)rows * H * CGRT__DCP_D, ncclBfloat16, g->comm, s);
    if ((st = cgrt__dcp_settle(g, r, "cgrt_dcp_step: ncclAllGather"))) goto fail;
    if ((st = transpose(g, s, g->q_raw, g->q_full, rows, W, qb, qb, rows * qb, W * qb, qb))) goto fail;
    q = g->q_full;
  }
  cgrt_mla_args m;
  memset(&m, 0, sizeof m);
  m.size = sizeof m;
  m.q = q;
  m.kv_cache = a->kv_cache;
  m.block_table = a->block_table;
  m.seq_lens = a->seq_lens;
  m.out = g->part_out;
  m.lse = g->part_lse;
  m.num_rows = rows;
  m.softmax_scale = a->softmax_scale;
  if ((st = cgrt_mla_decode(g->plan, s, &m))) goto fail;
  st = cgrt__dcp_pick_merge(g, rows) == CGRT_DCP_MERGE_REDUCE_SCATTER ? merge_reduce_scatter(g, s, a)
                                                                       : merge_all_to_all(g, s, a);
  if (st) goto fail;
  return cgrt__dcp_check_async(g, "cgrt_dcp_step");
fail:
  if (!g->failed) {
    /* A copy or launch failed: the ranks' sequences no longer match. */
    char msg[CGRT__MSG_CAP];
    snprintf(msg, sizeof msg, "%s", cgrt_last_error());
    cgrt__dcp_fail(g, "cgrt_dcp_step: a copy or launch of the step", ncclInternalError);
    return cgrt__fail(st, "%s; %s", msg, cgrt_last_error());
  }
  return st;
}
