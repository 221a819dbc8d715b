// Shared helpers for cgrt's GoogleTest suites.
#ifndef CGRT_TESTS_TEST_UTIL_H
#define CGRT_TESTS_TEST_UTIL_H

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cgrt/cgrt_runtime.h"

// Asserts a cgrt status, printing its name and the thread's detailed message.
#define CGRT_ASSERT_OK(expr)                                                            \
  do {                                                                                  \
    cgrt_status cgrt_t_st_ = (expr);                                                    \
    ASSERT_EQ(cgrt_t_st_, CGRT_SUCCESS) << #expr << " -> " << cgrt_status_name(cgrt_t_st_) \
                                        << ": " << cgrt_last_error();                   \
  } while (0)

#define CGRT_EXPECT_STATUS(expected, expr)                                                 \
  do {                                                                                     \
    cgrt_status cgrt_t_st_ = (expr);                                                       \
    EXPECT_EQ(cgrt_t_st_, (expected)) << #expr << " -> " << cgrt_status_name(cgrt_t_st_)   \
                                      << ": " << cgrt_last_error();                        \
  } while (0)

namespace cgrt_test {

// A runtime on the driver the environment selects (CGRT_DRIVER; auto by default).
inline cgrt_runtime *make_runtime(int fault_injection = 0,
                                  cgrt_driver_kind kind = CGRT_DRIVER_AUTO) {
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.fault_injection = fault_injection;
  o.driver = kind;
  cgrt_runtime *rt = nullptr;
  cgrt_status st = cgrt_runtime_create(&o, &rt);
  EXPECT_EQ(st, CGRT_SUCCESS) << cgrt_status_name(st) << ": " << cgrt_last_error();
  return rt;
}

inline bool is_emulated(cgrt_runtime *rt) {
  cgrt_runtime_info info{};
  info.size = sizeof info;
  return cgrt_runtime_get_info(rt, &info) == CGRT_SUCCESS && info.driver == CGRT_DRIVER_EMULATED;
}

// Runs fn with a log callback that keeps the CGRT_LOG_WARN messages (the callback is
// cleared afterwards) and returns how many of them contain `needle`.
inline size_t warnings_containing(const char *needle, const std::function<void()> &fn) {
  static std::vector<std::string> kept;
  kept.clear();
  cgrt_set_log_callback(
      [](void *, cgrt_log_level level, const char *m) {
        if (level == CGRT_LOG_WARN) kept.push_back(m);
      },
      nullptr, CGRT_LOG_WARN);
  fn();
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  size_t n = 0;
  for (const auto &m : kept) n += m.find(needle) != std::string::npos;
  return n;
}

}  // namespace cgrt_test

#endif
