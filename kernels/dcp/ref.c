/* C references of the DCP kernels (one entry per row of kernels/dcp/kernel_table.h),
 * with the kernels' parameters packed as the driver packs them and their semantics
 * over the whole grid (see kernels/dcp/dcp.cu). The merge uses the same order of
 * operations in fp32 (libm's expf/logf, which may differ from the GPU's in the last
 * bit) and rounds to bf16 to nearest even. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dcp/kernel_table.h"
#include "kernels/ref_tables.h"
#include "runtime/bf16.h"

#define bf2f cgrt__bf16_to_f32
#define f2bf cgrt__f32_to_bf16

#define PTR(T, i) ((T *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, i))
#define I64(i) CGRT__REF_PARAM(long long, p, off, i)
#define INT(i) CGRT__REF_PARAM(int, p, off, i)

static float lse_at(const char *base, long long stride, long long lse_off, int w, long long i) {
  float l;
  memcpy(&l, base + w * stride + lse_off + 4 * i, 4);
  return l;
}

static void merge_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  const char *base = PTR(const char, 0);
  const long long stride = I64(1), lse_off = I64(2);
  const int fp32 = INT(3), n = INT(4), items = INT(5);
  uint16_t *out = PTR(uint16_t, 6);
  float *out_lse = PTR(float, 7);
  for (long long i = 0; i < (long long)l->grid[0] && i < items; i++) {
    float m = -INFINITY;
    for (int w = 0; w < n; w++) m = fmaxf(m, lse_at(base, stride, lse_off, w, i));
    if (m == -INFINITY) {
      for (int c = 0; c < CGRT_DCP_DV; c++) out[i * CGRT_DCP_DV + c] = 0;
      if (out_lse) out_lse[i] = -INFINITY;
      continue;
    }
    float s = 0.f;
    for (int w = 0; w < n; w++) {
      const float lw = lse_at(base, stride, lse_off, w, i);
      if (lw != -INFINITY) s += expf(lw - m);
    }
    const float total = m + logf(s);
    float acc[CGRT_DCP_DV];
    for (int c = 0; c < CGRT_DCP_DV; c++) acc[c] = 0.f;
    for (int w = 0; w < n; w++) {
      const float lw = lse_at(base, stride, lse_off, w, i);
      if (lw == -INFINITY) continue;
      const float scale = expf(lw - total);
      const char *rb = base + w * stride;
      for (int c = 0; c < CGRT_DCP_DV; c++) {
        float v;
        if (fp32) {
          memcpy(&v, rb + (i * CGRT_DCP_DV + c) * 4, 4);
        } else {
          uint16_t b;
          memcpy(&b, rb + (i * CGRT_DCP_DV + c) * 2, 2);
          v = bf2f(b);
        }
        acc[c] += scale * v;
      }
    }
    for (int c = 0; c < CGRT_DCP_DV; c++) out[i * CGRT_DCP_DV + c] = f2bf(acc[c]);
    if (out_lse) out_lse[i] = total;
  }
}

static void transpose_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  const char *src = PTR(const char, 0);
  char *dst = PTR(char, 1);
  const int na = INT(2), nb = INT(3);
  const long long bytes = I64(4), ssa = I64(5), ssb = I64(6), dsa = I64(7), dsb = I64(8);
  for (long long a = 0; a < (long long)l->grid[0] && a < na; a++)
    for (long long b = 0; b < (long long)l->grid[1] && b < nb; b++)
      memmove(dst + a * dsa + b * dsb, src + a * ssa + b * ssb, (size_t)(bytes / 4 * 4));
}

static void rescale_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  const uint16_t *part = PTR(const uint16_t, 0);
  const float *lse_all = PTR(const float, 1);
  const int rows = INT(2), heads = INT(3), world = INT(4), rank = INT(5);
  uint16_t *dst = PTR(uint16_t, 6);
  float *out_lse = PTR(float, 7);
  const long long qh = (long long)world * heads;
  for (long long item = 0; item < (long long)l->grid[0]; item++) {
    const long long h = item % heads, j = (item / heads) % world, row = item / qh;
    if (row >= rows) continue;
    const long long g = j * heads + h;
    float m = -INFINITY;
    for (int w = 0; w < world; w++) m = fmaxf(m, lse_all[((long long)w * rows + row) * qh + g]);
    float total = -INFINITY;
    if (m != -INFINITY) {
      float s = 0.f;
      for (int w = 0; w < world; w++) {
        const float lw = lse_all[((long long)w * rows + row) * qh + g];
        if (lw != -INFINITY) s += expf(lw - m);
      }
      total = m + logf(s);
    }
    const float own = lse_all[((long long)rank * rows + row) * qh + g];
    uint16_t *o = dst + ((j * rows + row) * heads + h) * CGRT_DCP_DV;
    const float scale = own == -INFINITY ? 0.f : expf(own - total);
    for (int c = 0; c < CGRT_DCP_DV; c++)
      o[c] = own == -INFINITY ? 0 : f2bf(scale * bf2f(part[(row * qh + g) * CGRT_DCP_DV + c]));
    if (out_lse && j == rank) out_lse[row * heads + h] = total;
  }
}

const cgrt__ref_kernel cgrt__ref_table_dcp[] = {
    {"cgrt_dcp_merge", 8, {8, 8, 8, 4, 4, 4, 8, 8}, merge_ref},
    {"cgrt_dcp_transpose", 9, {8, 8, 4, 4, 8, 8, 8, 8, 8}, transpose_ref},
    {"cgrt_dcp_rescale", 8, {8, 8, 4, 4, 4, 4, 8, 8}, rescale_ref},
    {0},
};
