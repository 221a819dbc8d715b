// Device building blocks shared by the MLA kernels (the .cu files of kernels/mla/): the
// fused schedule, padding rows, range lookup, the last-CTA counters and partial merge,
// and small conversions. One copy, so that every split kernel derives the same ranges as
// cgrt_mla_schedule and the C reference (kernels/mla/ref.c).
#ifndef CGRT_KERNELS_MLA_SPLIT_CUH
#define CGRT_KERNELS_MLA_SPLIT_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"

namespace cgrt_mla {

// Asynchronous copies, ldmatrix and mma.sync (sm_80+), as inline PTX.
__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(unsigned addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                        uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                          uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

// Range p of P over T tiles is [p*T/P, (p+1)*T/P); the range holding tile t.
__device__ __forceinline__ int part_of(long long t, int T, int P) {
  return (int)(((t + 1) * (long long)P - 1) / T);
}

// Programmatic dependent launch: wait for the kernel before this one in the stream (its
// writes visible), then let the kernel after this one launch its CTAs (they wait too).
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
}

// Ranges in use for T tiles: at most P, at least |min_tiles| tiles each (fewer partials
// to merge for short batches), never more than T so that no range is empty, at least 1.
// min_tiles < 0 (row-aligned ranges, see kernels/mla/common.h): rounded down to a multiple a of rows (equal rows
// then split at row bounds) when that drops at most 1/16 of them and the ranges stay
// short (<= CGRT_MLA_ALIGN_MAX_TILES tiles), where a row restart costs most.
__device__ __forceinline__ int ranges_in_use(int T, int P, int min_tiles, int rows) {
  const int mt = min_tiles < 0 ? -min_tiles : min_tiles;
  int pe = (T + mt - 1) / mt;
  pe = pe < P ? pe : P;
  if (min_tiles < 0 && rows <= pe) {
    const int a = pe / rows * rows;
    if ((pe - a) * 16 <= pe && T <= CGRT_MLA_ALIGN_MAX_TILES * a) pe = a;
  }
  return pe < 1 ? 1 : pe;
}

// Fused schedule (seq_lens != nullptr, rows <= NT, whole CTA): the per-row lengths
// (cgrt__mla_row_len: clamped to cap, causal rows shortened) and tile prefix sums as cgrt_mla_schedule computes them, into s_meta
// (2 NT + 2 ints; s_wsum: NT / 32 ints); CTA (0, 0) also writes them to meta for the
// combine kernel, unless publish is false (then the caller calls publish_meta later).
// Returns s_meta, or meta when seq_lens is nullptr (the schedule kernel ran).
template <int NT>
__device__ __forceinline__ void publish_meta(const int *s_meta, const int *meta, int rows) {
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (int i = threadIdx.x; i < 2 * rows + 2; i += NT) const_cast<int *>(meta)[i] = s_meta[i];
}
template <int NT>
__device__ __forceinline__ const int *fused_schedule(int *s_meta, int *s_wsum, const int *__restrict__ seq_lens,
                                                     const int *meta, int rows, int bl, int cap, int P,
                                                     int min_tiles, int causal, bool publish = true) {
  if (seq_lens == nullptr) return meta;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int len = 0;
  if (tid < rows) len = cgrt__mla_row_len(seq_lens[tid / bl], cap, tid, bl, causal);
  const int tiles = (len + CGRT_MLA_TILE - 1) / CGRT_MLA_TILE;
  int x = tiles;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, off);
    if (lane >= off) x += y;
  }
  if (lane == 31) s_wsum[warp] = x;
  __syncthreads();
  int pre = 0;
#pragma unroll
  for (int w = 0; w < NT / 32; w++) pre += w < warp ? s_wsum[w] : 0;
  const int incl = pre + x;
  if (tid < rows) {
    s_meta[tid] = len;
    s_meta[rows + tid] = incl - tiles;
  }
  if (tid == NT - 1) {
    s_meta[2 * rows] = incl;
    s_meta[2 * rows + 1] = ranges_in_use(incl, P, min_tiles, rows);
  }
  __syncthreads();
  if (publish) publish_meta<NT>(s_meta, meta, rows);
  return s_meta;
}

// Padding rows (seq_len 0): output 0, LSE -inf for heads [h_begin, h_end); rows p,
// p + P, ... belong to CTA column p. Whole CTA of NT threads.
template <int NT>
__device__ __forceinline__ void zero_padding_rows(const int *row_len, __nv_bfloat16 *out, float *lse, int rows,
                                                  int qh, int h_begin, int h_end, int p, int P) {
  for (int r = p; r < rows; r += P) {
    if (row_len[r] != 0) continue;
    const int nh = h_end - h_begin;
    __nv_bfloat16 *o = out + ((long long)r * qh + h_begin) * CGRT_MLA_DV;
    for (int i = threadIdx.x; i < nh * CGRT_MLA_DV / 8; i += NT) reinterpret_cast<uint4 *>(o)[i] = make_uint4(0, 0, 0, 0);
    for (int i = threadIdx.x; i < nh; i += NT) lse[(long long)r * qh + h_begin + i] = -INFINITY;
  }
}

// The last row r with ts[r] <= tile b0 (ts: the rows' tile prefix sums).
__device__ __forceinline__ int first_row(const int *ts, int rows, int b0) {
  int lo = 0, hi = rows - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (ts[mid] <= b0) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// A split CTA's share of a step, from the per-row metadata mb (lengths, then tile prefix
// sums, T, Pe): it zeroes its padding rows (heads [h0, h1) of rows p, p + P, ...; unless
// zero is false: then the caller does, after its wait) and
// gets its tile range [b0, b1) of the T tiles cut into Pe ranges, and lo, the row that
// holds tile b0. work is false for a CTA past the ranges in use (then b0 = b1 = 0).
struct CtaRange {
  int T, Pe, b0, b1, lo;
  bool work;
};
template <int NT>
__device__ __forceinline__ CtaRange cta_range(const int *mb, int rows, __nv_bfloat16 *out, float *lse, int qh,
                                              int h0, int h1, int p, int P, bool zero = true) {
  const int *ts = mb + rows;
  if (zero) zero_padding_rows<NT>(mb, out, lse, rows, qh, h0, h1, p, P);
  CtaRange c;
  c.T = ts[rows];
  c.Pe = mb[2 * rows + 1]; // ranges in use this step (1 <= Pe <= min(P, T))
  c.work = c.T > 0 && p < c.Pe;
  c.b0 = c.work ? (int)((long long)p * c.T / c.Pe) : 0;
  c.b1 = c.work ? (int)((long long)(p + 1) * c.T / c.Pe) : 0;
  c.lo = first_row(ts, rows, c.b0);
  return c;
}

// The segment of row r in a CTA's tile range that starts at tile t (< b1): the row's
// tiles [ja, jb), its length, its first range pf and the number of ranges that split
// it. Returns false when row r ends at or before t; else moves t past the segment.
struct Segment {
  int ja, jb, len, pf, nsplit;
};
__device__ __forceinline__ bool next_segment(const int *ts, const int *row_len, int r, int &t, int b1, int T, int Pe,
                                             Segment &s) {
  const int rs = ts[r], re = ts[r + 1];
  if (re <= t) return false;
  s.ja = t - rs;
  s.jb = min(re, b1) - rs;
  s.len = row_len[r];
  s.pf = part_of(rs, T, Pe);
  s.nsplit = part_of(re - 1, T, Pe) - s.pf + 1;
  t = rs + s.jb;
  return true;
}

// Largest LSE of the n partials (slots slot0..) of head h; whole warp.
__device__ __forceinline__ float warp_max_lse(const float *part_lse, int qh, int h, int slot0, int n, int lane) {
  float mx = -INFINITY;
  for (int i = lane; i < n; i += 32) mx = fmaxf(mx, __ldcg(part_lse + (long long)(slot0 + i) * qh + h));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  return mx;
}

// Weighted sum over partials i = i0, i0 + step, ... < n of head h; lane holds dims
// (lane + 32k) * 4 .. + 3, k < 4.
__device__ __forceinline__ void warp_accum(const float *part_o, const float *part_lse, int qh, int h, int slot0,
                                           int n, int i0, int step, float mx, int lane, float4 (&acc)[4],
                                           float &wsum) {
#pragma unroll 4
  for (int i = i0; i < n; i += step) {
    const long long s = (long long)(slot0 + i) * qh + h;
    const float w = __expf(__ldcg(part_lse + s) - mx);
    const float4 *src = reinterpret_cast<const float4 *>(part_o + s * CGRT_MLA_DV);
    wsum += w;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float4 v = __ldcg(src + lane + 32 * k);
      acc[k].x += w * v.x; acc[k].y += w * v.y; acc[k].z += w * v.z; acc[k].w += w * v.w;
    }
  }
}

__device__ __forceinline__ void store_bf16x4(__nv_bfloat16 *dst, float4 v, float inv) {
  uint2 o;
  o.x = pack_bf16(v.x * inv, v.y * inv);
  o.y = pack_bf16(v.z * inv, v.w * inv);
  *reinterpret_cast<uint2 *>(dst) = o;
}

// Merges the n partials (slots slot0..) of row r for heads [h0, h1): one warp per head.
// Partials of LSE -inf (no tokens) weigh 0; a head whose partials are all empty gets
// output 0 and LSE -inf.
static __device__ void combine_heads(const float *part_o, const float *part_lse, __nv_bfloat16 *out,
                                           float *lse, int r, int qh, int h0, int h1, int slot0, int n,
                                           int warp, int nwarps, int lane) {
  for (int h = h0 + warp; h < h1; h += nwarps) {
    const float mx = warp_max_lse(part_lse, qh, h, slot0, n, lane);
    if (mx == -INFINITY) {
      // Every partial empty (a causal query row of no tokens in a request split over
      // ranges, kernels/mla/split_m64_ws.cu): output 0, LSE -inf, as a padding row.
      __nv_bfloat16 *o = out + ((long long)r * qh + h) * CGRT_MLA_DV;
      for (int i = lane; i < CGRT_MLA_DV / 8; i += 32) reinterpret_cast<uint4 *>(o)[i] = make_uint4(0, 0, 0, 0);
      if (lane == 0) lse[(long long)r * qh + h] = -INFINITY;
      continue;
    }
    float4 acc[4];
#pragma unroll
    for (int k = 0; k < 4; k++) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    float wsum = 0.f;
    warp_accum(part_o, part_lse, qh, h, slot0, n, 0, 1, mx, lane, acc, wsum);
    const float inv = 1.f / wsum;
    __nv_bfloat16 *o = out + ((long long)r * qh + h) * CGRT_MLA_DV;
#pragma unroll
    for (int k = 0; k < 4; k++) store_bf16x4(o + (lane + 32 * k) * 4, acc[k], inv);
    if (lane == 0) lse[(long long)r * qh + h] = mx + logf(wsum);
  }
}

// A barrier of the NT threads that call it: __syncthreads() for ID 0 (the whole CTA),
// else named barrier ID of NT threads (a part of the CTA, e.g. the consumer warpgroups of
// kernels/mla/split_m64_ws.cu).
template <int NT, int ID>
__device__ __forceinline__ void sync_threads() {
  if (ID == 0)
    __syncthreads();
  else
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(NT) : "memory");
}

// COUNTERS strategy, after a CTA stored its partial of row r (head group g of G): counts
// its arrival on counter r * G + g and returns true, for all NT callers, in the last of
// the row's nsplit CTAs to arrive; that one resets the counter to 0 (so the buffer stays
// zero between launches) and sees every partial of the row after the call. Called by NT
// threads (thread 0 of the CTA among them) that sync with barrier ID (sync_threads);
// s_last: one int of shared memory.
template <int NT, int ID = 0>
__device__ __forceinline__ bool last_cta_arrive(unsigned *counters, int r, int g, int G, int nsplit, int *s_last) {
  __threadfence();
  sync_threads<NT, ID>();
  if (threadIdx.x == 0) {
    unsigned *c = counters + (long long)r * G + g;
    const unsigned old = atomicAdd(c, 1u);
    const int last = old == (unsigned)(nsplit - 1);
    if (last) atomicExch(c, 0u);
    *s_last = last;
  }
  sync_threads<NT, ID>();
  const bool last = *s_last != 0;
  if (last) __threadfence();
  return last;
}

// The same, and the last CTA merges the n partials (slots slot0..) of row r for heads
// [h0, h1) with combine_heads (one warp per head; threads 0 .. NT - 1).
template <int NT, int ID = 0>
__device__ __forceinline__ void last_cta_merge(unsigned *counters, const float *part_o, const float *part_lse,
                                               __nv_bfloat16 *out, float *lse, int r, int qh, int h0, int h1,
                                               int g, int G, int slot0, int nsplit, int *s_last) {
  const int tid = threadIdx.x;
  if (last_cta_arrive<NT, ID>(counters, r, g, G, nsplit, s_last))
    combine_heads(part_o, part_lse, out, lse, r, qh, h0, h1, slot0, nsplit, tid >> 5, NT / 32, tid & 31);
  sync_threads<NT, ID>();
}

}  // namespace cgrt_mla

#endif
