// Failures in a DCP group: an NCCL call (or a launch between collectives)
// failing on one rank makes every rank return a failed status, nobody hangs,
// the group stays failed, and nothing leaks; a rank that never joins makes the
// others' creation time out; a capture that fails on one rank makes every
// rank's agreement say "fall back".
#include "cgrt/cgrt_fault.h"
#include "tests/dcp/dcp_harness.h"

namespace dcp_test {
namespace {

class DcpFault : public Harness {
 protected:
  void SetUp() override {
    // On GPUs a peer's abort is not always seen by NCCL: each case would wait out
    // timeout_ms. The matrix runs on the emulation; docs/dcp.md gives the GPU protocol.
    if (!cgrt_test::is_emulated(reference_runtime())) GTEST_SKIP() << "the fault matrix runs on the emulated NCCL";
  }
  void TearDown() override {
    cgrt_fault_set(nullptr);
    Harness::TearDown();
  }

  // Creates the ranks of b on runtimes with fault injection (all ranks concurrently).
  void setup_all(std::vector<Rank> &rk, const Batch &b, int timeout_ms = 20000) {
    const cgrt_dcp_id id = new_id(1);
    ranks(b.world, [&](int r) { setup(rk[r], b, r, id, 1, false, timeout_ms); });
  }

  // Calls of `symbol` one eager step makes over all ranks (no fault).
  unsigned long count_calls(const Batch &b, const char *symbol) {
    std::vector<Rank> rk(b.world);
    setup_all(rk, b);
    cgrt_fault_plan plan{sizeof plan, 0, symbol, 0, 0};
    EXPECT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
    ranks(b.world, [&](int r) {
      EXPECT_EQ(cgrt_dcp_step(rk[r].g, nullptr, &rk[r].a), CGRT_SUCCESS) << cgrt_last_error();
      EXPECT_EQ(cgrt_dcp_wait(rk[r].g, nullptr), CGRT_SUCCESS) << cgrt_last_error();
    });
    const unsigned long n = cgrt_fault_calls();
    cgrt_fault_set(nullptr);
    return n;
  }
};

// Every counted call of each symbol of a step, failing in turn (on whichever
// rank makes it).
TEST_F(DcpFault, EveryRankFailsCleanlyWhenOneCallFails) {
  const char *const a2a[] = {"ncclAllGather",  "ncclSend",         "ncclRecv",
                             "ncclGroupEnd",   "ncclGroupStart",   "ncclCommGetAsyncError",
                             "cuLaunchKernel", "cuLaunchKernelEx", "cuMemcpyDtoDAsync", nullptr};
  const char *const rs[] = {"ncclAllGather", "ncclReduceScatter", "cuLaunchKernel", "cuMemcpyDtoDAsync", nullptr};
  for (int w : {2, 3})
    for (cgrt_dcp_merge merge : {CGRT_DCP_MERGE_ALL_TO_ALL, CGRT_DCP_MERGE_REDUCE_SCATTER}) {
      Batch b;
      b.world = w;
      b.merge = merge;
      const char *const *symbols = merge == CGRT_DCP_MERGE_ALL_TO_ALL ? a2a : rs;
      b.lens = {70, 0, 9};
      b.fill(77);
      for (; *symbols; symbols++) {
        const char *sym = *symbols;
        const unsigned long calls = count_calls(b, sym);
        EXPECT_GT(calls, 0u) << sym << ": the step makes no such call";
        for (unsigned long at = 1; at <= calls; at++) {
          SCOPED_TRACE(std::string(sym) + " #" + std::to_string(at) + " of " + std::to_string(calls) + ", world " +
                       std::to_string(w) + ", merge " + std::to_string((int)merge));
          std::vector<Rank> rk(w);
          setup_all(rk, b);
          cgrt_fault_plan plan{sizeof plan, at, sym, 0, 0};
          ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
          // Two steps: a rank that fails after the step's last collective
          // leaves the others with correct results; they fail at their next
          // collective.
          ranks(w, [&](int r) {
            Rank &k = rk[r];
            for (int i = 0; i < 2 && k.msg.empty(); i++) {
              k.step = cgrt_dcp_step(k.g, nullptr, &k.a);
              if (k.step != CGRT_SUCCESS) k.msg = cgrt_last_error();
              k.wait = cgrt_dcp_wait(k.g, nullptr);
              if (k.step == CGRT_SUCCESS && k.wait != CGRT_SUCCESS) k.msg = cgrt_last_error();
            }
          });
          EXPECT_EQ(cgrt_fault_injected(), 1u);
          cgrt_fault_set(nullptr);
          for (int r = 0; r < w; r++) {
            Rank &k = rk[r];
            EXPECT_TRUE(k.step != CGRT_SUCCESS || k.wait != CGRT_SUCCESS) << "rank " << r << " did not fail";
            EXPECT_NE(k.msg, "") << "rank " << r;
            cgrt_dcp_info info{};
            info.size = sizeof info;
            ASSERT_EQ(cgrt_dcp_group_get_info(k.g, &info), CGRT_SUCCESS);
            EXPECT_EQ(info.failed, 1) << "rank " << r << ": " << k.msg;
            // A failed group refuses further work at once.
            CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_dcp_step(k.g, nullptr, &k.a));
            int all = 1;
            CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_dcp_agree(k.g, 1, &all));
            EXPECT_EQ(all, 0);
          }
        }
      }
    }
}

// A rank whose communicator creation fails never joins: the others give up
// after timeout_ms, and no creation leaves anything behind.
TEST_F(DcpFault, CreationFailsOnEveryRankWhenOneCannotJoin) {
  Batch b;
  b.world = 3;
  b.lens = {20};
  b.fill(3);
  const cgrt_dcp_id id = new_id(1);
  for (int r = 1; r < b.world; r++) runtime(r, 1);
  cgrt_fault_plan plan{sizeof plan, 2, "ncclCommInitRankConfig", 0, 0};
  ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
  std::vector<cgrt_status> st(b.world);
  std::vector<std::string> msg(b.world);
  ranks(b.world, [&](int r) {
    cgrt_dcp_options o = options(b, r, id, b.max_len());
    o.timeout_ms = 300;
    cgrt_dcp_group *g = nullptr;
    st[r] = cgrt_dcp_group_create(runtime(r, 1), &o, &g);
    msg[r] = cgrt_last_error();
    EXPECT_EQ(g, nullptr);
    cgrt_dcp_group_destroy(g);
  });
  EXPECT_EQ(cgrt_fault_injected(), 1u);
  int timed_out = 0;
  for (int r = 0; r < b.world; r++) {
    EXPECT_EQ(st[r], CGRT_ERROR_DRIVER) << msg[r];
    timed_out += msg[r].find("not every rank joined within 300 ms") != std::string::npos;
  }
  EXPECT_GE(timed_out, 1);
}

// A capture that fails on one rank (a collective refused while capturing): the
// agreement after capturing tells every rank to fall back.
TEST_F(DcpFault, FailedCaptureMakesEveryRankFallBack) {
  Batch b;
  b.world = 2;
  b.lens = {50, 5};
  b.fill(9);
  std::vector<Rank> rk(b.world);
  setup_all(rk, b, 2000);
  // Warm-up outside capture, as the header asks.
  ranks(b.world, [&](int r) {
    ASSERT_EQ(cgrt_dcp_step(rk[r].g, nullptr, &rk[r].a), CGRT_SUCCESS) << cgrt_last_error();
    ASSERT_EQ(cgrt_dcp_wait(rk[r].g, nullptr), CGRT_SUCCESS) << cgrt_last_error();
  });
  cgrt_fault_plan plan{sizeof plan, 2, "ncclSend", 0, 0};
  ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
  std::vector<int> all_ok(b.world, -1), captured(b.world, 0);
  ranks(b.world, [&](int r) {
    Rank &k = rk[r];
    const cgrt__driver *d = k.t.rt->drv;
    CUstream s = nullptr;
    ASSERT_EQ(d->cuCtxSetCurrent(k.t.rt->ctx), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    const cgrt_status st = cgrt_dcp_step(k.g, s, &k.a);
    CUgraph graph = nullptr;
    const CUresult er = d->cuStreamEndCapture(s, &graph);
    captured[r] = st == CGRT_SUCCESS && er == CUDA_SUCCESS;
    int ok = 0;
    cgrt_dcp_agree(k.g, captured[r],
                   &ok);  // fails on a failed group: ok stays 0
    all_ok[r] = ok;
    if (graph) d->cuGraphDestroy(graph);
    d->cuStreamDestroy(s);
  });
  EXPECT_EQ(cgrt_fault_injected(), 1u);
  // The faulted rank's capture fails; the other's may too, when it sees the
  // abort.
  EXPECT_LE(captured[0] + captured[1], 1);
  for (int r = 0; r < b.world; r++) EXPECT_EQ(all_ok[r], 0) << "rank " << r << " kept its graph";
}

}  // namespace
}  // namespace dcp_test
