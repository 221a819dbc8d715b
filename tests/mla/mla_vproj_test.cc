// The value projection after the merge (cgrt_mla_options.v_head_dim, kernel
// cgrt_mla_vproj in kernels/mla/vproj.cu): out[r, h, :] = bf16(O[r, h, :]) x w_uv[h]
// through the public API against the fp32 host reference of the attention followed by the
// same projection in double (mla_harness.h): v_head_dim 32 / 128 / 512, one row, short and
// long batches (more than one 64-row tile of the kernel), padding rows, both merges and
// AUTO, block rows apart and together (kv_shared), an FP8 cache, programmatic launch, the
// same bits on every launch; then the option and argument statuses, the plan's latent
// reservation, and an args struct of the header before w_uv. On the emulation (CI) the C
// references run; with CGRT_DRIVER=cuda on an H200 the kernels.
#include <cstddef>

#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class MlaVproj : public Harness {
 protected:
  unsigned case_seed(const Case &c) const override {
    return 2718u + c.heads * 17 + c.v_head_dim + c.page_size + (int)c.combine + c.reqs;
  }
  void check_plan(cgrt_mla_plan *plan) override {
    cgrt_mla_plan_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plan, &info));
    EXPECT_EQ(info.latent_bytes, (size_t)info.max_rows * info.q_heads * DV * 2);
  }
  Case vcase(int v, int heads, cgrt_mla_combine cb) const {
    Case c;
    c.v_head_dim = v;
    c.heads = heads;
    c.combine = cb;
    c.launches = 3;  // the same bits on every launch
    return c;
  }
};

TEST_F(MlaVproj, WidthsRowsAndMerges) {
  std::mt19937 rng(5);
  int i = 0;
  for (int v : {128, 32, 512})
    for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS, CGRT_MLA_COMBINE_AUTO}) {
      // One row (the one-row kernel), a short batch of 8 with padding, and more rows than
      // one 64-row tile of the projection (emulation: 70 short rows).
      for (int reqs : {1, 8, emulated_ ? 70 : 150}) {
        Case c = vcase(v, 16, cb);
        c.reqs = reqs;
        c.page_size = (i++ % 3 == 0) ? 16 : 64;
        const int maxlen = reqs > 64 ? (emulated_ ? 40 : 2000) : (emulated_ ? 300 : 6000);
        c.lens = mixed(reqs, maxlen, rng, reqs > 1);
        check(c, "v " + std::to_string(v) + " reqs " + std::to_string(reqs) + " combine " + std::to_string(cb));
        EXPECT_EQ(launched_.count("cgrt_mla_vproj"), 1u);
      }
    }
}

TEST_F(MlaVproj, HeadCountsFp8BlocksAndProgrammaticLaunch) {
  std::mt19937 rng(6);
  // 1, 12 (fast path of 12), 24 (generic path), 64 and 128 (the 64-row kernel).
  for (int h : {1, 12, 24, 64, 128}) {
    Case c = vcase(128, h, CGRT_MLA_COMBINE_AUTO);
    c.reqs = emulated_ ? 3 : 9;
    c.lens = mixed(c.reqs, emulated_ ? 200 : 3000, rng, true);
    check(c, "heads " + std::to_string(h));
  }
  {  // An FP8 cache.
    Case c = vcase(128, 16, CGRT_MLA_COMBINE_WORKSPACE);
    c.fp8 = 1;
    c.kv_scale = 0.5f;
    c.reqs = 5;
    c.lens = mixed(c.reqs, emulated_ ? 300 : 4000, rng, true);
    check(c, "fp8");
  }
  for (int causal : {0, 1}) {  // block rows together (4 x 16 query rows: kv_shared) and causal
    Case c = vcase(128, 16, CGRT_MLA_COMBINE_AUTO);
    c.block_len = 4;
    c.causal = causal;
    c.reqs = 3;
    c.lens = {emulated_ ? 250 : 3000, 2, 0};
    check(c, causal ? "causal block" : "block");
  }
  for (int pl : {1, 2}) {  // programmatic dependent launch: the weight read before the wait
    Case c = vcase(128, 16, CGRT_MLA_COMBINE_AUTO);
    c.programmatic_launch = pl;
    c.reqs = 8;
    c.lens = mixed(c.reqs, emulated_ ? 300 : 8000, rng, true);
    check(c, "programmatic_launch " + std::to_string(pl));
  }
}

TEST_F(MlaVproj, Statuses) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  EXPECT_EQ(o.v_head_dim, 0);
  o.max_num_seqs = 4;
  o.heads = 16;
  o.max_model_len = 1024;
  for (int v : {-32, 16, 100, 544, 1 << 20}) {
    cgrt_mla_options b = o;
    b.v_head_dim = v;
    cgrt_mla_plan *q = nullptr;
    EXPECT_EQ(cgrt_mla_plan_create(rt_, &b, &q), CGRT_ERROR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(q, nullptr);
    EXPECT_NE(std::string(cgrt_last_error()).find("v_head_dim"), std::string::npos) << cgrt_last_error();
  }
  cgrt_mla_plan *plain = nullptr, *proj = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &plain));
  o.v_head_dim = 128;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &proj));
  cgrt_mla_plan_info info{};
  info.size = sizeof info;
  CGRT_ASSERT_OK(cgrt_mla_plan_get_info(plain, &info));
  EXPECT_EQ(info.latent_bytes, 0u);
  CGRT_ASSERT_OK(cgrt_mla_plan_get_info(proj, &info));
  EXPECT_EQ(info.latent_bytes, 4u * 16 * 512 * 2);

  cgrt_mla_args a{};
  a.size = sizeof a;
  a.q = a.kv_cache = a.block_table = a.seq_lens = a.out = a.lse = 256;  // never launched
  a.num_rows = 4;
  a.softmax_scale = 0.1f;
  cgrt_mla_args b = a;  // a projecting plan without w_uv, or with a misaligned one
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(proj, nullptr, &b));
  EXPECT_NE(std::string(cgrt_last_error()).find("w_uv"), std::string::npos);
  b.w_uv = 264;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(proj, nullptr, &b));
  b = a;  // w_uv for a plan that does not project
  b.w_uv = 512;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(plain, nullptr, &b));
  EXPECT_NE(std::string(cgrt_last_error()).find("v_head_dim"), std::string::npos);
  // The header before w_uv: args.size ends at softmax_scale; whatever lies past it is not
  // read, so the projecting plan finds no w_uv.
  b = a;
  b.w_uv = 512;
  b.size = offsetof(cgrt_mla_args, softmax_scale) + sizeof b.softmax_scale;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(proj, nullptr, &b));
  EXPECT_NE(std::string(cgrt_last_error()).find("w_uv"), std::string::npos);
  cgrt_mla_plan_destroy(plain);
  cgrt_mla_plan_destroy(proj);
}

// The latent reservation follows the workspace's lock rule: a projecting plan needs
// "mla.latent" reserved before the lock.
TEST_F(MlaVproj, LatentReservationAndTheLock) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  o.max_num_seqs = 8;
  o.heads = 16;
  o.max_model_len = 1024;
  cgrt_mla_plan *wide = nullptr, *p = nullptr, *q = nullptr;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &wide));  // "mla.decode" for 8 rows, no latent
  o.max_num_seqs = 4;
  o.v_head_dim = 128;
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &p));  // "mla.latent" for 4 rows
  CGRT_ASSERT_OK(cgrt_workspace_lock(rt_));
  CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &o, &q));  // fits what is reserved
  cgrt_mla_plan_destroy(q);
  q = nullptr;
  o.max_num_seqs = 8;  // the partials fit; the latent would have to grow
  CGRT_EXPECT_STATUS(CGRT_ERROR_WORKSPACE_LOCKED, cgrt_mla_plan_create(rt_, &o, &q));
  EXPECT_EQ(q, nullptr);
  EXPECT_NE(std::string(cgrt_last_error()).find("mla.latent"), std::string::npos) << cgrt_last_error();
  cgrt_mla_plan_destroy(p);
  cgrt_mla_plan_destroy(wide);
}

}  // namespace
