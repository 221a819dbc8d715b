// Timing of the emulation's launch paths (not a test): what the per-launch pointer
// resolution and the checked views cost on in-bounds launches. Three workloads, each
// with 1024 other live allocations (the live-allocation table the checks search):
//   eager_fill   cuLaunchKernel of a 64-int fill (the launch path dominates)
//   graph_fill64 cuGraphLaunch of a graph of 64 such fill nodes
//   mla_split    cgrt_mla_schedule + cgrt_mla_split_t64 references, eager: 8 rows,
//                16 heads, 2048 tokens, page 64 (the references dominate)
// Prints one line per workload: median and p99 over all samples, in microseconds.
//   bazel run //tests/emu:emu_launch_bench [-- ROUNDS]  (default build: -O2)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/mla/common.h"
#include "kernels/registry.h"
#include "runtime/driver.h"
#include "runtime/emu/emu.h"

namespace {

const cgrt__driver *d;

#define CK(expr)                                                              \
  do {                                                                        \
    CUresult r_ = (expr);                                                     \
    if (r_ != CUDA_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #expr, (int)r_); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

void FillRef(const cgrt__ref_launch *, const unsigned char *p, const size_t *o) {
  int *out = reinterpret_cast<int *>(static_cast<uintptr_t>(CGRT__REF_PARAM(uint64_t, p, o, 0)));
  int value = CGRT__REF_PARAM(int, p, o, 1);
  int n = CGRT__REF_PARAM(int, p, o, 2);
  for (int i = 0; i < n; i++) out[i] = value;
}

double Now() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
void Measure(const char *name, int samples, int per_sample, F &&f) {
  std::vector<double> t;
  f();  // warm
  for (int s = 0; s < samples; s++) {
    double a = Now();
    for (int i = 0; i < per_sample; i++) f();
    t.push_back((Now() - a) / per_sample);
  }
  std::sort(t.begin(), t.end());
  double p99 = t[std::min(t.size() - 1, (size_t)(0.99 * (double)t.size()))];
  std::printf("%-14s median_us %10.3f  p99_us %10.3f  samples %d x %d\n", name, t[t.size() / 2], p99,
              samples, per_sample);
}

}  // namespace

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
  cgrt__ref_kernel fill = {"emu_bench_fill", 3, {8, 4, 4}, FillRef};
  if (cgrt__ref_kernel_register(&fill) != 0) return 1;
  d = cgrt__driver_emulated();
  CK(d->cuInit(0));
  CUdevice dev;
  CK(d->cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(d->cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(d->cuCtxSetCurrent(ctx));
  CUmodule mod;
  CK(d->cuModuleLoadData(&mod, "emulated"));
  CUfunction ffill, fsched, fsplit;
  CK(d->cuModuleGetFunction(&ffill, mod, "emu_bench_fill"));
  CK(d->cuModuleGetFunction(&fsched, mod, "cgrt_mla_schedule"));
  CK(d->cuModuleGetFunction(&fsplit, mod, "cgrt_mla_split_t64"));
  CUstream st;
  CK(d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

  std::vector<CUdeviceptr> others(1024);
  for (auto &p : others) CK(d->cuMemAlloc(&p, 4096));

  CUdeviceptr buf;
  CK(d->cuMemAlloc(&buf, 64 * sizeof(int)));
  int value = 3, n = 64;
  void *fargs[] = {&buf, &value, &n};

  CUgraph g;
  CK(d->cuGraphCreate(&g, 0));
  CUDA_KERNEL_NODE_PARAMS np = {};
  np.func = ffill;
  np.gridDimX = np.gridDimY = np.gridDimZ = 1;
  np.blockDimX = 64;
  np.blockDimY = np.blockDimZ = 1;
  np.kernelParams = fargs;
  CUgraphNode prev = nullptr;
  for (int i = 0; i < 64; i++) {
    CUgraphNode nd;
    CK(d->cuGraphAddKernelNode(&nd, g, prev ? &prev : nullptr, prev ? 1 : 0, &np));
    prev = nd;
  }
  CUgraphExec ge;
  CK(d->cuGraphInstantiateWithFlags(&ge, g, 0));

  // MLA: rows 8 (block_len 1), 16 heads in one group, 2048 + 1 tokens, page 64, P 8.
  const int rows = 8, qh = 16, hg = 16, P = 8, ps = 64, ctx_len = 2049;
  const int mbps = (ctx_len + ps - 1) / ps, pages = rows * mbps;
  CUdeviceptr q, kv, bt, meta, out, lse, part_o, part_lse, counters, seq;
  CK(d->cuMemAlloc(&q, (size_t)rows * qh * CGRT_MLA_D * 2));
  CK(d->cuMemAlloc(&kv, (size_t)pages * ps * CGRT_MLA_D * 2));
  CK(d->cuMemAlloc(&bt, (size_t)rows * mbps * 4));
  CK(d->cuMemAlloc(&meta, (size_t)(2 * rows + 2) * 4));
  CK(d->cuMemAlloc(&out, (size_t)rows * qh * CGRT_MLA_DV * 2));
  CK(d->cuMemAlloc(&lse, (size_t)rows * qh * 4));
  CK(d->cuMemAlloc(&part_o, (size_t)(rows + P) * qh * CGRT_MLA_DV * 4));
  CK(d->cuMemAlloc(&part_lse, (size_t)(rows + P) * qh * 4));
  CK(d->cuMemAlloc(&counters, (size_t)rows * 4));
  CK(d->cuMemAlloc(&seq, (size_t)rows * 4));
  CK(d->cuMemsetD8(q, 0x3c, (size_t)rows * qh * CGRT_MLA_D * 2));
  CK(d->cuMemsetD8(kv, 0x3b, (size_t)pages * ps * CGRT_MLA_D * 2));
  CK(d->cuMemsetD8(counters, 0, (size_t)rows * 4));
  std::vector<int> hbt(rows * mbps), hseq(rows, ctx_len);
  for (int i = 0; i < rows * mbps; i++) hbt[i] = i;
  CK(d->cuMemcpyHtoD(bt, hbt.data(), hbt.size() * 4));
  CK(d->cuMemcpyHtoD(seq, hseq.data(), hseq.size() * 4));
  int block_len = 1, cap = mbps * ps, min_tiles = CGRT_MLA_MIN_TILES_COUNTERS, causal = 0, mk = 0;
  float scale = 0.04f, kv_scale = 1.f;
  CUdeviceptr nullp = 0;
  int rows_ = rows, qh_ = qh, hg_ = hg, P_ = P, mbps_ = mbps, ps_ = ps;
  void *sargs[] = {&seq, &meta, &rows_, &block_len, &cap, &P_, &min_tiles, &causal};
  void *pargs[] = {&q,     &kv,   &bt,    &meta,  &out,     &lse,  &part_o,    &part_lse,
                   &counters, &rows_, &qh_, &hg_, &P_, &mbps_, &ps_, &block_len,
                   &scale, &nullp, &cap, &min_tiles, &causal, &mk, &kv_scale};

  for (int r = 0; r < rounds; r++) {
    Measure("eager_fill", 200, 200, [&] {
      CK(d->cuLaunchKernel(ffill, 1, 1, 1, 64, 1, 1, 0, st, fargs, nullptr));
    });
    Measure("graph_fill64", 200, 20, [&] { CK(d->cuGraphLaunch(ge, st)); });
    Measure("mla_split", 20, 1, [&] {
      CK(d->cuLaunchKernel(fsched, 1, 1, 1, 1024, 1, 1, 0, st, sargs, nullptr));
      CK(d->cuLaunchKernel(fsplit, qh / hg, P, 1, 128, 1, 1, 0, st, pargs, nullptr));
    });
  }

  CK(d->cuGraphExecDestroy(ge));
  CK(d->cuGraphDestroy(g));
  for (CUdeviceptr p : {q, kv, bt, meta, out, lse, part_o, part_lse, counters, seq, buf}) CK(d->cuMemFree(p));
  for (auto p : others) CK(d->cuMemFree(p));
  CK(d->cuStreamDestroy(st));
  CK(d->cuModuleUnload(mod));
  return 0;
}
