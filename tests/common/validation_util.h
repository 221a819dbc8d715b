// Helpers of the contract tests (issue 14): the context a call leaves current on a new
// thread, warnings caught from the log callback, one-buffer workspace requests, a small
// MLA plan's options.
#ifndef CGRT_TESTS_VALIDATION_UTIL_H
#define CGRT_TESTS_VALIDATION_UTIL_H

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/runtime_internal.h"

namespace cgrt_test {

// Options of a small MLA plan (2 sequences of 256 tokens, 16 heads).
inline cgrt_mla_options small_plan_options() {
  cgrt_mla_options mo;
  cgrt_mla_options_init(&mo);
  mo.max_num_seqs = 2;
  mo.heads = 16;
  mo.max_model_len = 256;
  return mo;
}

// How many times `what` occurs in s.
inline size_t count_of(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

// Runs `call` on a new thread (which starts with no current context) and returns
// whether the runtime's context was current there afterwards.
inline bool leaves_context_current(cgrt_runtime *rt, const std::function<void()> &call) {
  bool before_none = false, after_rt = false;
  std::thread t([&] {
    CUcontext c = reinterpret_cast<CUcontext>(1);
    before_none = rt->drv->cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == nullptr;
    call();
    c = nullptr;
    after_rt = rt->drv->cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == rt->ctx;
  });
  t.join();
  EXPECT_TRUE(before_none) << "a new thread should start without a current context";
  return after_rt;
}

// Collects the CGRT_LOG_WARN (and ERROR) lines of the log callback while installed.
struct WarnSink {
  std::mutex mu;
  std::vector<std::string> lines;
  WarnSink() { cgrt_set_log_callback(&WarnSink::fn, this, CGRT_LOG_WARN); }
  ~WarnSink() { stop(); }
  void stop() { cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR); }
  static void fn(void *user, cgrt_log_level level, const char *msg) {
    auto *s = static_cast<WarnSink *>(user);
    std::lock_guard<std::mutex> g(s->mu);
    if (level <= CGRT_LOG_WARN) s->lines.emplace_back(msg);
  }
  bool saw(const std::string &what) {
    std::lock_guard<std::mutex> g(mu);
    for (auto &l : lines)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
};

// Requests reservation (lane, name) of one 1-D buffer of n elements.
inline cgrt_status request_1d(cgrt_runtime *rt, int lane, const char *name, int64_t n, cgrt_dtype dtype,
                              CUdeviceptr *ptr) {
  cgrt_tensor_desc t = {};
  t.ndim = 1;
  t.shape[0] = n;
  t.dtype = dtype;
  return cgrt_workspace_request(rt, lane, name, &t, 1, ptr);
}

}  // namespace cgrt_test

#endif
