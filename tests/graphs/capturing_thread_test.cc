// What must not run on a thread while it captures (what synchronizes, graph-set calls,
// frees and other driver work) is refused with CGRT_ERROR_CAPTURING, and the capture goes
// on.
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

// ---- what synchronizes is refused on a capturing thread (F11) ---------------------------

TEST_F(GraphsValidation, WhatSynchronizesIsRefusedOnTheCapturingThread) {
  start();
  make_set(0);
  std::vector<std::pair<std::string, cgrt_status>> got;
  std::string msg;
  cgrt_status other_thread = CGRT_ERROR_INTERNAL;
  under_capture = [&] {
    unsigned char host[4] = {};
    got.emplace_back("cgrt_stream_synchronize", cgrt_stream_synchronize(rt, nullptr));
    msg = cgrt_last_error();
    got.emplace_back("cgrt_runtime_synchronize", cgrt_runtime_synchronize(rt));
    got.emplace_back("cgrt_memcpy_htod", cgrt_memcpy_htod(rt, buf[OUT], host, 4));
    got.emplace_back("cgrt_memcpy_dtoh", cgrt_memcpy_dtoh(rt, host, buf[OUT], 4));
    got.emplace_back("cgrt_memset_d8", cgrt_memset_d8(rt, buf[OUT], 0, 4));
    // Another thread does not capture (thread-local capture mode): it may synchronize.
    std::thread([&] { other_thread = cgrt_stream_synchronize(rt, nullptr); }).join();
  };
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // refused before the driver saw them: the capture went on
  ASSERT_EQ(got.size(), 5u);
  for (const auto &g : got) EXPECT_EQ(g.second, CGRT_ERROR_CAPTURING) << g.first << ": " << cgrt_status_name(g.second);
  EXPECT_NE(msg.find("cgrt_stream_synchronize: called during graph capture on this thread"), std::string::npos)
      << msg;
  EXPECT_EQ(other_thread, CGRT_SUCCESS);
  step_and_check(4);
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));  // the capture is over
}

// ---- adversarial L8: what must not run during capture is refused on that thread -------

TEST_F(GraphsValidation, WhatMustNotRunDuringCaptureIsRefusedOnTheCapturingThread) {
  start();
  make_set(0);
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt, 1024));
  std::vector<std::pair<std::string, cgrt_status>> got;
  cgrt_module *loaded = nullptr;
  cgrt_runtime *made = nullptr;
  under_capture = [&] {
    got.emplace_back("cgrt_module_load", cgrt_module_load(rt, synth::kernels_image(), &loaded));
    got.emplace_back("cgrt_module_unload", cgrt_module_unload(mod));
    got.emplace_back("cgrt_runtime_create", cgrt_runtime_create(nullptr, &made));
    got.emplace_back("cgrt_runtime_destroy", cgrt_runtime_destroy(rt));
    got.emplace_back("cgrt_workspace_verify", cgrt_workspace_verify(rt));
    got.emplace_back("cgrt_counters_verify", cgrt_counters_verify(rt));
  };
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // refused before the driver saw them: the capture went on
  ASSERT_EQ(got.size(), 6u);
  for (const auto &g : got) {
    EXPECT_EQ(g.second, CGRT_ERROR_CAPTURING) << g.first << ": " << cgrt_status_name(g.second);
  }
  EXPECT_EQ(loaded, nullptr);
  EXPECT_EQ(made, nullptr);
  // Nothing was unloaded or destroyed: the module's kernel and the runtime still work.
  step_and_check(4);
  CGRT_ASSERT_OK(cgrt_workspace_verify(rt));
  CGRT_ASSERT_OK(cgrt_counters_verify(rt));
}

// ---- N2: graph-set calls on the capturing thread ------------------------------------------
// A step of the capturing set itself would wait for the set's own lock (a hang); another
// set's step, draft, capture or creation would run outside the capture being recorded.
// All are refused with CGRT_ERROR_CAPTURING, and the capture goes on.

TEST_F(GraphsValidation, GraphSetCallsAreRefusedOnTheCapturingThread) {
  start();
  make_set(0);
  cgrt_graphs_options o;
  options(&o);
  cgrt_graphs *other = nullptr;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &other));
  CGRT_ASSERT_OK(cgrt_graphs_capture(other));
  std::vector<std::pair<std::string, cgrt_status>> got;
  cgrt_graphs *made = nullptr;
  std::string msg;
  under_capture = [&] {
    got.emplace_back("cgrt_graphs_step (this set)", cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0));
    msg = cgrt_last_error();
    got.emplace_back("cgrt_graphs_step (another set)", cgrt_graphs_step(other, CGRT_GRAPH_DECODE, 1, nullptr, 0));
    got.emplace_back("cgrt_graphs_draft", cgrt_graphs_draft(other, 1, nullptr, 0));
    got.emplace_back("cgrt_graphs_capture", cgrt_graphs_capture(other));
    got.emplace_back("cgrt_graphs_recapture", cgrt_graphs_recapture(other, CGRT_GRAPH_DECODE, 1));
    got.emplace_back("cgrt_graphs_create", cgrt_graphs_create(rt, &o, &made));
  };
  auto stats_of = [](cgrt_graphs *g) {
    cgrt_graphs_stats st{};
    st.size = sizeof st;
    EXPECT_EQ(cgrt_graphs_get_stats(g, &st), CGRT_SUCCESS) << cgrt_last_error();
    return st;
  };
  const cgrt_graphs_stats before = stats_of(other);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // refused before anything ran: the capture went on
  ASSERT_EQ(got.size(), 6u);
  for (const auto &g : got) EXPECT_EQ(g.second, CGRT_ERROR_CAPTURING) << g.first << ": " << cgrt_status_name(g.second);
  EXPECT_NE(msg.find("cgrt_graphs_step: called during graph capture on this thread"), std::string::npos) << msg;
  EXPECT_EQ(made, nullptr);
  const cgrt_graphs_stats after = stats_of(other);
  EXPECT_EQ(after.steps, before.steps);
  EXPECT_EQ(after.replays, before.replays);
  step_and_check(4);  // the set captured with the refused calls inside works
  // Outside the capture the other set steps as before.
  CGRT_ASSERT_OK(cgrt_graphs_step(other, CGRT_GRAPH_DECODE, 2, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_stream_synchronize(rt, cgrt_graphs_stream(other)));
  EXPECT_EQ(stats_of(other).steps, before.steps + 1);
  CGRT_ASSERT_OK(cgrt_graphs_destroy(other));
}

}  // namespace
}  // namespace cgrt_graphs_contract
