/* Host side of the MLA decode kernels (kernels/mla_decode.cu): plan creation (path,
 * split count, workspace and counter reservations) and the per-step launches. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgrt/cgrt_mla.h"
#include "kernels/mla_common.cuh"
#include "runtime/handles.h"
#include "runtime/runtime_internal.h"

#define MLA_WORKSPACE_NAME "mla.decode"
#define MLA_MAX_ROWS (1 << 20)
#define MLA_MAX_QHEADS 4096

struct cgrt_mla_plan {
  cgrt__child child; /* destroyed with the runtime if the host forgets */
  const char *split_name; /* the split kernel chosen (static string) */
  cgrt_runtime *rt;
  cgrt_mla_options o;
  int max_rows, q_heads, cap;
  int min_tiles_ws, min_tiles_cnt; /* fewest tiles per range: workspace / counters merges */
  int counters_min_rows; /* steps of >= this many rows merge through counters (0: never) */
  cgrt__mla_shape s;
  CUfunction f_sched, f_split, f_comb;
  cgrt_tensor_desc descs[3]; /* partial outputs, partial LSEs, metadata */
  size_t workspace_bytes;
  size_t counter_bytes;      /* bytes of the counter buffer this plan needs (all lanes below) */
  size_t counter_offset;     /* first counter of this plan's lane, in counters */
  size_t fixed_split_bytes;
  int pdl;                   /* launch split and combine with programmatic stream serialization */
  int fuse;                  /* rows <= split block size: the split kernel schedules itself */
  int alt_max;               /* cgrt_mla_split_m16_auto: ranges of <= alt_max tiles run 2 x 32 */
  int nospec;                /* cgrt_mla_combine_nospec (A/B: no loads before the metadata) */
  int noop;                  /* A/B floor: 1 = split and combine return at once, 2 = combine */
  int align;                 /* ranges in use a multiple of rows (min_tiles passed negated) */
  int nz;                    /* CGRT_MLA_NZ: combine column slices (0: by shape) */
  int deep_rows;             /* steps of <= deep_rows rows run the one-row kernel f_deep */
  int deep_parts;            /* its ranges P: one CTA per SM */
  int deep_smem;             /* its dynamic shared memory */
  const char *deep_name;     /* cgrt_mla_split_t64_row1 (rows == 1 only) or _m16_deep */
  CUfunction f_deep;         /* (deep_rows > 0) */
};

void cgrt_mla_options_init(cgrt_mla_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->block_len = 1;
  o->dcp_world_size = 1;
  o->page_size = 64;
  o->combine = CGRT_MLA_COMBINE_AUTO;
  o->lane = CGRT_LANE_TARGET;
}

static size_t next_pow2(size_t x) {
  size_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

static void destroy_child(void *obj);

/* 1 if name is one of the NULL-terminated list. */
static int name_in(const char *name, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(name, *list)) return 1;
  return 0;
}

cgrt_status cgrt_mla_plan_create(cgrt_runtime *rt, const cgrt_mla_options *opts,
                                 cgrt_mla_plan **out) {
  if (out) *out = NULL;
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mla_plan_create");
  if (st) return st;
  if (!opts || !out)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_plan_create: %s is NULL",
                      !opts ? "options" : "out");
  /* The struct grows at its end: a host built against an older header (the first one
   * ended at lane) gets the defaults of the fields it does not know. */
  if (opts->size < offsetof(cgrt_mla_options, lane) + sizeof(int) || opts->size > (1u << 16))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: options->size is %zu, not a cgrt_mla_options size (%zu; "
                      "call cgrt_mla_options_init)", opts->size, sizeof(cgrt_mla_options));
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  if (o.max_num_seqs <= 0 || o.block_len <= 0 || o.heads <= 0 || o.dcp_world_size <= 0 ||
      o.max_model_len <= 0 || o.max_blocks_per_seq < 0)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: sizes must be positive (max_num_seqs %d, "
                      "block_len %d, heads %d, dcp_world_size %d, max_model_len %d, "
                      "max_blocks_per_seq %d)", o.max_num_seqs, o.block_len, o.heads,
                      o.dcp_world_size, o.max_model_len, o.max_blocks_per_seq);
  if (o.page_size != 16 && o.page_size != 32 && o.page_size != 64)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: page_size %d is not 16, 32 or 64", o.page_size);
  if (o.combine != CGRT_MLA_COMBINE_WORKSPACE && o.combine != CGRT_MLA_COMBINE_COUNTERS &&
      o.combine != CGRT_MLA_COMBINE_AUTO)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_plan_create: unknown combine %d",
                      (int)o.combine);
  if (o.programmatic_launch < 0 || o.programmatic_launch > 2)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: programmatic_launch %d is not 0, 1 or 2", o.programmatic_launch);
  if (o.lane < 0 || o.lane >= CGRT_MAX_LANES)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: lane %d is outside 0..%d", o.lane, CGRT_MAX_LANES - 1);
  if ((long long)o.max_num_seqs * o.block_len > MLA_MAX_ROWS ||
      (long long)o.heads * o.dcp_world_size > MLA_MAX_QHEADS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: %lld rows (max_num_seqs x block_len) or %lld query "
                      "heads (heads x dcp_world_size) exceed the limits %d / %d",
                      (long long)o.max_num_seqs * o.block_len,
                      (long long)o.heads * o.dcp_world_size, MLA_MAX_ROWS, MLA_MAX_QHEADS);
  if (o.max_blocks_per_seq == 0) o.max_blocks_per_seq = (o.max_model_len + o.page_size - 1) / o.page_size;
  if ((long long)o.max_num_seqs * o.max_blocks_per_seq > INT_MAX)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: block table of %d x %d entries is too large",
                      o.max_num_seqs, o.max_blocks_per_seq);

  cgrt_mla_plan *p = (cgrt_mla_plan *)cgrt__handle_alloc(sizeof *p);
  if (!p) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_mla_plan_create: host allocation");
  p->rt = rt;
  p->o = o;
  p->max_rows = o.max_num_seqs * o.block_len;
  p->q_heads = o.heads * o.dcp_world_size;
  {
    long long cap = (long long)o.max_blocks_per_seq * o.page_size;
    if (cap > o.max_model_len) cap = o.max_model_len;
    p->cap = (int)cap;
  }
  p->min_tiles_ws = CGRT_MLA_MIN_TILES_WORKSPACE;
  p->min_tiles_cnt = CGRT_MLA_MIN_TILES_COUNTERS;
  cgrt__mla_choose(p->q_heads, rt->sm_count, &p->s);
  if (!p->s.fast)
    cgrt__log(CGRT_LOG_WARN,
              "mla: %d query heads (%d heads x dcp %d) take the generic path: the head rule "
              "tiles by %d and %d %% %d != 0; using %d CTAs of 16 heads per KV range, the last "
              "partly masked", p->q_heads, o.heads, o.dcp_world_size, p->s.tile, p->q_heads,
              p->s.tile, p->s.groups);

  const char *split_name = p->s.m64 ? "cgrt_mla_split_m64" : "cgrt_mla_split_m16";
  int carve = 0; /* 1: ask for the largest shared-memory carveout (3 CTAs per SM) */
  {
    /* Tuning knobs for A/B runs (read once here): CGRT_MLA_SPLIT=ts32 / m64ts32 take the
     * previous m16 / m64 pipelines (two 32-token stages); CGRT_MLA_PDL=1 launches split
     * and combine with programmatic dependent launch (off by default: no gain measured);
     * CGRT_MLA_FUSE=0 keeps the schedule kernel for short batches;
     * CGRT_MLA_MIN_TILES=n overrides the fewest tiles per range; CGRT_MLA_SPLIT=auto
     * picks the m16 pipeline per CTA from its range length (CGRT_MLA_ALT_MAX=n tiles),
     * CGRT_MLA_SPLIT=s3 runs 3 CTAs per SM, CGRT_MLA_SPLIT=t64 the token-major wgmma kernel; CGRT_MLA_COMB=nospec the combine without its one-row loads before the metadata;
     * CGRT_MLA_PARTS=n sets the number of ranges P; CGRT_MLA_SPLIT=prof (GPU only, with
     * CGRT_MLA_NOOP=2) runs cgrt_mla_split_m16_prof, which writes per-CTA timestamps to
     * out instead of results (mla_decode_bench --prof). */
    const char *e = getenv("CGRT_MLA_SPLIT");
    /* "s16" (or anything unknown) = cgrt_mla_split_m16. m64 default: "wgmma" =
     * cgrt_mla_split_m64_wgmma (H200: 1.5-1.7x the mma.sync kernel at 64 and 128 heads,
     * bench/mla_wgmma/NOTES.md); any other value, e.g. CGRT_MLA_SPLIT=mma, keeps
     * cgrt_mla_split_m64. */
    if (!e || !*e) e = p->s.m64 ? "wgmma" : CGRT_MLA_DEFAULT_M16_SPLIT;
    if (e && !strcmp(e, "ts32") && !p->s.m64) {
      split_name = "cgrt_mla_split_m16_ts32";
      p->s.smem = CGRT_MLA_M16_TS32_SMEM;
    } else if (e && !strcmp(e, "m64ts32") && p->s.m64) {
      split_name = "cgrt_mla_split_m64_ts32";
      p->s.smem = CGRT_MLA_M64_TS32_SMEM;
    } else if (e && (!strcmp(e, "wgmma") || !strcmp(e, "wgmma2s4")) && p->s.m64) {
      /* kernels/mla_decode_wgmma.cu (sm_90a wgmma; mma.sync fallback in the PTX): 2
       * warpgroups (256 threads, so rows <= 256 fuse the schedule), 1 CTA/SM. wgmma (the
       * m64 default): S, softmax, P.V per 32-token stage, 3 stages; wgmma2s4 (A/B):
       * next stage's S overlaps the softmax, 4 stages. Shared memory:
       * Layout<stages>::kBytes there (static_assert). */
      const int s4 = !strcmp(e, "wgmma2s4");
      split_name = s4 ? "cgrt_mla_split_m64_wgmma2s4" : "cgrt_mla_split_m64_wgmma";
      p->s.threads = 256;
      p->s.smem = s4 ? 231980 : 196140;
    } else if (e && (!strcmp(e, "auto") || !strcmp(e, "prof")) && !p->s.m64) {
      /* Per CTA: ranges of <= alt_max tiles take the 2 x 32 pipeline, longer ones the
       * m16 default; the dynamic shared memory of the larger layout. */
      split_name = !strcmp(e, "prof") ? "cgrt_mla_split_m16_prof" : "cgrt_mla_split_m16_auto";
      p->s.smem = CGRT_MLA_M16_AUTO_SMEM;
    } else if (e && !strcmp(e, "deep") && !p->s.m64) {
      /* One CTA per SM with four 32-token stages (three in flight): P from 1 CTA per SM. */
      split_name = "cgrt_mla_split_m16_deep";
      p->s.smem = CGRT_MLA_M16_DEEP_SMEM;
      p->s.parts = cgrt__mla_parts(rt->sm_count, 1, p->s.groups);
    } else if (e && (!strcmp(e, "t64") || !strcmp(e, "t64prof")) && !p->s.m64) {
      /* kernels/mla_decode_t64.cu: token-major wgmma (64 tokens x 16 heads per product),
       * one warpgroup per CTA, 1 CTA/SM: P from 1 CTA per SM. */
      split_name = !strcmp(e, "t64prof") ? "cgrt_mla_split_t64_prof" : "cgrt_mla_split_t64";
      p->s.smem = CGRT_MLA_T64_SMEM;
      p->s.parts = cgrt__mla_parts(rt->sm_count, 1, p->s.groups);
    } else if (e && !strcmp(e, "s3") && !p->s.m64) {
      /* Three CTAs of three 16-token stages per SM: P from 3 CTAs per SM. */
      split_name = "cgrt_mla_split_m16_s3";
      p->s.smem = CGRT_MLA_M16_S3_SMEM;
      carve = 1;
      p->s.parts = cgrt__mla_parts(rt->sm_count, 3, p->s.groups);
    }
    e = getenv("CGRT_MLA_COPY"); /* chunk: the auto kernel with the previous KV copies, one
                                   * 16-byte chunk per thread (cgrt_mla_split_m16_chunk) */
    if (e && !strcmp(e, "chunk") && !strcmp(split_name, "cgrt_mla_split_m16_auto"))
      split_name = "cgrt_mla_split_m16_chunk";
    e = getenv("CGRT_MLA_BTA"); /* 0: the auto kernel reading each stage's block-table
                                  * entries when it issues the stage (cgrt_mla_split_m16_nobta) */
    if (e && !strcmp(e, "0") && !strcmp(split_name, "cgrt_mla_split_m16_auto"))
      split_name = "cgrt_mla_split_m16_nobta";
    e = getenv("CGRT_MLA_PARTS"); /* ranges P (grid.y); more than fit at once: the
                                      * hardware balances the later ones */
    if (e && atoi(e) > 0 && atoi(e) <= 65535) p->s.parts = atoi(e);
    e = getenv("CGRT_MLA_ALT_MAX"); /* tiles per range at or below which auto runs 2 x 32 */
    p->alt_max = e && atoi(e) >= 0 && *e ? atoi(e) : CGRT_MLA_ALT_MAX_TILES;
    e = getenv("CGRT_MLA_COMB"); /* nospec */
    p->nospec = e && !strcmp(e, "nospec");
    e = getenv("CGRT_MLA_PDL"); /* 0 | 1 | 2: overrides options.programmatic_launch */
    p->pdl = e && (!strcmp(e, "0") || !strcmp(e, "1") || !strcmp(e, "2")) ? atoi(e) : o.programmatic_launch;
    e = getenv("CGRT_MLA_FUSE");
    p->fuse = !(e && !strcmp(e, "0"));
    e = getenv("CGRT_MLA_MIN_TILES"); /* fewest 32-token tiles per range */
    if (e && atoi(e) > 0) p->min_tiles_ws = p->min_tiles_cnt = atoi(e);
    e = getenv("CGRT_MLA_ALIGN"); /* 0 | 1: ranges in use rounded down to a multiple of rows */
    p->align = e && *e ? !strcmp(e, "1") : CGRT_MLA_DEFAULT_ALIGN;
    e = getenv("CGRT_MLA_NOOP"); /* 1: timing floor (kernels that do nothing); 2: combine only */
    p->noop = e && (!strcmp(e, "1") || !strcmp(e, "2")) ? atoi(e) : 0;
    e = getenv("CGRT_MLA_NZ"); /* 1 | 2 | 4: column slices of the combine (not the one-row form) */
    p->nz = e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "4")) ? atoi(e) : 0;
    e = getenv("CGRT_MLA_DEEP_ROWS"); /* n: steps of <= n rows run the one-row kernel */
    p->deep_rows = e && *e && atoi(e) >= 0 ? atoi(e) : CGRT_MLA_DEFAULT_DEEP_ROWS;
    e = getenv("CGRT_MLA_ONEROW"); /* the one-row kernel under t64: row1 (default) or deep */
    if (!e || !*e) e = CGRT_MLA_DEFAULT_ONEROW;
    p->deep_name = !strcmp(split_name, "cgrt_mla_split_t64_prof") ? "cgrt_mla_split_t64_row1_prof"
                   : strcmp(split_name, "cgrt_mla_split_t64") || !strcmp(e, "deep") ? "cgrt_mla_split_m16_deep"
                                                                                    : "cgrt_mla_split_t64_row1";
  }
  {
    /* Row-aligned ranges (a schedule property: min_tiles passed negated) where they were
     * measured: the kernels of kernels/mla_decode.cu and cgrt_mla_split_t64; the m64
     * wgmma kernels keep the plain ranges. */
    static const char *const aligned_kernels[] = {
        "cgrt_mla_split_m16_auto", "cgrt_mla_split_m16_prof", "cgrt_mla_split_m16_chunk", "cgrt_mla_split_m16_deep",
        "cgrt_mla_split_m16_nobta", "cgrt_mla_split_m16", "cgrt_mla_split_m64", "cgrt_mla_split_m16_ts32",
        "cgrt_mla_split_m64_ts32", "cgrt_mla_split_m16_s3", "cgrt_mla_split_t64", "cgrt_mla_split_t64_prof", NULL};
    if (!name_in(split_name, aligned_kernels)) p->align = 0;
  }
  /* The one-CTA-per-SM kernel for the shortest steps: only in place of the default 16-head
   * kernel and with the workspace combine (the configuration it was measured in):
   * cgrt_mla_split_t64_row1 under t64 (steps of one row only), cgrt_mla_split_m16_deep
   * under auto. */
  {
    static const char *const with_onerow[] = {"cgrt_mla_split_m16_auto", "cgrt_mla_split_t64",
                                              "cgrt_mla_split_t64_prof", NULL};
    if (!name_in(split_name, with_onerow) || o.combine == CGRT_MLA_COMBINE_COUNTERS || p->noop == 1)
      p->deep_rows = 0;
  }
  /* AUTO: counters once the merging CTA reads <= CGRT_MLA_AUTO_MERGE_BYTES of partials,
   * about splits / rows partials of heads-per-CTA x 2 KiB each. */
  if (o.combine == CGRT_MLA_COMBINE_AUTO) {
    const long long b = (long long)p->s.parts * p->s.hg * (CGRT_MLA_DV * 4);
    p->counters_min_rows = (int)((b + CGRT_MLA_AUTO_MERGE_BYTES - 1) / CGRT_MLA_AUTO_MERGE_BYTES);
    if (p->counters_min_rows < 1) p->counters_min_rows = 1;
  } else {
    p->counters_min_rows = o.combine == CGRT_MLA_COMBINE_COUNTERS ? 1 : 0;
  }
  p->deep_parts = cgrt__mla_parts(rt->sm_count, 1, p->s.groups);
  /* programmatic_launch 2: the kernels with the early schedule where they exist (the
   * mma.sync kernels of auto and deep; the t64 kernels treat 2 as 1: H200, one row of
   * 16 heads x 8192 tokens, row1 10.8 us with 0 or 1, the deep kernel's early form 11.5). */
  if (p->pdl == 2 && !strcmp(split_name, "cgrt_mla_split_m16_auto")) split_name = "cgrt_mla_split_m16_auto_early";
  if (p->pdl == 2 && !strcmp(p->deep_name, "cgrt_mla_split_m16_deep")) p->deep_name = "cgrt_mla_split_m16_deep_early";
  if (!strncmp(p->deep_name, "cgrt_mla_split_t64_row1", 23)) {
    p->deep_smem = CGRT_MLA_T64_SMEM;
    if (p->deep_rows > 1) p->deep_rows = 1; /* the row1 kernels take steps of one row */
  } else {
    p->deep_smem = CGRT_MLA_M16_DEEP_SMEM;
  }
  if (p->noop == 1) split_name = "cgrt_mla_noop_split";
  p->split_name = split_name;
  if ((st = cgrt__runtime_function(rt, "cgrt_mla_schedule", &p->f_sched)) ||
      (st = cgrt__runtime_function(rt, split_name, &p->f_split)) ||
      (st = cgrt__runtime_function(rt, p->noop ? "cgrt_mla_noop_combine"
                                               : p->nospec ? "cgrt_mla_combine_nospec" : "cgrt_mla_combine",
                                   &p->f_comb)) ||
      (p->deep_rows && (st = cgrt__runtime_function(rt, p->deep_name, &p->f_deep)))) {
    cgrt__error_prefix("cgrt_mla_plan_create");
    goto fail;
  }
  if (p->deep_rows) {
    st = CGRT__CU(rt->drv, cuFuncSetAttribute,
                  (p->f_deep, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, p->deep_smem),
                  CGRT_ERROR_DRIVER, "cgrt_mla_plan_create: raising the one-row split kernel's shared memory");
    if (st) goto fail;
  }
  st = CGRT__CU(rt->drv, cuFuncSetAttribute,
                (p->f_split, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, p->s.smem),
                CGRT_ERROR_DRIVER, "cgrt_mla_plan_create: raising the split kernel's shared memory");
  if (st) goto fail;
  if (carve) {
    /* s3: three CTAs per SM need the largest shared-memory carveout. */
    st = CGRT__CU(rt->drv, cuFuncSetAttribute,
                  (p->f_split, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
                  CGRT_ERROR_DRIVER, "cgrt_mla_plan_create: shared-memory carveout of the split kernel");
    if (st) goto fail;
  }

  {
    /* rows + P partial slots; at least CGRT_MLA_COMB_SPEC_SLOTS, so that one-row steps
     * can take the combine's 64-column form (it loads slots 0..143 before the metadata). */
    int64_t slots = (int64_t)p->max_rows + p->s.parts;
    if (slots < CGRT_MLA_COMB_SPEC_SLOTS) slots = CGRT_MLA_COMB_SPEC_SLOTS;
    cgrt_tensor_desc *d = p->descs;
    d[0].ndim = 3; d[0].shape[0] = slots; d[0].shape[1] = p->q_heads; d[0].shape[2] = CGRT_MLA_DV;
    d[0].dtype = CGRT_DTYPE_F32;
    d[1].ndim = 2; d[1].shape[0] = slots; d[1].shape[1] = p->q_heads; d[1].dtype = CGRT_DTYPE_F32;
    d[2].ndim = 1; d[2].shape[0] = 2 * (int64_t)p->max_rows + 2; d[2].dtype = CGRT_DTYPE_I32;
    p->workspace_bytes = (size_t)slots * p->q_heads * (CGRT_MLA_DV + 1) * 4 +
                         (size_t)(2 * p->max_rows + 2) * 4;
    CUdeviceptr ptrs[3];
    st = cgrt_workspace_request(rt, o.lane, MLA_WORKSPACE_NAME, p->descs, 3, ptrs);
    if (st) {
      cgrt__error_prefix("cgrt_mla_plan_create");
      goto fail;
    }
  }
  {
    size_t splits = next_pow2((size_t)(o.max_model_len / 512 > 1 ? o.max_model_len / 512 : 1));
    if (splits > (size_t)(2 * rt->sm_count)) splits = (size_t)(2 * rt->sm_count);
    p->fixed_split_bytes = (size_t)p->max_rows * p->q_heads * splits * (CGRT_MLA_DV + 1) * 4;
  }
  if (o.combine != CGRT_MLA_COMBINE_WORKSPACE) {
    /* Counter r * groups + g of row r, head group g; one block of max_rows * q_heads
     * counters per lane so that lanes on different streams never share a counter. */
    p->counter_offset = (size_t)o.lane * p->max_rows * p->q_heads;
    p->counter_bytes =
        cgrt_counters_decode_bytes((size_t)p->max_rows * (o.lane + 1), p->q_heads, rt->sm_count);
    st = cgrt_counters_reserve(rt, p->counter_bytes);
    if (st) {
      cgrt__error_prefix("cgrt_mla_plan_create");
      goto fail;
    }
  }
  if (cgrt__handle_add(p, CGRT__HANDLE_MLA_PLAN) != 0) {
    st = cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_mla_plan_create: the live-handle table is full");
    goto fail;
  }
  p->child.destroy = destroy_child;
  p->child.obj = p;
  p->child.kind = "mla plan";
  cgrt__runtime_attach(rt, &p->child);
  *out = p;
  return CGRT_SUCCESS;
fail:
  cgrt__handle_free(p);
  return st;
}

void cgrt_mla_plan_destroy(cgrt_mla_plan *plan) {
  if (!plan || !cgrt__handle_remove(plan, CGRT__HANDLE_MLA_PLAN)) return;
  if (cgrt__runtime_is_live(plan->rt)) cgrt__runtime_detach(plan->rt, &plan->child);
  cgrt__handle_free(plan);
}

static void destroy_child(void *obj) { cgrt_mla_plan_destroy((cgrt_mla_plan *)obj); }

cgrt_status cgrt_mla_plan_get_info(const cgrt_mla_plan *p, cgrt_mla_plan_info *info) {
  if (!cgrt__handle_live(p, CGRT__HANDLE_MLA_PLAN))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_mla_plan_get_info: plan is NULL or destroyed");
  /* The struct grows at its end: a caller built against an older header (the first one
   * ended at split_kernel) gets the fields it knows. */
  if (!info || info->size < offsetof(cgrt_mla_plan_info, split_kernel) + sizeof info->split_kernel)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_get_info: info is NULL or info->size is too small");
  info->max_rows = p->max_rows;
  info->q_heads = p->q_heads;
  info->fast_path = p->s.fast;
  info->head_tile = p->s.tile;
  info->heads_per_cta = p->s.hg;
  info->head_groups = p->s.groups;
  info->splits = p->s.parts;
  info->workspace_bytes = p->workspace_bytes;
  info->counter_bytes = p->o.combine != CGRT_MLA_COMBINE_WORKSPACE ? p->counter_bytes : 0;
  info->fixed_split_bytes = p->fixed_split_bytes;
  info->split_kernel = p->split_name;
  if (info->size >= offsetof(cgrt_mla_plan_info, one_row_kernel) + sizeof info->one_row_kernel)
    info->one_row_kernel = p->deep_rows ? p->deep_name : p->split_name;
  if (info->size >= offsetof(cgrt_mla_plan_info, counters_min_rows) + sizeof info->counters_min_rows)
    info->counters_min_rows = p->counters_min_rows;
  return CGRT_SUCCESS;
}

cgrt_status cgrt_mla_decode(cgrt_mla_plan *p, CUstream stream, const cgrt_mla_args *a) {
  if (!cgrt__handle_live(p, CGRT__HANDLE_MLA_PLAN))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_mla_decode: plan is NULL or destroyed");
  cgrt_runtime *rt = p->rt;
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mla_decode");
  if (st) return st;
  if (!a) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_decode: args is NULL");
  if (a->size < sizeof *a)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: args->size is %zu, expected %zu", a->size, sizeof *a);
  {
    const char *null_name = !a->q ? "q" : !a->kv_cache ? "kv_cache" : !a->block_table ? "block_table"
                          : !a->seq_lens ? "seq_lens" : !a->out ? "out" : !a->lse ? "lse" : NULL;
    if (null_name)
      return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_decode: %s is NULL", null_name);
  }
  if (((a->q | a->kv_cache | a->out) & 15) || ((a->block_table | a->seq_lens | a->lse) & 3))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: q, kv_cache and out must be 16-byte aligned, "
                      "block_table, seq_lens and lse 4-byte aligned");
  if (a->num_rows <= 0 || a->num_rows > p->max_rows || a->num_rows % p->o.block_len != 0)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: num_rows %d must be in 1..%d (max_rows) and a multiple "
                      "of block_len %d", a->num_rows, p->max_rows, p->o.block_len);
  if (!isfinite(a->softmax_scale) || !(a->softmax_scale > 0.f))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: softmax_scale is %g; it must be finite and > 0", (double)a->softmax_scale);

  /* Same addresses every step once reserved (requests that fit are allowed during
   * capture); asked each time so that a grown reservation before the lock is followed. */
  CUdeviceptr ws[3];
  st = cgrt_workspace_request(rt, p->o.lane, MLA_WORKSPACE_NAME, p->descs, 3, ws);
  if (st) {
    cgrt__error_prefix("cgrt_mla_decode");
    return st;
  }
  /* Steps of <= deep_rows rows: one CTA per SM, ranges of >= CGRT_MLA_MIN_TILES_DEEP tiles,
   * the workspace combine. */
  const int deep = p->deep_rows > 0 && a->num_rows <= p->deep_rows;
  const int use_counters = !deep && p->counters_min_rows > 0 && a->num_rows >= p->counters_min_rows;
  CUdeviceptr counters = 0;
  if (use_counters) {
    size_t bytes = 0;
    st = cgrt_counters_get(rt, &counters, &bytes);
    if (st) {
      cgrt__error_prefix("cgrt_mla_decode");
      return st;
    }
    if (!counters || bytes < p->counter_bytes)
      return cgrt__fail(CGRT_ERROR_INTERNAL,
                        "cgrt_mla_decode: counter buffer holds %zu bytes, the plan needs %zu",
                        bytes, p->counter_bytes);
    counters += p->counter_offset * sizeof(unsigned);
  }

  int rows = a->num_rows, bl = p->o.block_len, cap = p->cap, parts = deep ? p->deep_parts : p->s.parts;
  int min_tiles = deep ? CGRT_MLA_MIN_TILES_DEEP : use_counters ? p->min_tiles_cnt : p->min_tiles_ws;
  min_tiles = p->align ? -min_tiles : min_tiles;
  int qh = p->q_heads, hg = p->s.hg, mbps = p->o.max_blocks_per_seq;
  int ps = p->o.page_size, alt_max = p->alt_max;
  float scale = a->softmax_scale;
  CUdeviceptr seq_lens = a->seq_lens, meta = ws[2], q = a->q, kv = a->kv_cache,
              bt = a->block_table, out = a->out, lse = a->lse, po = ws[0], pl = ws[1];
  const cgrt__driver *drv = rt->drv;
  CUresult r;

  /* Short batches (rows <= the split kernel's block size): the split kernel computes
   * the schedule itself (one launch and one kernel boundary fewer). */
  const int fused = p->fuse && rows <= p->s.threads;
  CUdeviceptr sl_arg = fused ? seq_lens : 0;
  if (!fused) {
    void *sched_args[] = {&seq_lens, &meta, &rows, &bl, &cap, &parts, &min_tiles};
    r = drv->cuLaunchKernel(p->f_sched, 1, 1, 1, 1024, 1, 1, 0, stream, sched_args, NULL);
    if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernel", "cgrt_mla_decode: schedule kernel");
  }

  void *split_args[] = {&q,    &kv,    &bt,  &meta, &out, &lse, &po,   &pl,  &counters,
                        &rows, &qh,    &hg,  &parts, &mbps, &ps, &bl, &scale,
                        &sl_arg, &cap, &min_tiles, &alt_max};
  /* Split and combine wait on the device (griddepcontrol.wait) for the kernel before
   * them; with programmatic stream serialization (CGRT_MLA_PDL=1) their CTAs launch
   * while it runs. The schedule kernel is launched plainly: it overwrites the metadata
   * that the previous step's kernels read. */
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = (unsigned)p->s.groups;
  cfg.gridDimY = (unsigned)parts;
  cfg.gridDimZ = 1;
  cfg.blockDimX = (unsigned)p->s.threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = (unsigned)(deep ? p->deep_smem : p->s.smem);
  cfg.hStream = stream;
  cfg.attrs = p->pdl ? &attr : NULL;
  cfg.numAttrs = p->pdl ? 1 : 0;
  r = drv->cuLaunchKernelEx(&cfg, deep ? p->f_deep : p->f_split, split_args, NULL);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernelEx", "cgrt_mla_decode: split kernel");

  if (!use_counters) {
    /* Grid (q_heads, rows, nz): nz column slices per (row, head) so that short batches,
     * whose few rows carry many partials, still spread over the SMs. Past 256 (row, head)
     * pairs one slice: with cgrt_mla_split_t64 (4 partials per row at 32 x 16) nz 1 was
     * 2.8% / 3.2% faster than 2 at (32|64, 16, 8192) on the H200, 4 was 7.5% slower. */
    const long long rh = (long long)rows * qh;
    void *comb_args[] = {&meta, &po, &pl, &out, &lse, &rows, &qh};
    cfg.gridDimX = (unsigned)qh;
    cfg.gridDimY = (unsigned)rows;
    /* 64-column slices for the shortest steps (one row of 16 or 32 heads: -5.5% / -2.5%
     * on the H200; at 4 x 16 they cost +3%), 128 up to 256 (row, head) pairs. With one
     * row, the kernel loads slots 0..143 before it knows how many hold partials: every
     * plan reserves that many (CGRT_MLA_COMB_SPEC_SLOTS). */
    cfg.gridDimZ = rh <= 32 ? 8u : rh <= 256 ? 4u : 1u;
    if (p->nz) cfg.gridDimZ = (unsigned)p->nz;
    cfg.blockDimX = 256;
    cfg.sharedMemBytes = 0;
    r = drv->cuLaunchKernelEx(&cfg, p->f_comb, comb_args, NULL);
    if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernelEx", "cgrt_mla_decode: combine kernel");
  }
  return CGRT_SUCCESS;
}
