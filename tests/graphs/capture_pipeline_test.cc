// Capture of a bucket set: instantiation on the set's worker thread gives what the serial
// order gives, warmup_once runs the warm-up once per capture call, per-bucket memory cgrt
// holds is reported, and cgrt_graphs_bucket_exec hands out the executables.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

// Counts the callback's runs (warm-ups and captures) before the engine's enqueue.
struct Counting {
  Engine *eng;
  int runs = 0, captures = 0;
};
static cgrt_status counting_cb(void *user, CUstream s, const cgrt_batch_desc *d) {
  Counting *c = static_cast<Counting *>(user);
  c->runs++;
  c->captures += d->capturing;
  return Engine::enqueue_cb(c->eng, s, d);
}

static std::vector<cgrt_bucket_info> buckets(cgrt_graphs *set) {
  std::vector<cgrt_bucket_info> v(cgrt_graphs_bucket_count(set));
  for (size_t i = 0; i < v.size(); i++) {
    v[i].size = sizeof(v[i]);
    EXPECT_EQ(cgrt_graphs_get_bucket(set, i, &v[i]), CGRT_SUCCESS);
  }
  return v;
}

TEST_F(GraphsTest, WarmupOnceRunsTheWarmupBeforeTheFirstBucketOnly) {
  start();
  for (int once = 0; once < 2; once++) {
    Counting c{&eng};
    cgrt_graphs_options o;
    eng.options(&o, descs);
    o.block_len = 0;
    o.enqueue = counting_cb;
    o.user = &c;
    o.warmup_runs = 2;
    o.warmup_once = once;
    int sizes[] = {4, 8, 16, 32};
    o.capture_sizes = sizes;
    o.num_capture_sizes = 4;
    make_set(&o);
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
    EXPECT_EQ(c.captures, 4) << "once " << once;
    EXPECT_EQ(c.runs - c.captures, once ? 2 : 8) << "eager warm-up runs, once " << once;
    c.runs = c.captures = 0;
    CGRT_ASSERT_OK(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 8));
    EXPECT_EQ(c.runs - c.captures, 2) << "a recapture warms up its one bucket";
    init_cur();
    step_and_check(CGRT_GRAPH_DECODE, 7, {}, once ? "warmup_once" : "warm-up per bucket");
    step_and_check(CGRT_GRAPH_DECODE, 30, {}, once ? "warmup_once" : "warm-up per bucket");
    CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
    set = nullptr;
  }
}

TEST_F(GraphsTest, WarmupOnceWarmsUpAgainAfterAFailedBucket) {
  start();
  Counting c{&eng};
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  o.enqueue = counting_cb;
  o.user = &c;
  o.warmup_once = 1;
  int sizes[] = {4, 8, 16};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 3;
  make_set(&o);
  eng.fail_at_rows = 16;  // the first bucket (largest) fails in its warm-up
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  EXPECT_EQ(c.captures, 2);
  EXPECT_EQ(c.runs - c.captures, 2) << "the failed warm-up, then one before bucket 8";
  eng.fail_at_rows = -1;
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 6, {}, "after a failed first bucket");
}

// The same set captured with the worker thread and in turn: same buckets, same index,
// same results; the bucket set's executables are distinct and stay with the set.
TEST_F(GraphsTest, ThreadedCaptureMatchesSerialCapture) {
  start();
  std::vector<cgrt_bucket_info> got[2];
  for (int serial = 0; serial < 2; serial++) {
    for (int dp = 0; dp < 2; dp++) {
      cgrt_graphs_options o;
      eng.options(&o, descs);
      o.serial_capture = serial;
      o.device_patch = dp;
      make_set(&o);
      CGRT_ASSERT_OK(cgrt_graphs_capture(set));
      auto b = buckets(set);
      ASSERT_GT(b.size(), 4u);
      for (const auto &x : b) {
        EXPECT_EQ(x.captured, 1);
        EXPECT_GT(x.nodes, 0u);
        EXPECT_GT(x.instantiate_seconds, 0.0);
        if (x.device_patch) {
          EXPECT_EQ(x.table_bytes, 0u) << "the site table is in the patch node's parameters";
          EXPECT_GE(x.patch_param_bytes, 1024u);
          EXPECT_GT(x.pinned_bytes, 0u);
        } else {
          EXPECT_EQ(x.table_bytes, 0u);
          EXPECT_EQ(x.pinned_bytes, 0u);
          EXPECT_EQ(x.patch_param_bytes, 0u);
          EXPECT_GE(x.host_patch_nodes, 5u) << "every node with a site patches on the host";
        }
      }
      if (dp == 0) got[serial] = b;
      std::vector<CUgraphExec> execs;
      for (size_t i = 0; i < b.size(); i++) {
        CUgraphExec x = nullptr;
        CGRT_ASSERT_OK(cgrt_graphs_bucket_exec(set, i, 0, &x));
        ASSERT_NE(x, nullptr);
        for (CUgraphExec y : execs) EXPECT_NE(x, y);
        execs.push_back(x);
      }
      init_cur();
      for (int t = 0; t < 6; t++) {
        int reqs = 1 + (int)(rng() % eng.cfg.max_reqs);
        step_and_check(t % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE, t % 2 ? 1 + reqs / 4 : reqs, {},
                       serial ? "serial capture" : "threaded capture");
      }
      CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
      set = nullptr;
    }
  }
  ASSERT_EQ(got[0].size(), got[1].size());
  for (size_t i = 0; i < got[0].size(); i++) {
    EXPECT_EQ(got[0][i].rows, got[1][i].rows);
    EXPECT_EQ(got[0][i].mode, got[1][i].mode);
    EXPECT_EQ(got[0][i].nodes, got[1][i].nodes);
    EXPECT_EQ(got[0][i].patch_sites, got[1][i].patch_sites);
  }
}

TEST_F(GraphsTest, ThreadedCaptureReportsEachFailedBucket) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  int sizes[] = {4, 8, 16, 32};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 4;
  make_set(&o);
  eng.fail_at_rows = 8;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("8 rows"), std::string::npos) << msg;
  auto b = buckets(set);
  size_t captured = 0;
  for (const auto &x : b) captured += x.captured;
  EXPECT_EQ(captured, 3u);
  CUgraphExec x = nullptr;
  for (size_t i = 0; i < b.size(); i++) {
    if (b[i].captured) continue;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_bucket_exec(set, i, 0, &x));
    EXPECT_NE(std::string(cgrt_last_error()).find("not captured"), std::string::npos) << cgrt_last_error();
  }
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_bucket_exec(set, b.size(), 0, &x));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_bucket_exec(set, 0, 0, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_bucket_exec(set, 0, 33, &x));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_bucket_exec(nullptr, 0, 0, &x));
  eng.fail_at_rows = -1;
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 5, {}, "the other buckets");
}

// Direct launches prepared by cgrt_graphs_bucket_exec under device patching: the
// mailbox stays in step, so steps that move buffers after them still match eager.
TEST_F(GraphsTest, DirectLaunchesKeepDevicePatchingInStep) {
  start();
  default_set(CGRT_REPLAY_POINTER_UPDATE, 1);
  if (device_patched_buckets() == 0) GTEST_SKIP() << "no device patching here (see DevicePatch tests)";
  init_cur();
  const int reqs = 5;
  const int rows = cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, reqs);
  size_t index = 0;
  for (const auto &b : buckets(set))
    if (b.mode == CGRT_GRAPH_DECODE && !b.draft && b.rows == rows) break;
    else index++;
  step_and_check(CGRT_GRAPH_DECODE, reqs, {}, "before direct launches");
  for (int round = 0; round < 3; round++) {
    const unsigned k = round == 0 ? 32u : 7u + round;
    CUgraphExec x = nullptr;
    CGRT_ASSERT_OK(cgrt_graphs_bucket_exec(set, index, k, &x));
    for (unsigned i = 0; i < k; i++) ASSERT_EQ(eng.drv->cuGraphLaunch(x, cgrt_graphs_stream(set)), CUDA_SUCCESS);
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    // every buffer the device patches moves: the next step must deliver the moves
    std::vector<cgrt_binding> bind;
    for (synth::Buf f : {synth::X, synth::WIN, synth::KV, synth::BT}) {
      const CUdeviceptr alt = move_to_copy(f);
      ASSERT_NE(alt, 0u);
      bind.push_back({(int)f, alt, 0});
    }
    step_and_check(CGRT_GRAPH_DECODE, reqs, bind, "moves after direct launches");
    step_and_check(CGRT_GRAPH_DECODE, reqs - 1 - round, {}, "num_reqs after direct launches");
  }
}

}  // namespace cgrt_graphs_test
