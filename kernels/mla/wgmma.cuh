/* Building blocks of the wgmma MLA split kernels (kernels/mla/split_t64.cu,
 * kernels/mla/m64.cuh, split_m64_ws.cu): the shared-memory layout of Q, the KV stages and P, the
 * wgmma descriptors, and the tile products with an mma.sync fallback over the same layout.
 *
 * Layout (all three operands): a matrix of R rows (heads or tokens) x C bf16 columns is
 * stored as C / 64 column blocks of R rows x 128 bytes; inside a block, 16-byte chunk j
 * of row r sits at r * 128 + ((j ^ (r & 7)) << 4) (the 128-byte swizzle of wgmma, every
 * block 1024-byte aligned). As a K-major operand (rows = M or N, columns = K) this is
 * the canonical 128B-swizzled layout with SBO = 1024; as an MN-major operand (rows = K
 * tokens, columns = N) it is the canonical MN-major 128B layout with LBO = the column
 * block stride, SBO = 1024.
 *
 * wgmma exists only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL). The fatbin also embeds
 * compute_90 PTX; there the same functions run on mma.sync.m16n8k16 + ldmatrix over the
 * same layout, with the same accumulator layout (each warp of the warpgroup holds 16
 * rows; per n8 block j: d[4j..4j+1] = row gq, columns 8j + 2 t4 + {0,1}; d[4j+2..3] =
 * row gq + 8). */
#ifndef CGRT_KERNELS_MLA_WGMMA_CUH
#define CGRT_KERNELS_MLA_WGMMA_CUH

#include <stdint.h>

#include "kernels/mla/split.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CGRT_WG_HAS_WGMMA 1
#else
#define CGRT_WG_HAS_WGMMA 0
#endif

// Parameters of every split kernel, in the order kernels/mla/plan.c passes them (one
// launch serves all of them; the C reference reads them in this order too). causal: the
// rows' lengths are causal over bl (cgrt__mla_row_len); mk > 0 (the kernels that run a
// block's rows together, kernels/mla/split_m64_ws.cu): each "row" is a request whose
// qh query rows are mk block rows of qh / mk heads, block row i seeing
// cgrt__mla_row_len(len, cap, i, mk, 1) tokens; 0 elsewhere. kv_scale: the kernels of an
// FP8 e4m3 cache (kv holds bytes, value = e4m3 x kv_scale); the bf16 kernels ignore it.
#define CGRT_WG_PARAMS                                                                                     \
  const bf16 *__restrict__ q, const bf16 *__restrict__ kv, const int *__restrict__ bt,                     \
      const int *__restrict__ meta, bf16 *__restrict__ out, float *__restrict__ lse,                       \
      float *__restrict__ part_o, float *__restrict__ part_lse, unsigned *__restrict__ counters, int rows,  \
      int qh, int hg, int P, int mbps, int ps, int bl, float scale, const int *__restrict__ seq_lens,       \
      int cap, int min_tiles, int causal, int mk, float kv_scale
#define CGRT_WG_ARGS                                                                                        \
  q, kv, bt, meta, out, lse, part_o, part_lse, counters, rows, qh, hg, P, mbps, ps, bl, scale, seq_lens, cap, \
      min_tiles, causal, mk, kv_scale

namespace cgrt_wg {

constexpr int kD = 576;                  // Q / K width
constexpr int kDV = 512;                 // V width
constexpr int kTS = 32;                  // tokens per KV stage
constexpr int kQBlock = 64 * 128;        // one column block of Q (64 heads x 128 B)
constexpr int kQBytes = 9 * kQBlock;     // 73728
constexpr int kKBlock = kTS * 128;       // one column block of a KV stage
constexpr int kStageBytes = 9 * kKBlock; // 36864
constexpr int kPBytes = 64 * 128;        // P: 64 heads x 32 tokens (first 64 B of each row)

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
// Byte offset of chunk j (0..7) of row r inside a column block.
__device__ __forceinline__ uint32_t swz(int r, int j) { return (uint32_t)(r * 128 + ((j ^ (r & 7)) << 4)); }

using cgrt_mla::cp_async16;
using cgrt_mla::cp_commit;
using cgrt_mla::cp_wait;
// Generic-proxy writes to shared memory (cp.async, st.shared) before async-proxy reads
// (wgmma): each writing thread fences, then a barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if CGRT_WG_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bar_named(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
// Keeps the compiler from moving accesses of an accumulator across wgmma issue / wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#if CGRT_WG_HAS_WGMMA
// Shared-memory matrix descriptor: start address, leading / stride byte offsets, 128B swizzle.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// D[64 x 16] (+)= A[64 x 16] . B[16 x 16], A and B from shared memory (descriptors), B
// K-major; A K-major (TA = 0) or MN-major (TA = 1: the 64 rows of A are the contiguous
// columns of a shared-memory block; kernels/mla/split_t64.cu, O^T += V^T . P^T).
// scale_d = 0 overwrites D.
template <int TA>
__device__ __forceinline__ void wgmma_m64n16(float (&d)[8], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7"
      "}, %8, %9, p, 1, 1, %11, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA));
}
__device__ __forceinline__ void wgmma_m64n16_kk(float (&d)[8], uint64_t da, uint64_t db, int scale_d) {
  wgmma_m64n16<0>(d, da, db, scale_d);
}
__device__ __forceinline__ void wgmma_m64n16_mk(float (&d)[8], uint64_t da, uint64_t db, int scale_d) {
  wgmma_m64n16<1>(d, da, db, scale_d);
}

// D[64 x 256] (+)= A[64 x 16] . B[16 x 256], A and B from shared memory (descriptors);
// B MN-major (transposed). scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n256_kmn(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
      "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
      "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(scale_d));
}

// The same descriptor with the 64-byte swizzle (rows of 64 B, 8-row atoms of 512 B: chunk
// j of row r at r * 64 + ((j ^ ((r >> 1) & 3)) << 4)); kernels/mla/split_m64_ws.cu keeps P
// (64 rows x 32 tokens) so in 4 KB.
__device__ __forceinline__ uint64_t make_desc_sw64(uint32_t addr, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (2ull << 62);
}

// D[64 x 32] (+)= A[64 x 16] . B[16 x 32], both K-major from shared memory.
__device__ __forceinline__ void wgmma_m64n32_kk(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d));
}

// D[64 x 32] (+)= A[64 x 16] . B[16 x 32], A MN-major (the 64 rows of A are the
// contiguous columns of a shared-memory block), B K-major (kernels/mla/split_t64.cu with
// 32 query rows: O^T += V^T . P^T).
__device__ __forceinline__ void wgmma_m64n32_mk(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
      "}, %16, %17, p, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d));
}

// Registers per thread of the calling warpgroup (sm_90a; every thread of it calls).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// mbarriers in shared memory (addr: a shared address, 8-byte aligned).
__device__ __forceinline__ void mbar_init(uint32_t addr, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
// Arrives on the barrier when every cp.async this thread issued before has landed,
// without raising the expected count (the barrier counts these arrivals at init).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr) : "memory");
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t addr, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

// The k loops of the products, one commit group each (callers below).
// S[64 x N] = A[64 x 576] . B[N x 576]^T, N = 16 or 32, both K-major: da0 / db0 describe
// the first k step; the 576 columns are 9 blocks of kQBlock (A) and kKBlock (B) bytes.
template <int N>
__device__ __forceinline__ void wgmma_qk_loop(float (&s)[N / 2], uint64_t da0, uint64_t db0) {
  static_assert(N == 16 || N == 32, "S tiles of 16 or 32 tokens");
  wg_fence();
#pragma unroll
  for (int ks = 0; ks < kD / 16; ks++) {
    const uint64_t da = da0 + (uint64_t)((((ks >> 2) * kQBlock) + (ks & 3) * 32) >> 4);
    const uint64_t db = db0 + (uint64_t)((((ks >> 2) * kKBlock) + (ks & 3) * 32) >> 4);
    // The first k step overwrites S (scale_d = 0): no other instruction defines it.
    if constexpr (N == 16)
      wgmma_m64n16_kk(s, da, db, ks > 0);
    else
      wgmma_m64n32_kk(s, da, db, ks > 0);
  }
  wg_commit();
  fence_regs(s);
}
// O[64 x 256] += P[64 x 32] . V[32 x 256]: da0 describes P's first 16 tokens, db0 the V
// column blocks of a KV stage (MN-major).
__device__ __forceinline__ void wgmma_pv_loop(float (&o)[128], uint64_t da0, uint64_t db0) {
  fence_regs(o);
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < kTS / 16; kk++)
    wgmma_m64n256_kmn(o, da0 + (uint64_t)((kk * 32) >> 4), db0 + (uint64_t)((kk * 16 * 128) >> 4), 1);
  wg_commit();
  fence_regs(o);
}
#else
using cgrt_mla::ldsm_x4;
using cgrt_mla::ldsm_x4_t;
using cgrt_mla::mma16816;
#endif

#if !CGRT_WG_HAS_WGMMA
// The mma.sync form of D[64 x 16] = A[64 x 576] . B[16 x 576]^T for one warpgroup (each
// warp its 16 rows of A), both operands K-major in the layout above; a(cb) / b(cb): the
// shared address of column block cb of A (its 64 rows) and of B (its 16 rows).
template <class FA, class FB>
__device__ __forceinline__ void mma_kk_sync(float (&s)[8], FA a, FB b) {
#pragma unroll
  for (int i = 0; i < 8; i++) s[i] = 0.f;
  const int lane = threadIdx.x & 31, wi = (threadIdx.x >> 5) & 3;
  const int ar = 16 * wi + (lane & 15), ac = lane >> 4;                 // A: row, chunk offset
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1; // B: row, chunk offset
#pragma unroll 4
  for (int ks = 0; ks < kD / 16; ks++) {
    const int cb = ks >> 2, c0 = (ks & 3) * 2;
    uint32_t a4[4], b0, b1, b2, b3;
    ldsm_x4(a(cb) + swz(ar, c0 + ac), a4[0], a4[1], a4[2], a4[3]);
    ldsm_x4(b(cb) + swz(br, c0 + bc), b0, b1, b2, b3);
    mma16816(s, a4, b0, b1);
    mma16816(s + 4, a4, b2, b3);
  }
}
#endif

// S[64 x 16] = Q[64 x 576] . K[16 x 576]^T for one warpgroup: q_s = Q (9 blocks of
// kQBlock), k_s = the first of the 16 token rows inside a KV stage (blocks kKBlock apart,
// a multiple of 8 rows from the block start). mma_qk_issue starts the product (wgmma:
// asynchronously, one commit group), mma_qk_wait waits for it (the fallback computes
// everything in mma_qk_issue).
__device__ __forceinline__ void mma_qk_issue(float (&s)[8], uint32_t q_s, uint32_t k_s) {
#if CGRT_WG_HAS_WGMMA
  wgmma_qk_loop<16>(s, make_desc(q_s, 16, 1024), make_desc(k_s, 16, 1024));
#else
  mma_kk_sync(s, [&](int cb) { return q_s + cb * kQBlock; }, [&](int cb) { return k_s + cb * kKBlock; });
#endif
}
__device__ __forceinline__ void mma_qk_wait(float (&s)[8]) {
#if CGRT_WG_HAS_WGMMA
  wg_wait<0>();
  fence_regs(s);
#else
  (void)s;
#endif
}

// O[64 x 256] += P[64 x 32] . V[32 x 256] for one warpgroup: p_s = P (K-major, 64 rows
// of 128 B, tokens in the first 64 B), v_s = the first of 4 column blocks of a KV stage.
// mma_pv_issue starts it (wgmma: one commit group; O must not be touched until
// mma_pv_wait or a wg_wait that covers the group), mma_pv does both.
__device__ __forceinline__ void mma_pv_issue(float (&o)[128], uint32_t p_s, uint32_t v_s) {
#if CGRT_WG_HAS_WGMMA
  wgmma_pv_loop(o, make_desc(p_s, 16, 1024), make_desc(v_s, kKBlock, 1024));
#else
  const int lane = threadIdx.x & 31, wi = (threadIdx.x >> 5) & 3;
  const int ar = 16 * wi + (lane & 15), ac = lane >> 4;
  const int vt = ((lane >> 3) & 1) * 8 + (lane & 7), vc = lane >> 4;
#pragma unroll
  for (int kk = 0; kk < kTS / 16; kk++) {
    uint32_t a[4];
    ldsm_x4(p_s + swz(ar, kk * 2 + ac), a[0], a[1], a[2], a[3]);
    const int tok = kk * 16 + vt;
#pragma unroll
    for (int dp = 0; dp < 16; dp++) {
      uint32_t b0, b1, b2, b3;
      ldsm_x4_t(v_s + (dp >> 2) * kKBlock + swz(tok, (dp & 3) * 2 + vc), b0, b1, b2, b3);
      mma16816(o + 8 * dp, a, b0, b1);
      mma16816(o + 8 * dp + 4, a, b2, b3);
    }
  }
#endif
}
#if CGRT_WG_HAS_WGMMA
// wgmma only (kernels/mla/split_m64_ws.cu, whose fallback is kernels/mla/m64.cuh):
// S[64 x 32] = Q[64 x 576] . K[32 x 576]^T, q_s = Q (9 blocks of kQBlock), k_s = a KV stage
// (blocks kKBlock apart); one commit group.
__device__ __forceinline__ void mma_qk32_issue(float (&s)[16], uint32_t q_s, uint32_t k_s) {
  wgmma_qk_loop<32>(s, make_desc(q_s, 16, 1024), make_desc(k_s, 16, 1024));
}
// O[64 x 256] += P[64 x 32] . V[32 x 256]: P K-major with the 64-byte swizzle (4 KB at
// p_s), v_s the first of 4 column blocks of a KV stage (as mma_pv_issue); one commit group.
__device__ __forceinline__ void mma_pv_sw64_issue(float (&o)[128], uint32_t p_s, uint32_t v_s) {
  wgmma_pv_loop(o, make_desc_sw64(p_s, 512), make_desc(v_s, kKBlock, 1024));
}
#endif

// Waits for every wgmma group of this warpgroup (no-op on the fallback) and pins d.
template <int N>
__device__ __forceinline__ void mma_wait_all(float (&d)[N]) {
#if CGRT_WG_HAS_WGMMA
  wg_wait<0>();
#endif
  fence_regs(d);
}
__device__ __forceinline__ void mma_pv(float (&o)[128], uint32_t p_s, uint32_t v_s) {
  mma_pv_issue(o, p_s, v_s);
  mma_wait_all(o);
}

}  // namespace cgrt_wg

#endif
