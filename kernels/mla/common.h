/* Constants shared by the MLA decode kernels (kernels/mla_decode.cu) and their host side
 * (kernels/mla_plan.c). Plain C: included by nvcc and by the C compiler.
 * kernels/mla_decode_ref.c repeats the few it needs (it builds in //kernels:refs). */
#ifndef CGRT_KERNELS_MLA_COMMON_CUH
#define CGRT_KERNELS_MLA_COMMON_CUH

#define CGRT_MLA_D 576    /* latent width of Q and K: kv_lora_rank 512 + rope 64 */
#define CGRT_MLA_DV 512   /* V = the first 512 values of each cached token */
#define CGRT_MLA_TILE 32  /* KV tokens per pipeline tile */
#define CGRT_MLA_KSTR 584 /* shared-memory row stride (elements) of a cached token */

/* Pipeline of the split kernels: KV tokens per shared-memory stage (16 or 32; the
 * schedule's ranges stay in 32-token tiles) and stages. m16 runs 2 CTAs/SM with five
 * 16-token stages, so that four stages (74.75 KB) are in flight per CTA while it
 * computes one (memory-bound: bytes in flight set the bandwidth); m64 (1 CTA/SM) three
 * 16-token stages, which also keeps it within 128 registers (no spill). */
#ifndef CGRT_MLA_M16_TS
#define CGRT_MLA_M16_TS 16
#endif
#ifndef CGRT_MLA_M16_STAGES
#define CGRT_MLA_M16_STAGES 5
#endif
#ifndef CGRT_MLA_M64_TS
#define CGRT_MLA_M64_TS 16
#endif
#ifndef CGRT_MLA_M64_STAGES
#define CGRT_MLA_M64_STAGES 3
#endif

/* Dynamic shared memory of the split kernels: the KV stages plus the S-partial exchange
 * buffer (2 parities x R row groups x 4 warps x 16 x TS floats). */
#define CGRT_MLA_SMEM_BYTES_TS(R, STAGES, TS) \
  ((STAGES) * (TS) * CGRT_MLA_KSTR * 2 + 2 * (R) * 4 * 16 * (TS) * 4)
#define CGRT_MLA_M16_SMEM CGRT_MLA_SMEM_BYTES_TS(1, CGRT_MLA_M16_STAGES, CGRT_MLA_M16_TS)
#define CGRT_MLA_M64_SMEM CGRT_MLA_SMEM_BYTES_TS(4, CGRT_MLA_M64_STAGES, CGRT_MLA_M64_TS)
/* The previous m16 pipeline (two 32-token stages), kept as cgrt_mla_split_m16_ts32 for
 * A/B runs (CGRT_MLA_SPLIT=ts32 in the environment of the plan's creator). */
#define CGRT_MLA_M16_TS32_SMEM CGRT_MLA_SMEM_BYTES_TS(1, 2, 32)
/* The auto kernel holds both m16 pipelines: the larger of the two layouts. */
#define CGRT_MLA_M16_AUTO_SMEM \
  (CGRT_MLA_M16_SMEM > CGRT_MLA_M16_TS32_SMEM ? CGRT_MLA_M16_SMEM : CGRT_MLA_M16_TS32_SMEM)
/* The previous m64 pipeline (two 32-token stages, 56-68 B of register spill), for A/B
 * runs (CGRT_MLA_SPLIT=m64ts32): cgrt_mla_split_m64_ts32. */
#define CGRT_MLA_M64_TS32_SMEM CGRT_MLA_SMEM_BYTES_TS(4, 2, 32)
/* One CTA per SM of four 32-token stages (CGRT_MLA_SPLIT=deep): 165888 B. */
#define CGRT_MLA_M16_DEEP_SMEM CGRT_MLA_SMEM_BYTES_TS(1, 4, 32)
/* Three CTAs per SM of three 16-token stages (CGRT_MLA_SPLIT=s3): 64256 B each. */
#define CGRT_MLA_M16_S3_SMEM CGRT_MLA_SMEM_BYTES_TS(1, 3, 16)
/* cgrt_mla_split_t64 (kernels/mla_decode_t64.cu; CGRT_MLA_SPLIT=t64): token-major wgmma,
 * Q + a ring of 8 sub-stages of 64 tokens x 192 columns + P + small arrays, 1 CTA/SM. */
#define CGRT_MLA_T64_SMEM 219420
/* Fewest partial slots a plan reserves: the one-row combine (cgrt_mla_combine, 64-column
 * slices) loads slots 0..143 before it reads how many hold partials. */
#define CGRT_MLA_COMB_SPEC_SLOTS 144
/* Default of the variant knob for the <= 16-heads-per-CTA split kernel
 * (kernels/mla_plan.c): "t64" = cgrt_mla_split_t64 (kernels/mla_decode_t64.cu, the
 * default since the sixth session: H200 -4.5..-19% against "auto" at 4 to 128 rows,
 * bench/mla_decode/NOTES.md ninth pass), "auto" = cgrt_mla_split_m16_auto (the default
 * of the third to fifth sessions), "s16" = cgrt_mla_split_m16, "ts32", "s3", "deep";
 * CGRT_MLA_SPLIT overrides. Steps of one row run the one-row kernel
 * (CGRT_MLA_DEFAULT_DEEP_ROWS, CGRT_MLA_DEFAULT_ONEROW). */
#ifndef CGRT_MLA_DEFAULT_M16_SPLIT
#define CGRT_MLA_DEFAULT_M16_SPLIT "t64"
#endif
/* cgrt_mla_split_m16_auto: ranges of at most this many 32-token tiles run the two-stage
 * 32-token pipeline (CGRT_MLA_ALT_MAX overrides). Measured on the H200: 2 x 32 is 8%
 * faster at 31 tiles per range, 3% slower at 62 and 7-9% slower at 124-496. */
#ifndef CGRT_MLA_ALT_MAX_TILES
#define CGRT_MLA_ALT_MAX_TILES 48
#endif
/* Row-aligned ranges (fourth pass): the schedule rounds the ranges in use down to a
 * multiple a of rows when that drops at most 1/16 of them and T <= this many tiles x a
 * (kernels/mla_decode.cu, mla_decode_ref.c repeats it). H200, fourth pass (interleaved
 * A/B, three runs): -2.4..-2.6% at (32,16,8192), -2.7..-5.2% at (64,16,8192); without the
 * thresholds +0.6..+1.9% at 124+ tiles per range (3% fewer CTAs, no restart to save), so
 * those shapes are left as they were. CGRT_MLA_DEFAULT_ALIGN 1: on unless CGRT_MLA_ALIGN=0
 * (kernels of mla_decode.cu only; the plan never passes it to other split kernels). */
#define CGRT_MLA_ALIGN_MAX_TILES 64
#ifndef CGRT_MLA_DEFAULT_ALIGN
#define CGRT_MLA_DEFAULT_ALIGN 1
#endif
/* Steps of <= n rows (CGRT_MLA_DEEP_ROWS=n overrides; cgrt_mla_split_t64_row1 takes
 * n = 1 only) run a one-CTA-per-SM kernel with ranges of >= CGRT_MLA_MIN_TILES_DEEP
 * tiles and the workspace combine, where the plan's kernel is a default 16-head one:
 * under t64 the kernel of CGRT_MLA_DEFAULT_ONEROW (row1: H200 10.7-10.9 against 12.7 us
 * for deep at (1,16,8192) in graph, tenth pass), under auto cgrt_mla_split_m16_deep
 * (three 32-token stages in flight: -6.8% at (1,16,8192), +3.5% at batch 4 and +13% at
 * batch 32; seventh pass, bench/mla_decode/NOTES.md). */
#ifndef CGRT_MLA_DEFAULT_DEEP_ROWS
#define CGRT_MLA_DEFAULT_DEEP_ROWS 1
#endif
/* cgrt_mla_split_t64_row1 takes Pe = min(P, ceil(len / 64)) ranges, the schedule's count
 * for ranges of >= 2 tiles: it relies on this value. */
#define CGRT_MLA_MIN_TILES_DEEP 2
/* The one-row kernel under the t64 default (CGRT_MLA_ONEROW overrides): "row1" =
 * cgrt_mla_split_t64_row1 (kernels/mla_decode_t64.cu), "deep" = cgrt_mla_split_m16_deep
 * (the one-row kernel of the fourth to sixth sessions). */
#ifndef CGRT_MLA_DEFAULT_ONEROW
#define CGRT_MLA_DEFAULT_ONEROW "row1"
#endif

/* How a plan runs q_heads query heads on sm_count SMs (host side; also used by the
 * standalone GPU harness in bench/mla_decode/). Head-count rule: tile = 8 if q_heads
 * <= 8, 16 if <= 32, else 64; the fast path takes q_heads iff q_heads % min(q_heads,
 * tile) == 0, with groups of min(q_heads, tile) heads; every other count takes the
 * generic path: groups of 16 heads, the last one partly masked. */
typedef struct cgrt__mla_shape {
  int fast;      /* 1: fast path; 0: generic path */
  int tile;      /* the rule's tile */
  int m64;       /* 1: cgrt_mla_split_m64 (64 mma rows), 0: cgrt_mla_split_m16 */
  int hg;        /* query heads per CTA */
  int groups;    /* head groups: grid.x */
  int parts;     /* ranges of KV tiles: grid.y */
  int threads;   /* block size of the split kernel */
  int smem;      /* dynamic shared memory of the split kernel */
} cgrt__mla_shape;

/* Ranges P of KV tiles (grid.y) for per_sm CTAs per SM: one wave of the split kernel. */
static inline int cgrt__mla_parts(int sm_count, int per_sm, int groups) {
  const int p = (sm_count > 0 ? sm_count : 1) * per_sm / groups;
  return p > 0 ? p : 1;
}

static inline void cgrt__mla_choose(int q_heads, int sm_count, cgrt__mla_shape *s) {
  const int tile = q_heads <= 8 ? 8 : (q_heads <= 32 ? 16 : 64);
  const int t = q_heads < tile ? q_heads : tile;
  s->tile = tile;
  s->fast = q_heads % t == 0;
  s->hg = s->fast ? t : 16;
  s->m64 = s->hg > 16;
  s->groups = (q_heads + s->hg - 1) / s->hg;
  s->threads = s->m64 ? 512 : 128;
  s->smem = s->m64 ? CGRT_MLA_M64_SMEM : CGRT_MLA_M16_SMEM;
  s->parts = cgrt__mla_parts(sm_count, s->m64 ? 1 : (2 * (s->smem + 1024) <= 228 * 1024 ? 2 : 1), s->groups);
}

/* Fewest KV tiles per range (so short batches leave few partials to merge); the
 * schedule kernel uses min(P, ceil(T / min_tiles)) ranges. The counters strategy merges
 * in one CTA per (row, head group), so it wants fewer, longer ranges. */
#define CGRT_MLA_MIN_TILES_WORKSPACE 4
#define CGRT_MLA_MIN_TILES_COUNTERS 8

#endif /* CGRT_KERNELS_MLA_COMMON_CUH */
