// Graph-set options and arguments (cgrt_graphs.h): nonsense refused with a message naming
// the field, ranges and counts past what a set can hold, capture sizes near the bound, an
// empty kernel name (cgrt_module.h).
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

// ---- adversarial L10: an empty kernel name is a bad argument, not a driver failure ------

TEST_F(GraphsValidation, ModuleFunctionRefusesAnEmptyName) {
  start();
  CUfunction f = reinterpret_cast<CUfunction>(0x1);
  expect_invalid(cgrt_module_function(mod, "", &f), "an empty name");
  expect_invalid(cgrt_module_function(mod, "no_such_kernel", &f), "no kernel 'no_such_kernel'");
  CGRT_ASSERT_OK(cgrt_module_function(mod, "synth_scale", &f));
}

}  // namespace
}  // namespace cgrt_graphs_contract
