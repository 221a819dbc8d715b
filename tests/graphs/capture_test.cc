// Capture: progress in the log, a failed capture leaves the set and its stream usable,
// a driver fault at every call of a capture.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

static std::vector<std::string> g_log;
static void log_sink(void *, cgrt_log_level, const char *m) { g_log.push_back(m); }

TEST_F(GraphsTest, CaptureReportsProgressThroughTheLog) {
  start();
  g_log.clear();
  cgrt_set_log_callback(log_sink, nullptr, CGRT_LOG_INFO);
  default_set();
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  size_t per_bucket = 0, summary = 0;
  for (const auto &m : g_log) {
    per_bucket += m.find("captured decode bucket") != std::string::npos ||
                  m.find("captured block bucket") != std::string::npos;
    summary += m.find("captured 24 graphs (0 failed)") != std::string::npos;
  }
  EXPECT_EQ(per_bucket, cgrt_graphs_bucket_count(set));
  EXPECT_EQ(summary, 1u);
}

TEST_F(GraphsTest, CaptureFailureLeavesSetAndStreamUsable) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  make_set(&o);
  eng.fail_at_rows = 16;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("16 rows"), std::string::npos) << msg;
  EXPECT_NE(msg.find("enqueue callback"), std::string::npos) << msg;
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 10), 24) << "16 skipped";
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 10, {}, "other buckets usable");
  eng.fail_at_rows = -1;
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // captures the missing bucket on the same stream
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 10), 16);
  step_and_check(CGRT_GRAPH_DECODE, 10, {}, "recaptured bucket");

  // A workspace growth inside the callback during capture.
  eng.grow_workspace = 1;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 8));
  msg = cgrt_last_error();
  EXPECT_NE(msg.find("CGRT_ERROR_CAPTURING"), std::string::npos) << msg;
  eng.grow_workspace = 0;
  step_and_check(CGRT_GRAPH_DECODE, 12, {}, "after a failed re-capture");
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 7), 16) << "8 is gone";
}

// ---- fault injection -------------------------------------------------------------------

// Every driver call of a capture fails once in turn; the set stays usable.
void GraphsTest::fault_capture(int device_patch) {
  start(synth::Config(), 1);
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  o.device_patch = device_patch;
  int sizes[] = {8, 4};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 2;
  init_cur();
  capture_faults(o, [&] { step_and_check(CGRT_GRAPH_DECODE, 3, {}, "after a capture fault"); });
}

// Fails each driver call of cgrt_graphs_capture once in turn, on a fresh set each time:
// the capture returns a capture status with a message, a second capture succeeds, and
// `after` checks that the set works.
void GraphsTest::capture_faults(const cgrt_graphs_options &o, const std::function<void()> &after) {
  make_set(&o);
  cgrt_fault_plan plan{};
  plan.size = sizeof plan;
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  unsigned long n = cgrt_fault_calls();
  cgrt_fault_set(nullptr);
  ASSERT_GT(n, 10u);
  cgrt_graphs_destroy(set);
  set = nullptr;
  for (unsigned long i = 1; i <= n; i++) {
    make_set(&o);
    plan.fail_at = i;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    cgrt_status st = cgrt_graphs_capture(set);
    std::string sym = cgrt_fault_last_symbol();
    cgrt_fault_set(nullptr);
    EXPECT_TRUE(st == CGRT_SUCCESS || st == CGRT_ERROR_CAPTURE_FAILED || st == CGRT_ERROR_DRIVER ||
                st == CGRT_ERROR_OUT_OF_MEMORY)
        << "call " << i << " (" << sym << "): " << cgrt_status_name(st) << ": " << cgrt_last_error();
    if (st != CGRT_SUCCESS) {
      EXPECT_STRNE(cgrt_last_error(), "") << "call " << i;
    }
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
    after();
    cgrt_graphs_destroy(set);
    set = nullptr;
    if (HasFailure()) {
      ADD_FAILURE() << "fault at call " << i << " (" << sym << ")";
      return;
    }
  }
}

TEST_F(GraphsTest, FaultInjectionAcrossCaptureInstantiate) { fault_capture(0); }
TEST_F(GraphsTest, FaultInjectionAcrossCaptureWithDevicePatch) { fault_capture(1); }

// Issue 14, item 12: a bucket's memory is the graph memory the driver attributes to it
// (memory nodes), not a change of free device memory: cgrt's own allocations made while a
// bucket is captured (device patching's site table per bucket) are not graph memory, and
// the synthetic step has no memory nodes.
TEST_F(GraphsTest, BucketMemoryIsWhatTheDriverAttributesToTheGraph) {
  start();
  default_set(CGRT_REPLAY_POINTER_UPDATE, 1);
  size_t n = cgrt_graphs_bucket_count(set);
  ASSERT_GT(n, 0u);
  for (size_t i = 0; i < n; i++) {
    cgrt_bucket_info b{};
    b.size = sizeof b;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, i, &b));
    ASSERT_TRUE(b.captured);
    EXPECT_EQ(b.memory_bytes, 0u) << "bucket " << i << " (" << b.rows << " rows, device patch " << b.device_patch
                                  << ")";
  }
  EXPECT_EQ(stats().graph_memory_bytes, 0u);
}

}  // namespace cgrt_graphs_test
