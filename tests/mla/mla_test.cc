// MLA decode tests through the public API, against an independent fp32 host reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_mla.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace {

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

struct Case {
  int reqs = 4, block_len = 1, heads = 16, dcp = 1, page_size = 64;
  std::vector<int> lens;  // per request
  cgrt_mla_combine combine = CGRT_MLA_COMBINE_WORKSPACE;
  long long page_base = 0;  // first KV page used (64-bit addressing test)
  int launches = 2;         // launches per check (counters must come back to 0)
};

class Mla : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = cgrt_test::make_runtime();
    ASSERT_NE(rt_, nullptr);
    emulated_ = cgrt_test::is_emulated(rt_);
  }
  void TearDown() override {
    for (CUdeviceptr p : allocs_) rt_->drv->cuMemFree(p);
    if (rt_) cgrt_runtime_destroy(rt_);
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(rt_->drv->cuMemAlloc(&p, bytes), CUDA_SUCCESS) << bytes << " bytes";
    allocs_.push_back(p);
    return p;
  }
  void upload(CUdeviceptr dst, const void *src, size_t bytes) {
    ASSERT_EQ(rt_->drv->cuMemcpyHtoD(dst, src, bytes), CUDA_SUCCESS);
  }
  void download(void *dst, CUdeviceptr src, size_t bytes) {
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(dst, src, bytes), CUDA_SUCCESS);
  }

  // Runs one case end to end and checks it against the host reference.
  void check(const Case &c, const char *what) {
    SCOPED_TRACE(what);
    std::mt19937 rng(12345 + c.heads * 7 + c.page_size + (int)c.combine);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    const int rows = c.reqs * c.block_len, qh = c.heads * c.dcp;
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
    cgrt_mla_plan *plan = nullptr;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &plan));

    // Inputs: random bf16 Q and used KV pages; block table = shuffled pages.
    const long long used = (long long)c.reqs * mbps;
    std::vector<uint16_t> q((size_t)rows * qh * D), kv((size_t)used * c.page_size * D);
    for (auto &x : q) x = f2bf(uni(rng));
    for (auto &x : kv) x = f2bf(uni(rng));
    std::vector<int> bt(used);
    for (long long i = 0; i < used; i++) bt[i] = (int)(c.page_base + i);
    std::shuffle(bt.begin(), bt.end(), rng);
    const size_t page_bytes = (size_t)c.page_size * D * 2;
    CUdeviceptr d_kv = alloc((size_t)(c.page_base + used) * page_bytes);
    CUdeviceptr d_q = alloc(q.size() * 2), d_bt = alloc(bt.size() * 4), d_len = alloc(c.reqs * 4);
    CUdeviceptr d_out = alloc((size_t)rows * qh * DV * 2), d_lse = alloc((size_t)rows * qh * 4);
    upload(d_kv + (size_t)c.page_base * page_bytes, kv.data(), kv.size() * 2);
    upload(d_q, q.data(), q.size() * 2);
    upload(d_bt, bt.data(), bt.size() * 4);
    upload(d_len, c.lens.data(), c.reqs * 4);
    std::vector<uint16_t> poison((size_t)rows * qh * DV, 0x7fc1);  // NaN
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
    for (int i = 0; i < c.launches; i++) {
      CGRT_ASSERT_OK(cgrt_mla_decode(plan, nullptr, &a));
      CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt_));
      CGRT_ASSERT_OK(cgrt_counters_verify(rt_));
    }
    std::vector<uint16_t> out((size_t)rows * qh * DV);
    std::vector<float> lse((size_t)rows * qh);
    download(out.data(), d_out, out.size() * 2);
    download(lse.data(), d_lse, lse.size() * 4);

    // Host fp32 reference, full context per row.
    double num = 0, den = 0, max_dlse = 0;
    std::vector<float> sc, acc(DV), qf(D);
    for (int r = 0; r < rows; r++) {
      const int len = std::max(0, c.lens[r / c.block_len]);
      const int *btr = bt.data() + (size_t)(r / c.block_len) * mbps;
      for (int h = 0; h < qh; h++) {
        const size_t oi = ((size_t)r * qh + h) * DV;
        if (len == 0) {
          for (int i = 0; i < DV; i++) ASSERT_EQ(out[oi + i], 0) << "padding row " << r;
          ASSERT_TRUE(std::isinf(lse[(size_t)r * qh + h]) && lse[(size_t)r * qh + h] < 0);
          continue;
        }
        for (int i = 0; i < D; i++) qf[i] = bf2f(q[((size_t)r * qh + h) * D + i]);
        sc.resize(len);
        float mx = -INFINITY;
        for (int t = 0; t < len; t++) {
          const uint16_t *k = kv.data() + ((size_t)(btr[t / c.page_size] - c.page_base) * c.page_size +
                                           t % c.page_size) * D;
          float s = 0;
          for (int i = 0; i < D; i++) s += qf[i] * bf2f(k[i]);
          sc[t] = s * a.softmax_scale;
          mx = std::max(mx, sc[t]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int t = 0; t < len; t++) {
          const uint16_t *k = kv.data() + ((size_t)(btr[t / c.page_size] - c.page_base) * c.page_size +
                                           t % c.page_size) * D;
          const float w = std::exp(sc[t] - mx);
          sum += w;
          for (int i = 0; i < DV; i++) acc[i] += w * bf2f(k[i]);
        }
        for (int i = 0; i < DV; i++) {
          const float ref = (float)(acc[i] / sum), got = bf2f(out[oi + i]);
          ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << h << " col " << i;
          num += (double)(got - ref) * (got - ref);
          den += (double)ref * ref;
        }
        max_dlse = std::max(max_dlse, std::fabs(lse[(size_t)r * qh + h] - (mx + std::log(sum))));
      }
    }
    const double rel = den > 0 ? std::sqrt(num / den) : 0.0;
    EXPECT_LT(rel, 1e-2) << "relative L2 error of the output";
    EXPECT_LT(max_dlse, 1e-2) << "LSE error";
    cgrt_mla_plan_destroy(plan);
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
};

const cgrt_mla_combine kBoth[] = {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS};

TEST_F(Mla, HeadCountsBothStrategies) {
  std::mt19937 rng(7);
  const int heads[] = {1, 8, 16, 24, 32, 48, 64, 96, 128};
  const int pages[] = {16, 32, 64};
  int i = 0;
  for (int h : heads)
    for (cgrt_mla_combine cb : kBoth) {
      Case c;
      c.reqs = emulated_ ? 3 : 8;
      c.heads = h;
      c.page_size = pages[i++ % 3];
      c.lens = mixed(c.reqs, emulated_ ? 200 : 4000, rng, true);
      c.combine = cb;
      check(c, ("heads " + std::to_string(h) + (cb ? " counters" : " workspace")).c_str());
    }
}

TEST_F(Mla, PageSizes) {
  for (int ps : {16, 32, 64})
    for (cgrt_mla_combine cb : kBoth) {
      Case c;
      c.reqs = 5;
      c.page_size = ps;
      c.lens = {1, 33, 0, emulated_ ? 300 : 3000, 64};
      c.combine = cb;
      check(c, ("page size " + std::to_string(ps)).c_str());
    }
}

TEST_F(Mla, MixedLengthsUpTo32768) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.heads = 16;
    if (emulated_) {
      c.reqs = 6;
      c.lens = {1, 32768, 0, 97, 2, 1500};
      c.launches = 1;
    } else {
      c.reqs = 12;
      c.lens = {1, 32768, 5, 0, 17000, 33, 1024, 2, 32767, 0, 9000, 100};
    }
    c.combine = cb;
    check(c, cb ? "mixed counters" : "mixed workspace");
  }
}

TEST_F(Mla, PaddingRows) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 4;
    c.lens = {0, 0, 0, 0};
    c.combine = cb;
    check(c, "all padding");
    c.lens = {0, 50, 0, -3};
    check(c, "some padding (negative counts as padding)");
  }
}

TEST_F(Mla, NonCausalBlockRows) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 3;
    c.block_len = 3;
    c.lens = {100, 0, emulated_ ? 400 : 5000};
    c.page_size = 16;
    c.combine = cb;
    check(c, "k=3");
    c.block_len = 2;
    c.heads = 64;
    c.lens = {70, 1, 0};
    check(c, "k=2, 64 heads");
  }
}

TEST_F(Mla, DecodeContextParallelHeads) {
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 3;
    c.heads = 16;
    c.dcp = 2;  // 32 query heads
    c.lens = {90, 0, 257};
    c.combine = cb;
    check(c, "dcp 2");
    c.heads = 8;
    c.dcp = 3;  // 24 query heads: generic path
    check(c, "dcp 3 (generic)");
  }
}

TEST_F(Mla, ManyRowsBalanced) {
  std::mt19937 rng(99);
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = emulated_ ? 40 : 300;
    c.heads = 8;
    c.page_size = 16;
    c.lens = mixed(c.reqs, emulated_ ? 100 : 2048, rng, true);
    c.combine = cb;
    c.launches = 3;
    check(c, "many rows");
  }
}

TEST_F(Mla, KvCachePast2To31Elements) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (2^31 bf16 elements)";
  for (cgrt_mla_combine cb : kBoth) {
    Case c;
    c.reqs = 4;
    c.lens = {4000, 1, 0, 2500};
    c.page_base = 60000;  // 60000 * 64 * 576 > 2^31
    c.combine = cb;
    check(c, "64-bit offsets");
  }
}

TEST_F(Mla, PlanInfoHeadRuleAndWorkspace) {
  struct {
    int heads, fast, per_cta;
  } rule[] = {{1, 1, 1},   {8, 1, 8},   {16, 1, 16}, {24, 0, 16}, {32, 1, 16},
              {48, 1, 48}, {64, 1, 64}, {96, 0, 16}, {128, 1, 64}, {20, 0, 16}};
  for (auto &x : rule) {
    cgrt_mla_options o;
    cgrt_mla_options_init(&o);
    o.max_num_seqs = 8;
    o.heads = x.heads;
    o.max_model_len = 4096;
    cgrt_mla_plan *p = nullptr;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(p, &info));
    EXPECT_EQ(info.fast_path, x.fast) << x.heads;
    EXPECT_EQ(info.heads_per_cta, x.per_cta) << x.heads;
    EXPECT_EQ(info.head_groups, (x.heads + x.per_cta - 1) / x.per_cta) << x.heads;
    // The kernel the plan launches is the one it reports.
    ASSERT_NE(info.split_kernel, nullptr);
    EXPECT_EQ(std::string(info.split_kernel).rfind(x.per_cta > 16 ? "cgrt_mla_split_m64" : "cgrt_mla_split_m16", 0),
              0u)
        << x.heads << ": " << info.split_kernel;
    cgrt_mla_plan_destroy(p);
  }
  // The example: 256 seqs, 16 heads, max_model_len 163840.
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  o.max_num_seqs = 256;
  o.heads = 16;
  o.max_model_len = 163840;
  o.lane = 3;
  cgrt_mla_plan *p = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
  cgrt_mla_plan_info info{};
  info.size = sizeof info;
  CGRT_ASSERT_OK(cgrt_mla_plan_get_info(p, &info));
  EXPECT_LE(info.workspace_bytes * 8, info.fixed_split_bytes);
  cgrt_runtime_info ri{};
  ri.size = sizeof ri;
  CGRT_ASSERT_OK(cgrt_runtime_get_info(rt_, &ri));
  if (ri.sm_count == 132) EXPECT_NEAR(info.fixed_split_bytes / 1073741824.0, 2.07, 0.01);
  cgrt_mla_plan_destroy(p);
}

TEST_F(Mla, BadArguments) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  o.max_num_seqs = 4;
  o.heads = 16;
  o.max_model_len = 1024;
  cgrt_mla_plan *p = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_plan_create(rt_, nullptr, &p));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_plan_create(rt_, &o, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_create(nullptr, &o, &p));
  EXPECT_EQ(p, nullptr);
  auto bad = [&](void (*edit)(cgrt_mla_options &), const char *what) {
    cgrt_mla_options b = o;
    edit(b);
    cgrt_mla_plan *q = nullptr;
    EXPECT_EQ(cgrt_mla_plan_create(rt_, &b, &q), CGRT_ERROR_INVALID_ARGUMENT) << what;
    EXPECT_EQ(q, nullptr);
    EXPECT_STRNE(cgrt_last_error(), "") << what;
  };
  bad([](cgrt_mla_options &b) { b.size = 8; }, "size");
  bad([](cgrt_mla_options &b) { b.heads = 0; }, "heads 0");
  bad([](cgrt_mla_options &b) { b.max_num_seqs = -1; }, "seqs -1");
  bad([](cgrt_mla_options &b) { b.block_len = 0; }, "block_len 0");
  bad([](cgrt_mla_options &b) { b.dcp_world_size = 0; }, "dcp 0");
  bad([](cgrt_mla_options &b) { b.page_size = 8; }, "page 8");
  bad([](cgrt_mla_options &b) { b.max_model_len = 0; }, "len 0");
  bad([](cgrt_mla_options &b) { b.lane = 99; }, "lane");
  bad([](cgrt_mla_options &b) { b.combine = (cgrt_mla_combine)7; }, "combine");
  bad([](cgrt_mla_options &b) { b.max_num_seqs = 1 << 30; }, "rows overflow");

  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
  cgrt_mla_args a{};
  a.size = sizeof a;
  a.q = a.kv_cache = a.block_table = a.seq_lens = a.out = a.lse = 256;  // never launched
  a.num_rows = 4;
  a.softmax_scale = 0.1f;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_decode(nullptr, nullptr, &a));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, nullptr));
  cgrt_mla_args b = a;
  b.num_rows = 5;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
  b = a;
  b.num_rows = 0;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
  b = a;
  b.kv_cache = 0;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
  EXPECT_NE(std::string(cgrt_last_error()).find("kv_cache"), std::string::npos);
  b = a;
  b.out = 258;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
  b = a;
  b.softmax_scale = NAN;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
  b = a;
  b.size = 4;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
  cgrt_mla_plan_info info{};
  info.size = 1;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_plan_get_info(p, &info));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_get_info(nullptr, &info));
  cgrt_mla_plan_destroy(p);
  cgrt_mla_plan_destroy(nullptr);
  // A destroyed plan is rejected without being read; a second destroy is a no-op.
  info.size = sizeof info;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_get_info(p, &info));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_decode(p, nullptr, &a));
  cgrt_mla_plan_destroy(p);
}

TEST(MlaLifetime, RuntimeDestroyTakesLivePlans) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  o.max_num_seqs = 2;
  o.heads = 16;
  o.max_model_len = 256;
  cgrt_mla_plan *p = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt, &o, &p));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));  // the forgotten plan goes with it (no leak under LSan)
  cgrt_mla_plan_info info{};
  info.size = sizeof info;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mla_plan_get_info(p, &info));
  cgrt_mla_plan_destroy(p);  // no-op
}

// Captures one decode step into a graph through the driver table and replays it with
// new seq_lens: the replay must equal an eager launch on the same inputs.
TEST_F(Mla, StreamCaptureReplayEqualsEager) {
  for (cgrt_mla_combine cb : kBoth) {
    const int reqs = 4, qh = 16, ps = 16, mbps = 16;
    cgrt_mla_options o;
    cgrt_mla_options_init(&o);
    o.max_num_seqs = reqs;
    o.heads = qh;
    o.page_size = ps;
    o.max_model_len = ps * mbps;
    o.combine = cb;
    cgrt_mla_plan *p = nullptr;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    std::vector<uint16_t> q((size_t)reqs * qh * D), kv((size_t)reqs * mbps * ps * D);
    for (auto &x : q) x = f2bf(uni(rng));
    for (auto &x : kv) x = f2bf(uni(rng));
    std::vector<int> bt(reqs * mbps);
    for (int i = 0; i < reqs * mbps; i++) bt[i] = i;
    cgrt_mla_args a{};
    a.size = sizeof a;
    a.q = alloc(q.size() * 2);
    a.kv_cache = alloc(kv.size() * 2);
    a.block_table = alloc(bt.size() * 4);
    a.seq_lens = alloc(reqs * 4);
    a.out = alloc((size_t)reqs * qh * DV * 2);
    a.lse = alloc((size_t)reqs * qh * 4);
    a.num_rows = reqs;
    a.softmax_scale = 0.07f;
    upload(a.q, q.data(), q.size() * 2);
    upload(a.kv_cache, kv.data(), kv.size() * 2);
    upload(a.block_table, bt.data(), bt.size() * 4);
    std::vector<int> lens0 = {5, 0, 200, 17};
    upload(a.seq_lens, lens0.data(), reqs * 4);
    CGRT_ASSERT_OK(cgrt_mla_decode(p, nullptr, &a));  // warm-up before capture
    CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt_));

    const cgrt__driver *d = rt_->drv;
    CUstream s = nullptr;
    ASSERT_EQ(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    cgrt_status st = cgrt_mla_decode(p, s, &a);
    CUgraph g = nullptr;
    ASSERT_EQ(d->cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CGRT_ASSERT_OK(st);
    CUgraphExec ge = nullptr;
    ASSERT_EQ(d->cuGraphInstantiateWithFlags(&ge, g, 0), CUDA_SUCCESS);

    std::vector<int> lens1 = {250, 3, 0, 64};
    upload(a.seq_lens, lens1.data(), reqs * 4);
    std::vector<uint16_t> eager((size_t)reqs * qh * DV), replay(eager.size());
    std::vector<float> le(reqs * qh), lr(reqs * qh);
    CGRT_ASSERT_OK(cgrt_mla_decode(p, nullptr, &a));
    CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt_));
    download(eager.data(), a.out, eager.size() * 2);
    download(le.data(), a.lse, le.size() * 4);
    std::vector<uint16_t> poison(eager.size(), 0x7fc1);
    upload(a.out, poison.data(), poison.size() * 2);
    for (int i = 0; i < 2; i++) ASSERT_EQ(d->cuGraphLaunch(ge, s), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamSynchronize(s), CUDA_SUCCESS);
    CGRT_ASSERT_OK(cgrt_counters_verify(rt_));
    download(replay.data(), a.out, replay.size() * 2);
    download(lr.data(), a.lse, lr.size() * 4);
    EXPECT_EQ(eager, replay);
    for (int i = 0; i < reqs * qh; i++)
      EXPECT_TRUE(le[i] == lr[i] || (std::isinf(le[i]) && std::isinf(lr[i]))) << i;
    d->cuGraphExecDestroy(ge);
    d->cuGraphDestroy(g);
    d->cuStreamDestroy(s);
    cgrt_mla_plan_destroy(p);
  }
}

}  // namespace
