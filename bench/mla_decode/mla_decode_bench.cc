// MLA decode benchmark: per shape and combine strategy, the time of one decode step
// (schedule + split [+ combine] kernels) measured with CUDA events, eager and as a
// replayed CUDA graph, the effective KV bandwidth (KV bytes read / time) and TFLOP/s
// (2 x heads x context x (576 + 512) per row), next to the device-to-device copy
// bandwidth measured in the same run. JSON to stdout and to --out. Strategies: auto (the
// options' default; "auto:cnt" / "auto:ws" says which one the step count takes),
// workspace, counters. The A/B (--ab) replays option variants in interleaved rounds:
// "default" is the workspace strategy, "counters" the counters strategy, "pdl"
// programmatic_launch 1 (up to 64 rows), "pdl1" / "pdl2" AUTO with programmatic_launch 1
// / 2 (2: the split reads seq_lens and its first block-table entries while the call
// before it in the graph ends). Block shapes (block_len k > 1, "causal" 1 for verify rows)
// add, all with AUTO: "auto" (the plan's choice), "rows" (the rows apart: every row
// its own request of block_len 1, with the block's block-table row and its own
// length, which is exactly the launches of a plan that does not run a block's rows
// together) and, for causal shapes, "noncausal" (the same block, causal 0). --fp8 adds
// an FP8 e4m3 cache (cgrt_mla_options.kv_dtype; the same pool read as e4m3 bytes,
// kv_scale 1): a "fp8" row per shape (AUTO) and, with --ab, a "fp8" variant (workspace,
// as "default"); its TB/s counts the e4m3 bytes read, and its line gives the speedup
// over bf16. --stamps FILE (a build with --define=cgrt_mla_stamps=1, on a GPU): after each
// shape's AUTO measurement in a graph of L calls, one more replay of that graph and the
// per-CTA phase stamps of its last call (kernels/mla/stamps.cuh) into FILE, with the
// stamped build's own time per call; bench/mla_decode/stamps_summary.py reads it.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench/common/bench_args.h"
#include "bench/common/bench_meta.h"
#include "cgrt/cgrt_mla.h"
#include "kernels/mla/common.h"
#include "runtime/runtime_internal.h"

#define CU(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *n_ = "?";                                                    \
      rt->drv->cuGetErrorName(r_, &n_);                                        \
      fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, n_);         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define OK(x)                                                                            \
  do {                                                                                   \
    cgrt_status s_ = (x);                                                                \
    if (s_ != CGRT_SUCCESS) {                                                            \
      fprintf(stderr, "%s:%d %s -> %s: %s\n", __FILE__, __LINE__, #x, cgrt_status_name(s_), \
              cgrt_last_error());                                                        \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static cgrt_runtime *rt;

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char **argv) {
  std::string out_path = "bench/results/mla_decode_h200.json";
  int reps = 30;
  bool smoke = false;  // --smoke: tiny shapes, no L2 rotation (checks the flow, e.g. emulated)
  bool ab = false;  // --ab: also time the option variants, interleaved
  bool fp8 = false;  // --fp8: also an FP8 e4m3 cache
  // --layers L: also time L decode calls captured back to back in one graph (each on its
  // own KV copy, as the layers of a model's decode graph do): the per-call time without
  // the graph's launch latency. 0: off.
  int layers = 8;
  std::vector<std::array<int, 5>> only;  // --shape b,h,ctx[,k[,causal]] (repeatable): these shapes only
  std::string keep;  // --variants a,b,...: the A/B runs only these variants (and default)
  std::string stamps_path;  // --stamps FILE: per-CTA phase stamps (diagnostic build)
  cgrt_bench::Args args;
  args.flag("--ab", &ab).flag("--fp8", &fp8).value("--out", &out_path).value("--reps", &reps);
  args.value("--stamps", &stamps_path);
  args.flag("--smoke", &smoke).value("--layers", &layers).value("--variants", [&](const char *v) {
    keep = "," + std::string(v) + ",";
    return true;
  });
  args.value("--shape", [&](const char *v) {
    std::array<int, 5> sh{0, 0, 0, 1, 0};
    const int n = sscanf(v, "%d,%d,%d,%d,%d", &sh[0], &sh[1], &sh[2], &sh[3], &sh[4]);
    if (n < 3 || sh[0] < 1 || sh[1] < 1 || sh[2] < 64 || sh[3] < 1 || sh[4] < 0 || sh[4] > 1) {
      fprintf(stderr, "--shape wants batch,heads,context[,block_len[,causal]] (context >= 64), got '%s'\n", v);
      return false;
    }
    only.push_back(sh);
    return true;
  });
  if (!args.parse(argc, argv, cgrt_bench::Args::kLenient)) return 2;
  layers = std::max(0, layers);
  const std::string cmd = cgrt_bench::command_line(argc, argv);

  OK(cgrt_runtime_create(nullptr, &rt));
  cgrt_runtime_info info{};
  info.size = sizeof info;
  OK(cgrt_runtime_get_info(rt, &info));
  if (info.driver != CGRT_DRIVER_CUDA && !smoke) {
    fprintf(stderr, "mla_decode_bench needs a GPU (driver is %s)\n", cgrt_driver_kind_name(info.driver));
    return 2;
  }
  // --stamps: the stamp buffer of a diagnostic build's t64 module.
  CUdeviceptr stamps_ptr = 0;
  size_t stamps_bytes = 0;
  if (!stamps_path.empty() &&
      cgrt__runtime_global(rt, "cgrt_mla_t64_stamps", &stamps_ptr, &stamps_bytes) != CGRT_SUCCESS) {
    fprintf(stderr, "--stamps: %s; the stamps need a build with --define=cgrt_mla_stamps=1, run on a GPU\n",
            cgrt_last_error());
    return 2;
  }
  if (stamps_ptr && stamps_bytes != (size_t)CGRT_MLA_STAMP_CTAS * CGRT_MLA_STAMP_SLOTS * 8) {
    fprintf(stderr, "--stamps: cgrt_mla_t64_stamps holds %zu bytes, not the %d x %d values of kernels/mla/common.h\n",
            stamps_bytes, CGRT_MLA_STAMP_CTAS, CGRT_MLA_STAMP_SLOTS);
    return 2;
  }
  std::string sj;  // --stamps: one entry per shape
  const cgrt__driver *d = rt->drv;
  CUstream st;
  CU(d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1;
  CU(d->cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU(d->cuEventCreate(&e1, CU_EVENT_DEFAULT));

  // Device-to-device copy bandwidth (bytes read + written), same run.
  double copy_tbps;
  {
    const size_t n = smoke ? 16ull << 20 : 2ull << 30;
    CUdeviceptr a, b;
    CU(d->cuMemAlloc(&a, n));
    CU(d->cuMemAlloc(&b, n));
    CU(d->cuMemsetD32(a, 0x3f803f80u, n / 4));
    std::vector<float> ts;
    for (int i = 0; i < 13; i++) {
      CU(d->cuEventRecord(e0, st));
      CU(d->cuMemcpyDtoDAsync(b, a, n, st));
      CU(d->cuEventRecord(e1, st));
      CU(d->cuEventSynchronize(e1));
      float ms;
      CU(d->cuEventElapsedTime(&ms, e0, e1));
      if (i >= 3) ts.push_back(ms);
    }
    copy_tbps = 2.0 * n / (median(ts) * 1e-3) / 1e12;
    d->cuMemFree(a);
    d->cuMemFree(b);
  }

  // {batch (requests), heads, context, block_len, causal}
  std::vector<std::array<int, 5>> shapes = {
      {1, 16, 8192, 1, 0},    {4, 16, 8192, 1, 0},     {32, 16, 8192, 1, 0},  {64, 16, 8192, 1, 0},
      {128, 16, 8192, 1, 0},  {64, 16, 32768, 1, 0},   {64, 32, 16384, 1, 0}, {32, 128, 8192, 1, 0},
      {128, 128, 4096, 1, 0}, {128, 16, 32768, 1, 0},  {32, 16, 8192, 2, 0},  {32, 16, 8192, 2, 1},
      {32, 16, 8192, 4, 0},   {32, 16, 8192, 4, 1},    {32, 16, 8192, 8, 0},  {32, 16, 8192, 8, 1}};
  if (smoke) shapes = {{1, 16, 256, 1, 0}, {32, 16, 128, 1, 0}, {2, 128, 128, 1, 0}, {3, 16, 128, 4, 1}};
  if (!only.empty()) shapes = only;
  const double pool_target = smoke ? 1e6 : 400e6;
  const int ps = 64;
  const size_t page_bytes = (size_t)ps * 576 * 2;
  // One KV pool of random bf16 for every shape; small shapes rotate over several copies
  // (>= 400 MB in all) so that repeated runs do not read from the 60 MB L2.
  size_t pool_pages = 0;
  for (auto &s : shapes) {
    const size_t pages = (size_t)s[0] * (s[2] / ps);
    const size_t copies = std::max<size_t>(1, (size_t)std::ceil(pool_target / (pages * page_bytes)));
    pool_pages = std::max(pool_pages, pages * copies);
  }
  CUdeviceptr kv;
  CU(d->cuMemAlloc(&kv, pool_pages * page_bytes));
  {
    std::vector<uint16_t> chunk(64u << 20);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    const size_t total = pool_pages * page_bytes / 2;
    for (size_t off = 0; off < total; off += chunk.size()) {
      const size_t n = std::min(chunk.size(), total - off);
      for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        const float f = ((x >> 40) / 16777216.0f) * 2.f - 1.f;
        uint32_t u;
        memcpy(&u, &f, 4);
        chunk[i] = (uint16_t)((u >> 16) & 0xffbfu);  // no 0x7f / 0xff byte: no e4m3 NaN for --fp8
      }
      CU(d->cuMemcpyHtoD(kv + off * 2, chunk.data(), n * 2));
    }
  }

  std::string js = "{\n  \"benchmark\": \"mla_decode\",\n  \"meta\": " + cgrt_bench::meta_json(info, cmd) +
                   ",\n  \"sm_count\": " + std::to_string(info.sm_count) + ",\n  \"page_size\": 64,\n  \"copy_tbps\": " +
                   std::to_string(copy_tbps) + ",\n  \"results\": [\n";
  printf("d2d copy %.3f TB/s on %s (%d SMs)\n", copy_tbps, info.device_name, info.sm_count);
  bool first = true;
  std::string jab;  // --ab: interleaved variant medians
  int lane = 0;
  for (auto &s : shapes) {
    const int batch = s[0], heads = s[1], ctx = s[2], blk = s[3], causal = s[4];
    const int rows = batch * blk;
    const int mbps = ctx / ps;
    const size_t pages = (size_t)batch * mbps;
    const int copies = (int)std::max<size_t>(1, (size_t)std::ceil(pool_target / (pages * page_bytes)));
    std::vector<int> bt(pages * copies);
    for (size_t i = 0; i < bt.size(); i++) bt[i] = (int)i;
    CUdeviceptr q, btd, lens, out, lse, btx = 0, lensx = 0;
    CU(d->cuMemAlloc(&q, (size_t)rows * heads * 576 * 2));
    CU(d->cuMemsetD32(q, 0x3c003c00u, (size_t)rows * heads * 576 / 2));  // 0.0078 pairs
    CU(d->cuMemAlloc(&btd, bt.size() * 4));
    CU(d->cuMemcpyHtoD(btd, bt.data(), bt.size() * 4));
    std::vector<int> lv(batch, ctx);
    CU(d->cuMemAlloc(&lens, batch * 4));
    CU(d->cuMemcpyHtoD(lens, lv.data(), batch * 4));
    // The rows apart ("rows" A/B variant): row r * blk + i as its own request, with
    // request r's block-table row and its own (causal) length.
    std::vector<int> lx(rows);
    for (int r = 0; r < rows; r++) lx[r] = causal ? ctx - (blk - 1 - r % blk) : ctx;
    if (blk > 1) {
      std::vector<int> bx((size_t)rows * mbps * copies);
      for (int c = 0; c < copies; c++)
        for (int r = 0; r < rows; r++)
          memcpy(&bx[((size_t)c * rows + r) * mbps], &bt[((size_t)c * batch + r / blk) * mbps], mbps * 4);
      CU(d->cuMemAlloc(&btx, bx.size() * 4));
      CU(d->cuMemcpyHtoD(btx, bx.data(), bx.size() * 4));
      CU(d->cuMemAlloc(&lensx, rows * 4));
      CU(d->cuMemcpyHtoD(lensx, lx.data(), rows * 4));
    }
    long long row_tokens = 0;  // tokens summed over the rows (FLOPs)
    for (int r = 0; r < rows; r++) row_tokens += lx[r];
    CU(d->cuCtxSynchronize());  // the inputs have landed before any launch
    CU(d->cuMemAlloc(&out, std::max<size_t>((size_t)rows * heads * 512 * 2, 1u << 20)));
    CU(d->cuMemAlloc(&lse, (size_t)rows * heads * 4));
    // Helpers of this shape: the arguments of a call on KV copy c (copies wrap only where
    // one copy alone is past the L2 size), a plan of a combine strategy and
    // programmatic_launch value, a graph of n calls on consecutive copies, and the median
    // of timed launches.
    // apart: the rows apart (see "rows" above).
    auto args_for = [&](size_t c, bool apart = false) {
      cgrt_mla_args a;
      memset(&a, 0, sizeof a);
      a.size = sizeof a;
      a.q = q;
      a.kv_cache = kv;
      a.block_table = apart ? btx + (c % copies) * rows * mbps * 4 : btd + (c % copies) * pages * 4;
      a.seq_lens = apart ? lensx : lens;
      a.out = out;
      a.lse = lse;
      a.num_rows = rows;
      a.softmax_scale = 0.0721f;
      return a;
    };
    auto new_plan = [&](cgrt_mla_combine cb, int pl, cgrt_mla_plan_info *pi, bool apart = false, int cz = -1,
                        bool e4m3 = false) {
      cgrt_mla_options o;
      cgrt_mla_options_init(&o);
      o.max_num_seqs = apart ? rows : batch;
      o.block_len = apart ? 1 : blk;
      o.causal = apart ? 0 : cz >= 0 ? cz : causal;
      o.heads = heads;
      o.page_size = ps;
      o.max_model_len = ctx;
      o.combine = cb;
      o.programmatic_launch = pl;
      o.lane = lane++ % CGRT_MAX_LANES;
      if (e4m3) o.kv_dtype = CGRT_MLA_KV_FP8_E4M3;
      cgrt_mla_plan *plan;
      OK(cgrt_mla_plan_create(rt, &o, &plan));
      if (pi) {
        pi->size = sizeof *pi;
        OK(cgrt_mla_plan_get_info(plan, pi));
      }
      return plan;
    };
    auto capture = [&](cgrt_mla_plan *plan, size_t first, int n, bool apart = false) {
      CUgraph g;
      CUgraphExec x;
      CU(d->cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      for (int l = 0; l < n; l++) {
        const cgrt_mla_args a = args_for(first + l, apart);
        OK(cgrt_mla_decode(plan, st, &a));
      }
      CU(d->cuStreamEndCapture(st, &g));
      CU(d->cuGraphInstantiateWithFlags(&x, g, 0));
      d->cuGraphDestroy(g);
      return x;
    };
    // 2 untimed and n event-timed launches, of graphs[(start + i) % size] in turn (so that
    // consecutive launches read different KV copies); each time / per into t.
    auto time_graphs = [&](const std::vector<CUgraphExec> &graphs, size_t start, int n, int per,
                           std::vector<float> *t) {
      for (int i = 0; i < 2; i++) CU(d->cuGraphLaunch(graphs[(start + i) % graphs.size()], st));
      for (int i = 2; i < n + 2; i++) {
        CU(d->cuEventRecord(e0, st));
        CU(d->cuGraphLaunch(graphs[(start + i) % graphs.size()], st));
        CU(d->cuEventRecord(e1, st));
        CU(d->cuEventSynchronize(e1));
        float ms;
        CU(d->cuEventElapsedTime(&ms, e0, e1));
        t->push_back(ms * 1e3f / per);
      }
    };
    // One measurement: eager calls, one call per graph, and (--layers L) L calls per graph.
    double us_bf16_auto = 0;  // the AUTO row's graph time (the --fp8 speedup's base)
    auto measure = [&](cgrt_mla_combine cb, const char *variant, bool e4m3 = false) {
      cgrt_mla_plan_info pi{};
      cgrt_mla_plan *plan = new_plan(cb, 0, &pi, false, -1, e4m3);
      for (int i = 0; i < 3; i++) {
        const cgrt_mla_args a = args_for(i);
        OK(cgrt_mla_decode(plan, st, &a));
      }
      CU(d->cuStreamSynchronize(st));
      std::vector<float> te, tg, tl;
      for (int i = 0; i < reps; i++) {
        const cgrt_mla_args a = args_for(i);
        CU(d->cuEventRecord(e0, st));
        OK(cgrt_mla_decode(plan, st, &a));
        CU(d->cuEventRecord(e1, st));
        CU(d->cuEventSynchronize(e1));
        float ms;
        CU(d->cuEventElapsedTime(&ms, e0, e1));
        te.push_back(ms * 1e3f);
      }
      std::vector<CUgraphExec> ex(copies);
      for (int c = 0; c < copies; c++) ex[c] = capture(plan, c, 1);
      time_graphs(ex, 0, reps, 1, &tg);
      for (auto e : ex) d->cuGraphExecDestroy(e);
      double us_l = 0;
      if (layers > 0) {
        std::vector<CUgraphExec> lx(std::max(1, copies / layers));
        for (size_t gi = 0; gi < lx.size(); gi++) lx[gi] = capture(plan, gi * layers, layers);
        time_graphs(lx, 0, std::max(8, reps / 2), layers, &tl);
        us_l = median(tl);
        if (stamps_ptr && !e4m3 && cb == CGRT_MLA_COMBINE_AUTO) {
          // One more replay; the rows its last call's CTAs stamped, times in ns from the
          // earliest entry (slots: kernels/mla/stamps.cuh).
          CU(d->cuMemsetD8(stamps_ptr, 0, stamps_bytes));
          CU(d->cuCtxSynchronize());
          CU(d->cuGraphLaunch(lx[0], st));
          CU(d->cuStreamSynchronize(st));
          std::vector<unsigned long long> h(stamps_bytes / 8);
          CU(d->cuMemcpyDtoH(h.data(), stamps_ptr, h.size() * 8));
          const int slots = CGRT_MLA_STAMP_SLOTS, nct = (int)(h.size() / slots);
          unsigned long long t0 = ~0ull;
          for (int c = 0; c < nct; c++)
            if (h[(size_t)c * slots]) t0 = std::min(t0, h[(size_t)c * slots]);
          std::string cj;
          auto rel = [&](unsigned long long v) { return v ? (long long)(v - t0) : -1ll; };
          for (int c = 0; c < nct; c++) {
            const unsigned long long *w = &h[(size_t)c * slots];
            if (!w[0]) continue;
            char b[256];
            snprintf(b, sizeof b, "%s\n        {\"cta\": %d, \"entry\": %lld, \"wait\": %lld, \"exit\": %lld, \"segments\": [",
                     cj.empty() ? "" : ",", c, rel(w[0]), rel(w[1]), rel(w[2]));
            cj += b;
            const int ns = (int)std::min<unsigned long long>(w[3], CGRT_MLA_STAMP_SEGS);
            for (int g = 0; g < ns; g++) {
              const unsigned long long *x = w + 4 + 5 * g;
              snprintf(b, sizeof b, "%s[%lld, %lld, %lld, %lld, %u, %u]", g ? ", " : "", rel(x[0]), rel(x[1]),
                       rel(x[2]), rel(x[3]), (unsigned)(x[4] >> 32), (unsigned)(x[4] & 0xffffffffu));
              cj += b;
            }
            snprintf(b, sizeof b, "], \"segments_run\": %llu}", w[3]);
            cj += b;
          }
          char b[512];
          snprintf(b, sizeof b,
                   "%s    {\"batch\": %d, \"heads\": %d, \"context\": %d, \"block_len\": %d, \"causal\": %d, "
                   "\"split_kernel\": \"%s\", \"calls_per_graph\": %d, \"stamped_us_in_graph\": %.3f, \"ctas\": [",
                   sj.empty() ? "" : ",\n", batch, heads, ctx, blk, causal, pi.split_kernel, layers, us_l);
          sj += b + cj + "\n    ]}";
        }
        for (auto e : lx) d->cuGraphExecDestroy(e);
      }
      OK(cgrt_counters_verify(rt));
      const double us_e = median(te), us_g = median(tg);
      const double kv_bytes = (double)batch * ctx * 576 * (e4m3 ? 1 : 2);
      const double tbps = kv_bytes / (us_g * 1e-6) / 1e12;
      if (!e4m3 && cb == CGRT_MLA_COMBINE_AUTO) us_bf16_auto = us_g;
      if (e4m3) printf("fp8      batch %3d heads %3d ctx %5d: %.2fx faster than bf16 (auto, graph)\n", batch, heads, ctx,
                       us_bf16_auto / us_g);
      const double tflops = 2.0 * heads * (double)row_tokens * (576 + 512) / (us_g * 1e-6) / 1e12;
      // The same per call in a graph of `layers` calls (no launch latency); 0 without --layers.
      const double tbps_l = us_l > 0 ? kv_bytes / (us_l * 1e-6) / 1e12 : 0;
      const double tflops_l = us_l > 0 ? tflops * us_g / us_l : 0;
      // AUTO (the default): which strategy this step count takes (one-row steps: workspace).
      const bool auto_cnt = pi.counters_min_rows > 0 && rows >= pi.counters_min_rows && rows > 1;
      const char *cname = cb == CGRT_MLA_COMBINE_COUNTERS ? "counters"
                          : cb == CGRT_MLA_COMBINE_AUTO   ? (auto_cnt ? "auto:cnt" : "auto:ws")
                                                          : "workspace";
      printf("%-8s batch %3d heads %3d ctx %5d k %d%s %-9s graph %8.2f us eager %8.2f us in-graph(x%d) %8.2f us  "
             "%.3f TB/s (%3.0f%% of copy)  %6.1f TFLOP/s  per call in graph %.3f TB/s %6.1f TFLOP/s  splits %3d  "
             "workspace %.1f MiB (fixed split: %.1f MiB)\n",
             variant, batch, heads, ctx, blk, causal ? " causal" : "", cname, us_g, us_e, layers, us_l, tbps, 100 * tbps / copy_tbps, tflops, tbps_l,
             tflops_l, pi.splits, pi.workspace_bytes / 1048576.0, pi.fixed_split_bytes / 1048576.0);
      char b[768];
      snprintf(b, sizeof b,
               "%s    {\"variant\": \"%s\", \"batch\": %d, \"heads\": %d, \"context\": %d, \"block_len\": %d, "
               "\"causal\": %d, \"kv_shared\": %d, \"split_kernel\": \"%s\", \"combine\": \"%s\", "
               "\"us_graph\": %.3f, \"us_eager\": %.3f, \"us_in_graph\": %.3f, \"layers\": %d, "
               "\"kv_tbps\": %.4f, \"pct_of_copy\": %.1f, \"tflops\": %.2f, "
               "\"kv_tbps_in_graph\": %.4f, \"tflops_in_graph\": %.2f, "
               "\"splits\": %d, \"fast_path\": %d, \"workspace_bytes\": %zu, "
               "\"fixed_split_bytes\": %zu}",
               first ? "" : ",\n", variant, batch, heads, ctx, blk, causal, pi.kv_shared, pi.split_kernel, cname, us_g, us_e, us_l, layers, tbps, 100 * tbps / copy_tbps, tflops,
               tbps_l, tflops_l, pi.splits, pi.fast_path, pi.workspace_bytes, pi.fixed_split_bytes);
      js += b;
      first = false;
      cgrt_mla_plan_destroy(plan);
    };
    for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_AUTO, CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS})
      measure(cb, "default");
    if (fp8) measure(CGRT_MLA_COMBINE_AUTO, "fp8", true);
    if (ab) {
      // Interleaved A/B: every variant's plan and graphs first, then rounds that replay
      // each variant in turn, so that clock and power drift hit all of them alike.
      const auto W = CGRT_MLA_COMBINE_WORKSPACE, C = CGRT_MLA_COMBINE_COUNTERS;
      struct V {
        const char *name;
        cgrt_mla_combine cb;
        int pl;  // programmatic_launch
        bool apart;  // the rows apart (block shapes)
        int cz;      // causal for this variant (-1: the shape's)
        bool e4m3;   // an FP8 e4m3 cache
        cgrt_mla_plan *plan;
        std::vector<CUgraphExec> ex;
        std::vector<float> t;
      };
      const auto A = CGRT_MLA_COMBINE_AUTO;
      std::vector<V> vs;
      vs.push_back({"default", W, 0, false, -1, false, nullptr, {}, {}});
      vs.push_back({"counters", C, 0, false, -1, false, nullptr, {}, {}});
      if (fp8) vs.push_back({"fp8", W, 0, false, -1, true, nullptr, {}, {}});
      if (batch <= 64 && blk == 1) vs.push_back({"pdl", W, 1, false, -1, false, nullptr, {}, {}});
      if (blk == 1) {  // AUTO with programmatic_launch 1 and 2 (early reads of seq_lens and entries)
        vs.push_back({"pdl1", A, 1, false, -1, false, nullptr, {}, {}});
        vs.push_back({"pdl2", A, 2, false, -1, false, nullptr, {}, {}});
      }
      if (blk > 1) {
        vs.push_back({"auto", A, 0, false, -1, false, nullptr, {}, {}});
        vs.push_back({"rows", A, 0, true, -1, false, nullptr, {}, {}});
        if (causal) vs.push_back({"noncausal", A, 0, false, 0, false, nullptr, {}, {}});
      }
      if (!keep.empty())
        vs.erase(std::remove_if(vs.begin() + 1, vs.end(),
                                [&](const V &v) { return keep.find("," + std::string(v.name) + ",") == std::string::npos; }),
                 vs.end());
      for (V &v : vs) v.plan = new_plan(v.cb, v.pl, nullptr, v.apart, v.cz, v.e4m3);
      // Graphs only once every plan exists: variants share the 8 workspace lanes and
      // may differ in split count, so a later plan could still grow (and move) a lane's
      // workspace that an earlier variant's graphs already point to.
      // With --layers L, each graph holds L calls on consecutive KV copies and a
      // variant's time is per call (no launch latency); else one call per graph.
      const int per = layers > 0 ? layers : 1;
      for (V &v : vs) {
        v.ex.resize(std::max(1, copies / per));
        for (size_t gi = 0; gi < v.ex.size(); gi++) {
          const cgrt_mla_args a = args_for(gi * per, v.apart);
          OK(cgrt_mla_decode(v.plan, st, &a));
          v.ex[gi] = capture(v.plan, gi * per, per, v.apart);
        }
      }
      size_t k = 0;
      for (int round = 0; round < 8; round++)
        for (V &v : vs) {
          time_graphs(v.ex, k, 8, per, &v.t);
          k += 10;
        }
      OK(cgrt_counters_verify(rt));
      const double base = median(vs[0].t);
      for (V &v : vs) {
        const double us = median(v.t);
        const double tbps = (double)batch * ctx * 576 * (v.e4m3 ? 1 : 2) / (us * 1e-6) / 1e12;
        printf("A/B batch %3d heads %3d ctx %5d k %d%s %-9s %8.2f us%s  %.3f TB/s  %+.1f%% vs default\n", batch,
               heads, ctx, blk, causal ? " causal" : "", v.name, us, per > 1 ? " per call in graph" : "", tbps,
               100.0 * (us - base) / base);
        char b[512];
        snprintf(b, sizeof b,
                 "%s    {\"batch\": %d, \"heads\": %d, \"context\": %d, \"block_len\": %d, \"causal\": %d, "
                 "\"variant\": \"%s\", \"programmatic_launch\": %d, "
                 "\"combine\": \"%s\", \"calls_per_graph\": %d, \"us_per_call_median\": %.3f, \"kv_tbps\": %.4f}",
                 jab.empty() ? "" : ",\n", batch, heads, ctx, blk, v.cz >= 0 ? v.cz : causal, v.name, v.pl,
                 v.cb == C ? "counters" : v.cb == A ? "auto" : "workspace", per, us, tbps);
        jab += b;
        for (auto e : v.ex) d->cuGraphExecDestroy(e);
        cgrt_mla_plan_destroy(v.plan);
      }
    }
    d->cuMemFree(q); d->cuMemFree(btd); d->cuMemFree(lens); d->cuMemFree(out); d->cuMemFree(lse);
    if (btx) d->cuMemFree(btx);
    if (lensx) d->cuMemFree(lensx);
  }
  js += "\n  ]";
  if (!jab.empty()) js += ",\n  \"ab_interleaved\": [\n" + jab + "\n  ]";
  js += "\n}\n";
  printf("%s", js.c_str());
  if (FILE *f = fopen(out_path.c_str(), "w")) {
    fputs(js.c_str(), f);
    fclose(f);
  } else {
    fprintf(stderr, "cannot write %s\n", out_path.c_str());
  }
  if (!stamps_path.empty()) {
    const std::string sd = "{\n  \"benchmark\": \"mla_decode_stamps\",\n  \"meta\": " + cgrt_bench::meta_json(info, cmd) +
                           ",\n  \"slots\": \"ns from the earliest entry of the stamped call (-1: not stamped); "
                           "segments: [start, first tile landed, last products done, finish done, row, tiles] "
                           "(kernels/mla/stamps.cuh)\",\n  \"shapes\": [\n" + sj + "\n  ]\n}\n";
    if (FILE *f = fopen(stamps_path.c_str(), "w")) {
      fputs(sd.c_str(), f);
      fclose(f);
    } else {
      fprintf(stderr, "cannot write %s\n", stamps_path.c_str());
    }
  }
  cgrt_runtime_destroy(rt);
  return 0;
}
