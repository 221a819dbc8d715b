// cgrt_mla_split_t64_n64_fp8 and _n64_fp8_causal (kernels/mla/split_t64_n64_fp8.cu): an FP8
// e4m3 cache with 17..64 query rows per CTA (two warpgroups over one f16 tile widened in
// halves from an e4m3 ring) through the public API against the fp32 host reference over
// the dequantized cache, within the bounds of the other FP8 tests (mla_harness.h): 32, 48,
// 64 heads (one head group; 32: warpgroup 1 runs no products) and 128 (two groups of 64),
// page sizes 16 / 32 / 64, lengths 0..5000 with NaN bytes in the cache past each length,
// tile and range edges, padding rows, rows past the kernel's 256 threads, a block's rows
// together (16 heads x k 2 / 4 / 8, 32 heads x k 2, causal and not), the plan's choice of
// kernel, a cache past 2^31 bytes (GPU), the same bits on every launch. On the emulation
// (CI) the C reference runs under the kernel's name; with CGRT_DRIVER=cuda the kernel (or
// its mma.sync fallback under CUDA_FORCE_PTX_JIT=1).
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaT64N64Fp8 : public Harness {
 protected:
  unsigned case_seed(const Case &c) const override {
    return 8648u + c.heads * 11 + c.page_size + (int)c.combine + (int)c.lens.size() + 5 * c.block_len + c.causal;
  }
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    EXPECT_EQ(std::string(info.split_kernel), expect_);
    if (groups_ > 0) EXPECT_EQ(info.head_groups, groups_);
    EXPECT_EQ(info.kv_shared, shared_);
  }
  Case fp8_case(int heads, float scale = 0.37f) {
    Case c;
    c.fp8 = 1;
    c.kv_scale = scale;
    c.heads = heads;
    c.nan_past = 1;
    c.launches = 3;  // the same bits on every launch
    expect_ = kSplitFp8N64;
    groups_ = heads > 64 ? (heads + 63) / 64 : 1;
    shared_ = 0;
    return c;
  }
  std::string expect_;
  int groups_ = 0, shared_ = 0;
};

// A plan of an FP8 cache for heads x block_len (causal or not) and its info.
cgrt_mla_plan_info fp8_plan_info(cgrt_runtime *rt, int heads, int block_len, int causal) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  o.max_num_seqs = 8;
  o.heads = heads;
  o.block_len = block_len;
  o.causal = causal;
  o.max_model_len = 4096;
  o.kv_dtype = CGRT_MLA_KV_FP8_E4M3;
  o.kv_scale = 0.5f;
  cgrt_mla_plan *p = nullptr;
  cgrt_mla_plan_info info{};
  info.size = sizeof info;
  EXPECT_EQ(cgrt_mla_plan_create(rt, &o, &p), CGRT_SUCCESS) << cgrt_last_error();
  if (!p) return info;
  EXPECT_EQ(cgrt_mla_plan_get_info(p, &info), CGRT_SUCCESS);
  cgrt_mla_plan_destroy(p);
  return info;
}

// The plan's choice: 17..64 query rows per CTA of an FP8 cache run this kernel, in one
// head group (32, 48, 64 heads; 24: the fast path of 24 rows) or two (128); 16 and the
// generic 96 stay on the 16-row kernel; a block's rows run together where the bf16 plan
// runs them together (16 heads x k 2 / 4 / 8, 32 heads x k 2), causal ones on _causal.
TEST_F(MlaT64N64Fp8, ThePlanPicksIt) {
  struct P {
    int heads, block_len, causal;
    const char *kernel;
    int hg, groups, shared;
  };
  const P cases[] = {
      {32, 1, 0, kSplitFp8N64, 32, 1, 0},        {48, 1, 0, kSplitFp8N64, 48, 1, 0},
      {64, 1, 0, kSplitFp8N64, 64, 1, 0},        {128, 1, 0, kSplitFp8N64, 64, 2, 0},
      {24, 1, 0, kSplitFp8N64, 24, 1, 0},        {16, 1, 0, kSplitFp8, 16, 1, 0},
      {96, 1, 0, kSplitFp8, 16, 6, 0},           {16, 2, 0, kSplitFp8N64, 32, 1, 1},
      {16, 4, 0, kSplitFp8N64, 64, 1, 1},        {16, 4, 1, kSplitFp8N64Causal, 64, 1, 1},
      {16, 8, 1, kSplitFp8N64Causal, 64, 2, 1},  {32, 2, 0, kSplitFp8N64, 64, 1, 1},
      {64, 2, 0, kSplitFp8N64, 64, 1, 0},        {8, 2, 0, kSplitFp8, 8, 1, 0},
  };
  for (const P &c : cases) {
    SCOPED_TRACE(std::to_string(c.heads) + " heads, k " + std::to_string(c.block_len) + (c.causal ? " causal" : ""));
    const cgrt_mla_plan_info info = fp8_plan_info(rt_, c.heads, c.block_len, c.causal);
    ASSERT_NE(info.split_kernel, nullptr);
    EXPECT_EQ(std::string(info.split_kernel), c.kernel);
    EXPECT_EQ(info.heads_per_cta, c.hg);
    EXPECT_EQ(info.head_groups, c.groups);
    EXPECT_EQ(info.kv_shared, c.shared);
  }
}

// One small step a kind (for compute-sanitizer runs): 64 and 32 heads, both merges, a row
// split across ranges, a padding row, a length past a tile bound.
TEST_F(MlaT64N64Fp8, Small) {
  for (int heads : {64, 32})
    for (cgrt_mla_combine cb : kBoth) {
      Case c = fp8_case(heads);
      c.reqs = 3;
      c.lens = {0, 65, emulated_ ? 300 : 1500};
      c.combine = cb;
      c.launches = 1;
      check(c, std::to_string(heads) + (cb ? " heads small counters" : " heads small workspace"));
    }
}

// Both merges at 64 heads, the merges in turn at 48, 32 and 128 (the host reference of
// the GPU cases takes most of the time).
TEST_F(MlaT64N64Fp8, HeadsPageSizesLengths) {
  int i = 0;
  for (int heads : {64, 48, 32, 128})
    for (int ps : {16, 32, 64})
      for (cgrt_mla_combine cb : kBoth) {
        if (heads != 64 && (int)cb != (ps / 16 + heads / 16) % 2) continue;
        Case c = fp8_case(heads, i++ % 2 ? 0.37f : 1.9f);
        c.page_size = ps;
        c.lens = {0, 1, 63, 65, 130, emulated_ ? 700 : 5000, 64, emulated_ ? 257 : 4097};
        if (heads == 128) c.lens = {0, 1, 65, emulated_ ? 300 : 2500, 64};
        c.reqs = (int)c.lens.size();
        c.combine = cb;
        c.programmatic_launch = i % 3;  // 2: the early reads of seq_lens and the block table
        check(c, std::to_string(heads) + " heads, page size " + std::to_string(ps) +
                     (cb ? " counters" : " workspace") + ", programmatic_launch " + std::to_string(i % 3));
      }
}

TEST_F(MlaT64N64Fp8, TileAndRangeEdges) {
  Case c = fp8_case(64);
  c.launches = 2;
  check_tile_edges(c);
}

// Long rows split many ways, all-padding steps, and more rows than the kernel's 256
// threads (the schedule kernel runs first).
TEST_F(MlaT64N64Fp8, LongRowsPaddingRowsPastBlockSize) {
  std::mt19937 rng(23);
  for (cgrt_mla_combine cb : kBoth) {
    Case c = fp8_case(64);
    c.reqs = 4;
    c.lens = {emulated_ ? 3000 : 16384, 1, 0, emulated_ ? 900 : 9001};
    c.combine = cb;
    check(c, std::string("long rows") + (cb ? " counters" : " workspace"));
    c.lens = {0, 0, 0, 0};
    check(c, std::string("all padding") + (cb ? " counters" : " workspace"));
    c = fp8_case(emulated_ ? 32 : 64);
    c.reqs = 300;
    c.page_size = 16;
    c.lens = mixed(c.reqs, emulated_ ? 40 : 200, rng, true);
    c.combine = cb;
    c.launches = 2;
    check(c, std::string("300 rows") + (cb ? " counters" : " workspace"));
  }
}

// A block's rows together: 16 heads x k 2 (32 query rows: warpgroup 1 idle) / 4 (64) / 8
// (two groups of 64), 32 heads x k 2, causal (per-row lengths, rows shorter than the
// block, 0 tokens) and not, page sizes 16 / 32 / 64 (k 4), the merges in turn.
TEST_F(MlaT64N64Fp8, BlocksTogetherCausalAndNot) {
  std::mt19937 rng(29);
  struct B {
    int heads, k;
  };
  for (const B b : {B{16, 4}, B{16, 2}, B{32, 2}, B{16, 8}})
    for (int causal : {0, 1})
      for (int ps : {16, 32, 64})
        for (cgrt_mla_combine cb : kBoth) {
          if (b.k != 4 && ps != (b.k == 2 ? 32 : 64)) continue;
          if ((int)cb != (causal + ps / 16 + b.heads / 16) % 2) continue;
          Case c = fp8_case(b.heads);
          expect_ = causal ? kSplitFp8N64Causal : kSplitFp8N64;
          groups_ = (b.heads * b.k + 63) / 64;
          shared_ = 1;
          c.block_len = b.k;
          c.causal = causal;
          c.reqs = emulated_ ? 5 : 7;
          c.page_size = ps;
          c.lens = mixed(c.reqs, emulated_ ? 300 : 4000, rng, true);
          c.lens[1] = 1;  // shorter than the block: causal rows of 0 tokens
          c.lens[2] = 4;
          c.lens[3] = 0;
          c.lens[4] = 66;  // causal rows end on both sides of a tile bound
          c.combine = cb;
          check(c, std::string(causal ? "causal " : "") + std::to_string(b.heads) + " heads k " +
                       std::to_string(b.k) + ", page size " + std::to_string(ps) + (cb ? " counters" : " workspace"));
        }
}

TEST_F(MlaT64N64Fp8, KvCachePast2To31Bytes) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (pages past 2^31 e4m3 bytes)";
  expect_ = kSplitFp8N64;
  groups_ = 1;
  shared_ = 0;
  check_kv_past_2to31(64, 0, 1);
}

}  // namespace
