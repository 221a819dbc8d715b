// The fixture of the graph-set contract tests: a runtime and a one-kernel host engine
// (synth_scale of tests/common/synth_kernels.h: out = in * 2 + 1 over the padded rows,
// plus the metadata buffers a set with meta.enabled needs), a set over it, and the checks
// those tests share. Through the public headers (plus the helpers of tests/common/validation_util.h);
// on the driver CGRT_DRIVER selects (the emulation in CI; CGRT_DRIVER=cuda on an H200).
#ifndef CGRT_TESTS_GRAPHS_ONE_KERNEL_FIXTURE_H
#define CGRT_TESTS_GRAPHS_ONE_KERNEL_FIXTURE_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/common/synth_kernels.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace cgrt_graphs_contract {

using cgrt_test::count_of;
using cgrt_test::leaves_context_current;
using cgrt_test::request_1d;
using cgrt_test::WarnSink;

// A one-kernel host engine: out = in * 2 + 1 over the padded rows, plus the metadata
// buffers a set with meta.enabled needs (unused by the kernel).
enum Buf { IN, OUT, REQ_SEQ, REQ_POS, BT, SEQ, POS, SLOT, NB };
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
    CGRT_ASSERT_OK(synth::register_refs());
    rt = cgrt_test::make_runtime(fault_injection);
    ASSERT_NE(rt, nullptr);
    attach_engine();
  }
  void attach_engine() {
    CGRT_ASSERT_OK(cgrt_module_load(rt, synth::kernels_image(), &mod));
    CGRT_ASSERT_OK(cgrt_module_function(mod, "synth_scale", &fn));
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

}  // namespace cgrt_graphs_contract

#endif
