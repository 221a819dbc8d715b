// Checked replay: stale pointers refused before launch, counters verified after it.
#include <algorithm>

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
  eng.put(eng.a[synth::OUT], sentinel);
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("synth_scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parameter 2"), std::string::npos) << msg;
  EXPECT_EQ(eng.get<float>(eng.a[synth::OUT], 4), std::vector<float>(4, 5.0f)) << "nothing launched";
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

// Device memory cgrt does not manage (a library's own workspace: here memory taken from
// the driver directly, neither registered nor declared) is checked by the buffer id the
// driver gave it at capture: accepted while live, refused once freed (H200 run of
// 2026-12-01: a cuBLAS split-K kernel's parameters hold such addresses).
TEST_F(GraphsTest, CheckedReplayAcceptsLiveForeignDeviceMemoryAndRefusesItFreed) {
  start();
  CUdeviceptr h = eng.alloc((size_t)eng.max_rows * 4);
  ASSERT_NE(h, 0u);
  eng.ws_ptr = h;
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  auto bt = prepare(2, 4);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  ASSERT_EQ(eng.drv->cuMemFree(h), CUDA_SUCCESS);
  eng.extra.erase(std::remove(eng.extra.begin(), eng.extra.end(), h), eng.extra.end());
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("device allocation cgrt does not manage"), std::string::npos) << msg;
  EXPECT_NE(msg.find("its allocation was freed"), std::string::npos) << msg;
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

// Issue 14, item 1: a binding to an address no allocation holds (0xdead000) is refused
// before anything is patched or launched, by a replay and by the eager fallback past the
// largest bucket; bound back to live memory, the set works again.
TEST_F(GraphsTest, CheckedReplayRefusesABindingToMemoryNeverAllocated) {
  start();
  int sizes[] = {8};
  checked_set([&](cgrt_graphs_options &o) {
    o.capture_sizes = sizes;
    o.num_capture_sizes = 1;
  });
  step_and_check(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  sentinel_out();
  const cgrt_binding bad = {synth::X, 0xdead000, 0};
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, &bad, 1));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0xdead000"), std::string::npos) << msg;
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 12, nullptr, 0));
  EXPECT_TRUE(out_untouched()) << "nothing launched eagerly";
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, cur[synth::X], 0}}, "x bound back");
  step_and_check(CGRT_GRAPH_DECODE, 12, {}, "eager fallback after binding back");
}

// Host memory cgrt never allocated (and the driver does not know) is refused too.
TEST_F(GraphsTest, CheckedReplayRefusesABindingToUnregisteredHostMemory) {
  start();
  checked_set();
  step_and_check(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  std::vector<float> host(eng.bytes[synth::X] / 4, 1.0f);
  sentinel_out();
  const cgrt_binding bad = {synth::X, (CUdeviceptr)(uintptr_t)host.data(), 0};
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, &bad, 1));
  EXPECT_NE(std::string(cgrt_last_error()).find("'x'"), std::string::npos) << cgrt_last_error();
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, cur[synth::X], 0}}, "x bound back");
}

// A buffer bound into a workspace that grows before the lock after capture: the old
// storage is freed, and the next checked step refuses the buffer (it used to launch on
// the freed memory); bound to the grown storage it runs.
TEST_F(GraphsTest, CheckedReplayRefusesABufferWhoseWorkspaceGrewAfterCapture) {
  start();
  checked_set();
  cgrt_tensor_desc t{};
  t.ndim = 1;
  t.shape[0] = eng.max_rows;
  t.dtype = CGRT_DTYPE_F32;
  CUdeviceptr w1 = 0, w2 = 0;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.w_in", &t, 1, &w1));
  cur[synth::WIN] = copy_of(synth::WIN, w1);
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::WIN, w1, 0}}, "w_in in a workspace");
  t.shape[0] = 4 * eng.max_rows;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.w_in", &t, 1, &w2));
  sentinel_out();
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, nullptr, 0));
  EXPECT_NE(std::string(cgrt_last_error()).find("'w_in'"), std::string::npos) << cgrt_last_error();
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  cur[synth::WIN] = copy_of(synth::WIN, w2);
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::WIN, w2, 0}}, "w_in bound to the grown workspace");
}

// Copy-in replay: a binding is copied from, so it must lie inside live memory.
TEST_F(GraphsTest, CheckedCopyInReplayRefusesABindingOutsideLiveMemory) {
  start();
  checked_set([](cgrt_graphs_options &o) { o.replay_mode = CGRT_REPLAY_COPY_IN; });
  step_and_check(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  sentinel_out();
  const cgrt_binding bad = {synth::X, 0xdead000, 0};
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, &bad, 1));
  EXPECT_NE(std::string(cgrt_last_error()).find("copy-in binding of 'x'"), std::string::npos) << cgrt_last_error();
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  EXPECT_EQ(stats().copies, 0u);
}

// Declared ranges are live allocations: checked replay keeps their buffer ids.
TEST_F(GraphsTest, DeclaredRangesMustLieInsideOneLiveAllocation) {
  start();
  checked_set();
  const CUdeviceptr h = eng.alloc(256);
  ASSERT_NE(h, 0u);
  cgrt_range never = {0xdead000, 64, "never allocated"}, past = {h, (size_t)1 << 22, "past its allocation"},
             fine = {h + 64, 192, "inside"};
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_set_ranges(set, &never, 1));
  EXPECT_NE(std::string(cgrt_last_error()).find("never allocated"), std::string::npos) << cgrt_last_error();
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_set_ranges(set, &past, 1));
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, &fine, 1));
}

namespace {
// synth_scale with n = 0: its in/out parameters are never read. `in` holds `unused`, a
// value no allocation was ever at; `out` the host's chosen address.
struct Unread {
  const cgrt__driver *drv = nullptr;
  CUfunction f = nullptr;
  CUdeviceptr unused = 0, out = 0;
};
cgrt_status unread_cb(void *user, CUstream s, const cgrt_batch_desc *) {
  Unread *u = static_cast<Unread *>(user);
  int n = 0;
  float a = 1.0f;
  void *args[] = {&n, &u->unused, &u->out, &a};
  return u->drv->cuLaunchKernel(u->f, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS ? CGRT_SUCCESS
                                                                                      : CGRT_ERROR_DRIVER;
}
}  // namespace

// A whole 8-byte parameter holding a value at which the driver knows no allocation when
// the graph is indexed (as cuBLASLt passes the host address of alpha, on the host's stack,
// to its split-K reduce kernel, which does not read it: H200, perf15 run 2) is no pointer
// for checked replay; the other parameter, into a registered buffer, is still checked.
TEST_F(GraphsTest, CheckedReplayIgnoresAHostAddressAKernelDoesNotRead) {
  start();
  cgrt_module *m = nullptr;
  Unread u;
  load_synth_scale(&m, &u.f);
  ASSERT_NE(u.f, nullptr);
  u.drv = eng.drv;
  u.unused = 0x7ffc2e6d4060ull;  // 8-byte aligned, above 4 GiB: looks like a pointer
  unsigned long long id = 0;
  ASSERT_EQ(eng.drv->cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, u.unused), CUDA_ERROR_INVALID_VALUE)
      << "no allocation there";
  const CUdeviceptr y = eng.alloc(eng.bytes[synth::Y]);
  ASSERT_NE(y, 0u);
  cgrt_buffer_desc buf = {"y", y, eng.bytes[synth::Y], CGRT_BUFFER_INOUT};
  u.out = y;  // a registered buffer
  one_bucket_set(unread_cb, &u, &buf, 1, 0, /*checked=*/1);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, nullptr, 0));
  ASSERT_EQ(sync(), CGRT_SUCCESS);
  ASSERT_EQ(eng.drv->cuMemFree(y), CUDA_SUCCESS);  // the buffer's memory goes: refused
  eng.extra.erase(std::remove(eng.extra.begin(), eng.extra.end(), y), eng.extra.end());
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, nullptr, 0));
  const std::string msg = cgrt_last_error();
  EXPECT_EQ(msg.find("0x7ffc2e6d4060"), std::string::npos) << msg;
  CGRT_ASSERT_OK(cgrt_module_unload(m));
}

}  // namespace cgrt_graphs_test
