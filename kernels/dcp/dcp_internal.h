/* Internal view of a DCP group, shared by kernels/dcp/group.c and step.c. */
#ifndef CGRT_KERNELS_DCP_DCP_INTERNAL_H
#define CGRT_KERNELS_DCP_DCP_INTERNAL_H

#include <stdint.h>

#include "cgrt/cgrt_dcp.h"
#include "kernels/dcp/kernel_table.h"
#include "runtime/nccl.h"
#include "runtime/runtime_internal.h"

#define CGRT__DCP_D 576        /* values per query head */
#define CGRT__DCP_MAX_RANKS 64 /* ranks of a group */

struct cgrt_dcp_group {
  cgrt_runtime *rt;
  cgrt__child child; /* destroyed with the runtime if the host forgets */
  const cgrt__nccl *nccl;
  ncclComm_t comm; /* NULL once aborted */
  int failed;      /* 1 once a failure aborted the communicator */
  cgrt_dcp_options o; /* mla.dcp_world_size = world_size, nccl_library NULL */
  cgrt_mla_plan *plan;
  int max_rows;
  CUfunction merge_fn, transpose_fn, rescale_fn;
  /* The step's buffers (cgrt_mem_alloc, worst case). */
  CUdeviceptr q_local;  /* gather_q: [rows][heads x 576] bf16, the host's q copied in */
  CUdeviceptr q_raw;    /* gather_q: [W][rows][heads x 576] bf16, as all-gathered */
  CUdeviceptr q_full;   /* gather_q: [rows][W x heads][576] bf16, for the MLA step */
  CUdeviceptr part_out; /* [rows][W x heads][512] bf16: the partials over this shard */
  CUdeviceptr part_lse; /* [rows][W x heads] fp32 */
  CUdeviceptr send, recv; /* W slices of cgrt__dcp_segment_bytes(rows) each; the
                           * reduce-scatter merge's rescaled partials go to send */
  CUdeviceptr lse_all;  /* [W][rows][W x heads] fp32: the reduce-scatter merge's LSEs */
  CUdeviceptr flag;     /* int32 of cgrt_dcp_agree */
  size_t buffer_bytes;
  CUstream stream; /* cgrt_dcp_agree's */
  CUevent event;   /* waits */
};

/* Bytes of one rank's slice of the all-to-all for `rows` rows: [rows][heads][512] bf16
 * partials, then [rows][heads] fp32 LSEs (at byte rows x heads x 1024), rounded up to
 * 256 bytes. */
static inline size_t cgrt__dcp_segment_bytes(int rows, int heads) {
  const size_t b = (size_t)rows * heads * (CGRT_DCP_DV * 2 + 4);
  return (b + 255) / 256 * 256;
}

/* What a step of `rows` rows merges with (AUTO resolved). */
cgrt_dcp_merge cgrt__dcp_pick_merge(const cgrt_dcp_group *g, int rows);

/* Aborts the communicator, marks the group failed and records "<what> failed with
 * <ncclResult> ... on rank r of n ..."; returns CGRT_ERROR_DRIVER. */
cgrt_status cgrt__dcp_fail(cgrt_dcp_group *g, const char *what, ncclResult_t r);
/* CGRT_ERROR_DRIVER for a call on a failed group. */
cgrt_status cgrt__dcp_failed(const cgrt_dcp_group *g, const char *api);
/* The result of an NCCL call: success; ncclInProgress polled (bounded by timeout_ms)
 * until done; else the group fails. */
cgrt_status cgrt__dcp_settle(cgrt_dcp_group *g, ncclResult_t r, const char *what);
/* NCCL's asynchronous error: CGRT_SUCCESS, or the group fails. */
cgrt_status cgrt__dcp_check_async(cgrt_dcp_group *g, const char *api);
uint64_t cgrt__dcp_now_ms(void);

#endif
