// Verify mode (CGRT_GRAPH_VERIFY, options.verify_len): causal verify blocks captured and
// replayed like the decode and block modes. The step is cgrt_mla decode with causal
// verify rows (cgrt_mla_options.causal = 1, block_len = verify_len): each replay equals
// an eager step with the same inputs bitwise, follows new seq_lens written between
// replays, and a request shorter than its block leaves its first rows inert (output 0,
// LSE -inf). Runs on the emulation (CI) and with CGRT_DRIVER=cuda.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_mla.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace {

constexpr int kD = 576, kDV = 512, kHeads = 16, kReqs = 4, kK = 3, kPage = 16, kMaxLen = 200;
constexpr int kMbps = (kMaxLen + kPage - 1) / kPage;
enum { B_Q, B_KV, B_BT, B_LENS, B_OUT, B_LSE, B_COUNT };

struct Engine {
  cgrt_mla_plan *verify = nullptr, *decode = nullptr;
  int verify_calls = 0, decode_calls = 0, bad_desc = 0;
};

// The host engine's step: one MLA decode over the bucket's rows, from the buffers the
// set binds now.
cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *b) {
  Engine *e = static_cast<Engine *>(user);
  const bool verify = b->mode == CGRT_GRAPH_VERIFY;
  if ((verify && b->block_len != kK) || (!verify && (b->mode != CGRT_GRAPH_DECODE || b->block_len != 1)) ||
      b->padded_rows != b->padded_reqs * b->block_len)
    e->bad_desc++;
  (verify ? e->verify_calls : e->decode_calls)++;
  cgrt_mla_args a{};
  a.size = sizeof a;
  a.q = b->buffers[B_Q];
  a.kv_cache = b->buffers[B_KV];
  a.block_table = b->buffers[B_BT];
  a.seq_lens = b->buffers[B_LENS];
  a.out = b->buffers[B_OUT];
  a.lse = b->buffers[B_LSE];
  a.num_rows = b->padded_rows;
  a.softmax_scale = 0.0721f;
  return cgrt_mla_decode(verify ? e->verify : e->decode, s, &a);
}

class VerifyModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = cgrt_test::make_runtime();
    ASSERT_NE(rt_, nullptr);
  }
  void TearDown() override {
    if (set_) cgrt_graphs_destroy(set_);
    cgrt_mla_plan_destroy(eng_.verify);
    cgrt_mla_plan_destroy(eng_.decode);
    for (CUdeviceptr p : allocs_) rt_->drv->cuMemFree(p);
    if (rt_) cgrt_runtime_destroy(rt_);
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(rt_->drv->cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    allocs_.push_back(p);
    return p;
  }
  void upload(CUdeviceptr dst, const void *src, size_t bytes) {
    ASSERT_EQ(rt_->drv->cuMemcpyHtoD(dst, src, bytes), CUDA_SUCCESS);
    ASSERT_EQ(rt_->drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  cgrt_mla_plan *plan(int block_len, int causal) {
    cgrt_mla_options o;
    cgrt_mla_options_init(&o);
    o.max_num_seqs = kReqs;
    o.block_len = block_len;
    o.causal = causal;
    o.heads = kHeads;
    o.page_size = kPage;
    o.max_model_len = kMaxLen;
    o.lane = block_len > 1 ? 1 : 0;  // the two plans' steps share no partials
    cgrt_mla_plan *p = nullptr;
    EXPECT_EQ(cgrt_mla_plan_create(rt_, &o, &p), CGRT_SUCCESS) << cgrt_last_error();
    return p;
  }
  // Out and LSE of the verify rows now in the output buffers (rows x heads).
  void read(int rows, std::vector<uint16_t> *out, std::vector<float> *lse) {
    out->resize((size_t)rows * kHeads * kDV);
    lse->resize((size_t)rows * kHeads);
    ASSERT_EQ(rt_->drv->cuCtxSynchronize(), CUDA_SUCCESS);
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(out->data(), buf_[B_OUT], out->size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(lse->data(), buf_[B_LSE], lse->size() * 4), CUDA_SUCCESS);
  }

  cgrt_runtime *rt_ = nullptr;
  cgrt_graphs *set_ = nullptr;
  Engine eng_;
  CUdeviceptr buf_[B_COUNT] = {};
  std::vector<CUdeviceptr> allocs_;
};

TEST_F(VerifyModeTest, CapturedVerifyBucketsReplayCausalRows) {
  const int max_rows = kReqs * kK;
  const size_t bytes[B_COUNT] = {(size_t)max_rows * kHeads * kD * 2, (size_t)kReqs * kMbps * kPage * kD * 2,
                                 (size_t)kReqs * kMbps * 4,          (size_t)kReqs * 4,
                                 (size_t)max_rows * kHeads * kDV * 2, (size_t)max_rows * kHeads * 4};
  const char *names[B_COUNT] = {"q", "kv", "block_table", "seq_lens", "out", "lse"};
  const cgrt_buffer_dir dirs[B_COUNT] = {CGRT_BUFFER_IN, CGRT_BUFFER_IN, CGRT_BUFFER_IN,
                                         CGRT_BUFFER_IN, CGRT_BUFFER_OUT, CGRT_BUFFER_OUT};
  cgrt_buffer_desc descs[B_COUNT];
  for (int i = 0; i < B_COUNT; i++) {
    buf_[i] = alloc(bytes[i]);
    descs[i] = cgrt_buffer_desc{names[i], buf_[i], bytes[i], dirs[i]};
  }
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto bf = [](float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  };
  std::vector<uint16_t> q(bytes[B_Q] / 2), kv(bytes[B_KV] / 2);
  for (auto &x : q) x = bf(uni(rng));
  for (auto &x : kv) x = bf(uni(rng));
  std::vector<int> bt(kReqs * kMbps);
  for (size_t i = 0; i < bt.size(); i++) bt[i] = (int)(bt.size() - 1 - i);
  upload(buf_[B_Q], q.data(), bytes[B_Q]);
  upload(buf_[B_KV], kv.data(), bytes[B_KV]);
  upload(buf_[B_BT], bt.data(), bytes[B_BT]);

  eng_.verify = plan(kK, 1);
  eng_.decode = plan(1, 0);
  ASSERT_NE(eng_.verify, nullptr);
  ASSERT_NE(eng_.decode, nullptr);
  cgrt_graphs_options o;
  cgrt_graphs_options_init(&o);
  EXPECT_EQ(o.verify_len, 0);
  o.max_num_seqs = kReqs;
  o.max_model_len = kMaxLen;
  o.num_heads = kHeads;
  o.verify_len = kK;
  o.enqueue = enqueue;
  o.user = &eng_;
  o.buffers = descs;
  o.num_buffers = B_COUNT;
  // Invalid verify lengths are refused.
  for (int bad : {1, -2, CGRT_GRAPHS_MAX_ROWS}) {
    o.verify_len = bad;
    cgrt_graphs *s = nullptr;
    EXPECT_EQ(cgrt_graphs_create(rt_, &o, &s), CGRT_ERROR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(cgrt_last_error()).find("verify_len"), std::string::npos) << cgrt_last_error();
  }
  o.verify_len = kK;
  // Lengths with padding requests at 0 (the buckets hold whole requests).
  std::vector<int> lens = {150, 2, 0, 0};
  upload(buf_[B_LENS], lens.data(), bytes[B_LENS]);
  CGRT_ASSERT_OK(cgrt_graphs_create(rt_, &o, &set_));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set_));
  EXPECT_EQ(eng_.bad_desc, 0);
  EXPECT_GT(eng_.verify_calls, 0);
  EXPECT_GT(eng_.decode_calls, 0);

  // Verify buckets hold whole blocks: 3, 6, 9, 12 rows (default sizes 1, 2, 4, 8, 16
  // rounded up to blocks, none past max_num_seqs blocks).
  EXPECT_EQ(cgrt_graphs_bucket_rows(set_, CGRT_GRAPH_VERIFY, 1), 3);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set_, CGRT_GRAPH_VERIFY, 2), 6);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set_, CGRT_GRAPH_VERIFY, 3), 9);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set_, CGRT_GRAPH_VERIFY, 4), 12);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set_, CGRT_GRAPH_BLOCK, 1), 0);  // block mode not enabled
  int verify_buckets = 0;
  for (size_t i = 0; i < cgrt_graphs_bucket_count(set_); i++) {
    cgrt_bucket_info b{};
    b.size = sizeof b;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set_, i, &b));
    if (b.mode != CGRT_GRAPH_VERIFY) continue;
    verify_buckets++;
    EXPECT_TRUE(b.captured);
    EXPECT_EQ(b.rows % kK, 0);
  }
  EXPECT_EQ(verify_buckets, 4);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set_, CGRT_GRAPH_BLOCK, 1, nullptr, 0));

  // Two requests: the 6-row bucket replayed, equal to an eager causal step bitwise.
  const int calls = eng_.verify_calls;
  std::vector<uint16_t> out_g, out_e;
  std::vector<float> lse_g, lse_e;
  for (int round = 0; round < 2; round++) {
    SCOPED_TRACE("round " + std::to_string(round));
    if (round == 1) {  // new lengths written between replays: the graph reads them on the device
      lens = {3, 120, 0, 0};
      upload(buf_[B_LENS], lens.data(), bytes[B_LENS]);
    }
    cgrt_graphs_stats st{};
    st.size = sizeof st;
    CGRT_ASSERT_OK(cgrt_graphs_get_stats(set_, &st));
    const uint64_t replays = st.replays;
    CGRT_ASSERT_OK(cgrt_graphs_step(set_, CGRT_GRAPH_VERIFY, 2, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_graphs_get_stats(set_, &st));
    EXPECT_EQ(st.replays, replays + 1);
    read(2 * kK, &out_g, &lse_g);
    cgrt_mla_args a{};
    a.size = sizeof a;
    a.q = buf_[B_Q];
    a.kv_cache = buf_[B_KV];
    a.block_table = buf_[B_BT];
    a.seq_lens = buf_[B_LENS];
    a.out = buf_[B_OUT];
    a.lse = buf_[B_LSE];
    a.num_rows = 2 * kK;
    a.softmax_scale = 0.0721f;
    CGRT_ASSERT_OK(cgrt_mla_decode(eng_.verify, nullptr, &a));
    read(2 * kK, &out_e, &lse_e);
    EXPECT_EQ(memcmp(out_g.data(), out_e.data(), out_g.size() * 2), 0) << "replay differs from eager";
    EXPECT_EQ(memcmp(lse_g.data(), lse_e.data(), lse_g.size() * 4), 0) << "replay differs from eager";
    // Causal rows: request r's row j sees lens[r] - (k - 1 - j) tokens; none below 1.
    for (int r = 0; r < 2; r++)
      for (int j = 0; j < kK; j++) {
        const int row = r * kK + j, seen = lens[r] - (kK - 1 - j);
        for (int h = 0; h < kHeads; h++) {
          const float l = lse_g[(size_t)row * kHeads + h];
          if (seen <= 0) {
            EXPECT_TRUE(std::isinf(l) && l < 0) << "row " << row << " sees no token";
            for (int i = 0; i < kDV; i++) ASSERT_EQ(out_g[((size_t)row * kHeads + h) * kDV + i], 0) << row;
          } else {
            EXPECT_TRUE(std::isfinite(l)) << "row " << row << " sees " << seen << " tokens";
          }
        }
      }
    // The rows of one request differ (each sees one token more than the one before).
    EXPECT_NE(memcmp(&out_g[(size_t)(kK * (round ? 1 : 0)) * kHeads * kDV],
                     &out_g[(size_t)(kK * (round ? 1 : 0) + 1) * kHeads * kDV], (size_t)kHeads * kDV * 2),
              0);
  }
  EXPECT_EQ(eng_.verify_calls, calls) << "replays do not call the engine";
  // Decode buckets coexist with verify buckets.
  CGRT_ASSERT_OK(cgrt_graphs_step(set_, CGRT_GRAPH_DECODE, 2, nullptr, 0));
  ASSERT_EQ(rt_->drv->cuCtxSynchronize(), CUDA_SUCCESS);
  CGRT_ASSERT_OK(cgrt_counters_verify(rt_));
}

}  // namespace
