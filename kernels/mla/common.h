/* Constants shared by the MLA decode kernels (the .cu files of kernels/mla/), their host
 * side (kernels/mla/plan.c, kernels/mla/kernel_table.h) and their C references
 * (kernels/mla/ref.c). Plain C: included by nvcc and by the C compiler. */
#ifndef CGRT_KERNELS_MLA_COMMON_H
#define CGRT_KERNELS_MLA_COMMON_H

#define CGRT_MLA_D 576    /* latent width of Q and K: kv_lora_rank 512 + rope 64 */
#define CGRT_MLA_DV 512   /* V = the first 512 values of each cached token */
#define CGRT_MLA_TILE 32  /* KV tokens per schedule tile: ranges are cut in whole tiles */

/* Dynamic shared memory of the split kernels (each kernel static_asserts its layout):
 * cgrt_mla_split_t64 / _row1: Q + a ring of 8 sub-stages of 64 tokens x 192 columns + P
 * + small arrays; cgrt_mla_split_t64_n32 / _n32_causal: Q of 32 rows + a ring of 7
 * such sub-stages + P + small arrays; cgrt_mla_split_t64_fp8 / _row1_fp8: Q + two f16 tiles of 64 tokens +
 * a ring of 5 e4m3 sub-stages of 64 tokens x 192 bytes + P + small arrays;
 * cgrt_mla_split_m64_ws / _ws_causal: 1 KB alignment slack + Q (64 rows) + a ring of four
 * 32-token KV stages + small arrays (maxima, factors, sums, mbarriers, fused schedule of
 * 384 rows). All: one CTA per SM. */
#define CGRT_MLA_T64_SMEM 219420
#define CGRT_MLA_T64_N32_SMEM 215580
#define CGRT_MLA_T64_FP8_SMEM 231772
#define CGRT_MLA_M64_WS_SMEM 226956
/* cgrt_mla_split_t64_n64 / _n64_causal (kernels/mla/split_t64_n64.cu): 1 KB alignment
 * slack + Q of 64 rows + a ring of two 64-token tiles (P^T in their rope blocks) + small
 * arrays with the fused schedule of 256 rows. */
#define CGRT_MLA_T64_N64_SMEM 225584
/* cgrt_mla_split_t64_n64_fp8 / _n64_fp8_causal (kernels/mla/split_t64_n64_fp8.cu): 1 KB
 * alignment slack + Q of 64 rows in f16 + one f16 64-token tile (P^T in its rope block) +
 * an e4m3 ring of two 64-token tiles + small arrays (the n64 ones and 64 Q scales). */
#define CGRT_MLA_T64_N64_FP8_SMEM 225840

/* The diagnostic build's phase stamps (kernels/mla/stamps.cuh, read by mla_decode_bench
 * --stamps): rows of CTAs, segments stamped per CTA, values per row. */
#define CGRT_MLA_STAMP_CTAS 1024
#define CGRT_MLA_STAMP_SEGS 5
#define CGRT_MLA_STAMP_SLOTS (4 + 5 * CGRT_MLA_STAMP_SEGS)

/* The value projection (cgrt_mla_vproj, cgrt_mla_options.v_head_dim): output columns and
 * rows per CTA, and its dynamic shared memory: the transposed 32-column W slice (32 rows
 * of 512 + 8 bf16), later overlaid by the warps' sums (4 x 64 rows of 32 + 8 floats). */
#define CGRT_MLA_VPROJ_COLS 32
#define CGRT_MLA_VPROJ_ROWS 64
#define CGRT_MLA_VPROJ_SMEM 40960

/* Fewest partial slots a plan reserves: the one-row combine (cgrt_mla_combine, 64-column
 * slices) loads slots 0..143 before it reads how many hold partials. */
#define CGRT_MLA_COMB_SPEC_SLOTS 144

/* Row-aligned ranges (kernels whose table row says aligned; the plan passes min_tiles
 * negated): the schedule rounds the ranges in use down to a multiple a of rows when that
 * drops at most 1/16 of them and T <= this many tiles x a (kernels/mla/split.cuh,
 * kernels/mla/ref.c). */
#define CGRT_MLA_ALIGN_MAX_TILES 64

/* Fewest 32-token tiles per range (so that short batches leave few partials to merge);
 * the schedule uses min(P, ceil(T / min_tiles)) ranges. The counters strategy merges in
 * one CTA per (row, head group), so it wants fewer, longer ranges. Steps of one row on
 * the one-row kernel use 2: cgrt_mla_split_t64_row1 relies on Pe = min(P, ceil(len / 64)). */
#define CGRT_MLA_MIN_TILES_WORKSPACE 4
#define CGRT_MLA_MIN_TILES_COUNTERS 8
#define CGRT_MLA_MIN_TILES_ONE_ROW 2

/* Bits of the split kernels' `causal` argument. CGRT_MLA_ARG_CAUSAL: the row kind
 * (cgrt_mla_options.causal). CGRT_MLA_ARG_EARLY_READS (the plan sets it for kernels whose
 * table row says early, with cgrt_mla_options.programmatic_launch 2, when the kernel
 * schedules itself from seq_lens): the kernel reads seq_lens, computes the schedule in
 * shared memory and reads its first block-table entries before it waits for the kernel
 * before it (griddepcontrol.wait); q, the KV cache, meta, the counters and every write
 * come after the wait. The C references ignore it. */
#define CGRT_MLA_ARG_CAUSAL 1
#define CGRT_MLA_ARG_EARLY_READS 2

/* Rows of a block run together (cgrt_mla_plan_info.kv_shared) only when the block has at
 * least this many query rows (block_len x q_heads: the 64-row kernels take them) and that
 * reads each KV tile fewer times per request than the rows apart (block_len x head
 * groups): with the warp-specialised 64-row kernel one CTA of 32 query rows costs less
 * than two reads of the 16-head kernel (H200: 100.2 against 134.1 us at (32, 16, 8192),
 * k 2; docs/mla_decode.md). */
#define CGRT_MLA_SHARE_MIN_ROWS 17

/* The KV length of row r of a step (every kernel, the schedule and the C references use
 * this one copy): the request's seq_len clamped to [0, cap]; causal rows (row kind
 * CAUSAL, cgrt_mla_options.causal) see (block_len - 1 - r % block_len) tokens fewer, at
 * least 0. Also the length of query row i of a request's block in the kernels that run
 * a block's rows together (r = i, seq_len = the request's clamped length). */
#ifdef __CUDACC__
#define CGRT__MLA_HD __host__ __device__ __forceinline__
#else
#define CGRT__MLA_HD static inline
#endif
CGRT__MLA_HD int cgrt__mla_row_len(int seq_len, int cap, int r, int block_len, int causal) {
  int len = seq_len < 0 ? 0 : (seq_len > cap ? cap : seq_len);
  if (causal) len -= block_len - 1 - r % block_len;
  return len < 0 ? 0 : len;
}

#endif /* CGRT_KERNELS_MLA_COMMON_H */
