// Multi-token blocks (block_len k >= 2) through the public API against the fp32 host
// reference (tests/mla/mla_harness.h): non-causal block rows and causal verify rows
// (cgrt_mla_options.causal: row i of a block sees seq_len - (k - 1 - i) tokens, at least
// 0), on both paths of the plan: the rows apart (one row per CTA row, kv_shared 0) and a
// block's rows together (kv_shared 1: up to 64 query rows = block rows x heads of one
// request per CTA: cgrt_mla_split_t64_n32 / _n32_causal up to 32 query rows,
// cgrt_mla_split_m64_ws / _ws_causal above; the _causal kernels for causal rows). Heads 16/32/64/128 and a generic count, k 1..8, page sizes 16/32/64, ragged and
// zero lengths (shorter than the block too), padding rows, both merges and AUTO, steps
// smaller than the plan, and every launch bitwise equal (check() launches twice).
#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaBlock : public Harness {
 protected:
  unsigned case_seed(const Case &c) const override {
    return 4242u + c.heads * 31 + c.block_len * 7 + c.page_size + (int)c.combine + c.causal;
  }
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    last_info_ = info;
  }
  // What the plan is expected to choose: a block's rows together when that reads the KV
  // fewer times (ceil(k q / 64) CTAs per range against k x head groups) and the block has
  // at least CGRT_MLA_SHARE_MIN_ROWS query rows (16 heads: from k = 2).
  static int expect_shared(int k, int q) {
    if (k < 2 || k * q < CGRT_MLA_SHARE_MIN_ROWS) return 0;
    const int tile = q <= 8 ? 8 : (q <= 16 ? 16 : (q <= 32 ? 32 : 64));
    const int t = std::min(q, tile);
    const int hg = q % t == 0 ? t : 16;
    const int groups = (q + hg - 1) / hg;
    return (k * q + 63) / 64 < k * groups ? 1 : 0;
  }
  void run(Case c, const std::string &what) {
    check(c, what);
    const int q = c.heads * c.dcp;
    const int shared = expect_shared(c.block_len, q);
    EXPECT_EQ(last_info_.kv_shared, shared) << what;
    if (shared) {
      const std::string k = c.block_len * q <= 32 ? std::string("cgrt_mla_split_t64_n32") + (c.causal ? "_causal" : "")
                                                  : split64_for((c.block_len * q + 63) / 64, c.causal);
      EXPECT_EQ(std::string(last_info_.split_kernel), k) << what;
      EXPECT_EQ(last_info_.heads_per_cta, std::min(64, c.block_len * q)) << what;
    }
  }
  cgrt_mla_plan_info last_info_{};
};

// Lengths of n requests: ragged, some zero, some shorter than the block (causal rows of
// 0 tokens), one of maxlen.
std::vector<int> ragged(int n, int k, int maxlen, std::mt19937 &rng) {
  std::vector<int> v(n);
  for (int i = 0; i < n; i++) {
    const int x = (int)(rng() % 6);
    v[i] = x == 0 ? 0 : x == 1 ? 1 + (int)(rng() % k) : x == 2 ? maxlen : 1 + (int)(rng() % maxlen);
  }
  v[0] = maxlen;
  if (n > 2) v[n - 1] = std::max(1, k - 1);  // causal: the first row has no token
  return v;
}

TEST_F(MlaBlock, CausalAndNonCausalHeadsBlockLensPages) {
  std::mt19937 rng(3);
  const int pages[] = {16, 32, 64};
  int i = 0;
  for (int heads : {16, 32, 64, 128, 24})
    for (int k : {1, 2, 3, 4, 8})
      for (int causal : {0, 1}) {
        if (k == 1 && causal) continue;  // no effect with one row per request
        if (heads >= 64 && k > 4) continue;  // host reference time; k 8 at 16 / 32 / 24
        Case c;
        c.reqs = 3;
        c.block_len = k;
        c.heads = heads;
        c.causal = causal;
        c.page_size = pages[i % 3];
        c.combine = i % 3 == 0 ? CGRT_MLA_COMBINE_WORKSPACE : i % 3 == 1 ? CGRT_MLA_COMBINE_COUNTERS
                                                                         : CGRT_MLA_COMBINE_AUTO;
        i++;
        c.lens = ragged(c.reqs, k, emulated_ ? 150 : 1000, rng);
        run(c, "heads " + std::to_string(heads) + " k " + std::to_string(k) + (causal ? " causal" : "") +
                   " page " + std::to_string(c.page_size) + " combine " + std::to_string((int)c.combine));
      }
}

// Every block length 1..8 at 16 heads (the spec-decode shape), both merges, causal and
// not; long rows split over many ranges, so that causal rows of few tokens leave empty
// partials in the merges.
TEST_F(MlaBlock, EveryBlockLenSixteenHeads) {
  std::mt19937 rng(5);
  for (int k = 1; k <= 8; k++)
    for (int causal : {0, 1})
      for (cgrt_mla_combine cb : kBoth) {
        Case c;
        c.reqs = 2;
        c.block_len = k;
        c.heads = 16;
        c.causal = causal;
        c.page_size = k % 2 ? 64 : 32;
        c.combine = cb;
        c.lens = {emulated_ ? 600 : 3000, std::max(1, k / 2)};
        run(c, "k " + std::to_string(k) + (causal ? " causal" : "") + (cb ? " counters" : " workspace"));
      }
}

// Padding: every request padding, and steps of fewer rows than the plan (the bucket
// holds padding requests too: every row of theirs is inert).
TEST_F(MlaBlock, PaddingAndSmallerSteps) {
  for (int causal : {0, 1})
    for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS, CGRT_MLA_COMBINE_AUTO}) {
      Case c;
      c.reqs = 4;
      c.block_len = 4;
      c.heads = 16;
      c.causal = causal;
      c.combine = cb;
      c.lens = {0, 0, 0, 0};
      run(c, "all padding");
      c.lens = {3, 0, 90, -5};
      run(c, "some padding");
      c.lens = {300, 2, 0, 0};
      c.num_rows = 8;  // two requests of the four the plan takes
      run(c, "a step of 2 of 4 requests");
    }
}

// More requests than the split kernel's block (the schedule kernel runs first), DCP
// heads, and one request (a step of one block).
TEST_F(MlaBlock, ManyRequestsDcpOneRequest) {
  std::mt19937 rng(9);
  for (int causal : {0, 1}) {
    Case c;
    c.reqs = 390;  // more than the split kernel's 384 threads
    c.block_len = 4;
    c.heads = 16;
    c.causal = causal;
    c.combine = CGRT_MLA_COMBINE_AUTO;
    c.lens = ragged(c.reqs, 4, emulated_ ? 40 : 400, rng);
    run(c, "many requests");
    c.reqs = 3;
    c.heads = 8;
    c.dcp = 2;
    c.block_len = 4;
    c.lens = {emulated_ ? 300 : 3000, 3, 77};
    run(c, "dcp 2");
    c.reqs = 1;
    c.dcp = 1;
    c.heads = 16;
    c.lens = {emulated_ ? 500 : 6000};
    for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS, CGRT_MLA_COMBINE_AUTO}) {
      c.combine = cb;
      run(c, "one request");
    }
  }
}

// A KV cache past 2^31 elements (a GPU with > 4 GiB; skipped on the emulation): causal
// blocks apart (16 heads, k 2) and together (k 4), both merges.
TEST_F(MlaBlock, KvCachePast2To31Elements) {
  if (emulated_) GTEST_SKIP() << "needs a > 4 GiB KV cache on a GPU (2^31 bf16 elements)";
  for (int k : {2, 4})
    for (cgrt_mla_combine cb : kBoth) {
      Case c;
      c.reqs = 4;
      c.block_len = k;
      c.causal = 1;
      c.lens = {4000, 1, 0, 2500};
      c.page_base = 60000;  // 60000 * 64 * 576 > 2^31
      c.combine = cb;
      run(c, "64-bit offsets, k " + std::to_string(k));
    }
}

// The row kind is validated; causal with block_len 1 is the plain decode.
TEST_F(MlaBlock, CausalOptionValidatedAndInertAtBlockLenOne) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  EXPECT_EQ(o.causal, 0);
  o.max_num_seqs = 2;
  o.heads = 16;
  o.max_model_len = 256;
  o.causal = 2;
  cgrt_mla_plan *p = nullptr;
  EXPECT_EQ(cgrt_mla_plan_create(rt_, &o, &p), CGRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(cgrt_last_error()).find("causal"), std::string::npos) << cgrt_last_error();
  // An options struct from before the field (size up to programmatic_launch): default 0.
  o.causal = 7;
  o.size = offsetof(cgrt_mla_options, causal);
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));
  cgrt_mla_plan_destroy(p);
  Case c;
  c.reqs = 3;
  c.causal = 1;
  c.lens = {100, 0, 7};
  run(c, "causal, block_len 1");
}

}  // namespace
