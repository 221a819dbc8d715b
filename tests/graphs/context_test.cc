// Every graph-set and module entry point makes the runtime's context current on a new
// thread, and threads capture while others synchronize the context (runtime entry points:
// tests/runtime/context_test.cc).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/emu/emu.h"
#include "runtime/runtime_internal.h"
#include "tests/graphs/one_kernel_fixture.h"

namespace cgrt_graphs_contract {
namespace {

// ---- item 10: every entry point makes the context current on a new thread ----------------

TEST_F(GraphsValidation, StepOnANewThreadAfterStatsOrRanges) {
  start();
  make_set();
  std::thread([&] {
    cgrt_graphs_stats st = {};
    st.size = sizeof st;
    CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_graphs_get_stats(set, &st));
    CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, nullptr, 0));
  }).join();
  std::thread([&] {
    CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_graphs_set_ranges(set, nullptr, 0));
    CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0));
  }).join();
  step_and_check(4);
}

TEST_F(GraphsValidation, EveryGraphAndModuleEntryPointMakesTheContextCurrent) {
  start();
  make_set();
  cgrt_graphs *other = nullptr;
  cgrt_module *m2 = nullptr;
  struct Entry {
    const char *name;
    std::function<void()> call;
  };
  std::vector<Entry> entries = {
      {"cgrt_graphs_get_stats", [&] {
         cgrt_graphs_stats s = {};
         s.size = sizeof s;
         EXPECT_EQ(cgrt_graphs_get_stats(set, &s), CGRT_SUCCESS);
       }},
      {"cgrt_graphs_set_ranges", [&] { EXPECT_EQ(cgrt_graphs_set_ranges(set, nullptr, 0), CGRT_SUCCESS); }},
      {"cgrt_graphs_stream", [&] { EXPECT_NE(cgrt_graphs_stream(set), nullptr); }},
      {"cgrt_graphs_bucket_count", [&] { EXPECT_EQ(cgrt_graphs_bucket_count(set), 3u); }},
      {"cgrt_graphs_get_bucket", [&] {
         cgrt_bucket_info b = {};
         b.size = sizeof b;
         EXPECT_EQ(cgrt_graphs_get_bucket(set, 0, &b), CGRT_SUCCESS);
       }},
      {"cgrt_graphs_bucket_rows", [&] { EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 3), 4); }},
      {"cgrt_graphs_step", [&] { EXPECT_EQ(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0), CGRT_SUCCESS); }},
      {"cgrt_graphs_draft", [&] { EXPECT_EQ(cgrt_graphs_draft(set, 1, nullptr, 0), CGRT_ERROR_NOT_SUPPORTED); }},
      {"cgrt_graphs_capture", [&] { EXPECT_EQ(cgrt_graphs_capture(set), CGRT_SUCCESS); }},
      {"cgrt_graphs_recapture", [&] { EXPECT_EQ(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 2), CGRT_SUCCESS); }},
      {"cgrt_graphs_create", [&] {
         cgrt_graphs_options o;
         options(&o);
         EXPECT_EQ(cgrt_graphs_create(rt, &o, &other), CGRT_SUCCESS);
       }},
      {"cgrt_graphs_destroy", [&] { EXPECT_EQ(cgrt_graphs_destroy(other), CGRT_SUCCESS); }},
      {"cgrt_module_load", [&] { EXPECT_EQ(cgrt_module_load(rt, synth::kernels_image(), &m2), CGRT_SUCCESS); }},
      {"cgrt_module_function", [&] {
         CUfunction f = nullptr;
         EXPECT_EQ(cgrt_module_function(m2, "synth_scale", &f), CGRT_SUCCESS);
       }},
      {"cgrt_module_unload", [&] { EXPECT_EQ(cgrt_module_unload(m2), CGRT_SUCCESS); }},
      {"cgrt_launch_kernel", [&] {
         int n = 4;
         CUdeviceptr in = buf[IN], out = buf[OUT];
         float a = 2.0f;
         void *args[] = {&n, &in, &out, &a};
         EXPECT_EQ(cgrt_launch_kernel(rt, fn, 1, 1, 1, 128, 1, 1, 0, nullptr, args), CGRT_SUCCESS);
       }},
  };
  for (const Entry &e : entries) EXPECT_TRUE(leaves_context_current(rt, e.call)) << e.name;
  step_and_check(4);
}

// ---- adversarial L6: threads capture while others synchronize the context --------------

// The driver fails a context synchronization (cuCtxSynchronize) while any stream of the
// context captures, and invalidates that capture, even a thread-local one of another
// thread: one thread's cgrt_runtime_synchronize broke the capture of another thread's
// graph set (the emulation now does as the driver; on the H200 the adversarial case of
// eight threads each capturing and stepping a set crashed). cgrt waits for captures in
// progress instead, and a capture that begins meanwhile waits for the synchronization.
TEST_F(GraphsValidation, ContextSynchronizationWaitsForAnotherThreadsCapture) {
  start();
  make_set(0);
  std::atomic<int> phase{0};  // 1: the capture is in its callback; 2: the callback returns
  std::atomic<int> synced_in_phase{-1};
  std::vector<cgrt_status> got(3, CGRT_ERROR_INTERNAL);
  std::thread other([&] {
    while (phase.load() < 1) std::this_thread::yield();
    got[0] = cgrt_runtime_synchronize(rt);
    synced_in_phase = phase.load();
    got[1] = cgrt_workspace_verify(rt);
    got[2] = cgrt_counters_verify(rt);
  });
  under_capture = [&] {
    phase = 1;
    // Time for the other thread to reach its synchronization (it must wait).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    phase = 2;
  };
  cgrt_status cap = cgrt_graphs_capture(set);
  other.join();
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, cap);
  for (cgrt_status g : got) CGRT_EXPECT_STATUS(CGRT_SUCCESS, g);
  EXPECT_EQ(synced_in_phase.load(), 2) << "the synchronization ran during the capture";
  step_and_check(4);
}

// Many threads, each capturing and stepping a set of its own on one runtime, while the
// others synchronize the context between their steps (the adversarial case, smaller).
TEST_F(GraphsValidation, ThreadsCaptureAndStepTheirOwnSetsWhileOthersSynchronize) {
  start();
  constexpr int kThreads = 6;
  // Each thread's own in/out (reserved here: no reservation may grow during a capture).
  std::vector<std::array<CUdeviceptr, 2>> mine(kThreads);
  std::vector<float> in(64);
  for (int t = 0; t < kThreads; t++) {
    std::string name = "validation.thread" + std::to_string(t);
    cgrt_tensor_desc td[2] = {{1, {64}, CGRT_DTYPE_F32}, {1, {64}, CGRT_DTYPE_F32}};
    CGRT_ASSERT_OK(cgrt_workspace_request(rt, 0, name.c_str(), td, 2, mine[(size_t)t].data()));
    for (int i = 0; i < 64; i++) in[(size_t)i] = (float)(i + 100 * t);
    CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, mine[(size_t)t][0], in.data(), 256));
  }
  cgrt_graphs_options base;
  options(&base);
  std::vector<std::string> errs(kThreads);
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; t++)
    th.emplace_back([&, t] {
      auto fail = [&](const std::string &what) { errs[(size_t)t] = what + ": " + cgrt_last_error(); };
      cgrt_graphs_options o = base;
      cgrt_buffer_desc d[2] = {descs[IN], descs[OUT]};
      d[0].ptr = mine[(size_t)t][0];
      d[1].ptr = mine[(size_t)t][1];
      o.buffers = d;
      o.num_buffers = 2;
      cgrt_graphs *s = nullptr;
      if (cgrt_graphs_create(rt, &o, &s) != CGRT_SUCCESS) return fail("create");
      std::vector<float> out(64);
      for (int round = 0; round < 4 && errs[(size_t)t].empty(); round++) {
        int n = 1 + (t + round) % 4;
        if ((round == 0 ? cgrt_graphs_capture(s) : cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, n)) != CGRT_SUCCESS)
          fail("capture, round " + std::to_string(round));
        else if (cgrt_graphs_step(s, CGRT_GRAPH_DECODE, n, nullptr, 0) != CGRT_SUCCESS)
          fail("step");
        else if (cgrt_runtime_synchronize(rt) != CGRT_SUCCESS)
          fail("synchronize");
        else if (cgrt_memcpy_dtoh(rt, out.data(), mine[(size_t)t][1], 256) != CGRT_SUCCESS)
          fail("read back");
        for (int i = 0; i < n && errs[(size_t)t].empty(); i++)
          if (out[(size_t)i] != 2.0f * (float)(i + 100 * t) + 1.0f)
            errs[(size_t)t] = "row " + std::to_string(i) + " holds " + std::to_string(out[(size_t)i]);
      }
      if (cgrt_graphs_destroy(s) != CGRT_SUCCESS) fail("destroy");
    });
  for (std::thread &x : th) x.join();
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(errs[(size_t)t], "") << "thread " << t;
  make_set();
  step_and_check(4);
}

}  // namespace
}  // namespace cgrt_graphs_contract
