/* Host side of the MLA decode kernels (the .cu files of kernels/mla/): plan creation
 * (head rule, kernels chosen from kernels/mla/kernel_table.h, ranges, workspace and
 * counter reservations) and the per-step launches. The design: docs/mla_decode.md. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgrt/cgrt_mla.h"
#include "kernels/mla/kernel_table.h"
#include "runtime/handles.h"
#include "runtime/runtime_internal.h"

#define MLA_WORKSPACE_NAME "mla.decode"
#define MLA_LATENT_NAME "mla.latent" /* the latent O of plans with v_head_dim */
#define MLA_MAX_ROWS (1 << 20)
#define MLA_MAX_QHEADS 4096
#define MLA_MAX_CONTEXT (1 << 30) /* tokens: the kernels count tokens and tiles in 32 bits */

static const cgrt__mla_kernel g_kernels[] = {CGRT__MLA_KERNELS(CGRT__MLA_KERNEL_ROW)};

/* A kernel of the plan: its table row, its function and, for the split roles, its ranges P
 * (grid.y). k is NULL where the plan has no kernel of that role. */
typedef struct mla_kernel {
  const cgrt__mla_kernel *k;
  CUfunction f;
  int parts;
} mla_kernel;

struct cgrt_mla_plan {
  cgrt__child child; /* destroyed with the runtime if the host forgets */
  cgrt_runtime *rt;
  cgrt_mla_options o; /* max_blocks_per_seq resolved */
  int max_rows, q_heads, cap;
  int fast, tile;   /* the head rule: path and tile */
  /* What the kernels see. Rows apart (unit 1): a "row" is a row, kh = q_heads. Rows of a
   * block together (unit = block_len, kv_shared): a "row" is a request, its kh =
   * block_len x q_heads query rows (q, out and lse of a block's rows are contiguous:
   * [rows, q_heads, .] is [requests, block_len x q_heads, .]), so each KV tile is read
   * once per request and head group. */
  int unit, kh, mk;  /* mk: block_len for causal rows run together, else 0 */
  int hg, groups;    /* query rows per CTA, CTAs per range */
  int hg1, groups1;  /* the same for the one-row kernel (16 per CTA where hg is 17..32) */
  int counters_min_rows;      /* steps of >= this many rows merge through counters (0: never) */
  mla_kernel sched, split, one_row, comb; /* one_row.k NULL: one-row steps run split1 */
  mla_kernel vproj;  /* the value projection (options.v_head_dim > 0), else k NULL */
  mla_kernel split1; /* the split kernel of one-row steps without one_row: split, or the
                      * 16-head kernel in groups1 groups where hg1 != hg */
  cgrt_tensor_desc descs[3];  /* partial outputs, partial LSEs, metadata */
  cgrt_tensor_desc latent;    /* v_head_dim > 0: the latent O, [max_rows, q_heads, 512] bf16 */
  size_t workspace_bytes;
  size_t counter_bytes;       /* bytes of the counter buffer this plan needs (all lanes below) */
  size_t counter_offset;      /* first counter of this plan's lane, in counters */
  size_t fixed_split_bytes;
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
  o->kv_dtype = CGRT_MLA_KV_BF16;
  o->kv_scale = 1.f;
}

static void destroy_child(void *obj);

/* Copies *opts over the defaults into *o, checks it and resolves max_blocks_per_seq;
 * *cap: the longest context a row can have. */
static cgrt_status check_options(const cgrt_mla_options *opts, cgrt_mla_options *o, int *cap) {
  /* The struct grows at its end: a host built against an older header (the first one
   * ended at lane) gets the defaults of the fields it does not know. */
  if (opts->size < offsetof(cgrt_mla_options, lane) + sizeof(int) || opts->size > (1u << 16))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: options->size is %zu, not a cgrt_mla_options size (%zu; "
                      "call cgrt_mla_options_init)", opts->size, sizeof(cgrt_mla_options));
  cgrt_mla_options_init(o);
  memcpy(o, opts, opts->size < sizeof *o ? opts->size : sizeof *o);
  if (o->max_num_seqs <= 0 || o->block_len <= 0 || o->heads <= 0 || o->dcp_world_size <= 0 ||
      o->max_model_len <= 0 || o->max_blocks_per_seq < 0)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: sizes must be positive (max_num_seqs %d, "
                      "block_len %d, heads %d, dcp_world_size %d, max_model_len %d, "
                      "max_blocks_per_seq %d)", o->max_num_seqs, o->block_len, o->heads,
                      o->dcp_world_size, o->max_model_len, o->max_blocks_per_seq);
  if (!cgrt__mla_page_bit(o->page_size))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: page_size %d is not 16, 32 or 64", o->page_size);
  if (o->combine != CGRT_MLA_COMBINE_WORKSPACE && o->combine != CGRT_MLA_COMBINE_COUNTERS &&
      o->combine != CGRT_MLA_COMBINE_AUTO)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_plan_create: unknown combine %d",
                      (int)o->combine);
  if (o->programmatic_launch < 0 || o->programmatic_launch > 2)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: programmatic_launch %d is not 0, 1 or 2", o->programmatic_launch);
  if (o->causal != 0 && o->causal != 1)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_plan_create: causal %d is not 0 or 1", o->causal);
  if (o->lane < 0 || o->lane >= CGRT_MAX_LANES)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: lane %d is outside 0..%d", o->lane, CGRT_MAX_LANES - 1);
  if (o->kv_dtype != CGRT_MLA_KV_BF16 && o->kv_dtype != CGRT_MLA_KV_FP8_E4M3)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_plan_create: unknown kv_dtype %d", (int)o->kv_dtype);
  if (o->kv_dtype == CGRT_MLA_KV_FP8_E4M3 && (!isfinite(o->kv_scale) || !(o->kv_scale > 0.f)))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: kv_scale is %g; an FP8 cache needs a finite scale > 0",
                      (double)o->kv_scale);
  const long long rows = (long long)o->max_num_seqs * o->block_len;
  if (rows > MLA_MAX_ROWS || (long long)o->heads * o->dcp_world_size > MLA_MAX_QHEADS)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: %lld rows (max_num_seqs x block_len) or %lld query "
                      "heads (heads x dcp_world_size) exceed the limits %d / %d", rows,
                      (long long)o->heads * o->dcp_world_size, MLA_MAX_ROWS, MLA_MAX_QHEADS);
  /* 64-bit: max_model_len near INT_MAX must not wrap. */
  const long long mbps = o->max_blocks_per_seq ? o->max_blocks_per_seq
                                               : ((long long)o->max_model_len + o->page_size - 1) / o->page_size;
  if (mbps * o->max_num_seqs > INT_MAX)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: block table of %d x %lld entries is too large",
                      o->max_num_seqs, mbps);
  long long c = mbps * o->page_size;
  if (c > o->max_model_len) c = o->max_model_len;
  if (c > MLA_MAX_CONTEXT || rows * ((c + CGRT_MLA_TILE - 1) / CGRT_MLA_TILE) > INT_MAX)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: contexts of up to %lld tokens over %lld rows exceed the "
                      "kernels' limits (2^30 tokens a row, 2^31 - 1 tiles of %d tokens a step)",
                      c, rows, CGRT_MLA_TILE);
  o->max_blocks_per_seq = (int)mbps;
  *cap = (int)c;
  if (o->v_head_dim != 0 && (o->v_head_dim < 0 || o->v_head_dim > CGRT_MLA_DV || o->v_head_dim % CGRT_MLA_VPROJ_COLS))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_create: v_head_dim %d is not 0 or a multiple of %d in %d..%d",
                      o->v_head_dim, CGRT_MLA_VPROJ_COLS, CGRT_MLA_VPROJ_COLS, CGRT_MLA_DV);
  return CGRT_SUCCESS;
}

static const cgrt__mla_kernel *pick(cgrt__mla_role role, int hg, int groups, int page_size, int kv);

/* The head rule: tile = 8 if q_heads <= 8, 16 if <= 16, 32 if <= 32, else 64, where the
 * table has a split kernel of that many heads per CTA for the cache's dtype (FP8: the
 * 17..64-row kernel serves 32 and 64); 16 where it has none; the fast path takes
 * q_heads iff q_heads % min(q_heads, tile) == 0, with groups of min(q_heads, tile) heads;
 * every other count takes the generic path: groups of 16 heads, the last partly masked. */
static void head_rule(cgrt_mla_plan *p) {
  const int q = p->q_heads;
  const int kv = p->o.kv_dtype == CGRT_MLA_KV_FP8_E4M3 ? CGRT__MLA_KV_FP8 : CGRT__MLA_KV_BF16;
  const int t32 = pick(CGRT__MLA_SPLIT, 32, 1, p->o.page_size, kv) ? 32 : 16;
  const int t64 = pick(CGRT__MLA_SPLIT, 64, 1, p->o.page_size, kv) ? 64 : 16;
  p->tile = q <= 8 ? 8 : (q <= 16 ? 16 : (q <= 32 ? t32 : t64));
  const int t = q < p->tile ? q : p->tile;
  p->fast = q % t == 0;
  p->hg = p->fast ? t : 16;
  p->groups = (q + p->hg - 1) / p->hg;
  p->unit = 1;
  p->kh = q;
  p->mk = 0;
}

/* The first kernel of the table with this role that takes hg heads per CTA in `groups`
 * head groups per request (its g_max), the page size and (split roles) the KV dtype kv
 * (CGRT__MLA_KV_*); NULL if none does. */
static const cgrt__mla_kernel *pick(cgrt__mla_role role, int hg, int groups, int page_size, int kv) {
  for (size_t i = 0; i < sizeof g_kernels / sizeof g_kernels[0]; i++) {
    const cgrt__mla_kernel *k = &g_kernels[i];
    const int split = role == CGRT__MLA_SPLIT || role == CGRT__MLA_SPLIT_ONE_ROW ||
                      role == CGRT__MLA_SPLIT_CAUSAL_BLOCK;
    if (k->role == role && (k->pages & cgrt__mla_page_bit(page_size)) &&
        (!split || (hg >= k->hg_min && hg <= k->hg_max && (!k->g_max || groups <= k->g_max) && k->kv == kv)))
      return k;
  }
  return NULL;
}

/* Rows of a block together (kv_shared): with k = block_len >= 2, a CTA takes up to 64 of
 * a request's k x q_heads query rows (groups of 64, the last partly masked) on the
 * 64-row kernels, where that reads the KV fewer times than the rows apart
 * (ceil(k q_heads / 64) < k x head groups) and the block has at least
 * CGRT_MLA_SHARE_MIN_ROWS query rows; the cache's dtype needs a kernel of that many
 * query rows, and causal rows one of role CGRT__MLA_SPLIT_CAUSAL_BLOCK (per-row lengths):
 * bf16 and FP8 have both (FP8: cgrt_mla_split_t64_n64_fp8 / _causal, 17..64 rows).
 * Figures: docs/mla_decode.md. */
static void block_rule(cgrt_mla_plan *p) {
  const int k = p->o.block_len;
  if (k < 2) return;
  const int kv = p->o.kv_dtype == CGRT_MLA_KV_FP8_E4M3 ? CGRT__MLA_KV_FP8 : CGRT__MLA_KV_BF16;
  const long long kh = (long long)k * p->q_heads;
  const long long groups = (kh + 63) / 64;
  const long long reads = (long long)k * p->groups; /* per request, the rows apart */
  if (kh < CGRT_MLA_SHARE_MIN_ROWS || groups >= reads) return;
  if (!pick(p->o.causal ? CGRT__MLA_SPLIT_CAUSAL_BLOCK : CGRT__MLA_SPLIT, (int)(kh < 64 ? kh : 64), (int)groups,
            p->o.page_size, kv))
    return;
  p->unit = k;
  p->kh = (int)kh;
  p->mk = p->o.causal ? k : 0;
  p->hg = (int)(kh < 64 ? kh : 64);
  p->groups = (int)groups;
}

/* Looks kernel k up, raises its dynamic shared memory limit and sets its ranges P (one
 * wave: SMs x CTAs per SM / its head groups, at least 1). */
static cgrt_status load(cgrt_mla_plan *p, const cgrt__mla_kernel *k, int groups, mla_kernel *out) {
  out->k = k;
  cgrt_status st = cgrt__runtime_function(p->rt, k->name, &out->f);
  if (st) {
    cgrt__error_prefix("cgrt_mla_plan_create");
    return st;
  }
  if (k->smem > 0) {
    st = CGRT__CU(p->rt->drv, cuFuncSetAttribute,
                  (out->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->smem), CGRT_ERROR_DRIVER,
                  "cgrt_mla_plan_create: raising a split kernel's shared memory");
    if (st) return st;
  }
  const int sms = p->rt->sm_count > 0 ? p->rt->sm_count : 1;
  /* groups: of the view the plan runs (kernels/mla/plan.c block_rule). */
  out->parts = sms * k->ctas_per_sm / groups;
  if (out->parts < 1) out->parts = 1;
  return CGRT_SUCCESS;
}

/* The kernels of the plan: the split kernel that takes its heads per CTA and page size,
 * the one-row kernel for steps of one row unless the plan merges through counters only
 * (one-row steps merge through the workspace), the schedule and combine kernels. Steps of
 * one row with 17..32 heads per CTA run the 16-head one-row kernel in groups of 16: one
 * row spreads over the SMs either way, and the 32-row t64 kernel measured 10% slower
 * there (docs/mla_decode.md). */
static cgrt_status choose_kernels(cgrt_mla_plan *p) {
  const int ps = p->o.page_size;
  const int kv = p->o.kv_dtype == CGRT_MLA_KV_FP8_E4M3 ? CGRT__MLA_KV_FP8 : CGRT__MLA_KV_BF16;
  const cgrt__mla_kernel *split = pick(p->mk ? CGRT__MLA_SPLIT_CAUSAL_BLOCK : CGRT__MLA_SPLIT, p->hg, p->groups, ps, kv);
  /* One-row steps have block_len 1: never a block's rows together. */
  p->hg1 = p->unit == 1 && p->hg > 16 && p->hg <= 32 ? 16 : p->hg;
  p->groups1 = (p->kh + p->hg1 - 1) / p->hg1;
  const cgrt__mla_kernel *one_row = p->o.combine == CGRT_MLA_COMBINE_COUNTERS || p->unit > 1
                                        ? NULL : pick(CGRT__MLA_SPLIT_ONE_ROW, p->hg1, p->groups1, ps, kv);
  const cgrt__mla_kernel *sched = pick(CGRT__MLA_SCHEDULE, 0, 0, ps, 0), *comb = pick(CGRT__MLA_COMBINE, 0, 0, ps, 0);
  if (!split || !sched || !comb)
    return cgrt__fail(CGRT_ERROR_INTERNAL,
                      "cgrt_mla_plan_create: no kernel of kernels/mla/kernel_table.h takes %d heads "
                      "per CTA with page size %d", p->hg, ps);
  cgrt_status st;
  const cgrt__mla_kernel *split1 = p->hg1 != p->hg ? pick(CGRT__MLA_SPLIT, p->hg1, p->groups1, ps, kv) : split;
  if (!split1) return cgrt__fail(CGRT_ERROR_INTERNAL, "cgrt_mla_plan_create: no split kernel of %d heads per CTA", p->hg1);
  if ((st = load(p, split, p->groups, &p->split)) ||
      (one_row && (st = load(p, one_row, p->groups1, &p->one_row))) ||
      (st = load(p, split1, p->hg1 != p->hg ? p->groups1 : p->groups, &p->split1)) ||
      (st = load(p, sched, p->groups, &p->sched)) || (st = load(p, comb, p->groups, &p->comb)))
    return st;
  if (p->o.v_head_dim > 0) {
    const cgrt__mla_kernel *vp = pick(CGRT__MLA_VPROJ, 0, 0, ps, 0);
    if (!vp) return cgrt__fail(CGRT_ERROR_INTERNAL, "cgrt_mla_plan_create: no value projection kernel");
    if ((st = load(p, vp, 1, &p->vproj))) return st;
  }
  return CGRT_SUCCESS;
}

/* The partial-result workspace (rows + P slots, at least CGRT_MLA_COMB_SPEC_SLOTS, of
 * q_heads x (512 + 1) floats, then the metadata) and, unless the plan merges through the
 * workspace only, the counters: one block of max_rows x q_heads per lane, so that lanes
 * on different streams never share a counter. */
static cgrt_status reserve(cgrt_mla_plan *p) {
  cgrt_runtime *rt = p->rt;
  int parts = p->split.parts;
  if (p->one_row.k && p->one_row.parts > parts) parts = p->one_row.parts;
  if (p->split1.parts > parts) parts = p->split1.parts;
  /* Slots of the kernels' rows (requests when a block's rows run together, each
   * unit x q_heads wide), counted here in rows of q_heads. */
  int64_t slots = (int64_t)p->max_rows / p->unit + parts;
  if (slots < CGRT_MLA_COMB_SPEC_SLOTS) slots = CGRT_MLA_COMB_SPEC_SLOTS;
  slots *= p->unit;
  cgrt_tensor_desc *d = p->descs;
  d[0].ndim = 3; d[0].shape[0] = slots; d[0].shape[1] = p->q_heads; d[0].shape[2] = CGRT_MLA_DV;
  d[0].dtype = CGRT_DTYPE_F32;
  d[1].ndim = 2; d[1].shape[0] = slots; d[1].shape[1] = p->q_heads; d[1].dtype = CGRT_DTYPE_F32;
  d[2].ndim = 1; d[2].shape[0] = 2 * (int64_t)p->max_rows + 2; d[2].dtype = CGRT_DTYPE_I32;
  p->workspace_bytes = (size_t)slots * p->q_heads * (CGRT_MLA_DV + 1) * 4 + (size_t)(2 * p->max_rows + 2) * 4;
  CUdeviceptr ptrs[3];
  cgrt_status st = cgrt_workspace_request(rt, p->o.lane, MLA_WORKSPACE_NAME, p->descs, 3, ptrs);
  if (!st && p->o.v_head_dim > 0) {
    cgrt_tensor_desc *l = &p->latent;
    l->ndim = 3; l->shape[0] = p->max_rows; l->shape[1] = p->q_heads; l->shape[2] = CGRT_MLA_DV;
    l->dtype = CGRT_DTYPE_BF16;
    CUdeviceptr lp;
    st = cgrt_workspace_request(rt, p->o.lane, MLA_LATENT_NAME, &p->latent, 1, &lp);
  }
  if (!st && p->o.combine != CGRT_MLA_COMBINE_WORKSPACE) {
    /* max_rows x q_heads counters also cover requests x kernel head groups. */
    p->counter_offset = (size_t)p->o.lane * p->max_rows * p->q_heads;
    p->counter_bytes = cgrt_counters_decode_bytes((size_t)p->max_rows * (p->o.lane + 1), p->q_heads, rt->sm_count);
    st = cgrt_counters_reserve(rt, p->counter_bytes);
  }
  if (st) cgrt__error_prefix("cgrt_mla_plan_create");
  return st;
}

cgrt_status cgrt_mla_plan_create(cgrt_runtime *rt, const cgrt_mla_options *opts,
                                 cgrt_mla_plan **out) {
  if (out) *out = NULL;
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mla_plan_create");
  if (st) return st;
  if (!opts || !out)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_plan_create: %s is NULL",
                      !opts ? "options" : "out");
  cgrt_mla_options o;
  int cap = 0;
  if ((st = check_options(opts, &o, &cap))) return st;

  cgrt_mla_plan *p = (cgrt_mla_plan *)cgrt__handle_alloc(sizeof *p);
  if (!p) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "cgrt_mla_plan_create: host allocation");
  p->rt = rt;
  p->o = o;
  p->max_rows = o.max_num_seqs * o.block_len;
  p->q_heads = o.heads * o.dcp_world_size;
  p->cap = cap;
  head_rule(p);
  block_rule(p);
  if (!p->fast)
    cgrt__log(CGRT_LOG_WARN,
              "mla: %d query heads (%d heads x dcp %d) take the generic path: the head rule "
              "tiles by %d and %d %% %d != 0; using %d CTAs of 16 heads per KV range, the last "
              "partly masked", p->q_heads, o.heads, o.dcp_world_size, p->tile, p->q_heads,
              p->tile, p->groups);
  if ((st = choose_kernels(p))) goto fail;
  /* AUTO: counters once the merging CTA reads <= CGRT_MLA_AUTO_MERGE_BYTES of partials,
   * about splits / rows partials of heads-per-CTA x 2 KiB each. */
  if (o.combine == CGRT_MLA_COMBINE_AUTO) {
    const long long b = (long long)p->split.parts * p->hg * (CGRT_MLA_DV * 4);
    p->counters_min_rows = (int)((b + CGRT_MLA_AUTO_MERGE_BYTES - 1) / CGRT_MLA_AUTO_MERGE_BYTES);
    if (p->counters_min_rows < 1) p->counters_min_rows = 1;
  } else {
    p->counters_min_rows = o.combine == CGRT_MLA_COMBINE_COUNTERS ? 1 : 0;
  }
  {
    /* For comparison: a fixed split of min(next_pow2(max_model_len / 512), 2 x SMs). */
    size_t splits = 1;
    while (splits < (size_t)(o.max_model_len / 512)) splits <<= 1;
    if (splits > (size_t)(2 * rt->sm_count)) splits = (size_t)(2 * rt->sm_count);
    p->fixed_split_bytes = (size_t)p->max_rows * p->q_heads * splits * (CGRT_MLA_DV + 1) * 4;
  }
  if ((st = reserve(p))) goto fail;
  if ((st = cgrt__runtime_adopt(rt, p, CGRT__HANDLE_MLA_PLAN, &p->child, destroy_child, "mla plan",
                                "cgrt_mla_plan_create")))
    goto fail;
  *out = p;
  return CGRT_SUCCESS;
fail:
  cgrt__handle_free(p);
  return st;
}

void cgrt_mla_plan_destroy(cgrt_mla_plan *plan) {
  if (!plan || !cgrt__handle_remove(plan, CGRT__HANDLE_MLA_PLAN)) return;
  /* Like every entry point it makes the context current; a failure there is only
   * logged: the plan owns no device memory (its workspace is the runtime's). A live
   * plan's runtime is live (runtime teardown destroys its plans first), and the plan
   * leaves the runtime's child list before its storage goes, whatever the driver does:
   * a freed plan still linked would crash the runtime's next attach, detach or teardown. */
  if (cgrt__runtime_enter(plan->rt, "cgrt_mla_plan_destroy") != CGRT_SUCCESS)
    cgrt__log(CGRT_LOG_WARN, "%s", cgrt_last_error());
  cgrt__runtime_detach(plan->rt, &plan->child);
  cgrt__handle_free(plan);
}

static void destroy_child(void *obj) { cgrt_mla_plan_destroy((cgrt_mla_plan *)obj); }

cgrt_status cgrt_mla_plan_get_info(const cgrt_mla_plan *p, cgrt_mla_plan_info *info) {
  if (!cgrt__handle_live(p, CGRT__HANDLE_MLA_PLAN))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_mla_plan_get_info: plan is NULL or destroyed");
  cgrt_status st = cgrt__runtime_enter(p->rt, "cgrt_mla_plan_get_info");
  if (st) return st;
  /* The struct grows at its end: a caller built against an older header (the first one
   * ended at split_kernel) gets the fields it knows. */
  if (!info || info->size < offsetof(cgrt_mla_plan_info, split_kernel) + sizeof info->split_kernel)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_plan_get_info: info is NULL or info->size is too small");
  info->max_rows = p->max_rows;
  info->q_heads = p->q_heads;
  info->fast_path = p->fast;
  info->head_tile = p->tile;
  info->heads_per_cta = p->hg;
  info->head_groups = p->groups;
  info->splits = p->split.parts;
  info->workspace_bytes = p->workspace_bytes;
  info->counter_bytes = p->o.combine != CGRT_MLA_COMBINE_WORKSPACE ? p->counter_bytes : 0;
  info->fixed_split_bytes = p->fixed_split_bytes;
  info->split_kernel = p->split.k->name;
  if (info->size >= offsetof(cgrt_mla_plan_info, one_row_kernel) + sizeof info->one_row_kernel)
    info->one_row_kernel = (p->one_row.k ? p->one_row.k : p->split1.k)->name;
  if (info->size >= offsetof(cgrt_mla_plan_info, counters_min_rows) + sizeof info->counters_min_rows)
    info->counters_min_rows = p->counters_min_rows * p->unit;
  if (info->size >= offsetof(cgrt_mla_plan_info, kv_shared) + sizeof info->kv_shared)
    info->kv_shared = p->unit > 1;
  if (info->size >= offsetof(cgrt_mla_plan_info, latent_bytes) + sizeof info->latent_bytes)
    info->latent_bytes = p->vproj.k ? (size_t)p->max_rows * p->q_heads * CGRT_MLA_DV * 2 : 0;
  return CGRT_SUCCESS;
}

/* Checks the step's arguments against the plan. */
static cgrt_status check_args(const cgrt_mla_plan *p, const cgrt_mla_args *a) {
  if (!a) return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_decode: args is NULL");
  /* The struct grows at its end: a caller built against the header that ended at
   * softmax_scale passes no w_uv. */
  const size_t first = offsetof(cgrt_mla_args, softmax_scale) + sizeof a->softmax_scale;
  if (a->size < first || a->size > (1u << 16))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: args->size is %zu, expected %zu", a->size, sizeof *a);
  const CUdeviceptr w_uv = a->size >= offsetof(cgrt_mla_args, w_uv) + sizeof a->w_uv ? a->w_uv : 0;
  if (p->o.v_head_dim > 0 && (!w_uv || (w_uv & 15)))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: the plan projects to v_head_dim %d: w_uv must be a 16-byte aligned "
                      "bf16 [q_heads, 512, %d] tensor (it is 0x%llx)", p->o.v_head_dim, p->o.v_head_dim,
                      (unsigned long long)w_uv);
  if (p->o.v_head_dim == 0 && w_uv)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT,
                      "cgrt_mla_decode: w_uv is set but the plan has no v_head_dim (create it with "
                      "options.v_head_dim to project the output)");
  const char *null_name = !a->q ? "q" : !a->kv_cache ? "kv_cache" : !a->block_table ? "block_table"
                        : !a->seq_lens ? "seq_lens" : !a->out ? "out" : !a->lse ? "lse" : NULL;
  if (null_name)
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_mla_decode: %s is NULL", null_name);
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
  return CGRT_SUCCESS;
}

cgrt_status cgrt_mla_decode(cgrt_mla_plan *p, CUstream stream, const cgrt_mla_args *a) {
  if (!cgrt__handle_live(p, CGRT__HANDLE_MLA_PLAN))
    return cgrt__fail(CGRT_ERROR_INVALID_HANDLE, "cgrt_mla_decode: plan is NULL or destroyed");
  cgrt_runtime *rt = p->rt;
  cgrt_status st = cgrt__runtime_enter(rt, "cgrt_mla_decode");
  if (st || (st = check_args(p, a))) return st;

  /* Same addresses every step once reserved (requests that fit are allowed during
   * capture); asked each time so that a grown reservation before the lock is followed. */
  CUdeviceptr ws[3], lat = 0;
  st = cgrt_workspace_request(rt, p->o.lane, MLA_WORKSPACE_NAME, p->descs, 3, ws);
  if (!st && p->vproj.k) st = cgrt_workspace_request(rt, p->o.lane, MLA_LATENT_NAME, &p->latent, 1, &lat);
  if (st) {
    cgrt__error_prefix("cgrt_mla_decode");
    return st;
  }
  /* Steps of one row run the one-row kernel (if the plan has one) with the workspace
   * combine; the others merge through counters from counters_min_rows rows. */
  const int one_row = p->one_row.k && a->num_rows == 1;
  const int row16 = a->num_rows == 1 && p->hg1 != p->hg; /* 16-head kernels for one row */
  const mla_kernel *split = one_row ? &p->one_row : a->num_rows == 1 ? &p->split1 : &p->split;
  const int use_counters = !one_row && p->counters_min_rows > 0 && a->num_rows / p->unit >= p->counters_min_rows;
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

  /* The kernels' rows: requests when a block's rows run together (then block_len 1 and
   * no causal schedule: a request's length is its last row's; mk masks the others). */
  int rows = a->num_rows / p->unit, bl = p->unit > 1 ? 1 : p->o.block_len, cap = p->cap,
      parts = split->parts, causal = p->unit > 1 ? 0 : p->o.causal, mk = p->mk;
  int min_tiles = one_row ? CGRT_MLA_MIN_TILES_ONE_ROW
                          : use_counters ? CGRT_MLA_MIN_TILES_COUNTERS : CGRT_MLA_MIN_TILES_WORKSPACE;
  if (split->k->aligned) min_tiles = -min_tiles;
  int qh = p->kh, hg = row16 ? p->hg1 : p->hg, mbps = p->o.max_blocks_per_seq, ps = p->o.page_size;
  float scale = a->softmax_scale, kv_scale = p->o.kv_dtype == CGRT_MLA_KV_FP8_E4M3 ? p->o.kv_scale : 1.f;
  CUdeviceptr seq_lens = a->seq_lens, meta = ws[2], q = a->q, kv = a->kv_cache,
              bt = a->block_table, out = p->vproj.k ? lat : a->out, lse = a->lse, po = ws[0], pl = ws[1];
  const cgrt__driver *drv = rt->drv;
  CUresult r;

  /* Short batches (rows <= the split kernel's block size): the split kernel computes
   * the schedule itself (one launch and one kernel boundary fewer). */
  const int fused = rows <= split->k->threads;
  CUdeviceptr sl_arg = fused ? seq_lens : 0;
  /* programmatic_launch 2 (the kernel before writes neither seq_lens nor the block table):
   * kernels whose row says early read them before their wait (CGRT_MLA_ARG_EARLY_READS). */
  int flags = causal | (p->o.programmatic_launch == 2 && split->k->early && fused ? CGRT_MLA_ARG_EARLY_READS : 0);
  if (!fused) {
    void *sched_args[] = {&seq_lens, &meta, &rows, &bl, &cap, &parts, &min_tiles, &causal};
    r = drv->cuLaunchKernel(p->sched.f, 1, 1, 1, (unsigned)p->sched.k->threads, 1, 1, 0, stream, sched_args,
                            NULL);
    if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernel", "cgrt_mla_decode: schedule kernel");
  }

  void *split_args[] = {&q,  &kv, &bt,    &meta, &out, &lse, &po,    &pl,     &counters, &rows,      &qh,
                        &hg, &parts, &mbps, &ps,  &bl,  &scale, &sl_arg, &cap,      &min_tiles, &flags,  &mk,
                        &kv_scale};
  /* Split and combine wait on the device (griddepcontrol.wait) for the kernel before
   * them; with programmatic stream serialization (options.programmatic_launch) their CTAs
   * launch while it runs. The schedule kernel is launched plainly: it overwrites the
   * metadata that the previous step's kernels read. */
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = (unsigned)(row16 ? p->groups1 : p->groups);
  cfg.gridDimY = (unsigned)parts;
  cfg.gridDimZ = 1;
  cfg.blockDimX = (unsigned)split->k->threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = (unsigned)split->k->smem;
  cfg.hStream = stream;
  cfg.attrs = p->o.programmatic_launch ? &attr : NULL;
  cfg.numAttrs = p->o.programmatic_launch ? 1 : 0;
  r = drv->cuLaunchKernelEx(&cfg, split->f, split_args, NULL);
  if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernelEx", "cgrt_mla_decode: split kernel");

  if (!use_counters) {
    /* Grid (q_heads, rows, nz): nz column slices per (row, head), so that short batches,
     * whose few rows carry many partials, still spread over the SMs: 64-column slices up
     * to 32 (row, head) pairs (with one row the kernel loads slots 0..143 before it
     * knows how many hold partials: every plan reserves that many), then whole rows. The
     * 128-column slices that 33..256 pairs took measured faster alone but not in a model's
     * step: there whole rows shorten the merge after the split kernel from 5.3-7.5 to
     * 3.0-4.2 us at 8 rows x 16 heads (figures: docs/mla_decode.md). */
    const long long rh = (long long)rows * qh;
    void *comb_args[] = {&meta, &po, &pl, &out, &lse, &rows, &qh};
    cfg.gridDimX = (unsigned)qh;
    cfg.gridDimY = (unsigned)rows;
    cfg.gridDimZ = rh <= 32 ? 8u : 1u;
    cfg.blockDimX = (unsigned)p->comb.k->threads;
    cfg.sharedMemBytes = 0;
    r = drv->cuLaunchKernelEx(&cfg, p->comb.f, comb_args, NULL);
    if (r != CUDA_SUCCESS) return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernelEx", "cgrt_mla_decode: combine kernel");
  }
  if (p->vproj.k) {
    /* The value projection of the merged latent O into args.out: grid (q_heads, v / 32,
     * ceil(rows / 64)) over the query rows (a block's rows run together are rows again
     * here); with programmatic launch its CTAs read w_uv while the merge runs. */
    CUdeviceptr w = a->w_uv, dst = a->out;
    int nrows = a->num_rows, qh1 = p->q_heads, dv = p->o.v_head_dim;
    void *vp_args[] = {&lat, &w, &dst, &nrows, &qh1, &dv};
    cfg.gridDimX = (unsigned)qh1;
    cfg.gridDimY = (unsigned)(dv / CGRT_MLA_VPROJ_COLS);
    cfg.gridDimZ = (unsigned)((nrows + CGRT_MLA_VPROJ_ROWS - 1) / CGRT_MLA_VPROJ_ROWS);
    cfg.blockDimX = (unsigned)p->vproj.k->threads;
    cfg.sharedMemBytes = (unsigned)p->vproj.k->smem;
    r = drv->cuLaunchKernelEx(&cfg, p->vproj.f, vp_args, NULL);
    if (r != CUDA_SUCCESS)
      return cgrt__fail_cu(CGRT_ERROR_DRIVER, r, "cuLaunchKernelEx", "cgrt_mla_decode: value projection kernel");
  }
  return CGRT_SUCCESS;
}
