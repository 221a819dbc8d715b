// MLA decode split kernels for 17 to 64 query rows per CTA, warp-specialised (sm_90a):
// cgrt_mla_split_m64_ws, and cgrt_mla_split_m64_ws_causal for causal verify blocks whose
// rows run together (per-query-row lengths, parameter mk; BLOCK below). Same parameters,
// schedule, ranges, partial slots and last-CTA counter merge as every split kernel
// (kernels/mla/split.cuh), so the schedule and combine kernels and the C reference
// (kernels/mla/ref.c, split_ref) serve them. Host side: kernels/mla/plan.c; design and
// figures: docs/mla_decode.md.
//
// CTA = 384 threads, one per SM (CGRT_MLA_M64_WS_SMEM bytes of shared memory):
//   - warpgroup 2, the producer (40 registers after setmaxnreg), copies each row
//     segment's Q (64 rows x 576) and its KV tiles of 32 tokens into a ring of RING
//     stages with cp.async (paged: each thread one token row, 18 16-byte chunks; tokens
//     past the row's length read as 0) and arms the stage's full mbarrier with
//     cp.async.mbarrier.arrive.noinc, so it never waits for its own copies; it waits only
//     for a stage's empty mbarrier (NC arrivals) before it refills it, and for Q's empty
//     mbarrier before the next segment's Q.
//   - warpgroups 0 and 1, the consumers (232 registers), ping-pong on the tiles: tile k
//     belongs to warpgroup k & 1, which computes S = Q . K^T (wgmma m64n32k16 x 36 from
//     shared memory), masks and scales it, takes the running maximum m_k = max(m_{k-1},
//     rowmax S) (m_{k-1} it holds already: its own or the one the other warpgroup handed
//     over), writes m_k, the rescale factor exp2(m_{k-1} - m_k) and P = exp2(S - m_k)
//     (bf16, into the tile's rope columns, 64-byte swizzle: dead once S is done) and hands
//     them over: one bar.sync of both consumer warpgroups per tile (named barrier 1, 256
//     threads, every tile in order, so both sides always sync). Then each warpgroup
//     rescales its half of O (256 V columns) and issues O += P . V (wgmma m64n256k16 x 2)
//     for tile k, the owner also issues S of its next tile k + 2 first. A tile's stage
//     is released (empty mbarrier) by each consumer thread once its P . V of the tile is
//     complete (and the owner's S, issued before).
//   - Every hand-off between the consumer warpgroups is a bar.sync on both sides (no
//     bar.arrive); the producer stays to the CTA's last barrier (no early exit), so the
//     CTA-wide barriers and the named barriers count the threads racecheck expects.
//   - Row sums l: each consumer keeps those of its own tiles, rescaled with every
//     handed-over factor; the two halves are added at the segment's end (named barrier
//     2), the output or partial written as kernels/mla/m64.cuh's store_rows does, the
//     counters merge among the consumers (named barrier 3).
//
// Without sm_90a code (the fatbin's compute_90 PTX: CUDA_FORCE_PTX_JIT=1, GPUs past
// sm_90) the same kernels run the serial 64-row body of kernels/mla/m64.cuh with NT =
// 384 (its mma.sync fallback; the third warpgroup copies and joins the CTA barriers):
// wgmma, setmaxnreg and the warp specialisation are sm_90a-only, and that body is the
// deterministic former cgrt_mla_split_m64_wgmma.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/mla/common.h"
#include "kernels/mla/m64.cuh"
#include "kernels/mla/split.cuh"
#include "kernels/mla/wgmma.cuh"

namespace {

using namespace cgrt_wg;
using cgrt_mla::ex2;
using cgrt_mla::pack_bf16;
using cgrt_m64::mask_max;
using cgrt_m64::quad_sum;
using cgrt_m64::scale_rows;
typedef __nv_bfloat16 bf16;

[[maybe_unused]] constexpr int D = CGRT_MLA_D; // 576
[[maybe_unused]] constexpr int TN = CGRT_MLA_TILE;
constexpr int NT = 384;       // threads: consumer warpgroups 0, 1, producer warpgroup 2
constexpr int NC = 256;       // consumer threads
constexpr int RING = 4;       // KV stages of 32 tokens
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * NC <= 65536, "register file");

// Shared memory after the 1 KB alignment slack: Q, the ring, the consumers' running
// maxima / rescale factors (two tiles' worth: parity k & 1) and row sums, the mbarriers,
// the fused schedule, a flag.
constexpr int OFF_KV = kQBytes;
constexpr int OFF_M = OFF_KV + RING * kStageBytes; // float [2][64]
constexpr int OFF_SC = OFF_M + 2 * 64 * 4;         // float [2][64]
constexpr int OFF_RED = OFF_SC + 2 * 64 * 4;       // float [2][64]
constexpr int OFF_BAR = OFF_RED + 2 * 64 * 4;      // u64: full[RING], empty[RING], q_full, q_empty
constexpr int OFF_META = OFF_BAR + (2 * RING + 2) * 8;
constexpr int OFF_WSUM = OFF_META + (2 * NT + 2) * 4;
constexpr int OFF_LAST = OFF_WSUM + (NT / 32) * 4;
constexpr int kBytes = 1024 + OFF_LAST + 4;
static_assert(kBytes == CGRT_MLA_M64_WS_SMEM, "the kernel table passes CGRT_MLA_M64_WS_SMEM");
static_assert(kBytes <= 227 * 1024, "one CTA per SM");
static_assert(cgrt_m64::smem_bytes<NT>() <= kBytes, "the fallback body fits the same launch");
static_assert(OFF_BAR % 8 == 0 && OFF_KV % 1024 == 0 && kStageBytes % 1024 == 0, "alignment");

// BLOCK = 1 (cgrt_mla_split_m64_ws_causal): each "row" is a request whose qh query rows
// are mk causal block rows of qh / mk heads; query row h sees
// cgrt__mla_row_len(len, cap, h / (qh / mk), mk, 1) tokens, len being the request's. A row
// without tokens in a tile, a segment or the request keeps its maximum at -inf
// (exponents taken against 0), its sum 0, and leaves output 0 / LSE -inf.
template <int BLOCK>
__device__ __forceinline__ void split_m64_ws(CGRT_WG_PARAMS) {
#if CGRT_WG_HAS_WGMMA
  (void)kv_scale; // bf16 cache
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned shift = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  unsigned char *sm = smem_raw + shift;
  const uint32_t s_q = smem_addr(sm);
  const uint32_t s_kv = s_q + OFF_KV;
  float *s_m = reinterpret_cast<float *>(sm + OFF_M);
  float *s_sc = reinterpret_cast<float *>(sm + OFF_SC);
  float *s_red = reinterpret_cast<float *>(sm + OFF_RED);
  const uint32_t bar_full = s_q + OFF_BAR, bar_empty = bar_full + 8 * RING;
  const uint32_t bar_qfull = bar_full + 16 * RING, bar_qempty = bar_qfull + 8;
  int *s_meta = reinterpret_cast<int *>(sm + OFF_META);
  int *s_wsum = reinterpret_cast<int *>(sm + OFF_WSUM);
  int *s_last = reinterpret_cast<int *>(sm + OFF_LAST);

  // Programmatic dependent launch: nothing above reads what the schedule kernel writes.
  cgrt_mla::pdl_wait();

  // The warpgroup index through a shuffle: ptxas then knows it is warp-uniform, and the
  // branches on it are not divergent paths (which would serialize the wgmma pipeline).
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int g = blockIdx.x, p = blockIdx.y, G = gridDim.x;
  if (tid == 0) {
#pragma unroll
    for (int i = 0; i < RING; i++) {
      mbar_init(bar_full + 8 * i, 128); // the producer threads' cp.async arrivals
      mbar_init(bar_empty + 8 * i, NC);
    }
    mbar_init(bar_qfull, 128);
    mbar_init(bar_qempty, NC);
  }
  __syncthreads(); // the mbarriers initialised (the fused schedule below may not sync)

  // Fused schedule (seq_lens != nullptr, rows <= NT): as cgrt_mla_schedule computes it.
  const int *mb = cgrt_mla::fused_schedule<NT>(s_meta, s_wsum, seq_lens, meta, rows, bl, cap, P, min_tiles,
                                                causal);
  const int *row_len = mb;
  const int *ts = mb + rows;
  const int h_begin = g * hg;
  const int h_end = min(h_begin + hg, qh);

  const cgrt_mla::CtaRange cr = cgrt_mla::cta_range<NT>(mb, rows, out, lse, qh, h_begin, h_end, p, P);
  if (!cr.work) return; // the whole CTA
  const int T = cr.T, Pe = cr.Pe, b1 = cr.b1;

  if (wg == 2) {
    // ---- Producer: Q and the KV ring, in the consumers' order of segments and tiles.
    setmaxnreg_dec<PRODUCER_REGS>();
    const int pt = tid - NC;
    const int ps_shift = __ffs(ps) - 1;
    uint32_t cnt = 0; // tiles issued by this CTA: stage cnt % RING, its use cnt / RING
    int seg = 0;
    for (int r = cr.lo, t = cr.b0; t < b1; r++) {
      cgrt_mla::Segment sg;
      if (!cgrt_mla::next_segment(ts, row_len, r, t, b1, T, Pe, sg)) continue;
      const int n = (min(sg.jb * TN, sg.len) + kTS - 1) / kTS - sg.ja;
      const int *btr = bt + (long long)(r / bl) * mbps;
      // This thread's token row of every tile and its page, one tile ahead.
      const int tok = pt >> 2, q4 = pt & 3;
      auto page_of = [&](int j) {
        const int tk = (sg.ja + j) * kTS + tok;
        return tk < sg.len ? __ldg(btr + (tk >> ps_shift)) : -1;
      };
      int pg = page_of(0);
      // Q of the 64 rows (rows past h_end zero): row pt / 2, chunks pt % 2 + 2 i.
      if (seg > 0) mbar_wait(bar_qempty, (seg - 1) & 1);
      {
        const int hr = pt >> 1, c0 = pt & 1;
        const bool ok = h_begin + hr < h_end;
        const bf16 *src = ok ? q + ((long long)r * qh + h_begin + hr) * D + c0 * 8 : q;
        const uint32_t dst = s_q + hr * 128;
#pragma unroll
        for (int i = 0; i < 36; i++)
          cp_async16(dst + (i >> 2) * kQBlock + (((c0 + 2 * (i & 3)) ^ (hr & 7)) << 4), src + 16 * i, ok ? 16 : 0);
        mbar_arrive_cp_async(bar_qfull);
      }
      for (int j = 0; j < n; j++, cnt++) {
        const uint32_t slot = cnt % RING;
        if (cnt >= RING) mbar_wait(bar_empty + 8 * slot, ((cnt / RING) - 1) & 1);
        const int tk = (sg.ja + j) * kTS + tok;
        const bool ok = pg >= 0;
        const bf16 *src = ok ? kv + ((long long)pg * ps + (tk & (ps - 1))) * D + q4 * 8 : kv;
        const uint32_t dst = s_kv + slot * kStageBytes + tok * 128;
        // Chunk q4 + 4 i of the token: column block i / 2, chunk q4 + 4 (i & 1) in it.
#pragma unroll
        for (int i = 0; i < 18; i++)
          cp_async16(dst + (i >> 1) * kKBlock + (((q4 + 4 * (i & 1)) ^ (tok & 7)) << 4), src + 32 * i, ok ? 16 : 0);
        mbar_arrive_cp_async(bar_full + 8 * slot);
        if (j + 1 < n) pg = page_of(j + 1);
      }
      seg++;
    }
  } else {
    // ---- Consumers.
    setmaxnreg_inc<CONSUMER_REGS>();
    const int w = wg, warp = tid >> 5, lane = tid & 31, wi = warp & 3;
    const int gq = lane >> 2, t4 = lane & 3;
    const float sl2 = scale * 1.4426950408889634f;
    // Accumulator rows of this thread: tile rows 16 wi + gq and + 8.
    const int tr0 = 16 * wi + gq, tr1 = tr0 + 8;
    const int hrow0 = h_begin + tr0, hrow1 = h_begin + tr1;
    const bool v0 = hrow0 < h_end, v1 = hrow1 < h_end;
    // P rows tr0 / tr1 in a tile's rope columns (64-byte swizzle), chunk j: + (j ^ sw) << 4.
    const uint32_t p0 = tr0 * 64 + 4 * t4, p1 = tr1 * 64 + 4 * t4;
    const int sw0 = (tr0 >> 1) & 3, sw1 = (tr1 >> 1) & 3;
    uint32_t cnt = 0;
    int seg = 0;
    for (int r = cr.lo, t = cr.b0; t < b1; r++) {
      cgrt_mla::Segment sg;
      if (!cgrt_mla::next_segment(ts, row_len, r, t, b1, T, Pe, sg)) continue;
      const int n = (min(sg.jb * TN, sg.len) + kTS - 1) / kTS - sg.ja;
      int len0 = sg.len, len1 = sg.len;
      if (BLOCK) {
        const int per = qh / mk;
        len0 = cgrt__mla_row_len(sg.len, cap, min(hrow0, qh - 1) / per, mk, 1);
        len1 = cgrt__mla_row_len(sg.len, cap, min(hrow1, qh - 1) / per, mk, 1);
      }
      const uint32_t base = cnt;
      cnt += n;
      auto stage = [&](int k) { return s_kv + ((base + k) % RING) * kStageBytes; };
      auto wait_full = [&](int k) {
        mbar_wait(bar_full + 8 * ((base + k) % RING), ((base + k) / RING) & 1);
        fence_proxy_async(); // cp.async (generic proxy) writes before wgmma reads
      };
      auto release = [&](int k) { mbar_arrive(bar_empty + 8 * ((base + k) % RING)); };

      mbar_wait(bar_qfull, seg & 1);
      fence_proxy_async();
      seg++;
      float o[128];
#pragma unroll
      for (int i = 0; i < 128; i++) o[i] = 0.f;
      fence_regs(o);
      float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
      // Every wgmma this warpgroup issues is retired at the end of each step pair below
      // (wait_group 0 where control flow joins): ptxas then sees no accumulator in
      // flight across a join and keeps the products asynchronous inside the pair.
      float s[16];
      if (w < n) {
        wait_full(w);
        mma_qk32_issue(s, s_q, stage(w));
        wg_wait<0>();
        fence_regs(s);
      } else {
        mbar_arrive(bar_qempty); // no tile of this warpgroup reads Q
      }

      // Tile k of this warpgroup, its S complete: softmax, hand-off, P . V issued (after
      // the one of tile k - 1 completed: released), S of tile k + 2 issued.
      auto own_step = [&](int k) {
        const uint32_t sk = stage(k), sp = sk + 8 * kKBlock; // P: the tile's rope columns
        const int par = (k & 1) * 64;
        if (k + 2 >= n) mbar_arrive(bar_qempty); // this warpgroup's last S done: Q free
        float mx0, mx1;
        mask_max(s, (sg.ja + k) * kTS + 2 * t4, len0, len1, sl2, mx0, mx1);
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        // Non-causal tiles always hold a token below len: the maximum is finite.
        const float me0 = BLOCK && mn0 == -INFINITY ? 0.f : mn0;
        const float me1 = BLOCK && mn1 == -INFINITY ? 0.f : mn1;
        const float sc0 = ex2(m0 - me0), sc1 = ex2(m1 - me1);
        m0 = mn0;
        m1 = mn1;
        if (t4 == 0) {
          s_m[par + tr0] = mn0;
          s_m[par + tr1] = mn1;
          s_sc[par + tr0] = sc0;
          s_sc[par + tr1] = sc1;
        }
        // P = exp2(S - m): m64.cuh's exp_rows with each pair stored as it is made (one
        // loop: split in two it compiles to other sm_90a code than the one measured)
        float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          s[4 * j + 0] = ex2(s[4 * j + 0] - me0);
          s[4 * j + 1] = ex2(s[4 * j + 1] - me0);
          s[4 * j + 2] = ex2(s[4 * j + 2] - me1);
          s[4 * j + 3] = ex2(s[4 * j + 3] - me1);
          rs0 += s[4 * j + 0] + s[4 * j + 1];
          rs1 += s[4 * j + 2] + s[4 * j + 3];
          st_shared_u32(sp + p0 + ((j ^ sw0) << 4), pack_bf16(s[4 * j + 0], s[4 * j + 1]));
          st_shared_u32(sp + p1 + ((j ^ sw1) << 4), pack_bf16(s[4 * j + 2], s[4 * j + 3]));
        }
        fence_proxy_async(); // P (generic proxy) before both warpgroups' wgmma read it
        bar_named(1, NC);    // hand-off of tile k: P, maxima, factors
        wg_wait<0>();        // P . V of tile k - 1 complete
        fence_regs(o);
        if (k > 0) release(k - 1);
        l0 = l0 * sc0 + rs0;
        l1 = l1 * sc1 + rs1;
        scale_rows(o, sc0, sc1);
        mma_pv_sw64_issue(o, sp, sk + w * 4 * kKBlock);
        if (k + 2 < n) {
          wait_full(k + 2);
          mma_qk32_issue(s, s_q, stage(k + 2));
        }
      };
      // Tile k of the other warpgroup (nothing of this one in flight): its hand-off,
      // P . V issued.
      auto other_step = [&](int k) {
        const uint32_t sk = stage(k), sp = sk + 8 * kKBlock;
        const int par = (k & 1) * 64;
        bar_named(1, NC);
        const float sc0 = s_sc[par + tr0], sc1 = s_sc[par + tr1];
        m0 = s_m[par + tr0];
        m1 = s_m[par + tr1];
        l0 *= sc0;
        l1 *= sc1;
        scale_rows(o, sc0, sc1);
        mma_pv_sw64_issue(o, sp, sk + w * 4 * kKBlock);
      };
      auto retire = [&](int k) { // every product of this warpgroup complete; tile k released
        wg_wait<0>();
        fence_regs(o);
        fence_regs(s);
        release(k);
      };
      // Tiles in order; each warpgroup alternates own and other tiles.
      int k = 0;
      if (w == 0) {
        own_step(0);
        retire(0);
        k = 1;
      }
      while (k < n) {
        other_step(k);
        if (k + 1 >= n) {
          retire(k);
          break;
        }
        own_step(k + 1);
        retire(k + 1);
        k += 2;
      }

      // Row sums: this thread's quad, then the other warpgroup's tiles.
      quad_sum(l0, l1);
      if (t4 == 0) {
        s_red[w * 64 + tr0] = l0;
        s_red[w * 64 + tr1] = l1;
      }
      bar_named(2, NC);
      l0 += s_red[(w ^ 1) * 64 + tr0];
      l1 += s_red[(w ^ 1) * 64 + tr1];
      cgrt_m64::store_rows<BLOCK>(o, l0, l1, m0, m1, w, t4, hrow0, hrow1, v0, v1, r, qh, sg.nsplit, p, out, lse,
                                  part_o, part_lse);
      if (sg.nsplit > 1 && counters != nullptr)
        cgrt_mla::last_cta_merge<NC, 3>(counters, part_o, part_lse, out, lse, r, qh, h_begin, h_end, g, G,
                                        r + sg.pf, sg.nsplit, s_last);
    }
  }
  __syncthreads(); // the producer stays to the end
#else
  cgrt_m64::split_m64_serial<BLOCK, NT>(CGRT_WG_ARGS);
#endif
}

} // namespace

// 17 to 64 query rows per CTA: warp-specialised (sm_90a), the serial body elsewhere.
extern "C" __global__ void __launch_bounds__(384, 1) cgrt_mla_split_m64_ws(CGRT_WG_PARAMS) {
  split_m64_ws<0>(CGRT_WG_ARGS);
}
// The same for causal verify blocks run together: 17 to 64 query rows (block rows x
// heads) of one request per CTA, per-row lengths (BLOCK above).
extern "C" __global__ void __launch_bounds__(384, 1) cgrt_mla_split_m64_ws_causal(CGRT_WG_PARAMS) {
  split_m64_ws<1>(CGRT_WG_ARGS);
}
