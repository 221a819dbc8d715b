// Building blocks of the token-major wgmma split kernels for up to 16 query heads per CTA
// (kernels/mla/split_t64.cu: bf16 cache; kernels/mla/split_t64_fp8.cu: FP8 e4m3 cache):
// the two tile products over a tile of 9 column blocks of 64 tokens x 128 bytes (the
// 128-byte swizzle of kernels/mla/wgmma.cuh), the accumulator walk, and the counters
// merge of the last CTA of a row. One warpgroup of NT = 128 threads.
#ifndef CGRT_KERNELS_MLA_T64_CUH
#define CGRT_KERNELS_MLA_T64_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"
#include "kernels/mla/wgmma.cuh"

typedef __nv_bfloat16 bf16;

namespace cgrt_t64 {

using namespace cgrt_wg;

constexpr int D = CGRT_MLA_D;    // 576
constexpr int DV = CGRT_MLA_DV;  // 512
constexpr int TN = CGRT_MLA_TILE;
constexpr int NT = 128;          // one warpgroup
constexpr int kQ16 = 16 * 128;   // a column block of Q (16 heads x 128 B)
constexpr int kCB = 64 * 128;    // a column block of a tile (64 tokens x 128 B)
constexpr int kP16 = 16 * 128;   // P^T: 16 heads x 64 tokens
constexpr int kOStr = DV + 4;    // row stride (floats) of the output staging (no bank conflicts)

// S^T = K . Q^T of one tile for NH = 16 or 32 query rows (heads) per CTA (s: NH / 2
// accumulators a thread); kb(cb): shared address of column block cb (0..8) of the tile;
// Q: 9 column blocks of NH rows x 128 B. t64_qk_issue starts the product (wgmma: one
// commit group), t64_qk_wait waits.
template <int NH = 16, class KB>
__device__ __forceinline__ void t64_qk_issue(float (&s)[NH / 2], KB kb, uint32_t q_s) {
  static_assert(NH == 16 || NH == 32, "16 or 32 query rows per CTA");
#if CGRT_WG_HAS_WGMMA
  wg_fence();
#pragma unroll
  for (int cb = 0; cb < 9; cb++) {
    const uint64_t da = make_desc(kb(cb), 16, 1024), db = make_desc(q_s + cb * (NH * 128), 16, 1024);
#pragma unroll
    for (int k4 = 0; k4 < 4; k4++) {
      if constexpr (NH == 16)
        wgmma_m64n16_kk(s, da + 2 * k4, db + 2 * k4, cb + k4 > 0);
      else
        wgmma_m64n32_kk(s, da + 2 * k4, db + 2 * k4, cb + k4 > 0);
    }
  }
  wg_commit();
  fence_regs(s);
#else
  if constexpr (NH == 16) {
    mma_kk_sync(s, kb, [&](int cb) { return q_s + cb * kQ16; });
  } else {
    // Rows 16..31 of each Q column block start 16 rows (2048 bytes) in: the same swizzle.
    float(&lo)[8] = *reinterpret_cast<float(*)[8]>(&s[0]);
    float(&hi)[8] = *reinterpret_cast<float(*)[8]>(&s[8]);
    mma_kk_sync(lo, kb, [&](int cb) { return q_s + cb * (NH * 128); });
    mma_kk_sync(hi, kb, [&](int cb) { return q_s + cb * (NH * 128) + 16 * 128; });
  }
#endif
}
template <int N>
__device__ __forceinline__ void t64_qk_wait(float (&s)[N]) {
#if CGRT_WG_HAS_WGMMA
  wg_wait<0>();
#endif
  fence_regs(s);
}


// The products of t64_pv_run: bf16 operands (these kernels) or, for the FP8 kernels, f16
// (T64F16 in kernels/mla/fp8.cuh): wg is the wgmma m64n16k16 with A MN-major from
// shared memory, mma the mma.sync m16n8k16 of the fallback.
struct T64Bf16 {
#if CGRT_WG_HAS_WGMMA
  static __device__ __forceinline__ void wg(float (&d)[8], uint64_t da, uint64_t db) { wgmma_m64n16_mk(d, da, db, 1); }
  static __device__ __forceinline__ void wg(float (&d)[16], uint64_t da, uint64_t db) { wgmma_m64n32_mk(d, da, db, 1); }
#else
  static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    mma16816(c, a, b0, b1);
  }
#endif
};

// The products of O^T += V^T . P^T over M tiles I0 .. I0 + NI - 1 of one tile (M tile i =
// dims 64 i .. 64 i + 63 = column block i of the tile, read MN-major; p_s = P^T, NH heads x
// 64 tokens, K-major; o: NH / 2 accumulators per M tile): wgmma issued as one commit group,
// no fence or wait (the caller's); the fallback computes them here.
template <class Prod, int NH, int I0, int NI, class KB>
__device__ __forceinline__ void t64_pv_tiles(float (&o)[8][NH / 2], KB kb, uint32_t p_s) {
#if CGRT_WG_HAS_WGMMA
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    const uint64_t db = make_desc(p_s, 16, 1024) + 2 * kk;
#pragma unroll
    for (int i = I0; i < I0 + NI; i++) Prod::wg(o[i], make_desc(kb(i), kCB, 1024) + kk * 128, db);
  }
  wg_commit();
#else
  const int lane = threadIdx.x & 31, wi = (threadIdx.x >> 5) & 3;
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
  const int m4 = lane >> 3;
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t b0, b1, b2, b3, b4 = 0, b5 = 0, b6 = 0, b7 = 0;
    ldsm_x4(p_s + swz(br, kk * 2 + bc), b0, b1, b2, b3);
    if constexpr (NH == 32) ldsm_x4(p_s + 16 * 128 + swz(br, kk * 2 + bc), b4, b5, b6, b7);
    const int tok = kk * 16 + (lane & 7) + ((m4 >> 1) << 3);
#pragma unroll
    for (int i = I0; i < I0 + NI; i++) {
      uint32_t a[4];
      ldsm_x4_t(kb(i) + swz(tok, 2 * wi + (m4 & 1)), a[0], a[1], a[2], a[3]);
      Prod::mma(o[i], a, b0, b1);
      Prod::mma(o[i] + 4, a, b2, b3);
      if constexpr (NH == 32) {
        Prod::mma(o[i] + 8, a, b4, b5);
        Prod::mma(o[i] + 12, a, b6, b7);
      }
    }
  }
#endif
}

// O^T += V^T . P^T of one tile, all 8 M tiles (t64_pv_tiles), fenced. WAIT = 1: issued and
// waited for. WAIT = 0 (wgmma): one commit group left in flight, o untouched until
// t64_pv_wait; the fallback computes it all here either way.
template <class Prod, int WAIT, int NH = 16, class KB>
__device__ __forceinline__ void t64_pv_run(float (&o)[8][NH / 2], KB kb, uint32_t p_s) {
#pragma unroll
  for (int i = 0; i < 8; i++) fence_regs(o[i]);
#if CGRT_WG_HAS_WGMMA
  wg_fence();
#endif
  t64_pv_tiles<Prod, NH, 0, 8>(o, kb, p_s);
#if CGRT_WG_HAS_WGMMA
  if (WAIT) wg_wait<0>();
#endif
#pragma unroll
  for (int i = 0; i < 8; i++) fence_regs(o[i]);
}
template <int NH = 16, class KB>
__device__ __forceinline__ void t64_pv(float (&o)[8][NH / 2], KB kb, uint32_t p_s) {
  t64_pv_run<T64Bf16, 1, NH>(o, kb, p_s);
}

// Calls f(i, j, e) for every O^T accumulator pair of a thread: o[i][4 j + e] and
// o[i][4 j + 2 + e] (M tile i, head index 2 j + e, dims 8 apart; NH heads per CTA).
template <int NH = 16, class F>
__device__ __forceinline__ void each_o(F f) {
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < NH / 8; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) f(i, j, e);
}

__device__ __forceinline__ void st_shared_u16(uint32_t addr, float v) {
  const bf16 b = __float2bfloat16_rn(v);
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(*reinterpret_cast<const unsigned short *>(&b))
               : "memory");
}

// COUNTERS, in the CTA that arrived last for row r: merges the row's nsplit partials
// (slots slot0..) of heads h_begin .. + nh into out and lse, in slot order whichever CTA
// is last (so the result does not depend on the arrival order). Up to kMergeSmemMax
// partials, folded in with a running maximum of the LSEs, batches of kMergeBatch land in
// shared memory behind the staging (buf) with cp.async, one round trip per batch, and
// the CTA's own partial (slot own) is read from the staging rows s_stage; past that
// (few long rows, e.g. one row split 32 ways), a pass over the LSEs, then one partial
// per round trip from global memory into registers, which measured faster there
// (figures: docs/mla_decode.md). Thread tid: head tid >> 3, float4 columns (tid & 7) +
// 8 k. Whole CTA.
constexpr int kMergeBatch = 4;
constexpr int kMergeSmemMax = 2 * kMergeBatch;
constexpr int kOStageBytes = 16 * kOStr * 4;
__device__ __forceinline__ void t64_merge(const float *__restrict__ part_o, const float *__restrict__ part_lse,
                                          bf16 *__restrict__ out, float *__restrict__ lse, int r, int qh,
                                          int h_begin, int nh, long long slot0, int nsplit, long long own,
                                          const float *s_stage, float *buf) {
  const int tid = threadIdx.x, h = tid >> 3, c = tid & 7;
  const int hh = h < nh ? h : 0; // threads past the heads compute head 0 and store nothing
  const float *lse_h = part_lse + slot0 * qh + h_begin + hh;
  float m = -INFINITY, wsum = 0.f;
  float4 acc[16];
#pragma unroll
  for (int k = 0; k < 16; k++) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  // Folds in a batch whose LSEs are lb[0 .. kMergeBatch) (-inf: not in the batch) and
  // whose columns row(j)[4 (c + 8 k)] come from src(j, k).
  auto fold = [&](const float (&lb)[kMergeBatch], auto src) {
    float mb = m;
#pragma unroll
    for (int j = 0; j < kMergeBatch; j++) mb = fmaxf(mb, lb[j]);
    const float sc = __expf(m - mb); // 0 in the first batch (m = -inf, acc = 0)
    wsum *= sc;
#pragma unroll
    for (int k = 0; k < 16; k++) {
      acc[k].x *= sc; acc[k].y *= sc; acc[k].z *= sc; acc[k].w *= sc;
    }
#pragma unroll
    for (int j = 0; j < kMergeBatch; j++) {
      if (lb[j] == -INFINITY) continue; // partials hold tokens: their LSEs are finite
      const float w = __expf(lb[j] - mb);
      wsum += w;
#pragma unroll
      for (int k = 0; k < 16; k++) {
        const float4 v = src(j, k);
        acc[k].x += w * v.x; acc[k].y += w * v.y; acc[k].z += w * v.z; acc[k].w += w * v.w;
      }
    }
    m = mb;
  };
  if (nsplit <= kMergeSmemMax) {
    const int own_i = (int)(own - slot0);
    for (int b0 = 0; b0 < nsplit; b0 += kMergeBatch) {
      const int nb = min(kMergeBatch, nsplit - b0);
      for (int j = 0; j < nb; j++) {
        if (b0 + j == own_i) continue;
        const float *src = part_o + ((slot0 + b0 + j) * qh + h_begin) * DV;
        const uint32_t dst = smem_addr(buf + j * 16 * DV);
#pragma unroll
        for (int k = 0; k < 16; k++) {
          const int id = tid + NT * k; // float4 id of head id >> 7, column 4 (id & 127)
          if ((id >> 7) < nh) cp_async16(dst + id * 16, src + 4 * id, 16);
        }
      }
      cp_commit();
      float lb[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; j++) lb[j] = j < nb ? __ldcg(lse_h + (long long)(b0 + j) * qh) : -INFINITY;
      cp_wait<0>();
      __syncthreads();
      fold(lb, [&](int j, int k) {
        const float *row = b0 + j == own_i ? s_stage + hh * kOStr : buf + (j * 16 + hh) * DV;
        return *reinterpret_cast<const float4 *>(row + 4 * (c + 8 * k));
      });
      __syncthreads(); // the buffers are read before the next batch lands
    }
  } else {
    // The maximum first, then one partial per round trip (a running maximum here measured
    // 24% slower at one row split 32 ways: 32.4 against 26.2 us).
    for (int i = 0; i < nsplit; i++) m = fmaxf(m, __ldcg(lse_h + (long long)i * qh));
    for (int i = 0; i < nsplit; i++) {
      const float w = __expf(__ldcg(lse_h + (long long)i * qh) - m);
      const float4 *src = reinterpret_cast<const float4 *>(part_o + ((slot0 + i) * qh + h_begin + hh) * DV) + c;
      wsum += w;
      float4 v[16];
#pragma unroll
      for (int k = 0; k < 16; k++) v[k] = __ldcg(src + 8 * k);
#pragma unroll
      for (int k = 0; k < 16; k++) {
        acc[k].x += w * v[k].x; acc[k].y += w * v[k].y; acc[k].z += w * v[k].z; acc[k].w += w * v[k].w;
      }
    }
  }
  if (h < nh) {
    const float inv = 1.f / wsum;
    bf16 *o = out + ((long long)r * qh + h_begin + h) * DV + 4 * c;
#pragma unroll
    for (int k = 0; k < 16; k++) cgrt_mla::store_bf16x4(o + 32 * k, acc[k], inv);
    if (c == 0) lse[(long long)r * qh + h_begin + h] = m + logf(wsum);
  }
}


// The head of accumulator index h = 2 j + e (0..3) of a thread of quad lane t4: heads
// 8 j + 2 t4 + e of S^T and O^T (m64n16).
__device__ __forceinline__ int t64_head_of(int h, int t4) { return 8 * (h >> 1) + 2 * t4 + (h & 1); }

// The online softmax of one tile, down its token rows (log2 domain), in place on s (NH =
// 2 SN heads per CTA, HN = NH / 4 head indices a thread): valid(j, e, b): whether token
// row ta + 8 b of the thread counts for head index 2 j + e (others masked to -inf);
// fac(j, e): the factor that takes S of head index 2 j + e to the log2 domain; the 4
// warps' maxima through s_red ([NH heads][4 warps]); P^T stored through
// store_p(shared address, value) into p_s; l and o rescaled. EMPTY (per-head lengths,
// causal rows together): a head may have no token in the tile or before it; its maximum
// stays -inf and its exponents are taken against 0, so its P, l and o stay 0. Without
// EMPTY every tile holds a token of every head. Whole warpgroup; one __syncthreads
// inside (the caller syncs before P^T is read). NWG > 1: the CTA
// runs NWG warpgroups of this arithmetic side by side (kernels/mla/split_t64_n64.cu),
// each with its own s_red and p_s; a thread's warp is its warp inside its warpgroup.
template <bool EMPTY = false, int NWG = 1, int SN, int HN, class Valid, class Fac, class StoreP>
__device__ __forceinline__ void t64_softmax(float (&s)[SN], float (&m)[HN], float (&l)[HN], float (&o)[8][SN],
                                            Valid valid, Fac fac, StoreP store_p, float *s_red, uint32_t p_s) {
  static_assert(SN == 2 * HN && (SN == 8 || SN == 16), "16 or 32 heads per CTA");
  constexpr int NH = 2 * SN;
  const int lane = threadIdx.x & 31, warp = NWG > 1 ? (threadIdx.x >> 5) & 3 : threadIdx.x >> 5;
  const int gq = lane >> 2, t4 = lane & 3;
  float mx[HN];
#pragma unroll
  for (int j = 0; j < NH / 8; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const float f = fac(j, e);
      s[4 * j + e] = valid(j, e, 0) ? s[4 * j + e] * f : -INFINITY;
      s[4 * j + 2 + e] = valid(j, e, 1) ? s[4 * j + 2 + e] * f : -INFINITY;
      float x = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
      mx[2 * j + e] = x;
    }
  if (gq == 0) {
#pragma unroll
    for (int h = 0; h < HN; h++) s_red[t64_head_of(h, t4) * 4 + warp] = mx[h];
  }
  __syncthreads();
  float al[HN], mz[HN];
  bool grew = false;
#pragma unroll
  for (int h = 0; h < HN; h++) {
    // Without EMPTY every tile holds a token below the segment's end: the maximum over
    // the 4 warps is finite.
    const float4 v = *reinterpret_cast<const float4 *>(s_red + t64_head_of(h, t4) * 4);
    const float mn = fmaxf(m[h], fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    if constexpr (EMPTY) {
      mz[h] = mn == -INFINITY ? 0.f : mn; // no token yet: exponents against 0 (all 0)
      al[h] = cgrt_mla::ex2(m[h] - mz[h]);
    } else {
      al[h] = cgrt_mla::ex2(m[h] - mn);
    }
    grew |= mn != m[h];
    m[h] = mn;
    if constexpr (!EMPTY) mz[h] = mn;
  }
#pragma unroll
  for (int j = 0; j < NH / 8; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int h = 2 * j + e, head = 8 * j + 2 * t4 + e;
      const float pa = cgrt_mla::ex2(s[4 * j + e] - mz[h]), pb = cgrt_mla::ex2(s[4 * j + 2 + e] - mz[h]);
      l[h] = l[h] * al[h] + pa + pb;
      // P^T[head][token]: tokens ta (chunk 2 warp) and ta + 8 (chunk 2 warp + 1), element gq.
      store_p(p_s + swz(head, 2 * warp) + 2 * gq, pa);
      store_p(p_s + swz(head, 2 * warp + 1) + 2 * gq, pb);
    }
  if (grew)
    each_o<NH>([&](int i, int j, int e) {
      o[i][4 * j + e] *= al[2 * j + e];
      o[i][4 * j + 2 + e] *= al[2 * j + e];
    });
}

// A segment's result rows, the part the t64 and n64 finishes share (all NTH threads of
// the CTA; this thread's warp wsel of its warpgroup, which holds the NH = 2 SN heads from
// head0): waits for the copies still in flight, sums the rows (the 8 lanes of a head
// column, then the 4 warps, through s_red), writes O^T x onum / l into the staging rows
// s_stage [head][dim] and then to out (nsplit == 1) or partial slot r + p, and the LSE to
// lse or part_lse. Returns that slot. EMPTY: a head without tokens gets output 0 and LSE -inf.
template <bool EMPTY, int SN, int HN, int NTH>
__device__ __forceinline__ long long t64_rows_out(float (&o)[8][SN], const float (&m)[HN], float (&l)[HN], float onum,
                                             int head0, int wsel, float *s_red, float *s_stage,
                                             bf16 *__restrict__ out, float *__restrict__ lse,
                                             float *__restrict__ part_o, float *__restrict__ part_lse, int r,
                                             int qh, int h_begin, int nh, int nsplit) {
  constexpr int NH = 2 * SN;
  const int tid = threadIdx.x, lane = tid & 31;
  const int gq = lane >> 2, t4 = lane & 3, ta = 16 * wsel + gq;
  const int p = blockIdx.y;
  cgrt_mla::cp_wait<0>();

#pragma unroll
  for (int h = 0; h < HN; h++) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 4);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 8);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 16);
  }
  __syncthreads(); // every P.V done: the KV buffers are free for the output staging; s_red free
  if (gq == 0) {
#pragma unroll
    for (int h = 0; h < HN; h++) s_red[t64_head_of(h, t4) * 4 + wsel] = l[h];
  }
  __syncthreads();
  float inv[HN], lsev[HN];
#pragma unroll
  for (int h = 0; h < HN; h++) {
    const float4 v = *reinterpret_cast<const float4 *>(s_red + t64_head_of(h, t4) * 4);
    const float lt = (v.x + v.y) + (v.z + v.w);
    if constexpr (EMPTY) {
      inv[h] = lt > 0.f ? onum / lt : 0.f;
      lsev[h] = lt > 0.f ? (m[h] + __log2f(lt)) * 0.6931471805599453f : -INFINITY;
    } else {
      inv[h] = onum / lt;
      lsev[h] = (m[h] + __log2f(lt)) * 0.6931471805599453f;
    }
  }
  each_o<NH>([&](int i, int j, int e) {
    float *row = s_stage + (head0 + t64_head_of(2 * j + e, t4)) * kOStr + 64 * i + ta;
    row[0] = o[i][4 * j + e] * inv[2 * j + e];
    row[8] = o[i][4 * j + 2 + e] * inv[2 * j + e];
  });
  const long long slot = (long long)r + p;
  if (wsel == 0 && gq == 0) {
#pragma unroll
    for (int h = 0; h < HN; h++) {
      const int head = head0 + t64_head_of(h, t4);
      if (head < nh) {
        if (nsplit == 1) lse[(long long)r * qh + h_begin + head] = lsev[h];
        else part_lse[slot * qh + h_begin + head] = lsev[h];
      }
    }
  }
  __syncthreads();
  for (int id = tid; id < nh * (DV / 4); id += NTH) {
    const int head = id / (DV / 4), c4 = id - head * (DV / 4);
    const float4 v = *reinterpret_cast<const float4 *>(s_stage + head * kOStr + 4 * c4);
    if (nsplit == 1)
      cgrt_mla::store_bf16x4(out + ((long long)r * qh + h_begin + head) * DV + 4 * c4, v, 1.f);
    else
      *reinterpret_cast<float4 *>(part_o + (slot * qh + h_begin + head) * DV + 4 * c4) = v;
  }
  return slot;
}

// The end of a segment of row r, after its last tile's products (whole warpgroup, NH =
// 2 SN heads per CTA): t64_rows_out (above) waits for the copies still in flight, sums
// the rows and writes O^T x onum / l (onum: 1, or kv_scale for the FP8 kernels) and the LSE to out / lse
// (nsplit == 1) or to partial slot r + p; under the counters strategy the CTA that arrives
// last for the row merges it (t64_merge, 16 heads at a time). s_stage ([NH][kOStr] floats)
// and the merge buffers (merge_buf) lie over the KV buffers, which are free here; ends
// with a __syncthreads, after which they are free again. EMPTY (t64_softmax): a head
// without tokens in the segment gets output 0 and LSE -inf (both merges weigh such a
// partial as 0).
template <bool EMPTY = false, int SN, int HN>
__device__ __forceinline__ void t64_finish(float (&o)[8][SN], const float (&m)[HN], float (&l)[HN], float onum,
                                           float *s_red, float *s_stage, float *merge_buf, int *s_last,
                                           bf16 *__restrict__ out, float *__restrict__ lse,
                                           float *__restrict__ part_o, float *__restrict__ part_lse,
                                           unsigned *__restrict__ counters, int r, int qh, int h_begin, int nh,
                                           int pf, int nsplit) {
  constexpr int NH = 2 * SN;
  const int tid = threadIdx.x, g = blockIdx.x, G = gridDim.x;
  const long long slot = t64_rows_out<EMPTY, SN, HN, NT>(o, m, l, onum, 0, tid >> 5, s_red, s_stage, out, lse, part_o,
                                                         part_lse, r, qh, h_begin, nh, nsplit);
  if (nsplit > 1 && counters != nullptr && cgrt_mla::last_cta_arrive<NT>(counters, r, g, G, nsplit, s_last)) {
    t64_merge(part_o, part_lse, out, lse, r, qh, h_begin, NH > 16 ? min(nh, 16) : nh, (long long)r + pf, nsplit, slot, s_stage,
              merge_buf);
    if (NH > 16 && nh > 16)
      t64_merge(part_o, part_lse, out, lse, r, qh, h_begin + 16, nh - 16, (long long)r + pf, nsplit, slot,
                s_stage + 16 * kOStr, merge_buf);
  }
  __syncthreads(); // the staging (and the merge buffers) are read before the next segment's loads
}

// The block-table entries (row btr, pages of 2^ps_shift tokens) of a thread's K copy
// rows row0, row0 + 64 / K, ... of the 64-token tile that starts at token tb; 0 for a
// token at or past bound (its copy reads nothing). The kernels read them a few tiles
// ahead of the copies that use them (t64_walk's entries callable).
template <int K>
__device__ __forceinline__ void t64_entries(const int *btr, int tb, int bound, int row0, int ps_shift, int (&pg)[K]) {
#pragma unroll
  for (int q = 0; q < K; q++) {
    const int tok = tb + row0 + (64 / K) * q;
    pg[q] = tok < bound ? __ldg(btr + (tok >> ps_shift)) : 0;
  }
}

// Whether a t64 kernel reads seq_lens and its first block-table entries before its wait
// (t64_walk): CGRT_MLA_ARG_EARLY_READS in its causal argument and the kernel schedules
// itself (with seq_lens NULL the schedule kernel right before wrote meta). Not the one-row
// kernels (their table rows say early 0): in the model's step at (1, 1K) that lengthened
// the merge after the split by 5 us a layer (docs/mla_decode.md).
template <int ROW1>
__device__ __forceinline__ bool t64_early(int causal, const int *seq_lens) {
  return !ROW1 && (causal & CGRT_MLA_ARG_EARLY_READS) != 0 && seq_lens != nullptr;
}

// The KV range walk of the t64 kernels (bf16 and FP8): which row segments CTA (g, p)
// runs, in order, and the block-table entries of each segment's first four tiles.
//   entries(btr, tb, bound, pg): the kernel's block-table entries (PG: its array type) of
//     its copy rows of the 64-token tile at token tb of block-table row btr (0 at or past
//     bound);
//   segment(r, tb0, stride, tend, len, n, pf, nsplit, pg0, pg1, pg2, pg3): row r's n
//     tiles at tokens tb0, tb0 + stride, ..., its tokens ending at tend, len the row's
//     length, partial slots from r + pf (nsplit of them; 1: straight to out), pg0 .. pg3
//     the entries of tiles 0-3.
// ROW1 = 0: the ranges of the schedule (the fused one for steps of up to NT rows, else
// meta), segments of 64-token tiles from each segment's first token. ROW1 = 1 (steps of
// one row, rows == 1, block_len 1): CTA (g, p) of P takes the 64-token tiles p, p + P,
// p + 2P, ... of the row, so the block-table entries of its first four tiles do not
// depend on seq_len: they are read together with seq_len (bounded by cap, the block
// table's columns), which takes one dependent round trip off the chain seq_len ->
// entries -> KV of a one-row step. The ranges in use are Pe = min(P, ceil(len / 64))
// (the schedule's count with CGRT_MLA_MIN_TILES_ONE_ROW = 2), partial p in slot p, so the
// combine kernel and the metadata are those of the range schedule (CTA (0, 0) writes
// them when seq_lens is given). The C reference (kernels/mla/ref.c) takes the same tiles.
// NTW: the CTA's threads, all of which call t64_walk (the schedule, the padding rows;
// s_meta holds 2 NTW + 2 ints, s_wsum NTW / 32); segment is called by all of them.
template <int ROW1, class PG, int NTW = NT, class Entries, class Seg>
__device__ __forceinline__ void t64_walk(Entries entries, Seg segment, const int *__restrict__ bt,
                                         const int *__restrict__ meta, bf16 *__restrict__ out,
                                         float *__restrict__ lse, int rows, int qh, int h_begin, int h_end, int P,
                                         int mbps, int bl, const int *__restrict__ seq_lens, int cap, int min_tiles,
                                         int causal, int *s_meta, int *s_wsum) {
  static_assert(CGRT_MLA_MIN_TILES_ONE_ROW == 2, "ROW1: the schedule's Pe is min(P, ceil(len / 64))");
  const int g = blockIdx.x, p = blockIdx.y;
  // Early reads (CGRT_MLA_ARG_EARLY_READS, not ROW1): seq_lens, the schedule and the first
  // segment's block-table entries before the wait; the kernel then waits here instead of
  // at its top.
  const bool early = t64_early<ROW1>(causal, seq_lens);
  causal &= CGRT_MLA_ARG_CAUSAL;
  PG pg0, pg1, pg2, pg3; // entries of tiles 0 .. 3 of a segment
  if (ROW1) {
    // The entries of tiles p, p + P, p + 2P, p + 3P in flight with seq_len.
    const int stride = 64 * P, tb0 = 64 * p;
    entries(bt, tb0, cap, pg0);
    entries(bt, tb0 + stride, cap, pg1);
    entries(bt, tb0 + 2 * stride, cap, pg2);
    entries(bt, tb0 + 3 * stride, cap, pg3);
    int len = seq_lens != nullptr ? __ldg(seq_lens) : meta[0];
    len = len < 0 ? 0 : (len > cap ? cap : len);
    const int n64 = (len + 63) >> 6, Pe = max(1, min(P, n64));
    if (seq_lens != nullptr && g == 0 && p == 0 && threadIdx.x == 0) {
      // The metadata of the range schedule for the combine kernel: length, tile offset
      // 0, T = ceil(len / 32) tiles, Pe ranges (row 0's partials in slots 0 .. Pe - 1).
      int *mw = const_cast<int *>(meta);
      mw[0] = len;
      mw[1] = 0;
      mw[2] = (len + TN - 1) / TN;
      mw[3] = Pe;
    }
    if (p >= n64) {
      if (len == 0 && p == 0) cgrt_mla::zero_padding_rows<NTW>(&len, out, lse, 1, qh, h_begin, h_end, 0, 1);
      return;
    }
    segment(0, tb0, stride, len, len, (n64 - 1 - p) / P + 1, 0, Pe, pg0, pg1, pg2, pg3);
  } else {
    const int *mb = cgrt_mla::fused_schedule<NTW>(s_meta, s_wsum, seq_lens, meta, rows, bl, cap, P, min_tiles,
                                                 causal, !early);
    const int *row_len = mb;
    const int *ts = mb + rows;
    const cgrt_mla::CtaRange cr = cgrt_mla::cta_range<NTW>(mb, rows, out, lse, qh, h_begin, h_end, p, P, !early);
    int r = cr.lo, t = cr.b0, tok0 = 0, tend = 0;
    cgrt_mla::Segment sg;
    // The range's next segment (row r, tokens [tok0, tend)) and its first four tiles'
    // entries; false past the range's end.
    auto next = [&]() -> bool {
      for (; cr.work && t < cr.b1; r++) {
        if (!cgrt_mla::next_segment(ts, row_len, r, t, cr.b1, cr.T, cr.Pe, sg)) continue;
        tok0 = sg.ja * TN;                  // first token of this segment
        tend = min(sg.jb * TN, sg.len);     // one past its last token (tok0 < tend)
        const int *btr = bt + (long long)(r / bl) * mbps;
        entries(btr, tok0, tend, pg0);
        entries(btr, tok0 + 64, tend, pg1);
        entries(btr, tok0 + 128, tend, pg2);
        entries(btr, tok0 + 192, tend, pg3);
        return true;
      }
      return false;
    };
    bool more = next();
    if (early) {
      cgrt_mla::pdl_wait();
      cgrt_mla::publish_meta<NTW>(s_meta, meta, rows);
      cgrt_mla::zero_padding_rows<NTW>(mb, out, lse, rows, qh, h_begin, h_end, p, P);
    }
    for (; more; r++, more = next())
      segment(r, tok0, 64, tend, sg.len, (tend - tok0 + 63) >> 6, sg.pf, sg.nsplit, pg0, pg1, pg2, pg3);
  }
}


}  // namespace cgrt_t64

#endif
