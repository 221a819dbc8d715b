// Device memory known to the runtime (cgrt_memory.h: cgrt_mem_alloc, cgrt_mem_register)
// under checked replay: allocations freed and handed out again at the same address are
// told apart by their buffer ids; host-backed arrays on the emulation.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

// Issue 14, item 1: x bound to an allocation that is then freed and allocated again
// (the driver may hand out the same address: then only the buffer id tells) is refused
// until the host binds the new allocation.
TEST_F(GraphsTest, CheckedReplayRefusesABufferWhoseAllocationWasFreedAndReallocated) {
  start();
  checked_set();
  const size_t xb = eng.bytes[synth::X];
  CUdeviceptr a = 0, b = 0;
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt, xb, &a));
  cur[synth::X] = copy_of(synth::X, a);
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, a, 0}}, "x in cgrt_mem_alloc memory");
  CGRT_ASSERT_OK(cgrt_mem_free(rt, a));
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt, xb, &b));
  RecordProperty("device_address_reused", b == a ? 1 : 0);
  sentinel_out();
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  if (b == a) {
    EXPECT_NE(msg.find("reused"), std::string::npos) << msg;
  }
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  cur[synth::X] = copy_of(synth::X, b);
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, b, 0}}, "x bound to the new allocation");
  cur[synth::X] = eng.a[synth::X];
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, cur[synth::X], 0}}, "x bound back");
  CGRT_ASSERT_OK(cgrt_mem_free(rt, b));
  if (!cgrt_test::is_emulated(rt)) return;
  // On the emulation the same host memory registered, unregistered and registered again
  // is the same address with a new buffer id, every time.
  std::vector<float> host(xb / 4);
  const CUdeviceptr h = (CUdeviceptr)(uintptr_t)host.data();
  CGRT_ASSERT_OK(cgrt_mem_register(rt, h, xb));
  cur[synth::X] = copy_of(synth::X, h);
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, h, 0}}, "x in registered host memory");
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt, h));
  CGRT_ASSERT_OK(cgrt_mem_register(rt, h, xb));
  sentinel_out();
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, nullptr, 0));
  msg = cgrt_last_error();
  EXPECT_NE(msg.find("reused"), std::string::npos) << msg;
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, h, 0}}, "x bound to the new registration");
  cur[synth::X] = eng.a[synth::X];
  step_and_check(CGRT_GRAPH_DECODE, 5, {{synth::X, cur[synth::X], 0}}, "x bound back");
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt, h));
}

// A kernel parameter that is no registered buffer (the last kernel writes into memory of
// cgrt_mem_alloc): freed and allocated again, it is refused by its identity.
TEST_F(GraphsTest, CheckedReplayRefusesAParameterIntoAFreedAndReallocatedAllocation) {
  start();
  const size_t bytes = (size_t)eng.max_rows * 4;
  CUdeviceptr a = 0, b = 0;
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt, bytes, &a));
  eng.ws_ptr = a;
  checked_set();
  auto bt = prepare(4, 1);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_mem_free(rt, a));
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt, bytes, &b));
  sentinel_out();
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("synth_scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parameter 2"), std::string::npos) << msg;
  if (b == a) {
    EXPECT_NE(msg.find("reused"), std::string::npos) << msg;
  }
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  CGRT_ASSERT_OK(cgrt_mem_free(rt, b));
}

// A registered external range (here memory the engine allocated from the driver) is
// known; freed behind cgrt's back, it is refused.
TEST_F(GraphsTest, CheckedReplayRefusesAParameterIntoAFreedRegisteredRange) {
  start();
  const size_t bytes = (size_t)eng.max_rows * 4;
  CUdeviceptr ext = 0;
  ASSERT_EQ(eng.drv->cuMemAlloc(&ext, bytes), CUDA_SUCCESS);
  CGRT_ASSERT_OK(cgrt_mem_register(rt, ext, bytes));
  eng.ws_ptr = ext;
  checked_set();
  auto bt = prepare(4, 1);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  ASSERT_EQ(sync(), CGRT_SUCCESS);
  ASSERT_EQ(eng.drv->cuMemFree(ext), CUDA_SUCCESS);  // without cgrt_mem_unregister
  sentinel_out();
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  EXPECT_NE(std::string(cgrt_last_error()).find("registered range"), std::string::npos) << cgrt_last_error();
  EXPECT_TRUE(out_untouched()) << "nothing launched";
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt, ext));
}

// Host-backed arrays: on the emulation registered host memory is usable by copies,
// memsets and kernels; on a GPU host memory the driver does not know is refused.
TEST_F(GraphsTest, RegisteredHostMemoryIsUsableOnTheEmulation) {
  start();
  std::vector<float> in(64), out(64, 0.0f);
  const CUdeviceptr hin = (CUdeviceptr)(uintptr_t)in.data(), hout = (CUdeviceptr)(uintptr_t)out.data();
  if (!cgrt_test::is_emulated(rt)) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt, hin, 256));
    EXPECT_NE(std::string(cgrt_last_error()).find("not inside memory"), std::string::npos) << cgrt_last_error();
    return;
  }
  CGRT_ASSERT_OK(cgrt_mem_register(rt, hin, 256));
  CGRT_ASSERT_OK(cgrt_mem_register(rt, hout, 256));
  std::vector<float> src(64);
  for (int i = 0; i < 64; i++) src[i] = (float)i;
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, hin, src.data(), 256));  // passes the emulation's range checks
  CGRT_ASSERT_OK(cgrt_memset_d8(rt, hout, 0xff, 256));
  cgrt_module *m = nullptr;
  CUfunction f = nullptr;
  load_synth_scale(&m, &f);
  ASSERT_NE(f, nullptr);
  int n = 64;
  CUdeviceptr pin = hin, pout = hout;
  float a = 3.0f;
  void *args[] = {&n, &pin, &pout, &a};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args));
  CGRT_ASSERT_OK(cgrt_stream_synchronize(rt, nullptr));
  for (int i = 0; i < 64; i++) EXPECT_EQ(out[i], 3.0f * i + 1.0f) << i;
  CGRT_ASSERT_OK(cgrt_module_unload(m));
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt, hin));
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt, hout));
  CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_memcpy_htod(rt, hin, src.data(), 256));  // unknown again
}

}  // namespace cgrt_graphs_test
