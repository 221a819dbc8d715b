// Messages that say what failed (cgrt_status.h): a fault plan too small, a failed
// cuCtxGetCurrent named, and the message helpers of runtime/error.h (quoting, cutting).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/error.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

using cgrt_test::count_of;

TEST(Messages, FaultSetWithTooSmallSizeSaysWhy) {
  cgrt_fault_plan plan = {};
  plan.size = 8;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_fault_set(&plan));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("cgrt_fault_set"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 8"), std::string::npos) << msg;
}

TEST(Messages, FailedCtxGetCurrentIsNamed) {
  cgrt_runtime *rt = cgrt_test::make_runtime(1);
  ASSERT_NE(rt, nullptr);
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.symbol = "cuCtxGetCurrent";
  plan.fail_at = 1;
  plan.result = 201;  // CUDA_ERROR_INVALID_CONTEXT
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_runtime_synchronize(rt));
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("cuCtxGetCurrent failed with CUDA_ERROR_INVALID_CONTEXT"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("cuCtxSetCurrent"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cgrt_runtime_synchronize"), std::string::npos) << msg;
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// The message helpers themselves (runtime/error.h): what a layer quotes or prefixes is
// composed apart from the message it reads, and a cut is marked.
TEST(Messages, QuotingTheCurrentMessageKeepsItWhole) {
  cgrt__fail(CGRT_ERROR_DRIVER, "inner: cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY (2)");
  cgrt__fail(CGRT_ERROR_CALLBACK_FAILED, "enqueue callback returned %s: %s", "CGRT_ERROR_DRIVER", cgrt_last_error());
  EXPECT_STREQ(cgrt_last_error(),
               "enqueue callback returned CGRT_ERROR_DRIVER: inner: cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY (2)");
  cgrt__error_prefix("capture of decode bucket %d rows failed", 8);
  EXPECT_STREQ(cgrt_last_error(),
               "capture of decode bucket 8 rows failed: enqueue callback returned CGRT_ERROR_DRIVER: inner: cuMemAlloc "
               "failed with CUDA_ERROR_OUT_OF_MEMORY (2)");
}

TEST(Messages, ALongMessageIsCutVisiblyNeverSilently) {
  std::string inner(3000, 'x');
  inner += "TAIL";
  cgrt__fail(CGRT_ERROR_DRIVER, "%s", inner.c_str());
  std::string msg = cgrt_last_error();
  EXPECT_LT(msg.size(), 2048u);
  EXPECT_NE(msg.find("more bytes cut]"), std::string::npos) << msg.substr(msg.size() - 60);
  cgrt__fail(CGRT_ERROR_DRIVER, "short inner message");
  std::string prefix(1500, 'p');
  for (int i = 0; i < 3; i++) cgrt__error_prefix("%s", prefix.c_str());  // nested context outgrows the buffer
  msg = cgrt_last_error();
  EXPECT_LT(msg.size(), 2048u);
  EXPECT_EQ(msg.compare(0, 1500, prefix), 0);
  EXPECT_NE(msg.find("more bytes cut]"), std::string::npos);
  // Quoting the message into itself repeats nothing.
  cgrt__fail(CGRT_ERROR_DRIVER, "abc");
  for (int i = 0; i < 3; i++) cgrt__fail(CGRT_ERROR_DRIVER, "outer %d: %s", i, cgrt_last_error());
  EXPECT_STREQ(cgrt_last_error(), "outer 2: outer 1: outer 0: abc");
  EXPECT_EQ(count_of(cgrt_last_error(), "abc"), 1u);
}

}  // namespace
