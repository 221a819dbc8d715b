// Graph-set failures reported whole and recovered from: a failed pointer query is no stale
// pointer, a failed create frees what it made, the callback's failure quoted once,
// teardown failures logged, no capture left open after cuStreamEndCapture fails, a failed
// instantiate, upload or wait named, no graph freed under a capture.
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

// ---- checked replay: a failed driver call is no stale pointer (adversarial finding L1) --

// cuPointerGetAttribute fails (once, then for good) at each of its calls of a checked
// step that rebinds a buffer: the step answers CGRT_ERROR_DRIVER naming the call, or
// succeeds when the call was asked again, never CGRT_ERROR_STALE_POINTER; the next step
// works.
TEST_F(GraphsValidation, CheckedReplayReportsAFailedPointerQueryAsADriverFailure) {
  start(1);
  cgrt_graphs_options o;
  options(&o);
  o.checked_replay = 1;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  CUdeviceptr alt = 0;
  CGRT_ASSERT_OK(request_1d(rt, 1, "validation.alt_in", 64, CGRT_DTYPE_F32, &alt));
  CGRT_ASSERT_OK(cgrt_memcpy_dtod_async(rt, alt, buf[IN], bytes[IN], nullptr));
  CGRT_ASSERT_OK(cgrt_stream_synchronize(rt, nullptr));
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.symbol = "cuPointerGetAttribute";
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));  // counts the calls of one rebinding step
  cgrt_binding to_alt = {IN, alt, 0}, back = {IN, buf[IN], 0};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, &to_alt, 1));
  const unsigned long calls = cgrt_fault_calls();
  ASSERT_GE(calls, 4u);  // the binding (3) and the per-step check (1 per buffer)
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, &back, 1));
  for (int sticky = 0; sticky <= 1; sticky++) {
    for (unsigned long k = 1; k <= calls; k++) {
      plan.fail_at = k;
      plan.sticky = sticky;
      CGRT_ASSERT_OK(cgrt_fault_set(&plan));
      cgrt_status st = cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, k % 2 ? &to_alt : &back, 1);
      std::string msg = cgrt_last_error();
      CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
      if (st != CGRT_SUCCESS) {
        EXPECT_EQ(st, CGRT_ERROR_DRIVER) << "call " << k << (sticky ? " for good: " : ": ") << msg;
        EXPECT_NE(msg.find("cuPointerGetAttribute failed with CUDA_ERROR_UNKNOWN"), std::string::npos) << msg;
      } else {
        EXPECT_FALSE(sticky) << "call " << k << ": a step succeeded while every pointer query failed";
      }
      CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, &back, 1));  // asks again: fine
    }
  }
  step_and_check(4);
}

// ---- a failed create frees what it made and keeps its cause (F1) ----------------------

TEST_F(GraphsValidation, FailedCreateFreesTheHalfMadeSetAndKeepsItsCause) {
  struct Case {
    const char *symbol;
    unsigned long at;  // counted from the create (a fresh runtime has looked nothing up)
    const char *cause;
  } cases[] = {
      {"cuModuleGetFunction", 1, "cgrt_graph_meta_prepare: cuModuleGetFunction failed"},
      {"cuModuleGetFunction", 2, "cgrt_graph_meta_advance: cuModuleGetFunction failed"},
      {"cuModuleGetFunction", 3, "cgrt_graph_meta_while_begin: cuModuleGetFunction failed"},
      {"cuMemAlloc", 1, "WHILE draft loop's state: cuMemAlloc failed"},
      {"cuMemsetD8", 1, "cuMemsetD8 failed"},
      {"cuStreamCreate", 1, "capture stream: cuStreamCreate failed"},
      {"cuStreamCreate", 2, "replay stream: cuStreamCreate failed"},
  };
  for (const Case &c : cases) {
    start(1);
    cgrt_graphs_options o;
    options(&o, 1);
    o.draft_steps = 2;
    o.draft_while = 1;
    cgrt_fault_plan plan = {};
    plan.size = sizeof plan;
    plan.symbol = c.symbol;
    plan.fail_at = c.at;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_graphs_create(rt, &o, &set));
    EXPECT_EQ(cgrt_fault_injected(), 1u) << c.symbol << " #" << c.at;
    std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find(c.cause), std::string::npos) << msg;
    EXPECT_EQ(msg.find("cgrt_graphs_destroy"), std::string::npos) << msg;
    EXPECT_EQ(set, nullptr);
    release();  // LeakSanitizer (--config=asan) finds what the failed create left
  }
  start();
  make_set();
  step_and_check(4);
}

// ---- item 6: the callback's failure, teardown failures ----------------------------------

TEST_F(GraphsValidation, CallbackFailureQuotesItsMessageOnceAndWhole) {
  start();
  make_set(0);
  fail = FAIL_AFTER_CGRT_FAILURE;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  std::string msg = cgrt_last_error();
  EXPECT_EQ(count_of(msg, "enqueue callback returned CGRT_ERROR_INVALID_ARGUMENT"), 1u) << msg;
  EXPECT_EQ(count_of(msg, "cgrt_workspace_request('validation.callback'): lane 99 outside 0..7"), 1u) << msg;
  EXPECT_EQ(msg.find("more bytes cut"), std::string::npos) << msg;
  EXPECT_NE(msg.find("decode bucket 4 rows"), std::string::npos) << msg;
}

TEST_F(GraphsValidation, CallbackFailureWithoutACgrtFailureDoesNotQuoteAnOldMessage) {
  start();
  make_set(0);
  cgrt_runtime_info info = {};
  info.size = sizeof info;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_runtime_get_info(nullptr, &info));  // an old failure
  fail = FAIL_QUIETLY;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("enqueue callback returned CGRT_ERROR_INVALID_ARGUMENT (no cgrt call failed in it)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("not live"), std::string::npos) << msg;
}

TEST_F(GraphsValidation, DestroyLogsDriverFailuresAtWarn) {
  start(1);
  make_set();
  step_and_check(4);
  WarnSink sink;
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.fail_at = 1;
  plan.sticky = 1;  // every driver call of the teardown fails
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_graphs_destroy(set));
  set = nullptr;
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  sink.stop();
  EXPECT_TRUE(sink.saw("cuStreamSynchronize failed with CUDA_ERROR_UNKNOWN"));
  EXPECT_TRUE(sink.saw("cuGraphExecDestroy failed with CUDA_ERROR_UNKNOWN"));
  EXPECT_TRUE(sink.saw("cuGraphDestroy failed with CUDA_ERROR_UNKNOWN"));
  EXPECT_TRUE(sink.saw("cgrt_graphs_destroy: capture stream: cuStreamDestroy failed with CUDA_ERROR_UNKNOWN"));
  EXPECT_TRUE(sink.saw("cgrt_graphs_destroy: replay stream: cuStreamDestroy failed with CUDA_ERROR_UNKNOWN"));
}

// ---- item 7: no capture left open on the thread ------------------------------------------

// cuStreamEndCapture fails for good: every bucket's capture fails cleanly.
void fail_end_capture_for_good() {
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.symbol = "cuStreamEndCapture";
  plan.fail_at = 1;
  plan.sticky = 1;
  ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
}

TEST_F(GraphsValidation, CaptureRecoversOnceEndCaptureWorksAgain) {
  start(1);
  make_set(0);
  fail_end_capture_for_good();
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  EXPECT_NE(std::string(cgrt_last_error()).find("cuStreamEndCapture failed"), std::string::npos) << cgrt_last_error();
  EXPECT_GE(cgrt_fault_injected(), 2u);  // the end, and ending it again, failed
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // ends the capture left open, then captures
  cgrt_graphs_stats st = {};
  st.size = sizeof st;
  CGRT_ASSERT_OK(cgrt_graphs_get_stats(set, &st));
  EXPECT_EQ(st.buckets, 3u);
  step_and_check(3);
  // The thread is out of capture mode: allocations work.
  CUdeviceptr p = 0;
  CGRT_ASSERT_OK(request_1d(rt, 1, "validation.after", 1 << 12, CGRT_DTYPE_U8, &p));
}

TEST_F(GraphsValidation, ThreadLeavesCaptureModeWhenTheSetIsDestroyed) {
  start(1);
  make_set(0);
  fail_end_capture_for_good();
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  CUdeviceptr p = 0;
  CGRT_ASSERT_OK(request_1d(rt, 1, "validation.after", 1 << 12, CGRT_DTYPE_U8, &p));  // cuMemAlloc on this thread
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));
  // Everything destroyed; a new runtime on this thread works, capture included.
  CGRT_ASSERT_OK(cgrt_module_unload(mod));
  mod = nullptr;
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
  rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  attach_engine();
  make_set();
  step_and_check(4);
}

// ---- adversarial F10: a failed instantiate, upload or wait names its call ---------------

TEST_F(GraphsValidation, FailedInstantiateUploadOrWaitNamesItsCall) {
  start(1);
  for (const char *symbol : {"cuGraphInstantiateWithFlags", "cuGraphUpload", "cuStreamSynchronize"}) {
    SCOPED_TRACE(symbol);
    cgrt_graphs_options o;
    options(&o);
    o.warmup_runs = 0;  // the wait for the upload is the capture's first cuStreamSynchronize
    CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
    cgrt_fault_plan plan = {};
    plan.size = sizeof plan;
    plan.symbol = symbol;
    plan.fail_at = 1;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
    std::string msg = cgrt_last_error();
    CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
    // Before: "cuGraphInstantiateWithFlags/cuGraphUpload failed" for all three.
    EXPECT_NE(msg.find(std::string(symbol) + " failed with CUDA_ERROR_UNKNOWN"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("/cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("decode bucket 4 rows"), std::string::npos) << msg;
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // the failed bucket, again
    step_and_check(4);
    CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
    set = nullptr;
  }
}

// ---- adversarial F13: no graph is destroyed while a capture records into it ------------

// With WHILE draft loops, cuStreamEndCapture failing for good at the end of a loop body's
// capture (a capture into the body of the loop's conditional node) left the stream
// recording into that body while cgrt destroyed the loop's graph, body included: the next
// work on the stream appended nodes to freed memory (ASan: heap-use-after-free in the
// emulation; SIGSEGV on the H200, fault/sticky/cuStreamEndCapture#9..11). Each end of a
// capture fails for good in turn; the graph must outlive the capture, and the set
// recovers (capture again) or is destroyed once the fault is gone.
TEST_F(GraphsValidation, PersistentEndCaptureFailureNeverFreesAGraphUnderCapture) {
  const size_t freed0 = cgrt__emu_graphs_freed_under_capture();
  start(1);
  cgrt_graphs_options o;
  options(&o, 1);
  o.draft_steps = 2;
  o.draft_while = 1;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.symbol = "cuStreamEndCapture";
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));  // counts only
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  unsigned long ends = cgrt_fault_calls();
  cgrt_graphs_stats st = {};
  st.size = sizeof st;
  CGRT_ASSERT_OK(cgrt_graphs_get_stats(set, &st));
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  if (!st.draft_while_available) GTEST_SKIP() << "no conditional graph nodes on this driver: no WHILE body capture";
  ASSERT_EQ(ends, 9u);  // 3 decode buckets, 3 unrolled draft loops, 3 WHILE loop bodies
  for (unsigned long k = 1; k <= ends; k++) {
    SCOPED_TRACE("end " + std::to_string(k));
    CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
    plan.fail_at = k;
    plan.sticky = 1;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
    EXPECT_NE(std::string(cgrt_last_error()).find("cuStreamEndCapture failed"), std::string::npos)
        << cgrt_last_error();
    CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
    if (k % 2) {
      CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // ends the capture left open, captures the rest
      CGRT_ASSERT_OK(cgrt_graphs_draft(set, 2, nullptr, 0));
      step_and_check(4);
    }
    CGRT_ASSERT_OK(cgrt_graphs_destroy(set));  // or ends it here
    set = nullptr;
    EXPECT_EQ(cgrt__emu_graphs_freed_under_capture(), freed0);
  }
  make_set();
  step_and_check(4);
}

}  // namespace
}  // namespace cgrt_graphs_contract
