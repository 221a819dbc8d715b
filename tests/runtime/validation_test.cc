// Runtime-level contracts that adversarial use broke (issue 14): counter sizes that never
// wrap, bounded emulated-kernel parameters, messages that say what failed, and every
// entry point that takes a handle making the runtime's context current. Through the
// public headers, plus runtime internals to read the current context; on the driver
// CGRT_DRIVER selects (the emulation in CI, the real driver on an H200), except where a
// test names the emulation.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_event.h"
#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "kernels/ref_tables.h"
#include "kernels/registry.h"
#include "runtime/error.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

using cgrt_test::count_of;
using cgrt_test::leaves_context_current;
using cgrt_test::request_1d;

// Options of a small MLA plan (2 sequences of 256 tokens, 16 heads).
cgrt_mla_options small_plan_options() {
  cgrt_mla_options mo;
  cgrt_mla_options_init(&mo);
  mo.max_num_seqs = 2;
  mo.heads = 16;
  mo.max_model_len = 256;
  return mo;
}

// ---- item 4: cgrt_counters_decode_bytes saturates --------------------------------------

TEST(Counters, DecodeBytesSaturatesInsteadOfWrapping) {
  EXPECT_EQ(cgrt_counters_decode_bytes(16, 128, 132), 8192u);  // round_up(2048, 8) * 4
  EXPECT_EQ(cgrt_counters_decode_bytes(1, 1, 132), 544u);      // sm_count dominates: 136 * 4
  EXPECT_EQ(cgrt_counters_decode_bytes(0, 0, 0), 0u);
  // max_rows * heads overflows.
  EXPECT_EQ(cgrt_counters_decode_bytes(SIZE_MAX, 2, 0), SIZE_MAX);
  EXPECT_EQ(cgrt_counters_decode_bytes((size_t)1 << 33, (size_t)1 << 33, 132), SIZE_MAX);
  // The product fits, the byte count does not (it wrapped to 0 before).
  EXPECT_EQ(cgrt_counters_decode_bytes((size_t)1 << 62, 1, 0), SIZE_MAX);
  EXPECT_EQ(cgrt_counters_decode_bytes(SIZE_MAX / 4, 1, 0), SIZE_MAX);
  EXPECT_EQ(cgrt_counters_decode_bytes(SIZE_MAX - 3, 1, 0), SIZE_MAX);
  // The largest count that still fits is exact.
  size_t n = (SIZE_MAX / 4 - 8) / 8 * 8;
  EXPECT_EQ(cgrt_counters_decode_bytes(n, 1, 0), n * 4);
  // Monotonic near the edge: no small result for a large input.
  for (size_t k = 0; k < 64; k++) EXPECT_GE(cgrt_counters_decode_bytes(n + k, 1, 0), n * 4);
}

TEST(Counters, SaturatedSizeIsRefusedByReserve) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT,
                     cgrt_counters_reserve(rt, cgrt_counters_decode_bytes(SIZE_MAX, 2, 0)));
  EXPECT_NE(std::string(cgrt_last_error()).find("2^40"), std::string::npos) << cgrt_last_error();
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// ---- item 5: emulated kernel parameters are bounded -------------------------------------

void store_tag(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  int32_t *out = (int32_t *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[0]));
  *out = *(const int32_t *)(const void *)(p + off[1]);
}

TEST(EmulatedKernel, RegisterBoundsParameterSizes) {
  const size_t good[2] = {8, 4};
  CGRT_ASSERT_OK(cgrt_emulated_kernel_register("validation_store", 2, good, store_tag));
  struct Bad {
    std::vector<size_t> sizes;
    size_t bad_index;
  } bad[] = {
      {{8, SIZE_MAX}, 1},                      // the crash of the issue (memcpy of SIZE_MAX)
      {{SIZE_MAX / 2 + 1, 8}, 0},              // wraps the packed size
      {{32765}, 0},                            // one parameter above the driver's limit
      {{8, 32764}, 1},                         // each fits, together they do not
      {{4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096}, 7},
      {{8, 0}, 1},
  };
  for (const Bad &b : bad) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT,
                       cgrt_emulated_kernel_register("validation_store", b.sizes.size(), b.sizes.data(), store_tag));
    std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find("'validation_store' parameter " + std::to_string(b.bad_index)), std::string::npos) << msg;
  }
  const size_t at_limit[2] = {8, 32756};  // 8 + 32756 = 32764: accepted
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_emulated_kernel_register("validation_limit", 2, at_limit, store_tag));

  // The refused registrations replaced nothing: the kernel still runs with {8, 4}.
  cgrt_runtime *rt = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  CUdeviceptr buf = 0;
  CGRT_ASSERT_OK(request_1d(rt, 0, "validation.store", 4, CGRT_DTYPE_I32, &buf));
  static const unsigned char image[16] = {1};  // any image loads on the emulation
  cgrt_module *m = nullptr;
  CGRT_ASSERT_OK(cgrt_module_load(rt, image, &m));
  CUfunction f = nullptr;
  CGRT_ASSERT_OK(cgrt_module_function(m, "validation_store", &f));
  int32_t tag = 4242;
  void *args[] = {&buf, &tag};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 1, 1, 1, 0, nullptr, args));
  int32_t got = 0;
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, &got, buf, sizeof got));
  EXPECT_EQ(got, tag);
  CGRT_ASSERT_OK(cgrt_module_unload(m));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// cgrt's own kernels keep their built-in references (adversarial finding F6).
TEST(EmulatedKernel, NamesOfCgrtKernelsAreReserved) {
  // Every built-in reference carries the reserved prefix.
  size_t builtins = 0;
#define CGRT__TEST_TABLE(t)                                               \
  for (const cgrt__ref_kernel *k = t; k->name != nullptr; k++, builtins++) \
    EXPECT_TRUE(cgrt__ref_name_reserved(k->name)) << k->name;
  CGRT__REF_TABLES(CGRT__TEST_TABLE)
#undef CGRT__TEST_TABLE
  EXPECT_GT(builtins, 8u);
  const cgrt__ref_kernel *probe = cgrt__ref_kernel_find("cgrt_probe");
  ASSERT_NE(probe, nullptr);
  const size_t sizes[2] = {8, 4};
  for (const char *name : {"cgrt_probe", "cgrt_graph_meta_prepare", "cgrt_mla_split_m64", "cgrt_not_yet_a_kernel"}) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_emulated_kernel_register(name, 2, sizes, store_tag));
    std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find(std::string("'") + name + "': names beginning with \"cgrt_\" are reserved"), std::string::npos)
        << msg;
    cgrt__ref_kernel k = {name, 2, {8, 4}, (cgrt__ref_fn)(void (*)(void))store_tag};
    EXPECT_EQ(cgrt__ref_kernel_register(&k), -3) << name;
  }
  EXPECT_EQ(cgrt__ref_kernel_find("cgrt_probe"), probe);
  EXPECT_EQ(cgrt__ref_kernel_find("cgrt_not_yet_a_kernel"), nullptr);
  EXPECT_FALSE(cgrt__ref_name_reserved("cgrt"));
  EXPECT_FALSE(cgrt__ref_name_reserved("my_cgrt_kernel"));
  // The emulation's runtimes still run the built-in probe (it checks what it wrote).
  cgrt_runtime *rt = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// ---- a workspace visit's callback may call cgrt (adversarial findings F8 / L2) -------

// fn ran with the runtime's lock held: a callback calling cgrt on the same runtime
// deadlocked (before the fix this test hangs until its time limit).
TEST(WorkspaceVisit, CallbackMayCallCgrtOnTheSameRuntime) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  CUdeviceptr p = 0;
  CGRT_ASSERT_OK(request_1d(rt, 0, "validation.visit.a", 64, CGRT_DTYPE_U8, &p));
  CGRT_ASSERT_OK(request_1d(rt, 1, "validation.visit.b", 32, CGRT_DTYPE_I32, &p));
  struct Seen {
    cgrt_runtime *rt;
    std::vector<std::string> lines;
    std::vector<cgrt_status> calls;
  } seen = {rt, {}, {}};
  CGRT_ASSERT_OK(cgrt_workspace_visit(
      rt,
      [](void *u, int lane, const char *name, size_t n, size_t bytes) {
        auto *s = static_cast<Seen *>(u);
        s->lines.push_back(std::to_string(lane) + " " + name + " " + std::to_string(n) + " " + std::to_string(bytes));
        cgrt_workspace_stats st = {};
        st.size = sizeof st;
        s->calls.push_back(cgrt_workspace_get_stats(s->rt, &st));
        CUdeviceptr q = 0;  // a new reservation during the visit: not visited
        s->calls.push_back(request_1d(s->rt, 2, (std::string("validation.visit.new.") + name).c_str(), 16,
                                      CGRT_DTYPE_U8, &q));
      },
      &seen));
  ASSERT_EQ(seen.lines.size(), 2u);
  EXPECT_EQ(seen.lines[0], "0 validation.visit.a 1 64");
  EXPECT_EQ(seen.lines[1], "1 validation.visit.b 1 128");
  for (cgrt_status st : seen.calls) EXPECT_EQ(st, CGRT_SUCCESS) << cgrt_status_name(st);
  size_t n = 0;
  CGRT_ASSERT_OK(cgrt_workspace_visit(rt, [](void *u, int, const char *, size_t, size_t) { ++*(size_t *)u; }, &n));
  EXPECT_EQ(n, 4u);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// ---- registering memory that is not there (adversarial finding L4) --------------------

// The emulation registered any host address as a host-backed array (0xdead000 included);
// on the real driver such an address is no allocation either.
TEST(MemRegister, AnAddressNeverAllocatedIsRefused) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  long ps = sysconf(_SC_PAGESIZE);
  void *gone = mmap(nullptr, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(munmap((char *)gone + ps, ps), 0);  // a hole in the middle
  const struct {
    CUdeviceptr base;
    size_t bytes;
    const char *what;
  } cases[] = {
      {0xdead000, 4096, "0xdead000"},
      {(CUdeviceptr)(uintptr_t)gone + ps, 64, "an unmapped page"},
      {(CUdeviceptr)(uintptr_t)gone, 3 * (size_t)ps, "a range across an unmapped page"},
  };
  for (const auto &c : cases) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt, c.base, c.bytes));
    EXPECT_NE(std::string(cgrt_last_error()).find("is not inside memory the"), std::string::npos)
        << c.what << ": " << cgrt_last_error();
  }
  if (cgrt_test::is_emulated(rt)) {  // mapped host memory is a host-backed array there
    CGRT_ASSERT_OK(cgrt_mem_register(rt, (CUdeviceptr)(uintptr_t)gone, (size_t)ps));
    CGRT_ASSERT_OK(cgrt_mem_unregister(rt, (CUdeviceptr)(uintptr_t)gone));
  }
  munmap(gone, ps);
  munmap((char *)gone + 2 * ps, 2 * ps);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// ---- item 6: messages ------------------------------------------------------------------

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

// ---- item 10: every entry point that takes a handle makes the context current ---------
// (graph sets and modules: tests/graphs/validation_test.cc)

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

// ---- adversarial L7: children of a runtime when the driver fails at their destroy ------

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
