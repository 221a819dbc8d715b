// Graph sets and modules as handles: invalid arguments, destruction with the runtime, a
// destroyed set, the module API.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

TEST_F(GraphsTest, InvalidArguments) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  cgrt_graphs *s = nullptr;
  o.enqueue = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &s));
  eng.options(&o, descs);
  descs[synth::SEQ].bytes = 8;  // too small for the largest bucket
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &s));
  EXPECT_NE(std::string(cgrt_last_error()).find("seq_lens"), std::string::npos);
  eng.options(&o, descs);
  make_set(&o);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 0, nullptr, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 33, nullptr, 0));
  cgrt_binding bad = {99, 1, 0};
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, &bad, 1));
  CGRT_EXPECT_STATUS(CGRT_ERROR_NOT_SUPPORTED, cgrt_graphs_draft(set, 1, nullptr, 0));
  EXPECT_EQ(cgrt_graphs_destroy(nullptr), CGRT_SUCCESS);
}

TEST_F(GraphsTest, ModuleApiLoadsAndLaunchesAHostKernel) {
  start();
  cgrt_module *m = nullptr;
  CUfunction f = nullptr;
  load_synth_scale(&m, &f);
  ASSERT_NE(f, nullptr);
  CUfunction none = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_module_function(m, "no_such_kernel", &none));
  std::vector<float> in(64), out(64);
  for (int i = 0; i < 64; i++) in[i] = (float)i;
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, eng.a[synth::WIN], in.data(), 256));
  int n = 64;
  CUdeviceptr pin = eng.a[synth::WIN], pout = eng.a[synth::WOUT];
  float a = 2.0f;
  void *args[] = {&n, &pin, &pout, &a};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args));
  CGRT_ASSERT_OK(cgrt_stream_synchronize(rt, nullptr));
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, out.data(), pout, 256));
  for (int i = 0; i < 64; i++) EXPECT_EQ(out[i], 2.0f * i + 1.0f);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_launch_kernel(rt, f, 0, 1, 1, 64, 1, 1, 0, nullptr, args));
  CGRT_ASSERT_OK(cgrt_module_unload(m));
  EXPECT_EQ(cgrt_module_unload(nullptr), CGRT_SUCCESS);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_module_unload(m));  // unloaded twice
  CUfunction f2 = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_module_function(m, "x", &f2));
}

TEST_F(GraphsTest, RuntimeDestroyTakesLiveSets) {
  start();
  default_set();
  eng.destroy();
  cgrt_graphs *dead = set;
  EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS);  // destroys the set, logs a warning
  rt = nullptr;
  set = nullptr;
  // The set went with the runtime: its handle is no longer live, and nothing reads it.
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_step(dead, CGRT_GRAPH_DECODE, 1, nullptr, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_destroy(dead));
}

TEST_F(GraphsTest, DestroyedSetIsRejected) {
  start();
  default_set();
  cgrt_graphs *dead = set;
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_destroy(dead));
  EXPECT_NE(std::string(cgrt_last_error()).find("not a live graph set"), std::string::npos);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_step(dead, CGRT_GRAPH_DECODE, 1, nullptr, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_capture(dead));
  EXPECT_EQ(cgrt_graphs_bucket_rows(dead, CGRT_GRAPH_DECODE, 1), 0);
  EXPECT_EQ(cgrt_graphs_bucket_count(dead), 0u);
}

// Issue 14, item 3: a module whose runtime was destroyed is no longer live (the runtime
// unloads it with a warning); nothing reads freed memory.
TEST_F(GraphsTest, ModuleOutlivingItsRuntimeIsNoLongerLive) {
  start();
  cgrt_module *m = nullptr, *kept = nullptr;
  CUfunction f = nullptr;
  load_synth_scale(&m, &f);
  ASSERT_NE(f, nullptr);
  CGRT_ASSERT_OK(cgrt_module_load(rt, synth::kernels_image(), &kept));
  CGRT_ASSERT_OK(cgrt_module_unload(kept));  // unloaded before: no warning for it
  eng.destroy();
  EXPECT_EQ(cgrt_test::warnings_containing("destroying a module",
                                           [&] { EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS); }),
            1u);
  rt = nullptr;
  f = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_module_function(m, "synth_scale", &f));
  EXPECT_EQ(f, nullptr);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_module_unload(m));
}

}  // namespace cgrt_graphs_test
