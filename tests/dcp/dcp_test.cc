// The DCP step (cgrt/cgrt_dcp.h) on 2, 3 and 4 ranks against the single-rank reference
// over the same logical KV; eager vs replay bits; padding rows; the host's or cgrt's
// query all-gather; agreement; shard lengths; arguments and info.
#include "tests/dcp/dcp_harness.h"

namespace dcp_test {
namespace {

class Dcp : public Harness {
 protected:
  bool emulated_ = true;
  void SetUp() override {
    emulated_ = cgrt_test::is_emulated(reference_runtime());
    if (max_world() < 2) GTEST_SKIP() << "DCP needs 2 GPUs (or the emulation); this machine has " << max_world();
  }

  // Every rank: eager twice (same bits), then the step captured and replayed twice (the
  // eager bits); each rank's heads against the single-rank reference.
  void check(Batch b, const std::string &what, bool host_gathers = false) {
    SCOPED_TRACE(what);
    b.fill(1000u + b.world * 17 + b.interleave);
    const Result ref = reference(b);
    const cgrt_dcp_id id = new_id();
    std::vector<Result> got(b.world);
    ranks(b.world, [&](int r) {
      Rank k;
      setup(k, b, r, id, 0, host_gathers);
      if (!k.g) return;
      ASSERT_EQ(cgrt_dcp_step(k.g, nullptr, &k.a), CGRT_SUCCESS) << cgrt_last_error();
      ASSERT_EQ(cgrt_dcp_wait(k.g, nullptr), CGRT_SUCCESS) << cgrt_last_error();
      got[r] = fetch(k, b);
      ASSERT_EQ(cgrt_dcp_step(k.g, nullptr, &k.a), CGRT_SUCCESS) << cgrt_last_error();
      ASSERT_EQ(cgrt_dcp_wait(k.g, nullptr), CGRT_SUCCESS) << cgrt_last_error();
      const Result again = fetch(k, b);
      EXPECT_EQ(again.out, got[r].out) << "rank " << r << ": a second eager step changed the output";
      EXPECT_EQ(0, memcmp(again.lse.data(), got[r].lse.data(), again.lse.size() * 4));
      // Captured per bucket (this one), replayed: the eager bits.
      const cgrt__driver *d = k.t.rt->drv;
      CUstream s = nullptr;
      ASSERT_EQ(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
      ASSERT_EQ(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
      const cgrt_status st = cgrt_dcp_step(k.g, s, &k.a);
      CUgraph graph = nullptr;
      ASSERT_EQ(d->cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
      ASSERT_EQ(st, CGRT_SUCCESS) << cgrt_last_error();
      int all_ok = 0;
      ASSERT_EQ(cgrt_dcp_agree(k.g, 1, &all_ok), CGRT_SUCCESS) << cgrt_last_error();
      ASSERT_EQ(all_ok, 1);
      CUgraphExec exec = nullptr;
      ASSERT_EQ(d->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
      for (int i = 0; i < 2; i++) {
        std::vector<uint16_t> nan((size_t)b.rows() * b.heads * DV, 0x7fc1);
        k.t.put(k.t.out, nan.data(), nan.size() * 2);
        ASSERT_EQ(d->cuGraphLaunch(exec, s), CUDA_SUCCESS);
        ASSERT_EQ(cgrt_dcp_wait(k.g, s), CGRT_SUCCESS) << cgrt_last_error();
        const Result rep = fetch(k, b);
        EXPECT_EQ(rep.out, got[r].out) << "rank " << r << ": replay differs from eager";
        EXPECT_EQ(0, memcmp(rep.lse.data(), got[r].lse.data(), rep.lse.size() * 4));
      }
      d->cuGraphExecDestroy(exec);
      d->cuGraphDestroy(graph);
      d->cuStreamDestroy(s);
    });
    for (int r = 0; r < b.world; r++) {
      // The partials are rounded to bf16 before the merge: about two bf16 roundings on
      // the emulation (fp32 references); on GPUs both sides carry the kernel's own error
      // (1e-2 against fp32, tests/mla), so they may differ by up to twice that.
      compare(got[r], heads_of(b, ref, r), emulated_ ? 8e-3 : 2e-2, emulated_ ? 1e-3 : 2e-2,
              "rank " + std::to_string(r));
      for (int row = 0; row < b.rows(); row++) {
        if (b.lens[row] > 0) continue;
        for (int h = 0; h < b.heads; h++) {
          const size_t i = (size_t)row * b.heads + h;
          EXPECT_TRUE(std::isinf(got[r].lse[i]) && got[r].lse[i] < 0) << "padding row " << row;
          for (int c = 0; c < DV; c++) ASSERT_EQ(got[r].out[i * DV + c], 0) << "padding row " << row;
        }
      }
    }
  }
};

TEST_F(Dcp, MatchesSingleRankOn2To4RanksTokenInterleaved) {
  for (int w = 2; w <= max_world(); w++) {  // 2-4 on the emulation, one rank per GPU
    Batch b;
    b.world = w;
    b.lens = {150, 1, 0, 77, 33};  // a row only rank 0 holds, a padding row
    check(b, "world " + std::to_string(w));
  }
}

TEST_F(Dcp, ReduceScatterMergeMatchesSingleRankOn2To4Ranks) {
  for (int w = 2; w <= max_world(); w++) {
    Batch b;
    b.world = w;
    b.merge = CGRT_DCP_MERGE_REDUCE_SCATTER;
    b.lens = {150, 1, 0, 77, 33};
    check(b, "reduce-scatter, world " + std::to_string(w));
  }
}

TEST_F(Dcp, MatchesSingleRankPageInterleaved) {
  Batch b;
  b.world = std::min(3, max_world());
  b.interleave = 16;  // runs of one page
  b.lens = {200, 17, 0, 48};
  check(b, "interleave 16");
}

TEST_F(Dcp, HostGatheredQueries) {
  Batch b;
  b.world = 2;
  b.heads = 8;
  b.lens = {90, 0, 64};
  check(b, "gather_q 0", true);
}

TEST_F(Dcp, AgreementIsTheMinimumOfTheRanks) {
  Batch b;
  b.world = std::min(3, max_world());
  b.lens = {10};
  b.fill(5);
  const cgrt_dcp_id id = new_id();
  ranks(b.world, [&](int r) {
    Rank k;
    setup(k, b, r, id);
    if (!k.g) return;
    int all = -1;
    ASSERT_EQ(cgrt_dcp_agree(k.g, 1, &all), CGRT_SUCCESS) << cgrt_last_error();
    EXPECT_EQ(all, 1);
    ASSERT_EQ(cgrt_dcp_agree(k.g, r != b.world - 1, &all), CGRT_SUCCESS) << cgrt_last_error();
    EXPECT_EQ(all, 0);
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_agree(k.g, 1, nullptr));
  });
}

TEST_F(Dcp, BadArgumentsEnqueueNothingAndKeepTheGroup) {
  Batch b;
  b.world = 2;
  b.lens = {40, 3};
  b.fill(6);
  const Result ref = reference(b);
  const cgrt_dcp_id id = new_id();
  ranks(b.world, [&](int r) {
    Rank k;
    setup(k, b, r, id);
    if (!k.g) return;
    cgrt_dcp_args bad = k.a;
    bad.num_rows = 0;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_step(k.g, nullptr, &bad));
    bad = k.a;
    bad.num_rows = 3;  // above max_num_seqs
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_step(k.g, nullptr, &bad));
    bad = k.a;
    bad.out += 2;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_step(k.g, nullptr, &bad));
    bad = k.a;
    bad.softmax_scale = NAN;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_step(k.g, nullptr, &bad));
    bad = k.a;
    bad.size = 8;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_step(k.g, nullptr, &bad));
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_step(k.g, nullptr, nullptr));
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_dcp_step(nullptr, nullptr, &k.a));
    cgrt_dcp_info info{};
    info.size = sizeof info;
    ASSERT_EQ(cgrt_dcp_group_get_info(k.g, &info), CGRT_SUCCESS);
    EXPECT_EQ(info.failed, 0);
    EXPECT_EQ(info.world_size, 2);
    EXPECT_EQ(info.rank, r);
    EXPECT_EQ(info.merge, CGRT_DCP_MERGE_ALL_TO_ALL);
    if (cgrt_test::is_emulated(k.t.rt)) {
      EXPECT_STREQ(info.nccl, "emulated");
    } else {
      EXPECT_EQ(std::string(info.nccl).rfind("nccl ", 0), 0u) << info.nccl;
    }
    EXPECT_GT(info.buffer_bytes, 0u);
    cgrt_mla_plan_info pi{};
    pi.size = sizeof pi;
    ASSERT_EQ(cgrt_mla_plan_get_info(info.plan, &pi), CGRT_SUCCESS);
    EXPECT_EQ(pi.q_heads, b.qh());
    info.size = 8;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_group_get_info(k.g, &info));
    // Still usable: the same step as without the bad calls.
    ASSERT_EQ(cgrt_dcp_step(k.g, nullptr, &k.a), CGRT_SUCCESS) << cgrt_last_error();
    ASSERT_EQ(cgrt_dcp_wait(k.g, nullptr), CGRT_SUCCESS) << cgrt_last_error();
    compare(fetch(k, b), heads_of(b, ref, r), emulated_ ? 8e-3 : 2e-2, emulated_ ? 1e-3 : 2e-2, "after bad calls");
  });
}

TEST_F(Dcp, BadOptions) {
  cgrt_runtime *rt = runtime(0);
  cgrt_dcp_options o;
  cgrt_dcp_options_init(&o);
  o.mla.max_num_seqs = 1;
  o.mla.heads = 4;
  o.mla.max_model_len = 64;
  cgrt_dcp_group *g = nullptr;
  auto expect = [&](cgrt_status want, const char *what) {
    SCOPED_TRACE(what);
    CGRT_EXPECT_STATUS(want, cgrt_dcp_group_create(rt, &o, &g));
    EXPECT_EQ(g, nullptr);
    cgrt_dcp_options_init(&o);
    o.mla.max_num_seqs = 1;
    o.mla.heads = 4;
    o.mla.max_model_len = 64;
  };
  o.world_size = 0;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "world_size 0");
  o.rank = 1;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "rank out of range");
  o.timeout_ms = 0;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "timeout 0");
  o.gather_q = 2;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "gather_q 2");
  o.merge = (cgrt_dcp_merge)3;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "merge 3");
  o.mla.heads = 0;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "mla heads 0");
  o.size = 8;
  expect(CGRT_ERROR_INVALID_ARGUMENT, "size");
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_group_create(rt, nullptr, &g));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_group_create(rt, &o, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_dcp_group_create(nullptr, &o, &g));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_dcp_unique_id(rt, nullptr, nullptr));
  cgrt_dcp_group_destroy(nullptr);
  // One rank alone is a group of one.
  ASSERT_EQ(cgrt_dcp_unique_id(rt, nullptr, &o.id), CGRT_SUCCESS);
  ASSERT_EQ(cgrt_dcp_group_create(rt, &o, &g), CGRT_SUCCESS) << cgrt_last_error();
  cgrt_dcp_group_destroy(g);
  cgrt_dcp_group_destroy(g);  // a second destroy is a no-op
}

TEST(DcpLocalLen, TokenAndPageInterleaved) {
  // 10 tokens over 3 ranks, one by one: ranks hold 4, 3, 3.
  EXPECT_EQ(cgrt_dcp_local_len(10, 0, 3, 1), 4);
  EXPECT_EQ(cgrt_dcp_local_len(10, 1, 3, 1), 3);
  EXPECT_EQ(cgrt_dcp_local_len(10, 2, 3, 1), 3);
  // 100 tokens over 2 ranks in runs of 16: 0-15 r0, 16-31 r1, ..., 96-99 r0.
  EXPECT_EQ(cgrt_dcp_local_len(100, 0, 2, 16), 52);
  EXPECT_EQ(cgrt_dcp_local_len(100, 1, 2, 16), 48);
  for (int len = 0; len < 300; len += 7) {
    int sum = 0;
    for (int r = 0; r < 4; r++) sum += cgrt_dcp_local_len(len, r, 4, 5);
    EXPECT_EQ(sum, len);
  }
  EXPECT_EQ(cgrt_dcp_local_len(0, 0, 2, 1), 0);
  EXPECT_EQ(cgrt_dcp_local_len(-3, 0, 2, 1), 0);
  EXPECT_EQ(cgrt_dcp_local_len(5, 2, 2, 1), -1);
  EXPECT_EQ(cgrt_dcp_local_len(5, 0, 0, 1), -1);
  EXPECT_EQ(cgrt_dcp_local_len(5, 0, 2, 0), -1);
}

}  // namespace
}  // namespace dcp_test
