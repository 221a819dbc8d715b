// Draft loops: unrolled K-step graphs, the DCP fallback to single steps, and loops as a
// conditional WHILE node.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

// K-step draft loops against K eager steps, with the input x moving between two copies
// every other loop (pointer updates inside the unrolled graph: host or device patching).
void GraphsTest::draft_loop(int device_patch) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  o.draft_steps = 3;
  o.device_patch = device_patch;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  if (device_patch) {
    if (device_patched_buckets() == 0 && getenv("CUDA_FORCE_PTX_JIT") != nullptr)
      GTEST_SKIP() << "CUDA_FORCE_PTX_JIT loads PTX only: device patching needs cgrt's SASS image";
    ASSERT_EQ(device_patched_buckets(), cgrt_graphs_bucket_count(set));
  }
  init_cur();
  // Two copies of x with different contents; the eager reference gets the same content
  // as the copy the loop is bound to, so a copy the graph failed to rebind shows.
  const size_t xbytes = eng.bytes[synth::X];
  CUdeviceptr xs[2] = {cur[synth::X], eng.alloc(xbytes)};
  ASSERT_NE(xs[1], 0u);
  std::vector<unsigned char> content[2] = {std::vector<unsigned char>(xbytes), std::vector<unsigned char>(xbytes)};
  ASSERT_EQ(sync(), CGRT_SUCCESS);
  ASSERT_EQ(eng.drv->cuMemcpyDtoH(content[0].data(), xs[0], xbytes), CUDA_SUCCESS);
  eng.randomize(rng, xs[1], 0, xbytes / 4);
  ASSERT_EQ(eng.drv->cuMemcpyDtoH(content[1].data(), xs[1], xbytes), CUDA_SUCCESS);
  ASSERT_NE(content[0], content[1]);
  for (int t = 0; t < 12; t++) {
    int reqs = 1 + (int)(rng() % 32);
    auto bt = prepare(reqs, 1, 3);
    if (t % 3 == 0) bt.seq[0] = eng.cfg.max_model_len - 1;  // exercises the clamp
    write_a(bt);
    int bucket = cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, reqs);
    const int w = (t / 2) % 2;
    cur[synth::X] = xs[w];
    eng.upload(eng.b[synth::X], content[w].data(), xbytes);
    const cgrt_binding bind = {synth::X, cur[synth::X], 0};
    CGRT_ASSERT_OK(cgrt_graphs_draft(set, reqs, &bind, 1));
    eng.eager_reference(bt, eng.b, 3);
    expect_same(bt, bucket, "draft loop");
    if (HasFailure()) return;
  }
  EXPECT_EQ(stats().draft_loops, 12u);
  if (device_patch) {
    EXPECT_EQ(stats().nodes_patched, 0u) << "x is read by kernel nodes only: no host updates";
    EXPECT_GT(stats().device_nodes_patched, 0u);
  }
}

TEST_F(GraphsTest, DraftLoopEqualsKSingleSteps) { draft_loop(0); }
TEST_F(GraphsTest, DraftLoopEqualsKSingleStepsWithDevicePatch) { draft_loop(1); }

// Under DCP the draft loop is K single-step replays with host-rebuilt metadata.
struct DcpRebuild {
  Engine *eng;
  const synth::Batch *bt;
  std::vector<CUdeviceptr> *cur;
  int calls = 0;
};
static cgrt_status dcp_rebuild(void *user, CUstream stream, int next_step, const cgrt_batch_desc *) {
  auto *r = static_cast<DcpRebuild *>(*static_cast<void **>(user));
  r->calls++;
  std::vector<int32_t> seq(r->bt->seq);
  std::vector<int64_t> pos(r->bt->pos);
  for (int i = 0; i < r->bt->reqs; i++) {
    seq[i] = std::min(seq[i] + next_step, r->eng->cfg.max_model_len);
    pos[i] += next_step;
  }
  const cgrt__driver *d = r->eng->drv;
  // Ordered on the replay stream (after the previous step's replay, before the next);
  // the pageable source is staged before each call returns.
  if (d->cuMemcpyHtoDAsync((*r->cur)[synth::REQ_SEQ], seq.data(), seq.size() * 4, stream) != CUDA_SUCCESS ||
      d->cuMemcpyHtoDAsync((*r->cur)[synth::REQ_POS], pos.data(), pos.size() * 8, stream) != CUDA_SUCCESS)
    return CGRT_ERROR_DRIVER;
  return CGRT_SUCCESS;
}

TEST_F(GraphsTest, DraftLoopUnderDcpFallsBackToSingleSteps) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  o.draft_steps = 3;
  o.dcp_world_size = 2;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  CGRT_EXPECT_STATUS(CGRT_ERROR_NOT_SUPPORTED, cgrt_graphs_draft(set, 3, nullptr, 0));  // no rebuild callback
  cgrt_graphs_destroy(set);
  set = nullptr;
  // The callback's user pointer is the engine's; route through a small indirection.
  DcpRebuild rb{&eng, nullptr, &cur};
  void *rb_ptr = &rb;
  o.draft_rebuild = dcp_rebuild;
  o.user = &rb_ptr;
  o.enqueue = [](void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *r = static_cast<DcpRebuild *>(*static_cast<void **>(user));
    return r->eng->enqueue(s, d->padded_rows, d->buffers);
  };
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  for (int t = 0; t < 4; t++) {
    int reqs = 1 + (int)(rng() % 32);
    auto bt = prepare(reqs, 1, 3);
    rb.bt = &bt;
    write_a(bt);
    int bucket = cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, reqs);
    CGRT_ASSERT_OK(cgrt_graphs_draft(set, reqs, nullptr, 0));
    eng.eager_reference(bt, eng.b, 3);
    expect_same(bt, bucket, "dcp draft fallback");
  }
  EXPECT_EQ(rb.calls, 4 * 2);
  EXPECT_EQ(stats().replays, 4u * 3u);
}

// ---- draft loops as a conditional WHILE node ---------------------------------------------

// Steps a WHILE draft loop takes (cgrt_graphs.h, cgrt_graphs_draft): step i runs when
// i < K and some request is active for it; rem empty: no draft_remaining buffer.
static int while_steps(const synth::Batch &bt, int K, int max_len, const std::vector<int32_t> &rem) {
  auto active = [&](int r, int i) {
    int s = std::min(bt.seq[r] + i - 1, max_len);  // seq_len before step i (i >= 1)
    bool len_ok = i == 0 ? bt.seq[r] > 0 : (s > 0 && s < max_len);
    return len_ok && (rem.empty() || rem[r] > i);
  };
  int n = 0;
  for (int i = 0; i < K; i++) {
    bool any = false;
    for (int r = 0; r < bt.reqs; r++) any = any || active(r, i);
    if (!any) break;
    n = i + 1;
  }
  return n;
}

class WhileDraftTest : public GraphsTest {
 protected:
  cgrt_buffer_desc wdescs[synth::NB + 1];
  CUdeviceptr remaining = 0;
  int K = 4;

  // A decode-only set with K-step draft loops, WHILE on; with_remaining registers a
  // draft_remaining buffer (id NB).
  void while_set(bool with_remaining, int checked = 0, cgrt_replay_mode mode = CGRT_REPLAY_POINTER_UPDATE) {
    cgrt_graphs_options o;
    eng.options(&o, descs);
    for (int i = 0; i < synth::NB; i++) wdescs[i] = descs[i];
    o.buffers = wdescs;
    if (with_remaining) {
      remaining = eng.alloc((size_t)eng.cfg.max_reqs * 4);
      ASSERT_NE(remaining, 0u);
      wdescs[synth::NB] = {"draft_remaining", remaining, (size_t)eng.cfg.max_reqs * 4, CGRT_BUFFER_IN};
      o.num_buffers = synth::NB + 1;
      o.meta.draft_remaining = synth::NB;
    }
    o.block_len = 0;
    o.draft_steps = K;
    o.draft_while = 1;
    o.checked_replay = checked;
    o.replay_mode = mode;
    make_set(&o);
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
    init_cur();
  }
  size_t while_buckets() {
    size_t n = 0;
    for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
      cgrt_bucket_info info{};
      info.size = sizeof info;
      EXPECT_EQ(cgrt_graphs_get_bucket(set, i, &info), CGRT_SUCCESS);
      n += info.draft_while && info.captured;
    }
    return n;
  }
  // One WHILE draft of a batch vs `expect_n` eager steps.
  void draft_and_check(const synth::Batch &bt, int expect_n, const std::vector<cgrt_binding> &bind,
                       const char *what) {
    SCOPED_TRACE(what);
    int bucket = cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, bt.reqs);
    uint64_t before = stats().draft_while_loops;
    CGRT_ASSERT_OK(cgrt_graphs_draft(set, bt.reqs, bind.data(), bind.size()));
    EXPECT_EQ(stats().draft_while_loops, before + 1) << "ran as a WHILE loop";
    eng.eager_reference(bt, eng.b, expect_n);
    expect_same(bt, bucket, what);
    // The host reads the number of steps taken back from the metadata.
    auto pos = eng.get<int64_t>(cur[synth::POS], 1);
    if (bt.seq[0] > 0) {
      EXPECT_EQ(pos[0] - bt.pos[0] + 1, expect_n) << "steps taken";
    }
  }
};

TEST_F(WhileDraftTest, WhileLoopEqualsKSingleSteps) {
  start();
  while_set(false);
  ASSERT_GT(while_buckets(), 0u);
  EXPECT_EQ(stats().draft_while_available, 1);
  for (int t = 0; t < 12; t++) {
    int reqs = 2 + (int)(rng() % 31);
    auto bt = prepare(reqs, 1, K);
    if (t % 3 == 0) bt.seq[0] = eng.cfg.max_model_len - 1;  // clamps; request 1 keeps going
    write_a(bt);
    ASSERT_EQ(while_steps(bt, K, eng.cfg.max_model_len, {}), K);
    draft_and_check(bt, K, {}, "K steps");
    if (HasFailure()) return;
  }
  EXPECT_EQ(stats().draft_loops, 12u);
  EXPECT_EQ(stats().draft_while_loops, 12u);
}

TEST_F(WhileDraftTest, StopsEarlyWhenEveryDraftEnded) {
  start();
  while_set(true);
  ASSERT_GT(while_buckets(), 0u);
  int max_len = eng.cfg.max_model_len;
  int seen_full = 0, seen_partial = 0, seen_none = 0;
  for (int t = 0; t < 24; t++) {
    int reqs = 1 + (int)(rng() % 32);
    auto bt = prepare(reqs, 1, K);
    std::vector<int32_t> rem(eng.cfg.max_reqs, 0);
    for (int r = 0; r < reqs; r++) rem[r] = (int32_t)(rng() % (unsigned)(K + 1));
    if (t % 4 == 1) {  // every request near the end of its context: ends by length
      for (int r = 0; r < reqs; r++) {
        bt.seq[r] = max_len - (int)(rng() % 3);
        bt.pos[r] = bt.seq[r] - 1;
        rem[r] = K;
      }
    }
    if (t % 4 == 2) rem.assign(rem.size(), 1);  // one step each
    eng.put(remaining, rem);
    write_a(bt);
    int n = while_steps(bt, K, max_len, rem);
    seen_full += n == K;
    seen_partial += n > 0 && n < K;
    seen_none += n == 0;
    if (n == 0) {  // no request wants a step: only the metadata kernels run
      CGRT_ASSERT_OK(cgrt_graphs_draft(set, reqs, nullptr, 0));
      ASSERT_EQ(sync(), CGRT_SUCCESS);
      auto out = eng.get<float>(cur[synth::OUT], (size_t)reqs);
      for (float v : out) EXPECT_EQ(v, 0.0f) << "no step ran";
      // Bring the reference's KV in line (nothing ran on either side).
      continue;
    }
    draft_and_check(bt, n, {}, ("early stop, steps " + std::to_string(n)).c_str());
    if (HasFailure()) return;
  }
  EXPECT_GT(seen_full, 0);
  EXPECT_GT(seen_partial, 2);
  // Every request done before the loop starts.
  auto bt = prepare(5, 1, K);
  write_a(bt);
  eng.put(remaining, std::vector<int32_t>(eng.cfg.max_reqs, 0));
  uint64_t loops = stats().draft_while_loops;
  CGRT_ASSERT_OK(cgrt_graphs_draft(set, 5, nullptr, 0));
  ASSERT_EQ(sync(), CGRT_SUCCESS);
  EXPECT_EQ(eng.get<float>(cur[synth::OUT], 5), std::vector<float>(5, 0.0f));
  EXPECT_EQ(stats().draft_while_loops, loops + 1);
}

TEST_F(WhileDraftTest, RebindingBeforeAWhileDraftMatchesEager) {
  start();
  while_set(false);
  ASSERT_GT(while_buckets(), 0u);
  auto bt = prepare(5, 1, K);
  write_a(bt);
  draft_and_check(bt, K, {}, "baseline");
  // Buffers read or written inside the body (x, y, z, out, kv), by the head and the body
  // (seq_lens, positions) and by the loop kernel (block_table).
  for (synth::Buf b : {synth::X, synth::Y, synth::Z, synth::OUT, synth::KV, synth::SEQ, synth::POS, synth::BT,
                       synth::WIN}) {
    const CUdeviceptr alt = move_to_copy(b);
    ASSERT_NE(alt, 0u);
    auto bt2 = prepare(5, 1, K);
    write_a(bt2);
    uint64_t before = patched();
    draft_and_check(bt2, K, {{(int)b, alt, 0}}, synth::kBufNames[b]);
    EXPECT_GT(patched(), before) << "nodes patched for " << synth::kBufNames[b];
    if (HasFailure()) return;
  }
  EXPECT_EQ(stats().reinstantiations, 0u) << "patched in place, inside the body too";
}

TEST_F(WhileDraftTest, ExecUpdateModeReinstantiatesOnMove) {
  start();
  while_set(false, 0, CGRT_REPLAY_EXEC_UPDATE);
  ASSERT_GT(while_buckets(), 0u);
  auto bt = prepare(6, 1, K);
  write_a(bt);
  draft_and_check(bt, K, {}, "baseline");
  const CUdeviceptr alt = move_to_copy(synth::X);
  ASSERT_NE(alt, 0u);
  auto bt2 = prepare(6, 1, K);
  write_a(bt2);
  draft_and_check(bt2, K, {{synth::X, alt, 0}}, "x moved");
  EXPECT_EQ(stats().reinstantiations, 1u);
}

TEST_F(WhileDraftTest, CountersCleanUnderCheckedReplay) {
  start();
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt, 4096));
  while_set(true, 1);
  ASSERT_GT(while_buckets(), 0u);
  for (int t = 0; t < 8; t++) {
    int reqs = 1 + (int)(rng() % 32);
    auto bt = prepare(reqs, 1, K);
    std::vector<int32_t> rem(eng.cfg.max_reqs, 0);
    for (int r = 0; r < reqs; r++) rem[r] = 1 + (int32_t)(rng() % (unsigned)K);
    eng.put(remaining, rem);
    write_a(bt);
    // Checked replay verifies the runtime's counters and the loop's step counter after
    // the launch (CGRT_ERROR_COUNTERS_DIRTY otherwise).
    draft_and_check(bt, while_steps(bt, K, eng.cfg.max_model_len, rem), {}, "checked");
    if (HasFailure()) return;
  }
  CGRT_ASSERT_OK(cgrt_counters_verify(rt));
}

static std::vector<std::string> g_wlog;
static void wlog_sink(void *, cgrt_log_level, const char *m) { g_wlog.push_back(m); }

TEST_F(WhileDraftTest, FallsBackToUnrolledWithoutConditionalNodes) {
  start(synth::Config(), 1);
  cgrt_fault_plan plan{};
  plan.size = sizeof plan;
  plan.symbol = "cuGraphConditionalHandleCreate";
  plan.result = CUDA_ERROR_NOT_SUPPORTED;
  plan.fail_at = 1;
  plan.sticky = 1;
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  g_wlog.clear();
  cgrt_set_log_callback(wlog_sink, nullptr, CGRT_LOG_INFO);
  while_set(false);  // capture succeeds: the unrolled loops serve
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  EXPECT_EQ(cgrt_fault_injected(), 1u) << "tried once, then the set stops asking";
  cgrt_fault_set(nullptr);
  size_t said = 0;
  for (const auto &m : g_wlog) said += m.find("WHILE draft loops unavailable") != std::string::npos;
  EXPECT_EQ(said, 1u) << "logged once";
  EXPECT_EQ(while_buckets(), 0u);
  EXPECT_EQ(stats().draft_while_available, 0);
  for (int t = 0; t < 4; t++) {
    int reqs = 1 + (int)(rng() % 32);
    auto bt = prepare(reqs, 1, K);
    write_a(bt);
    int bucket = cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, reqs);
    CGRT_ASSERT_OK(cgrt_graphs_draft(set, reqs, nullptr, 0));
    eng.eager_reference(bt, eng.b, K);
    expect_same(bt, bucket, "unrolled fallback");
  }
  EXPECT_EQ(stats().draft_loops, 4u);
  EXPECT_EQ(stats().draft_while_loops, 0u);
  // A second capture call does not retry.
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
}

TEST_F(WhileDraftTest, BodyNodeUpdateRefusedFallsBackToReinstantiation) {
  start(synth::Config(), 1);
  while_set(false);
  ASSERT_GT(while_buckets(), 0u);
  auto bt = prepare(5, 1, K);
  write_a(bt);
  draft_and_check(bt, K, {}, "baseline");  // num_reqs 5 patched into the head
  // x is read only inside the body: the first node update is the body's attention kernel.
  for (int t = 0; t < 3; t++) {
    const CUdeviceptr alt = move_to_copy(synth::X);
    ASSERT_NE(alt, 0u);
    // The first time, the driver refuses the update of the body node; from then on the
    // set re-instantiates the bucket on every move without asking again.
    cgrt_fault_plan plan{};
    plan.size = sizeof plan;
    plan.symbol = "cuGraphExecKernelNodeSetParams";
    plan.result = CUDA_ERROR_NOT_SUPPORTED;
    plan.fail_at = t == 0 ? 1 : 0;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    auto bt2 = prepare(5, 1, K);
    write_a(bt2);
    draft_and_check(bt2, K, {{synth::X, alt, 0}}, "x moved, body refused");
    EXPECT_EQ(cgrt_fault_injected(), t == 0 ? 1u : 0u);
    cgrt_fault_set(nullptr);
    EXPECT_EQ(stats().reinstantiations, (uint64_t)t + 1);
    if (HasFailure()) return;
  }
}

TEST_F(WhileDraftTest, FaultInjectionAcrossWhileCapture) {
  start(synth::Config(), 1);
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  int sizes[] = {8};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 1;
  o.draft_steps = K;
  o.draft_while = 1;
  init_cur();
  capture_faults(o, [&] {
    EXPECT_EQ(while_buckets(), 1u) << "the failed graph is captured now";
    auto bt = prepare(3, 1, K);
    write_a(bt);
    draft_and_check(bt, K, {}, "after a capture fault");
  });
}

}  // namespace cgrt_graphs_test
