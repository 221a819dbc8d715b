/* cgrt: multi-head latent attention (MLA) decode, DeepSeek-V2/V3 family, as a fixed-grid,
 * capturable split-KV kernel sequence.
 *
 * Per row (one query token), `heads * dcp_world_size` query heads of 576 bf16 values
 * attend over the row's context in a paged bf16 latent KV cache (576 values per token;
 * V is the first 512). Output: 512 bf16 values per query head, and the natural-log
 * log-sum-exp (LSE) of the scaled scores per head in fp32.
 *
 * One decode step enqueues, on the caller's stream, with grids fixed by the plan:
 *   1. a 1-CTA scheduling kernel that reads the current seq_lens on the device, expands
 *      them to rows (block_len rows per request), and cuts the batch's KV tiles into
 *      equal ranges, one per CTA (balanced whatever the mix of lengths); for short
 *      batches (num_rows <= the split kernel's block size) the split kernel does this
 *      itself and the scheduling kernel is not launched;
 *   2. the split kernel, one CTA per (head group, range), persistent over its range's
 *      rows (cgrt_mla_plan_info names it; steps of one row may take a one-row kernel;
 *      with block_len > 1 the plan may run a request's rows in the same CTAs, so that
 *      each KV tile is read once per request: cgrt_mla_plan_info.kv_shared);
 *   3. WORKSPACE strategy only: a combine kernel that merges the rows split across ranges.
 *      With the COUNTERS strategy the last CTA of each (row, head group) merges instead,
 *      counted in the runtime's counter buffer and resetting its counter to 0. AUTO (the
 *      default) picks one of the two per step from its row count.
 * Nothing depends on host values of seq_lens, nothing is allocated, sized or zeroed per
 * step, so the sequence can be captured into a CUDA graph once per batch bucket.
 *
 * Partial results live in a locked workspace reservation ("mla.decode" in the plan's
 * lane) sized at creation: (max_rows + splits) x q_heads x 513 fp32 (at least 144
 * slots) plus (2 max_rows + 2) int32 of metadata, where splits is the SM count divided
 * by the head groups (one CTA per SM). The design and its measurements:
 * docs/mla_decode.md. */
#ifndef CGRT_MLA_H
#define CGRT_MLA_H

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_mla_plan cgrt_mla_plan;

typedef enum cgrt_mla_combine {
  /* The split kernel writes partials to the workspace; a separate combine kernel merges
   * them. Suits short batches, whose rows have many partials. */
  CGRT_MLA_COMBINE_WORKSPACE = 0,
  /* One split kernel; the last CTA per (row, head group), counted by a self-resetting
   * atomic counter in the runtime's counter buffer, merges. No memset node. Suits rows
   * with few partials; one CTA merges all of a row's partials. */
  CGRT_MLA_COMBINE_COUNTERS = 1,
  /* The default: per step (so per captured bucket), COUNTERS where the merging CTA
   * reads at most CGRT_MLA_AUTO_MERGE_BYTES of partials (splits x heads per CTA x 2 KiB
   * / rows; cgrt_mla_plan_info.counters_min_rows says from how many rows), else
   * WORKSPACE; steps of one row always WORKSPACE. Reserves what both need. */
  CGRT_MLA_COMBINE_AUTO = 2
} cgrt_mla_combine;

/* CGRT_MLA_COMBINE_AUTO takes COUNTERS up to this many partial bytes per (row, head
 * group) to merge in one CTA. */
#define CGRT_MLA_AUTO_MERGE_BYTES (320 * 1024)

/* Dtype of the latent KV cache (cgrt_mla_options.kv_dtype). */
typedef enum cgrt_mla_kv_dtype {
  /* bf16 [num_pages, page_size, 576]: 1152 bytes per token. */
  CGRT_MLA_KV_BF16 = 0,
  /* FP8 e4m3 (OCP e4m3fn: bias 7, no infinities, 0x7f / 0xff NaN) [num_pages, page_size,
   * 576]: the same paged layout, one byte per value, 576 bytes per token (values 0..511
   * the V / latent part, 512..575 the rope part); value = e4m3 x kv_scale, one
   * per-tensor scale (the serving convention of a per-layer k_scale, as vLLM and
   * FlashMLA pass it) held by the plan. q and out stay bf16, the LSE fp32; the kernels
   * dequantize on the fly. Every head count takes it, with the head rule and block rows
   * of a bf16 cache (see cgrt_mla_plan_create), except that 128 heads run two CTAs of
   * 64 per KV range on the FP8 64-row kernel. */
  CGRT_MLA_KV_FP8_E4M3 = 1
} cgrt_mla_kv_dtype;

typedef struct cgrt_mla_options {
  size_t size;            /* sizeof(cgrt_mla_options): lets the struct grow (a smaller size
                           * from an older header gets defaults for the later fields) */
  int max_num_seqs;       /* most requests per step (>= 1) */
  int block_len;          /* rows per request, k >= 1: k > 1 gives multi-token rows that
                           * share their request's block-table row and seq_len (all see
                           * the request's context unless causal is 1) */
  int heads;              /* query heads per rank (>= 1); any count (see head rule) */
  int dcp_world_size;     /* decode context parallelism (>= 1): the kernels see
                           * heads * dcp_world_size query heads (all-gathered by the host) */
  int page_size;          /* tokens per KV page: 16, 32 or 64 */
  int max_model_len;      /* longest context (>= 1); seq_lens are clamped to
                           * min(max_model_len, max_blocks_per_seq * page_size) */
  int max_blocks_per_seq; /* columns of the block table; 0 = ceil(max_model_len / page_size) */
  cgrt_mla_combine combine; /* default CGRT_MLA_COMBINE_AUTO */
  int lane;               /* workspace lane (0..CGRT_MAX_LANES-1) of the partials and of
                           * the plan's counters; default CGRT_LANE_TARGET */
  int programmatic_launch; /* 0 (default): plain launches. 1: split and combine are
                           * launched with programmatic dependent launch: their CTAs may
                           * start while the kernel before them in the stream runs, and
                           * wait on the device before they read or write anything.
                           * 2: as 1, and the host also guarantees that the kernel
                           * launched right before cgrt_mla_decode in the stream does
                           * not write seq_lens or block_table (another layer's
                           * attention or a projection does not; a metadata kernel
                           * does), so that a split kernel may read them before its
                           * wait: the split kernels of up to 32 query rows per CTA
                           * (bf16 and FP8) read seq_lens, schedule the step and read
                           * their first block-table entries while that kernel still
                           * runs (steps of up to 128 rows; everything else, and every
                           * write, after the wait). It pays when that kernel lets its
                           * dependents launch early (griddepcontrol.launch_dependents);
                           * the one-row and 64-row kernels treat 2 as 1. */
  int causal;             /* row kind. 0 (default): block rows are non-causal, every row
                           * of a request sees its context, min(seq_len, cap) tokens
                           * (cap: see max_model_len). 1: causal verify rows: row i
                           * (0-based) of a request's block of block_len rows sees
                           * max(0, min(seq_len, cap) - (block_len - 1 - i)) tokens, so
                           * the last row sees the whole context; a row of 0 tokens is
                           * inert (output 0, LSE -inf), like a padding row. No effect
                           * with block_len 1. seq_len counts the block's own tokens. */
  cgrt_mla_kv_dtype kv_dtype; /* dtype of the latent KV cache: CGRT_MLA_KV_BF16 (default) or
                           * CGRT_MLA_KV_FP8_E4M3 (see there) */
  float kv_scale;         /* CGRT_MLA_KV_FP8_E4M3: the per-tensor dequantization scale of
                           * the cache (value = e4m3 x kv_scale), finite and > 0; default
                           * 1. A plan serves one scale: layers of different scales take
                           * plans of their own (they share the lane's reservation).
                           * Ignored for CGRT_MLA_KV_BF16. */
  int v_head_dim;         /* 0 (default): the output is the 512-wide latent O per query
                           * head. > 0: the decode also applies the per-head value
                           * up-projection (DeepSeek's W_UV) after the merge: out[r, h, :] =
                           * bf16(O[r, h, :512]) x w_uv[h] with fp32 sums, bf16
                           * [num_rows, q_heads, v_head_dim] (the input of o_proj), in one
                           * more kernel (cgrt_mla_vproj) that reads its slice of w_uv
                           * before it waits for the merge (programmatic_launch), so the
                           * weight read overlaps the attention's tail. The latent O then
                           * lives in a second reservation of the plan's lane ("mla.latent",
                           * max_rows x q_heads x 512 bf16). A multiple of 32 in 32..512
                           * (DeepSeek-V2/V3: 128). It pays where the step merges through
                           * the combine kernel (steps below
                           * cgrt_mla_plan_info.counters_min_rows); behind the counters'
                           * merge the weight read is not hidden and a GEMM after the
                           * attention is faster (figures: docs/mla_decode.md, "The value
                           * projection"), so engines pair a projecting plan for their
                           * small buckets with a plain one. */
} cgrt_mla_options;

/* Defaults: block_len 1, causal 0, dcp_world_size 1, page_size 64, combine AUTO, lane 0,
 * kv_dtype CGRT_MLA_KV_BF16, kv_scale 1, v_head_dim 0,
 * size set; the sizes that have no sensible default (max_num_seqs, heads, max_model_len) are
 * 0 and must be set. Thread-safe. */
void cgrt_mla_options_init(cgrt_mla_options *options);

/* What a plan chose. */
typedef struct cgrt_mla_plan_info {
  size_t size;               /* set by the caller to sizeof(cgrt_mla_plan_info) */
  int max_rows;              /* max_num_seqs * block_len */
  int q_heads;               /* heads * dcp_world_size */
  int fast_path;             /* 1: fast path; 0: generic path (see head rule) */
  int head_tile;             /* the rule's tile: 8, 16, 32 or 64 */
  int heads_per_cta;         /* query heads per CTA (kv_shared: query rows, block rows x
                              * heads, of one request per CTA) */
  int head_groups;           /* CTAs per range */
  int splits;                /* ranges of KV tiles (the split kernel's grid.y) */
  size_t workspace_bytes;    /* partial results + metadata reserved in the workspace */
  size_t counter_bytes;      /* counter-buffer bytes the plan reserved (0 for WORKSPACE) */
  size_t fixed_split_bytes;  /* what the fixed min(next_pow2(max_model_len / 512),
                              * 2 * SMs) split would reserve, for comparison */
  const char *split_kernel;  /* the split kernel of steps of more than one row, e.g.
                              * "cgrt_mla_split_t64" (<= 16 heads per CTA; with an FP8
                              * cache "cgrt_mla_split_t64_fp8"), "cgrt_mla_split_t64_n32"
                              * (17..32), "cgrt_mla_split_t64_n64" (33..64 in one head
                              * group) or "cgrt_mla_split_m64_ws" (33..64 in two or more
                              * head groups: 128 heads); with an FP8 cache
                              * "cgrt_mla_split_t64_n64_fp8" for 17..64 (static string) */
  const char *one_row_kernel; /* the split kernel of steps of one row (static string):
                               * "cgrt_mla_split_t64_row1" (FP8: "..._row1_fp8") for <= 32
                               * heads per CTA (17..32: in CTAs of 16 heads) unless combine
                               * is COUNTERS, then "cgrt_mla_split_t64" for 17..32 heads per
                               * CTA (CTAs of 16), else split_kernel */
  int counters_min_rows;      /* steps of at least this many rows merge through counters:
                               * 1 for COUNTERS, 0 (never) for WORKSPACE; for AUTO
                               * ceil(splits x heads_per_cta x 2 KiB /
                               * CGRT_MLA_AUTO_MERGE_BYTES), steps of one row excepted
                               * where one_row_kernel differs from split_kernel */
  int kv_shared;              /* 1: the block_len rows of a request run in the same CTAs
                               * (up to 64 query rows, block rows x heads, per CTA), so
                               * each KV tile is read once per request and head group
                               * instead of once per row; chosen for block_len >= 2 where
                               * that reads the KV fewer times, see docs/mla_decode.md */
  size_t latent_bytes;        /* with options.v_head_dim: bytes of the latent O the plan
                               * reserved ("mla.latent"); 0 without */
} cgrt_mla_plan_info;

/* Creates a plan: validates the options, picks the path and the split count from the
 * device's SM count, looks the kernels up, reserves the partial-result workspace
 * ("mla.decode" in options->lane, at its worst case) and, for COUNTERS, the counter
 * buffer. Do this during warm-up, before cgrt_workspace_lock.
 *
 * Head rule: with q = heads * dcp_world_size and tile = 8 if q <= 8, 16 if q <= 16, 32
 * if q <= 32, else 64 (for an FP8 cache too), the fast path takes q iff
 * q % min(q, tile) == 0 (CTAs of min(q, tile) heads; steps of one row with 17..32 heads
 * per CTA run CTAs of 16); any other q (96, ...) takes the generic path
 * (CTAs of 16 heads, the last partly masked), which is logged once here at
 * CGRT_LOG_WARN. Neither is an error.
 *
 * Ownership: *out is owned by the caller, released with cgrt_mla_plan_destroy; a plan
 * still alive when its runtime is destroyed is destroyed with it (and then its handle is
 * no longer live: decode returns CGRT_ERROR_INVALID_HANDLE, destroy is a no-op). On failure *out is NULL and nothing leaks (a
 * workspace reservation already made stays with the runtime, as all reservations do).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (rt); CGRT_ERROR_INVALID_ARGUMENT
 * (NULL options/out, size too small, a size <= 0, page_size not 16/32/64, bad combine,
 * programmatic_launch, causal (not 0 or 1), lane, kv_dtype, kv_scale (not finite or
 * not > 0 with FP8), v_head_dim (not 0 or a multiple of 32 in 32..512), more than 2^20 rows or 4096 query heads, a block table
 * of 2^31 or more entries, a context (min(max_model_len, max_blocks_per_seq x
 * page_size)) above 2^30 tokens, or max_rows rows of that context holding 2^31 or more
 * 32-token tiles); CGRT_ERROR_WORKSPACE_LOCKED (the reservation or
 * the counters would have to grow after the lock); CGRT_ERROR_CAPTURING;
 * CGRT_ERROR_OUT_OF_MEMORY; CGRT_ERROR_INTERNAL (kernel missing from the module);
 * CGRT_ERROR_DRIVER. Thread-safe. Must not be called while capturing. */
cgrt_status cgrt_mla_plan_create(cgrt_runtime *rt, const cgrt_mla_options *options,
                                 cgrt_mla_plan **out);

/* Destroys a plan (the workspace reservation stays with the runtime). NULL is a no-op.
 * The plan is destroyed whatever the driver answers (making the context current may
 * fail: that is logged at CGRT_LOG_WARN). Not thread-safe with a cgrt_mla_decode on the
 * same plan. May be called during capture (it enqueues nothing and frees no device
 * memory). */
void cgrt_mla_plan_destroy(cgrt_mla_plan *plan);

/* Fills the fields of *info that info->size covers (the struct grows at its end; a size
 * that stops before split_kernel's end is too small).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (NULL, destroyed or foreign plan;
 * never dereferenced); CGRT_ERROR_INVALID_ARGUMENT (NULL info or info->size too small).
 * Thread-safe. */
cgrt_status cgrt_mla_plan_get_info(const cgrt_mla_plan *plan, cgrt_mla_plan_info *info);

/* One decode step's tensors (device addresses, dense, row-major). q, kv_cache and out
 * must be 16-byte aligned, the others 4-byte aligned. Block-table entries must be valid
 * page indices for every position below the (clamped) seq_len; they are not checked. */
typedef struct cgrt_mla_args {
  size_t size;             /* sizeof(cgrt_mla_args) */
  CUdeviceptr q;           /* bf16 [num_rows, q_heads, 576] */
  CUdeviceptr kv_cache;    /* bf16 (or, options.kv_dtype FP8, e4m3) [num_pages, page_size,
                            * 576]; may exceed 2^31 elements */
  CUdeviceptr block_table; /* int32 [num_rows / block_len, max_blocks_per_seq] */
  CUdeviceptr seq_lens;    /* int32 [num_rows / block_len]; read on the device. 0 (or
                            * negative) marks padding: output 0, LSE -inf, no KV read
                            * (options.causal: per-row lengths follow from it) */
  CUdeviceptr out;         /* bf16 [num_rows, q_heads, 512]; with options.v_head_dim v:
                            * bf16 [num_rows, q_heads, v] (the projected output) */
  CUdeviceptr lse;         /* fp32 [num_rows, q_heads], natural log */
  int num_rows;            /* rows of this step (the captured bucket, padding included):
                            * 1..max_rows, a multiple of block_len */
  float softmax_scale;     /* applied to q . k; finite and > 0 */
  CUdeviceptr w_uv;        /* options.v_head_dim > 0: bf16 [q_heads, 512, v_head_dim], the
                            * per-head value up-projection, 16-byte aligned; read only,
                            * and not written by the kernels before this call in the
                            * stream (it is read before the attention's wait). Must be 0
                            * without v_head_dim. A caller built against a header without
                            * this field (args.size ends at softmax_scale) passes none. */
} cgrt_mla_args;

/* Enqueues one decode step on `stream` (1-2 kernels for COUNTERS, 2-3 for WORKSPACE, AUTO
 * either per num_rows; one more with options.v_head_dim; with
 * options.programmatic_launch 1 or 2 the split and combine kernels are launched with
 * programmatic dependent launch, see there). Steps of one row take a one-CTA-per-SM split
 * kernel on the 16-head path (the split kernel is fixed per num_rows, so per bucket). Fixed
 * grids and addresses for fixed (plan, num_rows, tensors): safe to capture, and a
 * captured graph replays with whatever seq_lens/block_table/q hold at replay time.
 * Deterministic: the same inputs give the same bits on every launch, eager or replayed
 * (partials merge in a fixed order, whichever CTA finishes last).
 * Call it once outside capture first (warm-up): that allocates the counter buffer if
 * the plan reserved it; during capture only already-allocated storage is used.
 * The launches of one plan lane must not run concurrently (they share the lane's
 * partials and counters): use one stream per lane.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (NULL plan);
 * CGRT_ERROR_INVALID_ARGUMENT (NULL args or a NULL tensor, misaligned tensor, size too
 * small, num_rows out of range or not a multiple of block_len, scale not finite or not
 * > 0, w_uv NULL with v_head_dim or set without it);
 * CGRT_ERROR_WORKSPACE_LOCKED or CGRT_ERROR_CAPTURING (the lane's "mla.decode"
 * reservation was grown by a larger plan after the lock / the counter buffer is not yet
 * allocated during capture); CGRT_ERROR_DRIVER (a launch failed). Thread-safe for different lanes.
 * May be called during capture. */
cgrt_status cgrt_mla_decode(cgrt_mla_plan *plan, CUstream stream, const cgrt_mla_args *args);

#ifdef __cplusplus
}
#endif
#endif
