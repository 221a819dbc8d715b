/* The MLA decode kernels: one row per kernel of the .cu files of kernels/mla/, and only
 * those kernels. The plan (kernels/mla/plan.c) picks its kernels from these rows by their
 * constraints, looks them up by name and launches them with these block sizes and shared
 * memory; the C references (kernels/mla/ref.c) register one entry per row; tests/mla
 * iterate the rows (every row has a reference and runs). Adding a kernel: a row here,
 * its source in a .cu file of kernels/mla/, and its reference in kernels/mla/ref.c.
 * Plain C.
 *
 * X(name, role, threads, smem, ctas_per_sm, hg_min, hg_max, g_max, pages, aligned, early, kv, ref)
 *   name         the kernel's symbol (extern "C")
 *   role         CGRT__MLA_SCHEDULE, CGRT__MLA_SPLIT (steps of any number of rows),
 *                CGRT__MLA_SPLIT_ONE_ROW (steps of one row: the plan prefers it there
 *                when the plan merges through the workspace), CGRT__MLA_SPLIT_CAUSAL_BLOCK
 *                (causal verify blocks whose rows run together: a "row" is a request,
 *                its query rows block rows x heads with per-row lengths, parameter mk;
 *                hg counts those query rows), CGRT__MLA_COMBINE, CGRT__MLA_VPROJ (the
 *                value projection of plans with cgrt_mla_options.v_head_dim)
 *   threads      block size
 *   smem         dynamic shared memory in bytes (0: none)
 *   ctas_per_sm  CTAs per SM at that shared memory; split roles: the ranges P of a step
 *                are SMs x ctas_per_sm / head groups (one wave)
 *   hg_min, hg_max  query heads per CTA the kernel takes (split roles; 0 otherwise)
 *   g_max        most head groups per request (CTAs that read the same KV tiles) the plan
 *                picks it for; 0: any. The token-major bf16 64-row kernels take a
 *                request's rows in one CTA only: where two CTAs share each tile (128
 *                heads) the warp-specialised kernel's products are faster; the FP8 one
 *                takes any (its alternative there is 8 CTAs of 16 rows per tile;
 *                docs/mla_decode.md)
 *   pages        page sizes it takes: a mask of CGRT__MLA_PAGE_16 / _32 / _64
 *   aligned      1: the plan asks the schedule for row-aligned ranges (min_tiles
 *                negated; see CGRT_MLA_ALIGN_MAX_TILES), where that was measured faster
 *   early        1: with cgrt_mla_options.programmatic_launch 2 the plan lets it read
 *                seq_lens and its first block-table entries before its wait
 *                (CGRT_MLA_ARG_EARLY_READS); 0: it waits before it reads anything
 *   kv           the KV cache dtype it reads: CGRT__MLA_KV_BF16 or CGRT__MLA_KV_FP8
 *                (e4m3, cgrt_mla_options.kv_dtype); the plan picks by it; the schedule
 *                and combine kernels read no KV (their rows say BF16) and serve both
 *                (so does the value projection)
 *   ref          its C reference in kernels/mla/ref.c (which also gives the parameter
 *                list of each role) */
#ifndef CGRT_KERNELS_MLA_KERNEL_TABLE_H
#define CGRT_KERNELS_MLA_KERNEL_TABLE_H

#include "kernels/mla/common.h"

typedef enum cgrt__mla_role {
  CGRT__MLA_SCHEDULE,
  CGRT__MLA_SPLIT,
  CGRT__MLA_SPLIT_ONE_ROW,
  CGRT__MLA_SPLIT_CAUSAL_BLOCK,
  CGRT__MLA_COMBINE,
  CGRT__MLA_VPROJ
} cgrt__mla_role;

#define CGRT__MLA_PAGE_16 1
#define CGRT__MLA_PAGE_32 2
#define CGRT__MLA_PAGE_64 4
#define CGRT__MLA_PAGES (CGRT__MLA_PAGE_16 | CGRT__MLA_PAGE_32 | CGRT__MLA_PAGE_64)

#define CGRT__MLA_KV_BF16 0
#define CGRT__MLA_KV_FP8 1

/* clang-format off */
#define CGRT__MLA_KERNELS(X)                                                                                                                            \
  X(cgrt_mla_schedule,           CGRT__MLA_SCHEDULE,      1024, 0,                       1,  0,  0, 0, CGRT__MLA_PAGES, 0, 0, CGRT__MLA_KV_BF16, schedule_ref)        \
  X(cgrt_mla_split_t64,          CGRT__MLA_SPLIT,          128, CGRT_MLA_T64_SMEM,       1,  1, 16, 0, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_BF16, split_ref)           \
  X(cgrt_mla_split_t64_row1,     CGRT__MLA_SPLIT_ONE_ROW,  128, CGRT_MLA_T64_SMEM,       1,  1, 16, 0, CGRT__MLA_PAGES, 1, 0, CGRT__MLA_KV_BF16, split_row1_ref)      \
  X(cgrt_mla_split_t64_fp8,      CGRT__MLA_SPLIT,          128, CGRT_MLA_T64_FP8_SMEM,   1,  1, 16, 0, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_FP8,  split_fp8_ref)       \
  X(cgrt_mla_split_t64_row1_fp8, CGRT__MLA_SPLIT_ONE_ROW,  128, CGRT_MLA_T64_FP8_SMEM,   1,  1, 16, 0, CGRT__MLA_PAGES, 1, 0, CGRT__MLA_KV_FP8,  split_row1_fp8_ref)  \
  X(cgrt_mla_split_t64_n32,      CGRT__MLA_SPLIT,          128, CGRT_MLA_T64_N32_SMEM,   1, 17, 32, 0, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_BF16, split_ref)           \
  X(cgrt_mla_split_t64_n32_causal, CGRT__MLA_SPLIT_CAUSAL_BLOCK, 128, CGRT_MLA_T64_N32_SMEM, 1, 17, 32, 0, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_BF16, split_ref)    \
  X(cgrt_mla_split_t64_n64,      CGRT__MLA_SPLIT,          256, CGRT_MLA_T64_N64_SMEM,   1, 33, 64, 1, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_BF16, split_ref)           \
  X(cgrt_mla_split_t64_n64_causal, CGRT__MLA_SPLIT_CAUSAL_BLOCK, 256, CGRT_MLA_T64_N64_SMEM, 1, 33, 64, 1, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_BF16, split_ref)    \
  X(cgrt_mla_split_t64_n64_fp8,  CGRT__MLA_SPLIT,          256, CGRT_MLA_T64_N64_FP8_SMEM, 1, 17, 64, 0, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_FP8, split_fp8_ref)     \
  X(cgrt_mla_split_t64_n64_fp8_causal, CGRT__MLA_SPLIT_CAUSAL_BLOCK, 256, CGRT_MLA_T64_N64_FP8_SMEM, 1, 17, 64, 0, CGRT__MLA_PAGES, 1, 1, CGRT__MLA_KV_FP8, split_fp8_ref) \
  X(cgrt_mla_split_m64_ws,       CGRT__MLA_SPLIT,          384, CGRT_MLA_M64_WS_SMEM,    1, 17, 64, 0, CGRT__MLA_PAGES, 0, 0, CGRT__MLA_KV_BF16, split_ref)           \
  X(cgrt_mla_split_m64_ws_causal, CGRT__MLA_SPLIT_CAUSAL_BLOCK, 384, CGRT_MLA_M64_WS_SMEM, 1, 17, 64, 0, CGRT__MLA_PAGES, 0, 0, CGRT__MLA_KV_BF16, split_ref)        \
  X(cgrt_mla_combine,            CGRT__MLA_COMBINE,        256, 0,                       1,  0,  0, 0, CGRT__MLA_PAGES, 0, 0, CGRT__MLA_KV_BF16, combine_ref)         \
  X(cgrt_mla_vproj,              CGRT__MLA_VPROJ,          128, CGRT_MLA_VPROJ_SMEM,     1,  0,  0, 0, CGRT__MLA_PAGES, 0, 0, CGRT__MLA_KV_BF16, vproj_ref)
/* clang-format on */

/* One row of the table as data (kernels/mla/plan.c and tests/mla). */
typedef struct cgrt__mla_kernel {
  const char *name;
  cgrt__mla_role role;
  int threads, smem, ctas_per_sm, hg_min, hg_max, g_max, pages, aligned, early, kv;
} cgrt__mla_kernel;

#define CGRT__MLA_KERNEL_ROW(name, role, threads, smem, ctas, hg_min, hg_max, g_max, pages, aligned, early, kv, ref) \
  {#name, role, threads, smem, ctas, hg_min, hg_max, g_max, pages, aligned, early, kv},

/* The mask bit of a page size (0 for other sizes). */
static inline int cgrt__mla_page_bit(int page_size) {
  return page_size == 16 ? CGRT__MLA_PAGE_16 : page_size == 32 ? CGRT__MLA_PAGE_32
         : page_size == 64 ? CGRT__MLA_PAGE_64 : 0;
}

#endif /* CGRT_KERNELS_MLA_KERNEL_TABLE_H */
