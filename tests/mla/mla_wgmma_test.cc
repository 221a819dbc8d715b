// The 64-heads-per-CTA path (48, 64, 128 query heads) through the public API against an
// fp32 host reference, with both combine strategies: cgrt_mla_split_t64_n64
// (kernels/mla/split_t64_n64.cu) for one head group per request, cgrt_mla_split_m64_ws
// (kernels/mla/split_m64_ws.cu) for two (128 heads). On the emulation (CI) the C
// reference runs under the kernel's name; with CGRT_DRIVER=cuda on an H200 the wgmma
// kernel itself (or its mma.sync fallback under CUDA_FORCE_PTX_JIT=1).
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaWgmma : public SplitHarness {
 protected:
  void SetUp() override { start(kSplit64, kSplitWs); }  // one head group: t64_n64, more: m64_ws
  unsigned case_seed(const Case &c) const override {
    return 777u + c.heads * 13 + c.page_size + (int)c.combine + (int)c.lens.size();
  }

  // The cases of this file default to 64 heads (one head group per CTA on this path).
  static Case m64_case() {
    Case c;
    c.heads = 64;
    return c;
  }
};

TEST_F(MlaWgmma, HeadCountsBothStrategies) {
  check_head_counts({48, 64, 128}, 11, 6, 3000);
}

TEST_F(MlaWgmma, PageSizesBlockRowsDcp) {
  for (cgrt_mla_combine cb : kBoth) {
    for (int ps : {16, 32, 64}) {
      Case c = m64_case();
      c.reqs = 5;
      c.page_size = ps;
      c.lens = {1, 33, 0, emulated_ ? 300 : 3000, 64};
      c.combine = cb;
      check(c, "page size " + std::to_string(ps) + (cb ? " counters" : " workspace"));
    }
    Case c = m64_case();
    c.reqs = 3;
    c.block_len = 3;
    c.page_size = 16;
    c.lens = {100, 0, emulated_ ? 400 : 5000};
    c.combine = cb;
    check(c, std::string("block rows k=3") + (cb ? " counters" : " workspace"));
    c.block_len = 1;
    c.dcp = 2;  // 128 query heads
    c.lens = {90, 0, 257};
    check(c, std::string("dcp 2") + (cb ? " counters" : " workspace"));
  }
}

TEST_F(MlaWgmma, MixedLengthsAndPadding) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c = m64_case();
    c.combine = cb;
    if (emulated_) {
      c.reqs = 6;
      c.lens = {1, 3000, 0, 97, 2, 1500};
      c.launches = 1;
    } else {
      c.reqs = 6;
      c.lens = {1, 32768, 0, 9000, 33, 2};
    }
    check(c, cb ? "mixed counters" : "mixed workspace");
    c.reqs = 4;
    c.heads = 64;
    c.launches = 2;
    c.lens = {0, 0, 0, 0};
    check(c, "all padding");
    c.lens = {0, 50, 0, -3};
    check(c, "some padding");
  }
}

// More rows than the serial kernel's 256 threads, up to the kernel's 384 (the split
// kernel schedules itself over 384 threads), and more (the schedule kernel runs before
// the split).
TEST_F(MlaWgmma, RowsPastBlockSize) {
  std::mt19937 rng(5);
  for (int reqs : {300, 390})
    for (cgrt_mla_combine cb : kBoth) {
      Case c = m64_case();
      c.reqs = reqs;
      c.heads = 64;
      c.page_size = 16;
      c.lens = mixed(c.reqs, emulated_ ? 40 : 96, rng, true);
      c.combine = cb;
      c.launches = 3;
      check(c, std::to_string(reqs) + (cb ? " rows counters" : " rows workspace"));
    }
}

TEST_F(MlaWgmma, KvCachePast2To31Elements) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (2^31 bf16 elements)";
  check_kv_past_2to31(128);
}

TEST_F(MlaWgmma, OnlyTheM64PathTakesIt) {
  for (int h : {16, 32, 48, 64, 96, 128}) {
    cgrt_mla_plan_info info;
    cgrt_mla_plan *p = plan_with_info(h, 8, CGRT_MLA_COMBINE_AUTO, &info);
    ASSERT_NE(p, nullptr) << h;
    const bool m64 = info.heads_per_cta > 32;
    const std::string k = info.split_kernel;
    EXPECT_EQ(k == kSplit64 || k == kSplitWs, m64) << h << ": " << k;
    if (m64) EXPECT_EQ(k, split64_for(info.head_groups, false)) << h;
    cgrt_mla_plan_destroy(p);
  }
}

}  // namespace
