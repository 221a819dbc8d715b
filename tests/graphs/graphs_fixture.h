// The fixture of the graph tests (include/cgrt/cgrt_graphs.h through the public API), on
// the driver CGRT_DRIVER selects: the emulation in CI, the real driver on an H200. A
// runtime, the synthetic engine (tests/common/synth_engine.h), a graph set, the eager
// reference and the comparisons every feature's tests share.
#ifndef CGRT_TESTS_GRAPHS_GRAPHS_FIXTURE_H
#define CGRT_TESTS_GRAPHS_GRAPHS_FIXTURE_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/runtime_internal.h"  // the driver table: raw allocations, memset nodes
#include "tests/common/synth_engine.h"
#include "tests/common/test_util.h"

namespace cgrt_graphs_test {

// The synthetic engine (tests/common/synth_engine.h) as the graph tests drive it: its
// buffer sets in raw driver allocations (memory cgrt does not know, as a host's own
// is), a memset node through the driver table, more raw allocations on demand (alloc),
// and helpers that record a test failure instead of returning a status.
struct Engine : synth::Engine {
  const cgrt__driver *drv = nullptr;
  std::vector<CUdeviceptr> extra;  // alloc()'s allocations

  bool init(cgrt_runtime *r, const synth::Config &c = synth::Config()) {
    drv = r->drv;
    allocate = [this](size_t n, CUdeviceptr *p) {
      return drv->cuMemAlloc(p, n) == CUDA_SUCCESS ? CGRT_SUCCESS : CGRT_ERROR_DRIVER;
    };
    release = [this](CUdeviceptr p) { drv->cuMemFree(p); };
    memset_d32 = [this](CUdeviceptr d, unsigned v, size_t n, CUstream s) {
      return drv->cuMemsetD32Async(d, v, n, s) == CUDA_SUCCESS ? CGRT_SUCCESS : CGRT_ERROR_DRIVER;
    };
    return synth::Engine::init(r, c) == CGRT_SUCCESS;
  }
  void destroy() {
    if (!rt) return;
    drv->cuCtxSetCurrent(rt->ctx);
    drv->cuCtxSynchronize();
    for (CUdeviceptr p : extra) drv->cuMemFree(p);
    extra.clear();
    synth::Engine::destroy();
  }
  // A zeroed raw allocation, freed by destroy(); 0 on failure.
  CUdeviceptr alloc(size_t n) {
    CUdeviceptr p = 0;
    if (drv->cuMemAlloc(&p, n) != CUDA_SUCCESS) return 0;
    drv->cuMemsetD8(p, 0, n);
    extra.push_back(p);
    return p;
  }

  template <typename T>
  void put(CUdeviceptr p, const std::vector<T> &v) { upload(p, v.data(), v.size() * sizeof(T)); }
  // A host-to-device copy that has landed on return. cuMemcpyHtoD from pageable memory
  // returns once the data is staged, and its DMA is ordered on the legacy stream only: a
  // graph launched at once on a non-blocking stream could read the old contents.
  void upload(CUdeviceptr p, const void *src, size_t n) {
    ASSERT_EQ(drv->cuMemcpyHtoD(p, src, n), CUDA_SUCCESS);
    ASSERT_EQ(drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  template <typename T>
  std::vector<T> get(CUdeviceptr p, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(drv->cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(drv->cuMemcpyDtoH(v.data(), p, n * sizeof(T)), CUDA_SUCCESS);
    return v;
  }
  // The eager reference on the buffers at addr_b (run_eager, asserted).
  void eager_reference(const synth::Batch &bt, const CUdeviceptr *addr_b, int steps = 1) {
    CGRT_ASSERT_OK(run_eager(bt, addr_b, steps));
  }
  // Fills n floats at pa (and pb when set) with the same random values.
  void randomize(std::mt19937 &g, CUdeviceptr pa, CUdeviceptr pb, size_t n) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto &x : v) x = u(g);
    put(pa, v);
    if (pb) put(pb, v);
  }
};

class GraphsTest : public ::testing::Test {
 protected:
  cgrt_runtime *rt = nullptr;
  Engine eng;
  cgrt_graphs *set = nullptr;
  cgrt_buffer_desc descs[synth::NB];
  std::mt19937 rng{1234};

  void start(synth::Config cfg = synth::Config(), int fault = 0) {
    rt = cgrt_test::make_runtime(fault);
    ASSERT_NE(rt, nullptr);
    ASSERT_TRUE(eng.init(rt, cfg)) << "engine setup failed";
    eng.randomize(rng, eng.a[synth::X], eng.b[synth::X], eng.max_rows);
    eng.randomize(rng, eng.a[synth::WIN], eng.b[synth::WIN], eng.max_rows);
  }
  void TearDown() override {
    cgrt_fault_set(nullptr);
    if (set) {
      EXPECT_EQ(cgrt_graphs_destroy(set), CGRT_SUCCESS);
    }
    set = nullptr;
    eng.destroy();
    if (rt) cgrt_runtime_destroy(rt);
    rt = nullptr;
  }
  void make_set(const cgrt_graphs_options *o) {
    CGRT_ASSERT_OK(cgrt_graphs_create(rt, o, &set));
  }
  void default_set(cgrt_replay_mode mode = CGRT_REPLAY_POINTER_UPDATE, int device_patch = 0) {
    cgrt_graphs_options o;
    eng.options(&o, descs);
    o.replay_mode = mode;
    o.device_patch = device_patch;
    make_set(&o);
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  }
  // A set over a host engine of the test's own (enqueue, user, buffers) with one bucket
  // of 4 requests (max_num_seqs 4, max_model_len 16), `device_patch` and `checked_replay`
  // as given, captured.
  void one_bucket_set(cgrt_enqueue_fn enqueue, void *user, const cgrt_buffer_desc *bufs, size_t nbuf,
                      int device_patch, int checked = 0) {
    cgrt_graphs_options o = one_bucket_options(enqueue, user, bufs, nbuf);
    o.device_patch = device_patch;
    o.checked_replay = checked;
    make_set(&o);
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  }
  // The options of one_bucket_set (no set made): one bucket of 4 requests, max_num_seqs 4,
  // max_model_len 16, the library's defaults otherwise.
  static cgrt_graphs_options one_bucket_options(cgrt_enqueue_fn enqueue, void *user, const cgrt_buffer_desc *bufs,
                                                size_t nbuf) {
    static int sizes[] = {4};
    cgrt_graphs_options o;
    cgrt_graphs_options_init(&o);
    o.max_num_seqs = 4;
    o.max_model_len = 16;
    o.enqueue = enqueue;
    o.user = user;
    o.buffers = bufs;
    o.num_buffers = nbuf;
    o.capture_sizes = sizes;
    o.num_capture_sizes = 1;
    return o;
  }
  // A checked set (options.checked_replay) over the engine's buffers, `edit` applied to
  // its options, captured; cur = the a-side buffers.
  void checked_set(const std::function<void(cgrt_graphs_options &)> &edit = {}) {
    cgrt_graphs_options o;
    eng.options(&o, descs);
    o.checked_replay = 1;
    if (edit) edit(o);
    make_set(&o);
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
    init_cur();
  }
  // Fills OUT with a sentinel; out_untouched() then tells whether a step ran.
  void sentinel_out() {
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    eng.put(cur[synth::OUT], std::vector<float>((size_t)eng.max_rows, 5.0f));
  }
  bool out_untouched() {
    return eng.get<float>(cur[synth::OUT], (size_t)eng.max_rows) == std::vector<float>((size_t)eng.max_rows, 5.0f);
  }
  // Copies what the eager reference's copy of buffer f holds into `to` (memory of f's
  // size); returns `to`, or 0 after recording a failure.
  CUdeviceptr copy_of(synth::Buf f, CUdeviceptr to) {
    if (to == 0 || sync() != CGRT_SUCCESS ||
        eng.drv->cuMemcpyDtoDAsync(to, eng.b[f], eng.bytes[f], nullptr) != CUDA_SUCCESS ||
        sync() != CGRT_SUCCESS) {
      ADD_FAILURE() << "copying " << synth::kBufNames[f];
      return 0;
    }
    return to;
  }
  // The synthetic engine's module through the module API, with the C references registered
  // for the emulation: *m (to unload) and *f = synth_scale; both null after a recorded
  // failure.
  void load_synth_scale(cgrt_module **m, CUfunction *f) {
    *m = nullptr;
    *f = nullptr;
    CGRT_ASSERT_OK(synth::register_refs());
    CGRT_ASSERT_OK(cgrt_module_load(rt, synth::kernels_image(), m));
    CGRT_ASSERT_OK(cgrt_module_function(*m, "synth_scale", f));
  }
  // A runtime, the synthetic engine, a captured default set and cur = the a-side buffers.
  void start_set(cgrt_replay_mode mode = CGRT_REPLAY_POINTER_UPDATE, int device_patch = 0) {
    start();
    default_set(mode, device_patch);
    init_cur();
  }
  cgrt_status sync() { return cgrt_runtime_synchronize(rt); }
  // Steps that ran without an eager twin: copy the replayed KV cache to the reference's.
  void sync_reference_kv() {
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    ASSERT_EQ(eng.drv->cuMemcpyDtoDAsync(eng.b[synth::KV], cur[synth::KV], eng.bytes[synth::KV], nullptr),
              CUDA_SUCCESS);
    ASSERT_EQ(sync(), CGRT_SUCCESS);
  }

  // Current addresses of the set's buffers (a, as moved by bindings).
  std::vector<CUdeviceptr> cur;

  // Prepares one step: zeroes OUT in both copies, writes the per-request inputs.
  synth::Batch prepare(int reqs, int k, int headroom = 0) {
    auto bt = eng.random_batch(rng, reqs, k, headroom);
    std::vector<float> zero((size_t)eng.max_rows, 0.0f);
    eng.put(cur[synth::OUT], zero);
    eng.put(eng.b[synth::OUT], zero);
    return bt;
  }
  void write_a(const synth::Batch &bt) {
    eng.put(cur[synth::REQ_SEQ], bt.seq);
    eng.put(cur[synth::REQ_POS], bt.pos);
    eng.put(cur[synth::BT], bt.bt);
  }

  // Compares replayed results (at cur) with the eager reference (b).
  void expect_same(const synth::Batch &bt, int bucket_rows, const char *what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(sync(), CGRT_SUCCESS) << cgrt_last_error();
    int rows = bt.reqs * bt.k;
    using synth::Buf;
    for (Buf f : {synth::OUT, synth::Y, synth::Z, synth::WOUT}) {
      auto va = eng.get<float>(cur[f], rows), vb = eng.get<float>(eng.b[f], rows);
      EXPECT_EQ(va, vb) << "buffer " << synth::kBufNames[f] << " rows " << rows;
    }
    size_t kvn = eng.bytes[synth::KV] / 4;
    EXPECT_EQ(eng.get<float>(cur[synth::KV], kvn), eng.get<float>(eng.b[synth::KV], kvn)) << "kv cache";
    EXPECT_EQ(eng.get<int32_t>(cur[synth::SEQ], rows), eng.get<int32_t>(eng.b[synth::SEQ], rows));
    EXPECT_EQ(eng.get<int64_t>(cur[synth::POS], rows), eng.get<int64_t>(eng.b[synth::POS], rows));
    EXPECT_EQ(eng.get<int64_t>(cur[synth::SLOT], rows), eng.get<int64_t>(eng.b[synth::SLOT], rows));
    if (bucket_rows > rows) {  // padding rows are inert
      auto seq = eng.get<int32_t>(cur[synth::SEQ], bucket_rows);
      auto slot = eng.get<int64_t>(cur[synth::SLOT], bucket_rows);
      auto out = eng.get<float>(cur[synth::OUT], bucket_rows);
      for (int i = rows; i < bucket_rows; i++) {
        EXPECT_EQ(seq[i], 0) << "padding row " << i;
        EXPECT_EQ(slot[i], -1) << "padding row " << i;
        EXPECT_EQ(out[i], 0.0f) << "padding row " << i;
      }
    }
  }

  // One random step in `mode` through the set vs the eager reference.
  void step_and_check(cgrt_graph_mode mode, int reqs, const std::vector<cgrt_binding> &bind,
                      const char *what) {
    int k = mode == CGRT_GRAPH_BLOCK ? eng.cfg.block_len : 1;
    auto bt = prepare(reqs, k);
    write_a(bt);
    int bucket = cgrt_graphs_bucket_rows(set, mode, reqs);
    CGRT_ASSERT_OK(cgrt_graphs_step(set, mode, reqs, bind.data(), bind.size()));
    eng.eager_reference(bt, eng.b);
    expect_same(bt, bucket, what);
  }
  void init_cur() { cur.assign(eng.a, eng.a + synth::NB); }
  // A new copy of buffer f holding what the eager reference's copy holds; it becomes the
  // current address (the caller binds it). 0 on failure (a test failure is recorded).
  CUdeviceptr move_to_copy(synth::Buf f) {
    const CUdeviceptr alt = eng.alloc(eng.bytes[f]);
    std::vector<unsigned char> bytes(eng.bytes[f]);
    if (alt == 0 || sync() != CGRT_SUCCESS ||
        eng.drv->cuMemcpyDtoH(bytes.data(), eng.b[f], bytes.size()) != CUDA_SUCCESS) {
      ADD_FAILURE() << "copying " << synth::kBufNames[f];
      return 0;
    }
    eng.upload(alt, bytes.data(), bytes.size());
    cur[f] = alt;
    return alt;
  }
  uint64_t patched() {
    cgrt_graphs_stats s{};
    s.size = sizeof s;
    EXPECT_EQ(cgrt_graphs_get_stats(set, &s), CGRT_SUCCESS);
    return s.nodes_patched;
  }
  cgrt_graphs_stats stats() {
    cgrt_graphs_stats s{};
    s.size = sizeof s;
    EXPECT_EQ(cgrt_graphs_get_stats(set, &s), CGRT_SUCCESS);
    return s;
  }
  // Buckets whose kernel nodes are patched on the device.
  size_t device_patched_buckets() {
    size_t n = 0;
    for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
      cgrt_bucket_info b{};
      b.size = sizeof b;
      EXPECT_EQ(cgrt_graphs_get_bucket(set, i, &b), CGRT_SUCCESS);
      n += b.device_patch ? 1 : 0;
    }
    return n;
  }
  void fault_capture(int device_patch);
  void capture_faults(const cgrt_graphs_options &o, const std::function<void()> &after);
  void fault_step(int device_patch);
  void draft_loop(int device_patch);
};

}  // namespace cgrt_graphs_test

#endif
