// cgrt_mla_split_t64_n32 and _n32_causal (kernels/mla/split_t64.cu, NH = 32):
// the token-major wgmma kernels of 17..32 query rows per CTA (wgmma N = 32, a 7-slot
// ring) through the public API against the fp32 host reference, both combine strategies:
// head counts 17..32 (and DCP), tile and range edges, one-row steps (the 16-head kernels
// in groups of 16), the counters merge of 32 heads (two passes of t64_merge), rows past the
// block size, a KV cache past 2^31 elements (GPU), and a block's rows together up to 32
// query rows, causal ones with per-row lengths (query rows without tokens in a segment
// or at all). On the emulation (CI) the C reference runs under the kernel's name; with
// CGRT_DRIVER=cuda on an H200 the kernel (or its mma.sync fallback under
// CUDA_FORCE_PTX_JIT=1). Every check launches 2-3 times and compares the bits.
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaT64N32 : public SplitHarness {
 protected:
  void SetUp() override { start("cgrt_mla_split_t64_n32"); }
  unsigned case_seed(const Case &c) const override {
    return 3232u + c.heads * 19 + c.page_size + (int)c.combine + (int)c.lens.size() + c.block_len;
  }
};

TEST_F(MlaT64N32, HeadCountsBothStrategies) {
  check_head_counts({32, 17, 24, 20, 31}, 23, 6, 3000);
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 3;
    c.heads = 16;
    c.dcp = 2;  // 32 query heads
    c.lens = {90, 0, emulated_ ? 300 : 4000};
    c.combine = cb;
    check(c, std::string("dcp 2") + (cb ? " counters" : " workspace"));
  }
}

TEST_F(MlaT64N32, TileAndRangeEdges) {
  Case c;
  c.heads = 32;
  check_tile_edges(c);
}

// Long rows split many ways (the counters merge through global memory past 8 partials)
// and all-padding steps; more rows than the kernel's 128 threads (the schedule kernel).
TEST_F(MlaT64N32, LongRowsPaddingRowsPastBlockSize) {
  std::mt19937 rng(9);
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.heads = 32;
    c.reqs = 4;
    c.lens = {emulated_ ? 3000 : 32768, 1, 0, emulated_ ? 900 : 9000};
    c.combine = cb;
    c.launches = 3;
    check(c, std::string("long rows") + (cb ? " counters" : " workspace"));
    c.lens = {0, 0, 0, 0};
    check(c, std::string("all padding") + (cb ? " counters" : " workspace"));
    c.reqs = 150;
    c.page_size = 16;
    c.lens = mixed(c.reqs, emulated_ ? 40 : 300, rng, true);
    check(c, std::string("150 rows") + (cb ? " counters" : " workspace"));
  }
}

TEST_F(MlaT64N32, KvCachePast2To31Elements) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (2^31 bf16 elements)";
  check_kv_past_2to31(32, 20000);  // and the one-row kernel
}

// Steps of one row run the 16-head kernels in groups of 16: cgrt_mla_split_t64_row1 with
// the workspace (P = 66 on 132 SMs), cgrt_mla_split_t64 with counters.
class MlaT64N32Row1 : public SplitHarness {
 protected:
  void SetUp() override { start("cgrt_mla_split_t64_n32"); }
  void check_plan(cgrt_mla_plan *plan) override {
    SplitHarness::check_plan(plan);
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    ASSERT_NE(info.one_row_kernel, nullptr);
    EXPECT_EQ(std::string(info.one_row_kernel),
              info.counter_bytes ? "cgrt_mla_split_t64" : "cgrt_mla_split_t64_row1");
  }
};

TEST_F(MlaT64N32Row1, InterleavedTiles) {
  struct L {
    int heads, page_size;
    std::vector<int> lens;
  };
  const std::vector<L> cases = {
      {32, 32, {0, 1, 65, 4224, 4225, 17000}},  // 4224 = 64 x 66: one tile per CTA
      {24, 16, {7, 3000, 25400}},
  };
  for (const L &l : cases)
    for (int len : l.lens)
      for (cgrt_mla_combine cb : kBoth) {
        Case c;
        c.reqs = 1;
        c.heads = l.heads;
        c.page_size = l.page_size;
        c.lens = {emulated_ ? std::min(len, 700) : len};
        c.combine = cb;
        check(c, "one row of " + std::to_string(c.lens[0]) + ", " + std::to_string(l.heads) + " heads, page size " +
                     std::to_string(l.page_size) + (cb ? " counters" : " workspace"));
      }
}

// A block's rows together up to 32 query rows: 16 heads x k 2 and 8 heads x k 4 (also
// causal: per-row lengths, rows shorter than the block, 0 tokens), both merges.
class MlaT64N32Blocks : public Harness {
 protected:
  unsigned case_seed(const Case &c) const override { return 777u + c.heads + c.block_len * 3 + c.causal; }
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    EXPECT_EQ(info.kv_shared, 1);
    EXPECT_EQ(std::string(info.split_kernel), expect_);
  }
  std::string expect_;
};

TEST_F(MlaT64N32Blocks, TogetherCausalAndNot) {
  std::mt19937 rng(12);
  for (int causal : {0, 1})
    for (auto hk : {std::pair<int, int>{16, 2}, std::pair<int, int>{8, 4}})
      for (cgrt_mla_combine cb : kBoth) {
        expect_ = causal ? "cgrt_mla_split_t64_n32_causal" : "cgrt_mla_split_t64_n32";
        Case c;
        c.heads = hk.first;
        c.block_len = hk.second;
        c.causal = causal;
        c.reqs = emulated_ ? 4 : 9;
        c.page_size = 32;
        c.lens = mixed(c.reqs, emulated_ ? 300 : 6000, rng, true);
        c.lens[1] = 1;  // shorter than the block: causal rows of 0 tokens
        c.lens[2] = hk.second;
        c.combine = cb;
        c.launches = 3;
        check(c, std::string(causal ? "causal " : "") + std::to_string(hk.first) + " heads k " +
                     std::to_string(hk.second) + (cb ? " counters" : " workspace"));
      }
}

}  // namespace
