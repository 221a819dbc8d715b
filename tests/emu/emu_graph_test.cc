// Emulation: explicit graphs, kernel-node parameters, executable-graph parameter
// updates, cuGraphExecUpdate and conditional nodes.
#include "tests/emu/emu_test_util.h"

namespace emu_test {
namespace {

class EmuGraph : public EmuTest {
 protected:
  static constexpr int kN = 64;

  void SetUp() override {
    EmuTest::SetUp();
    axpy = Function("emu_test_axpy");
    fill = Function("emu_test_fill");
    for (auto *p : {&x1, &y1, &x2, &y2}) *p = Alloc(kN * sizeof(float));
    std::vector<float> ones(kN, 1.0f), twos(kN, 2.0f);
    Upload(x1, ones);
    Upload(x2, twos);
  }

  // Captures axpy(a, x, y) then memset y[0] = 0 (as an int) and returns the graph.
  CUgraph CaptureAxpy(float a, CUdeviceptr x, CUdeviceptr y, int extra_kernels = 0) {
    CUgraph g = nullptr;
    EXPECT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    LaunchAxpy(stream, a, x, y, kN);
    EXPECT_CU(d->cuMemsetD32Async(y, 0, 1, stream));
    for (int i = 0; i < extra_kernels; i++) LaunchAxpy(stream, a, x, y, kN);
    EXPECT_CU(d->cuStreamEndCapture(stream, &g));
    return g;
  }

  std::vector<CUgraphNode> Nodes(CUgraph g) {
    size_t n = 0;
    EXPECT_CU(d->cuGraphGetNodes(g, nullptr, &n));
    std::vector<CUgraphNode> v(n);
    EXPECT_CU(d->cuGraphGetNodes(g, v.data(), &n));
    return v;
  }

  void Zero(CUdeviceptr y) { ASSERT_CU(d->cuMemsetD32(y, 0, kN)); }

  CUfunction axpy = nullptr, fill = nullptr;
  CUdeviceptr x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// An empty graph has 0 nodes, and a node array of 0 entries is refused: driver 580 answers
// CUDA_ERROR_INVALID_VALUE (an empty capture's indexing on an H100), so callers ask for the
// nodes only when there are some.
TEST_F(EmuGraph, AnArrayOfZeroNodesIsRefused) {
  CUgraph g = nullptr;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  size_t n = 7;
  EXPECT_CU(d->cuGraphGetNodes(g, nullptr, &n));
  EXPECT_EQ(0u, n);
  CUgraphNode node = nullptr;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphGetNodes(g, &node, &n));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, KernelNodeParamsHoldTheCapturedValues) {
  CUgraph g = CaptureAxpy(2.5f, x1, y1);
  std::vector<CUgraphNode> nodes = Nodes(g);
  ASSERT_EQ(2u, nodes.size());
  CUDA_KERNEL_NODE_PARAMS p;
  ASSERT_CU(d->cuGraphKernelNodeGetParams(nodes[0], &p));
  EXPECT_EQ(axpy, p.func);
  EXPECT_EQ(1u, p.gridDimX);
  EXPECT_EQ(128u, p.blockDimX);
  EXPECT_EQ(0u, p.sharedMemBytes);
  ASSERT_NE(nullptr, p.kernelParams);
  EXPECT_EQ(2.5f, *static_cast<float *>(p.kernelParams[0]));
  EXPECT_EQ(x1, *static_cast<CUdeviceptr *>(p.kernelParams[1]));
  EXPECT_EQ(y1, *static_cast<CUdeviceptr *>(p.kernelParams[2]));
  EXPECT_EQ(kN, *static_cast<int *>(p.kernelParams[3]));
  // The values sit at cuFuncGetParamInfo's offsets of one packed buffer.
  size_t off2;
  ASSERT_CU(d->cuFuncGetParamInfo(axpy, 2, &off2, nullptr));
  EXPECT_EQ(static_cast<char *>(p.kernelParams[0]) + off2, static_cast<char *>(p.kernelParams[2]));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphKernelNodeGetParams(nodes[1], &p));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphKernelNodeGetParams(nodes[0], nullptr));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, ExplicitGraphConstruction) {
  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphCreate(&g, 1) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
  float a = 1.0f;
  int n = kN;
  void *args[] = {&a, &x1, &y1, &n};
  CUDA_KERNEL_NODE_PARAMS p = {};
  p.func = axpy;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 64;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  CUgraphNode k1, k2, k3;
  ASSERT_CU(d->cuGraphAddKernelNode(&k1, g, nullptr, 0, &p));
  ASSERT_CU(d->cuGraphAddKernelNode(&k2, g, &k1, 1, &p));
  CUgraphNode both[] = {k1, k2};
  ASSERT_CU(d->cuGraphAddKernelNode(&k3, g, both, 2, &p));
  CUgraphNode dup[] = {k1, k1};
  CUgraphNode bad;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphAddKernelNode(&bad, g, dup, 2, &p));
  CUgraph other;
  ASSERT_CU(d->cuGraphCreate(&other, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphAddKernelNode(&bad, other, &k1, 1, &p));
  p.func = nullptr;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphAddKernelNode(&bad, g, nullptr, 0, &p));
  p.func = axpy;
  p.blockDimX = 2048;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphAddKernelNode(&bad, g, nullptr, 0, &p));
  CUgraphNode deps[3];
  ASSERT_EQ(2u, cgrt__emu_node_dependencies(k3, deps, 3));
  EXPECT_EQ(k1, deps[0]);
  EXPECT_EQ(k2, deps[1]);
  // The node stored copies of the arguments: changing them now has no effect.
  a = 100.0f;
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  Zero(y1);
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  std::vector<float> got = Download(y1, kN);
  EXPECT_EQ(3.0f, got[5]);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphInstantiateWithFlags(&exec, g, 1ull << 40));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(other));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, ExecKernelNodeSetParamsChangesOnlyTheExec) {
  CUgraph g = CaptureAxpy(1.0f, x1, y1);
  std::vector<CUgraphNode> nodes = Nodes(g);
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  Zero(y1);
  Zero(y2);
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  EXPECT_EQ(1.0f, Download(y1, kN)[3]);
  // Repoint the kernel at x2 / y2 with a = 3.
  CUDA_KERNEL_NODE_PARAMS p;
  ASSERT_CU(d->cuGraphKernelNodeGetParams(nodes[0], &p));
  float a = 3.0f;
  int n = kN;
  void *args[] = {&a, &x2, &y2, &n};
  p.kernelParams = args;
  ASSERT_CU(d->cuGraphExecKernelNodeSetParams(exec, nodes[0], &p));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  EXPECT_EQ(6.0f, Download(y2, kN)[3]);
  EXPECT_EQ(1.0f, Download(y1, kN)[3]);  // memset zeroed y1[0] only; y1 not touched by the kernel
  // The graph still holds the captured values.
  CUDA_KERNEL_NODE_PARAMS orig;
  ASSERT_CU(d->cuGraphKernelNodeGetParams(nodes[0], &orig));
  EXPECT_EQ(1.0f, *static_cast<float *>(orig.kernelParams[0]));
  EXPECT_EQ(y1, *static_cast<CUdeviceptr *>(orig.kernelParams[2]));
  // Another function of the same context is accepted (as by the driver): the node runs it.
  int value = 7;
  void *fargs[] = {&y1, &value, &n};
  CUDA_KERNEL_NODE_PARAMS pf = p;
  pf.func = fill;
  pf.kernelParams = fargs;
  ASSERT_CU(d->cuGraphExecKernelNodeSetParams(exec, nodes[0], &pf));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  int filled = 0;
  ASSERT_CU(d->cuMemcpyDtoH(&filled, y1 + 3 * sizeof(int), sizeof filled));
  EXPECT_EQ(7, filled);
  ASSERT_CU(d->cuGraphExecKernelNodeSetParams(exec, nodes[0], &p));  // and back
  // A node of another graph, a memset node, no params: rejected.
  CUgraph g2 = CaptureAxpy(1.0f, x1, y1);
  std::vector<CUgraphNode> nodes2 = Nodes(g2);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecKernelNodeSetParams(exec, nodes2[0], &p));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecKernelNodeSetParams(exec, nodes[1], &p));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecKernelNodeSetParams(exec, nodes[0], nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE,
            d->cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(&p), nodes[0], &p));
  ASSERT_CU(d->cuGraphDestroy(g2));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, ExecMemcpyAndMemsetNodeSetParams) {
  CUgraph g;
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuMemcpyDtoDAsync(y1, x1, kN * sizeof(float), stream));
  ASSERT_CU(d->cuMemsetD32Async(y2, 7, kN, stream));
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  std::vector<CUgraphNode> nodes = Nodes(g);
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  CUDA_MEMCPY3D cp;
  ASSERT_CU(d->cuGraphMemcpyNodeGetParams(nodes[0], &cp));
  cp.srcDevice = x2;
  ASSERT_CU(d->cuGraphExecMemcpyNodeSetParams(exec, nodes[0], &cp, nullptr));
  CUDA_MEMSET_NODE_PARAMS ms;
  ASSERT_CU(d->cuGraphMemsetNodeGetParams(nodes[1], &ms));
  ms.value = 9;
  ms.width = kN / 2;
  ASSERT_CU(d->cuGraphExecMemsetNodeSetParams(exec, nodes[1], &ms, nullptr));
  Zero(y1);
  Zero(y2);
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  EXPECT_EQ(2.0f, Download(y1, kN)[10]);  // copied from x2
  std::vector<int> got(kN);
  ASSERT_CU(d->cuMemcpyDtoH(got.data(), y2, kN * sizeof(int)));
  EXPECT_EQ(9, got[0]);
  EXPECT_EQ(9, got[kN / 2 - 1]);
  EXPECT_EQ(0, got[kN / 2]);
  // The graph is unchanged.
  ASSERT_CU(d->cuGraphMemcpyNodeGetParams(nodes[0], &cp));
  EXPECT_EQ(x1, cp.srcDevice);
  // Changing a memory type, a pageable host operand, an out-of-range size: rejected.
  CUDA_MEMCPY3D bad = cp;
  std::vector<float> pageable(kN);
  bad.srcMemoryType = CU_MEMORYTYPE_HOST;
  bad.srcHost = pageable.data();
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecMemcpyNodeSetParams(exec, nodes[0], &bad, nullptr));
  bad = cp;
  bad.WidthInBytes = kN * sizeof(float) + 1;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecMemcpyNodeSetParams(exec, nodes[0], &bad, nullptr));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecMemcpyNodeSetParams(exec, nodes[1], &cp, nullptr));
  ms.elementSize = 3;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecMemsetNodeSetParams(exec, nodes[1], &ms, nullptr));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, LaunchWithFreedMemoryIsAnIllegalAddress) {
  CUdeviceptr tmp = 0;
  ASSERT_CU(d->cuMemAlloc(&tmp, kN * sizeof(float)));
  CUgraph g;
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuMemcpyDtoDAsync(tmp, x1, kN * sizeof(float), stream));
  ASSERT_CU(d->cuStreamEndCapture(stream, &g));
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuMemFree(tmp));
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_ADDRESS, d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, ExecUpdateWithSameTopology) {
  CUgraph g1 = CaptureAxpy(1.0f, x1, y1);
  CUgraph g2 = CaptureAxpy(4.0f, x2, y2);
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g1, 0));
  CUgraphExecUpdateResultInfo info;
  ASSERT_CU(d->cuGraphExecUpdate(exec, g2, &info));
  EXPECT_EQ(CU_GRAPH_EXEC_UPDATE_SUCCESS, info.result);
  EXPECT_EQ(nullptr, info.errorNode);
  ASSERT_CU(d->cuGraphDestroy(g2));  // the exec keeps its own copy
  Zero(y1);
  Zero(y2);
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  EXPECT_EQ(8.0f, Download(y2, kN)[1]);
  EXPECT_EQ(0.0f, Download(y2, kN)[0]);  // memset now targets y2
  EXPECT_EQ(0.0f, Download(y1, kN)[1]);
  // Node handles of the instantiated graph still address the exec's nodes.
  std::vector<CUgraphNode> nodes1 = Nodes(g1);
  CUDA_KERNEL_NODE_PARAMS p;
  ASSERT_CU(d->cuGraphKernelNodeGetParams(nodes1[0], &p));
  ASSERT_CU(d->cuGraphExecKernelNodeSetParams(exec, nodes1[0], &p));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  EXPECT_EQ(1.0f, Download(y1, kN)[1]);
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g1));
}

TEST_F(EmuGraph, ExecUpdateRejectsTopologyTypeAndFunctionChanges) {
  CUgraph g1 = CaptureAxpy(1.0f, x1, y1);
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g1, 0));
  CUgraphExecUpdateResultInfo info;
  // One more node.
  CUgraph bigger = CaptureAxpy(2.0f, x2, y2, 1);
  EXPECT_EQ(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, d->cuGraphExecUpdate(exec, bigger, &info));
  EXPECT_EQ(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, info.result);
  EXPECT_EQ(Nodes(bigger)[2], info.errorNode);
  // Same count, different node types (memset first).
  CUgraph swapped;
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ASSERT_CU(d->cuMemsetD32Async(y2, 0, 1, stream));
  LaunchAxpy(stream, 2.0f, x2, y2, kN);
  ASSERT_CU(d->cuStreamEndCapture(stream, &swapped));
  EXPECT_EQ(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, d->cuGraphExecUpdate(exec, swapped, &info));
  EXPECT_EQ(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, info.result);
  EXPECT_EQ(Nodes(swapped)[0], info.errorNode);
  // Same shape, another kernel.
  CUgraph other_fn;
  ASSERT_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  int value = 5, n = kN;
  void *fargs[] = {&y2, &value, &n};
  ASSERT_CU(d->cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, stream, fargs, nullptr));
  ASSERT_CU(d->cuMemsetD32Async(y2, 0, 1, stream));
  ASSERT_CU(d->cuStreamEndCapture(stream, &other_fn));
  EXPECT_EQ(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, d->cuGraphExecUpdate(exec, other_fn, &info));
  EXPECT_EQ(CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED, info.result);
  EXPECT_EQ(Nodes(other_fn)[0], info.errorNode);
  // Same nodes, one edge fewer (two independent nodes).
  CUgraph no_edge;
  ASSERT_CU(d->cuGraphCreate(&no_edge, 0));
  float a = 1;
  void *args[] = {&a, &x1, &y1, &n};
  CUDA_KERNEL_NODE_PARAMS kp = {};
  kp.func = axpy;
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimY = kp.blockDimZ = 1;
  kp.blockDimX = 128;
  kp.kernelParams = args;
  CUgraphNode k, m;
  ASSERT_CU(d->cuGraphAddKernelNode(&k, no_edge, nullptr, 0, &kp));
  CUgraphNodeParams np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEMSET;
  np.memset.dst = y1;
  np.memset.elementSize = 4;
  np.memset.width = 1;
  np.memset.height = 1;
  ASSERT_CU(d->cuGraphAddNode(&m, no_edge, nullptr, nullptr, 0, &np));
  EXPECT_EQ(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, d->cuGraphExecUpdate(exec, no_edge, &info));
  EXPECT_EQ(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, info.result);
  EXPECT_EQ(m, info.errorNode);
  // After all the failures the exec still runs the original graph.
  Zero(y1);
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  EXPECT_EQ(1.0f, Download(y1, kN)[1]);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphExecUpdate(exec, g1, nullptr));
  for (CUgraph g : {bigger, swapped, other_fn, no_edge, g1}) ASSERT_CU(d->cuGraphDestroy(g));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
}

TEST_F(EmuGraph, ConditionalWhileLoopsUntilTheKernelClearsIt) {
  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  CUgraphConditionalHandle h;
  CUgraph body = nullptr;
  CUgraphNode cond = AddWhile(g, 1, &h, &body);
  ASSERT_NE(nullptr, body);
  CUgraphNodeType t;
  ASSERT_CU(d->cuGraphNodeGetType(cond, &t));
  EXPECT_EQ(CU_GRAPH_NODE_TYPE_CONDITIONAL, t);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphDestroy(body));  // owned by the node
  CUdeviceptr counter = Alloc(sizeof(int));
  int limit = 5;
  void *args[] = {&counter, &limit, &h};
  CUDA_KERNEL_NODE_PARAMS kp = {};
  kp.func = Function("emu_test_count");
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = args;
  CUgraphNode k;
  ASSERT_CU(d->cuGraphAddKernelNode(&k, body, nullptr, 0, &kp));
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  ASSERT_CU(d->cuMemsetD32(counter, 0, 1));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  int got = 0;
  ASSERT_CU(d->cuMemcpyDtoH(&got, counter, sizeof(got)));
  EXPECT_EQ(5, got);
  // The default is assigned again at each launch: one more iteration from 5.
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuMemcpyDtoH(&got, counter, sizeof(got)));
  EXPECT_EQ(6, got);
  // Patch the limit of the body's kernel in the exec.
  limit = 10;
  ASSERT_CU(d->cuMemsetD32(counter, 0, 1));
  ASSERT_CU(d->cuGraphExecKernelNodeSetParams(exec, k, &kp));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));
  ASSERT_CU(d->cuMemcpyDtoH(&got, counter, sizeof(got)));
  EXPECT_EQ(10, got);
  // Bad conditional parameters.
  CUcontext ctx;
  ASSERT_CU(d->cuCtxGetCurrent(&ctx));
  CUgraphNodeParams np = {};
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = h;
  np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  np.conditional.ctx = ctx;
  np.conditional.size = 2;
  CUgraphNode bad;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphAddNode(&bad, g, nullptr, nullptr, 0, &np));
  np.conditional.size = 1;
  np.conditional.handle = h + 1000;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, d->cuGraphAddNode(&bad, g, nullptr, nullptr, 0, &np));
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
}

TEST_F(EmuGraph, ConditionalIfRunsItsBodyOnlyWhenSet) {
  CUgraph g;
  ASSERT_CU(d->cuGraphCreate(&g, 0));
  CUgraphConditionalHandle h;
  ASSERT_CU(d->cuGraphConditionalHandleCreate(&h, g, nullptr, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
  CUdeviceptr counter = Alloc(sizeof(int));
  // A kernel that increments the counter and sets the condition (1 < 2 → 1).
  int limit = 2;
  void *args[] = {&counter, &limit, &h};
  CUDA_KERNEL_NODE_PARAMS kp = {};
  kp.func = Function("emu_test_count");
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = args;
  CUgraphNode setter, cond;
  ASSERT_CU(d->cuGraphAddKernelNode(&setter, g, nullptr, 0, &kp));
  CUgraphNodeParams np = {};
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = h;
  np.conditional.type = CU_GRAPH_COND_TYPE_IF;
  np.conditional.size = 2;
  ASSERT_CU(d->cuGraphAddNode(&cond, g, &setter, nullptr, 1, &np));
  CUgraph then_body = np.conditional.phGraph_out[0], else_body = np.conditional.phGraph_out[1];
  int v_then = 100, v_else = 200, one = 1;
  CUdeviceptr out = Alloc(sizeof(int));
  void *then_args[] = {&out, &v_then, &one}, *else_args[] = {&out, &v_else, &one};
  CUDA_KERNEL_NODE_PARAMS fp = kp;
  fp.func = fill;
  fp.kernelParams = then_args;
  CUgraphNode n1, n2;
  ASSERT_CU(d->cuGraphAddKernelNode(&n1, then_body, nullptr, 0, &fp));
  fp.kernelParams = else_args;
  ASSERT_CU(d->cuGraphAddKernelNode(&n2, else_body, nullptr, 0, &fp));
  CUgraphExec exec;
  ASSERT_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  ASSERT_CU(d->cuMemsetD32(counter, 0, 1));
  ASSERT_CU(d->cuGraphLaunch(exec, stream));  // counter 1 < 2: then
  int got = 0;
  ASSERT_CU(d->cuMemcpyDtoH(&got, out, sizeof(got)));
  EXPECT_EQ(100, got);
  ASSERT_CU(d->cuGraphLaunch(exec, stream));  // counter 2: else
  ASSERT_CU(d->cuMemcpyDtoH(&got, out, sizeof(got)));
  EXPECT_EQ(200, got);
  ASSERT_CU(d->cuGraphExecDestroy(exec));
  ASSERT_CU(d->cuGraphDestroy(g));
}

}  // namespace
}  // namespace emu_test
