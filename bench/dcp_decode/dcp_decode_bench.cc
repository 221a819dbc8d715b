// DCP decode benchmark (cgrt/cgrt_dcp.h): per shape (batch, heads, context), the time of
// one decode step on 1 GPU (cgrt_mla_decode of all `heads` query heads over the whole
// context) and on a DCP group of --world GPUs that computes the same step: each rank owns
// heads / world query heads (as under tensor parallelism), and cgrt_dcp_step all-gathers
// them, runs MLA for all `heads` over the rank's token-interleaved shard of
// context / world tokens, and merges, so that each rank ends with its heads / world heads
// over the whole context;
// eager and as a replayed CUDA graph, for each merge (all-to-all, reduce-scatter); the
// share of the step that is not attention (collectives, packing, merge:
// 1 - MLA-on-the-shard time / step time), the speedup (1-GPU time / group time) and the
// scaling efficiency (1-GPU time / (world x group time)). Ranks are threads of this
// process, one GPU each (device ordinal = rank). Times are CUDA-event medians per rank,
// the slowest rank reported. JSON to stdout and to --out, with the run's metadata and the
// NCCL version.
//   dcp_decode_bench [--world 2] [--shape b,h,ctx]... [--reps n] [--merge a2a|rs|both]
//                    [--nccl /path/libnccl.so.2] [--out bench/results/dcp_decode_h200x2.json] [--smoke]
// --smoke runs tiny shapes on the CPU emulation (CGRT_DRIVER=emulated): the flow only.
#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_args.h"
#include "bench/common/bench_meta.h"
#include "cgrt/cgrt_dcp.h"
#include "runtime/runtime_internal.h"

namespace {

#define CU(rt, x)                                                                            \
  do {                                                                                       \
    CUresult r_ = (x);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                \
      const char *n_ = "?";                                                                  \
      (rt)->drv->cuGetErrorName(r_, &n_);                                                    \
      fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, n_);                       \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)
#define OK(x)                                                                                \
  do {                                                                                       \
    cgrt_status s_ = (x);                                                                    \
    if (s_ != CGRT_SUCCESS) {                                                                \
      fprintf(stderr, "%s:%d %s -> %s: %s\n", __FILE__, __LINE__, #x, cgrt_status_name(s_), \
              cgrt_last_error());                                                            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A reusable barrier for the rank threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(mu_);
    const unsigned long gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      gen_++;
      cv_.notify_all();
      return;
    }
    cv_.wait(l, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  unsigned long gen_ = 0;
};

// One GPU's inputs for `rows` requests of `ctx` tokens each (pages in order) with `qh`
// query heads; outputs of `oh` heads.
struct Inputs {
  cgrt_runtime *rt = nullptr;
  CUdeviceptr kv = 0, bt = 0, lens = 0, q = 0, out = 0, lse = 0;
  int mbps = 0;
  void make(cgrt_runtime *r, int rows, int ctx, int qh, int oh, int page) {
    rt = r;
    CU(rt, rt->drv->cuCtxSetCurrent(rt->ctx));
    mbps = (ctx + page - 1) / page;
    const size_t pages = (size_t)rows * mbps;
    CU(rt, rt->drv->cuMemAlloc(&kv, pages * page * 576 * 2));
    CU(rt, rt->drv->cuMemsetD32(kv, 0x3c003c00u, pages * page * 576 / 2));  // bf16 values near 1/128
    std::vector<int> table(pages), l(rows, ctx);
    for (size_t i = 0; i < pages; i++) table[i] = (int)i;
    CU(rt, rt->drv->cuMemAlloc(&bt, pages * 4));
    CU(rt, rt->drv->cuMemcpyHtoD(bt, table.data(), pages * 4));
    CU(rt, rt->drv->cuMemAlloc(&lens, rows * 4));
    CU(rt, rt->drv->cuMemcpyHtoD(lens, l.data(), rows * 4));
    CU(rt, rt->drv->cuMemAlloc(&q, (size_t)rows * qh * 576 * 2));
    CU(rt, rt->drv->cuMemsetD32(q, 0x3c003c00u, (size_t)rows * qh * 576 / 2));
    CU(rt, rt->drv->cuMemAlloc(&out, (size_t)rows * oh * 512 * 2));
    CU(rt, rt->drv->cuMemAlloc(&lse, (size_t)rows * oh * 4));
    CU(rt, rt->drv->cuCtxSynchronize());
  }
  // MLA arguments over these inputs for `rows` rows.
  cgrt_mla_args mla(int rows) const {
    cgrt_mla_args a{};
    a.size = sizeof a;
    a.q = q;
    a.kv_cache = kv;
    a.block_table = bt;
    a.seq_lens = lens;
    a.out = out;
    a.lse = lse;
    a.num_rows = rows;
    a.softmax_scale = 0.0721688f;
    return a;
  }
  ~Inputs() {
    if (!rt) return;
    rt->drv->cuCtxSetCurrent(rt->ctx);
    for (CUdeviceptr p : {kv, bt, lens, q, out, lse}) rt->drv->cuMemFree(p);
  }
};

// Median time in microseconds of fn() enqueued on s, per call, over reps rounds of
// `inner` calls each (events around each round).
template <class F>
float time_us(cgrt_runtime *rt, CUstream s, int reps, int inner, F fn) {
  CUevent e0, e1;
  CU(rt, rt->drv->cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU(rt, rt->drv->cuEventCreate(&e1, CU_EVENT_DEFAULT));
  std::vector<float> ts;
  for (int i = 0; i < reps + 2; i++) {
    CU(rt, rt->drv->cuEventRecord(e0, s));
    for (int k = 0; k < inner; k++) fn();
    CU(rt, rt->drv->cuEventRecord(e1, s));
    CU(rt, rt->drv->cuEventSynchronize(e1));
    float ms = 0;
    CU(rt, rt->drv->cuEventElapsedTime(&ms, e0, e1));
    if (i >= 2) ts.push_back(ms * 1000.f / inner);
  }
  rt->drv->cuEventDestroy(e0);
  rt->drv->cuEventDestroy(e1);
  return median(ts);
}

// Captures fn() enqueued on s into a graph and returns its executable.
template <class F>
CUgraphExec capture(cgrt_runtime *rt, CUstream s, F fn) {
  CUgraph g = nullptr;
  CUgraphExec e = nullptr;
  CU(rt, rt->drv->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  fn();
  CU(rt, rt->drv->cuStreamEndCapture(s, &g));
  CU(rt, rt->drv->cuGraphInstantiateWithFlags(&e, g, 0));
  CU(rt, rt->drv->cuGraphUpload(e, s));
  rt->drv->cuGraphDestroy(g);
  return e;
}

struct RankTimes {
  float eager = 0, graph = 0, mla = 0;
};

}  // namespace

int main(int argc, char **argv) {
  std::string out_path = "bench/results/dcp_decode_h200x2.json", merges = "both", nccl_lib;
  int world = 2, reps = 20;
  bool smoke = false;
  std::vector<std::array<int, 3>> shapes;
  cgrt_bench::Args args;
  args.value("--out", &out_path).value("--reps", &reps).value("--world", &world).value("--merge", &merges);
  args.value("--nccl", &nccl_lib).flag("--smoke", &smoke).value("--shape", [&](const char *v) {
    std::array<int, 3> sh{};
    if (sscanf(v, "%d,%d,%d", &sh[0], &sh[1], &sh[2]) != 3 || sh[0] < 1 || sh[1] < 1 || sh[2] < 64) {
      fprintf(stderr, "--shape wants batch,heads,context (context >= 64), got '%s'\n", v);
      return false;
    }
    shapes.push_back(sh);
    return true;
  });
  if (!args.parse(argc, argv, cgrt_bench::Args::kStrict)) return 2;
  reps = std::max(1, reps);
  if (world < 2 || (merges != "a2a" && merges != "rs" && merges != "both")) {
    fprintf(stderr, "--world wants >= 2, --merge a2a|rs|both\n");
    return 2;
  }
  if (shapes.empty())
    shapes = smoke ? std::vector<std::array<int, 3>>{{2, 4, 256}, {1, 4, 512}}
                   : std::vector<std::array<int, 3>>{{8, 16, 131072}, {32, 16, 65536}, {32, 16, 8192}, {1, 16, 131072}};
  const std::string cmd = cgrt_bench::command_line(argc, argv);
  const int page = 64, inner = smoke ? 1 : 10;
  if (smoke) reps = std::min(reps, 2);

  // One runtime per rank (device ordinal = rank; the emulation for --smoke).
  std::vector<cgrt_runtime *> rts(world, nullptr);
  for (int r = 0; r < world; r++) {
    cgrt_runtime_options o;
    cgrt_runtime_options_init(&o);
    o.device_ordinal = smoke ? 0 : r;
    o.driver = smoke ? CGRT_DRIVER_EMULATED : CGRT_DRIVER_CUDA;
    OK(cgrt_runtime_create(&o, &rts[r]));
  }
  cgrt_runtime_info info{};
  info.size = sizeof info;
  OK(cgrt_runtime_get_info(rts[0], &info));
  std::vector<cgrt_dcp_merge> kinds;
  if (merges != "rs") kinds.push_back(CGRT_DCP_MERGE_ALL_TO_ALL);
  if (merges != "a2a") kinds.push_back(CGRT_DCP_MERGE_REDUCE_SCATTER);

  std::string rows_json, nccl_name;
  int nccl_version = 0;
  for (const auto &sh : shapes) {
    const int B = sh[0], H = sh[1], ctx = sh[2];
    if (H % world != 0) {
      fprintf(stderr, "shape (%d,%d,%d): heads must be a multiple of --world %d\n", B, H, ctx, world);
      return 2;
    }
    const int L = H / world;  // query heads each rank owns; the group gathers all H
    // 1 GPU: H heads over the whole context.
    float one_gpu_graph, one_gpu_eager;
    {
      cgrt_runtime *rt = rts[0];
      Inputs in;
      in.make(rt, B, ctx, H, H, page);
      cgrt_mla_options o;
      cgrt_mla_options_init(&o);
      o.max_num_seqs = B;
      o.heads = H;
      o.max_model_len = ctx;
      o.max_blocks_per_seq = in.mbps;
      cgrt_mla_plan *plan = nullptr;
      OK(cgrt_mla_plan_create(rt, &o, &plan));
      cgrt_mla_args a = in.mla(B);
      CUstream s;
      CU(rt, rt->drv->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      OK(cgrt_mla_decode(plan, s, &a));  // warm-up
      one_gpu_eager = time_us(rt, s, reps, inner, [&] { OK(cgrt_mla_decode(plan, s, &a)); });
      CUgraphExec e = capture(rt, s, [&] { OK(cgrt_mla_decode(plan, s, &a)); });
      one_gpu_graph = time_us(rt, s, reps, inner, [&] { CU(rt, rt->drv->cuGraphLaunch(e, s)); });
      rt->drv->cuGraphExecDestroy(e);
      rt->drv->cuStreamDestroy(s);
      cgrt_mla_plan_destroy(plan);
    }
    for (cgrt_dcp_merge merge : kinds) {
      const int local = cgrt_dcp_local_len(ctx, 0, world, 1);  // rank 0 holds the most
      cgrt_dcp_id id;
      OK(cgrt_dcp_unique_id(rts[0], nccl_lib.empty() ? nullptr : nccl_lib.c_str(), &id));
      std::vector<RankTimes> t(world);
      Barrier bar(world);
      std::vector<std::thread> th;
      for (int r = 0; r < world; r++)
        th.emplace_back([&, r] {
          cgrt_runtime *rt = rts[r];
          Inputs in;
          in.make(rt, B, cgrt_dcp_local_len(ctx, r, world, 1), L, L, page);
          cgrt_dcp_options o;
          cgrt_dcp_options_init(&o);
          o.world_size = world;
          o.rank = r;
          o.id = id;
          o.merge = merge;
          o.nccl_library = nccl_lib.empty() ? nullptr : nccl_lib.c_str();
          o.mla.max_num_seqs = B;
          o.mla.heads = L;
          o.mla.max_model_len = local;
          o.mla.max_blocks_per_seq = (local + page - 1) / page;
          cgrt_dcp_group *g = nullptr;
          OK(cgrt_dcp_group_create(rt, &o, &g));
          cgrt_dcp_info gi{};
          gi.size = sizeof gi;
          OK(cgrt_dcp_group_get_info(g, &gi));
          if (r == 0) {
            nccl_name = gi.nccl;
            nccl_version = gi.nccl_version;
          }
          const cgrt_mla_args ma = in.mla(B);
          cgrt_dcp_args a{};
          a.size = sizeof a;
          a.q = ma.q;
          a.kv_cache = ma.kv_cache;
          a.block_table = ma.block_table;
          a.seq_lens = ma.seq_lens;
          a.out = ma.out;
          a.lse = ma.lse;
          a.num_rows = B;
          a.softmax_scale = ma.softmax_scale;
          CUstream s;
          CU(rt, rt->drv->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
          OK(cgrt_dcp_step(g, s, &a));  // warm-up
          OK(cgrt_dcp_wait(g, s));
          bar.wait();
          t[r].eager = time_us(rt, s, reps, inner, [&] { OK(cgrt_dcp_step(g, s, &a)); });
          OK(cgrt_dcp_wait(g, s));
          CUgraphExec e = capture(rt, s, [&] { OK(cgrt_dcp_step(g, s, &a)); });
          int all_ok = 0;
          OK(cgrt_dcp_agree(g, 1, &all_ok));
          bar.wait();
          t[r].graph = time_us(rt, s, reps, inner, [&] { CU(rt, rt->drv->cuGraphLaunch(e, s)); });
          OK(cgrt_dcp_wait(g, s));
          // The attention alone on this shard (the group's plan, all H = world x L heads): the
          // rest of the step is the collectives, packing and merge.
          {
            Inputs qa;
            qa.make(rt, B, 64, H, H, page);
            // make() synchronizes the context: no rank may be capturing while another does it.
            bar.wait();
            cgrt_mla_args m = in.mla(B);  // the shard, with all H queries
            m.q = qa.q;
            m.out = qa.out;
            m.lse = qa.lse;
            cgrt_mla_plan *plan = (cgrt_mla_plan *)gi.plan;
            CUgraphExec em = capture(rt, s, [&] { OK(cgrt_mla_decode(plan, s, &m)); });
            t[r].mla = time_us(rt, s, reps, inner, [&] { CU(rt, rt->drv->cuGraphLaunch(em, s)); });
            rt->drv->cuGraphExecDestroy(em);
          }
          bar.wait();
          rt->drv->cuGraphExecDestroy(e);
          rt->drv->cuStreamDestroy(s);
          cgrt_dcp_group_destroy(g);
        });
      for (auto &x : th) x.join();
      RankTimes worst;
      for (const auto &x : t) {
        worst.eager = std::max(worst.eager, x.eager);
        worst.graph = std::max(worst.graph, x.graph);
        worst.mla = std::max(worst.mla, x.mla);
      }
      const double speedup = one_gpu_graph / worst.graph, eff = speedup / world;
      const double share = std::max(0.0, 1.0 - (double)worst.mla / worst.graph);
      char row[1024];
      snprintf(row, sizeof row,
               "    {\"batch\": %d, \"heads\": %d, \"heads_per_rank\": %d, \"context\": %d, \"world\": %d, "
               "\"merge\": \"%s\", "
               "\"us_1gpu_eager\": %.2f, \"us_1gpu_graph\": %.2f, \"us_step_eager\": %.2f, \"us_step_graph\": %.2f, "
               "\"us_mla_shard_graph\": %.2f, \"us_not_attention\": %.2f, \"not_attention_share\": %.4f, "
               "\"speedup\": %.4f, \"efficiency\": %.4f}",
               B, H, L, ctx, world, merge == CGRT_DCP_MERGE_ALL_TO_ALL ? "all_to_all" : "reduce_scatter",
               one_gpu_eager, one_gpu_graph, worst.eager, worst.graph, worst.mla,
               std::max(0.f, worst.graph - worst.mla), share, speedup, eff);
      if (!rows_json.empty()) rows_json += ",\n";
      rows_json += row;
      fprintf(stderr, "(%d,%d,%d) %-14s 1 GPU %8.1f us | %d GPUs graph %8.1f eager %8.1f mla %8.1f us | x%.2f eff %.0f%%\n",
              B, H, ctx, merge == CGRT_DCP_MERGE_ALL_TO_ALL ? "all_to_all" : "reduce_scatter", one_gpu_graph, world,
              worst.graph, worst.eager, worst.mla, speedup, 100 * eff);
    }
  }
  const std::string js = "{\n  \"benchmark\": \"dcp_decode\",\n  \"meta\": " + cgrt_bench::meta_json(info, cmd) +
                         ",\n  \"nccl\": " + cgrt_bench::json_string(nccl_name) +
                         ",\n  \"nccl_version\": " + std::to_string(nccl_version) + ",\n  \"page_size\": " +
                         std::to_string(page) + ",\n  \"dtype\": \"bf16\",\n  \"results\": [\n" + rows_json + "\n  ]\n}\n";
  fputs(js.c_str(), stdout);
  FILE *f = fopen(out_path.c_str(), "w");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", out_path.c_str());
    return 1;
  }
  fputs(js.c_str(), f);
  fclose(f);
  for (cgrt_runtime *rt : rts) cgrt_runtime_destroy(rt);
  return 0;
}
