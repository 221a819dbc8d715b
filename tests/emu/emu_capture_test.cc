// Emulation: stream capture (nodes, dependencies, fork/join, modes, illegal calls and
// invalidation) and replay of captured graphs against eager execution.
#include <functional>
#include <thread>

#include "tests/emu/emu_test_util.h"

namespace emu_test {
namespace {

class EmuCapture : public EmuTest {
 protected:
  static constexpr int kN = 300;

  void SetUp() override {
    EmuTest::SetUp();
    dx = Alloc(kN * sizeof(float));
    dy = Alloc(kN * sizeof(float));
    dz = Alloc(kN * sizeof(float));
    ASSERT_CU(d->cuMemAllocHost(&pinned, kN * sizeof(float)));
    for (int i = 0; i < kN; i++) {
      x.push_back(0.5f * i);
      y.push_back(1.0f + i);
    }
  }
  void TearDown() override {
    EXPECT_CU(d->cuMemFreeHost(pinned));
    EmuTest::TearDown();
  }

  // The step: y = 2x + y; z = y (copy); z[0..9] bytes = 0; pinned = z; host fn; y = -1*x + y.
  void EnqueueStep(CUstream s) {
    LaunchAxpy(s, 2.0f, dx, dy, kN);
    ASSERT_CU(d->cuMemcpyDtoDAsync(dz, dy, kN * sizeof(float), s));
    ASSERT_CU(d->cuMemsetD32Async(dz, 0, 10, s));
    ASSERT_CU(d->cuMemcpyDtoHAsync(pinned, dz, kN * sizeof(float), s));
    ASSERT_CU(d->cuLaunchHostFunc(s, CountCall, &host_calls));
    LaunchAxpy(s, -1.0f, dx, dy, kN);
  }

  void Reset() {
    Upload(dx, x);
    Upload(dy, y);
    ASSERT_CU(d->cuMemsetD8(dz, 0xff, kN * sizeof(float)));
    std::memset(pinned, 0, kN * sizeof(float));
  }

  CUgraph Capture(CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) {
    CUgraph g = nullptr;
    EXPECT_CU(d->cuStreamBeginCapture(stream, mode));
    EnqueueStep(stream);
    EXPECT_CU(d->cuStreamEndCapture(stream, &g));
    return g;
  }

  static void CountCall(void *p) { ++*static_cast<int *>(p); }

  CUdeviceptr dx = 0, dy = 0, dz = 0;
  void *pinned = nullptr;
  std::vector<float> x, y;
  int host_calls = 0;
};

TEST_F(EmuCapture, RecordsNodesInOrderWithEdges) {
  Reset();
  CUgraph g = Capture();
  ASSERT_NE(nullptr, g);
  EXPECT_EQ(0, host_calls);  // nothing ran during capture
  std::vector<float> untouched = Download(dy, kN);
  EXPECT_EQ(y, untouched);
  size_t n = 0;
  ASSERT_CU(d->cuGraphGetNodes(g, nullptr, &n));
  ASSERT_EQ(6u, n);
  std::vector<CUgraphNode> nodes(n);
  ASSERT_CU(d->cuGraphGetNodes(g, nodes.data(), &n));
  const CUgraphNodeType want[] = {CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY,
                                  CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_MEMCPY,
                                  CU_GRAPH_NODE_TYPE_HOST,   CU_GRAPH_NODE_TYPE_KERNEL};
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType t;
    ASSERT_CU(d->cuGraphNodeGetType(nodes[i], &t));
    EXPECT_EQ(want[i], t) << i;
    CUgraphNode deps[4];
    size_t nd = cgrt__emu_node_dependencies(nodes[i], deps, 4);
    if (i == 0) {
      EXPECT_EQ(0u, nd);
    } else {
      ASSERT_EQ(1u, nd) << i;
      EXPECT_EQ(nodes[i - 1], deps[0]) << i;
    }
  }
  // A larger count gets NULL padding and the real count back.
  std::vector<CUgraphNode> more(8, reinterpret_cast<CUgraphNode>(1));
  size_t m = 8;
  ASSERT_CU(d->cuGraphGetNodes(g, more.data(), &m));
  EXPECT_EQ(6u, m);
  EXPECT_EQ(nullptr, more[7]);
  // Memcpy / memset node parameters.
  CUDA_MEMCPY3D cp;
  ASSERT_CU(d->cuGraphMemcpyNodeGetParams(nodes[1], &cp));
  EXPECT_EQ(CU_MEMORYTYPE_DEVICE, cp.srcMemoryType);
  EXPECT_EQ(CU_MEMORYTYPE_DEVICE, cp.dstMemoryType);
  EXPECT_EQ(dy, cp.srcDevice);
  EXPECT_EQ(dz, cp.dstDevice);
  EXPECT_EQ(kN * sizeof(float), cp.WidthInBytes);
  EXPECT_EQ(1u, cp.Height);
  EXPECT_EQ(1u, cp.Depth);
  ASSERT_CU(d->cuGraphMemcpyNodeGetParams(nodes[3], &cp));
  EXPECT_EQ(CU_MEMORYTYPE_HOST, cp.dstMemoryType);
  EXPECT_EQ(pinned, cp.dstHost);
  CUDA_MEMSET_NODE_PARAMS ms;
  ASSERT_CU(d->cuGraphMemsetNodeGetParams(nodes[2], &ms));
  EXPECT_EQ(dz, ms.dst);
  EXPECT_EQ(4u, ms.elementSize);
  EXPECT_EQ(10u, ms.width);
  EXPECT_EQ(1u, ms.height);
  EXPECT_EQ(0u, ms.value);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphMemsetNodeGetParams(nodes[1], &ms));
  ASSERT_CU(d->cuGraphDestroy(g));
  CUgraphNodeType t;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphNodeGetType(nodes[0], &t));  // gone with the graph
}

TEST_F(EmuCapture, ReplayEqualsEagerExecution) {
  Reset();
  EnqueueStep(stream);
  EnqueueStep(stream);
  std::vector<float> eager_y = Download(dy, kN), eager_z = Download(dz, kN);
  std::vector<float> eager_pinned(static_cast<float *>(pinned), static_cast<float *>(pinned) + kN);
  ASSERT_EQ(2, host_calls);

  Reset();
  host_calls = 0;
  CUgraph g = Capture();
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  ASSERT_CU(d->cuGraphDestroy(g));  // the exec does not depend on the graph
  ASSERT_CU(d->cuGraphUpload(exec, stream));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuStreamSynchronize(stream));
  EXPECT_EQ(2, host_calls);
  EXPECT_EQ(eager_y, Download(dy, kN));
  EXPECT_EQ(eager_z, Download(dz, kN));
  EXPECT_EQ(eager_pinned,
            std::vector<float>(static_cast<float *>(pinned), static_cast<float *>(pinned) + kN));
  for (int i = 0; i < 10; i++) EXPECT_EQ(0.0f, eager_z[i]);
  EXPECT_FLOAT_EQ(y[20] + 2 * x[20] * 2 - x[20], eager_z[20]);
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, d->cuGraphLaunch(exec, stream));
}

TEST_F(EmuCapture, StateErrors) {
  CUgraph g = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE, d->cuStreamEndCapture(stream, &g));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            d->cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuStreamBeginCapture(stream, (CUstreamCaptureMode)7));
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE, d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st;
  ASSERT_CU(d->cuStreamIsCapturing(stream, &st));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, st);
  // An empty capture is a valid empty graph.
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  size_t n = 1;
  ASSERT_CU(d->cuGraphGetNodes(g, nullptr, &n));
  EXPECT_EQ(0u, n);
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  EXPECT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
  ASSERT_CU(d->cuStreamIsCapturing(stream, &st));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, st);
}

// Each of these, called from the capturing thread in global or thread-local mode,
// fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture.
TEST_F(EmuCapture, IllegalCallsInvalidateTheCapture) {
  CUdeviceptr buf = Alloc(64);
  std::vector<char> host(64);
  struct Case {
    const char *what;
    std::function<CUresult()> call;
  } cases[] = {
      {"cuMemAlloc", [&] { CUdeviceptr p; return d->cuMemAlloc(&p, 64); }},
      {"cuMemFree", [&] { return d->cuMemFree(buf); }},
      {"cuMemAllocHost", [&] { void *p; return d->cuMemAllocHost(&p, 64); }},
      {"cuMemcpyHtoD", [&] { return d->cuMemcpyHtoD(buf, host.data(), 64); }},
      {"cuMemcpyDtoH", [&] { return d->cuMemcpyDtoH(host.data(), buf, 64); }},
      {"cuMemsetD8", [&] { return d->cuMemsetD8(buf, 0, 64); }},
      {"cuMemsetD32", [&] { return d->cuMemsetD32(buf, 0, 16); }},
      {"cuCtxSynchronize", [&] { return d->cuCtxSynchronize(); }},
      {"cuStreamSynchronize", [&] { return d->cuStreamSynchronize(stream); }},
  };
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
    for (const Case &c : cases) {
      SCOPED_TRACE(c.what);
      SCOPED_TRACE(mode);
      ASSERT_CU(d->cuStreamBeginCapture(stream, mode));
      ASSERT_CU(d->cuMemsetD8Async(buf, 1, 64, stream));
      EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, c.call());
      CUstreamCaptureStatus st;
      ASSERT_CU(d->cuStreamIsCapturing(stream, &st));
      EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_INVALIDATED, st);
      EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuMemsetD8Async(buf, 2, 64, stream));
      CUgraph g = reinterpret_cast<CUgraph>(1);
      EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g));
      EXPECT_EQ(nullptr, g);
      // The stream is usable again, eagerly.
      ASSERT_CU(d->cuStreamIsCapturing(stream, &st));
      EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, st);
      ASSERT_CU(d->cuMemsetD8Async(buf, 3, 64, stream));
      ASSERT_CU(d->cuMemcpyDtoH(host.data(), buf, 64));
      EXPECT_EQ(3, host[10]);
    }
  }
}

TEST_F(EmuCapture, RelaxedModeAllowsUnsafeCalls) {
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUdeviceptr p;
  ASSERT_CU(d->cuMemAlloc(&p, 64));
  ASSERT_CU(d->cuMemFree(p));
  ASSERT_CU(d->cuMemsetD8Async(dz, 0, 4, stream));
  CUgraph g = nullptr;
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuCapture, GlobalModeForbidsUnsafeCallsOnOtherThreads) {
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
    ASSERT_CU(d->cuStreamBeginCapture(stream, mode));
    CUresult other = CUDA_SUCCESS;
    std::thread t([&] {
      MakeCurrent();
      CUdeviceptr p = 0;
      other = d->cuMemAlloc(&p, 64);
      if (other == CUDA_SUCCESS) d->cuMemFree(p);
    });
    t.join();
    CUgraph g = nullptr;
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
      EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, other);
      EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g));
    } else {
      EXPECT_EQ(CUDA_SUCCESS, other);
      ASSERT_CU(d->cuStreamEndCapture(stream, &g));
      ASSERT_CU(d->cuGraphDestroy(g));
    }
  }
}

TEST_F(EmuCapture, ThreadLocalCaptureEndsOnlyOnItsThread) {
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CUresult other = CUDA_SUCCESS;
  std::thread t([&] {
    MakeCurrent();
    CUgraph g;
    other = d->cuStreamEndCapture(stream, &g);
  });
  t.join();
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, other);
  CUgraph g = nullptr;
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuCapture, PageableHostMemoryIsRejected) {
  std::vector<float> pageable(kN);
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            d->cuMemcpyHtoDAsync(dx, pageable.data(), kN * sizeof(float), stream));
  CUgraph g = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g));
  EXPECT_EQ(nullptr, g);
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            d->cuMemcpyDtoHAsync(pageable.data(), dx, kN * sizeof(float), stream));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g));
  // Pinned memory is fine, and eager pageable copies are fine.
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuMemcpyHtoDAsync(dx, pinned, kN * sizeof(float), stream));
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  ASSERT_CU(d->cuGraphDestroy(g));
  ASSERT_CU(d->cuMemcpyHtoDAsync(dx, pageable.data(), kN * sizeof(float), stream));
}

TEST_F(EmuCapture, LegacyStreamDuringBlockingCaptureIsImplicitDependency) {
  CUstream blocking;
  ASSERT_CU(d->cuStreamCreate(&blocking, 0));
  ASSERT_CU(d->cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUstreamCaptureStatus st;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, d->cuStreamIsCapturing(nullptr, &st));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, d->cuMemsetD8Async(dz, 0, 4, nullptr));
  CUgraph g = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(blocking, &g));
  // A non-blocking capturing stream does not involve the legacy stream.
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  ASSERT_CU(d->cuMemsetD8Async(dz, 0, 4, nullptr));
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  ASSERT_CU(d->cuGraphDestroy(g));
  ASSERT_CU(d->cuStreamDestroy(blocking));
}

TEST_F(EmuCapture, ForkJoinThroughEvents) {
  CUstream side;
  CUevent fork, join;
  ASSERT_CU(d->cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(d->cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(d->cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuMemsetD32Async(dx, 0, kN, stream));          // A
  ASSERT_CU(d->cuEventRecord(fork, stream));
  ASSERT_CU(d->cuStreamWaitEvent(side, fork, 0));             // side joins the capture
  CUstreamCaptureStatus st;
  ASSERT_CU(d->cuStreamIsCapturing(side, &st));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, st);
  ASSERT_CU(d->cuMemsetD32Async(dy, 0, kN, side));            // B after A
  ASSERT_CU(d->cuMemsetD32Async(dz, 0, kN, stream));          // C after A
  EXPECT_EQ(CUDA_ERROR_CAPTURED_EVENT, d->cuEventSynchronize(fork));
  ASSERT_CU(d->cuEventRecord(join, side));
  ASSERT_CU(d->cuStreamWaitEvent(stream, join, 0));
  LaunchAxpy(stream, 1.0f, dx, dy, kN);                        // D after B and C
  CUgraph g = nullptr;
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  ASSERT_CU(d->cuStreamIsCapturing(side, &st));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, st);
  std::vector<CUgraphNode> nodes(4);
  size_t n = 4;
  ASSERT_CU(d->cuGraphGetNodes(g, nodes.data(), &n));
  ASSERT_EQ(4u, n);
  CUgraphNode deps[4];
  EXPECT_EQ(0u, cgrt__emu_node_dependencies(nodes[0], deps, 4));
  ASSERT_EQ(1u, cgrt__emu_node_dependencies(nodes[1], deps, 4));
  EXPECT_EQ(nodes[0], deps[0]);
  ASSERT_EQ(1u, cgrt__emu_node_dependencies(nodes[2], deps, 4));
  EXPECT_EQ(nodes[0], deps[0]);
  ASSERT_EQ(2u, cgrt__emu_node_dependencies(nodes[3], deps, 4));
  EXPECT_TRUE((deps[0] == nodes[1] && deps[1] == nodes[2]) || (deps[0] == nodes[2] && deps[1] == nodes[1]));
  ASSERT_CU(d->cuGraphDestroy(g));

  // Unjoined work fails the capture.
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuEventRecord(fork, stream));
  ASSERT_CU(d->cuStreamWaitEvent(side, fork, 0));
  ASSERT_CU(d->cuMemsetD32Async(dy, 0, kN, side));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, d->cuStreamEndCapture(side, &g));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g));
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuEventRecord(fork, stream));
  ASSERT_CU(d->cuStreamWaitEvent(side, fork, 0));
  ASSERT_CU(d->cuMemsetD32Async(dy, 0, kN, side));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, d->cuStreamEndCapture(stream, &g));
  EXPECT_EQ(nullptr, g);
  ASSERT_CU(d->cuStreamIsCapturing(side, &st));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, st);

  // Waiting on work recorded outside the capture crosses its boundary.
  ASSERT_CU(d->cuEventRecord(join, side));
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, d->cuStreamWaitEvent(stream, join, 0));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g));

  ASSERT_CU(d->cuEventDestroy(fork));
  ASSERT_CU(d->cuEventDestroy(join));
  ASSERT_CU(d->cuStreamDestroy(side));
}

TEST_F(EmuCapture, LaunchKernelExRecordsAttributes) {
  CUlaunchAttribute attr[1] = {};
  attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr[0].value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 128;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  float a = 3.0f;
  int n = kN;
  void *args[] = {&a, &dx, &dy, &n};
  Reset();
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuLaunchKernelEx(&cfg, Function("emu_test_axpy"), args, nullptr));
  CUgraph g = nullptr;
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  CUgraphNode node;
  size_t count = 1;
  ASSERT_CU(d->cuGraphGetNodes(g, &node, &count));
  CUlaunchAttribute got[2];
  ASSERT_EQ(1u, cgrt__emu_node_launch_attributes(node, got, 2));
  EXPECT_EQ(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, got[0].id);
  EXPECT_EQ(1, got[0].value.programmaticStreamSerializationAllowed);
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  std::vector<float> out = Download(dy, kN);
  EXPECT_FLOAT_EQ(3 * x[7] + y[7], out[7]);
  // Launching a graph into a capturing stream is not emulated: it fails the capture.
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, d->cuGraphLaunch(exec, stream));
  CUgraph g2 = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &g2));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
  cfg.numAttrs = 0;
  ASSERT_CU(d->cuLaunchKernelEx(&cfg, Function("emu_test_axpy"), args, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuLaunchKernelEx(nullptr, Function("emu_test_axpy"), args, nullptr));
}

}  // namespace
}  // namespace emu_test

namespace emu_test {
namespace {

// cuStreamBeginCaptureToGraph appends the captured work to an existing graph, after the
// given dependencies; the graph stays the caller's (EndCapture hands back the same one).
class EmuCaptureToGraph : public EmuTest {};

TEST_F(EmuCaptureToGraph, AppendsAfterExistingNodesAndReplays) {
  const int n = 64;
  CUdeviceptr x = Alloc(n * sizeof(float)), y = Alloc(n * sizeof(float));
  std::vector<float> hx(n), hy(n);
  for (int i = 0; i < n; i++) hx[i] = 0.5f * (float)i, hy[i] = 1.0f + (float)(i % 7);
  Upload(x, hx);
  Upload(y, hy);

  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  // An existing node: y = 2 * x + y, added by hand.
  CUfunction axpy = Function("emu_test_axpy");
  float a = 2.0f;
  int nn = n;
  void *args[] = {&a, &x, &y, &nn};
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = axpy;
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 64, kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = args;
  CUgraphNode first;
  ASSERT_CU(d->cuGraphAddKernelNode(&first, g, nullptr, 0, &kp));

  // Capture y = 3 * x + y into the same graph, after `first`.
  ASSERT_CU(d->cuStreamBeginCaptureToGraph(stream, g, &first, nullptr, 1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CUstreamCaptureStatus cs;
  ASSERT_CU(d->cuStreamIsCapturing(stream, &cs));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, cs);
  LaunchAxpy(stream, 3.0f, x, y, n);
  CUgraph out = nullptr;
  ASSERT_CU(d->cuStreamEndCapture(stream, &out));
  EXPECT_EQ(g, out);  // the same graph, still owned by the caller

  size_t count = 0;
  ASSERT_CU(d->cuGraphGetNodes(g, nullptr, &count));
  ASSERT_EQ(2u, count);
  CUgraphNode nodes[2];
  ASSERT_CU(d->cuGraphGetNodes(g, nodes, &count));
  CUgraphNode deps[2];
  ASSERT_EQ(1u, cgrt__emu_node_dependencies(nodes[1], deps, 2));  // captured node follows `first`
  EXPECT_EQ(first, deps[0]);

  // Nothing ran during capture; one replay runs both: y + 2x + 3x.
  EXPECT_EQ(hy, Download(y, n));
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuStreamSynchronize(stream));
  std::vector<float> got = Download(y, n);
  for (int i = 0; i < n; i++) EXPECT_FLOAT_EQ(hy[i] + 5.0f * hx[i], got[i]) << i;
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuCaptureToGraph, BadArgumentsAndFailedCaptureLeaveTheGraphToItsOwner) {
  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
            d->cuStreamBeginCaptureToGraph(stream, g, nullptr, nullptr, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
            d->cuStreamBeginCaptureToGraph(stream, g, nullptr, nullptr, 0, (CUstreamCaptureMode)77));
  ASSERT_CU(d->cuStreamBeginCaptureToGraph(stream, g, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE,
            d->cuStreamBeginCaptureToGraph(stream, g, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
  // An illegal call invalidates the capture; the graph survives and the stream is usable.
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, d->cuStreamSynchronize(stream));
  CUgraph out = reinterpret_cast<CUgraph>(0x1);
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &out));
  EXPECT_EQ(nullptr, out);
  size_t count = 7;
  ASSERT_CU(d->cuGraphGetNodes(g, nullptr, &count));  // still a valid, empty graph
  EXPECT_EQ(0u, count);
  ASSERT_CU(d->cuStreamSynchronize(stream));
  ASSERT_CU(d->cuGraphDestroy(g));
}

}  // namespace
}  // namespace emu_test

namespace emu_test {
namespace {

void NoopHost(void *) {}

// Capturing into a conditional body: kernels are fine, a host function is refused (bodies
// hold kernel, memcpy, memset, empty, child-graph and conditional nodes only) and the
// capture is invalidated; the stream is usable afterwards.
TEST_F(EmuCaptureToGraph, ConditionalBodyRefusesHostFunctions) {
  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  CUgraphConditionalHandle h;
  CUgraph body = nullptr;
  AddWhile(g, 0, &h, &body);
  ASSERT_NE(nullptr, body);

  CUdeviceptr x = Alloc(16 * sizeof(float)), y = Alloc(16 * sizeof(float));
  ASSERT_CU(d->cuStreamBeginCaptureToGraph(stream, body, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  LaunchAxpy(stream, 1.0f, x, y, 16);  // allowed in a body
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, d->cuLaunchHostFunc(stream, NoopHost, nullptr));
  CUstreamCaptureStatus cs;
  ASSERT_CU(d->cuStreamIsCapturing(stream, &cs));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_INVALIDATED, cs);
  CUgraph out = nullptr;
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, d->cuStreamEndCapture(stream, &out));
  ASSERT_CU(d->cuLaunchHostFunc(stream, NoopHost, nullptr));  // outside capture: runs
  ASSERT_CU(d->cuStreamSynchronize(stream));
  ASSERT_CU(d->cuGraphDestroy(g));
}

}  // namespace
}  // namespace emu_test
