// Checked replay: stale pointers refused before launch, counters verified after it.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

TEST_F(GraphsTest, CheckedReplayCatchesWorkspaceReallocatedAfterCapture) {
  start();
  cgrt_tensor_desc t{};
  t.ndim = 1;
  t.shape[0] = eng.max_rows;
  t.dtype = CGRT_DTYPE_F32;
  CUdeviceptr ws = 0;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.w", &t, 1, &ws));
  eng.ws_ptr = ws;
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  auto bt = prepare(4, 1);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  // The workspace grows (not locked): new storage, the old address is freed.
  t.shape[0] = 4 * eng.max_rows;
  CUdeviceptr ws2 = 0;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.w", &t, 1, &ws2));
  ASSERT_NE(ws2, ws);
  std::vector<float> sentinel((size_t)eng.max_rows, 5.0f);
  eng.put(eng.a.p[synth::OUT], sentinel);
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("gt_scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parameter 2"), std::string::npos) << msg;
  EXPECT_EQ(eng.get<float>(eng.a.p[synth::OUT], 4), std::vector<float>(4, 5.0f)) << "nothing launched";
}

TEST_F(GraphsTest, CheckedReplayCatchesUndeclaredRange) {
  start();
  CUdeviceptr h = eng.alloc((size_t)eng.max_rows * 4);
  eng.ws_ptr = h;
  cgrt_range r = {h, (size_t)eng.max_rows * 4, "host scratch"};
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, &r, 1));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  auto bt = prepare(2, 4);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, nullptr, 0));  // the host freed it
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, &r, 1));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
}

TEST_F(GraphsTest, CheckedReplayVerifiesCountersAfterLaunch) {
  start();
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt, 4096));
  CUdeviceptr counters = 0;
  size_t bytes = 0;
  CGRT_ASSERT_OK(cgrt_counters_get(rt, &counters, &bytes));
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  o.block_len = 0;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 4, {}, "clean counters");
  // A step whose kernels leave a counter non-zero (captured that way).
  eng.dirty_counter = counters + 12;
  CGRT_ASSERT_OK(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 4));
  CGRT_EXPECT_STATUS(CGRT_ERROR_COUNTERS_DIRTY, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("checked replay"), std::string::npos) << msg;
  uint32_t zero = 0;
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, counters + 12, &zero, 4));
  eng.dirty_counter = 0;
  CGRT_ASSERT_OK(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 4));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
}

}  // namespace cgrt_graphs_test
