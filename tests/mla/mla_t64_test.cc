// cgrt_mla_split_t64 and cgrt_mla_split_t64_row1 (kernels/mla/split_t64.cu): the
// token-major wgmma kernels of the <= 16-heads-per-CTA path through the public API
// against the fp32 host reference, with both combine strategies. Its own edges: 64-token tiles over
// ranges cut at 32-token tiles (a segment may start or end half way into a tile), the
// 8-slot ring (segments of 1, 2, 3 and many tiles), head groups of 1..16 heads, the
// counters merge (t64_merge: partials through shared memory up to 8, from global memory
// past that, in slot order). On the emulation (CI) the
// C reference runs under the kernel's name; with CGRT_DRIVER=cuda on an H200 the wgmma
// kernel itself (or its mma.sync fallback under CUDA_FORCE_PTX_JIT=1).
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaT64 : public SplitHarness {
 protected:
  void SetUp() override { start("cgrt_mla_split_t64"); }
  unsigned case_seed(const Case &c) const override {
    return 4242u + c.heads * 17 + c.page_size + (int)c.combine + (int)c.lens.size();
  }
};

TEST_F(MlaT64, HeadCountsBothStrategies) {
  // 17..32 heads take cgrt_mla_split_t64_n32 (tests/mla/mla_t64_n32_test.cc); 96: the
  // generic path (groups of 16 here)
  check_head_counts({1, 8, 12, 16, 96}, 21, 6, 3000);
}

// Lengths around the 64-token tile and the 32-token range unit, one row per length and
// all of them in one batch, so that ranges begin and end inside tiles and rows.
TEST_F(MlaT64, TileAndRangeEdges) {
  const std::vector<int> edges = {1, 31, 32, 33, 63, 64, 65, 96, 127, 128, 129, 191, 193, 255, 257, 511, 513};
  for (cgrt_mla_combine cb : kBoth)
    for (int ps : {16, 32, 64}) {
      Case c;
      c.reqs = (int)edges.size();
      c.page_size = ps;
      c.lens = edges;
      c.combine = cb;
      check(c, "edges, page size " + std::to_string(ps) + (cb ? " counters" : " workspace"));
      for (int len : {1, 64, 65, 128, 129, 192, 193, emulated_ ? 600 : 8192}) {
        c.reqs = 1;
        c.lens = {len};
        check(c, "one row of " + std::to_string(len) + ", page size " + std::to_string(ps) +
                     (cb ? " counters" : " workspace"));
      }
    }
}

TEST_F(MlaT64, BlockRowsDcpPaddingLongRows) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 3;
    c.block_len = 3;
    c.heads = 4;  // 12 query rows a block: the rows apart, on this kernel (tests/mla/mla_block_test.cc)
    c.page_size = 32;
    c.lens = {100, 0, emulated_ ? 400 : 5000};
    c.combine = cb;
    check(c, std::string("block rows k=3") + (cb ? " counters" : " workspace"));
    c.block_len = 4;
    c.causal = 1;  // causal verify rows, the rows apart: per-row lengths from the schedule
    c.lens = {100, 2, emulated_ ? 400 : 5000};
    check(c, std::string("causal rows k=4") + (cb ? " counters" : " workspace"));
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

// More rows than the kernel's 128 threads: the schedule kernel runs before the split.
TEST_F(MlaT64, RowsPastBlockSize) {
  std::mt19937 rng(5);
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 200;
    c.page_size = 16;
    c.lens = mixed(c.reqs, emulated_ ? 40 : 300, rng, true);
    c.combine = cb;
    c.launches = 3;
    check(c, cb ? "200 rows counters" : "200 rows workspace");
  }
}

TEST_F(MlaT64, ProgrammaticLaunch) {
  for (int pl : {1, 2})
    for (cgrt_mla_combine cb : kBoth) {
      Case c;
      c.combine = cb;
      c.programmatic_launch = pl;
      c.launches = 3;
      c.reqs = 4;
      c.page_size = 16;
      c.lens = {emulated_ ? 500 : 6000, 0, 77, 1};
      check(c, "programmatic_launch " + std::to_string(pl) + (cb ? " counters" : " workspace"));
    }
}

// The workspace combine on this kernel's partials in each column-slice count the plan
// picks: 64-column slices up to 32 (row, head) pairs, 128 up to 256, whole rows past.
TEST_F(MlaT64, CombineColumnSlices) {
  std::mt19937 rng(3);
  for (int reqs : {2, 6, 20}) {
    Case c;
    c.reqs = reqs;
    c.page_size = 32;
    c.launches = 3;
    c.lens = mixed(c.reqs, emulated_ ? 600 : 9000, rng, true);
    check(c, std::to_string(reqs) + " rows of 16 heads");
  }
}

// Steps of one row run cgrt_mla_split_t64_row1 (workspace combine): CTA p of P takes the
// 64-token tiles p, p + P, ..., its first four tiles' block-table entries read with
// seq_len. P is 132 (16 heads) or 66 (32 heads: two head groups) on 132 SMs (the
// emulation reports 132), so the lengths cover: padding, one tile, a partial last
// tile, fewer tiles than CTAs, tiles past the first stride, and more than four tiles
// per CTA (the entries read in the loop), on every page size; the counters strategy
// keeps cgrt_mla_split_t64 for one row.
class MlaT64Row1 : public SplitHarness {
 protected:
  void SetUp() override { start("cgrt_mla_split_t64"); }
  void check_plan(cgrt_mla_plan *plan) override {
    SplitHarness::check_plan(plan);
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    ASSERT_NE(info.one_row_kernel, nullptr);
    EXPECT_EQ(std::string(info.one_row_kernel),
              info.counter_bytes ? "cgrt_mla_split_t64" : expect_one_row_);
  }
  std::string expect_one_row_ = "cgrt_mla_split_t64_row1";
};

TEST_F(MlaT64Row1, InterleavedTiles) {
  struct L {
    int heads, page_size;
    std::vector<int> lens;
  };
  const std::vector<L> cases = {
      {16, 64, {0, 1, 63, 64, 65, 200, 8447, 8448, 8449, 17000}},
      {16, 16, {1, 129, 8449, 25400}},
      {8, 64, {100, 9000}},
      {12, 32, {7, 3000}},
  };
  for (const L &l : cases)
    for (int len : l.lens)
      for (cgrt_mla_combine cb : kBoth) {
        Case c;
        c.reqs = 1;
        c.heads = l.heads;
        c.page_size = l.page_size;
        c.lens = {len};
        c.combine = cb;
        check(c, "one row of " + std::to_string(len) + ", " + std::to_string(l.heads) + " heads, page size " +
                     std::to_string(l.page_size) + (cb ? " counters" : " workspace"));
      }
}

// programmatic_launch 1 and 2 keep the one-row kernel (2 acts as 1 there: the one-row
// kernels wait before they read seq_len, kernel table column early 0).
TEST_F(MlaT64Row1, ProgrammaticLaunch) {
  Case c;
  c.reqs = 1;
  c.lens = {9000};
  c.launches = 3;
  for (int pl : {1, 2}) {
    c.programmatic_launch = pl;
    check(c, "programmatic_launch " + std::to_string(pl));
  }
}

TEST_F(MlaT64, KvCachePast2To31Elements) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (2^31 bf16 elements)";
  check_kv_past_2to31(16, 20000);  // and the one-row kernel
}

}  // namespace
