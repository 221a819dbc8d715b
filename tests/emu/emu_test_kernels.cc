// Test reference kernels and the fixture shared by the emulation tests.
#include <mutex>

#include "tests/emu/emu_test_util.h"

namespace emu_test {
namespace {

// Reads a pointer parameter (the macro's `const T *` does not compose with pointer types).
template <typename T>
T *Ptr(const unsigned char *p, const size_t *o, int i) {
  return reinterpret_cast<T *>(static_cast<uintptr_t>(CGRT__REF_PARAM(uint64_t, p, o, i)));
}

void AxpyRef(const cgrt__ref_launch *, const unsigned char *p, const size_t *o) {
  float a = CGRT__REF_PARAM(float, p, o, 0);
  const float *x = Ptr<const float>(p, o, 1);
  float *y = Ptr<float>(p, o, 2);
  int n = CGRT__REF_PARAM(int, p, o, 3);
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

void PackRef(const cgrt__ref_launch *, const unsigned char *p, const size_t *o) {
  int a = CGRT__REF_PARAM(int, p, o, 0);
  int *out = Ptr<int>(p, o, 1);
  Pair s = CGRT__REF_PARAM(Pair, p, o, 2);
  char c = CGRT__REF_PARAM(char, p, o, 3);
  double dd = CGRT__REF_PARAM(double, p, o, 4);
  out[0] = a;
  out[1] = s.x;
  out[2] = s.y;
  out[3] = c;
  out[4] = (int)dd;
}

void CountRef(const cgrt__ref_launch *, const unsigned char *p, const size_t *o) {
  int *counter = Ptr<int>(p, o, 0);
  int limit = CGRT__REF_PARAM(int, p, o, 1);
  CUgraphConditionalHandle h = CGRT__REF_PARAM(CUgraphConditionalHandle, p, o, 2);
  ++*counter;
  cgrt__emu_set_conditional(h, *counter < limit ? 1u : 0u);
}

void FillRef(const cgrt__ref_launch *, const unsigned char *p, const size_t *o) {
  int *out = Ptr<int>(p, o, 0);
  int value = CGRT__REF_PARAM(int, p, o, 1);
  int n = CGRT__REF_PARAM(int, p, o, 2);
  for (int i = 0; i < n; i++) out[i] = value;
}

}  // namespace

void RegisterKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    cgrt__ref_kernel k = {};
    k = {"emu_test_axpy", 4, {4, 8, 8, 4}, AxpyRef};
    ASSERT_EQ(0, cgrt__ref_kernel_register(&k));
    k = {"emu_test_pack", 5, {4, 8, sizeof(Pair), 1, 8}, PackRef};
    ASSERT_EQ(0, cgrt__ref_kernel_register(&k));
    k = {"emu_test_count", 3, {8, 4, 8}, CountRef};
    ASSERT_EQ(0, cgrt__ref_kernel_register(&k));
    k = {"emu_test_fill", 3, {8, 4, 4}, FillRef};
    ASSERT_EQ(0, cgrt__ref_kernel_register(&k));
  });
}

const cgrt__driver *Drv() { return cgrt__driver_emulated(); }

void MakeCurrent() {
  const cgrt__driver *d = Drv();
  ASSERT_CU(d->cuInit(0));
  CUdevice dev;
  ASSERT_CU(d->cuDeviceGet(&dev, 0));
  static CUcontext ctx = [&] {
    CUcontext c = nullptr;
    d->cuDevicePrimaryCtxRetain(&c, dev);
    return c;
  }();
  ASSERT_NE(nullptr, ctx);
  ASSERT_CU(d->cuCtxSetCurrent(ctx));
}

void EmuTest::SetUp() {
  d = Drv();
  RegisterKernels();
  MakeCurrent();
  live_at_start = cgrt__emu_live_objects();
  static const char image[] = "emulated";
  ASSERT_CU(d->cuModuleLoadData(&mod, image));
  ASSERT_CU(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
}

void EmuTest::TearDown() {
  if (stream) {
    CUstreamCaptureStatus st;
    if (d->cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE) {
      CUgraph g = nullptr;
      d->cuStreamEndCapture(stream, &g);
      if (g) d->cuGraphDestroy(g);
    }
    EXPECT_CU(d->cuStreamDestroy(stream));
  }
  for (CUdeviceptr p : allocs) EXPECT_CU(d->cuMemFree(p));
  if (mod) {
    EXPECT_CU(d->cuModuleUnload(mod));
  }
  EXPECT_EQ(live_at_start, cgrt__emu_live_objects()) << "leaked emulation objects";
}

CUfunction EmuTest::Function(const char *name) {
  CUfunction f = nullptr;
  EXPECT_CU(d->cuModuleGetFunction(&f, mod, name));
  return f;
}

CUgraphNode EmuTest::AddWhile(CUgraph g, unsigned default_value, CUgraphConditionalHandle *h, CUgraph *body) {
  CUcontext ctx = nullptr;
  EXPECT_CU(d->cuCtxGetCurrent(&ctx));
  EXPECT_CU(d->cuGraphConditionalHandleCreate(h, g, ctx, default_value, CU_GRAPH_COND_ASSIGN_DEFAULT));
  CUgraphNodeParams np = {};
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = *h;
  np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  np.conditional.size = 1;
  np.conditional.ctx = ctx;
  CUgraphNode cond = nullptr;
  EXPECT_CU(d->cuGraphAddNode(&cond, g, nullptr, nullptr, 0, &np));
  EXPECT_NE(nullptr, np.conditional.phGraph_out);
  *body = np.conditional.phGraph_out ? np.conditional.phGraph_out[0] : nullptr;
  return cond;
}

CUdeviceptr EmuTest::Alloc(size_t bytes) {
  CUdeviceptr p = 0;
  EXPECT_CU(d->cuMemAlloc(&p, bytes));
  if (p) allocs.push_back(p);
  return p;
}

void EmuTest::Upload(CUdeviceptr dst, const std::vector<float> &v) {
  ASSERT_CU(d->cuMemcpyHtoD(dst, v.data(), v.size() * sizeof(float)));
}

std::vector<float> EmuTest::Download(CUdeviceptr src, size_t n) {
  std::vector<float> v(n);
  EXPECT_CU(d->cuMemcpyDtoH(v.data(), src, n * sizeof(float)));
  return v;
}

void EmuTest::LaunchAxpy(CUstream s, float a, CUdeviceptr x, CUdeviceptr y, int n) {
  void *args[] = {&a, &x, &y, &n};
  ASSERT_CU(d->cuLaunchKernel(Function("emu_test_axpy"), (unsigned)(n + 127) / 128, 1, 1, 128, 1, 1,
                              0, s, args, nullptr));
}

}  // namespace emu_test
