// Runtime creation, driver selection and its failure paths, statuses, per-thread
// messages, the log callback, handle checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_status.h"
#include "tests/common/test_util.h"

namespace {

TEST(Status, NamesAndStringsComeFromOneList) {
  EXPECT_STREQ(cgrt_status_name(CGRT_SUCCESS), "CGRT_SUCCESS");
  EXPECT_STREQ(cgrt_status_name(CGRT_ERROR_WORKSPACE_LOCKED), "CGRT_ERROR_WORKSPACE_LOCKED");
  EXPECT_STREQ(cgrt_status_name((cgrt_status)12345), "CGRT_STATUS_UNKNOWN");
  EXPECT_STREQ(cgrt_status_string((cgrt_status)12345), "unknown status");
  // Every status in the list has a distinct name and a non-empty message.
  std::vector<std::string> names;
#define CHECK_ONE(name, value, msg)                                     \
  EXPECT_STREQ(cgrt_status_string(CGRT_##name), msg);                   \
  EXPECT_STREQ(cgrt_status_name(CGRT_##name), "CGRT_" #name);           \
  names.push_back(cgrt_status_name(CGRT_##name));
  CGRT_STATUS_MAP(CHECK_ONE)
#undef CHECK_ONE
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

TEST(Status, LastErrorIsPerThread) {
  cgrt_runtime *rt = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_runtime_create(nullptr, nullptr));
  std::string here = cgrt_last_error();
  EXPECT_NE(here.find("out is NULL"), std::string::npos) << here;
  std::string other;
  std::thread t([&] {
    other = cgrt_last_error();  // a fresh thread has no failure yet
    cgrt_runtime_options o;
    cgrt_runtime_options_init(&o);
    o.device_ordinal = -3;
    EXPECT_EQ(cgrt_runtime_create(&o, &rt), CGRT_ERROR_INVALID_ARGUMENT);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(std::string(cgrt_last_error()), here);  // untouched by the other thread
}

struct LogSink {
  std::vector<std::pair<cgrt_log_level, std::string>> lines;
  static void fn(void *user, cgrt_log_level level, const char *msg) {
    static_cast<LogSink *>(user)->lines.emplace_back(level, msg);
  }
};

TEST(Runtime, CreateReportsDeviceAndLogsThroughCallback) {
  LogSink sink;
  cgrt_set_log_callback(&LogSink::fn, &sink, CGRT_LOG_INFO);
  cgrt_runtime *rt = cgrt_test::make_runtime();
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  ASSERT_NE(rt, nullptr);
  cgrt_runtime_info info{};
  info.size = sizeof info;
  CGRT_ASSERT_OK(cgrt_runtime_get_info(rt, &info));
  EXPECT_TRUE(info.driver == CGRT_DRIVER_CUDA || info.driver == CGRT_DRIVER_EMULATED);
  EXPECT_GE(info.compute_capability_major, 9);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.total_memory, 0u);
  EXPECT_LE(info.free_memory, info.total_memory);
  EXPECT_GE(info.driver_version, 12040);
  EXPECT_GT(std::strlen(info.device_name), 0u);
  bool saw_runtime_line = false;
  for (auto &l : sink.lines)
    if (l.second.find("cgrt: runtime on") != std::string::npos) saw_runtime_line = true;
  EXPECT_TRUE(saw_runtime_line);
  const char *env = getenv("CGRT_DRIVER");
  if (env && std::string(env) == "cuda") EXPECT_EQ(info.driver, CGRT_DRIVER_CUDA);
  if (env && std::string(env) == "emulated") EXPECT_EQ(info.driver, CGRT_DRIVER_EMULATED);
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Runtime, DefaultIsSilent) {
  // No callback set: creating and failing must not print (checked by the absence of any
  // sink); here we only make sure the calls work with no callback installed.
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_DEBUG);
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Runtime, DriverAbsentIsNoDriverWithDlopenMessage) {
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.driver = CGRT_DRIVER_CUDA;
  o.driver_library = "/nonexistent/libcuda-missing.so.1";
  cgrt_runtime *rt = reinterpret_cast<cgrt_runtime *>(0x1);
  CGRT_EXPECT_STATUS(CGRT_ERROR_NO_DRIVER, cgrt_runtime_create(&o, &rt));
  EXPECT_EQ(rt, nullptr);
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("dlopen"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libcuda-missing.so.1"), std::string::npos) << msg;
}

TEST(Runtime, AutoFallsBackToEmulationWhenDriverAbsent) {
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.driver = CGRT_DRIVER_AUTO;
  o.driver_library = "/nonexistent/libcuda-missing.so.1";
  const char *env = getenv("CGRT_DRIVER");
  if (env && *env && std::string(env) != "auto") GTEST_SKIP() << "CGRT_DRIVER=" << env << " overrides auto";
  cgrt_runtime *rt = nullptr;
  CGRT_ASSERT_OK(cgrt_runtime_create(&o, &rt));
  EXPECT_TRUE(cgrt_test::is_emulated(rt));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Runtime, NoDeviceAtOrdinal) {
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.driver = CGRT_DRIVER_EMULATED;
  o.device_ordinal = 7;
  cgrt_runtime *rt = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_NO_DEVICE, cgrt_runtime_create(&o, &rt));
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(cgrt_last_error()).find("ordinal 7"), std::string::npos) << cgrt_last_error();
}

TEST(Runtime, UnsupportedComputeCapability) {
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.driver = CGRT_DRIVER_EMULATED;
  o.emulated_compute_capability = 80;
  cgrt_runtime *rt = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_UNSUPPORTED_DEVICE, cgrt_runtime_create(&o, &rt));
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(cgrt_last_error()).find("8.0"), std::string::npos) << cgrt_last_error();
}

TEST(Runtime, BadOptions) {
  cgrt_runtime *rt = nullptr;
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.size = 4;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_runtime_create(&o, &rt));
  cgrt_runtime_options_init(&o);
  o.driver = (cgrt_driver_kind)42;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_runtime_create(&o, &rt));
  EXPECT_EQ(rt, nullptr);
}

TEST(Runtime, DestroyedHandleIsRejected) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_runtime_destroy(rt));
  cgrt_runtime_info info{};
  info.size = sizeof info;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_runtime_get_info(rt, &info));
  EXPECT_NE(std::string(cgrt_last_error()).find("not live"), std::string::npos);
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_runtime_destroy(nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_runtime_get_info(nullptr, &info));
}

TEST(Runtime, InfoSizeIsChecked) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  cgrt_runtime_info info{};
  info.size = 8;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_runtime_get_info(rt, &info));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_runtime_get_info(rt, nullptr));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Runtime, TwoRuntimesOnOneDeviceCoexist) {
  cgrt_runtime *a = cgrt_test::make_runtime();
  cgrt_runtime *b = cgrt_test::make_runtime();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(a));
  cgrt_runtime_info info{};
  info.size = sizeof info;
  CGRT_ASSERT_OK(cgrt_runtime_get_info(b, &info));  // b still works after a is gone
  CGRT_ASSERT_OK(cgrt_runtime_destroy(b));
}

}  // namespace
