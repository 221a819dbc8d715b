// Shared fixture of the DCP tests: one logical batch (queries and per-request KV), the
// single-rank reference over it (cgrt_mla_decode with every query head, no DCP), and
// world_size ranks as threads, each with its own runtime, KV shard (token-interleaved)
// and group. CI runs it on the emulation; with CGRT_DRIVER=cuda on a machine with
// world_size GPUs each rank takes the GPU of its ordinal.
#ifndef CGRT_TESTS_DCP_DCP_HARNESS_H
#define CGRT_TESTS_DCP_DCP_HARNESS_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_dcp.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace dcp_test {

constexpr int D = 576, DV = 512;

inline uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
inline float bf2f(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

struct Batch {
  int world = 2, heads = 4, page = 16, interleave = 1;
  cgrt_dcp_merge merge = CGRT_DCP_MERGE_AUTO;
  std::vector<int> lens;  // per request (rows = requests: block_len 1)
  int rows() const { return (int)lens.size(); }
  int qh() const { return world * heads; }
  std::vector<uint16_t> q;                // [rows][world x heads][576]
  std::vector<std::vector<uint16_t>> kv;  // per request: [len][576]
  float scale = 1.f / std::sqrt(192.f);

  void fill(unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    q.resize((size_t)rows() * qh() * D);
    for (auto &x : q) x = f2bf(uni(rng));
    kv.assign(lens.size(), {});
    for (size_t i = 0; i < lens.size(); i++) {
      kv[i].resize((size_t)std::max(lens[i], 0) * D);
      for (auto &x : kv[i]) x = f2bf(uni(rng));
    }
  }
  int max_len() const {
    int m = 1;
    for (int l : lens) m = std::max(m, l);
    return m;
  }
};

// A paged KV cache of some tokens per request, with its block table and lengths.
struct Paged {
  std::vector<uint16_t> pages;  // [num_pages][page][576]
  std::vector<int> table;       // [reqs][mbps]
  std::vector<int> lens;
  int mbps = 1;
};

// The tokens of each request that `rank` holds (all of them for rank -1), paged.
inline Paged shard(const Batch &b, int rank) {
  Paged p;
  std::vector<std::vector<int>> toks(b.lens.size());
  for (size_t i = 0; i < b.lens.size(); i++)
    for (int t = 0; t < b.lens[i]; t++)
      if (rank < 0 || (t / b.interleave) % b.world == rank) toks[i].push_back(t);
  p.mbps = (b.max_len() + b.page - 1) / b.page;  // columns for the whole context on every rank
  p.table.assign(b.lens.size() * p.mbps, 0);
  int next = 0;
  for (size_t i = 0; i < b.lens.size(); i++) {
    p.lens.push_back(b.lens[i] <= 0 ? b.lens[i] : (int)toks[i].size());
    const int np = (int)((toks[i].size() + b.page - 1) / b.page);
    for (int k = 0; k < np; k++) p.table[i * p.mbps + k] = next + np - 1 - k;  // pages in reverse order
    p.pages.resize((size_t)(next + np) * b.page * D);
    for (size_t j = 0; j < toks[i].size(); j++) {
      const int pg = p.table[i * p.mbps + (int)(j / b.page)];
      memcpy(&p.pages[((size_t)pg * b.page + j % b.page) * D], &b.kv[i][(size_t)toks[i][j] * D], D * 2);
    }
    next += np;
  }
  if (p.pages.empty()) p.pages.resize((size_t)b.page * D);
  return p;
}

// Device copies of a rank's inputs and outputs (freed by the destructor).
struct Tensors {
  cgrt_runtime *rt = nullptr;
  std::vector<CUdeviceptr> all;
  CUdeviceptr q = 0, kv = 0, bt = 0, lens = 0, out = 0, lse = 0;
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(rt->drv->cuCtxSetCurrent(rt->ctx), CUDA_SUCCESS);
    EXPECT_EQ(rt->drv->cuMemAlloc(&p, bytes), CUDA_SUCCESS) << bytes;
    all.push_back(p);
    return p;
  }
  void put(CUdeviceptr dst, const void *src, size_t bytes) {
    EXPECT_EQ(rt->drv->cuCtxSetCurrent(rt->ctx), CUDA_SUCCESS);
    EXPECT_EQ(rt->drv->cuMemcpyHtoD(dst, src, bytes), CUDA_SUCCESS);
    EXPECT_EQ(rt->drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  void get(void *dst, CUdeviceptr src, size_t bytes) {
    EXPECT_EQ(rt->drv->cuCtxSetCurrent(rt->ctx), CUDA_SUCCESS);
    EXPECT_EQ(rt->drv->cuMemcpyDtoH(dst, src, bytes), CUDA_SUCCESS);
  }
  // Uploads the paged KV, the given queries and NaN-poisoned outputs of qh heads.
  void load(const Paged &p, const std::vector<uint16_t> &qv, int rows, int qh_out) {
    kv = alloc(p.pages.size() * 2);
    put(kv, p.pages.data(), p.pages.size() * 2);
    bt = alloc(p.table.size() * 4);
    put(bt, p.table.data(), p.table.size() * 4);
    lens = alloc(p.lens.size() * 4);
    put(lens, p.lens.data(), p.lens.size() * 4);
    q = alloc(qv.size() * 2);
    put(q, qv.data(), qv.size() * 2);
    out = alloc((size_t)rows * qh_out * DV * 2);
    std::vector<uint16_t> nan((size_t)rows * qh_out * DV, 0x7fc1);
    put(out, nan.data(), nan.size() * 2);
    lse = alloc((size_t)rows * qh_out * 4);
    std::vector<float> lnan((size_t)rows * qh_out, NAN);
    put(lse, lnan.data(), lnan.size() * 4);
  }
  ~Tensors() {
    if (!rt) return;
    rt->drv->cuCtxSetCurrent(rt->ctx);
    for (CUdeviceptr p : all) rt->drv->cuMemFree(p);
  }
};

// The rows x heads x 512 outputs and LSEs of one run.
struct Result {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// Relative L2 distance of the outputs and the largest LSE difference (finite LSEs; an
// infinite one must be matched exactly).
inline void compare(const Result &got, const Result &want, double rel_bound, double lse_bound, const std::string &what) {
  ASSERT_EQ(got.out.size(), want.out.size());
  double num = 0, den = 0, dl = 0;
  for (size_t i = 0; i < got.out.size(); i++) {
    const double g = bf2f(got.out[i]), w = bf2f(want.out[i]);
    ASSERT_TRUE(std::isfinite(g)) << what << " element " << i;
    num += (g - w) * (g - w);
    den += w * w;
  }
  for (size_t i = 0; i < got.lse.size(); i++) {
    if (std::isinf(want.lse[i])) {
      ASSERT_EQ(got.lse[i], want.lse[i]) << what << " LSE " << i;
      continue;
    }
    dl = std::max(dl, (double)std::fabs(got.lse[i] - want.lse[i]));
  }
  EXPECT_LE(den > 0 ? std::sqrt(num / den) : std::sqrt(num), rel_bound) << what << ": relative L2 error";
  EXPECT_LE(dl, lse_bound) << what << ": LSE error";
}

// One rank's side of a case: runtime, shard, group, step arguments and what its calls
// returned.
struct Rank {
  Tensors t;
  cgrt_dcp_group *g = nullptr;
  cgrt_dcp_args a{};
  cgrt_status step = CGRT_SUCCESS, wait = CGRT_SUCCESS;
  std::string msg;
  ~Rank() { cgrt_dcp_group_destroy(g); }
};

class Harness : public ::testing::Test {
 protected:
  void TearDown() override {
    for (cgrt_runtime *rt : rts_) cgrt_runtime_destroy(rt);
    rts_.clear();
  }

  // A runtime per rank (emulation in CI; device `rank` with CGRT_DRIVER=cuda).
  // Thread-safe: the rank threads ask for their runtimes.
  cgrt_runtime *runtime(int rank, int fault = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    while ((int)rts_.size() <= rank) rts_.push_back(nullptr);
    if (!rts_[rank]) {
      cgrt_runtime_options o;
      cgrt_runtime_options_init(&o);
      o.fault_injection = fault;
      if (cgrt_test::is_emulated(reference_runtime())) {
        o.driver = CGRT_DRIVER_EMULATED;
      } else {
        o.device_ordinal = rank;
      }
      EXPECT_EQ(cgrt_runtime_create(&o, &rts_[rank]), CGRT_SUCCESS) << cgrt_last_error();
    }
    return rts_[rank];
  }
  cgrt_runtime *reference_runtime() {
    if (!ref_rt_) {
      ref_rt_ = cgrt_test::make_runtime();
      owned_ref_ = true;
    }
    return ref_rt_;
  }
  void destroy_ref() {
    if (owned_ref_ && ref_rt_) cgrt_runtime_destroy(ref_rt_);
    ref_rt_ = nullptr;
  }
  ~Harness() override { destroy_ref(); }

  // Most ranks a test can run: 4 on the emulation, the GPU count on GPUs (one each).
  int max_world() {
    cgrt_runtime *rt = reference_runtime();
    if (!rt || cgrt_test::is_emulated(rt)) return 4;
    int n = 0;
    return rt->drv->cuDeviceGetCount(&n) == CUDA_SUCCESS ? std::min(n, 4) : 1;
  }

  // The single-rank reference: every query head over the whole context.
  Result reference(const Batch &b) {
    cgrt_runtime *rt = reference_runtime();
    Paged p = shard(b, -1);
    cgrt_mla_options o;
    cgrt_mla_options_init(&o);
    o.max_num_seqs = b.rows();
    o.heads = b.qh();
    o.page_size = b.page;
    o.max_model_len = b.max_len();
    o.max_blocks_per_seq = p.mbps;
    cgrt_mla_plan *plan = nullptr;
    EXPECT_EQ(cgrt_mla_plan_create(rt, &o, &plan), CGRT_SUCCESS) << cgrt_last_error();
    Tensors t;
    t.rt = rt;
    t.load(p, b.q, b.rows(), b.qh());
    cgrt_mla_args a{};
    a.size = sizeof a;
    a.q = t.q;
    a.kv_cache = t.kv;
    a.block_table = t.bt;
    a.seq_lens = t.lens;
    a.out = t.out;
    a.lse = t.lse;
    a.num_rows = b.rows();
    a.softmax_scale = b.scale;
    EXPECT_EQ(cgrt_mla_decode(plan, nullptr, &a), CGRT_SUCCESS) << cgrt_last_error();
    EXPECT_EQ(cgrt_runtime_synchronize(rt), CGRT_SUCCESS) << cgrt_last_error();
    Result r;
    r.out.resize((size_t)b.rows() * b.qh() * DV);
    r.lse.resize((size_t)b.rows() * b.qh());
    t.get(r.out.data(), t.out, r.out.size() * 2);
    t.get(r.lse.data(), t.lse, r.lse.size() * 4);
    cgrt_mla_plan_destroy(plan);
    return r;
  }

  // The reference's heads of one rank.
  static Result heads_of(const Batch &b, const Result &all, int rank) {
    Result r;
    for (int row = 0; row < b.rows(); row++)
      for (int h = 0; h < b.heads; h++) {
        const size_t src = (size_t)row * b.qh() + (size_t)rank * b.heads + h;
        r.out.insert(r.out.end(), all.out.begin() + src * DV, all.out.begin() + (src + 1) * DV);
        r.lse.push_back(all.lse[src]);
      }
    return r;
  }

  // This rank's queries: [rows][heads][576] (gather_q) or all heads.
  static std::vector<uint16_t> rank_q(const Batch &b, int rank, bool gathered) {
    if (gathered) return b.q;
    std::vector<uint16_t> v;
    for (int row = 0; row < b.rows(); row++) {
      const size_t src = ((size_t)row * b.qh() + (size_t)rank * b.heads) * D;
      v.insert(v.end(), b.q.begin() + src, b.q.begin() + src + (size_t)b.heads * D);
    }
    return v;
  }

  // Group options of rank r for batch b.
  cgrt_dcp_options options(const Batch &b, int rank, const cgrt_dcp_id &id, int max_len) {
    cgrt_dcp_options o;
    cgrt_dcp_options_init(&o);
    o.world_size = b.world;
    o.rank = rank;
    o.id = id;
    o.timeout_ms = 20000;
    o.merge = b.merge;
    o.mla.max_num_seqs = b.rows();
    o.mla.heads = b.heads;
    o.mla.page_size = b.page;
    o.mla.max_model_len = max_len;
    return o;
  }

  // A new group id (on rank 0's runtime).
  cgrt_dcp_id new_id(int fault = 0) {
    cgrt_dcp_id id;
    EXPECT_EQ(cgrt_dcp_unique_id(runtime(0, fault), nullptr, &id), CGRT_SUCCESS) << cgrt_last_error();
    return id;
  }

  // Sets up rank r of batch b: its runtime, shard and queries (all heads when the host
  // gathers them), and its group (every rank must call this concurrently).
  // timeout_ms < 0: 20 s on the emulation; 180 s on GPUs, where NCCL's communicator set-up
  // under compute-sanitizer takes longer than 20 s.
  void setup(Rank &k, const Batch &b, int r, const cgrt_dcp_id &id, int fault = 0, bool host_gathers = false,
             int timeout_ms = -1) {
    cgrt_runtime *rt = runtime(r, fault);
    ASSERT_NE(rt, nullptr);
    if (timeout_ms < 0) timeout_ms = cgrt_test::is_emulated(rt) ? 20000 : 180000;
    const Paged p = shard(b, r);
    k.t.rt = rt;
    k.t.load(p, rank_q(b, r, host_gathers), b.rows(), b.heads);
    cgrt_dcp_options o = options(b, r, id, b.max_len());
    o.mla.max_blocks_per_seq = p.mbps;
    o.gather_q = host_gathers ? 0 : 1;
    o.timeout_ms = timeout_ms;
    ASSERT_EQ(cgrt_dcp_group_create(rt, &o, &k.g), CGRT_SUCCESS) << cgrt_last_error();
    k.a.size = sizeof k.a;
    k.a.q = k.t.q;
    k.a.kv_cache = k.t.kv;
    k.a.block_table = k.t.bt;
    k.a.seq_lens = k.t.lens;
    k.a.out = k.t.out;
    k.a.lse = k.t.lse;
    k.a.num_rows = b.rows();
    k.a.softmax_scale = b.scale;
  }

  // Rank k's output and LSE.
  static Result fetch(Rank &k, const Batch &b) {
    Result r;
    r.out.resize((size_t)b.rows() * b.heads * DV);
    r.lse.resize((size_t)b.rows() * b.heads);
    k.t.get(r.out.data(), k.t.out, r.out.size() * 2);
    k.t.get(r.lse.data(), k.t.lse, r.lse.size() * 4);
    return r;
  }

  // Runs fn(rank) on world threads and joins them.
  static void ranks(int world, const std::function<void(int)> &fn) {
    std::vector<std::thread> th;
    for (int r = 0; r < world; r++) th.emplace_back(fn, r);
    for (auto &t : th) t.join();
  }

  std::mutex mu_;
  std::vector<cgrt_runtime *> rts_;
  cgrt_runtime *ref_rt_ = nullptr;
  bool owned_ref_ = false;
};

}  // namespace dcp_test

#endif
