// The children of a runtime (MLA plans, events) when the driver fails at their destroy:
// a destroyed child leaves its runtime, and the runtime's teardown survives them.
#include <gtest/gtest.h>

#include <string>

#include "cgrt/cgrt_event.h"
#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_mla.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

using cgrt_test::small_plan_options;

// A runtime with fault injection, an MLA plan, an event and a second plan that the
// runtime's own teardown destroys.
struct Children {
  cgrt_runtime *rt = nullptr;
  cgrt_mla_plan *plan = nullptr, *left = nullptr;
  cgrt_event *ev = nullptr;
  void make() {
    rt = cgrt_test::make_runtime(1);
    ASSERT_NE(rt, nullptr);
    cgrt_mla_options mo = small_plan_options();
    CGRT_ASSERT_OK(cgrt_event_create(rt, &ev));
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt, &mo, &plan));
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt, &mo, &left));
  }
};

void fail_ctx_get_current(int sticky) {
  cgrt_fault_plan f = {};
  f.size = sizeof f;
  f.symbol = "cuCtxGetCurrent";
  f.fail_at = 1;
  f.sticky = sticky;
  ASSERT_EQ(cgrt_fault_set(&f), CGRT_SUCCESS);
}

// cgrt_mla_plan_destroy freed the plan but left it in its runtime's child list when
// making the context current failed (cuCtxGetCurrent): the next attach, detach or the
// runtime's teardown wrote into the freed plan (SIGSEGV on the H200 and the emulation,
// fault/sticky/cuCtxGetCurrent#656 of the adversarial sweep).
TEST(Children, DestroyedPlanLeavesItsRuntimeWhenTheDriverFails) {
  for (int sticky : {0, 1}) {
    SCOPED_TRACE(sticky ? "sticky" : "once");
    Children c;
    c.make();
    if (HasFatalFailure()) return;
    fail_ctx_get_current(sticky);
    cgrt_mla_plan_destroy(c.plan);  // the context cannot be made current: destroyed anyway
    EXPECT_EQ(cgrt_fault_injected(), 1u);
    CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
    cgrt_mla_plan_info info = {};
    info.size = sizeof info;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_get_info(c.plan, &info));
    // The runtime's child list is intact: a detach next to the freed plan, an attach,
    // and the teardown of what is left (the other plan, the event).
    cgrt_event_destroy(c.ev);
    cgrt_event *again = nullptr;
    CGRT_ASSERT_OK(cgrt_event_create(c.rt, &again));
    CGRT_ASSERT_OK(cgrt_runtime_destroy(c.rt));
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_get_info(c.left, &info));
  }
}

// The same failure inside cgrt_runtime_destroy: every child's destroy meets a failing
// cuCtxGetCurrent, and the runtime still goes with all its children.
TEST(Children, RuntimeTeardownSurvivesChildrenWhoseDestroyFails) {
  Children c;
  c.make();
  if (HasFatalFailure()) return;
  fail_ctx_get_current(1);
  size_t warned = cgrt_test::warnings_containing("cuCtxGetCurrent failed", [&] {
    EXPECT_EQ(cgrt_runtime_destroy(c.rt), CGRT_SUCCESS);
  });
  EXPECT_GE(cgrt_fault_injected(), 2u);
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  EXPECT_GE(warned, 2u);  // the runtime's own enter and the plans' are logged
  cgrt_mla_plan_info info = {};
  info.size = sizeof info;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_get_info(c.plan, &info));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_record(c.ev, nullptr));
  cgrt_runtime *rt = cgrt_test::make_runtime();  // the process goes on
  ASSERT_NE(rt, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
