// Capture segments (include/cgrt/cgrt_segment.h): a "layer" captured once (or twice, and
// compared) and appended for the other layers with their buffers remapped computes what
// capturing every layer computes, copies are patched like captured nodes when a set's
// buffer moves, and the contract's violations and bad calls get clear statuses.
// synth_scale / synth_pair (tests/common/synth_kernels.cu) and a memset node, on a GPU
// or their C references on the emulation.
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_segment.h"
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

// A host engine with L "layers" over one set buffer h (the residual stream, in place):
//   memset u_l = 1.0f;  t_l = 2 h + 1 (synth_scale);  h = 0.5 t_l (synth_pair, pointers in
//   a struct)
// so that after L layers h = h0 + L / 2, t_l = 2 (h0 + l / 2) + 1 and u_l = 1: every layer
// leaves its own mark in its own buffers, in order.
struct LayerEngine {
  static constexpr int kN = 64, kLayers = 6;
  static constexpr size_t kBytes = kN * sizeof(float);
  cgrt_runtime *rt = nullptr;
  const cgrt__driver *drv = nullptr;
  CUfunction scale = nullptr, pair = nullptr;
  CUdeviceptr t[kLayers] = {}, u[kLayers] = {};
  bool segments = true, verify = true;
  float layer1_scale = 2.0f;  // != 2: layer 1 breaks the contract (a per-layer scalar)
  // What the capture saw (filled while capturing)
  cgrt_status compare_status = CGRT_SUCCESS;
  std::string compare_message;
  size_t segment_nodes = 0;
  cgrt_segment *kept = nullptr;  // keep_segment: the base segment outlives the capture
  bool keep_segment = false;

  bool packed = false;  // synth_scale launched with `extra`-packed parameters (as cuBLAS does)

  cgrt_status layer(CUstream s, CUdeviceptr h, int l) const {
    if (drv->cuMemsetD32Async(u[l], 0x3f800000u, kN, s) != CUDA_SUCCESS) return CGRT_ERROR_DRIVER;
    int n = kN;
    float a = l == 1 ? layer1_scale : 2.0f;
    void *sargs[] = {&n, &h, (void *)&t[l], &a};
    cgrt_status st = CGRT_SUCCESS;
    if (packed) {  // the device ABI's layout: int @0, pointers @8 and @16, float @24
      unsigned char buf[32] = {};
      memcpy(buf, &n, 4);
      memcpy(buf + 8, &h, 8);
      memcpy(buf + 16, &t[l], 8);
      memcpy(buf + 24, &a, 4);
      size_t size = 28;
      void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
      if (drv->cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, s, nullptr, extra) != CUDA_SUCCESS) return CGRT_ERROR_DRIVER;
    } else {
      st = cgrt_launch_kernel(rt, scale, 1, 1, 1, 64, 1, 1, 0, s, sargs);
    }
    if (st) return st;
    synth::Pair p = {kN, 0, t[l], h, 1};
    float half = 0.5f;
    void *pargs[] = {&p, &half};
    return cgrt_launch_kernel(rt, pair, 1, 1, 1, 64, 1, 1, 0, s, pargs);
  }
  std::vector<cgrt_remap> remaps(int from, int to) const {
    return {{t[from], t[to], kBytes}, {u[from], u[to], kBytes}};
  }
  cgrt_status run(CUstream s, CUdeviceptr h) {
    int capturing = 0;
    cgrt_status st = cgrt_stream_capturing(rt, s, &capturing);
    if (st) return st;
    if (!capturing || !segments) {
      for (int l = 0; l < kLayers && st == CGRT_SUCCESS; l++) st = layer(s, h, l);
      return st;
    }
    cgrt_segment *s0 = nullptr, *s1 = nullptr, *base = nullptr;
    int next = 1;
    if ((st = cgrt_segment_begin(rt, s, &s0)) || (st = layer(s, h, 0)) || (st = cgrt_segment_end(s0))) goto out;
    base = s0;
    if (verify) {
      if ((st = cgrt_segment_begin(rt, s, &s1)) || (st = layer(s, h, 1)) || (st = cgrt_segment_end(s1))) goto out;
      {
        std::vector<cgrt_remap> m = remaps(0, 1);
        compare_status = cgrt_segment_compare(s0, s1, m.data(), m.size());
        if (compare_status) compare_message = cgrt_last_error();
      }
      base = s1;
      next = 2;
    }
    if ((st = cgrt_segment_nodes(base, &segment_nodes))) goto out;
    for (int l = next; l < kLayers; l++) {
      std::vector<cgrt_remap> m = remaps(base == s1 ? 1 : 0, l);
      if ((st = cgrt_segment_append(base, m.data(), m.size()))) goto out;
    }
  out:
    if (keep_segment && base != nullptr) {
      kept = base;
      if (base == s1) s1 = nullptr;
      else s0 = nullptr;
    }
    cgrt_segment_destroy(s0);
    cgrt_segment_destroy(s1);
    return st;
  }
  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    return static_cast<LayerEngine *>(user)->run(s, d->buffers[0]);
  }
};

class SegmentTest : public GraphsTest {
 protected:
  LayerEngine le;
  cgrt_module *mod = nullptr;
  cgrt_buffer_desc buf[1] = {};
  CUdeviceptr h = 0;

  int fault_ = 0;  // a runtime with fault injection (SegmentFaultTest)

  void SetUp() override {
    start(synth::Config(), fault_);
    le.rt = rt;
    le.drv = rt->drv;
    CGRT_ASSERT_OK(synth::register_refs());
    CGRT_ASSERT_OK(cgrt_module_load(rt, synth::kernels_image(), &mod));
    CGRT_ASSERT_OK(cgrt_module_function(mod, "synth_scale", &le.scale));
    CGRT_ASSERT_OK(cgrt_module_function(mod, "synth_pair", &le.pair));
    for (int l = 0; l < LayerEngine::kLayers; l++) {
      le.t[l] = eng.alloc(LayerEngine::kBytes);
      le.u[l] = eng.alloc(LayerEngine::kBytes);
      ASSERT_NE(le.t[l], 0u);
      ASSERT_NE(le.u[l], 0u);
    }
    h = eng.alloc(LayerEngine::kBytes);
    ASSERT_NE(h, 0u);
    buf[0] = {"h", h, LayerEngine::kBytes, CGRT_BUFFER_INOUT};
  }
  void TearDown() override {
    cgrt_segment_destroy(le.kept);
    if (set) {
      EXPECT_EQ(cgrt_graphs_destroy(set), CGRT_SUCCESS);
    }
    set = nullptr;
    if (mod) {
      EXPECT_EQ(cgrt_module_unload(mod), CGRT_SUCCESS);
    }
    GraphsTest::TearDown();
  }
  size_t nodes() {
    cgrt_graphs_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    EXPECT_EQ(cgrt_graphs_get_stats(set, &s), CGRT_SUCCESS) << cgrt_last_error();
    return s.nodes;
  }
  // h = h0 (i / 8), t and u zeroed; one step; the layers' marks checked.
  void step_and_check(CUdeviceptr at, const cgrt_binding *b, size_t nb, const char *what) {
    SCOPED_TRACE(what);
    std::vector<float> h0(LayerEngine::kN), zero(LayerEngine::kN, 0.0f);
    for (int i = 0; i < LayerEngine::kN; i++) h0[i] = (float)i / 8.0f;
    eng.put(at, h0);
    for (int l = 0; l < LayerEngine::kLayers; l++) {
      eng.put(le.t[l], zero);
      eng.put(le.u[l], zero);
    }
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, b, nb));
    CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
    std::vector<float> got = eng.get<float>(at, LayerEngine::kN);
    for (int i = 0; i < LayerEngine::kN; i++)
      ASSERT_EQ(got[i], h0[i] + 0.5f * LayerEngine::kLayers) << "h[" << i << "]";
    for (int l = 0; l < LayerEngine::kLayers; l++) {
      std::vector<float> t = eng.get<float>(le.t[l], LayerEngine::kN), u = eng.get<float>(le.u[l], LayerEngine::kN);
      for (int i = 0; i < LayerEngine::kN; i++) {
        ASSERT_EQ(t[i], 2.0f * (h0[i] + 0.5f * (float)l) + 1.0f) << "layer " << l << " t[" << i << "]";
        ASSERT_EQ(u[i], 1.0f) << "layer " << l << " u[" << i << "]";
      }
    }
  }
};

TEST_F(SegmentTest, AppendedLayersComputeWhatCapturedLayersDo) {
  le.segments = false;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  const size_t full = nodes();
  step_and_check(h, nullptr, 0, "every layer captured");
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;

  le.segments = true;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  EXPECT_EQ(le.compare_status, CGRT_SUCCESS) << le.compare_message;
  EXPECT_EQ(le.segment_nodes, 3u);  // memset, scale, pair
  EXPECT_EQ(nodes(), full);
  step_and_check(h, nullptr, 0, "layers 2.. appended");
}

// A kernel launched with `extra`-packed parameters (cuBLAS's nvjet GEMMs are) is read
// from its packed buffer and copied the same way; a per-layer scalar in it is caught.
TEST_F(SegmentTest, PackedParametersAreCopiedAndCompared) {
  le.packed = true;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  EXPECT_EQ(le.compare_status, CGRT_SUCCESS) << le.compare_message;
  EXPECT_EQ(le.segment_nodes, 3u);
  step_and_check(h, nullptr, 0, "layers 2.. appended, scale packed");
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  le.layer1_scale = 3.0f;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  EXPECT_EQ(le.compare_status, CGRT_ERROR_NOT_SUPPORTED);
  EXPECT_NE(le.compare_message.find("0x40400000"), std::string::npos) << le.compare_message;
}

TEST_F(SegmentTest, AppendedWithoutAComparedLayer) {
  le.verify = false;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  step_and_check(h, nullptr, 0, "layers 1.. appended from layer 0");
}

// The set indexes the copies like captured nodes: when h moves, every copy follows it,
// patched on the host or on the device.
TEST_F(SegmentTest, CopiesFollowAMovedBuffer) {
  for (int device_patch = 0; device_patch <= 1; device_patch++) {
    SCOPED_TRACE(device_patch ? "device patch" : "host patch");
    one_bucket_set(LayerEngine::enqueue, &le, buf, 1, device_patch);
    // PTX-only loads patch on the host (device_patch_test.cc says why)
    const bool ptx_only = getenv("CUDA_FORCE_PTX_JIT") != nullptr;
    if (device_patch && !ptx_only) {
      ASSERT_EQ(device_patched_buckets(), 1u);
    }
    CUdeviceptr h2 = eng.alloc(LayerEngine::kBytes);
    ASSERT_NE(h2, 0u);
    cgrt_binding b = {0, h2, 0};
    step_and_check(h2, &b, 1, "h moved");
    b.ptr = h;
    step_and_check(h, &b, 1, "h back");
    CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
    set = nullptr;
  }
}

// A layer whose launch differs by more than its buffers (a per-layer scalar) is caught
// by the comparison, which names the node, kernel, parameter and both values.
TEST_F(SegmentTest, CompareNamesAPerLayerScalar) {
  le.layer1_scale = 3.0f;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  EXPECT_EQ(le.compare_status, CGRT_ERROR_NOT_SUPPORTED);
  EXPECT_NE(le.compare_message.find("node 1"), std::string::npos) << le.compare_message;
  EXPECT_NE(le.compare_message.find("synth_scale"), std::string::npos) << le.compare_message;
  EXPECT_NE(le.compare_message.find("parameter 3"), std::string::npos) << le.compare_message;
  EXPECT_NE(le.compare_message.find("0x40000000"), std::string::npos) << le.compare_message;  // 2.0f
  EXPECT_NE(le.compare_message.find("0x40400000"), std::string::npos) << le.compare_message;  // 3.0f
}

// Every driver call of a capture with segments failed once in turn (begin's capture
// query, end's node reads, append's node adds and dependency update...): a status with a
// message, no leak, and the next capture of the same set computes the right result.
class SegmentFaultTest : public SegmentTest {
 protected:
  SegmentFaultTest() { fault_ = 1; }
};

TEST_F(SegmentFaultTest, EveryDriverFaultInASegmentedCaptureIsAStatus) {
  capture_faults(one_bucket_options(LayerEngine::enqueue, &le, buf, 1),
                 [&] { step_and_check(h, nullptr, 0, "after a fault"); });
}

TEST_F(SegmentTest, CallsOutsideACaptureAreRefused) {
  CUstream s = nullptr;
  ASSERT_EQ(rt->drv->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  int capturing = -1;
  CGRT_ASSERT_OK(cgrt_stream_capturing(rt, s, &capturing));
  EXPECT_EQ(capturing, 0);
  EXPECT_EQ(cgrt_stream_capturing(rt, s, nullptr), CGRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cgrt_stream_capturing(nullptr, s, &capturing), CGRT_ERROR_INVALID_HANDLE);
  cgrt_segment *seg = reinterpret_cast<cgrt_segment *>(0x1);
  EXPECT_EQ(cgrt_segment_begin(rt, s, &seg), CGRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seg, nullptr);
  EXPECT_NE(std::string(cgrt_last_error()).find("not capturing"), std::string::npos) << cgrt_last_error();
  EXPECT_EQ(cgrt_segment_begin(rt, s, nullptr), CGRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cgrt_segment_begin(nullptr, s, &seg), CGRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cgrt_segment_end(nullptr), CGRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cgrt_segment_append(nullptr, nullptr, 0), CGRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cgrt_segment_compare(nullptr, nullptr, nullptr, 0), CGRT_ERROR_INVALID_HANDLE);
  size_t n = 0;
  EXPECT_EQ(cgrt_segment_nodes(nullptr, &n), CGRT_ERROR_INVALID_HANDLE);
  cgrt_segment_destroy(nullptr);
  EXPECT_EQ(rt->drv->cuStreamDestroy(s), CUDA_SUCCESS);
}

// Bad calls inside a capture: each refused with a status and a message, and the capture
// goes on (the set's bucket is captured and computes the right result).
struct MisuseEngine : LayerEngine {
  std::vector<std::pair<cgrt_status, std::string>> seen;
  void note(cgrt_status st) { seen.emplace_back(st, st ? cgrt_last_error() : ""); }
  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *m = static_cast<MisuseEngine *>(user);
    int capturing = 0;
    cgrt_status st = cgrt_stream_capturing(m->rt, s, &capturing);
    if (st || !capturing) return st ? st : m->run(s, d->buffers[0]);
    cgrt_segment *seg = nullptr;
    if ((st = cgrt_segment_begin(m->rt, s, &seg))) return st;
    m->note(cgrt_segment_append(seg, nullptr, 0));  // 0: not ended
    size_t n = 0;
    m->note(cgrt_segment_nodes(seg, &n));  // 1: not ended
    if ((st = m->layer(s, d->buffers[0], 0)) || (st = cgrt_segment_end(seg))) return st;
    m->note(cgrt_segment_end(seg));  // 2: twice
    cgrt_remap bad[2] = {{m->t[0], m->t[1] + 16, kBytes}, {m->u[0], m->u[1], kBytes}};
    m->note(cgrt_segment_append(seg, bad, 2));  // 3: not a multiple of 256
    cgrt_remap zero[1] = {{m->t[0], m->t[1], 0}};
    m->note(cgrt_segment_append(seg, zero, 1));  // 4: 0 bytes
    cgrt_remap overlap[2] = {{m->t[0], m->t[1], kBytes}, {m->t[0], m->t[2], 8}};
    m->note(cgrt_segment_append(seg, overlap, 2));  // 5: overlapping
    m->note(cgrt_segment_append(seg, nullptr, 1));  // 6: NULL remaps
    for (int l = 1; l < kLayers; l++) {  // then the real thing
      std::vector<cgrt_remap> r = m->remaps(0, l);
      if ((st = cgrt_segment_append(seg, r.data(), r.size()))) break;
    }
    cgrt_segment_destroy(seg);
    return st;
  }
};

TEST_F(SegmentTest, BadCallsInACaptureAreRefusedAndTheCaptureGoesOn) {
  MisuseEngine me;
  me.rt = rt;
  me.drv = rt->drv;
  me.scale = le.scale;
  me.pair = le.pair;
  memcpy(me.t, le.t, sizeof me.t);
  memcpy(me.u, le.u, sizeof me.u);
  one_bucket_set(MisuseEngine::enqueue, &me, buf, 1, 0);
  const cgrt_status want[] = {CGRT_ERROR_INVALID_ARGUMENT, CGRT_ERROR_INVALID_ARGUMENT, CGRT_ERROR_INVALID_ARGUMENT,
                              CGRT_ERROR_INVALID_ARGUMENT, CGRT_ERROR_INVALID_ARGUMENT, CGRT_ERROR_INVALID_ARGUMENT,
                              CGRT_ERROR_INVALID_ARGUMENT};
  const char *words[] = {"not ended", "not ended", "ended already", "multiple of 256", "0 bytes", "overlap", "NULL"};
  ASSERT_EQ(me.seen.size(), 7u);
  for (size_t i = 0; i < me.seen.size(); i++) {
    EXPECT_EQ(me.seen[i].first, want[i]) << i;
    EXPECT_NE(me.seen[i].second.find(words[i]), std::string::npos) << i << ": " << me.seen[i].second;
  }
  step_and_check(h, nullptr, 0, "appended after the refused calls");
}

// A segment kept past its capture cannot append to a capture that has ended (or to
// another capture of the same stream).
TEST_F(SegmentTest, AppendAfterTheCaptureEndedIsRefused) {
  le.keep_segment = true;
  one_bucket_set(LayerEngine::enqueue, &le, buf, 1, 0);
  ASSERT_NE(le.kept, nullptr);
  std::vector<cgrt_remap> m = le.remaps(1, 2);
  EXPECT_EQ(cgrt_segment_append(le.kept, m.data(), m.size()), CGRT_ERROR_INVALID_ARGUMENT);
  size_t n = 0;
  CGRT_ASSERT_OK(cgrt_segment_nodes(le.kept, &n));
  EXPECT_EQ(n, 3u);
  cgrt_segment_destroy(le.kept);
  le.kept = nullptr;
  EXPECT_EQ(cgrt_segment_nodes(le.kept, &n), CGRT_ERROR_INVALID_HANDLE);
  step_and_check(h, nullptr, 0, "the captured graph");
}

}  // namespace cgrt_graphs_test

namespace cgrt_graphs_test {

// The callback knows a warm-up from a capture and from an eager step past the largest
// bucket (cgrt_batch_desc.warmup): only the warm-up runs may skip work.
struct WarmupProbe {
  std::vector<std::pair<int, int>> seen;  // (warmup, capturing) per call
  static cgrt_status enqueue(void *user, CUstream, const cgrt_batch_desc *d) {
    static_cast<WarmupProbe *>(user)->seen.emplace_back(d->warmup, d->capturing);
    return CGRT_SUCCESS;
  }
};

TEST_F(GraphsTest, WarmUpRunsAreMarkedInTheBatch) {
  start();
  WarmupProbe p;
  static int sizes[] = {2};
  cgrt_buffer_desc b = {"x", eng.alloc(256), 256, CGRT_BUFFER_INOUT};
  cgrt_graphs_options o = one_bucket_options(WarmupProbe::enqueue, &p, &b, 1);
  o.capture_sizes = sizes;  // a bucket of 2: a step of 4 runs eagerly
  o.warmup_runs = 2;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));  // past the bucket: eager
  CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
  const std::vector<std::pair<int, int>> want = {{1, 0}, {1, 0}, {0, 1}, {0, 0}};
  EXPECT_EQ(p.seen, want);
}

}  // namespace cgrt_graphs_test
