// Pointer-updated replay of kernels that take their pointers inside a struct parameter
// (as PyTorch's do): every 8-byte word of a parameter that points into a registered
// buffer is a site, patched on the host or on the device, and checked by checked replay.
// synth_pair (tests/common/synth_kernels.cu) on a GPU, its C reference on the emulation.
#include <algorithm>
#include <cstring>

#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

// A host engine whose one kernel reads buffer "a" and writes buffer "b" through a struct
// parameter {n, pad, a, b, stride}, and a plain float.
struct PairEngine {
  static constexpr int kN = 64, kStride = 2;
  static constexpr size_t kBytesA = (size_t)kN * kStride * 4, kBytesB = (size_t)kN * 4;
  enum { A = 0, B = 1 };
  cgrt_runtime *rt = nullptr;
  cgrt_module *mod = nullptr;
  CUfunction f = nullptr;
  int pad = 0;
  CUdeviceptr fixed_b = 0;  // when set, the struct's b points here instead of buffer "b"
  static constexpr float kScale = 3.0f;

  cgrt_status launch(CUstream s, CUdeviceptr a, CUdeviceptr b) const {
    synth::Pair p = {kN, pad, a, b, kStride};
    float scale = kScale;
    void *args[] = {&p, &scale};
    return cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, s, args);
  }
  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *pe = static_cast<PairEngine *>(user);
    return pe->launch(s, d->buffers[A], pe->fixed_b ? pe->fixed_b : d->buffers[B]);
  }
};

class StructParamTest : public GraphsTest {
 protected:
  PairEngine pe;
  cgrt_buffer_desc bufs[2] = {};
  std::vector<CUdeviceptr> allocs;

  void SetUp() override {
    start();
    pe.rt = rt;
    CGRT_ASSERT_OK(synth::register_refs());
    CGRT_ASSERT_OK(cgrt_module_load(rt, synth::kernels_image(), &pe.mod));
    CGRT_ASSERT_OK(cgrt_module_function(pe.mod, "synth_pair", &pe.f));
  }
  void TearDown() override {
    if (set) {
      EXPECT_EQ(cgrt_graphs_destroy(set), CGRT_SUCCESS);
    }
    set = nullptr;
    for (CUdeviceptr p : allocs) EXPECT_EQ(cgrt_mem_free(rt, p), CGRT_SUCCESS);
    if (pe.mod) {
      EXPECT_EQ(cgrt_module_unload(pe.mod), CGRT_SUCCESS);
    }
    GraphsTest::TearDown();
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cgrt_mem_alloc(rt, bytes, &p), CGRT_SUCCESS) << cgrt_last_error();
    if (p != 0) allocs.push_back(p);
    return p;
  }
  void release(CUdeviceptr p) {
    auto it = std::find(allocs.begin(), allocs.end(), p);
    if (it != allocs.end()) allocs.erase(it);
    EXPECT_EQ(cgrt_mem_free(rt, p), CGRT_SUCCESS) << cgrt_last_error();
  }
  // A set over buffers a and b (at fresh allocations), one 4-request bucket, captured.
  void pair_set(int device_patch, int checked) {
    bufs[PairEngine::A] = {"a", alloc(PairEngine::kBytesA), PairEngine::kBytesA, CGRT_BUFFER_IN};
    bufs[PairEngine::B] = {"b", alloc(PairEngine::kBytesB), PairEngine::kBytesB, CGRT_BUFFER_OUT};
    ASSERT_NE(bufs[0].ptr, 0u);
    ASSERT_NE(bufs[1].ptr, 0u);
    one_bucket_set(PairEngine::enqueue, &pe, bufs, 2, device_patch, checked);
  }
  // Fresh random inputs in `a`; fills `b` with a sentinel.
  std::vector<float> fill(CUdeviceptr a, CUdeviceptr b) {
    std::vector<float> in(PairEngine::kBytesA / 4);
    for (float &v : in) v = (float)(rng() % 1000) / 8.0f;
    EXPECT_EQ(cgrt_memcpy_htod(rt, a, in.data(), PairEngine::kBytesA), CGRT_SUCCESS);
    std::vector<float> sentinel(PairEngine::kN, -7.0f);
    EXPECT_EQ(cgrt_memcpy_htod(rt, b, sentinel.data(), PairEngine::kBytesB), CGRT_SUCCESS);
    return in;
  }
  std::vector<float> get(CUdeviceptr p) {
    std::vector<float> v(PairEngine::kN);
    EXPECT_EQ(sync(), CGRT_SUCCESS) << cgrt_last_error();
    EXPECT_EQ(cgrt_memcpy_dtoh(rt, v.data(), p, PairEngine::kBytesB), CGRT_SUCCESS);
    return v;
  }
  // The step's result in b equals the eager launch of the same kernel on a (and the
  // kernel's formula).
  void expect_eager(CUdeviceptr a, CUdeviceptr b, const std::vector<float> &in, const char *what) {
    SCOPED_TRACE(what);
    CUdeviceptr ref = alloc(PairEngine::kBytesB);
    ASSERT_NE(ref, 0u);
    CGRT_ASSERT_OK(pe.launch(nullptr, a, ref));
    const std::vector<float> got = get(b), eager = get(ref);
    EXPECT_EQ(got, eager);
    for (int i = 0; i < PairEngine::kN; i++)
      ASSERT_EQ(eager[i], in[(size_t)i * PairEngine::kStride] * PairEngine::kScale + (float)pe.pad) << "i " << i;
    release(ref);
  }
  // Captured, then a and b rebound (both, then each alone, then both back): every step
  // equals eager, and the buffers it no longer points to are left alone.
  void rebind_both(int device_patch) {
    pair_set(device_patch, 0);
    if (HasFatalFailure()) return;
    if (device_patch) {
      if (device_patched_buckets() == 0 && getenv("CUDA_FORCE_PTX_JIT") != nullptr)
        GTEST_SKIP() << "CUDA_FORCE_PTX_JIT loads PTX only: device patching needs cgrt's SASS image";
      ASSERT_EQ(device_patched_buckets(), 1u) << "the emulation and CUDA 12.4+ on sm_90a patch on the device";
    }
    cgrt_bucket_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, 0, &info));
    EXPECT_EQ(info.patch_sites, 2u) << "a and b, both inside the struct parameter";
    const CUdeviceptr a0 = bufs[0].ptr, b0 = bufs[1].ptr, a1 = alloc(PairEngine::kBytesA),
                      b1 = alloc(PairEngine::kBytesB);
    ASSERT_NE(a1, 0u);
    ASSERT_NE(b1, 0u);
    struct Case {
      CUdeviceptr a, b;
      const char *what;
    } cases[] = {{a0, b0, "as captured"}, {a1, b1, "both moved"}, {a0, b1, "a moved back"},
                 {a1, b0, "both moved again"}, {a0, b0, "both back"}};
    CUdeviceptr last_a = a0, last_b = b0;
    for (const Case &c : cases) {
      SCOPED_TRACE(c.what);
      const std::vector<float> in = fill(c.a, c.b);
      const CUdeviceptr other_b = c.b == b0 ? b1 : b0;
      std::vector<float> sentinel(PairEngine::kN, -7.0f);
      CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, other_b, sentinel.data(), PairEngine::kBytesB));
      const cgrt_binding bind[2] = {{PairEngine::A, c.a, 0}, {PairEngine::B, c.b, 0}};
      const cgrt_graphs_stats before = stats();
      CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, bind, 2));
      const cgrt_graphs_stats after = stats();
      const uint64_t moved = (c.a != last_a || c.b != last_b) ? 1 : 0;  // one node, whatever moved
      EXPECT_EQ(after.nodes_patched - before.nodes_patched, device_patch ? 0 : moved);
      EXPECT_EQ(after.device_nodes_patched - before.device_nodes_patched, device_patch ? moved : 0);
      expect_eager(c.a, c.b, in, c.what);
      EXPECT_EQ(get(other_b), sentinel) << "the step wrote the buffer b no longer is";
      last_a = c.a;
      last_b = c.b;
      if (HasFailure()) return;
    }
  }
};

TEST_F(StructParamTest, PointersInsideAStructFollowBindings) { rebind_both(0); }

TEST_F(StructParamTest, PointersInsideAStructFollowBindingsOnTheDevice) { rebind_both(1); }

// Checked replay: a buffer reached only through a struct parameter is checked like any
// other (it used to be skipped: the step launched on freed memory); a struct word that
// looks like an address but lies in nothing known (n = 64, pad = 1: 0x100000040) is not
// refused; a struct word into a known allocation freed since is refused, naming the word.
TEST_F(StructParamTest, CheckedReplayChecksPointersInsideAStruct) {
  pe.pad = 1;
  pair_set(0, 1);
  if (HasFatalFailure()) return;
  const CUdeviceptr a0 = bufs[0].ptr, b0 = bufs[1].ptr;
  std::vector<float> in = fill(a0, b0);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0));
  expect_eager(a0, b0, in, "baseline: the first word looks like an address but is no pointer");
  // a bound to an allocation that is then freed.
  const CUdeviceptr a1 = alloc(PairEngine::kBytesA);
  ASSERT_NE(a1, 0u);
  in = fill(a1, b0);
  const cgrt_binding to_a1 = {PairEngine::A, a1, 0};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, &to_a1, 1));
  expect_eager(a1, b0, in, "a moved");
  release(a1);
  const std::vector<float> sentinel(PairEngine::kN, -7.0f);
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, b0, sentinel.data(), PairEngine::kBytesB));
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0));
  EXPECT_NE(std::string(cgrt_last_error()).find("'a'"), std::string::npos) << cgrt_last_error();
  EXPECT_EQ(get(b0), sentinel) << "nothing launched";
  // b bound to memory already freed.
  const CUdeviceptr b1 = alloc(PairEngine::kBytesB);
  ASSERT_NE(b1, 0u);
  release(b1);
  const cgrt_binding stale[2] = {{PairEngine::A, a0, 0}, {PairEngine::B, b1, 0}};
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, stale, 2));
  EXPECT_NE(std::string(cgrt_last_error()).find("'b'"), std::string::npos) << cgrt_last_error();
  EXPECT_EQ(get(b0), sentinel) << "nothing launched";
  // Both bound back to live memory: the set runs again.
  in = fill(a0, b0);
  const cgrt_binding back[2] = {{PairEngine::A, a0, 0}, {PairEngine::B, b0, 0}};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, back, 2));
  expect_eager(a0, b0, in, "bound back");
  if (HasFailure()) return;
  // The struct's b points into a cgrt allocation (no buffer) that is freed after capture.
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  pe.fixed_b = alloc(PairEngine::kBytesB);
  ASSERT_NE(pe.fixed_b, 0u);
  pair_set(0, 1);
  if (HasFatalFailure()) return;
  in = fill(bufs[0].ptr, pe.fixed_b);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0));
  expect_eager(bufs[0].ptr, pe.fixed_b, in, "b in a cgrt allocation");
  release(pe.fixed_b);
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0));
  const std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("synth_pair"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parameter 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("word at offset 16"), std::string::npos) << msg;
  pe.fixed_b = 0;
}

}  // namespace cgrt_graphs_test
