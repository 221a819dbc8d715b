// Graph-set contracts that adversarial use broke (issue 14): nonsense options and
// arguments refused with a message naming the field, the enqueue callback's failure
// quoted once and whole, teardown failures logged, no capture left open on the thread
// after a persistent cuStreamEndCapture failure, and every entry point making the
// runtime's context current on a new thread. On the driver CGRT_DRIVER selects (the
// emulation in CI; CGRT_DRIVER=cuda on an H200).
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
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

// The test fatbin (//tests/graphs:test_fatbin): gt_scale(n, in, out, a) is in image 0.
struct cgrt_test_fatbin_entry {
  const char *source;
  const unsigned char *image;
  size_t size;
  int optional;
};
extern "C" const cgrt_test_fatbin_entry cgrt_test_graphs_fatbin[];

namespace {

using cgrt_test::count_of;
using cgrt_test::leaves_context_current;
using cgrt_test::request_1d;
using cgrt_test::WarnSink;

void scale_ref(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  int n = *(const int *)(const void *)(p + off[0]);
  const float *in = (const float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[1]));
  float *out = (float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[2]));
  float a = *(const float *)(const void *)(p + off[3]);
  for (int i = 0; i < n; i++) out[i] = in[i] * a + 1.0f;
}

// A one-kernel host engine: out = in * 2 + 1 over the padded rows, plus the metadata
// buffers a set with meta.enabled needs (unused by the kernel).
enum { IN, OUT, REQ_SEQ, REQ_POS, BT, SEQ, POS, SLOT, NB };
constexpr int kMaxReqs = 4, kBlocks = 4;

class GraphsValidation : public ::testing::Test {
 protected:
  cgrt_runtime *rt = nullptr;
  cgrt_module *mod = nullptr;
  CUfunction fn = nullptr;
  CUdeviceptr buf[NB] = {};
  size_t bytes[NB] = {};
  cgrt_buffer_desc descs[NB] = {};
  cgrt_graphs *set = nullptr;
  int sizes[3] = {4, 2, 1};
  enum { OK, FAIL_AFTER_CGRT_FAILURE, FAIL_QUIETLY } fail = OK;
  const char *ws_name = "validation.engine";
  std::function<void()> under_capture;  // run once, by the first callback under capture

  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *t = static_cast<GraphsValidation *>(user);
    if (d->capturing && t->under_capture) {
      std::function<void()> f = std::move(t->under_capture);
      t->under_capture = nullptr;
      f();
    }
    if (t->fail == FAIL_AFTER_CGRT_FAILURE) {  // the callback's own cgrt call fails
      CUdeviceptr p = 0;
      return request_1d(t->rt, 99, "validation.callback", 4, CGRT_DTYPE_U8, &p);
    }
    if (t->fail == FAIL_QUIETLY) return CGRT_ERROR_INVALID_ARGUMENT;
    int n = d->padded_rows;
    CUdeviceptr in = d->buffers[IN], out = d->buffers[OUT];
    float a = 2.0f;
    void *args[] = {&n, &in, &out, &a};
    return cgrt_launch_kernel(t->rt, t->fn, 1, 1, 1, 128, 1, 1, 0, s, args);
  }

  void start(int fault_injection = 0) {
    const size_t psizes[4] = {4, 8, 8, 4};
    CGRT_ASSERT_OK(cgrt_emulated_kernel_register("gt_scale", 4, psizes, scale_ref));
    rt = cgrt_test::make_runtime(fault_injection);
    ASSERT_NE(rt, nullptr);
    attach_engine();
  }
  void attach_engine() {
    CGRT_ASSERT_OK(cgrt_module_load(rt, cgrt_test_graphs_fatbin[0].image, &mod));
    CGRT_ASSERT_OK(cgrt_module_function(mod, "gt_scale", &fn));
    const int64_t elems[NB] = {64, 64, kMaxReqs, kMaxReqs, kMaxReqs * kBlocks, kMaxReqs, kMaxReqs, kMaxReqs};
    const cgrt_dtype types[NB] = {CGRT_DTYPE_F32, CGRT_DTYPE_F32, CGRT_DTYPE_I32, CGRT_DTYPE_I64,
                                  CGRT_DTYPE_I32, CGRT_DTYPE_I32, CGRT_DTYPE_I64, CGRT_DTYPE_I64};
    cgrt_tensor_desc td[NB] = {};
    for (int i = 0; i < NB; i++) {
      td[i].ndim = 1;
      td[i].shape[0] = elems[i];
      td[i].dtype = types[i];
      bytes[i] = (size_t)elems[i] * cgrt_dtype_size(types[i]);
    }
    CGRT_ASSERT_OK(cgrt_workspace_request(rt, 0, ws_name, td, NB, buf));
    for (int i = 0; i < NB; i++) CGRT_ASSERT_OK(cgrt_memset_d8(rt, buf[i], 0, bytes[i]));
    std::vector<float> in(64);
    for (int i = 0; i < 64; i++) in[i] = (float)i;
    CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, buf[IN], in.data(), bytes[IN]));
  }
  void options(cgrt_graphs_options *o, int with_meta = 0) {
    cgrt_graphs_options_init(o);
    o->max_num_seqs = kMaxReqs;
    o->max_model_len = kBlocks * 16;
    o->capture_sizes = sizes;
    o->num_capture_sizes = 3;
    o->enqueue = enqueue;
    o->user = this;
    static const char *names[NB] = {"in", "out", "req_seq_lens", "req_positions", "block_table",
                                    "seq_lens", "positions", "slot_mapping"};
    for (int i = 0; i < NB; i++) descs[i] = {names[i], buf[i], bytes[i], i == IN ? CGRT_BUFFER_IN : CGRT_BUFFER_INOUT};
    o->buffers = descs;
    o->num_buffers = NB;
    if (with_meta) {
      o->meta.enabled = 1;
      o->meta.req_seq_lens = REQ_SEQ;
      o->meta.req_positions = REQ_POS;
      o->meta.block_table = BT;
      o->meta.seq_lens = SEQ;
      o->meta.positions = POS;
      o->meta.slot_mapping = SLOT;
      o->meta.block_size = 16;
      o->meta.max_blocks_per_seq = kBlocks;
    }
  }
  void make_set(int capture = 1) {
    cgrt_graphs_options o;
    options(&o);
    CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
    if (capture) CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  }
  // Steps n requests and checks out = in * 2 + 1 on the first n rows.
  void step_and_check(int n) {
    CGRT_ASSERT_OK(cgrt_memset_d8(rt, buf[OUT], 0, bytes[OUT]));
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, n, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_stream_synchronize(rt, cgrt_graphs_stream(set)));
    std::vector<float> out(64);
    CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, out.data(), buf[OUT], bytes[OUT]));
    for (int i = 0; i < n; i++) EXPECT_EQ(out[i], 2.0f * i + 1.0f) << "row " << i;
  }
  void release() {
    cgrt_fault_set(nullptr);
    if (set) {
      EXPECT_EQ(cgrt_graphs_destroy(set), CGRT_SUCCESS);
    }
    set = nullptr;
    if (mod) {
      EXPECT_EQ(cgrt_module_unload(mod), CGRT_SUCCESS);
    }
    mod = nullptr;
    if (rt) {
      EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS);
    }
    rt = nullptr;
  }
  void TearDown() override {
    release();
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  }
  void expect_invalid(cgrt_status st, const std::string &field) {
    EXPECT_EQ(st, CGRT_ERROR_INVALID_ARGUMENT) << cgrt_status_name(st) << " for " << field;
    EXPECT_NE(std::string(cgrt_last_error()).find(field), std::string::npos)
        << "message does not name " << field << ": " << cgrt_last_error();
  }
};

// ---- item 9: nonsense is refused, naming the field --------------------------------------

TEST_F(GraphsValidation, CreateRefusesNonsenseOptions) {
  start();
  cgrt_graphs_options o;
  struct Case {
    const char *field;
    std::function<void(cgrt_graphs_options *)> spoil;
  };
  static int zero[] = {4, 0, 2}, negative[] = {-3}, huge[] = {1, CGRT_GRAPHS_MAX_ROWS + 1};
  std::vector<Case> cases = {
      {"capture_sizes[1] = 0", [](cgrt_graphs_options *p) { p->capture_sizes = zero, p->num_capture_sizes = 3; }},
      {"capture_sizes[0] = -3", [](cgrt_graphs_options *p) { p->capture_sizes = negative, p->num_capture_sizes = 1; }},
      {"capture_sizes[1] = 65537", [](cgrt_graphs_options *p) { p->capture_sizes = huge, p->num_capture_sizes = 2; }},
      {"capture_sizes NULL", [](cgrt_graphs_options *p) { p->capture_sizes = nullptr, p->num_capture_sizes = 3; }},
      {"num_capture_sizes 0", [](cgrt_graphs_options *p) { p->num_capture_sizes = 0; }},
      {"max_capture_rows -5", [](cgrt_graphs_options *p) { p->max_capture_rows = -5; }},
      {"meta.draft_remaining -2", [](cgrt_graphs_options *p) { p->meta.draft_remaining = -2; }},
      {"meta.draft_remaining: buffer id 99", [](cgrt_graphs_options *p) { p->meta.draft_remaining = 99; }},
  };
  for (const Case &c : cases) {
    options(&o, 1);
    c.spoil(&o);
    cgrt_graphs *s = reinterpret_cast<cgrt_graphs *>(0x1);
    expect_invalid(cgrt_graphs_create(rt, &o, &s), c.field);
    EXPECT_EQ(s, nullptr);
  }
  options(&o, 1);
  o.meta.draft_remaining = REQ_SEQ;  // a registered buffer of max_num_seqs int32: fine
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
}

TEST_F(GraphsValidation, RecaptureRefusesRowsBelowOne) {
  start();
  make_set();
  expect_invalid(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 0), "rows 0");
  expect_invalid(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, -7), "rows -7");
  expect_invalid(cgrt_graphs_recapture(set, (cgrt_graph_mode)9, 1), "mode 9");
  CGRT_EXPECT_STATUS(CGRT_ERROR_NO_BUCKET, cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 5));
  CGRT_ASSERT_OK(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 3));
  step_and_check(3);
}

TEST_F(GraphsValidation, SetRangesRefusesEmptyNullAndWrappingRanges) {
  start();
  make_set();
  cgrt_range ok = {buf[IN], bytes[IN], "in"};
  struct Case {
    cgrt_range bad;
    const char *field;
  } cases[] = {
      {{0, 64, "null"}, "ranges[1] ('null'): base 0x0"},
      {{buf[OUT], 0, "empty"}, "ranges[1] ('empty')"},
      {{UINT64_MAX - 15, 32, "wraps"}, "ranges[1] ('wraps')"},
      {{0x1000, SIZE_MAX, "wraps too"}, "ranges[1] ('wraps too')"},
  };
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, &ok, 1));
  for (const Case &c : cases) {
    cgrt_range two[2] = {ok, c.bad};
    expect_invalid(cgrt_graphs_set_ranges(set, two, 2), c.field);
  }
  // A count past the bound is refused before any entry is read (ASan: nothing read past `ok`).
  expect_invalid(cgrt_graphs_set_ranges(set, &ok, SIZE_MAX), "18446744073709551615 ranges (max 4096)");
  expect_invalid(cgrt_graphs_set_ranges(set, &ok, CGRT_GRAPHS_MAX_RANGES + 1), "4097 ranges");
  // A range that ends exactly at 2^64 does not wrap, but lies in no live allocation.
  cgrt_range to_the_end[2] = {ok, {0x1000, (size_t)(0 - (uint64_t)0x1000), "to 2^64"}};
  expect_invalid(cgrt_graphs_set_ranges(set, to_the_end, 2), "is not inside one live device allocation");
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, nullptr, 0));
}

TEST_F(GraphsValidation, StepOnAModeNeverCapturedIsRefused) {
  start();
  make_set(0);
  expect_invalid(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, nullptr, 0), "mode decode is not captured");
  cgrt_graphs_stats st = {};
  st.size = sizeof st;
  CGRT_ASSERT_OK(cgrt_graphs_get_stats(set, &st));
  EXPECT_EQ(st.eager_fallbacks, 0u);  // nothing ran eagerly behind the caller's back
  EXPECT_EQ(st.steps, 0u);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  step_and_check(2);
}

// ---- ranges and counts past what the set can hold (adversarial findings F2-F5) ----------

TEST_F(GraphsValidation, CreateRefusesBuffersWhoseRangeWraps) {
  start();
  cgrt_graphs_options o;
  struct Case {
    CUdeviceptr ptr;
    size_t bytes;
  } cases[] = {
      {UINT64_MAX - 15, 64},  // ends past 2^64
      {0x1000, SIZE_MAX},     // SIZE_MAX bytes
      {UINT64_MAX, 2},
      {0, 64},
      {0x1000, 0},
  };
  for (const Case &c : cases) {
    options(&o);
    descs[OUT].ptr = c.ptr;
    descs[OUT].bytes = c.bytes;
    cgrt_graphs *s = reinterpret_cast<cgrt_graphs *>(0x1);
    expect_invalid(cgrt_graphs_create(rt, &o, &s), "buffer 1 ('out')");
    EXPECT_EQ(s, nullptr);
  }
  options(&o);
  descs[OUT].ptr = buf[IN] + 4;  // overlaps 'in'
  expect_invalid(cgrt_graphs_create(rt, &o, &set), "buffers 0 and 1 overlap");
  options(&o);
  descs[OUT].ptr = (CUdeviceptr)0 - 256;  // ends exactly at 2^64: a valid range
  descs[OUT].bytes = 256;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  make_set();
  step_and_check(4);
}

TEST_F(GraphsValidation, CreateBoundsDraftStepsAndTheCaptureSizeCount) {
  start();
  cgrt_graphs_options o;
  for (int k : {INT_MAX, CGRT_GRAPHS_MAX_DRAFT_STEPS + 1, 1, -2}) {
    options(&o, 1);
    o.draft_steps = k;
    expect_invalid(cgrt_graphs_create(rt, &o, &set), "draft_steps " + std::to_string(k));
    EXPECT_EQ(set, nullptr);
  }
  // A count whose byte size wraps size_t (the copy was 8 bytes, then read past its end).
  options(&o);
  int two[2] = {2, 4};
  o.capture_sizes = two;
  o.num_capture_sizes = SIZE_MAX / sizeof(int) + 3;
  expect_invalid(cgrt_graphs_create(rt, &o, &set), "num_capture_sizes " + std::to_string(o.num_capture_sizes));
  options(&o, 1);
  o.draft_steps = CGRT_GRAPHS_MAX_DRAFT_STEPS;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
}

TEST_F(GraphsValidation, StepRefusesBindingsWhoseRangeWraps) {
  start();
  make_set();
  struct Case {
    cgrt_binding b;
    const char *field;
  } cases[] = {
      {{IN, UINT64_MAX - 7, SIZE_MAX}, "binding 0 of 'in'"},
      {{IN, UINT64_MAX - 7, 0}, "binding 0 of 'in'"},  // the registered size wraps too
      {{OUT, 0x1000, SIZE_MAX}, "binding 0 of 'out'"},
  };
  for (const Case &c : cases) {
    expect_invalid(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, &c.b, 1), c.field);
    cgrt_binding two[2] = {{IN, buf[IN], 0}, c.b};
    expect_invalid(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, two, 2), "binding 1");
  }
  step_and_check(4);  // nothing moved
}

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
      {"cgrt_module_load", [&] { EXPECT_EQ(cgrt_module_load(rt, cgrt_test_graphs_fatbin[0].image, &m2), CGRT_SUCCESS); }},
      {"cgrt_module_function", [&] {
         CUfunction f = nullptr;
         EXPECT_EQ(cgrt_module_function(m2, "gt_scale", &f), CGRT_SUCCESS);
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

// ---- adversarial F12: capture sizes near the bound round up without overflow -----------

// A capture size of INT_MAX was rounded up to a multiple of block_len in int (UBSan:
// signed overflow in graphs/buckets.c). Sizes are bounded before any rounding; the
// largest valid one rounds (and clamps) exactly. Run with --config=ubsan as well.
TEST_F(GraphsValidation, CaptureSizesNearTheBoundRoundWithoutOverflow) {
  start();
  cgrt_graphs_options o;
  for (int bad : {INT_MAX, INT_MAX - 1, CGRT_GRAPHS_MAX_ROWS + 1}) {
    int one[1] = {bad};
    options(&o);
    o.block_len = 2;
    o.capture_sizes = one;
    o.num_capture_sizes = 1;
    expect_invalid(cgrt_graphs_create(rt, &o, &set), "capture_sizes[0] = " + std::to_string(bad));
    EXPECT_EQ(set, nullptr);
  }
  int edge[2] = {CGRT_GRAPHS_MAX_ROWS, 3};
  options(&o);
  o.block_len = 2;
  o.capture_sizes = edge;
  o.num_capture_sizes = 2;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
  // Decode: rows 4 (clamped to the largest batch) and 3; block mode (2 rows a request):
  // 8 (clamped) and 4 (3 rounded up).
  std::vector<std::pair<int, int>> got;
  for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
    cgrt_bucket_info bi = {};
    bi.size = sizeof bi;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, i, &bi));
    got.emplace_back((int)bi.mode, bi.rows);
  }
  std::vector<std::pair<int, int>> want = {
      {CGRT_GRAPH_DECODE, 4}, {CGRT_GRAPH_DECODE, 3}, {CGRT_GRAPH_BLOCK, 8}, {CGRT_GRAPH_BLOCK, 4}};
  EXPECT_EQ(got, want);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_BLOCK, 1), 4);
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

// ---- adversarial L8: what must not run during capture is refused on that thread -------

TEST_F(GraphsValidation, WhatMustNotRunDuringCaptureIsRefusedOnTheCapturingThread) {
  start();
  make_set(0);
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt, 1024));
  std::vector<std::pair<std::string, cgrt_status>> got;
  cgrt_module *loaded = nullptr;
  cgrt_runtime *made = nullptr;
  under_capture = [&] {
    got.emplace_back("cgrt_module_load", cgrt_module_load(rt, cgrt_test_graphs_fatbin[0].image, &loaded));
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

// ---- adversarial L10: an empty kernel name is a bad argument, not a driver failure ------

TEST_F(GraphsValidation, ModuleFunctionRefusesAnEmptyName) {
  start();
  CUfunction f = reinterpret_cast<CUfunction>(0x1);
  expect_invalid(cgrt_module_function(mod, "", &f), "an empty name");
  expect_invalid(cgrt_module_function(mod, "no_such_kernel", &f), "no kernel 'no_such_kernel'");
  CGRT_ASSERT_OK(cgrt_module_function(mod, "gt_scale", &f));
}

}  // namespace
