// Shared fixture of the MLA decode tests (the test files of tests/mla/): cases run
// through the public API (include/cgrt/cgrt_mla.h) against an independent fp32 host
// reference, and the kernels each step launched.
#ifndef CGRT_TESTS_MLA_MLA_HARNESS_H
#define CGRT_TESTS_MLA_MLA_HARNESS_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_mla.h"
#include "kernels/mla/kernel_table.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace mla_test {

constexpr int D = 576, DV = 512;

uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float bf2f(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// An e4m3 byte's value (OCP e4m3fn: bias 7, subnormals, 0x7f / 0xff NaN), written
// apart from kernels/mla/ref.c.
float e4m3f(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float v = e == 15 && m == 7 ? NAN : e == 0 ? m / 512.f : std::ldexp(1.f + m / 8.f, e - 7);
  return b & 0x80 ? -v : v;
}

struct Case {
  int reqs = 4, block_len = 1, heads = 16, dcp = 1, page_size = 64;
  std::vector<int> lens;  // per request
  cgrt_mla_combine combine = CGRT_MLA_COMBINE_WORKSPACE;
  long long page_base = 0;  // first KV page used (64-bit addressing test)
  int launches = 2;         // launches per check (counters must come back to 0)
  int programmatic_launch = 0;  // cgrt_mla_options.programmatic_launch
  int causal = 0;               // cgrt_mla_options.causal (verify rows)
  int num_rows = 0;             // rows of the step (0: reqs x block_len, every request)
  int fp8 = 0;                  // 1: cgrt_mla_options.kv_dtype CGRT_MLA_KV_FP8_E4M3
  float kv_scale = 1.f;         // its cgrt_mla_options.kv_scale
  int v_head_dim = 0;           // cgrt_mla_options.v_head_dim (> 0: the projected output)
  int nan_past = 0;             // 1: every cached value of a request past its length is NaN
                                // (e4m3 0x7f, bf16 0x7fc1): no kernel may read those bits
};

// The rows of kernels/mla/kernel_table.h.
const cgrt__mla_kernel kTable[] = {CGRT__MLA_KERNELS(CGRT__MLA_KERNEL_ROW)};

// The split kernels of 33..64 query rows per CTA (kernels/mla/kernel_table.h, g_max): the
// token-major t64_n64 ones where one CTA holds all of a request's query rows (one head
// group), the warp-specialised m64_ws ones where a request's rows span two or more groups
// (128 heads, 16 heads x k 8).
const char *const kSplit64 = "cgrt_mla_split_t64_n64";
const char *const kSplit64Causal = "cgrt_mla_split_t64_n64_causal";
const char *const kSplitWs = "cgrt_mla_split_m64_ws";
const char *const kSplitWsCausal = "cgrt_mla_split_m64_ws_causal";
inline const char *split64_for(int groups, bool causal) {
  return groups > 1 ? (causal ? kSplitWsCausal : kSplitWs) : (causal ? kSplit64Causal : kSplit64);
}
// The FP8 split kernels: 16 query rows per CTA at most, and 17..64 in any number of head
// groups (causal: a block's causal rows run together).
const char *const kSplitFp8 = "cgrt_mla_split_t64_fp8";
const char *const kSplitFp8N64 = "cgrt_mla_split_t64_n64_fp8";
const char *const kSplitFp8N64Causal = "cgrt_mla_split_t64_n64_fp8_causal";
inline const char *fp8_split_for(int heads_per_cta, bool causal_block) {
  return heads_per_cta <= 16 ? kSplitFp8 : causal_block ? kSplitFp8N64Causal : kSplitFp8N64;
}

// The fixture of the MLA tests: a runtime (the emulation in CI, the GPU with
// CGRT_DRIVER=cuda), device allocations freed at the end, and check(), which runs one
// case through the public API, compares it with an fp32 host reference and records the
// kernels the step launches (launched_).
const cgrt_mla_combine kBoth[] = {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS};

class Harness : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = cgrt_test::make_runtime();
    ASSERT_NE(rt_, nullptr);
    emulated_ = cgrt_test::is_emulated(rt_);
  }
  void TearDown() override {
    if (rt_) {
      for (CUdeviceptr p : allocs_) rt_->drv->cuMemFree(p);
      cgrt_runtime_destroy(rt_);
    }
    allocs_.clear();
    rt_ = nullptr;
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(rt_->drv->cuMemAlloc(&p, bytes), CUDA_SUCCESS) << bytes << " bytes";
    allocs_.push_back(p);
    return p;
  }
  // Landed on return: cuMemcpyHtoD from pageable memory returns once the data is staged,
  // ordered on the legacy stream only, and the kernels may run on a non-blocking stream.
  void upload(CUdeviceptr dst, const void *src, size_t bytes) {
    ASSERT_EQ(rt_->drv->cuMemcpyHtoD(dst, src, bytes), CUDA_SUCCESS);
    ASSERT_EQ(rt_->drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  void download(void *dst, CUdeviceptr src, size_t bytes) {
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(dst, src, bytes), CUDA_SUCCESS);
  }

  // A plan of the default options for heads x max_num_seqs rows of up to 4096 tokens
  // with this combine, and its info; nullptr (and a test failure) if creation failed.
  cgrt_mla_plan *plan_with_info(int heads, int max_num_seqs, cgrt_mla_combine combine, cgrt_mla_plan_info *info) {
    cgrt_mla_options o;
    cgrt_mla_options_init(&o);
    o.max_num_seqs = max_num_seqs;
    o.heads = heads;
    o.max_model_len = 4096;
    o.combine = combine;
    cgrt_mla_plan *p = nullptr;
    EXPECT_EQ(cgrt_mla_plan_create(rt_, &o, &p), CGRT_SUCCESS) << cgrt_last_error();
    if (!p) return nullptr;
    *info = cgrt_mla_plan_info{};
    info->size = sizeof *info;
    EXPECT_EQ(cgrt_mla_plan_get_info(p, info), CGRT_SUCCESS) << cgrt_last_error();
    return p;
  }

  // The kernels (table names) that one step of plan with args a enqueues: the step is
  // captured into a graph (not launched) and its kernel nodes looked up in the table; a
  // kernel outside the table fails the test.
  std::vector<std::string> step_kernels(cgrt_mla_plan *plan, const cgrt_mla_args &a) {
    const cgrt__driver *d = rt_->drv;
    std::vector<std::string> names;
    CUstream s = nullptr;
    EXPECT_EQ(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT_EQ(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    const cgrt_status st = cgrt_mla_decode(plan, s, &a);
    CUgraph g = nullptr;
    EXPECT_EQ(d->cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    EXPECT_EQ(st, CGRT_SUCCESS) << cgrt_last_error();
    size_t n = 0;
    if (g) {
      EXPECT_EQ(d->cuGraphGetNodes(g, nullptr, &n), CUDA_SUCCESS);
    }
    std::vector<CUgraphNode> nodes(n);
    if (n) {
      EXPECT_EQ(d->cuGraphGetNodes(g, nodes.data(), &n), CUDA_SUCCESS);
    }
    for (CUgraphNode node : nodes) {
      CUgraphNodeType type;
      EXPECT_EQ(d->cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
      if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
      CUDA_KERNEL_NODE_PARAMS kp;
      memset(&kp, 0, sizeof kp);
      EXPECT_EQ(d->cuGraphKernelNodeGetParams(node, &kp), CUDA_SUCCESS);
      std::string name;
      for (const cgrt__mla_kernel &k : kTable) {
        CUfunction f = nullptr;
        if (cgrt__runtime_function(rt_, k.name, &f) == CGRT_SUCCESS && f == kp.func) name = k.name;
      }
      EXPECT_NE(name, "") << "a step launched a kernel that kernels/mla/kernel_table.h does not list";
      names.push_back(name);
    }
    if (g) d->cuGraphDestroy(g);
    d->cuStreamDestroy(s);
    return names;
  }

  // Seed of a case's random inputs (a fixture may pick its own test vectors).
  virtual unsigned case_seed(const Case &c) const { return 12345u + c.heads * 7 + c.page_size + (int)c.combine; }
  // Called with each plan before its launches (e.g. to check which kernel it chose).
  virtual void check_plan(cgrt_mla_plan *) {}

  // Runs one case end to end and checks it against the host reference.
  void check(const Case &c, const std::string &what) {
    SCOPED_TRACE(what);
    std::mt19937 rng(case_seed(c));
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    const int max_rows = c.reqs * c.block_len, qh = c.heads * c.dcp;
    const int rows = c.num_rows > 0 ? c.num_rows : max_rows;
    int maxlen = 1;
    for (int l : c.lens) maxlen = std::max(maxlen, l);
    const int mbps = (maxlen + c.page_size - 1) / c.page_size;

    cgrt_mla_options o;
    cgrt_mla_options_init(&o);
    o.max_num_seqs = c.reqs;
    o.block_len = c.block_len;
    o.heads = c.heads;
    o.dcp_world_size = c.dcp;
    o.page_size = c.page_size;
    o.max_model_len = maxlen;
    o.max_blocks_per_seq = mbps;
    o.combine = c.combine;
    o.programmatic_launch = c.programmatic_launch;
    o.causal = c.causal;
    o.kv_dtype = c.fp8 ? CGRT_MLA_KV_FP8_E4M3 : CGRT_MLA_KV_BF16;
    o.kv_scale = c.kv_scale;
    o.v_head_dim = c.v_head_dim;
    cgrt_mla_plan *plan = nullptr;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &plan));
    check_plan(plan);

    // Inputs: random bf16 Q and used KV pages; block table = shuffled pages.
    const long long used = (long long)c.reqs * mbps;
    // FP8: random e4m3 bytes of exponents 0..7 (|value| < 2, zeros and subnormals
    // included); the reference reads the dequantized values (e4m3 x kv_scale).
    std::vector<uint16_t> q((size_t)max_rows * qh * D), kv(c.fp8 ? 0 : (size_t)used * c.page_size * D);
    std::vector<uint8_t> kv8(c.fp8 ? (size_t)used * c.page_size * D : 0);
    for (auto &x : q) x = f2bf(uni(rng));
    for (auto &x : kv) x = f2bf(uni(rng));
    for (auto &x : kv8) x = (uint8_t)((rng() & 0x80u) | (rng() % 64u));
    // The dequantized values through a table of the 256 bytes (e4m3f per value made the
    // reference of the long GPU cases take minutes).
    float lut[256];
    for (int b = 0; b < 256; b++) lut[b] = e4m3f((uint8_t)b) * c.kv_scale;
    auto kval = [&](size_t i) { return c.fp8 ? lut[kv8[i]] : bf2f(kv[i]); };
    std::vector<int> bt(used);
    for (long long i = 0; i < used; i++) bt[i] = (int)(c.page_base + i);
    std::shuffle(bt.begin(), bt.end(), rng);
    if (c.nan_past)
      for (int i = 0; i < c.reqs; i++)
        for (int t = std::max(0, c.lens[i]); t < mbps * c.page_size; t++) {
          const size_t k = ((size_t)(bt[(size_t)i * mbps + t / c.page_size] - c.page_base) * c.page_size +
                            t % c.page_size) * D;
          for (int d = 0; d < D; d++) {
            if (c.fp8) kv8[k + d] = 0x7f;
            else kv[k + d] = 0x7fc1;
          }
        }
    const size_t page_bytes = (size_t)c.page_size * D * (c.fp8 ? 1 : 2);
    CUdeviceptr d_kv = alloc((size_t)(c.page_base + used) * page_bytes);
    CUdeviceptr d_q = alloc(q.size() * 2), d_bt = alloc(bt.size() * 4), d_len = alloc(c.reqs * 4);
    // The output: the latent O, or with v_head_dim its projection by w_uv (random,
    // scaled so that the projected values stay near 1).
    const int ow = c.v_head_dim > 0 ? c.v_head_dim : DV;
    CUdeviceptr d_out = alloc((size_t)rows * qh * ow * 2), d_lse = alloc((size_t)rows * qh * 4);
    std::vector<uint16_t> wuv(c.v_head_dim > 0 ? (size_t)qh * DV * ow : 0);
    for (auto &x : wuv) x = f2bf(uni(rng) * 0.1f);
    CUdeviceptr d_w = 0;
    if (!wuv.empty()) {
      d_w = alloc(wuv.size() * 2);
      upload(d_w, wuv.data(), wuv.size() * 2);
    }
    if (c.fp8)
      upload(d_kv + (size_t)c.page_base * page_bytes, kv8.data(), kv8.size());
    else
      upload(d_kv + (size_t)c.page_base * page_bytes, kv.data(), kv.size() * 2);
    upload(d_q, q.data(), q.size() * 2);
    upload(d_bt, bt.data(), bt.size() * 4);
    upload(d_len, c.lens.data(), c.reqs * 4);
    std::vector<uint16_t> poison((size_t)rows * qh * ow, 0x7fc1);  // NaN
    upload(d_out, poison.data(), poison.size() * 2);
    std::vector<float> lpoison((size_t)rows * qh, NAN);
    upload(d_lse, lpoison.data(), lpoison.size() * 4);

    cgrt_mla_args a{};
    a.size = sizeof a;
    a.q = d_q;
    a.kv_cache = d_kv;
    a.block_table = d_bt;
    a.seq_lens = d_len;
    a.out = d_out;
    a.lse = d_lse;
    a.num_rows = rows;
    a.softmax_scale = 1.f / std::sqrt(192.f);
    a.w_uv = d_w;
    // Every launch of the same step gives the same bits: no result may depend on which
    // CTA of a row finishes last (the counters merge) or on launch order.
    std::vector<uint16_t> out((size_t)rows * qh * ow), out_i(out.size());
    std::vector<float> lse((size_t)rows * qh), lse_i(lse.size());
    for (int i = 0; i < c.launches; i++) {
      CGRT_ASSERT_OK(cgrt_mla_decode(plan, nullptr, &a));
      CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt_));
      CGRT_ASSERT_OK(cgrt_counters_verify(rt_));
      download(i ? out_i.data() : out.data(), d_out, out.size() * 2);
      download(i ? lse_i.data() : lse.data(), d_lse, lse.size() * 4);
      if (i) {
        ASSERT_EQ(memcmp(out.data(), out_i.data(), out.size() * 2), 0) << "launch " << i << " changed the output";
        ASSERT_EQ(memcmp(lse.data(), lse_i.data(), lse.size() * 4), 0) << "launch " << i << " changed the LSE";
      }
    }
    for (const std::string &k : step_kernels(plan, a)) launched_.insert(k);  // after the warm-up
    last_out_ = out;
    last_lse_ = lse;

    // Host fp32 reference, full context per row (causal: row j of a block of k sees
    // k - 1 - j tokens fewer, at least 0). Each (row, head) is computed alone, in the
    // same order of operations whatever thread takes it (threads over the pairs: the
    // large GPU cases took 17-20 s each in one thread); the checks below run in order.
    auto row_len = [&](int r) {
      const int shorter = c.causal ? c.block_len - 1 - r % c.block_len : 0;
      return std::max(0, c.lens[r / c.block_len] - shorter);
    };
    const size_t pairs = (size_t)rows * qh;
    std::vector<float> ref_out(pairs * ow);
    std::vector<double> ref_lse(pairs);
    auto reference = [&](size_t first, size_t step) {
      std::vector<float> sc, acc(DV), qf(D), lat(DV);
      for (size_t pi = first; pi < pairs; pi += step) {
        const int r = (int)(pi / qh), h = (int)(pi % qh), len = row_len(r);
        if (len == 0) continue;
        const int *btr = bt.data() + (size_t)(r / c.block_len) * mbps;
        for (int i = 0; i < D; i++) qf[i] = bf2f(q[((size_t)r * qh + h) * D + i]);
        sc.resize(len);
        float mx = -INFINITY;
        for (int t = 0; t < len; t++) {
          const size_t k = ((size_t)(btr[t / c.page_size] - c.page_base) * c.page_size + t % c.page_size) * D;
          float s = 0;
          for (int i = 0; i < D; i++) s += qf[i] * kval(k + i);
          sc[t] = s * a.softmax_scale;
          mx = std::max(mx, sc[t]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int t = 0; t < len; t++) {
          const size_t k = ((size_t)(btr[t / c.page_size] - c.page_base) * c.page_size + t % c.page_size) * D;
          const float w = std::exp(sc[t] - mx);
          sum += w;
          for (int i = 0; i < DV; i++) acc[i] += w * kval(k + i);
        }
        // With v_head_dim: the latent rounded to bf16 (as the kernels hand it over), then
        // projected by w_uv[h] in double.
        for (int i = 0; i < DV; i++) lat[i] = c.v_head_dim > 0 ? bf2f(f2bf((float)(acc[i] / sum))) : (float)(acc[i] / sum);
        for (int i = 0; i < ow; i++) {
          double rd = 0;
          if (c.v_head_dim > 0) {
            for (int k = 0; k < DV; k++) rd += (double)lat[k] * bf2f(wuv[((size_t)h * DV + k) * ow + i]);
          } else {
            rd = lat[i];
          }
          ref_out[pi * ow + i] = (float)rd;
        }
        ref_lse[pi] = mx + std::log(sum);
      }
    };
    {
      const size_t nt = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), std::min<size_t>(pairs, 32));
      std::vector<std::thread> pool;
      for (size_t t = 1; t < nt; t++) pool.emplace_back(reference, t, nt);
      reference(0, nt);
      for (auto &th : pool) th.join();
    }
    double num = 0, den = 0, max_dlse = 0;
    for (int r = 0; r < rows; r++) {
      const int len = row_len(r);
      for (int h = 0; h < qh; h++) {
        const size_t pi = (size_t)r * qh + h, oi = pi * ow;
        if (len == 0) {
          for (int i = 0; i < ow; i++) ASSERT_EQ(out[oi + i], 0) << "padding row " << r;
          ASSERT_TRUE(std::isinf(lse[pi]) && lse[pi] < 0);
          continue;
        }
        for (int i = 0; i < ow; i++) {
          const float ref = ref_out[oi + i], got = bf2f(out[oi + i]);
          ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << h << " col " << i;
          num += (double)(got - ref) * (got - ref);
          den += (double)ref * ref;
        }
        max_dlse = std::max(max_dlse, std::fabs(lse[pi] - ref_lse[pi]));
      }
    }
    const double rel = den > 0 ? std::sqrt(num / den) : 0.0;
    EXPECT_LT(rel, 1e-2) << "relative L2 error of the output";
    EXPECT_LT(max_dlse, 1e-2) << "LSE error";
    cgrt_mla_plan_destroy(plan);
  }

  // Lengths around the 64-token tile and the 32-token range unit, one row per length and
  // all of them in one batch (ranges begin and end inside tiles and rows): base (its
  // heads, dtype, launches) with both strategies and the page sizes 16, 32 and 64.
  void check_tile_edges(Case base, const std::vector<int> &edges = {1, 31, 32, 33, 63, 64, 65, 127, 129, 193, 257,
                                                                     513}) {
    for (cgrt_mla_combine cb : kBoth)
      for (int ps : {16, 32, 64}) {
        Case c = base;
        c.reqs = (int)edges.size();
        c.page_size = ps;
        c.lens = edges;
        c.combine = cb;
        check(c, "edges, page size " + std::to_string(ps) + (cb ? " counters" : " workspace"));
      }
  }

  // Each head count of hs with both strategies: reqs rows (3 on the emulation) of mixed
  // lengths up to maxlen (200 on the emulation) with padding rows, the page sizes 16, 32
  // and 64 in turn.
  void check_head_counts(std::initializer_list<int> hs, unsigned seed, int reqs, int maxlen) {
    std::mt19937 rng(seed);
    const int pages[] = {16, 32, 64};
    int i = 0;
    for (int h : hs)
      for (cgrt_mla_combine cb : kBoth) {
        Case c;
        c.reqs = emulated_ ? 3 : reqs;
        c.heads = h;
        c.page_size = pages[i++ % 3];
        c.lens = mixed(c.reqs, emulated_ ? 200 : maxlen, rng, true);
        c.combine = cb;
        check(c, "heads " + std::to_string(h) + (cb ? " counters" : " workspace"));
      }
  }

  // A KV cache past 2^31 elements (a GPU with > 4 GiB; the caller skips on the
  // emulation): 4 rows of `heads` heads in pages from 60000 on, both strategies;
  // one_row_len > 0 adds a step of one row of that length.
  void check_kv_past_2to31(int heads, int one_row_len = 0, int fp8 = 0) {
    for (cgrt_mla_combine cb : kBoth) {
      Case c;
      c.reqs = 4;
      c.heads = heads;
      c.fp8 = fp8;
      c.kv_scale = fp8 ? 0.75f : 1.f;
      // FP8: one byte a value, so pages from 120000 on pass 2^31 bytes.
      c.page_base = fp8 ? 120000 : 60000;
      c.lens = {4000, 1, 0, 2500};  // bf16: 60000 * 64 * 576 elements > 2^31
      c.combine = cb;
      check(c, "64-bit offsets");
      if (one_row_len > 0) {
        c.reqs = 1;
        c.lens = {one_row_len};
        check(c, "64-bit offsets, one row");
      }
    }
  }

  std::vector<int> mixed(int n, int maxlen, std::mt19937 &rng, bool pads) {
    std::vector<int> v(n);
    for (int i = 0; i < n; i++) {
      const int k = (int)(rng() % 5);
      v[i] = k == 0 ? 1 + (int)(rng() % 40) : k == 1 ? maxlen : 1 + (int)(rng() % maxlen);
      if (pads && rng() % 4 == 0) v[i] = 0;
    }
    v[0] = maxlen;
    return v;
  }

  cgrt_runtime *rt_ = nullptr;
  bool emulated_ = false;
  std::vector<CUdeviceptr> allocs_;
  std::set<std::string> launched_;  // the kernels of the steps check() ran
  std::vector<uint16_t> last_out_;  // the output and LSE of the last case check() ran
  std::vector<float> last_lse_;
};

// A Harness for one split kernel: every plan of its cases must report split kernel
// expect_ (set by start()), or expect_multi_ where the plan runs two or more head groups
// per request and start() named one (the 64-row kernels: split64_for).
class SplitHarness : public Harness {
 protected:
  void start(const std::string &expect, const std::string &expect_multi = "") {
    expect_ = expect;
    expect_multi_ = expect_multi;
    Harness::SetUp();
  }
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    const bool multi = info.head_groups > 1 && !expect_multi_.empty();
    EXPECT_EQ(std::string(info.split_kernel), multi ? expect_multi_ : expect_) << info.head_groups << " head groups";
  }

  std::string expect_, expect_multi_;
};

}  // namespace mla_test

#endif
