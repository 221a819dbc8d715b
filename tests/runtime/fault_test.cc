// Fault injection: every driver call made by runtime create, workspace reserve/grow,
// counters, lock, verify and destroy is failed once; each failure must give a clean
// status and a message, leave the runtime usable (or not created), and leak nothing.
// Fault-injected and plain runtimes made, used and destroyed on many threads.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/emu/emu.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

cgrt_tensor_desc desc1(int64_t n, cgrt_dtype t) {
  cgrt_tensor_desc d{};
  d.ndim = 1;
  d.shape[0] = n;
  d.dtype = t;
  return d;
}

// Runs one step; when it fails, checks the failure is clean, clears the fault plan and
// runs the step again, which must then succeed (the runtime stayed usable).
struct Scenario {
  int failures = 0;
  std::vector<std::string> failed_steps;
  bool hit = false;     // the planned fault was injected
  std::string symbol;   // the driver call that was failed

  void note_fault() {
    if (!hit && cgrt_fault_injected() > 0) {
      hit = true;
      symbol = cgrt_fault_last_symbol();
    }
  }

  template <class F>
  bool step(const char *what, F f) {
    cgrt_status st = f();
    if (st == CGRT_SUCCESS) return true;
    failures++;
    failed_steps.push_back(what);
    note_fault();
    EXPECT_NE(std::string(cgrt_last_error()), "") << what << " failed without a message";
    EXPECT_NE(st, CGRT_ERROR_INTERNAL) << what << ": " << cgrt_last_error();
    cgrt_fault_set(nullptr);
    cgrt_status again = f();
    EXPECT_EQ(again, CGRT_SUCCESS) << what << " did not recover: " << cgrt_last_error();
    return again == CGRT_SUCCESS;
  }

  // Returns false if the runtime could not be created (which must then be clean).
  bool run(cgrt_driver_kind kind) {
    cgrt_runtime_options o;
    cgrt_runtime_options_init(&o);
    o.driver = kind;
    o.fault_injection = 1;
    cgrt_runtime *rt = nullptr;
    cgrt_status st = cgrt_runtime_create(&o, &rt);
    if (st != CGRT_SUCCESS) {
      failures++;
      failed_steps.push_back("create");
      note_fault();
      EXPECT_EQ(rt, nullptr);
      EXPECT_NE(std::string(cgrt_last_error()), "");
      EXPECT_NE(st, CGRT_ERROR_INTERNAL) << cgrt_last_error();
      return false;
    }
    cgrt_tensor_desc a[2] = {desc1(1000, CGRT_DTYPE_BF16), desc1(77, CGRT_DTYPE_F32)};
    cgrt_tensor_desc b = desc1(4096, CGRT_DTYPE_I32);
    cgrt_tensor_desc a_big[2] = {desc1(3000, CGRT_DTYPE_BF16), desc1(77, CGRT_DTYPE_F32)};
    CUdeviceptr pa[2], pb, pa2[2], pa3[2];
    step("reserve a", [&] { return cgrt_workspace_request(rt, 0, "a", a, 2, pa); });
    step("reserve b", [&] { return cgrt_workspace_request(rt, 1, "b", &b, 1, &pb); });
    step("counters", [&] { return cgrt_counters_reserve(rt, cgrt_counters_decode_bytes(64, 16, 132)); });
    step("grow a", [&] { return cgrt_workspace_request(rt, 0, "a", a_big, 2, pa2); });
    step("lock", [&] { return cgrt_workspace_lock(rt); });
    step("fits a", [&] { return cgrt_workspace_request(rt, 0, "a", a, 2, pa3); });
    EXPECT_EQ(pa2[0], pa3[0]);
    step("verify", [&] { return cgrt_workspace_verify(rt); });
    step("counters verify", [&] { return cgrt_counters_verify(rt); });
    EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS);  // destroy always completes
    note_fault();  // a failure during destroy is logged, not returned
    return true;
  }
};

bool is_release_call(const std::string &sym) {
  return sym == "cuMemFree" || sym == "cuModuleUnload" || sym == "cuDevicePrimaryCtxRelease" ||
         sym == "cuMemFreeHost";
}

void fail_each_call_once(cgrt_driver_kind kind, bool check_leaks) {
  // Dry run: count the driver calls of the whole scenario. A first run warms the
  // thread's current context (later runs skip a cuCtxSetCurrent), so count the second.
  cgrt_fault_plan plan{};
  plan.size = sizeof plan;
  {
    Scenario warm;
    ASSERT_TRUE(warm.run(kind));
  }
  ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
  size_t live0 = cgrt__emu_live_objects();
  {
    Scenario s;
    ASSERT_TRUE(s.run(kind));
    ASSERT_EQ(s.failures, 0);
  }
  unsigned long total = cgrt_fault_calls();
  ASSERT_GT(total, 20u);
  if (check_leaks) {
    ASSERT_EQ(cgrt__emu_live_objects(), live0);
  }
  int injected = 0;
  for (unsigned long i = 1; i <= total; i++) {
    plan.fail_at = i;
    plan.result = (i % 3 == 0) ? 2 /* CUDA_ERROR_OUT_OF_MEMORY */ : 999 /* CUDA_ERROR_UNKNOWN */;
    ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
    Scenario s;
    s.run(kind);
    std::string sym = s.symbol;
    bool hit = s.hit;
    cgrt_fault_set(nullptr);
    EXPECT_TRUE(hit) << "call " << i << " was never reached";
    injected += hit;
    SCOPED_TRACE("call " + std::to_string(i) + " (" + sym + ")");
    if (check_leaks && !is_release_call(sym)) {
      EXPECT_EQ(cgrt__emu_live_objects(), live0) << "leak after failing call " << i << " (" << sym << ")";
    }
    live0 = cgrt__emu_live_objects();  // a failed release legitimately keeps its object
  }
  EXPECT_EQ(injected, (int)total);
  cgrt_fault_set(nullptr);
}

TEST(FaultInjection, EveryCallOfCreateReserveLockDestroyFailsCleanlyEmulated) {
  fail_each_call_once(CGRT_DRIVER_EMULATED, true);
}

TEST(FaultInjection, EveryCallFailsCleanlyOnTheRealDriver) {
  cgrt_runtime *probe = cgrt_test::make_runtime();
  ASSERT_NE(probe, nullptr);
  bool emulated = cgrt_test::is_emulated(probe);
  cgrt_runtime_destroy(probe);
  if (emulated) GTEST_SKIP() << "no GPU: the real driver is not available (covered by the emulated variant)";
  fail_each_call_once(CGRT_DRIVER_CUDA, false);
}

TEST(FaultInjection, SymbolFilterAndStickyFaults) {
  cgrt_fault_plan plan{};
  plan.size = sizeof plan;
  plan.symbol = "cuMemAlloc";
  plan.fail_at = 2;  // the probe kernel's allocation is the first cuMemAlloc
  plan.sticky = 1;
  plan.result = 2;   // CUDA_ERROR_OUT_OF_MEMORY
  ASSERT_EQ(cgrt_fault_set(&plan), CGRT_SUCCESS);
  cgrt_runtime *rt = cgrt_test::make_runtime(/*fault_injection=*/1, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
  CUdeviceptr p;
  CGRT_EXPECT_STATUS(CGRT_ERROR_OUT_OF_MEMORY, cgrt_workspace_request(rt, 0, "x", &d, 1, &p));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("cuMemAlloc"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  CGRT_EXPECT_STATUS(CGRT_ERROR_OUT_OF_MEMORY, cgrt_counters_reserve(rt, 64));  // still failing: sticky
  EXPECT_EQ(cgrt_fault_injected(), 2u);
  EXPECT_EQ(cgrt_fault_calls(), 3u);  // only cuMemAlloc calls are counted
  cgrt_fault_set(nullptr);
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, 0, "x", &d, 1, &p));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
  cgrt_fault_plan bad{};
  bad.size = 1;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_fault_set(&bad));
}

using cgrt_test::request_1d;

// ---- adversarial F9: the fault-injection wrapper under threads -------------------------

// Each creation of a fault-injected runtime rewrote the wrapper's base table while the
// wrappers of other threads' runtimes read it (ThreadSanitizer: cgrt__driver_fault vs
// fault_cuDevicePrimaryCtxRelease). Run with --config=tsan; here also: every runtime
// works while the others are made and destroyed.
TEST(FaultInjection, RuntimesAreMadeUsedAndDestroyedOnManyThreads) {
  std::vector<std::thread> th;
  std::vector<std::string> errs(8);
  for (int t = 0; t < 8; t++)
    th.emplace_back([&, t] {
      for (int i = 0; i < 6; i++) {
        cgrt_runtime_options o;
        cgrt_runtime_options_init(&o);
        o.fault_injection = (t + i) % 2;  // wrapped and plain runtimes side by side
        cgrt_runtime *rt = nullptr;
        CUdeviceptr p = 0;
        unsigned char host[32] = {};
        if (cgrt_runtime_create(&o, &rt) != CGRT_SUCCESS ||
            request_1d(rt, t % CGRT_MAX_LANES, "validation.fault", 32, CGRT_DTYPE_U8, &p) != CGRT_SUCCESS ||
            cgrt_memset_d8(rt, p, (unsigned char)(t + 1), 32) != CGRT_SUCCESS ||
            cgrt_memcpy_dtoh(rt, host, p, 32) != CGRT_SUCCESS) {
          errs[(size_t)t] = cgrt_last_error();
          cgrt_runtime_destroy(rt);
          return;
        }
        if (host[31] != (unsigned char)(t + 1)) errs[(size_t)t] = "memset did not reach the buffer";
        if (t == 0) cgrt_fault_set(nullptr);  // resets the shared counters meanwhile
        (void)cgrt_fault_calls();
        if (cgrt_runtime_destroy(rt) != CGRT_SUCCESS) errs[(size_t)t] = cgrt_last_error();
      }
    });
  for (std::thread &x : th) x.join();
  for (int t = 0; t < 8; t++) EXPECT_EQ(errs[(size_t)t], "") << "thread " << t;
}

}  // namespace
