// MLA decode split kernels for up to 16 query heads per CTA on wgmma (sm_90a), token-major:
// cgrt_mla_split_t64, and cgrt_mla_split_t64_row1 for steps of one row (ROW1 below); and
// the same kernel for 17..32 query rows per CTA (NH = 32: wgmma N = 32, a ring of 7
// sub-stages, 215580 bytes of shared memory): cgrt_mla_split_t64_n32, and
// cgrt_mla_split_t64_n32_causal for causal blocks whose rows run together (MK). Same
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
// (NH = 32: m64n32k16, S^T in 16 and O^T in 128 registers.)
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
// A diagnostic build stamps each CTA's phases (kernels/mla/stamps.cuh; empty macros in
// the library's build).
//
// The FP8 e4m3 kernels are in kernels/mla/split_t64_fp8.cu; both files share
// kernels/mla/t64.cuh (the products, the softmax, the KV range walk, the end of a
// segment and the counters merge).
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/split.cuh"
#include "kernels/mla/stamps.cuh"
#include "kernels/mla/t64.cuh"
#include "kernels/mla/wgmma.cuh"

namespace {

using namespace cgrt_wg;
using namespace cgrt_t64;

constexpr int kSub = 3 * kCB;    // a sub-stage: 3 column blocks

// The shared-memory plan of NH = 16 or 32 query rows per CTA: Q (9 column blocks of NH
// rows), a ring of kSlots sub-stages (8 for 16 rows; 7 for 32, whose Q and P^T take 20 KB
// more), P^T, and the small arrays (s_red [NH][4], the fused schedule, counters flag).
// The output staging ([NH][kOStr] floats) and the merge buffers lie over the ring (16
// rows) or over Q and the ring (32 rows: Q is reloaded by every segment).
template <int NH>
struct Plan {
  static constexpr int kQ = NH * 128;  // a column block of Q
  static constexpr int kP = NH * 128;  // P^T: NH heads x 64 tokens
  static constexpr int kSlots = NH == 16 ? 8 : 7;
  static constexpr int kAhead = kSlots - 3; // sub-stages in flight while a tile computes
  static constexpr int kSmall = NH * 4 * 4 + (2 * NT + 2) * 4 + (NT / 32) * 4 + 4;
  static constexpr int kBytes = 1024 + 9 * kQ + kSlots * kSub + kP + kSmall;
  static constexpr int kStageAt = NH == 16 ? 9 * kQ : 0; // byte offset of the staging
  static constexpr int kStageBytes = NH * kOStr * 4;
  static_assert(kStageAt + kStageBytes + kMergeBatch * 16 * DV * 4 <= 9 * kQ + kSlots * kSub,
                "the output staging and the merge buffers fit over the ring (and Q)");
  static_assert(kBytes <= 227 * 1024, "one CTA per SM");
  static_assert(kAhead >= 3, "the ring holds one tile plus the sub-stages ahead");
};
static_assert(Plan<16>::kBytes == CGRT_MLA_T64_SMEM, "the kernel table passes CGRT_MLA_T64_SMEM");
static_assert(Plan<32>::kBytes == CGRT_MLA_T64_N32_SMEM, "the kernel table passes CGRT_MLA_T64_N32_SMEM");
static_assert(Plan<16>::kStageBytes == kOStageBytes, "t64_merge's staging");

// ROW1 = 1 (cgrt_mla_split_t64_row1: steps of one row, one CTA per SM): the tiles of
// t64_walk's ROW1 (kernels/mla/t64.cuh). NH: query rows per CTA (16: the
// _t64 kernels; 32: the _t64_n32 kernels). MK (the _n32_causal kernel, causal verify
// rows of a block run together): each "row" is a request whose qh query rows are mk
// block rows of qh / mk heads; query row h sees cgrt__mla_row_len(len, cap, h / (qh /
// mk), mk, 1) tokens, len being the request's (as cgrt_mla_split_m64_ws_causal).
template <int ROW1, int NH = 16, bool MK = false>
__device__ __forceinline__ void split_t64(const bf16 *__restrict__ q, const bf16 *__restrict__ kv,
                                          const int *__restrict__ bt, const int *__restrict__ meta,
                                          bf16 *__restrict__ out, float *__restrict__ lse,
                                          float *__restrict__ part_o, float *__restrict__ part_lse,
                                          unsigned *__restrict__ counters, int rows, int qh, int hg, int P,
                                          int mbps, int ps, int bl, float scale, const int *__restrict__ seq_lens,
                                          int cap, int min_tiles, int causal, int mk, float kv_scale) {
  (void)kv_scale; // read by the FP8 kernels only (kernels/mla/split_t64_fp8.cu)
  using L = Plan<NH>;
  constexpr int kSlots = L::kSlots, kAhead = L::kAhead, SN = NH / 2, HN = NH / 4;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_ring = s_q + 9 * L::kQ;
  const uint32_t s_p = s_ring + kSlots * kSub;
  float *s_stage = reinterpret_cast<float *>(sm + L::kStageAt); // [NH][kOStr]
  float *s_red = reinterpret_cast<float *>(sm + 9 * L::kQ + kSlots * kSub + L::kP); // [NH heads][4 warps]
  int *s_meta = reinterpret_cast<int *>(s_red + NH * 4);                                // 2 NT + 2
  int *s_wsum = s_meta + 2 * NT + 2;                                                     // NT / 32
  int *s_last = s_wsum + NT / 32;

  // Programmatic dependent launch: nothing above reads what the kernel before writes;
  // with early reads t64_walk waits after its reads of seq_lens and the block table.
  CGRT_STAMP_DECL;
  CGRT_STAMP(0);
  if (!t64_early<ROW1>(causal, seq_lens)) cgrt_mla::pdl_wait();
  CGRT_STAMP(1);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2;
  const int g = blockIdx.x;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);
  const int nh = h_end - h_begin; // 1..NH
  const float sl2 = scale * 1.4426950408889634f;
  const int ps_shift = __ffs(ps) - 1;

  // Copy roles: thread tid moves chunk tid & 7 of every column block for token rows
  // (tid >> 3) + 16 q4 of a tile (and of Q: head rows (tid >> 3) + 16 x, x < NH / 16).
  const int crow = tid >> 3, cch = tid & 7;
  // Accumulator roles (m64n16): token rows ta = 16 warp + gq and ta + 8 of S^T; heads
  // t64_head_of (kernels/mla/t64.cuh) of S^T and O^T; dims 64 i + 16 warp + gq (+ 8) of O^T.
  const int ta = 16 * warp + gq;

  // Block-table entries (row btr) of this thread's 4 copy rows of the tile that starts at
  // token tb (0 at or past bound). They are read ahead of the copies that use them (tiles
  // 0-3 before the prologue, then tile it + 3 in step it), so that no copy waits for its
  // entry.
  auto entries = [&](const int *btr, int tb, int bound, int (&pg)[4]) {
    t64_entries(btr, tb, bound, crow, ps_shift, pg);
  };

  // One segment of row r: its n tiles start at tokens tb0, tb0 + stride, ..., its tokens
  // end at tend; its partial goes to slot r + p (nsplit > 1: one of the nsplit partials
  // in slots r + pf ..) or straight to out (nsplit == 1). pg0, pg1, pga, pgb: the entries
  // of tiles 0-3.
  auto segment = [&](int r, int tb0, int stride, int tend, int len, int n, int pf, int nsplit, int (&pg0)[4],
                     int (&pg1)[4], int (&pga)[4], int (&pgb)[4]) {
    CGRT_STAMP_SEG(0);
    const int *btr = bt + (long long)(r / bl) * mbps;
    // Sub-stage k = 3 i + c: column blocks 3c .. 3c + 2 of tile i (entries pg), into ring
    // slot k % kSlots; one commit group each (empty past the segment), so that wait_group
    // counts tiles.
    auto slot_of = [](int k) { return (kSlots & (kSlots - 1)) == 0 ? k & (kSlots - 1) : k % kSlots; };
    auto load_sub = [&](int k, const int (&pg)[4]) {
      const int i = k / 3, c = k - 3 * i;
      if (i < n) {
        const uint32_t dst = s_ring + slot_of(k) * kSub + swz(crow, cch);
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
#pragma unroll
      for (int x = 0; x < NH / 16; x++) {
        const int hr = crow + 16 * x;
        const bool ok = hr < nh;
#pragma unroll
        for (int cb = 0; cb < 9; cb++)
          cp_async16(s_q + cb * L::kQ + swz(hr, cch), ok ? qr + (long long)hr * D + cb * 64 + cch * 8 : q,
                     ok ? 16 : 0);
      }
    }
    // MK: the end of each of the thread's head columns (per-row lengths).
    int tend_h[HN];
#pragma unroll
    for (int h = 0; h < HN; h++) {
      tend_h[h] = tend;
      if constexpr (MK) {
        const int per = qh / mk, hq = min(h_begin + t64_head_of(h, lane & 3), qh - 1);
        tend_h[h] = min(tend, cgrt__mla_row_len(len, cap, hq / per, mk, 1));
      }
    }
    (void)len;
    // The whole ring at once: a segment of <= 2 tiles loads in one go, a longer one
    // starts with kSlots sub-stages in flight.
#pragma unroll
    for (int k = 0; k < kSlots; k++) load_sub(k, k < 3 ? pg0 : k < 6 ? pg1 : pga);

    float o[8][SN];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < SN; j++) o[i][j] = 0.f;
    float m[HN], l[HN];
#pragma unroll
    for (int h = 0; h < HN; h++) {
      m[h] = -INFINITY;
      l[h] = 0.f;
    }

    for (int it = 0; it < n; it++) {
      // Sub-stages up to 3 it + 2 landed (kSlots committed at it = 0, 3 it + kAhead - 1
      // after) for every thread, and every warp is done with tile it - 1 (its slots are
      // refilled below).
      if (it == 0) cp_wait<kSlots - 3>();
      else cp_wait<kAhead - 3>();
      fence_proxy_async();
      __syncthreads();
      if (it == 0) CGRT_STAMP_SEG(1);
      auto kb = [&](int cb) -> uint32_t {
        return s_ring + slot_of(3 * it + cb / 3) * kSub + (cb % 3) * kCB;
      };
      float s[SN];
      t64_qk_issue<NH>(s, kb, s_q);
      if (it > 0) {
        // Sub-stages 3 it + kAhead .. + 2: those below 3 it + 6 belong to tile it + 1
        // (entries pga), the others to tile it + 2 (pgb).
#pragma unroll
        for (int x = 0; x < 3; x++) load_sub(3 * it + kAhead + x, kAhead + x < 6 ? pga : pgb);
#pragma unroll
        for (int q4 = 0; q4 < 4; q4++) pga[q4] = pgb[q4];
        entries(btr, tb0 + stride * (it + 3), tend, pgb);
      }
      t64_qk_wait(s);

      // Online softmax down the token rows (log2 domain; tokens past the segment masked).
      const int tk = tb0 + stride * it + ta;
      const bool va = tk < tend, vb = tk + 8 < tend;
      if constexpr (MK)
        t64_softmax<true>(s, m, l, o, [&](int j, int e, int b) { return tk + 8 * b < tend_h[2 * j + e]; },
                          [&](int, int) { return sl2; }, [](uint32_t a, float v) { st_shared_u16(a, v); }, s_red,
                          s_p);
      else
        t64_softmax(s, m, l, o, [&](int, int, int b) { return b ? vb : va; }, [&](int, int) { return sl2; },
                    [](uint32_t a, float v) { st_shared_u16(a, v); }, s_red, s_p);
      fence_proxy_async();
      __syncthreads(); // P^T complete
      t64_pv<NH>(o, kb, s_p);
    }
    CGRT_STAMP_SEG(2);
    t64_finish<MK>(o, m, l, 1.f, s_red, s_stage, reinterpret_cast<float *>(sm + L::kStageAt + L::kStageBytes),
                   s_last, out, lse, part_o, part_lse, counters, r, qh, h_begin, nh, pf, nsplit);
    CGRT_STAMP_SEG(3);
    CGRT_STAMP_SEG_END(r, n);
  };

  t64_walk<ROW1, int[4]>(entries, segment, bt, meta, out, lse, rows, qh, h_begin, h_end, P, mbps, bl, seq_lens, cap,
                         min_tiles, causal, s_meta, s_wsum);
  CGRT_STAMP_EXIT();
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
// 17 to 32 query rows per CTA (wgmma N = 32): steps of any number of rows, and causal
// verify blocks whose rows run together (MK above). (Steps of one row take
// cgrt_mla_split_t64_row1 in groups of 16: kernels/mla/plan.c.)
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_t64_n32(CGRT_WG_PARAMS) {
  split_t64<0, 32>(CGRT_WG_ARGS);
}
extern "C" __global__ void __launch_bounds__(128, 1) cgrt_mla_split_t64_n32_causal(CGRT_WG_PARAMS) {
  split_t64<0, 32, true>(CGRT_WG_ARGS);
}
