// MLA decode tests through the public API, against an independent fp32 host reference.
#include <climits>

#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

class Mla : public Harness {
 protected:
  // A step captured into a graph replays equal to an eager launch with the seq_lens of
  // replay time. warm_rows: the rows of the warm-up call outside capture; with AUTO, a
  // one-row warm-up runs the workspace strategy and the captured 16-row step counters.
  void capture_replay_equals_eager(cgrt_mla_combine cb, int reqs, int warm_rows) {
    SCOPED_TRACE("combine " + std::to_string((int)cb) + ", " + std::to_string(reqs) + " rows");
    const int qh = 16, ps = 16, mbps = 16;
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
    a.softmax_scale = 0.07f;
    upload(a.q, q.data(), q.size() * 2);
    upload(a.kv_cache, kv.data(), kv.size() * 2);
    upload(a.block_table, bt.data(), bt.size() * 4);
    const int pat0[4] = {5, 0, 200, 17}, pat1[4] = {250, 3, 0, 64};
    std::vector<int> lens0(reqs), lens1(reqs);
    for (int r = 0; r < reqs; r++) {
      lens0[r] = pat0[r % 4];
      lens1[r] = pat1[r % 4];
    }
    upload(a.seq_lens, lens0.data(), reqs * 4);
    a.num_rows = warm_rows;
    CGRT_ASSERT_OK(cgrt_mla_decode(p, nullptr, &a));  // warm-up before capture
    CGRT_ASSERT_OK(cgrt_runtime_synchronize(rt_));
    a.num_rows = reqs;

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
};


TEST_F(Mla, HeadCountsBothStrategies) {
  check_head_counts({1, 8, 16, 24, 32, 48, 64, 96, 128}, 7, 8, 4000);
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

// Steps of one row run the one-row kernel (cgrt_mla_split_t64_row1, one CTA per SM) with
// the workspace combine, or the plan's split kernel with counters: lengths from one token
// to one tile past a range, a padding row, 8 / 16 / 32 heads, every page size.
TEST_F(Mla, SingleRowSteps) {
  std::vector<int> lens = {1, 31, 33, 700, 0, emulated_ ? 2000 : 8192};
  if (!emulated_) lens.push_back(32768);
  int i = 0;
  for (int h : {8, 16, 32})
    for (int len : lens)
      for (cgrt_mla_combine cb : kBoth) {
        Case c;
        c.reqs = 1;
        c.heads = h;
        c.page_size = 16 << (i++ % 3);
        c.lens = {len};
        c.combine = cb;
        check(c, ("1 row, heads " + std::to_string(h) + ", len " + std::to_string(len) +
                  (cb ? " counters" : " workspace")).c_str());
      }
}

// programmatic_launch 1 (wait at the top) and 2 (the 16- and 32-row kernels read seq_lens
// and their first block-table entries before the wait; the 64-row kernels as 1): the same
// results, back-to-back launches on one stream (each launch's split may start while the
// previous launch's combine runs, which writes neither), padding rows written after the
// wait.
TEST_F(Mla, ProgrammaticLaunch) {
  std::mt19937 rng(11);
  for (int pl : {1, 2})
    for (int h : {16, 32, 64})
      for (cgrt_mla_combine cb : kBoth) {
        const std::string tag = "programmatic_launch " + std::to_string(pl) + ", heads " + std::to_string(h) +
                                (cb ? " counters" : " workspace");
        Case c;
        c.heads = h;
        c.combine = cb;
        c.programmatic_launch = pl;
        c.launches = 3;
        c.reqs = 5;
        c.page_size = 16;
        c.lens = mixed(c.reqs, emulated_ ? 300 : 5000, rng, true);
        c.lens[2] = 0;
        check(c, (tag + ": mixed rows with padding").c_str());
        c.reqs = 1;
        c.page_size = 64;
        c.lens = {emulated_ ? 1000 : 8192};
        check(c, (tag + ": one row").c_str());
        c.reqs = 3;
        c.block_len = 2;
        c.page_size = 32;
        c.lens = {700, 33, 0};
        check(c, (tag + ": block rows").c_str());
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
  check_kv_past_2to31(16);
}

// Ranges in use rounded down to a multiple of rows (the kernels whose table row says
// aligned: cgrt_mla_split_t64) or not (cgrt_mla_split_m64_ws), with padding rows,
// block rows, DCP, page sizes, the fused and the separate schedule; three launches per
// case.
TEST_F(Mla, RangeShapes) {
  std::mt19937 rng(31);
  for (cgrt_mla_combine cb : kBoth) {
    const std::string tag = cb ? "counters" : "workspace";
    Case c;
    c.combine = cb;
    c.launches = 3;
    c.reqs = 1;
    c.lens = {emulated_ ? 700 : 8192};
    check(c, tag + ": one long row");
    c.reqs = emulated_ ? 6 : 32;
    c.lens.assign(c.reqs, emulated_ ? 96 : 512);
    check(c, tag + ": equal rows");
    c.lens = mixed(c.reqs, emulated_ ? 300 : 800, rng, true);
    c.page_size = 16;
    check(c, tag + ": mixed rows with padding, page 16");
    c.reqs = 3;
    c.block_len = 2;
    c.page_size = 32;
    c.lens = {70, 0, emulated_ ? 260 : 3000};
    check(c, tag + ": block rows");
    c.block_len = 1;
    c.heads = 64;
    c.lens = {emulated_ ? 200 : 2000, 1, 0};
    check(c, tag + ": 64 heads");
    c.heads = 16;
    c.dcp = 2;
    c.lens = {90, 0, 257};
    check(c, tag + ": dcp 2");
    c.dcp = 1;
    c.heads = 1;
    c.lens = {33, 400, 0};
    check(c, tag + ": 1 head");
    if (!emulated_) {
      c.heads = 16;
      c.reqs = 200;  // rows > block size: the schedule kernel runs first
      c.lens = mixed(c.reqs, 130, rng, true);
      check(c, tag + ": 200 rows");
    }
  }
}

// The environment variables that once picked kernel variants or overrode options
// (retired: docs/mla_decode.md) change nothing: a process that inherits them computes
// the same bits with the same kernels.
TEST_F(Mla, RetiredKnobsInTheEnvironmentChangeNothing) {
  static const char *const kKnobs[][2] = {
      {"CGRT_MLA_SPLIT", "auto"}, {"CGRT_MLA_COPY", "chunk"},  {"CGRT_MLA_BTA", "0"},       {"CGRT_MLA_PARTS", "7"},
      {"CGRT_MLA_ALT_MAX", "0"},  {"CGRT_MLA_COMB", "nospec"}, {"CGRT_MLA_PDL", "2"},      {"CGRT_MLA_FUSE", "0"},
      {"CGRT_MLA_MIN_TILES", "1"}, {"CGRT_MLA_ALIGN", "0"},    {"CGRT_MLA_NOOP", "1"},     {"CGRT_MLA_NZ", "2"},
      {"CGRT_MLA_DEEP_ROWS", "0"}, {"CGRT_MLA_ONEROW", "deep"}};
  std::vector<Case> cases(3);
  cases[0].reqs = 1;
  cases[0].lens = {emulated_ ? 700 : 8192};
  cases[1].reqs = 5;
  cases[1].lens = {300, 0, 33, 1, emulated_ ? 500 : 5000};
  cases[2].reqs = 3;
  cases[2].heads = 64;
  cases[2].lens = {90, 257, 0};
  std::vector<std::vector<uint16_t>> outs;
  std::vector<std::vector<float>> lses;
  std::vector<std::set<std::string>> kernels;
  for (int with = 0; with < 2; with++) {
    for (const auto &k : kKnobs) {
      if (with) setenv(k[0], k[1], 1);
      else unsetenv(k[0]);
    }
    for (size_t i = 0; i < cases.size(); i++) {
      const std::string what = "case " + std::to_string(i) + (with ? ", knobs set" : "");
      launched_.clear();
      check(cases[i], what);
      if (!with) {
        outs.push_back(last_out_);
        lses.push_back(last_lse_);
        kernels.push_back(launched_);
        continue;
      }
      EXPECT_EQ(launched_, kernels[i]) << what;
      EXPECT_EQ(memcmp(last_out_.data(), outs[i].data(), outs[i].size() * 2), 0) << what;
      EXPECT_EQ(memcmp(last_lse_.data(), lses[i].data(), lses[i].size() * 4), 0) << what;
    }
  }
  for (const auto &k : kKnobs) unsetenv(k[0]);
}

TEST_F(Mla, PlanInfoHeadRuleAndWorkspace) {
  struct {
    int heads, fast, per_cta;
  } rule[] = {{1, 1, 1},   {8, 1, 8},   {16, 1, 16}, {24, 1, 24}, {32, 1, 32},
              {48, 1, 48}, {64, 1, 64}, {96, 0, 16}, {128, 1, 64}, {20, 1, 20}, {12, 1, 12}};
  for (auto &x : rule) {
    cgrt_mla_plan_info info;
    cgrt_mla_plan *p = plan_with_info(x.heads, 8, CGRT_MLA_COMBINE_AUTO, &info);
    ASSERT_NE(p, nullptr) << x.heads;
    EXPECT_EQ(info.fast_path, x.fast) << x.heads;
    EXPECT_EQ(info.heads_per_cta, x.per_cta) << x.heads;
    EXPECT_EQ(info.head_groups, (x.heads + x.per_cta - 1) / x.per_cta) << x.heads;
    // The split kernel is the table's for that many heads per CTA.
    ASSERT_NE(info.split_kernel, nullptr);
    EXPECT_EQ(std::string(info.split_kernel), x.per_cta > 32   ? split64_for(info.head_groups, false)
                                              : x.per_cta > 16 ? "cgrt_mla_split_t64_n32"
                                                               : "cgrt_mla_split_t64")
        << x.heads;
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
  if (ri.sm_count == 132) {
    EXPECT_NEAR(info.fixed_split_bytes / 1073741824.0, 2.07, 0.01);
  }
  cgrt_mla_plan_destroy(p);
}

// CGRT_MLA_COMBINE_AUTO (the default): per step, counters from counters_min_rows rows
// (the merging CTA reads <= CGRT_MLA_AUTO_MERGE_BYTES: splits x heads per CTA x 2 KiB /
// rows), the workspace below; the plan reserves both. On either side of the threshold
// the step matches the reference and leaves the counters at zero.
TEST_F(Mla, AutoCombinePicksPerStep) {
  cgrt_mla_options d;
  cgrt_mla_options_init(&d);
  EXPECT_EQ(d.combine, CGRT_MLA_COMBINE_AUTO);
  cgrt_runtime_info ri{};
  ri.size = sizeof ri;
  CGRT_ASSERT_OK(cgrt_runtime_get_info(rt_, &ri));
  for (int heads : {8, 16, 32, 128}) {
    cgrt_mla_plan_info info;
    cgrt_mla_plan *p = plan_with_info(heads, 64, d.combine, &info);
    ASSERT_NE(p, nullptr) << heads;
    const long long merge = (long long)info.splits * info.heads_per_cta * 512 * 4;
    EXPECT_EQ(info.counters_min_rows,
              (int)std::max(1LL, (merge + CGRT_MLA_AUTO_MERGE_BYTES - 1) / CGRT_MLA_AUTO_MERGE_BYTES))
        << heads;
    EXPECT_GT(info.counter_bytes, 0u) << heads;
    // The default kernels on 132 SMs (the H200; the emulation reports 132): 16 heads
    // split 132 ways (cgrt_mla_split_t64), 128 heads 66 ways in groups of 64.
    const std::string k = info.split_kernel;
    if (ri.sm_count == 132 && k == "cgrt_mla_split_t64" && heads == 16) {
      EXPECT_EQ(info.counters_min_rows, 14);
    }
    if (ri.sm_count == 132 && k == kSplitWs && heads == 128) {
      EXPECT_EQ(info.counters_min_rows, 27);
    }
    cgrt_mla_plan_destroy(p);
    for (cgrt_mla_combine cb : kBoth) {
      p = plan_with_info(heads, 64, cb, &info);
      ASSERT_NE(p, nullptr) << heads;
      EXPECT_EQ(info.counters_min_rows, cb == CGRT_MLA_COMBINE_COUNTERS ? 1 : 0);
      EXPECT_EQ(info.counter_bytes > 0, cb == CGRT_MLA_COMBINE_COUNTERS);
      cgrt_mla_plan_destroy(p);
    }
  }
  std::mt19937 rng(77);
  for (int reqs : {1, 4, 14, 20}) {  // 16 heads: workspace below 14 rows, counters from 14
    Case c;
    c.reqs = reqs;
    c.combine = CGRT_MLA_COMBINE_AUTO;
    c.page_size = 32;
    c.launches = 3;
    c.lens = mixed(reqs, emulated_ ? 300 : 5000, rng, reqs > 1);
    check(c, "auto, " + std::to_string(reqs) + " rows");
  }
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
  bad([](cgrt_mla_options &b) { b.programmatic_launch = 3; }, "programmatic_launch 3");
  bad([](cgrt_mla_options &b) { b.programmatic_launch = -1; }, "programmatic_launch -1");
  // ceil(max_model_len / page_size) in 64 bits: INT_MAX tokens is past the kernels'
  // 2^30-token limit, whatever the page size (it used to wrap and succeed).
  bad([](cgrt_mla_options &b) { b.max_model_len = INT_MAX; }, "max_model_len INT_MAX");
  bad([](cgrt_mla_options &b) { b.max_model_len = INT_MAX; b.page_size = 16; b.max_num_seqs = 1; },
      "max_model_len INT_MAX, page 16, 1 seq");
  bad([](cgrt_mla_options &b) { b.max_model_len = (1 << 30) + 1; b.max_num_seqs = 1; }, "2^30 + 1 tokens");
  // 2^31 or more 32-token tiles in a full step: the kernels count tiles in 32 bits.
  bad([](cgrt_mla_options &b) { b.max_num_seqs = 1 << 20; b.max_model_len = 1 << 16; b.max_blocks_per_seq = 1 << 10; },
      "tiles of a step");
  bad([](cgrt_mla_options &b) { b.max_num_seqs = 1 << 16; b.max_blocks_per_seq = 1 << 16; }, "block table");

  {
    // The largest context: 2^30 tokens in one row (block table of 2^24 entries).
    cgrt_mla_options big = o;
    big.max_num_seqs = 1;
    big.max_model_len = 1 << 30;
    cgrt_mla_plan *q = nullptr;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &big, &q));
    cgrt_mla_plan_destroy(q);
  }
  {
    // A struct from the first header (it ended at lane): the later fields take their
    // defaults, whatever follows in the caller's memory.
    cgrt_mla_options old = o;
    old.programmatic_launch = 77;
    old.size = offsetof(cgrt_mla_options, lane) + sizeof(int);
    cgrt_mla_plan *q = nullptr;
    CGRT_ASSERT_OK(cgrt_mla_plan_create(rt_, &old, &q));
    cgrt_mla_plan_destroy(q);
  }
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
  for (float bad : {0.f, -0.07f}) {  // the kernels fold a positive scale into the exponent
    b = a;
    b.softmax_scale = bad;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mla_decode(p, nullptr, &b));
    EXPECT_NE(std::string(cgrt_last_error()).find("softmax_scale"), std::string::npos);
  }
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
  capture_replay_equals_eager(CGRT_MLA_COMBINE_AUTO, 16, 1);
  for (cgrt_mla_combine cb : kBoth) capture_replay_equals_eager(cb, 4, 4);
}

}  // namespace
