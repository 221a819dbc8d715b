/* cgrt: decode context parallelism (DCP) - one MLA decode step split over the KV of a
 * group of GPUs, merged over NCCL.
 *
 * The ranks of a DCP group each hold a shard of every request's KV cache and run the
 * same step: each attends its shard for the query heads of the whole group, then the
 * partial outputs are merged with their log-sum-exps so that each rank ends with the
 * exact attention output of its own heads over the whole context. Per rank and step, on
 * the caller's stream:
 *   1. (options.gather_q = 1, the default) cgrt all-gathers the query heads of the
 *      group (ncclAllGather) and orders them rank by rank, so that query head
 *      r * heads + h is head h of rank r; with gather_q = 0 the host engine passes the
 *      gathered [rows, world_size x heads, 576] queries itself;
 *   2. cgrt_mla_decode over the rank's KV shard (block table and rank-local seq_lens of
 *      the shard), for world_size x heads query heads: partial outputs and LSEs;
 *   3. the merge (options.merge): CGRT_DCP_MERGE_ALL_TO_ALL packs, for every rank j,
 *      the partial outputs and LSEs of rank j's heads into one slice, exchanges the
 *      slices in one all-to-all (grouped ncclSend/ncclRecv), and merges the world_size
 *      slices it received with the cgrt_dcp_merge kernel, in rank order (deterministic;
 *      padding rows, LSE -inf on every rank, come out as zeros with LSE -inf);
 *      CGRT_DCP_MERGE_REDUCE_SCATTER all-gathers the LSEs (ncclAllGather), rescales its
 *      own partials by exp(LSE - merged LSE) into one slice per rank (cgrt_dcp_rescale),
 *      and sums the slices over the ranks in bf16 into out (ncclReduceScatter; NCCL's
 *      reduction order, fixed for a fixed size and topology, so replay equals eager).
 * Nothing is allocated, sized or synchronized per step and every launch and collective
 * has fixed arguments for a fixed (group, num_rows, tensors): the step is captured into
 * a CUDA graph per bucket (collectives included, as NCCL supports) and replays with
 * whatever q, seq_lens and block_table hold at replay time. The collectives' operands
 * are the group's own buffers (q is copied in, the reduce-scatter's result copied out),
 * so the caller's tensors appear only in copy and kernel nodes, which a graph set
 * (cgrt_graphs.h) rebinds when the host moves them.
 *
 * KV shard layout (the host's side; cgrt reads only the shard's block table and
 * seq_lens): token-interleaved as vLLM lays out DCP, in runs of `interleave` tokens:
 * token t of a request lives on rank (t / interleave) % world_size, at position
 * (t / (interleave x world_size)) x interleave + t % interleave of that rank's shard.
 * Interleaving keeps the shards within `interleave` tokens of each other for every
 * length, so every rank does the same work each step (the step time is that of the
 * slowest rank) and a growing request appends to one rank at a time;
 * cgrt_dcp_local_len gives a shard's length. Any other layout is valid too: the merge
 * does not depend on which rank holds which token.
 *
 * Failures, and why no rank hangs: every rank must make the same sequence of calls on
 * its group. When an NCCL call fails on a rank, or NCCL reports an asynchronous error,
 * or a wait for the other ranks exceeds options.timeout_ms, that rank aborts the
 * group's communicator (ncclCommAbort) and the group is failed: every later call on it
 * returns CGRT_ERROR_DRIVER at once, without enqueueing anything. The abort makes the
 * other ranks' pending collectives fail (ncclRemoteError) where NCCL detects it, and
 * every wait of cgrt (cgrt_dcp_group_create, cgrt_dcp_wait, cgrt_dcp_agree) is bounded by
 * timeout_ms where it does not; so every rank returns a failed status, and recovers by
 * destroying the group and creating a new one (a new id). A capture that fails on one
 * rank must make every rank fall back together: after capturing a bucket each rank
 * calls cgrt_dcp_agree with its own outcome and keeps its graph only if every rank
 * succeeded (else all run that bucket eagerly).
 *
 * NCCL: libnccl.so.2 (2.17 or newer) opened at group creation (options.nccl_library,
 * else the usual places: the loader's path, the NVIDIA NCCL pip package, system
 * folders). A runtime on the CPU emulation uses cgrt's emulated NCCL instead (ranks as
 * threads of one process); a runtime created with fault_injection routes NCCL calls
 * through the fault plan too (cgrt_fault.h: plan.symbol may name an NCCL entry point
 * such as "ncclSend", plan.result is then an ncclResult_t). The design and its
 * measurements: docs/dcp.md. */
#ifndef CGRT_DCP_H
#define CGRT_DCP_H

#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_dcp_group cgrt_dcp_group;

/* The identity of a group, made once (cgrt_dcp_unique_id) and given to every rank (an
 * ncclUniqueId). */
#define CGRT_DCP_ID_BYTES 128
typedef struct cgrt_dcp_id {
  unsigned char bytes[CGRT_DCP_ID_BYTES];
} cgrt_dcp_id;

typedef enum cgrt_dcp_merge {
  /* cgrt picks per step (so per captured bucket); today always ALL_TO_ALL. */
  CGRT_DCP_MERGE_AUTO = 0,
  /* One all-to-all of partial outputs and LSEs, then cgrt_dcp_merge (see above). */
  CGRT_DCP_MERGE_ALL_TO_ALL = 1,
  /* All-gather of the LSEs, local rescale, reduce-scatter of the outputs over heads
   * (see above): bf16 sums, so world_size - 1 more roundings of the output. */
  CGRT_DCP_MERGE_REDUCE_SCATTER = 2
} cgrt_dcp_merge;

typedef struct cgrt_dcp_options {
  size_t size;          /* sizeof(cgrt_dcp_options) */
  int world_size;       /* ranks in the group, >= 1 */
  int rank;             /* this rank, 0..world_size-1 */
  cgrt_dcp_id id;       /* the same on every rank (cgrt_dcp_unique_id on one of them) */
  /* Path handed to dlopen for NCCL; NULL: the usual places (see above). Ignored by the
   * emulation. */
  const char *nccl_library;
  /* Bound on every wait for the other ranks (communicator creation, cgrt_dcp_wait,
   * cgrt_dcp_agree), in milliseconds; default 60000. */
  int timeout_ms;
  /* 1 (default): the step all-gathers the query heads; 0: the host passes them
   * gathered. */
  int gather_q;
  cgrt_dcp_merge merge; /* default CGRT_DCP_MERGE_AUTO */
  /* The MLA plan of every step: heads is the query heads per rank, max_num_seqs,
   * block_len, page_size, max_model_len (of a shard), ...; dcp_world_size is set to
   * world_size by cgrt. Initialize with cgrt_mla_options_init. */
  cgrt_mla_options mla;
} cgrt_dcp_options;

/* Defaults: world_size 1, rank 0, zero id, timeout 60000 ms, gather_q 1, merge AUTO,
 * mla from cgrt_mla_options_init; size set. Thread-safe. */
void cgrt_dcp_options_init(cgrt_dcp_options *options);

/* Makes a new group identity (ncclGetUniqueId of the NCCL the runtime uses) on one
 * rank; the host sends its bytes to the others. nccl_library as in the options.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (rt); CGRT_ERROR_INVALID_ARGUMENT
 * (out NULL); CGRT_ERROR_NOT_SUPPORTED (NCCL not found or too old: the message names
 * the places tried); CGRT_ERROR_DRIVER (ncclGetUniqueId failed). Thread-safe. */
cgrt_status cgrt_dcp_unique_id(cgrt_runtime *rt, const char *nccl_library, cgrt_dcp_id *out);

/* Creates this rank's side of a group, during warm-up (like the workspaces, everything
 * is sized for the worst case here: max_num_seqs x block_len rows): the communicator
 * (every rank of the group calls this with the same id and world_size; it returns once
 * all have joined, or fails after timeout_ms), the MLA plan (its workspace reservation:
 * call before cgrt_workspace_lock), the step's buffers (cgrt_mem_alloc: gathered
 * queries, partial outputs and LSEs, the merge's send and receive slices and gathered
 * LSEs), a stream
 * and an event for cgrt_dcp_agree and cgrt_dcp_wait.
 * Ownership: *out is owned by the caller, released with cgrt_dcp_group_destroy, before
 * the runtime. On failure *out is NULL, nothing leaks and the communicator, if it was
 * made, is aborted (the other ranks' creation then fails too, at the latest after their
 * timeout).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (rt); CGRT_ERROR_INVALID_ARGUMENT
 * (NULL options or out, size too small, world_size not in 1..64, rank out of range,
 * timeout_ms < 1, bad gather_q or merge, and every status cgrt_mla_plan_create gives
 * for the mla options); CGRT_ERROR_NOT_SUPPORTED (NCCL not found or too old);
 * CGRT_ERROR_DRIVER (an NCCL call failed, or the other ranks did not
 * join within timeout_ms: the message says which); CGRT_ERROR_CAPTURING;
 * CGRT_ERROR_WORKSPACE_LOCKED; CGRT_ERROR_OUT_OF_MEMORY. Thread-safe with calls on
 * other groups. Must not be called while capturing. */
cgrt_status cgrt_dcp_group_create(cgrt_runtime *rt, const cgrt_dcp_options *options, cgrt_dcp_group **out);

/* Destroys a group: its communicator (ncclCommDestroy, or ncclCommAbort when the group
 * failed), plan, buffers, stream and event. NULL is a no-op. Graphs that captured its
 * steps must be destroyed first (they point at its buffers and communicator). Not
 * thread-safe with other calls on the group. Must not be called during capture. */
void cgrt_dcp_group_destroy(cgrt_dcp_group *group);

/* One step's tensors (device addresses, dense, row-major; alignment as cgrt_mla_args). */
typedef struct cgrt_dcp_args {
  size_t size;             /* sizeof(cgrt_dcp_args) */
  CUdeviceptr q;           /* bf16 [num_rows, heads, 576] (this rank's heads), or with
                            * gather_q = 0 [num_rows, world_size x heads, 576] */
  CUdeviceptr kv_cache;    /* bf16 [num_pages, page_size, 576]: this rank's shard */
  CUdeviceptr block_table; /* int32 [num_rows / block_len, max_blocks_per_seq] of the shard */
  CUdeviceptr seq_lens;    /* int32 [num_rows / block_len]: shard lengths (read on the
                            * device); <= 0 on every rank marks a padding row */
  CUdeviceptr out;         /* bf16 [num_rows, heads, 512]: this rank's heads, merged */
  CUdeviceptr lse;         /* fp32 [num_rows, heads], natural log, merged; 0: not wanted */
  int num_rows;            /* 1..max_num_seqs x block_len, a multiple of block_len */
  float softmax_scale;     /* as cgrt_mla_args */
} cgrt_dcp_args;

/* Enqueues one step on `stream` (see the top of this header). Every rank must enqueue
 * the same steps with the same num_rows, in the same order. Safe to capture (all
 * launches and collectives go to `stream`; the step is captured whole); call it once
 * outside capture first (warm-up, as cgrt_mla_decode). The step's buffers are the
 * group's: steps of one group must not run concurrently.
 * Returns when the step is enqueued: a failure of a collective on the GPU shows up in a
 * later call (cgrt_dcp_wait). On the emulation the step runs inside the call.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (NULL group); CGRT_ERROR_INVALID_ARGUMENT
 * (NULL args, size too small, a NULL tensor other than lse, misaligned tensor, num_rows
 * out of range or not a multiple of block_len, scale not finite or not > 0: nothing
 * enqueued, the group stays usable); CGRT_ERROR_DRIVER (an NCCL call failed or NCCL
 * reported an error, now or earlier: the group is failed, see above; or a launch
 * failed); the statuses of cgrt_mla_decode. Not thread-safe with other calls on the
 * group. May be called during capture. */
cgrt_status cgrt_dcp_step(cgrt_dcp_group *group, CUstream stream, const cgrt_dcp_args *args);

/* Waits until the work enqueued on `stream` so far is done, at most
 * options.timeout_ms, watching NCCL's asynchronous error meanwhile: the bounded
 * replacement for a stream synchronization after DCP steps. On an NCCL error or the
 * timeout the communicator is aborted and the group failed.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_CAPTURING (the calling
 * thread captures); CGRT_ERROR_DRIVER (NCCL error, timeout, failed group, or a driver
 * call failed). Not thread-safe with other calls on the group. Must not be called
 * during capture. */
cgrt_status cgrt_dcp_wait(cgrt_dcp_group *group, CUstream stream);

/* Agreement of the ranks: every rank passes its own outcome (ok: 1 success, 0 failure,
 * e.g. of capturing a bucket) and gets in *all_ok 1 only if every rank passed 1 (an
 * all-reduce MIN on the group's stream, waited for as cgrt_dcp_wait does). A failed
 * group gives *all_ok 0 and CGRT_ERROR_DRIVER at once; since its communicator was
 * aborted, the other ranks' agreement fails too (NCCL error or timeout), so all fall
 * back together.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (all_ok
 * NULL); CGRT_ERROR_CAPTURING; CGRT_ERROR_DRIVER. Not thread-safe with other calls on
 * the group. Must not be called during capture. */
cgrt_status cgrt_dcp_agree(cgrt_dcp_group *group, int ok, int *all_ok);

typedef struct cgrt_dcp_info {
  size_t size;           /* set by the caller to sizeof(cgrt_dcp_info) */
  int world_size;
  int rank;
  int nccl_version;      /* e.g. 22703 for 2.27.3 */
  char nccl[300];        /* "nccl <path>", "emulated", with "fault(...)" when wrapped */
  int failed;            /* 1 once the group has failed (see above) */
  size_t buffer_bytes;   /* device memory of the step's buffers */
  cgrt_dcp_merge merge;  /* what AUTO resolves to for the largest step */
  const cgrt_mla_plan *plan; /* the group's MLA plan (owned by the group; for
                              * cgrt_mla_plan_get_info) */
} cgrt_dcp_info;

/* Fills the fields info->size covers. Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE;
 * CGRT_ERROR_INVALID_ARGUMENT (NULL info, size too small). Thread-safe. */
cgrt_status cgrt_dcp_group_get_info(const cgrt_dcp_group *group, cgrt_dcp_info *info);

/* Length of a request's KV shard on `rank` for a context of global_len tokens laid out
 * token-interleaved in runs of `interleave` tokens (see above): 0 for global_len <= 0;
 * -1 for world_size < 1, rank out of range or interleave < 1. Thread-safe; a host
 * function (engines compute shard lengths in their metadata step). */
int cgrt_dcp_local_len(int global_len, int rank, int world_size, int interleave);

#ifdef __cplusplus
}
#endif
#endif
