// Every runtime entry point that takes a handle makes the runtime's context current, also
// on a new thread (graph sets and modules: tests/graphs/context_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_event.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

using cgrt_test::leaves_context_current;
using cgrt_test::request_1d;
using cgrt_test::small_plan_options;

void visit_none(void *, int, const char *, size_t, size_t) {}

TEST(Context, EveryRuntimeEntryPointMakesItCurrent) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  CUdeviceptr buf = 0;
  CGRT_ASSERT_OK(request_1d(rt, 0, "validation.ctx", 256, CGRT_DTYPE_U8, &buf));
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt, 1024));
  cgrt_mla_options mo = small_plan_options();
  cgrt_mla_plan *plan = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt, &mo, &plan));
  unsigned char host[256] = {};

  struct Entry {
    const char *name;
    std::function<void()> call;
  };
  std::vector<Entry> entries = {
      {"cgrt_runtime_get_info", [&] {
         cgrt_runtime_info i = {};
         i.size = sizeof i;
         EXPECT_EQ(cgrt_runtime_get_info(rt, &i), CGRT_SUCCESS);
       }},
      {"cgrt_runtime_synchronize", [&] { EXPECT_EQ(cgrt_runtime_synchronize(rt), CGRT_SUCCESS); }},
      {"cgrt_workspace_request", [&] {
         CUdeviceptr p = 0;
         EXPECT_EQ(request_1d(rt, 0, "validation.ctx", 256, CGRT_DTYPE_U8, &p), CGRT_SUCCESS);
       }},
      {"cgrt_workspace_is_locked", [&] { EXPECT_EQ(cgrt_workspace_is_locked(rt), 0); }},
      {"cgrt_workspace_get_stats", [&] {
         cgrt_workspace_stats s = {};
         s.size = sizeof s;
         EXPECT_EQ(cgrt_workspace_get_stats(rt, &s), CGRT_SUCCESS);
       }},
      {"cgrt_workspace_visit", [&] { EXPECT_EQ(cgrt_workspace_visit(rt, visit_none, nullptr), CGRT_SUCCESS); }},
      {"cgrt_workspace_verify", [&] { EXPECT_EQ(cgrt_workspace_verify(rt), CGRT_SUCCESS); }},
      {"cgrt_counters_reserve", [&] { EXPECT_EQ(cgrt_counters_reserve(rt, 512), CGRT_SUCCESS); }},
      {"cgrt_counters_get", [&] {
         CUdeviceptr p = 0;
         EXPECT_EQ(cgrt_counters_get(rt, &p, nullptr), CGRT_SUCCESS);
       }},
      {"cgrt_counters_verify", [&] { EXPECT_EQ(cgrt_counters_verify(rt), CGRT_SUCCESS); }},
      {"cgrt_memcpy_htod", [&] { EXPECT_EQ(cgrt_memcpy_htod(rt, buf, host, 64), CGRT_SUCCESS); }},
      {"cgrt_memcpy_dtoh", [&] { EXPECT_EQ(cgrt_memcpy_dtoh(rt, host, buf, 64), CGRT_SUCCESS); }},
      {"cgrt_memcpy_dtod_async", [&] {
         EXPECT_EQ(cgrt_memcpy_dtod_async(rt, buf + 128, buf, 64, nullptr), CGRT_SUCCESS);
       }},
      {"cgrt_memset_d8", [&] { EXPECT_EQ(cgrt_memset_d8(rt, buf, 0, 64), CGRT_SUCCESS); }},
      {"cgrt_stream_synchronize", [&] { EXPECT_EQ(cgrt_stream_synchronize(rt, nullptr), CGRT_SUCCESS); }},
      {"cgrt_mla_plan_get_info", [&] {
         cgrt_mla_plan_info i = {};
         i.size = sizeof i;
         EXPECT_EQ(cgrt_mla_plan_get_info(plan, &i), CGRT_SUCCESS);
       }},
      {"cgrt_mla_decode", [&] {  // enters before it looks at its arguments
         EXPECT_EQ(cgrt_mla_decode(plan, nullptr, nullptr), CGRT_ERROR_INVALID_ARGUMENT);
       }},
      {"cgrt_mla_plan_create", [&] {
         cgrt_mla_plan *second = nullptr;
         EXPECT_EQ(cgrt_mla_plan_create(rt, &mo, &second), CGRT_SUCCESS);
         cgrt_mla_plan_destroy(second);
       }},
      {"cgrt_mla_plan_destroy", [&] {
         cgrt_mla_plan_destroy(plan);
         plan = nullptr;
       }},
  };
  for (const Entry &e : entries) EXPECT_TRUE(leaves_context_current(rt, e.call)) << e.name;
  // cgrt_workspace_lock last: it freezes the reservations the calls above grow.
  EXPECT_TRUE(leaves_context_current(rt, [&] { EXPECT_EQ(cgrt_workspace_lock(rt), CGRT_SUCCESS); }))
      << "cgrt_workspace_lock";
  if (plan) cgrt_mla_plan_destroy(plan);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
