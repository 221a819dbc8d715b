// cgrt_mla_split_t64_fp8 and cgrt_mla_split_t64_row1_fp8 (kernels/mla/split_t64_fp8.cu):
// an FP8 e4m3 latent cache (cgrt_mla_options.kv_dtype CGRT_MLA_KV_FP8_E4M3, value =
// e4m3 x kv_scale) through the public API against the fp32 host reference over the
// dequantized cache, within the bounds the bf16 kernels meet (mla_harness.h): head
// groups of 1..16 and the generic path (and the head counts that the plan gives the
// 17..64-row FP8 kernel, tests/mla/mla_t64_n64_fp8_test.cc), page sizes 16/32/64, ragged and zero lengths,
// block rows (apart) and causal rows, DCP, both strategies and AUTO, one-row steps, the
// same bits on every launch, and the options' statuses. On the emulation (CI) the C
// reference runs under the kernel's name; with CGRT_DRIVER=cuda on an H200 the kernel.
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaFp8 : public SplitHarness {
 protected:
  void SetUp() override { start(kSplitFp8); }
  // 17..64 query rows per CTA run cgrt_mla_split_t64_n64_fp8 (causal blocks together: its
  // _causal form).
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    EXPECT_EQ(std::string(info.split_kernel), fp8_split_for(info.heads_per_cta, info.kv_shared && causal_));
  }
  int causal_ = 0;
  unsigned case_seed(const Case &c) const override {
    return 808u + c.heads * 13 + c.page_size + (int)c.combine + (int)c.lens.size();
  }
  Case fp8_case(float scale = 0.37f) const {
    Case c;
    c.fp8 = 1;
    c.kv_scale = scale;
    c.launches = 3;  // the same bits on every launch
    return c;
  }
};

TEST_F(MlaFp8, HeadCountsPagesBothStrategies) {
  std::mt19937 rng(31);
  int i = 0;
  // 12: fast path groups of 12; 24, 32, 48, 64: one group on the 17..64-row kernel; 96:
  // the generic path above 32 heads (groups of 16); 128: two groups of 64.
  for (int h : {16, 12, 1, 8, 24, 32, 96, 48, 64, 128})
    for (int ps : {16, 32, 64})
      for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS, CGRT_MLA_COMBINE_AUTO}) {
        if (h > 32 && ps != (h == 64 ? 16 : 64)) continue;
        Case c = fp8_case(i++ % 2 ? 0.37f : 1.9f);
        c.reqs = emulated_ ? 3 : 6;
        c.heads = h;
        c.page_size = ps;
        c.lens = mixed(c.reqs, emulated_ ? 200 : 3000, rng, true);
        c.combine = cb;
        c.programmatic_launch = i % 3;  // 2: the early reads of seq_lens and the block table
        check(c, "heads " + std::to_string(h) + ", page size " + std::to_string(ps) + ", combine " +
                     std::to_string((int)cb) + ", programmatic_launch " + std::to_string(i % 3));
      }
}

TEST_F(MlaFp8, TileAndRangeEdges) {
  Case c = fp8_case();
  c.launches = 2;
  check_tile_edges(c);
}

TEST_F(MlaFp8, BlockRowsCausalDcpPaddingLongRows) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c = fp8_case();
    c.reqs = 3;
    c.block_len = 3;  // 48 query rows a block: together on the 17..64-row kernel
    c.page_size = 32;
    c.lens = {100, 0, emulated_ ? 400 : 5000};
    c.combine = cb;
    check(c, std::string("block rows k=3") + (cb ? " counters" : " workspace"));
    c.block_len = 4;
    c.causal = 1;
    causal_ = 1;
    c.heads = 12;  // 48 query rows a block: together on the _causal kernel
    c.lens = {100, 2, emulated_ ? 400 : 5000};
    check(c, std::string("causal rows k=4") + (cb ? " counters" : " workspace"));
    c.block_len = 2;
    c.heads = 8;  // 16 query rows a block: apart, causal rows through the schedule
    check(c, std::string("causal rows k=2 apart") + (cb ? " counters" : " workspace"));
    c.heads = 12;
    causal_ = 0;
    c.causal = 0;
    c.block_len = 1;
    c.heads = 8;
    c.dcp = 2;  // 16 query heads
    c.lens = {90, 0, 257};
    check(c, std::string("dcp 2") + (cb ? " counters" : " workspace"));
    c.heads = 16;
    c.dcp = 1;
    c.reqs = 4;
    c.page_size = 64;
    c.lens = {emulated_ ? 3000 : 32768, 1, 0, emulated_ ? 900 : 9000};
    check(c, std::string("long rows") + (cb ? " counters" : " workspace"));
    c.lens = {0, 0, 0, 0};
    check(c, std::string("all padding") + (cb ? " counters" : " workspace"));
  }
}

// A few short rows (tile edges, a ragged last tile, a padding row) and one row, both
// strategies, one launch each: small enough for compute-sanitizer's memcheck and
// racecheck on the H200 (--gtest_filter=MlaFp8.SanitizerSized).
TEST_F(MlaFp8, SanitizerSized) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c = fp8_case();
    c.reqs = 4;
    c.page_size = 16;
    c.lens = {1, 130, 0, emulated_ ? 200 : 700};
    c.combine = cb;
    c.launches = 1;
    check(c, cb ? "few rows counters" : "few rows workspace");
    c.reqs = 1;
    c.page_size = 32;
    c.lens = {emulated_ ? 300 : 2000};
    check(c, cb ? "one row counters" : "one row workspace");
  }
}

// More rows than the kernel's 128 threads: the schedule kernel runs before the split.
TEST_F(MlaFp8, RowsPastBlockSize) {
  std::mt19937 rng(6);
  for (cgrt_mla_combine cb : kBoth) {
    Case c = fp8_case();
    c.reqs = 200;
    c.page_size = 16;
    c.lens = mixed(c.reqs, emulated_ ? 40 : 300, rng, true);
    c.combine = cb;
    check(c, cb ? "200 rows counters" : "200 rows workspace");
  }
}

// Steps of one row take cgrt_mla_split_t64_row1_fp8 (workspace combine and AUTO); the
// counters strategy keeps cgrt_mla_split_t64_fp8.
class MlaFp8Row1 : public SplitHarness {
 protected:
  void SetUp() override { start("cgrt_mla_split_t64_fp8"); }
  void check_plan(cgrt_mla_plan *plan) override {
    SplitHarness::check_plan(plan);
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    ASSERT_NE(info.one_row_kernel, nullptr);
    EXPECT_EQ(std::string(info.one_row_kernel), counters_ ? "cgrt_mla_split_t64_fp8" : "cgrt_mla_split_t64_row1_fp8");
  }
  bool counters_ = false;
};

TEST_F(MlaFp8Row1, OneRowSteps) {
  struct L {
    int heads, page_size;
    std::vector<int> lens;
  };
  const std::vector<L> cases = {
      {16, 64, {0, 1, 65, emulated_ ? 900 : 8449}},
      {16, 16, {129, emulated_ ? 700 : 25400}},
      {12, 32, {0, 65, emulated_ ? 800 : 17000}},
  };
  for (const L &l : cases)
    for (int len : l.lens)
      for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS, CGRT_MLA_COMBINE_AUTO}) {
        Case c;
        c.fp8 = 1;
        c.kv_scale = 0.8f;
        c.launches = 3;
        c.reqs = 1;
        c.heads = l.heads;
        c.page_size = l.page_size;
        c.lens = {len};
        c.combine = cb;
        c.programmatic_launch = len % 2 ? 2 : 0;
        counters_ = cb == CGRT_MLA_COMBINE_COUNTERS;
        check(c, "one row of " + std::to_string(len) + ", " + std::to_string(l.heads) + " heads, page size " +
                     std::to_string(l.page_size) + ", combine " + std::to_string((int)cb) +
                     ", programmatic_launch " + std::to_string(c.programmatic_launch));
      }
}

TEST_F(MlaFp8, KvCachePast2To31Bytes) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (pages past 2^31 e4m3 bytes)";
  check_kv_past_2to31(16, 20000, 1);  // and the one-row kernel
}

// The options' statuses: an FP8 cache takes every head count, 17..64 query rows per CTA
// on cgrt_mla_split_t64_n64_fp8; bad dtypes and scales are invalid; an options struct
// that ends before kv_dtype gets the bf16 default.
TEST_F(MlaFp8, OptionStatuses) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  EXPECT_EQ(o.kv_dtype, CGRT_MLA_KV_BF16);
  EXPECT_EQ(o.kv_scale, 1.f);
  o.max_num_seqs = 4;
  o.heads = 16;
  o.max_model_len = 4096;
  o.kv_dtype = CGRT_MLA_KV_FP8_E4M3;
  cgrt_mla_plan *p = nullptr;
  // Every head count takes FP8; above 16 heads as the bf16 plan tiles them (CTAs of 32,
  // 48 or 64 query rows), on the 17..64-row FP8 kernel, 128 heads in two groups of 64.
  for (int heads : {32, 48, 64, 128}) {
    o.heads = heads;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(p, &info));
    EXPECT_EQ(std::string(info.split_kernel), kSplitFp8N64) << heads;
    EXPECT_EQ(info.heads_per_cta, heads > 64 ? 64 : heads) << heads;
    EXPECT_EQ(info.head_groups, heads > 64 ? heads / 64 : 1) << heads;
    cgrt_mla_plan_destroy(p);
    p = nullptr;
  }
  o.heads = 16;
  for (float s : {0.f, -1.f, NAN, INFINITY}) {
    o.kv_scale = s;
    EXPECT_EQ(cgrt_mla_plan_create(rt_, &o, &p), CGRT_ERROR_INVALID_ARGUMENT) << s;
    EXPECT_EQ(p, nullptr);
  }
  o.kv_scale = 1.f;
  o.kv_dtype = (cgrt_mla_kv_dtype)7;
  EXPECT_EQ(cgrt_mla_plan_create(rt_, &o, &p), CGRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  // bf16 ignores kv_scale.
  o.kv_dtype = CGRT_MLA_KV_BF16;
  o.kv_scale = NAN;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
  cgrt_mla_plan_info info{};
  info.size = sizeof info;
  CGRT_ASSERT_OK(cgrt_mla_plan_get_info(p, &info));
  EXPECT_EQ(std::string(info.split_kernel), "cgrt_mla_split_t64");
  cgrt_mla_plan_destroy(p);
  // An older header's struct (ending at causal) with garbage past it: bf16.
  o.kv_dtype = (cgrt_mla_kv_dtype)7;
  o.size = offsetof(cgrt_mla_options, causal) + sizeof(int);
  p = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
  CGRT_ASSERT_OK(cgrt_mla_plan_get_info(p, &info));
  EXPECT_EQ(std::string(info.split_kernel), "cgrt_mla_split_t64");
  cgrt_mla_plan_destroy(p);
  // 96 query heads take the generic path (CTAs of 16): FP8 works there.
  o.size = sizeof o;
  o.kv_dtype = CGRT_MLA_KV_FP8_E4M3;
  o.kv_scale = 0.5f;
  o.heads = 96;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
  CGRT_ASSERT_OK(cgrt_mla_plan_get_info(p, &info));
  EXPECT_EQ(std::string(info.split_kernel), "cgrt_mla_split_t64_fp8");
  EXPECT_EQ(info.kv_shared, 0);
  cgrt_mla_plan_destroy(p);
}

}  // namespace
