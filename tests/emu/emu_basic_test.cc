// Emulation: initialization, device, context, memory, modules and parameters, eager
// launches, events, error names and handle validation.
#include <cmath>
#include <cstdlib>
#include <thread>

#include "tests/emu/emu_test_util.h"

namespace emu_test {
namespace {

// Observed before any test initializes the driver.
struct BeforeInit {
  CUresult count, alloc, init_bad_flags, version;
  int driver_version;
};
BeforeInit g_before;

class InitEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const cgrt__driver *d = Drv();
    int n = 0;
    CUdeviceptr p = 0;
    g_before.count = d->cuDeviceGetCount(&n);
    g_before.alloc = d->cuMemAlloc(&p, 256);
    g_before.init_bad_flags = d->cuInit(7);
    g_before.version = d->cuDriverGetVersion(&g_before.driver_version);
  }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new InitEnvironment);

TEST(EmuInit, CallsBeforeCuInitFail) {
  EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, g_before.count);
  EXPECT_EQ(CUDA_ERROR_NOT_INITIALIZED, g_before.alloc);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, g_before.init_bad_flags);
  EXPECT_EQ(CUDA_SUCCESS, g_before.version);  // works without cuInit, like the driver
  EXPECT_EQ(13000, g_before.driver_version);
}

TEST(EmuTable, IsCompleteAndNamed) {
  const cgrt__driver *d = Drv();
  EXPECT_STREQ("emulated", d->name);
  EXPECT_EQ(1, d->is_emulated);
#define CHECK_ENTRY(sym, ver, req, params, args) EXPECT_NE(nullptr, (void *)d->sym) << #sym;
  CGRT_DRIVER_API(CHECK_ENTRY)
#undef CHECK_ENTRY
}

using EmuDevice = EmuTest;

TEST_F(EmuDevice, DescribesOneH200LikeDevice) {
  int count = 0;
  ASSERT_CU(d->cuDeviceGetCount(&count));
  EXPECT_EQ(1, count);
  CUdevice dev;
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, d->cuDeviceGet(&dev, 1));
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, d->cuDeviceGet(&dev, -1));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuDeviceGet(nullptr, 0));
  ASSERT_CU(d->cuDeviceGet(&dev, 0));
  char name[64];
  ASSERT_CU(d->cuDeviceGetName(name, sizeof(name), dev));
  EXPECT_STREQ("cgrt CPU emulation (H200-like)", name);
  char small[5];
  ASSERT_CU(d->cuDeviceGetName(small, sizeof(small), dev));
  EXPECT_STREQ("cgrt", small);
  struct {
    CUdevice_attribute a;
    int v;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
  };
  for (const auto &a : attrs) {
    int v = -1;
    ASSERT_CU(d->cuDeviceGetAttribute(&v, a.a, dev));
    EXPECT_EQ(a.v, v) << "attribute " << a.a;
  }
  int v;
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, d->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
  size_t total = 0;
  ASSERT_CU(d->cuDeviceTotalMem(&total, dev));
  EXPECT_EQ(size_t{16} << 30, total);
}

TEST_F(EmuDevice, ContextIsPerThread) {
  CUcontext cur = nullptr;
  ASSERT_CU(d->cuCtxGetCurrent(&cur));
  ASSERT_NE(nullptr, cur);
  CUresult on_thread_alloc = CUDA_SUCCESS, on_thread_get = CUDA_SUCCESS;
  CUcontext on_thread_cur = cur;
  std::thread t([&] {
    CUdeviceptr p;
    on_thread_get = d->cuCtxGetCurrent(&on_thread_cur);
    on_thread_alloc = d->cuMemAlloc(&p, 64);
  });
  t.join();
  EXPECT_EQ(CUDA_SUCCESS, on_thread_get);
  EXPECT_EQ(nullptr, on_thread_cur);
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, on_thread_alloc);
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, d->cuCtxSetCurrent(reinterpret_cast<CUcontext>(&cur)));
  // Retain / release are counted: one extra pair leaves the context usable.
  CUcontext again = nullptr;
  ASSERT_CU(d->cuDevicePrimaryCtxRetain(&again, 0));
  EXPECT_EQ(cur, again);
  ASSERT_CU(d->cuDevicePrimaryCtxRelease(0));
  EXPECT_CU(d->cuCtxSynchronize());
}

using EmuMemory = EmuTest;

TEST_F(EmuMemory, AllocFreeAndMemInfo) {
  size_t free0, total;
  ASSERT_CU(d->cuMemGetInfo(&free0, &total));
  EXPECT_EQ(size_t{16} << 30, total);
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(d->cuMemAlloc(&a, 1000));
  ASSERT_CU(d->cuMemAlloc(&b, 1 << 20));
  EXPECT_EQ(0u, a % 256);
  EXPECT_EQ(0u, b % 256);
  size_t free1;
  ASSERT_CU(d->cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - 1024 - (1 << 20), free1);
  EXPECT_EQ(live_at_start + 4, cgrt__emu_live_objects());  // + module, stream
  void *pinned = nullptr;
  ASSERT_CU(d->cuMemAllocHost(&pinned, 4096));
  size_t free2;
  ASSERT_CU(d->cuMemGetInfo(&free2, &total));
  EXPECT_EQ(free1, free2);  // pinned host memory is not device memory
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemFree((CUdeviceptr)(uintptr_t)pinned));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemFreeHost((void *)(uintptr_t)a));
  ASSERT_CU(d->cuMemFreeHost(pinned));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemFree(a + 8));  // interior pointer
  ASSERT_CU(d->cuMemFree(a));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemFree(a));  // double free
  ASSERT_CU(d->cuMemFree(b));
  ASSERT_CU(d->cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0, free1);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemAlloc(&a, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemAlloc(nullptr, 16));
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, d->cuMemAlloc(&a, (size_t{16} << 30) + 1));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemGetInfo(nullptr, &total));
}

TEST_F(EmuMemory, CopiesAndMemsets) {
  CUdeviceptr buf = Alloc(64 * sizeof(int));
  std::vector<int> host(64), back(64, -1);
  for (int i = 0; i < 64; i++) host[i] = i * 3;
  ASSERT_CU(d->cuMemcpyHtoD(buf, host.data(), 64 * sizeof(int)));
  ASSERT_CU(d->cuMemcpyDtoH(back.data(), buf, 64 * sizeof(int)));
  EXPECT_EQ(host, back);
  ASSERT_CU(d->cuMemsetD32(buf + 4 * sizeof(int), 0xdeadbeef, 8));
  ASSERT_CU(d->cuMemsetD8(buf, 0x7f, 4));
  ASSERT_CU(d->cuMemcpyDtoH(back.data(), buf, 64 * sizeof(int)));
  EXPECT_EQ(0x7f, back[0] & 0xff);
  EXPECT_EQ(0x7f7f7f7f, back[0]);
  EXPECT_EQ(3, back[1]);
  for (int i = 4; i < 12; i++) EXPECT_EQ((int)0xdeadbeef, back[i]);
  EXPECT_EQ(12 * 3, back[12]);
  // Out of range / misaligned / unknown memory.
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemcpyHtoD(buf, host.data(), 65 * sizeof(int)));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemsetD32(buf + 2, 1, 1));
  int local = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuMemsetD8((CUdeviceptr)(uintptr_t)&local, 1, 4));
  // Async versions on a stream and on the NULL stream run in order.
  ASSERT_CU(d->cuMemsetD32Async(buf, 5, 64, stream));
  CUdeviceptr other = Alloc(64 * sizeof(int));
  ASSERT_CU(d->cuMemcpyDtoDAsync(other, buf, 64 * sizeof(int), nullptr));
  ASSERT_CU(d->cuMemcpyDtoHAsync(back.data(), other, 64 * sizeof(int), stream));
  ASSERT_CU(d->cuStreamSynchronize(stream));
  for (int v : back) EXPECT_EQ(5, v);
  ASSERT_CU(d->cuMemcpyHtoDAsync(other, host.data(), 64 * sizeof(int), stream));
  ASSERT_CU(d->cuMemsetD8Async(other, 0, 4, stream));
  ASSERT_CU(d->cuMemcpyDtoH(back.data(), other, 64 * sizeof(int)));
  EXPECT_EQ(0, back[0]);
  EXPECT_EQ(host[1], back[1]);
}

using EmuModule = EmuTest;

TEST_F(EmuModule, FunctionsAndParamInfo) {
  CUfunction f = Function("emu_test_pack");
  ASSERT_NE(nullptr, f);
  CUfunction again = nullptr;
  ASSERT_CU(d->cuModuleGetFunction(&again, mod, "emu_test_pack"));
  EXPECT_EQ(f, again);
  const char *name = nullptr;
  ASSERT_CU(d->cuFuncGetName(&name, f));
  EXPECT_STREQ("emu_test_pack", name);
  // The emulated modules hold no device variables: any name is not found once the
  // arguments are valid; a null name is an invalid value.
  CUdeviceptr var = 0;
  size_t var_bytes = 0;
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, d->cuModuleGetGlobal(&var, &var_bytes, mod, "emu_test_pack"));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, d->cuModuleGetGlobal(nullptr, nullptr, mod, "cgrt_mla_t64_stamps"));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuModuleGetGlobal(&var, &var_bytes, mod, nullptr));
  // (int, int*, Pair, char, double): offsets 0, 8, 16, 24, 32.
  const size_t want_off[] = {0, 8, 16, 24, 32}, want_size[] = {4, 8, 8, 1, 8};
  for (size_t i = 0; i < 5; i++) {
    size_t off = 99, size = 99;
    ASSERT_CU(d->cuFuncGetParamInfo(f, i, &off, &size));
    EXPECT_EQ(want_off[i], off) << i;
    EXPECT_EQ(want_size[i], size) << i;
  }
  size_t off, size;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuFuncGetParamInfo(f, 5, &off, &size));
  CUfunction missing = nullptr;
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, d->cuModuleGetFunction(&missing, mod, "no_such_kernel"));
  EXPECT_CU(d->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
            d->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300000));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 1));
}

TEST_F(EmuModule, LaunchPacksParametersLikeTheDriver) {
  CUfunction f = Function("emu_test_pack");
  CUdeviceptr out = Alloc(5 * sizeof(int));
  int a = 7;
  Pair s = {11, 13};
  char c = 'z';
  double dd = 42.9;
  void *args[] = {&a, &out, &s, &c, &dd};
  ASSERT_CU(d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
  int got[5];
  ASSERT_CU(d->cuMemcpyDtoH(got, out, sizeof(got)));
  EXPECT_EQ(7, got[0]);
  EXPECT_EQ(11, got[1]);
  EXPECT_EQ(13, got[2]);
  EXPECT_EQ('z', got[3]);
  EXPECT_EQ(42, got[4]);
  // The same through `extra` with a buffer laid out as cuFuncGetParamInfo says.
  unsigned char packed[40] = {};
  a = 8;
  s = {21, 23};
  c = 'q';
  dd = -5.0;
  const void *vals[] = {&a, &out, &s, &c, &dd};
  for (size_t i = 0; i < 5; i++) {
    size_t off, size;
    ASSERT_CU(d->cuFuncGetParamInfo(f, i, &off, &size));
    std::memcpy(packed + off, vals[i], size);
  }
  size_t packed_size = sizeof(packed);
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  ASSERT_CU(d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, extra));
  ASSERT_CU(d->cuMemcpyDtoH(got, out, sizeof(got)));
  EXPECT_EQ(8, got[0]);
  EXPECT_EQ(21, got[1]);
  EXPECT_EQ(23, got[2]);
  EXPECT_EQ('q', got[3]);
  EXPECT_EQ(-5, got[4]);
  // Bad launches.
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, args, extra));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, stream, args, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 60000, stream, args, nullptr));
  ASSERT_CU(d->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000));
  EXPECT_CU(d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 60000, stream, args, nullptr));
  packed_size = 8;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, extra));
}

static void AddOne(void *p) { ++*static_cast<int *>(p); }

TEST_F(EmuModule, EagerAxpyAndHostFunction) {
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; i++) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  CUdeviceptr dx = Alloc(n * sizeof(float)), dy = Alloc(n * sizeof(float));
  Upload(dx, x);
  Upload(dy, y);
  LaunchAxpy(stream, 2.0f, dx, dy, n);
  LaunchAxpy(nullptr, 1.0f, dx, dy, n);
  std::vector<float> got = Download(dy, n);
  for (int i = 0; i < n; i++) ASSERT_FLOAT_EQ(3.0f * i + 1.0f, got[i]) << i;
  int calls = 0;
  ASSERT_CU(d->cuLaunchHostFunc(stream, AddOne, &calls));
  EXPECT_EQ(1, calls);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchHostFunc(stream, nullptr, &calls));
}

using EmuEvent = EmuTest;

TEST_F(EmuEvent, ElapsedTimeBetweenRecordedEvents) {
  CUevent a, b, notime;
  ASSERT_CU(d->cuEventCreate(&a, CU_EVENT_DEFAULT));
  ASSERT_CU(d->cuEventCreate(&b, CU_EVENT_DEFAULT));
  ASSERT_CU(d->cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
  float ms = -1;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuEventElapsedTime(&ms, a, b));  // not recorded
  ASSERT_CU(d->cuEventRecord(a, stream));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_CU(d->cuEventRecord(b, stream));
  ASSERT_CU(d->cuEventSynchronize(b));
  ASSERT_CU(d->cuEventElapsedTime(&ms, a, b));
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 2000.0f);
  ASSERT_CU(d->cuEventRecord(notime, stream));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuEventElapsedTime(&ms, a, notime));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuEventElapsedTime(nullptr, a, b));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuEventCreate(&a, 0x100));
  ASSERT_CU(d->cuEventDestroy(a));
  ASSERT_CU(d->cuEventDestroy(b));
  ASSERT_CU(d->cuEventDestroy(notime));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuEventDestroy(a));
}

TEST(EmuErrors, NamesAndStrings) {
  const cgrt__driver *d = Drv();
  const char *s = nullptr;
  struct {
    CUresult r;
    const char *name;
  } names[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
      {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
      {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"},
      {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE"},
      {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
  };
  for (const auto &n : names) {
    ASSERT_CU(d->cuGetErrorName(n.r, &s));
    EXPECT_STREQ(n.name, s);
    ASSERT_CU(d->cuGetErrorString(n.r, &s));
    EXPECT_GT(std::strlen(s), 3u);
  }
  ASSERT_CU(d->cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
  EXPECT_STREQ("invalid argument", s);
  ASSERT_CU(d->cuGetErrorString(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, &s));
  EXPECT_STREQ("operation not permitted when stream is capturing", s);
  s = "unchanged";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGetErrorName((CUresult)12345, &s));
  EXPECT_EQ(nullptr, s);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGetErrorString((CUresult)12345, &s));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGetErrorName(CUDA_SUCCESS, nullptr));
}

using EmuHandles = EmuTest;

TEST_F(EmuHandles, DestroyedAndUnknownHandlesAreRejected) {
  CUstream s;
  ASSERT_CU(d->cuStreamCreate(&s, 0));
  ASSERT_CU(d->cuStreamDestroy(s));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuStreamDestroy(s));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuStreamSynchronize(s));
  CUdeviceptr buf = Alloc(16);
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuMemsetD8Async(buf, 0, 16, s));
  CUstreamCaptureStatus st;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuStreamIsCapturing(s, &st));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  int junk[16] = {};
  CUstream bogus = reinterpret_cast<CUstream>(junk);
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuStreamSynchronize(bogus));
  CUevent e = reinterpret_cast<CUevent>(junk);
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuEventRecord(e, stream));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuStreamWaitEvent(stream, e, 0));
  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  ASSERT_CU(d->cuGraphDestroy(g));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuGraphDestroy(g));
  size_t n;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuGraphGetNodes(g, nullptr, &n));
  CUgraphExec x;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuGraphInstantiateWithFlags(&x, g, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuGraphLaunch(reinterpret_cast<CUgraphExec>(junk), stream));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuGraphExecDestroy(reinterpret_cast<CUgraphExec>(junk)));
  CUmodule m;
  static const char image[] = "x";
  ASSERT_CU(d->cuModuleLoadData(&m, image));
  CUfunction f;
  ASSERT_CU(d->cuModuleGetFunction(&f, m, "emu_test_axpy"));
  ASSERT_CU(d->cuModuleUnload(m));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuModuleUnload(m));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuModuleGetFunction(&f, m, "emu_test_axpy"));
  size_t off;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuFuncGetParamInfo(f, 0, &off, nullptr));
  const char *name;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuFuncGetName(&name, f));
  CUdeviceptr var;
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuModuleGetGlobal(&var, nullptr, m, "x"));
  float a = 1;
  int cnt = 0;
  void *args[] = {&a, &buf, &buf, &cnt};
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
  // NULL out-pointers.
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuStreamCreate(nullptr, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuEventCreate(nullptr, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphCreate(nullptr, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuModuleLoadData(nullptr, image));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuStreamIsCapturing(stream, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuStreamEndCapture(stream, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphInstantiateWithFlags(nullptr, g, 0));
}

TEST_F(EmuHandles, ConcurrentThreadsAllocateAndLaunch) {
  const int threads = 8, n = 256;
  std::vector<std::thread> ts;
  std::vector<int> failures(threads, 0);
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      MakeCurrent();
      CUfunction f = nullptr;
      if (d->cuModuleGetFunction(&f, mod, "emu_test_fill") != CUDA_SUCCESS) failures[t]++;
      CUstream s;
      if (d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) failures[t]++;
      for (int it = 0; it < 50; it++) {
        CUdeviceptr p;
        if (d->cuMemAlloc(&p, n * sizeof(int)) != CUDA_SUCCESS) {
          failures[t]++;
          continue;
        }
        int value = t * 1000 + it, count = n;
        void *args[] = {&p, &value, &count};
        if (d->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS) failures[t]++;
        std::vector<int> got(n);
        if (d->cuMemcpyDtoH(got.data(), p, n * sizeof(int)) != CUDA_SUCCESS) failures[t]++;
        for (int v : got) failures[t] += v != value;
        if (d->cuMemFree(p) != CUDA_SUCCESS) failures[t]++;
      }
      if (d->cuStreamDestroy(s) != CUDA_SUCCESS) failures[t]++;
    });
  }
  for (auto &th : ts) th.join();
  for (int t = 0; t < threads; t++) EXPECT_EQ(0, failures[t]) << "thread " << t;
}

}  // namespace
}  // namespace emu_test
