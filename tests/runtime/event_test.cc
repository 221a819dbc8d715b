// Events (include/cgrt/cgrt_event.h): timing, queries, bad input, lifetime with the
// runtime, recording inside a graph capture. On whichever driver CGRT_DRIVER selects.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_event.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/common/test_util.h"

namespace {

struct LogSink {
  std::vector<std::string> warnings;
  static void fn(void *user, cgrt_log_level level, const char *msg) {
    if (level == CGRT_LOG_WARN) static_cast<LogSink *>(user)->warnings.emplace_back(msg);
  }
};

TEST(Event, ElapsedTimeSpansTheHostSleepBetweenTwoRecords) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  cgrt_event *a = nullptr, *b = nullptr;
  CGRT_ASSERT_OK(cgrt_event_create(rt, &a));
  CGRT_ASSERT_OK(cgrt_event_create(rt, &b));
  ASSERT_NE(a, b);
  CGRT_ASSERT_OK(cgrt_event_record(a, nullptr));
  CGRT_ASSERT_OK(cgrt_event_synchronize(a));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CGRT_ASSERT_OK(cgrt_event_record(b, nullptr));
  float ms = -1;
  CGRT_ASSERT_OK(cgrt_event_elapsed_ms(a, b, &ms));  // waits for b itself
  EXPECT_GE(ms, 25.0f);
  EXPECT_LT(ms, 5000.0f);
  int done = -1;
  CGRT_ASSERT_OK(cgrt_event_query(b, &done));
  EXPECT_EQ(done, 1);
  float back = 0;  // the other way round: negative
  CGRT_ASSERT_OK(cgrt_event_elapsed_ms(b, a, &back));
  EXPECT_LE(back, -25.0f);
  cgrt_event_destroy(a);
  cgrt_event_destroy(b);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Event, QueryAndSynchronizeOfAnEventNeverRecordedSucceed) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  cgrt_event *e = nullptr;
  CGRT_ASSERT_OK(cgrt_event_create(rt, &e));
  int done = 0;
  CGRT_ASSERT_OK(cgrt_event_query(e, &done));
  EXPECT_EQ(done, 1);
  CGRT_ASSERT_OK(cgrt_event_synchronize(e));
  cgrt_event_destroy(e);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Event, BadInputGetsAClearStatus) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  cgrt_event *e = reinterpret_cast<cgrt_event *>(0x1);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_create(nullptr, &e));
  EXPECT_EQ(e, nullptr);  // cleared on failure
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_event_create(rt, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_record(nullptr, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_synchronize(nullptr));
  int done = 7;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_query(nullptr, &done));
  EXPECT_EQ(done, 7);
  float ms = 0;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_elapsed_ms(nullptr, nullptr, &ms));

  cgrt_event *a = nullptr, *b = nullptr;
  CGRT_ASSERT_OK(cgrt_event_create(rt, &a));
  CGRT_ASSERT_OK(cgrt_event_create(rt, &b));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_event_query(a, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_event_elapsed_ms(a, b, nullptr));
  // Never recorded: no timestamp to subtract.
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_event_elapsed_ms(a, b, &ms));
  EXPECT_NE(std::string(cgrt_last_error()).find("never recorded"), std::string::npos) << cgrt_last_error();
  CGRT_ASSERT_OK(cgrt_event_record(a, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_event_elapsed_ms(a, b, &ms));

  // Events of two runtimes cannot be compared.
  cgrt_runtime *rt2 = cgrt_test::make_runtime();
  ASSERT_NE(rt2, nullptr);
  cgrt_event *c = nullptr;
  CGRT_ASSERT_OK(cgrt_event_create(rt2, &c));
  CGRT_ASSERT_OK(cgrt_event_record(c, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_event_elapsed_ms(a, c, &ms));
  EXPECT_NE(std::string(cgrt_last_error()).find("two runtimes"), std::string::npos) << cgrt_last_error();

  // A destroyed event is not live; destroying it again is a no-op.
  cgrt_event_destroy(b);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_record(b, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_elapsed_ms(a, b, &ms));
  cgrt_event_destroy(b);
  cgrt_event_destroy(nullptr);
  // A runtime is not an event (the registry keys on the kind).
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_record(reinterpret_cast<cgrt_event *>(rt), nullptr));
  cgrt_event_destroy(reinterpret_cast<cgrt_event *>(rt));
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_runtime_synchronize(rt));  // still alive

  cgrt_event_destroy(a);
  cgrt_event_destroy(c);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt2));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

TEST(Event, AForgottenEventIsDestroyedWithItsRuntime) {
  LogSink sink;
  cgrt_set_log_callback(LogSink::fn, &sink, CGRT_LOG_WARN);
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  sink.warnings.clear();  // runtime creation may warn (CGRT_DRIVER=auto on the emulation)
  cgrt_event *e = nullptr;
  CGRT_ASSERT_OK(cgrt_event_create(rt, &e));
  CGRT_ASSERT_OK(cgrt_event_record(e, nullptr));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  ASSERT_EQ(sink.warnings.size(), 1u);
  EXPECT_NE(sink.warnings[0].find("cgrt_event that is still alive"), std::string::npos) << sink.warnings[0];
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_event_record(e, nullptr));
  cgrt_event_destroy(e);  // no-op: gone with the runtime
}

// A step that copies one workspace buffer into another and records an event around it.
struct CaptureProbe {
  cgrt_runtime *rt;
  cgrt_event *ev;
  CUdeviceptr src, dst;
  cgrt_status record_status = CGRT_SUCCESS;
  cgrt_status query_status = CGRT_SUCCESS;
  bool query_in_capture = false;
  int captured_calls = 0;
  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *p = static_cast<CaptureProbe *>(user);
    if (d->capturing) {
      p->captured_calls++;
      p->record_status = cgrt_event_record(p->ev, s);
      if (p->record_status) return p->record_status;
      if (p->query_in_capture) {
        int done = 0;
        p->query_status = cgrt_event_query(p->ev, &done);
      }
    }
    return cgrt_memcpy_dtod_async(p->rt, p->dst, p->src, 256, s);
  }
};

cgrt_graphs *make_set(CaptureProbe *p) {
  cgrt_graphs_options o;
  cgrt_graphs_options_init(&o);
  o.max_num_seqs = 1;
  o.max_model_len = 16;
  int sizes[] = {1};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 1;
  o.enqueue = CaptureProbe::enqueue;
  o.user = p;
  cgrt_graphs *set = nullptr;
  EXPECT_EQ(cgrt_graphs_create(p->rt, &o, &set), CGRT_SUCCESS) << cgrt_last_error();
  return set;
}

TEST(Event, RecordIsCaptureSafeAndAWaitDuringCaptureIsRefused) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  CaptureProbe p{};
  p.rt = rt;
  cgrt_tensor_desc desc = {1, {256}, CGRT_DTYPE_U8};
  cgrt_tensor_desc descs[2] = {desc, desc};
  CUdeviceptr ptrs[2];
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, 0, "event.test", descs, 2, ptrs));
  p.src = ptrs[0];
  p.dst = ptrs[1];
  CGRT_ASSERT_OK(cgrt_event_create(rt, &p.ev));

  cgrt_graphs *set = make_set(&p);
  ASSERT_NE(set, nullptr);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  EXPECT_EQ(p.captured_calls, 1);
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, p.record_status);
  std::vector<unsigned char> in(256), out(256, 0);
  for (int i = 0; i < 256; i++) in[i] = (unsigned char)(i * 7 + 1);
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, p.src, in.data(), in.size()));
  // Timed replay: the events are recorded outside capture on the replay stream.
  cgrt_event *t0 = nullptr, *t1 = nullptr;
  CGRT_ASSERT_OK(cgrt_event_create(rt, &t0));
  CGRT_ASSERT_OK(cgrt_event_create(rt, &t1));
  CGRT_ASSERT_OK(cgrt_event_record(t0, cgrt_graphs_stream(set)));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_event_record(t1, cgrt_graphs_stream(set)));
  float ms = -1;
  CGRT_ASSERT_OK(cgrt_event_elapsed_ms(t0, t1, &ms));
  EXPECT_GE(ms, 0.0f);
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, out.data(), p.dst, out.size()));
  EXPECT_EQ(in, out);
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));

  // A query while the thread captures is an unsafe call that would invalidate the
  // capture: cgrt refuses it before the driver sees it, and the capture goes on.
  p.query_in_capture = true;
  set = make_set(&p);
  ASSERT_NE(set, nullptr);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, p.query_status);
  EXPECT_NE(std::string(cgrt_last_error()).find("cgrt_event_query: called during graph capture on this thread"),
            std::string::npos)
      << cgrt_last_error();
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0));
  std::fill(out.begin(), out.end(), 0);
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, out.data(), p.dst, out.size()));
  EXPECT_EQ(in, out);
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));

  // Its last record was a capture point: nothing to wait for or time until it is
  // recorded again outside capture (the driver says CUDA_ERROR_INVALID_VALUE once the
  // capture has ended; cgrt answers CAPTURING and says why).
  int done = -1;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_event_query(p.ev, &done));
  EXPECT_NE(std::string(cgrt_last_error()).find("last recorded inside a capture"), std::string::npos)
      << cgrt_last_error();
  EXPECT_EQ(done, -1);
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_event_synchronize(p.ev));
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_event_elapsed_ms(t0, p.ev, &ms));
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_event_elapsed_ms(p.ev, t1, &ms));
  CGRT_ASSERT_OK(cgrt_event_record(p.ev, nullptr));
  CGRT_ASSERT_OK(cgrt_event_synchronize(p.ev));
  CGRT_ASSERT_OK(cgrt_event_query(p.ev, &done));
  EXPECT_EQ(done, 1);
  CGRT_ASSERT_OK(cgrt_event_elapsed_ms(t0, p.ev, &ms));

  cgrt_event_destroy(p.ev);
  cgrt_event_destroy(t0);
  cgrt_event_destroy(t1);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
