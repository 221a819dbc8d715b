/* Step modes, capture sizes and the dispatch tables (requests -> bucket). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "graphs/graphs_internal.h"

int gx_rows_per_req(const cgrt_graphs *set, cgrt_graph_mode mode) {
  return mode == CGRT_GRAPH_BLOCK ? set->o.block_len : mode == CGRT_GRAPH_VERIFY ? set->o.verify_len : 1;
}

int gx_is_step_mode(cgrt_graph_mode mode) {
  return mode == CGRT_GRAPH_DECODE || mode == CGRT_GRAPH_BLOCK || mode == CGRT_GRAPH_VERIFY;
}

gx_lut_slot gx_lut_of(cgrt_graph_mode mode) {
  switch (mode) {
    case CGRT_GRAPH_BLOCK: return GX_LUT_BLOCK;
    case CGRT_GRAPH_VERIFY: return GX_LUT_VERIFY;
    default: return GX_LUT_DECODE;
  }
}

int gx_mode_enabled(const cgrt_graphs *set, cgrt_graph_mode mode) {
  return mode == CGRT_GRAPH_DECODE ? set->o.enable_decode != 0
         : mode == CGRT_GRAPH_BLOCK ? set->o.block_len >= 2
         : mode == CGRT_GRAPH_VERIFY ? set->o.verify_len >= 2 : 0;
}

const char *gx_step_mode_name(cgrt_graph_mode mode) {
  return mode == CGRT_GRAPH_BLOCK ? "block" : mode == CGRT_GRAPH_VERIFY ? "verify" : "decode";
}

const char *gx_mode_name(const gx_exec *e) {
  if (e->is_while) return "draft-while";
  if (e->draft) return "draft";
  return gx_step_mode_name(e->mode);
}

/* The step mode of the buckets of a dispatch table (draft loops: decode). */
static cgrt_graph_mode mode_of(gx_lut_slot t) {
  return t == GX_LUT_BLOCK ? CGRT_GRAPH_BLOCK : t == GX_LUT_VERIFY ? CGRT_GRAPH_VERIFY : CGRT_GRAPH_DECODE;
}

static int cmp_desc(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x < y) - (x > y);
}

/* Sizes in rows for one mode, largest first, deduplicated; returns the count. */
static size_t sizes_for(const cgrt_graphs *set, int k, int *out, size_t cap) {
  const cgrt_graphs_options *o = &set->o;
  int max_rows = o->max_num_seqs * k;
  size_t n = 0;
  if (o->capture_sizes != NULL && o->num_capture_sizes > 0) {
    for (size_t i = 0; i < o->num_capture_sizes && n < cap; i++) { /* validated: 1..MAX_ROWS */
      int s = (o->capture_sizes[i] + k - 1) / k * k;
      if (s > max_rows) s = max_rows; /* a bucket past every batch is wasted */
      out[n++] = s;
    }
  } else {
    int limit = o->max_capture_rows > 0 ? o->max_capture_rows : max_rows * 2;
    if (o->max_capture_rows <= 0 && limit > 512) limit = 512;
    if (limit > max_rows) limit = max_rows;
    if (limit < k) limit = k;
    int s = 1;
    while (n < cap) {
      int r = (s + k - 1) / k * k;
      if (r > max_rows) r = max_rows; /* a multiple of k: no bucket past every batch */
      out[n++] = r;
      if (r >= limit) break;
      s = s < 4 ? s * 2 : (s < 8 ? 8 : (s < 256 ? s + 8 : s + 16));
    }
  }
  qsort(out, n, sizeof(int), cmp_desc);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (m == 0 || out[m - 1] != out[i]) out[m++] = out[i];
  return m;
}

cgrt_status gx_buckets_build(cgrt_graphs *set) {
  enum { CAP = GX_MAX_CAPTURE_SIZES };
  int sizes[GX_LUTS][CAP];
  size_t counts[GX_LUTS] = {0};
  if (set->o.enable_decode) counts[GX_LUT_DECODE] = sizes_for(set, 1, sizes[GX_LUT_DECODE], CAP);
  if (set->o.block_len >= 2) counts[GX_LUT_BLOCK] = sizes_for(set, set->o.block_len, sizes[GX_LUT_BLOCK], CAP);
  if (set->o.draft_steps >= 2 && set->o.enable_decode && set->o.dcp_world_size <= 1) {
    /* Draft loops: the decode sizes, unrolled and (when wanted) as WHILE loops. */
    counts[GX_LUT_DRAFT] = counts[GX_LUT_DECODE];
    memcpy(sizes[GX_LUT_DRAFT], sizes[GX_LUT_DECODE], counts[GX_LUT_DECODE] * sizeof(int));
    if (set->o.draft_while && set->o.meta.enabled) {
      counts[GX_LUT_DRAFT_WHILE] = counts[GX_LUT_DECODE];
      memcpy(sizes[GX_LUT_DRAFT_WHILE], sizes[GX_LUT_DECODE], counts[GX_LUT_DECODE] * sizeof(int));
    }
  }
  if (set->o.verify_len >= 2) counts[GX_LUT_VERIFY] = sizes_for(set, set->o.verify_len, sizes[GX_LUT_VERIFY], CAP);
  size_t total = 0;
  for (int t = 0; t < GX_LUTS; t++) total += counts[t];
  set->execs = (gx_exec *)calloc(total ? total : 1, sizeof(gx_exec));
  if (set->execs == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: bucket table");
  size_t n = 0;
  for (int t = 0; t < GX_LUTS; t++) {
    const cgrt_graph_mode mode = mode_of((gx_lut_slot)t);
    const int k = gx_rows_per_req(set, mode);
    for (size_t i = 0; i < counts[t]; i++) {
      gx_exec *e = &set->execs[n++];
      e->mode = mode;
      e->lut = (gx_lut_slot)t;
      e->draft = t == GX_LUT_DRAFT || t == GX_LUT_DRAFT_WHILE;
      e->is_while = t == GX_LUT_DRAFT_WHILE;
      e->rows = sizes[t][i];
      e->reqs = sizes[t][i] / k;
      e->last_reqs = -1;
    }
  }
  set->nexec = n;
  for (int t = 0; t < GX_LUTS; t++) {
    set->lut[t] = (uint32_t *)calloc((size_t)set->o.max_num_seqs + 1, sizeof(uint32_t));
    if (set->lut[t] == NULL) return cgrt__fail(CGRT_ERROR_OUT_OF_MEMORY, "graph set: dispatch table");
  }
  gx_lut_build(set);
  return CGRT_SUCCESS;
}

/* lut[t][reqs] = 1 + index of the smallest captured bucket of table t holding reqs requests. */
void gx_lut_build(cgrt_graphs *set) {
  for (int t = 0; t < GX_LUTS; t++) {
    uint32_t *lut = set->lut[t];
    if (lut == NULL) continue;
    for (int r = 0; r <= set->o.max_num_seqs; r++) {
      uint32_t best = 0;
      int best_rows = 0;
      for (size_t i = 0; i < set->nexec; i++) {
        const gx_exec *e = &set->execs[i];
        if ((int)e->lut != t || !e->captured || e->reqs < r) continue;
        if (best == 0 || e->rows < best_rows) {
          best = (uint32_t)i + 1;
          best_rows = e->rows;
        }
      }
      lut[r] = best;
    }
  }
}

int cgrt_graphs_bucket_rows(cgrt_graphs *set, cgrt_graph_mode mode, int num_reqs) {
  if (gx_enter(set, "cgrt_graphs_bucket_rows") != CGRT_SUCCESS ||
      !gx_is_step_mode(mode))
    return 0;
  if (num_reqs < 1 || num_reqs > set->o.max_num_seqs) return 0;
  pthread_mutex_lock(&set->mu);
  uint32_t i = set->lut[gx_lut_of(mode)][num_reqs];
  int rows = i ? set->execs[i - 1].rows : 0;
  pthread_mutex_unlock(&set->mu);
  return rows;
}
