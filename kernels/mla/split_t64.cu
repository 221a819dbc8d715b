// MLA decode split kernels for up to 16 query heads per CTA on wgmma (sm_90a), token-major:
// cgrt_mla_split_t64, and cgrt_mla_split_t64_row1 for steps of one row (ROW1 below). Same
// parameters, schedule, ranges and partial slots as every split kernel
// (kernels/mla/split.cuh), so the schedule and combine kernels and the C reference
// (kernels/mla/ref.c) serve them all; under the counters strategy the last CTA of a row
// merges with t64_merge. Host side: kernels/mla/plan.c; design: docs/mla_decode.md.
//
// Why token-major: with 16 heads a head-major product (M = heads) fills a quarter of a
// wgmma, and mma.sync needs four warps to split every dot product and exchange S through
// shared memory. Here the 64 tokens of a tile are the M rows:
//   S^T[64 x 16]  = K[64 x 576] . Q[16 x 576]^T   (wgmma m64n16k16 x 36, A = the KV tile,
//                                                  B = Q, both K-major in shared memory)
//   O^T[512 x 16] += V^T[512 x 64] . P^T[64 x 16] (wgmma m64n16k16 x 32, A = the same KV
//                                                  tile read MN-major, B = P^T)
// One warpgroup (128 threads) holds S^T in 8 and O^T in 64 registers per thread; the
// softmax runs down the token rows (a shuffle over 8 lanes, then the 4 warps' maxima
// through shared memory).
//
// Pipeline: a 64-token tile is 9 column blocks of 64 tokens x 128 bytes (the 128-byte
// swizzle of kernels/mla/wgmma.cuh), loaded as 3 sub-stages of 3 blocks (24 KB) into a
// ring of 8 slots; while a tile computes, the next 5 sub-stages (120 KB) are in flight
// (all 8 at the start of a segment). (An L2 bulk prefetch of the rows 1, 2 or 4 tiles
// further ahead measured 18-48% slower: docs/mla_decode.md.)
// 1 CTA per SM (219420 bytes of shared memory).
//
// Without sm_90a (the compute_90 PTX of the fatbin) the two products run on mma.sync +
// ldmatrix over the same layout with the same accumulator layout.
//
// The FP8 e4m3 kernels are in kernels/mla/split_t64_fp8.cu; both files share
// kernels/mla/t64.cuh (the products and the counters merge).
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"
#include "kernels/mla/t64.cuh"
#include "kernels/mla/wgmma.cuh"

namespace {

using namespace cgrt_wg;
using namespace cgrt_t64;
using cgrt_mla::ex2;
using cgrt_mla::part_of;

constexpr int kSub = 3 * kCB;    // a sub-stage: 3 column blocks
constexpr int kSlots = 8;        // ring of sub-stages
constexpr int kAhead = 5;        // sub-stages in flight while a tile computes
constexpr int kSmall = 64 * 4 + (2 * NT + 2) * 4 + (NT / 32) * 4 + 4;
constexpr int kBytes = 1024 + 9 * kQ16 + kSlots * kSub + kP16 + kSmall;
static_assert(kSlots - 3 == kAhead, "the ring holds one tile plus the sub-stages ahead");
static_assert(16 * kOStr * 4 <= kSlots * kSub, "the output staging fits in the ring");
static_assert(kBytes == CGRT_MLA_T64_SMEM, "the kernel table passes CGRT_MLA_T64_SMEM");
static_assert(kBytes <= 227 * 1024, "one CTA per SM");
static_assert(CGRT_MLA_MIN_TILES_ONE_ROW == 2, "ROW1: the schedule's Pe is min(P, ceil(len / 64))");

static_assert(kOStageBytes + kMergeBatch * 16 * DV * 4 <= kSlots * kSub, "the merge buffers fit in the ring");
// ROW1 = 1 (cgrt_mla_split_t64_row1: steps of one row, one CTA per SM):
// CTA (g, p) of P takes the 64-token tiles p, p + P, p + 2P, ... of the row, so the
// block-table entries of its first four tiles do not depend on seq_len: they are read
// together with seq_len (bounded by cap, the block table's columns), which takes one
// dependent round trip off the chain seq_len -> entries -> KV of a one-row step. The
// ranges in use are Pe = min(P, ceil(len / 64)) (the schedule's count with
// CGRT_MLA_MIN_TILES_ONE_ROW = 2), partial p in slot p, so the combine kernel and the
// metadata are those of the range schedule. The C reference (kernels/mla/ref.c) takes the
// same tiles.
template <int ROW1>
__device__ __forceinline__ void split_t64(const bf16 *__restrict__ q, const bf16 *__restrict__ kv,
                                          const int *__restrict__ bt, const int *__restrict__ meta,
                                          bf16 *__restrict__ out, float *__restrict__ lse,
                                          float *__restrict__ part_o, float *__restrict__ part_lse,
                                          unsigned *__restrict__ counters, int rows, int qh, int hg, int P,
                                          int mbps, int ps, int bl, float scale, const int *__restrict__ seq_lens,
                                          int cap, int min_tiles, int causal, int mk, float kv_scale) {
  (void)mk;       // 0: one row per "row" (kernels/mla/plan.c runs blocks together on m64 kernels only)
  (void)kv_scale; // read by the FP8 kernels only (kernels/mla/split_t64_fp8.cu)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_ring = s_q + 9 * kQ16;
  const uint32_t s_p = s_ring + kSlots * kSub;
  float *s_stage = reinterpret_cast<float *>(sm + 9 * kQ16); // [16][kOStr], over the ring
  float *s_red = reinterpret_cast<float *>(sm + 9 * kQ16 + kSlots * kSub + kP16); // [16 heads][4 warps]
  int *s_meta = reinterpret_cast<int *>(s_red + 64);                                     // 2 NT + 2
  int *s_wsum = s_meta + 2 * NT + 2;                                                     // NT / 32
  int *s_last = s_wsum + NT / 32;

  // Programmatic dependent launch: nothing above reads what the kernel before writes.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, t4 = lane & 3;
  const int g = blockIdx.x, p = blockIdx.y, G = gridDim.x;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const int nh = h_end - h_begin; // 1..16
  const float sl2 = scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;

  // Copy roles: thread tid moves chunk tid & 7 of every column block for token rows
  // (tid >> 3) + 16 q4 of a tile (and of Q: head row tid >> 3).
  const int crow = tid >> 3, cch = tid & 7;
  // Accumulator roles (m64n16): token rows ta = 16 warp + gq and ta + 8 of S^T; heads
  // 8 j + 2 t4 + e (index 2 j + e below) of S^T and O^T; dims 64 i + 16 warp + gq (+ 8) of O^T.
  const int ta = 16 * warp + gq;
  auto head_of = [&](int h) { return 8 * (h >> 1) + 2 * t4 + (h & 1); }; // head of index h = 2 j + e

  // Block-table entries (row btr) of this thread's 4 copy rows of the tile that starts at
  // token tb (0 at or past bound). They are read ahead of the copies that use them (tiles
  // 0-3 before the prologue, then tile it + 3 in step it), so that no copy waits for its
  // entry.
  auto entries = [&](const int *btr, int tb, int bound, int (&pg)[4]) {
#pragma unroll
    for (int q4 = 0; q4 < 4; q4++) {
      const int tok = tb + crow + 16 * q4;
      pg[q4] = tok < bound ? __ldg(btr + (tok >> ps_shift)) : 0;
    }
  };

  // One segment of row r: its n tiles start at tokens tb0, tb0 + stride, ..., its tokens
  // end at tend; its partial goes to slot r + p (nsplit > 1: one of the nsplit partials
  // in slots r + pf ..) or straight to out (nsplit == 1). pg0, pg1, pga, pgb: the entries
  // of tiles 0-3.
  auto segment = [&](int r, int tb0, int stride, int tend, int n, int pf, int nsplit, int (&pg0)[4],
                     int (&pg1)[4], int (&pga)[4], int (&pgb)[4]) {
    const int *btr = bt + (long long)(r / bl) * mbps;
    // Sub-stage k = 3 i + c: column blocks 3c .. 3c + 2 of tile i (entries pg), into ring
    // slot k % 8; one commit group each (empty past the segment), so that wait_group
    // counts tiles.
    auto load_sub = [&](int k, const int (&pg)[4]) {
      const int i = k / 3, c = k - 3 * i;
      if (i < n) {
        const uint32_t dst = s_ring + (k & (kSlots - 1)) * kSub + swz(crow, cch);
        const int tb = tb0 + stride * i + crow;
#pragma unroll
        for (int q4 = 0; q4 < 4; q4++) {
          const int tok = tb + 16 * q4;
          const bool ok = tok < tend;
          const bf16 *src = kv + ((long long)pg[q4] * ps + (tok & (ps - 1))) * D + c * 192 + cch * 8;
#pragma unroll
          for (int b = 0; b < 3; b++)
            cp_async16(dst + q4 * 16 * 128 + b * kCB, ok ? src + b * 64 : kv, ok ? 16 : 0);
        }
      }
      cp_commit();
    };
    {
      // Q of the head group (rows past nh zero), in the first commit group.
      const bf16 *qr = q + ((long long)r * qh + h_begin) * D;
      const bool ok = crow < nh;
#pragma unroll
      for (int cb = 0; cb < 9; cb++)
        cp_async16(s_q + cb * kQ16 + swz(crow, cch), ok ? qr + (long long)crow * D + cb * 64 + cch * 8 : q,
                   ok ? 16 : 0);
    }
    // The whole ring at once: a segment of <= 2 tiles loads in one go, a longer one
    // starts with 8 sub-stages in flight.
#pragma unroll
    for (int k = 0; k < kSlots; k++) load_sub(k, k < 3 ? pg0 : k < 6 ? pg1 : pga);

    float o[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) o[i][j] = 0.f;
    float m[4], l[4];
#pragma unroll
    for (int h = 0; h < 4; h++) {
      m[h] = -INFINITY;
      l[h] = 0.f;
    }

    for (int it = 0; it < n; it++) {
      // Sub-stages up to 3 it + 2 landed (7 committed at it = 0, 3 it + 4 after) for every
      // thread, and every warp is done with tile it - 1 (its slots are refilled below).
      if (it == 0) cp_wait<kSlots - 3>();
      else cp_wait<2>();
      fence_proxy_async();
      __syncthreads();
      auto kb = [&](int cb) -> uint32_t {
        return s_ring + ((3 * it + cb / 3) & (kSlots - 1)) * kSub + (cb % 3) * kCB;
      };
      float s[8];
      t64_qk_issue(s, kb, s_q);
      if (it > 0) {
        // Sub-stage 3 it + 5 is the last of tile it + 1, 3 it + 6 and + 7 the first two of
        // tile it + 2.
        load_sub(3 * it + kAhead, pga);
        load_sub(3 * it + kAhead + 1, pgb);
        load_sub(3 * it + kAhead + 2, pgb);
#pragma unroll
        for (int q4 = 0; q4 < 4; q4++) pga[q4] = pgb[q4];
        entries(btr, tb0 + stride * (it + 3), tend, pgb);
      }
      t64_qk_wait(s);

      // Online softmax down the token rows (log2 domain; tokens past the segment masked).
      const int tk = tb0 + stride * it + ta;
      const bool va = tk < tend, vb = tk + 8 < tend;
      float mx[4];
#pragma unroll
      for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          s[4 * j + e] = va ? s[4 * j + e] * sl2 : -INFINITY;
          s[4 * j + 2 + e] = vb ? s[4 * j + 2 + e] * sl2 : -INFINITY;
          float x = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
          x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
          x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
          x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
          mx[2 * j + e] = x;
        }
      if (gq == 0) {
#pragma unroll
        for (int h = 0; h < 4; h++) s_red[head_of(h) * 4 + warp] = mx[h];
      }
      __syncthreads();
      float al[4];
      bool grew = false;
#pragma unroll
      for (int h = 0; h < 4; h++) {
        // Every tile holds a token below tend: the maximum over the 4 warps is finite.
        const float4 v = *reinterpret_cast<const float4 *>(s_red + head_of(h) * 4);
        const float mn = fmaxf(m[h], fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        al[h] = ex2(m[h] - mn);
        grew |= mn != m[h];
        m[h] = mn;
      }
#pragma unroll
      for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const int h = 2 * j + e, head = 8 * j + 2 * t4 + e;
          const float pa = ex2(s[4 * j + e] - m[h]), pb = ex2(s[4 * j + 2 + e] - m[h]);
          l[h] = l[h] * al[h] + pa + pb;
          // P^T[head][token]: tokens ta (chunk 2 warp) and ta + 8 (chunk 2 warp + 1), element gq.
          st_shared_u16(s_p + swz(head, 2 * warp) + 2 * gq, pa);
          st_shared_u16(s_p + swz(head, 2 * warp + 1) + 2 * gq, pb);
        }
      if (grew)
        each_o([&](int i, int j, int e) {
          o[i][4 * j + e] *= al[2 * j + e];
          o[i][4 * j + 2 + e] *= al[2 * j + e];
        });
      fence_proxy_async();
      __syncthreads(); // P^T complete
      t64_pv(o, kb, s_p);
    }
    cp_wait<0>();

    // Row sums: the 8 lanes of a head column, then the 4 warps.
#pragma unroll
    for (int h = 0; h < 4; h++) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 4);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 8);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 16);
    }
    __syncthreads(); // every P.V done: the ring is free for the output staging; s_red free
    if (gq == 0) {
#pragma unroll
      for (int h = 0; h < 4; h++) s_red[head_of(h) * 4 + warp] = l[h];
    }
    __syncthreads();
    float inv[4], lsev[4];
#pragma unroll
    for (int h = 0; h < 4; h++) {
      const float4 v = *reinterpret_cast<const float4 *>(s_red + head_of(h) * 4);
      const float lt = (v.x + v.y) + (v.z + v.w);
      inv[h] = 1.f / lt;
      lsev[h] = (m[h] + __log2f(lt)) * 0.6931471805599453f;
    }
    // O^T / l into the staging rows [head][dim].
    each_o([&](int i, int j, int e) {
      float *row = s_stage + head_of(2 * j + e) * kOStr + 64 * i + ta;
      row[0] = o[i][4 * j + e] * inv[2 * j + e];
      row[8] = o[i][4 * j + 2 + e] * inv[2 * j + e];
    });
    const long long slot = (long long)r + p;
    if (warp == 0 && gq == 0) {
#pragma unroll
      for (int h = 0; h < 4; h++) {
        const int head = head_of(h);
        if (head < nh) {
          if (nsplit == 1) lse[(long long)r * qh + h_begin + head] = lsev[h];
          else part_lse[slot * qh + h_begin + head] = lsev[h];
        }
      }
    }
    __syncthreads();
    for (int id = tid; id < nh * (DV / 4); id += NT) {
      const int head = id / (DV / 4), c4 = id - head * (DV / 4);
      const float4 v = *reinterpret_cast<const float4 *>(s_stage + head * kOStr + 4 * c4);
      if (nsplit == 1)
        cgrt_mla::store_bf16x4(out + ((long long)r * qh + h_begin + head) * DV + 4 * c4, v, 1.f);
      else
        *reinterpret_cast<float4 *>(part_o + (slot * qh + h_begin + head) * DV + 4 * c4) = v;
    }
    if (nsplit > 1 && counters != nullptr &&
        cgrt_mla::last_cta_arrive<NT>(counters, r, g, G, nsplit, s_last))
      t64_merge(part_o, part_lse, out, lse, r, qh, h_begin, nh, (long long)r + pf, nsplit, slot, s_stage,
                reinterpret_cast<float *>(sm + 9 * kQ16 + kOStageBytes));
    __syncthreads(); // the staging (and the merge buffers) are read before the next segment's loads
  };

  int pg0[4], pg1[4], pga[4], pgb[4]; // entries of tiles 0, 1; then it + 1 and it + 2 of step it
  if (ROW1) {
    // One row (rows == 1, block_len 1): the entries of tiles p, p + P, p + 2P, p + 3P in
    // flight with seq_len.
    const int stride = 64 * P, tb0 = 64 * p;
    entries(bt, tb0, cap, pg0);
    entries(bt, tb0 + stride, cap, pg1);
    entries(bt, tb0 + 2 * stride, cap, pga);
    entries(bt, tb0 + 3 * stride, cap, pgb);
    int len = seq_lens != nullptr ? __ldg(seq_lens) : meta[0];
    len = len < 0 ? 0 : (len > cap ? cap : len);
    const int n64 = (len + 63) >> 6, Pe = max(1, min(P, n64));
    if (seq_lens != nullptr && g == 0 && p == 0 && tid == 0) {
      // The metadata of the range schedule for the combine kernel: length, tile offset
      // 0, T = ceil(len / 32) tiles, Pe ranges (row 0's partials in slots 0 .. Pe - 1).
      int *mw = const_cast<int *>(meta);
      mw[0] = len;
      mw[1] = 0;
      mw[2] = (len + TN - 1) / TN;
      mw[3] = Pe;
    }
    if (p >= n64) {
      if (len == 0 && p == 0) cgrt_mla::zero_padding_rows<NT>(&len, out, lse, 1, qh, h_begin, h_end, 0, 1);
      return;
    }
    segment(0, tb0, stride, len, (n64 - 1 - p) / P + 1, 0, Pe, pg0, pg1, pga, pgb);
  } else {
    const int *mb = cgrt_mla::fused_schedule<NT>(s_meta, s_wsum, seq_lens, meta, rows, bl, cap, P, min_tiles,
                                                        causal);
    const int *row_len = mb;
    const int *ts = mb + rows;
    const cgrt_mla::CtaRange cr = cgrt_mla::cta_range<NT>(mb, rows, out, lse, qh, h_begin, h_end, p, P);
    for (int r = cr.lo, t = cr.b0; cr.work && t < cr.b1; r++) {
      cgrt_mla::Segment sg;
      if (!cgrt_mla::next_segment(ts, row_len, r, t, cr.b1, cr.T, cr.Pe, sg)) continue;
      const int tok0 = sg.ja * TN;              // first token of this segment
      const int tend = min(sg.jb * TN, sg.len); // one past its last token (tok0 < tend)
      const int *btr = bt + (long long)(r / bl) * mbps;
      entries(btr, tok0, tend, pg0);
      entries(btr, tok0 + 64, tend, pg1);
      entries(btr, tok0 + 128, tend, pga);
      entries(btr, tok0 + 192, tend, pgb);
      segment(r, tok0, 64, tend, (tend - tok0 + 63) >> 6, sg.pf, sg.nsplit, pg0, pg1, pga, pgb);
    }
  }
}

} // namespace

// Up to 16 query heads per CTA: steps of any number of rows.
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_t64(CGRT_WG_PARAMS) {
  split_t64<0>(CGRT_WG_ARGS);
}
// Steps of one row (ROW1 above).
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_t64_row1(CGRT_WG_PARAMS) {
  split_t64<1>(CGRT_WG_ARGS);
}
