// The emulation as a sanitizer (docs/emulation.md): launches whose pointer parameters
// point into freed device memory, and references that would read or write outside a
// live allocation, fail with CUDA_ERROR_ILLEGAL_ADDRESS from the call that launched
// (eager, or the graph launch whose node it was) instead of touching that memory; nothing
// leaks and the process goes on. Issue 24, item 6: (a) a plain replay after the engine
// freed and reallocated a bound buffer read freed host memory (ASan heap-use-after-free);
// (b) an MLA step whose block table names a page past the KV cache crashed the reference.
// Run under --config=asan too: no report may appear. Emulation only (on a GPU both are
// undefined behaviour: the tests skip there, saying why).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_module.h"
#include "runtime/emu/emu.h"
#include "runtime/emu/emu_view.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace {

// emu_san_scale(int n, const float *in, float *out, float a): out[i] = a * in[i].
void ScaleRef(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  const int n = *(const int *)(const void *)(p + off[0]);
  const float *in = (const float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[1]));
  float *out = (float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[2]));
  const float a = *(const float *)(const void *)(p + off[3]);
  for (int i = 0; i < n; i++) out[i] = a * in[i];
}

// emu_san_gather(const int *idx, const float *src, float *dst, int n): dst[i] =
// src[idx[i]], each read through a checked view of src (emu_view.h), as a reference
// follows a data-dependent index.
void GatherRef(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  const int *idx = (const int *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[0]));
  const float *src = (const float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[1]));
  float *dst = (float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[2]));
  const int n = *(const int *)(const void *)(p + off[3]);
  const size_t elems = cgrt__emu_view_bytes(src) / sizeof(float);
  for (int i = 0; i < n; i++) {
    if (idx[i] < 0 || (size_t)idx[i] >= elems) {
      cgrt__emu_view_fault(src + idx[i], sizeof(float), "src[idx[i]]");
      return;
    }
    dst[i] = src[idx[i]];
  }
}

class Sanitizer : public ::testing::Test {
 protected:
  cgrt_runtime *rt = nullptr;
  const cgrt__driver *d = nullptr;
  cgrt_module *mod = nullptr;
  size_t live_at_start = 0;

  void SetUp() override {
    live_at_start = cgrt__emu_live_objects();
    rt = cgrt_test::make_runtime();
    ASSERT_NE(rt, nullptr);
    if (!cgrt_test::is_emulated(rt)) GTEST_SKIP() << "the emulation's sanitizer: undefined behaviour on a GPU";
    d = rt->drv;
    size_t scale[4] = {4, 8, 8, 4}, gather[4] = {8, 8, 8, 4};
    CGRT_ASSERT_OK(cgrt_emulated_kernel_register("emu_san_scale", 4, scale, ScaleRef));
    CGRT_ASSERT_OK(cgrt_emulated_kernel_register("emu_san_gather", 4, gather, GatherRef));
    static const char image[] = "emulated";
    CGRT_ASSERT_OK(cgrt_module_load(rt, image, &mod));
  }
  // Everything the test and the runtime allocated is gone once the runtime is.
  void TearDown() override {
    if (mod) {
      EXPECT_EQ(cgrt_module_unload(mod), CGRT_SUCCESS);
    }
    if (rt) {
      EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS) << cgrt_last_error();
    }
    if (d) {
      EXPECT_EQ(live_at_start, cgrt__emu_live_objects()) << "leaked emulation objects";
    }
  }
  CUfunction fn(const char *name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cgrt_module_function(mod, name, &f), CGRT_SUCCESS) << cgrt_last_error();
    return f;
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cgrt_mem_alloc(rt, bytes, &p), CGRT_SUCCESS) << cgrt_last_error();
    return p;
  }
  void put(CUdeviceptr dst, const std::vector<float> &v) {
    ASSERT_EQ(cgrt_memcpy_htod(rt, dst, v.data(), v.size() * 4), CGRT_SUCCESS) << cgrt_last_error();
  }
  std::vector<float> get(CUdeviceptr src, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(cgrt_memcpy_dtoh(rt, v.data(), src, n * 4), CGRT_SUCCESS) << cgrt_last_error();
    return v;
  }
  // The launching call failed with the emulation's fault: CGRT_ERROR_DRIVER naming
  // CUDA_ERROR_ILLEGAL_ADDRESS, one more fault counted, described with `words`.
  void expect_fault(cgrt_status st, size_t faults_before, const std::vector<std::string> &words) {
    EXPECT_EQ(st, CGRT_ERROR_DRIVER) << cgrt_status_name(st);
    const std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << msg;
    EXPECT_EQ(cgrt__emu_faults(), faults_before + 1);
    const std::string fault = cgrt__emu_last_fault();
    for (const std::string &w : words) EXPECT_NE(fault.find(w), std::string::npos) << w << " in: " << fault;
  }
};

TEST_F(Sanitizer, EagerLaunchWithAPointerIntoFreedMemoryFailsBeforeRunning) {
  const int n = 64;
  const CUdeviceptr in = alloc(n * 4), out = alloc(n * 4), spacer = alloc(256);
  put(in, std::vector<float>(n, 2.f));
  put(out, std::vector<float>(n, 5.f));
  CUfunction f = fn("emu_san_scale");
  float a = 3.f;
  int nn = n;
  CUdeviceptr pin = in, pout = out;
  void *args[] = {&nn, &pin, &pout, &a};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args));
  EXPECT_EQ(get(out, n), std::vector<float>(n, 6.f));
  put(out, std::vector<float>(n, 5.f));
  CGRT_ASSERT_OK(cgrt_mem_free(rt, in));  // `in` is freed; the launch still names it
  const size_t before = cgrt__emu_faults();
  expect_fault(cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args), before,
               {"emu_san_scale", "parameter 1", "freed"});
  EXPECT_EQ(get(out, n), std::vector<float>(n, 5.f)) << "nothing ran";
  // A pointer just past a live allocation (its red zone) and host memory the emulation
  // does not know are not faults by themselves (a kernel may not read them).
  std::vector<float> host(n, 1.f);
  pin = (CUdeviceptr)(uintptr_t)host.data();
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args));
  EXPECT_EQ(get(out, n), std::vector<float>(n, 3.f));
  CGRT_ASSERT_OK(cgrt_mem_free(rt, out));
  CGRT_ASSERT_OK(cgrt_mem_free(rt, spacer));
}

// A reference that would read past its source through a checked view: eager and as a
// node of a graph launch, the launching call fails and the view's memory is not read.
TEST_F(Sanitizer, ReferenceReadOutsideItsAllocationFailsEagerAndInAGraph) {
  const int n = 8;
  const CUdeviceptr idx = alloc(n * 4), src = alloc(16 * 4), dst = alloc(n * 4);
  std::vector<int> in_range = {0, 3, 15, 7, 1, 2, 4, 5}, past = {0, 3, 16 + 64, 7, 1, 2, 4, 5};
  std::vector<float> s(16);
  for (int i = 0; i < 16; i++) s[i] = (float)i;
  put(src, s);
  ASSERT_EQ(cgrt_memcpy_htod(rt, idx, in_range.data(), n * 4), CGRT_SUCCESS);
  CUfunction f = fn("emu_san_gather");
  CUdeviceptr pidx = idx, psrc = src, pdst = dst;
  int nn = n;
  void *args[] = {&pidx, &psrc, &pdst, &nn};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 32, 1, 1, 0, nullptr, args));
  EXPECT_EQ(get(dst, n), (std::vector<float>{0, 3, 15, 7, 1, 2, 4, 5}));

  CUstream st = nullptr;
  ASSERT_EQ(d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 32, 1, 1, 0, st, args));
  CUgraph g = nullptr;
  ASSERT_EQ(d->cuStreamEndCapture(st, &g), CUDA_SUCCESS);
  CUgraphExec e = nullptr;
  ASSERT_EQ(d->cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuGraphLaunch(e, st), CUDA_SUCCESS);

  ASSERT_EQ(cgrt_memcpy_htod(rt, idx, past.data(), n * 4), CGRT_SUCCESS);
  const size_t before = cgrt__emu_faults();
  expect_fault(cgrt_launch_kernel(rt, f, 1, 1, 1, 32, 1, 1, 0, nullptr, args), before,
               {"emu_san_gather", "src[idx[i]]", "outside every live allocation"});
  EXPECT_EQ(d->cuGraphLaunch(e, st), CUDA_ERROR_ILLEGAL_ADDRESS) << "the graph's node faults too";
  EXPECT_EQ(cgrt__emu_faults(), before + 2);
  ASSERT_EQ(cgrt_memcpy_htod(rt, idx, in_range.data(), n * 4), CGRT_SUCCESS);
  EXPECT_EQ(d->cuGraphLaunch(e, st), CUDA_SUCCESS) << "the context stays usable";
  EXPECT_EQ(d->cuGraphExecDestroy(e), CUDA_SUCCESS);
  EXPECT_EQ(d->cuGraphDestroy(g), CUDA_SUCCESS);
  EXPECT_EQ(d->cuStreamDestroy(st), CUDA_SUCCESS);
  for (CUdeviceptr p : {idx, src, dst}) CGRT_ASSERT_OK(cgrt_mem_free(rt, p));
}

// Issue 24 item 6 (a): a plain (unchecked) replay after the engine freed a bound buffer
// and allocated another one elsewhere. Without the sanitizer the replayed node read the
// freed memory (ASan: heap-use-after-free); now the step fails with the fault, the output
// is untouched, and binding the new buffer recovers.
struct ScaleEngine {
  CUfunction f = nullptr;
  cgrt_runtime *rt = nullptr;
};
cgrt_status scale_cb(void *user, CUstream s, const cgrt_batch_desc *b) {
  ScaleEngine *e = static_cast<ScaleEngine *>(user);
  int n = b->padded_rows;
  float a = 2.f;
  CUdeviceptr in = b->buffers[0], out = b->buffers[1];
  void *args[] = {&n, &in, &out, &a};
  return cgrt_launch_kernel(e->rt, e->f, 1, 1, 1, 32, 1, 1, 0, s, args);
}

TEST_F(Sanitizer, PlainReplayAfterABoundBufferWasFreedAndReallocatedFails) {
  const int rows = 4;
  const size_t bytes = rows * 4;
  const CUdeviceptr x = alloc(bytes), out = alloc(bytes), spacer = alloc(256);
  put(x, {1, 2, 3, 4});
  ScaleEngine eng{fn("emu_san_scale"), rt};
  cgrt_buffer_desc bufs[2] = {{"x", x, bytes, CGRT_BUFFER_IN}, {"out", out, bytes, CGRT_BUFFER_OUT}};
  static int sizes[] = {rows};
  cgrt_graphs_options o;
  cgrt_graphs_options_init(&o);
  o.max_num_seqs = rows;
  o.max_model_len = 16;
  o.enqueue = scale_cb;
  o.user = &eng;
  o.buffers = bufs;
  o.num_buffers = 2;
  o.capture_sizes = sizes;
  o.num_capture_sizes = 1;
  cgrt_graphs *set = nullptr;
  CGRT_ASSERT_OK(cgrt_graphs_create(rt, &o, &set));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, rows, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));
  EXPECT_EQ(get(out, rows), (std::vector<float>{2, 4, 6, 8}));

  // The engine frees x and allocates a larger buffer: the spacer keeps it from x's place.
  CGRT_ASSERT_OK(cgrt_mem_free(rt, x));
  const CUdeviceptr x2 = alloc(4096);
  ASSERT_NE(x2, x) << "the new buffer must not take the freed address for this case";
  put(x2, {5, 6, 7, 8, 0, 0, 0, 0});
  put(out, {-1, -1, -1, -1});
  const size_t before = cgrt__emu_faults();
  expect_fault(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, rows, nullptr, 0), before,
               {"emu_san_scale", "parameter 1", "freed"});
  EXPECT_EQ(get(out, rows), (std::vector<float>{-1, -1, -1, -1})) << "nothing was read or written";

  cgrt_binding bind = {0, x2, bytes};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, rows, &bind, 1));
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));
  EXPECT_EQ(get(out, rows), (std::vector<float>{10, 12, 14, 16})) << "bound to the new buffer";
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  for (CUdeviceptr p : {x2, out, spacer}) CGRT_ASSERT_OK(cgrt_mem_free(rt, p));
}

// Issue 24 item 6 (b): an MLA step whose block table names a page past the KV cache
// (and a negative one). The reference segfaulted; now the step fails, eager and replayed.
TEST_F(Sanitizer, MlaBlockTablePagePastTheKvCacheFailsEagerAndReplayed) {
  constexpr int D = 576, DV = 512, heads = 16, reqs = 2, ps = 64, len = 200;
  constexpr int mbps = (len + ps - 1) / ps, pages = reqs * mbps;
  cgrt_mla_options mo;
  cgrt_mla_options_init(&mo);
  mo.max_num_seqs = reqs;
  mo.heads = heads;
  mo.page_size = ps;
  mo.max_model_len = len;
  cgrt_mla_plan *plan = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt, &mo, &plan));
  const size_t page_bytes = (size_t)ps * D * 2;
  const CUdeviceptr kv = alloc(pages * page_bytes), q = alloc((size_t)reqs * heads * D * 2),
                    bt = alloc(pages * 4), lens = alloc(reqs * 4), out = alloc((size_t)reqs * heads * DV * 2),
                    lse = alloc((size_t)reqs * heads * 4);
  ASSERT_EQ(cgrt_memset_d8(rt, kv, 0x3c, pages * page_bytes), CGRT_SUCCESS);
  ASSERT_EQ(cgrt_memset_d8(rt, q, 0x3c, (size_t)reqs * heads * D * 2), CGRT_SUCCESS);
  std::vector<int> good(pages), l(reqs, len);
  for (int i = 0; i < pages; i++) good[i] = i;
  ASSERT_EQ(cgrt_memcpy_htod(rt, bt, good.data(), pages * 4), CGRT_SUCCESS);
  ASSERT_EQ(cgrt_memcpy_htod(rt, lens, l.data(), reqs * 4), CGRT_SUCCESS);
  cgrt_mla_args a{};
  a.size = sizeof a;
  a.q = q;
  a.kv_cache = kv;
  a.block_table = bt;
  a.seq_lens = lens;
  a.out = out;
  a.lse = lse;
  a.num_rows = reqs;
  a.softmax_scale = 0.05f;
  CGRT_ASSERT_OK(cgrt_mla_decode(plan, nullptr, &a));  // warm-up, in bounds
  CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt));

  CUstream st = nullptr;
  ASSERT_EQ(d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  CGRT_ASSERT_OK(cgrt_mla_decode(plan, st, &a));
  CUgraph g = nullptr;
  ASSERT_EQ(d->cuStreamEndCapture(st, &g), CUDA_SUCCESS);
  CUgraphExec e = nullptr;
  ASSERT_EQ(d->cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuGraphLaunch(e, st), CUDA_SUCCESS);

  for (int bad : {pages, pages + 100000, -1}) {
    SCOPED_TRACE("page " + std::to_string(bad));
    std::vector<int> t = good;
    t[mbps + 1] = bad;  // request 1, its second page
    ASSERT_EQ(cgrt_memcpy_htod(rt, bt, t.data(), pages * 4), CGRT_SUCCESS);
    const size_t before = cgrt__emu_faults();
    expect_fault(cgrt_mla_decode(plan, nullptr, &a), before, {"cgrt_mla_split", "KV cache page"});
    EXPECT_EQ(d->cuGraphLaunch(e, st), CUDA_ERROR_ILLEGAL_ADDRESS) << "replayed";
    EXPECT_EQ(cgrt__emu_faults(), before + 2);
  }
  ASSERT_EQ(cgrt_memcpy_htod(rt, bt, good.data(), pages * 4), CGRT_SUCCESS);
  EXPECT_EQ(d->cuGraphLaunch(e, st), CUDA_SUCCESS) << "in bounds again";
  EXPECT_EQ(d->cuGraphExecDestroy(e), CUDA_SUCCESS);
  EXPECT_EQ(d->cuGraphDestroy(g), CUDA_SUCCESS);
  EXPECT_EQ(d->cuStreamDestroy(st), CUDA_SUCCESS);
  cgrt_mla_plan_destroy(plan);
  for (CUdeviceptr p : {kv, q, bt, lens, out, lse}) CGRT_ASSERT_OK(cgrt_mem_free(rt, p));
}

}  // namespace
