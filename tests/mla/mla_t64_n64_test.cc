// cgrt_mla_split_t64_n64 and _n64_causal (kernels/mla/split_t64_n64.cu): the token-major
// kernels of 33..64 query rows per CTA (two warpgroups of the 32-row arithmetic over one
// ring) through the public API against the fp32 host reference, both combine strategies:
// 48 and 64 heads (one head group) and 128 (two), page sizes 16 / 32 / 64, lengths 0, 1,
// around the 64-token tiles and long, padding rows, rows past the kernel's 256 threads
// (the schedule kernel), a KV cache past 2^31 elements (GPU), and a block's rows
// together: 16 heads x k 4 (64 query rows), causal ones with per-row lengths.
// The plan picks these kernels for one head group per request; with two (128 heads) it
// picks cgrt_mla_split_m64_ws, which those cases run on (split64_for, tests/mla/
// mla_harness.h). On the emulation (CI) the
// C reference runs under the kernel's name; with CGRT_DRIVER=cuda on an H200 the kernel
// (or its mma.sync fallback under CUDA_FORCE_PTX_JIT=1). Every check launches 2-3 times
// and compares the bits.
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaT64N64 : public SplitHarness {
 protected:
  void SetUp() override { start(kSplit64, kSplitWs); }
  unsigned case_seed(const Case &c) const override {
    return 6464u + c.heads * 17 + c.page_size + (int)c.combine + (int)c.lens.size() + c.block_len;
  }
};

TEST_F(MlaT64N64, ThePlanPicksIt) {
  for (int h : {48, 64, 128}) {
    cgrt_mla_plan_info info;
    cgrt_mla_plan *p = plan_with_info(h, 8, CGRT_MLA_COMBINE_AUTO, &info);
    ASSERT_NE(p, nullptr) << h;
    EXPECT_EQ(info.head_groups, h == 128 ? 2 : 1) << h;
    EXPECT_EQ(std::string(info.split_kernel), h == 128 ? "cgrt_mla_split_m64_ws" : "cgrt_mla_split_t64_n64") << h;
    cgrt_mla_plan_destroy(p);
  }
}

// One small step a kind (for compute-sanitizer runs): 64 heads, both merges, a row split
// across ranges, a padding row, a length past a tile bound.
TEST_F(MlaT64N64, Small) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.heads = 64;
    c.reqs = 3;
    c.lens = {0, 65, emulated_ ? 300 : 1500};
    c.combine = cb;
    check(c, cb ? "small counters" : "small workspace");
  }
}

TEST_F(MlaT64N64, HeadsPageSizesLengths) {
  for (int heads : {64, 48})
    for (int ps : {16, 32, 64})
      for (cgrt_mla_combine cb : kBoth) {
        Case c;
        c.heads = heads;
        c.page_size = ps;
        c.lens = {0, 1, 63, 65, 130, emulated_ ? 700 : 5000, 64, emulated_ ? 257 : 4097};
        c.reqs = (int)c.lens.size();
        c.combine = cb;
        check(c, std::to_string(heads) + " heads, page size " + std::to_string(ps) + (cb ? " counters" : " workspace"));
      }
}

TEST_F(MlaT64N64, TileAndRangeEdges) {
  Case c;
  c.heads = 64;
  check_tile_edges(c);
}

// Long rows split many ways, all-padding steps, 128 heads (two head groups: the plan
// moves to m64_ws), and more rows than the kernel's 256 threads (the schedule kernel
// runs first).
TEST_F(MlaT64N64, LongRowsPaddingTwoGroupsRowsPastBlockSize) {
  std::mt19937 rng(19);
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.heads = 64;
    c.reqs = 4;
    c.lens = {emulated_ ? 3000 : 32768, 1, 0, emulated_ ? 900 : 9001};
    c.combine = cb;
    c.launches = 3;
    check(c, std::string("long rows") + (cb ? " counters" : " workspace"));
    c.lens = {0, 0, 0, 0};
    check(c, std::string("all padding") + (cb ? " counters" : " workspace"));
    c.heads = 128;
    c.lens = {emulated_ ? 500 : 8192, 0, 77, emulated_ ? 300 : 4000};
    check(c, std::string("128 heads") + (cb ? " counters" : " workspace"));
    c.heads = 64;
    c.reqs = 300;
    c.page_size = 16;
    c.lens = mixed(c.reqs, emulated_ ? 40 : 300, rng, true);
    check(c, std::string("300 rows") + (cb ? " counters" : " workspace"));
  }
}

TEST_F(MlaT64N64, KvCachePast2To31Elements) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (2^31 bf16 elements)";
  check_kv_past_2to31(64);
}

// A block's rows together at 64 query rows: 16 heads x k 4, causal (per-row lengths,
// rows shorter than the block, 0 tokens) and not, page sizes 16 / 32 / 64, both merges.
class MlaT64N64Blocks : public Harness {
 protected:
  unsigned case_seed(const Case &c) const override { return 4646u + c.heads + c.block_len * 3 + c.causal + c.page_size; }
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    EXPECT_EQ(info.kv_shared, 1);
    EXPECT_EQ(info.heads_per_cta, 64);
    EXPECT_EQ(std::string(info.split_kernel), expect_);
  }
  std::string expect_;
};

TEST_F(MlaT64N64Blocks, SmallCausal) {
  expect_ = kSplit64Causal;
  Case c;
  c.heads = 16;
  c.block_len = 4;
  c.causal = 1;
  c.reqs = 3;
  c.page_size = 32;
  c.lens = {2, 130, emulated_ ? 300 : 1500};
  c.combine = CGRT_MLA_COMBINE_COUNTERS;
  check(c, "small causal 16 heads k 4");
}

TEST_F(MlaT64N64Blocks, SixteenHeadsK4CausalAndNot) {
  std::mt19937 rng(21);
  for (int causal : {0, 1})
    for (int ps : {16, 32, 64})
      for (cgrt_mla_combine cb : kBoth) {
        expect_ = causal ? kSplit64Causal : kSplit64;
        Case c;
        c.heads = 16;
        c.block_len = 4;
        c.causal = causal;
        c.reqs = emulated_ ? 5 : 9;
        c.page_size = ps;
        c.lens = mixed(c.reqs, emulated_ ? 300 : 6000, rng, true);
        c.lens[1] = 1;  // shorter than the block: causal rows of 0 tokens
        c.lens[2] = 4;
        c.lens[3] = 0;
        c.lens[4] = 66;  // causal rows end on both sides of a tile bound
        c.combine = cb;
        c.launches = 3;
        check(c, std::string(causal ? "causal " : "") + "16 heads k 4, page size " + std::to_string(ps) +
                     (cb ? " counters" : " workspace"));
      }
}

}  // namespace
