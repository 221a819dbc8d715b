// bench/replay_latency: host and GPU time per decode step of N dependent tiny kernels,
// replayed in the ways cgrt offers, against eager launches and the raw cuGraphLaunch floor.
//
//   replay_latency [--iters N] [--sizes 32,128,512]
//
// Runs on the driver CGRT_DRIVER selects (the numbers only mean something on a GPU).
// Prints one JSON object to stdout, with the run's "meta" (bench/common/bench_meta.h);
// torch_replay.py adds PyTorch's figures and writes bench/results/replay_latency_h200.json.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "bench/common/bench_args.h"
#include "bench/common/bench_meta.h"
#include "cgrt/cgrt_graphs.h"
#include "kernels/registry.h"
#include "runtime/runtime_internal.h"

// //bench/replay_latency:bench_fatbin: one module image per .cu file.
struct cgrt_bench_fatbin_entry {
  const char *source;
  const unsigned char *image;
  size_t size;
  int optional;  // device-runtime images (rdc_srcs): may fail to load
};
extern "C" const cgrt_bench_fatbin_entry cgrt_bench_replay_fatbin[];

namespace {

double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

void node_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  const float *in = (const float *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, 0);
  float *acc = (float *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, 1);
  for (unsigned t = 0; t < l->block[0]; t++) acc[t] = acc[t] * 0.5f + in[t];
}

#define CHECK_CU(x)                                                                  \
  do {                                                                               \
    CUresult r_ = (x);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                        \
      fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cgrt__curesult_name(r_)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)
#define CHECK_ST(x)                                                                             \
  do {                                                                                          \
    cgrt_status s_ = (x);                                                                       \
    if (s_ != CGRT_SUCCESS) {                                                                   \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #x, cgrt_status_name(s_),   \
              cgrt_last_error());                                                               \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

struct Step {
  const cgrt__driver *d;
  CUfunction f, fpdl;
  int n;
  bool pdl;
  std::vector<CUdeviceptr> bufs[2];  // n inputs + acc, two copies (for rebinding)
};

cgrt_status launch_chain(Step *s, CUstream st, const CUdeviceptr *p) {
  for (int i = 0; i < s->n; i++) {
    CUdeviceptr in = p[i], acc = p[s->n];
    void *args[] = {&in, &acc};
    CUresult r;
    if (s->pdl) {
      CUlaunchAttribute attr;
      memset(&attr, 0, sizeof attr);
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig cfg;
      memset(&cfg, 0, sizeof cfg);
      cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = 32;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = st;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      r = s->d->cuLaunchKernelEx(&cfg, s->fpdl, args, nullptr);
    } else {
      r = s->d->cuLaunchKernel(s->f, 1, 1, 1, 32, 1, 1, 0, st, args, nullptr);
    }
    if (r != CUDA_SUCCESS) return CGRT_ERROR_DRIVER;
  }
  return CGRT_SUCCESS;
}

cgrt_status enqueue_cb(void *user, CUstream st, const cgrt_batch_desc *b) {
  return launch_chain(static_cast<Step *>(user), st, b->buffers);
}

struct Stats {
  std::vector<double> host, gpu;  // us per step
};

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = (size_t)(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Bench {
  cgrt_runtime *rt;
  const cgrt__driver *d;
  CUstream stream;
  int iters = 400;
  std::vector<CUevent> ev0, ev1;
  std::string json;
  bool first_entry = true;

  // Times `iters` calls of fn(j): host time of the call, GPU time between events around it.
  Stats measure(const std::function<void(int)> &fn, int n_iters = -1, int batch = 25) {
    if (n_iters < 0) n_iters = iters;
    if ((int)ev0.size() < batch) {
      ev0.resize(batch);
      ev1.resize(batch);
      for (int i = 0; i < batch; i++) {
        CHECK_CU(d->cuEventCreate(&ev0[i], CU_EVENT_DEFAULT));
        CHECK_CU(d->cuEventCreate(&ev1[i], CU_EVENT_DEFAULT));
      }
    }
    for (int j = 0; j < 10; j++) fn(j);  // warm-up
    CHECK_CU(d->cuStreamSynchronize(stream));
    Stats s;
    for (int done = 0; done < n_iters; done += batch) {
      int m = std::min(batch, n_iters - done);
      for (int j = 0; j < m; j++) {
        CHECK_CU(d->cuEventRecord(ev0[j], stream));
        double t0 = now_us();
        fn(done + j);
        double t1 = now_us();
        CHECK_CU(d->cuEventRecord(ev1[j], stream));
        s.host.push_back(t1 - t0);
      }
      CHECK_CU(d->cuStreamSynchronize(stream));
      for (int j = 0; j < m; j++) {
        float ms = 0;
        CHECK_CU(d->cuEventElapsedTime(&ms, ev0[j], ev1[j]));
        s.gpu.push_back(ms * 1e3);
      }
    }
    return s;
  }
  // Times a and b in alternating batches, so clock and thermal drift hit both alike.
  void measure_pair(const std::function<void(int)> &a, const std::function<void(int)> &b, Stats *sa,
                    Stats *sb, int rounds = 16) {
    for (int r = 0; r < rounds; r++) {
      Stats x = measure(a, iters / rounds), y = measure(b, iters / rounds);
      sa->host.insert(sa->host.end(), x.host.begin(), x.host.end());
      sa->gpu.insert(sa->gpu.end(), x.gpu.begin(), x.gpu.end());
      sb->host.insert(sb->host.end(), y.host.begin(), y.host.end());
      sb->gpu.insert(sb->gpu.end(), y.gpu.begin(), y.gpu.end());
    }
  }
  std::vector<double> round_trip(const std::function<void(int)> &fn, int n_iters) {
    for (int j = 0; j < 10; j++) {
      fn(j);
      CHECK_CU(d->cuStreamSynchronize(stream));
    }
    std::vector<double> v;
    for (int j = 0; j < n_iters; j++) {
      double t0 = now_us();
      fn(j);
      CHECK_CU(d->cuStreamSynchronize(stream));
      v.push_back(now_us() - t0);
    }
    return v;
  }
  void emit(const char *name, int n, const Stats &s, int patched = -1) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "%s\n    {\"case\": \"%s\", \"nodes\": %d, \"host_us_p50\": %.3f, \"host_us_p99\": %.3f, "
             "\"gpu_us_p50\": %.3f, \"gpu_us_p99\": %.3f, \"gpu_us_per_node_p50\": %.4f%s",
             first_entry ? "" : ",", name, n, pct(s.host, 0.5), pct(s.host, 0.99), pct(s.gpu, 0.5),
             pct(s.gpu, 0.99), pct(s.gpu, 0.5) / n, patched >= 0 ? ", \"patched_nodes\": " : "");
    json += buf;
    if (patched >= 0) json += std::to_string(patched);
    json += "}";
    first_entry = false;
    fprintf(stderr, "%-28s N=%4d host p50 %8.2f p99 %8.2f us | gpu p50 %9.2f us (%.3f us/node)\n", name, n,
            pct(s.host, 0.5), pct(s.host, 0.99), pct(s.gpu, 0.5), pct(s.gpu, 0.5) / n);
  }
};

cgrt_graphs *make_set(Bench &B, Step &S, cgrt_replay_mode mode, std::vector<cgrt_buffer_desc> &descs,
                      int max_num_seqs = 1, bool default_sizes = false, int device_patch = 0,
                      int checked = 0) {
  int nb = S.n + 1;
  descs.resize(nb);
  static std::vector<std::string> names;
  names.resize(nb);
  for (int i = 0; i < nb; i++) {
    names[i] = i < S.n ? "in" + std::to_string(i) : "acc";
    descs[i].name = names[i].c_str();
    descs[i].ptr = S.bufs[0][i];
    descs[i].bytes = 256;
    descs[i].dir = i < S.n ? CGRT_BUFFER_IN : CGRT_BUFFER_INOUT;
  }
  cgrt_graphs_options o;
  cgrt_graphs_options_init(&o);
  o.max_num_seqs = max_num_seqs;
  o.max_model_len = 4096;
  o.enqueue = enqueue_cb;
  o.user = &S;
  o.buffers = descs.data();
  o.num_buffers = descs.size();
  o.replay_mode = mode;
  o.stream = B.stream;
  o.device_patch = device_patch;
  o.checked_replay = checked;
  static int one = 1;
  if (!default_sizes) {
    o.capture_sizes = &one;
    o.num_capture_sizes = 1;
  }
  cgrt_graphs *set = nullptr;
  CHECK_ST(cgrt_graphs_create(B.rt, &o, &set));
  CHECK_ST(cgrt_graphs_capture(set));
  return set;
}

std::vector<cgrt_binding> bindings_for(Step &S, int k, int j) {
  std::vector<cgrt_binding> v;
  int w = j % 2;
  for (int i = 0; i < k && i < S.n + 1; i++)  // first k inputs (k > n: every buffer, acc too)
    v.push_back({i, S.bufs[w][i], 0});
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string command = cgrt_bench::command_line(argc, argv);
  std::vector<int> sizes = {32, 128, 512};
  int iters = 400;
  cgrt_bench::Args args;
  args.value("--iters", &iters).value("--sizes", [&](const char *v) {
    sizes = cgrt_bench::int_list(v);
    return true;
  });
  args.parse(argc, argv, cgrt_bench::Args::kLenient);
  cgrt__ref_kernel k1 = {"bench_node", 2, {8, 8}, node_ref};
  cgrt__ref_kernel k2 = {"bench_node_pdl", 2, {8, 8}, node_ref};
  cgrt__ref_kernel_register(&k1);
  cgrt__ref_kernel_register(&k2);

  cgrt_runtime *rt = nullptr;
  CHECK_ST(cgrt_runtime_create(nullptr, &rt));
  cgrt_runtime_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  CHECK_ST(cgrt_runtime_get_info(rt, &info));
  const cgrt__driver *d = rt->drv;
  CHECK_CU(d->cuCtxSetCurrent(rt->ctx));
  CUmodule mod;
  CHECK_CU(d->cuModuleLoadData(&mod, cgrt_bench_replay_fatbin[0].image));
  Bench B;
  B.rt = rt;
  B.d = d;
  B.iters = iters;
  CHECK_CU(d->cuStreamCreate(&B.stream, CU_STREAM_NON_BLOCKING));

  std::string out = "{\n  \"benchmark\": \"replay_latency\",\n  \"meta\": " + cgrt_bench::meta_json(info, command) +
                    ",\n  \"cases\": [";

  double capture_default_s = 0, capture_default_wall_s = 0;
  size_t capture_default_buckets = 0;
  double rt32_cgrt = 0, rt32_raw = 0, rt32_eager = 0, rt32_cgrt_pdl = 0;

  for (int n : sizes) {
    Step S;
    S.d = d;
    S.n = n;
    S.pdl = false;
    CHECK_CU(d->cuModuleGetFunction(&S.f, mod, "bench_node"));
    CHECK_CU(d->cuModuleGetFunction(&S.fpdl, mod, "bench_node_pdl"));
    for (int w = 0; w < 2; w++) {
      for (int i = 0; i <= n; i++) {
        CUdeviceptr p;
        CHECK_CU(d->cuMemAlloc(&p, 256));
        std::vector<float> init(64, 0.001f * (float)(i + 1));
        CHECK_CU(d->cuMemcpyHtoD(p, init.data(), 256));
        S.bufs[w].push_back(p);
      }
    }
    for (int pdl = 0; pdl < 2; pdl++) {
      S.pdl = pdl != 0;
      std::string sfx = pdl ? "+pdl" : "";
      // Eager launches.
      Stats eager = B.measure([&](int) { launch_chain(&S, B.stream, S.bufs[0].data()); });
      B.emit(("eager" + sfx).c_str(), n, eager);
      // The raw graph: the same step captured by hand, launched with cuGraphLaunch.
      CUgraph g;
      CUgraphExec x;
      CHECK_CU(d->cuStreamBeginCapture(B.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      launch_chain(&S, B.stream, S.bufs[0].data());
      CHECK_CU(d->cuStreamEndCapture(B.stream, &g));
      CHECK_CU(d->cuGraphInstantiateWithFlags(&x, g, 0));
      CHECK_CU(d->cuGraphUpload(x, B.stream));
      if (!pdl) {
        // The driver's own floor for rebinding: cuGraphExecKernelNodeSetParams on 8 nodes of
        // the raw graph (parameters prepared beforehand), then cuGraphLaunch.
        size_t nn = 0;
        CHECK_CU(d->cuGraphGetNodes(g, nullptr, &nn));
        std::vector<CUgraphNode> nodes(nn);
        CHECK_CU(d->cuGraphGetNodes(g, nodes.data(), &nn));
        int k = std::min<int>(8, (int)nn);
        std::vector<CUDA_KERNEL_NODE_PARAMS> kp(k);
        std::vector<CUdeviceptr> argv_in(k), argv_acc(k);
        std::vector<void *> argv(2 * k);
        for (int i = 0; i < k; i++) {
          CHECK_CU(d->cuGraphKernelNodeGetParams(nodes[i], &kp[i]));
          argv_in[i] = *(CUdeviceptr *)kp[i].kernelParams[0];
          argv_acc[i] = *(CUdeviceptr *)kp[i].kernelParams[1];
          argv[2 * i] = &argv_in[i];
          argv[2 * i + 1] = &argv_acc[i];
          kp[i].kernelParams = &argv[2 * i];
          kp[i].extra = nullptr;
        }
        Stats sp = B.measure([&](int j) {
          for (int i = 0; i < k; i++) {
            argv_in[i] = S.bufs[j % 2][i];
            CHECK_CU(d->cuGraphExecKernelNodeSetParams(x, nodes[i], &kp[i]));
          }
          CHECK_CU(d->cuGraphLaunch(x, B.stream));
        });
        B.emit("raw_set_params_8", n, sp, k);
        for (int i = 0; i < k; i++) {  // back to the captured addresses
          argv_in[i] = S.bufs[0][i];
          CHECK_CU(d->cuGraphExecKernelNodeSetParams(x, nodes[i], &kp[i]));
        }
      }
      // cgrt step without rebinding, timed in alternation with the raw graph.
      std::vector<cgrt_buffer_desc> descs;
      cgrt_graphs *set = make_set(B, S, CGRT_REPLAY_POINTER_UPDATE, descs);
      Stats raw, st0;
      B.measure_pair([&](int) { CHECK_CU(d->cuGraphLaunch(x, B.stream)); },
                     [&](int) { CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0)); }, &raw, &st0);
      B.emit(("raw_graph_launch" + sfx).c_str(), n, raw);
      B.emit(("cgrt_step" + sfx).c_str(), n, st0);
      if (n == 32 && pdl) {
        auto v1 = B.round_trip([&](int) { CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0)); }, 500);
        rt32_cgrt_pdl = pct(v1, 0.5);
      }
      if (n == 32 && !pdl) {
        // Launch + sync round trips of the 32-node step.
        auto v1 = B.round_trip([&](int) { CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0)); }, 500);
        auto v2 = B.round_trip([&](int) { CHECK_CU(d->cuGraphLaunch(x, B.stream)); }, 500);
        auto v3 = B.round_trip([&](int) { launch_chain(&S, B.stream, S.bufs[0].data()); }, 500);
        rt32_cgrt = pct(v1, 0.5);
        rt32_raw = pct(v2, 0.5);
        rt32_eager = pct(v3, 0.5);
        // Correctness: one step from a known accumulator, graph replay vs eager.
        std::vector<float> zero(64, 0.0f), a(64), b(64);
        CHECK_CU(d->cuStreamSynchronize(B.stream));
        CHECK_CU(d->cuMemcpyHtoD(S.bufs[0][n], zero.data(), 256));
        CHECK_CU(d->cuCtxSynchronize());  // landed before the next launch on B.stream
        CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, nullptr, 0));
        CHECK_CU(d->cuStreamSynchronize(B.stream));
        CHECK_CU(d->cuMemcpyDtoH(a.data(), S.bufs[0][n], 256));
        CHECK_CU(d->cuMemcpyHtoD(S.bufs[0][n], zero.data(), 256));
        CHECK_CU(d->cuCtxSynchronize());  // landed before the next launch on B.stream
        launch_chain(&S, B.stream, S.bufs[0].data());
        CHECK_CU(d->cuStreamSynchronize(B.stream));
        CHECK_CU(d->cuMemcpyDtoH(b.data(), S.bufs[0][n], 256));
        if (a != b) {
          fprintf(stderr, "replay differs from eager\n");
          return 1;
        }
      }
      if (!pdl) {
        // Rebinding 1, 8 and all pointers (alternating between two copies each step).
        for (int k : {1, 8, n + 1}) {
          if (k > n + 1) continue;
          std::vector<std::vector<cgrt_binding>> bs = {bindings_for(S, k, 0), bindings_for(S, k, 1)};
          Stats sr = B.measure([&](int j) {
            const auto &v = bs[(j + 1) % 2];
            CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, v.data(), v.size()));
          });
          int patched = k > n ? n : k;
          std::string name = k > n ? "cgrt_rebind_all" : "cgrt_rebind_" + std::to_string(k);
          B.emit(name.c_str(), n, sr, patched);
        }
        // Restore the original addresses.
        auto back = bindings_for(S, n + 1, 0);
        CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, back.data(), back.size()));
        // Device patching (options.device_patch): the same rebinding through one update of
        // the graph's patch node per step; the kernel nodes are rewritten on the device.
        {
          std::vector<cgrt_buffer_desc> d5;
          cgrt_graphs *dset = make_set(B, S, CGRT_REPLAY_POINTER_UPDATE, d5, 1, false, 1);
          cgrt_bucket_info bi;
          memset(&bi, 0, sizeof bi);
          bi.size = sizeof bi;
          CHECK_ST(cgrt_graphs_get_bucket(dset, 0, &bi));
          if (!bi.device_patch) {
            fprintf(stderr, "device_patch unavailable here: the set patches on the host\n");
            return 1;
          }
          Stats rawd, sd0;
          B.measure_pair([&](int) { CHECK_CU(d->cuGraphLaunch(x, B.stream)); },
                         [&](int) { CHECK_ST(cgrt_graphs_step(dset, CGRT_GRAPH_DECODE, 1, nullptr, 0)); }, &rawd,
                         &sd0);
          B.emit("raw_graph_launch_vs_dpatch", n, rawd);
          B.emit("cgrt_dpatch_step", n, sd0);
          for (int k : {1, 8, n + 1}) {
            std::vector<std::vector<cgrt_binding>> bs = {bindings_for(S, k, 0), bindings_for(S, k, 1)};
            Stats sr = B.measure([&](int j) {
              const auto &v = bs[(j + 1) % 2];
              CHECK_ST(cgrt_graphs_step(dset, CGRT_GRAPH_DECODE, 1, v.data(), v.size()));
            });
            std::string name = k > n ? "cgrt_dpatch_rebind_all" : "cgrt_dpatch_rebind_" + std::to_string(k);
            B.emit(name.c_str(), n, sr, k > n ? n : k);
          }
          // Correctness: every buffer moved to the second copy, replay vs eager there.
          std::vector<float> zero(64, 0.0f), a(64), b(64);
          auto all1 = bindings_for(S, n + 1, 1);
          CHECK_CU(d->cuStreamSynchronize(B.stream));
          CHECK_CU(d->cuMemcpyHtoD(S.bufs[1][n], zero.data(), 256));
        CHECK_CU(d->cuCtxSynchronize());  // landed before the next launch on B.stream
          CHECK_ST(cgrt_graphs_step(dset, CGRT_GRAPH_DECODE, 1, all1.data(), all1.size()));
          CHECK_CU(d->cuStreamSynchronize(B.stream));
          CHECK_CU(d->cuMemcpyDtoH(a.data(), S.bufs[1][n], 256));
          CHECK_CU(d->cuMemcpyHtoD(S.bufs[1][n], zero.data(), 256));
        CHECK_CU(d->cuCtxSynchronize());  // landed before the next launch on B.stream
          launch_chain(&S, B.stream, S.bufs[1].data());
          CHECK_CU(d->cuStreamSynchronize(B.stream));
          CHECK_CU(d->cuMemcpyDtoH(b.data(), S.bufs[1][n], 256));
          if (a != b) {
            fprintf(stderr, "device-patched replay differs from eager (N=%d)\n", n);
            return 1;
          }
          cgrt_graphs_destroy(dset);
        }
        // Checked replay (options.checked_replay): every pointer checked before the launch,
        // the stream waited for after it; timed in alternation with the unchecked step
        // followed by cuStreamSynchronize, with 0, 1, 8 and all buffers moving each step.
        {
          std::vector<cgrt_buffer_desc> d6;
          cgrt_graphs *kset = make_set(B, S, CGRT_REPLAY_POINTER_UPDATE, d6, 1, false, 0, 1);
          for (int k : {0, 1, 8, n + 1}) {
            std::vector<std::vector<cgrt_binding>> bs = {bindings_for(S, k, 0), bindings_for(S, k, 1)};
            Stats plain, checked;
            B.measure_pair(
                [&](int j) {
                  const auto &v = bs[(j + 1) % 2];
                  CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, v.data(), v.size()));
                  CHECK_CU(d->cuStreamSynchronize(B.stream));
                },
                [&](int j) {
                  const auto &v = bs[(j + 1) % 2];
                  CHECK_ST(cgrt_graphs_step(kset, CGRT_GRAPH_DECODE, 1, v.data(), v.size()));
                },
                &plain, &checked);
            std::string sfx_k = k > n ? "all" : std::to_string(k);
            B.emit(("cgrt_sync_rebind_" + sfx_k).c_str(), n, plain, k > n ? n : k);
            B.emit(("cgrt_checked_rebind_" + sfx_k).c_str(), n, checked, k > n ? n : k);
          }
          auto back0 = bindings_for(S, n + 1, 0);
          CHECK_ST(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, back0.data(), back0.size()));
          cgrt_graphs_destroy(kset);
        }
        // Copy-in replay of 1 and 8 inputs.
        std::vector<cgrt_buffer_desc> d2;
        cgrt_graphs *cset = make_set(B, S, CGRT_REPLAY_COPY_IN, d2);
        for (int k : {1, 8}) {
          auto v = bindings_for(S, k, 1);
          Stats sc = B.measure([&](int) { CHECK_ST(cgrt_graphs_step(cset, CGRT_GRAPH_DECODE, 1, v.data(), v.size())); });
          B.emit(("cgrt_copy_in_" + std::to_string(k)).c_str(), n, sc);
        }
        cgrt_graphs_destroy(cset);
        // Whole-graph update: one input moves each step; re-capture + cuGraphExecUpdate.
        std::vector<cgrt_buffer_desc> d3;
        cgrt_graphs *uset = make_set(B, S, CGRT_REPLAY_EXEC_UPDATE, d3);
        std::vector<std::vector<cgrt_binding>> bs = {bindings_for(S, 1, 0), bindings_for(S, 1, 1)};
        Stats su = B.measure([&](int j) {
          const auto &v = bs[(j + 1) % 2];
          CHECK_ST(cgrt_graphs_step(uset, CGRT_GRAPH_DECODE, 1, v.data(), v.size()));
        }, std::max(40, iters / 4));
        B.emit("cgrt_exec_update", n, su);
        cgrt_graphs_destroy(uset);
        // Re-capture + instantiate of the bucket.
        Stats sre = B.measure([&](int) { CHECK_ST(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 1)); }, 20, 10);
        B.emit("cgrt_recapture_instantiate", n, sre);
      }
      cgrt_graphs_destroy(set);
      CHECK_CU(d->cuGraphExecDestroy(x));
      CHECK_CU(d->cuGraphDestroy(g));
    }
    if (n == 32) {
      // Capture + instantiate of the whole default bucket set (decode, max_num_seqs 256).
      S.pdl = false;
      std::vector<cgrt_buffer_desc> d4;
      double t0 = now_us();
      cgrt_graphs *all = make_set(B, S, CGRT_REPLAY_POINTER_UPDATE, d4, 256, true);
      capture_default_wall_s = (now_us() - t0) * 1e-6;
      cgrt_graphs_stats gs;
      memset(&gs, 0, sizeof gs);
      gs.size = sizeof gs;
      CHECK_ST(cgrt_graphs_get_stats(all, &gs));
      capture_default_s = gs.capture_seconds;
      capture_default_buckets = gs.buckets;
      cgrt_graphs_destroy(all);
    }
    CHECK_CU(d->cuStreamSynchronize(B.stream));
    for (int w = 0; w < 2; w++)
      for (CUdeviceptr p : S.bufs[w]) CHECK_CU(d->cuMemFree(p));
  }
  out += B.json;
  char tail[1024];
  snprintf(tail, sizeof tail,
           "\n  ],\n  \"round_trip_32_us_p50\": {\"cgrt_step\": %.3f, \"raw_graph_launch\": %.3f, \"eager\": %.3f, "
           "\"cgrt_step_pdl\": %.3f},\n"
           "  \"capture_default_buckets_32_nodes\": {\"buckets\": %zu, \"capture_instantiate_s\": %.4f, "
           "\"wall_s_with_warmup\": %.4f}\n}\n",
           rt32_cgrt, rt32_raw, rt32_eager, rt32_cgrt_pdl, capture_default_buckets, capture_default_s, capture_default_wall_s);
  out += tail;
  fputs(out.c_str(), stdout);
  fprintf(stderr, "round trip 32 nodes p50: cgrt %.2f us, raw %.2f us, eager %.2f us\n", rt32_cgrt, rt32_raw,
          rt32_eager);
  fprintf(stderr, "capture+instantiate of %zu default buckets (32 nodes): %.4f s (wall with warm-up %.4f s)\n",
          capture_default_buckets, capture_default_s, capture_default_wall_s);
  CHECK_CU(d->cuModuleUnload(mod));
  cgrt_runtime_destroy(rt);
  return 0;
}
