/* C references of the MLA decode kernels (one entry per row of
 * kernels/mla/kernel_table.h), with the kernels' parameters (packed as the driver packs
 * them) and their semantics over the whole grid: the same per-row metadata, the same
 * balanced ranges of KV tiles per CTA, the same partial slots, the same last-CTA combine
 * with counters left at zero. Arithmetic is fp32 with exact exp/log (the kernels use
 * bf16 tensor-core products); outputs are rounded to bf16 with round-to-nearest-even as
 * the kernels do. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mla/kernel_table.h"
#include "kernels/ref_tables.h"
#include "runtime/emu/emu_view.h"

static float bf2f(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* An FP8 e4m3 value (OCP e4m3fn: bias 7, subnormals, 0x7f / 0xff NaN, no infinities). */
static float e4m3_to_float(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = ldexpf((float)m, -9);          /* m / 8 x 2^-6 */
  else v = ldexpf((float)(8 + m), e - 10);            /* (1 + m / 8) x 2^(e - 7) */
  return (b & 0x80) ? -v : v;
}

static int part_of(long long t, int T, int P) { return (int)(((t + 1) * (long long)P - 1) / T); }

#define PTR(T, i) ((T *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, i))
#define INT(i) CGRT__REF_PARAM(int, p, off, i)

/* cgrt_mla_schedule(seq_lens, meta, rows, block_len, cap, P, min_tiles, causal):
 * meta[0..rows) = per-row lengths (row r uses request r / block_len; clamped, causal rows
 * shortened: cgrt__mla_row_len), meta[rows..2*rows] =
 * exclusive prefix sums of ceil(len / 32) (the last is the total T), meta[2*rows+1] =
 * Pe, the ranges in use: min(P, ceil(T / min_tiles)), at least 1. */
static void schedule_rows(const int *seq_lens, int *meta, int rows, int bl, int cap, int P,
                          int min_tiles, int causal) {
  int *ts = meta + rows;
  int acc = 0;
  for (int r = 0; r < rows; r++) {
    const int len = cgrt__mla_row_len(seq_lens[r / bl], cap, r, bl, causal);
    meta[r] = len;
    ts[r] = acc;
    acc += (len + CGRT_MLA_TILE - 1) / CGRT_MLA_TILE;
  }
  ts[rows] = acc;
  {
    /* min_tiles < 0 (row-aligned ranges): at least -min_tiles tiles per range, and the
     * ranges in use rounded down to a multiple a of rows when rows <= their count, that
     * drops at most 1/16 of them and T <= CGRT_MLA_ALIGN_MAX_TILES x a. */
    const int mt = min_tiles < 0 ? -min_tiles : min_tiles;
    int pe = (acc + mt - 1) / mt;
    pe = pe < P ? pe : P;
    if (min_tiles < 0 && rows <= pe) {
      const int a = pe / rows * rows;
      if ((pe - a) * 16 <= pe && acc <= CGRT_MLA_ALIGN_MAX_TILES * a) pe = a;
    }
    meta[2 * rows + 1] = pe < 1 ? 1 : pe;
  }
}

static void schedule_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  schedule_rows(PTR(const int, 0), PTR(int, 1), INT(2), INT(3), INT(4), INT(5), INT(6), INT(7));
}

static void combine_heads(const float *part_o, const float *part_lse, uint16_t *out, float *lse,
                          int r, int qh, int h0, int h1, int slot0, int n) {
  for (int h = h0; h < h1; h++) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, part_lse[(long long)(slot0 + i) * qh + h]);
    if (mx == -INFINITY) { /* every partial empty (causal rows run together): as padding */
      memset(out + ((long long)r * qh + h) * CGRT_MLA_DV, 0, CGRT_MLA_DV * sizeof(uint16_t));
      lse[(long long)r * qh + h] = -INFINITY;
      continue;
    }
    float sum = 0.f;
    float acc[CGRT_MLA_DV];
    memset(acc, 0, sizeof acc);
    for (int i = 0; i < n; i++) {
      const long long s = (long long)(slot0 + i) * qh + h;
      const float w = expf(part_lse[s] - mx);
      sum += w;
      for (int d = 0; d < CGRT_MLA_DV; d++) acc[d] += w * part_o[s * CGRT_MLA_DV + d];
    }
    for (int d = 0; d < CGRT_MLA_DV; d++) out[((long long)r * qh + h) * CGRT_MLA_DV + d] = f2bf(acc[d] / sum);
    lse[(long long)r * qh + h] = mx + logf(sum);
  }
}

/* The split kernels (q, kv, block_table, meta, out, lse, part_o, part_lse, counters,
 * rows, q_heads, group_heads, P, max_blocks_per_seq, page_size, block_len, scale,
 * seq_lens, cap, min_tiles, causal, mk, kv_scale), grid (groups, P): the same outputs
 * whatever the kernel's pipeline. fp8 (the rows of kv CGRT__MLA_KV_FP8): kv holds e4m3
 * bytes, each value e4m3 x kv_scale; the bf16 kernels ignore kv_scale. seq_lens non-NULL (rows <= block size): the kernel schedules
 * itself, as cgrt_mla_schedule(seq_lens, meta, rows, block_len, cap, P, min_tiles,
 * causal) would, and leaves the same metadata in meta for the combine kernel. mk > 0
 * (cgrt_mla_split_m64_ws_causal): head h of a row sees cgrt__mla_row_len(len, cap,
 * h / (q_heads / mk), mk, 1) of the row's len tokens; a head without tokens in a
 * segment leaves output 0 / LSE -inf (as its partial, or its output when unsplit). */
static void split_core(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off,
                       int use_counters, int row1, int fp8) {
  const uint16_t *q = PTR(const uint16_t, 0);
  const uint16_t *kv = PTR(const uint16_t, 1);
  const uint8_t *kv8 = PTR(const uint8_t, 1);
  const float kv_scale = CGRT__REF_PARAM(float, p, off, 22);
  const int *bt = PTR(const int, 2);
  const int *meta = PTR(const int, 3);
  uint16_t *out = PTR(uint16_t, 4);
  float *lse = PTR(float, 5);
  float *part_o = PTR(float, 6);
  float *part_lse = PTR(float, 7);
  unsigned *counters = use_counters ? PTR(unsigned, 8) : NULL;
  const int rows = INT(9), qh = INT(10), hg = INT(11), P = INT(12), mbps = INT(13), ps = INT(14),
            bl = INT(15);
  const float scale = CGRT__REF_PARAM(float, p, off, 16);
  const int *seq_lens = PTR(const int, 17);
  const int G = (int)l->grid[0];
  const int mk = INT(21);
  if (seq_lens != NULL) /* the bits of causal other than the row kind concern the kernels' waits only */
    schedule_rows(seq_lens, (int *)(uintptr_t)meta, rows, bl, INT(18), P, INT(19), INT(20) & CGRT_MLA_ARG_CAUSAL);
  const int *row_len = meta, *ts = meta + rows;
  const int T = ts[rows], Pe = meta[2 * rows + 1];

  float *kf = NULL, *sc = NULL, *acc = NULL;
  int cap_tok = 0;
  /* The pages of the KV cache's live allocation (emu_view.h): a block-table entry past
   * it (or negative) is a fault, not a read. */
  const size_t page_bytes = (size_t)ps * CGRT_MLA_D * (fp8 ? 1 : 2);
  const size_t kv_bytes = cgrt__emu_view_bytes(kv);
  const long long kv_pages =
      kv_bytes == SIZE_MAX || page_bytes == 0 ? LLONG_MAX : (long long)(kv_bytes / page_bytes);
  for (int g = 0; g < G; g++) {
    const int h_begin = g * hg;
    const int h_end = h_begin + hg < qh ? h_begin + hg : qh;
    for (int pp = 0; pp < P; pp++) {
      for (int r = pp; r < rows; r += P) {
        if (row_len[r] != 0) continue;
        for (int h = h_begin; h < h_end; h++) {
          memset(out + ((long long)r * qh + h) * CGRT_MLA_DV, 0, CGRT_MLA_DV * sizeof(uint16_t));
          lse[(long long)r * qh + h] = -INFINITY;
        }
      }
      if (T == 0 || pp >= Pe) continue;
      const int b0 = row1 ? 0 : (int)((long long)pp * T / Pe), b1 = row1 ? 1 : (int)((long long)(pp + 1) * T / Pe);
      for (int r = 0, t = b0; t < b1 && r < rows; r++) {
        const int rs = ts[r], re = ts[r + 1];
        if (re <= t) continue;
        const int ja = t - rs, jb = (re < b1 ? re : b1) - rs;
        const int len = row_len[r];
        const int pf = part_of(rs, T, Pe), pl = part_of(re - 1, T, Pe), nsplit = pl - pf + 1;
        t = rs + jb;
        /* Token i of the CTA's share: tok_a + (i / 64) * stride + i % 64. A range: tiles
         * [ja, jb) (stride 64). row1: the 64-token tiles pp, pp + P, ... of the row. */
        int tok_a = ja * CGRT_MLA_TILE, stride = 64, ntok;
        if (row1) {
          tok_a = 64 * pp;
          stride = 64 * P;
          ntok = 0;
          for (int tb = tok_a; tb < len; tb += stride) ntok += len - tb < 64 ? len - tb : 64;
        } else {
          ntok = (jb * CGRT_MLA_TILE < len ? jb * CGRT_MLA_TILE : len) - tok_a;
        }
        if (ntok > cap_tok) {
          free(kf);
          free(sc);
          cap_tok = ntok;
          kf = (float *)malloc((size_t)ntok * CGRT_MLA_D * sizeof(float));
          sc = (float *)malloc((size_t)ntok * sizeof(float));
        }
        if (!acc) acc = (float *)malloc(CGRT_MLA_DV * sizeof(float));
        if (!kf || !sc || !acc) goto done; /* host out of memory: leave outputs as they are */
        const int *btr = bt + (long long)(r / bl) * mbps;
        for (int i = 0; i < ntok; i++) {
          const int tok = tok_a + i / 64 * stride + i % 64;
          const long long page = btr[tok / ps];
          if (page < 0 || page >= kv_pages) {
            cgrt__emu_view_fault((const void *)((uintptr_t)kv + (uintptr_t)(page * (long long)page_bytes)),
                                 page_bytes, "KV cache page (block table)");
            goto done;
          }
          const long long at = (page * ps + tok % ps) * CGRT_MLA_D;
          for (int d = 0; d < CGRT_MLA_D; d++)
            kf[(size_t)i * CGRT_MLA_D + d] = fp8 ? e4m3_to_float(kv8[at + d]) * kv_scale : bf2f(kv[at + d]);
        }
        for (int h = h_begin; h < h_end; h++) {
          const uint16_t *qr = q + ((long long)r * qh + h) * CGRT_MLA_D;
          float qv[CGRT_MLA_D];
          for (int d = 0; d < CGRT_MLA_D; d++) qv[d] = bf2f(qr[d]);
          /* Tokens of this head: those below its length (mk > 0: its block row's). */
          const int hlen = mk > 0 ? cgrt__mla_row_len(len, INT(18), h / (qh / mk), mk, 1) : len;
          int nt = 0;
          while (nt < ntok && tok_a + nt / 64 * stride + nt % 64 < hlen) nt++;
          float mx = -INFINITY;
          for (int i = 0; i < nt; i++) {
            float s = 0.f;
            const float *k = kf + (size_t)i * CGRT_MLA_D;
            for (int d = 0; d < CGRT_MLA_D; d++) s += qv[d] * k[d];
            sc[i] = s * scale;
            if (sc[i] > mx) mx = sc[i];
          }
          float sum = 0.f;
          memset(acc, 0, CGRT_MLA_DV * sizeof(float));
          for (int i = 0; i < nt; i++) {
            const float w = expf(sc[i] - mx);
            sum += w;
            const float *v = kf + (size_t)i * CGRT_MLA_D;
            for (int d = 0; d < CGRT_MLA_DV; d++) acc[d] += w * v[d];
          }
          const float ls = nt > 0 ? mx + logf(sum) : -INFINITY;
          const float inv = nt > 0 ? 1.f / sum : 0.f;
          if (nsplit == 1) {
            for (int d = 0; d < CGRT_MLA_DV; d++)
              out[((long long)r * qh + h) * CGRT_MLA_DV + d] = f2bf(acc[d] * inv);
            lse[(long long)r * qh + h] = ls;
          } else {
            const long long slot = (long long)r + pp;
            for (int d = 0; d < CGRT_MLA_DV; d++) part_o[(slot * qh + h) * CGRT_MLA_DV + d] = acc[d] * inv;
            part_lse[slot * qh + h] = ls;
          }
        }
        if (nsplit > 1 && counters != NULL) {
          unsigned *c = counters + (long long)r * G + g;
          const unsigned old = (*c)++;
          if (old == (unsigned)(nsplit - 1)) {
            *c = 0;
            combine_heads(part_o, part_lse, out, lse, r, qh, h_begin, h_end, r + pf, nsplit);
          }
        }
      }
    }
  }
done:
  free(kf);
  free(sc);
  free(acc);
}

static void split_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  split_core(l, p, off, 1, 0, 0);
}

/* cgrt_mla_split_t64_fp8: cgrt_mla_split_t64 over an e4m3 cache. */
static void split_fp8_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  split_core(l, p, off, 1, 0, 1);
}

/* cgrt_mla_split_t64_row1: steps of one row (rows == 1); CTA (g, p) takes the
 * 64-token tiles p, p + P, ... of the row, partial p in slot p. With ranges of >= 2
 * 32-token tiles (CGRT_MLA_MIN_TILES_ONE_ROW) the schedule's Pe is min(P, ceil(len / 64)),
 * exactly the CTAs that have a tile, so the metadata and the combine are the range
 * schedule's. */
static void split_row1_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  split_core(l, p, off, 1, 1, 0);
}

/* cgrt_mla_split_t64_row1_fp8: cgrt_mla_split_t64_row1 over an e4m3 cache. */
static void split_row1_fp8_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  split_core(l, p, off, 1, 1, 1);
}

/* cgrt_mla_combine(meta, part_o, part_lse, out, lse, rows, q_heads), grid (q_heads, rows, nz) (CTA z merges a 512 / nz column
 * slice; together the whole row): merges the partials of every row that more than one
 * range touched. */
static void combine_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  const int *meta = PTR(const int, 0);
  const float *part_o = PTR(const float, 1);
  const float *part_lse = PTR(const float, 2);
  uint16_t *out = PTR(uint16_t, 3);
  float *lse = PTR(float, 4);
  const int rows = INT(5), qh = INT(6);
  const int *ts = meta + rows;
  const int T = ts[rows], P = meta[2 * rows + 1];
  const int nh = (int)l->grid[0] < qh ? (int)l->grid[0] : qh;
  const int nr = (int)l->grid[1] < rows ? (int)l->grid[1] : rows;
  for (int r = 0; r < nr; r++) {
    const int rs = ts[r], re = ts[r + 1];
    if (re <= rs) continue;
    const int pf = part_of(rs, T, P), pl = part_of(re - 1, T, P);
    if (pl == pf) continue;
    combine_heads(part_o, part_lse, out, lse, r, qh, 0, nh, r + pf, pl - pf + 1);
  }
}

/* cgrt_mla_vproj(lat, w, out, rows, qh, dv): out[r, h, c] = bf16(sum_k O[r, h, k] x
 * W[h, k, c]) for the heads and column slices of the grid and every row; the kernel's
 * order: four fp32 sums over k quarters of 128, added in quarter order. */
static void vproj_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  const uint16_t *lat = PTR(const uint16_t, 0);
  const uint16_t *w = PTR(const uint16_t, 1);
  uint16_t *out = PTR(uint16_t, 2);
  const int rows = INT(3), qh = INT(4), dv = INT(5);
  const int nh = (int)l->grid[0] < qh ? (int)l->grid[0] : qh;
  const int nc = (int)l->grid[1] * CGRT_MLA_VPROJ_COLS < dv ? (int)l->grid[1] * CGRT_MLA_VPROJ_COLS : dv;
  const long long nr = (long long)l->grid[2] * CGRT_MLA_VPROJ_ROWS < rows ? (long long)l->grid[2] * CGRT_MLA_VPROJ_ROWS
                                                                           : rows;
  for (int h = 0; h < nh; h++) {
    const uint16_t *wh = w + (size_t)h * CGRT_MLA_DV * dv;
    for (long long r = 0; r < nr; r++) {
      const uint16_t *o = lat + ((size_t)r * qh + h) * CGRT_MLA_DV;
      for (int c = 0; c < nc; c++) {
        float s = 0.f;
        for (int q = 0; q < 4; q++) {
          float part = 0.f;
          for (int k = q * CGRT_MLA_DV / 4; k < (q + 1) * CGRT_MLA_DV / 4; k++)
            part += bf2f(o[k]) * bf2f(wh[(size_t)k * dv + c]);
          s += part;
        }
        out[((size_t)r * qh + h) * dv + c] = f2bf(s);
      }
    }
  }
}

/* The parameter list of each role (bytes of each parameter, in order). */
#define PARAMS_OF_CGRT__MLA_SCHEDULE 8, {8, 8, 4, 4, 4, 4, 4, 4}
#define PARAMS_OF_CGRT__MLA_SPLIT 23, {8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 8, 4, 4, 4, 4, 4}
#define PARAMS_OF_CGRT__MLA_SPLIT_ONE_ROW PARAMS_OF_CGRT__MLA_SPLIT
#define PARAMS_OF_CGRT__MLA_SPLIT_CAUSAL_BLOCK PARAMS_OF_CGRT__MLA_SPLIT
#define PARAMS_OF_CGRT__MLA_COMBINE 7, {8, 8, 8, 8, 8, 4, 4}
#define PARAMS_OF_CGRT__MLA_VPROJ 6, {8, 8, 8, 4, 4, 4}
#define REF_ENTRY(name, role, threads, smem, ctas, hg_min, hg_max, g_max, pages, aligned, early, kv, ref) \
  {#name, PARAMS_OF_##role, ref},

const cgrt__ref_kernel cgrt__ref_table_mla[] = {CGRT__MLA_KERNELS(REF_ENTRY){0}};
