// Replay and patching: replay equals eager, rebinding patches only the affected nodes,
// buckets catch up with moves made elsewhere, copy-in and exec-update replay, a driver
// fault at every call of a step that moves buffers.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

TEST_F(GraphsTest, ReplayEqualsEagerRandomBatchesBothModes) {
  start_set();
  for (int t = 0; t < 24; t++) {
    int reqs = 1 + (int)(rng() % 32);
    cgrt_graph_mode mode = t % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
    step_and_check(mode, reqs, {}, mode == CGRT_GRAPH_BLOCK ? "block" : "decode");
    if (HasFailure()) return;
  }
  cgrt_graphs_stats s = stats();
  EXPECT_EQ(s.steps, 24u);
  EXPECT_EQ(s.replays, 24u);
  EXPECT_EQ(s.eager_fallbacks, 0u);
}

TEST_F(GraphsTest, RebindingPatchesOnlyAffectedNodesIncludingForeignKernels) {
  start_set();
  step_and_check(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  // Nodes of the graph that reference each buffer (the bucket of 5 requests = 8 rows):
  // prepare(req_*, seq, pos, slot), attn(seq, pos, slot, x, kv, out), scale(out, y),
  // memcpy(z <- y), memset(scratch), scale(w_in, w_out).
  struct Case {
    synth::Buf buf;
    uint64_t nodes;
  } cases[] = {{synth::X, 1},   {synth::Y, 2},    {synth::Z, 1},    {synth::SCR, 1},
               {synth::WIN, 1}, {synth::WOUT, 1}, {synth::SEQ, 2},  {synth::KV, 1},
               {synth::OUT, 2}, {synth::BT, 1}};
  for (const Case &c : cases) {
    const CUdeviceptr alt = move_to_copy(c.buf);
    ASSERT_NE(alt, 0u);
    uint64_t before = patched();
    step_and_check(CGRT_GRAPH_DECODE, 5, {{(int)c.buf, alt, 0}}, synth::kBufNames[c.buf]);
    EXPECT_EQ(patched() - before, c.nodes) << "nodes patched for " << synth::kBufNames[c.buf];
    // A step without moves patches nothing.
    before = patched();
    step_and_check(CGRT_GRAPH_DECODE, 5, {{(int)c.buf, alt, 0}}, "same address again");
    EXPECT_EQ(patched() - before, 0u);
    if (HasFailure()) return;
  }
  // Another bucket catches up with every move at once.
  step_and_check(CGRT_GRAPH_BLOCK, 7, {}, "block bucket after moves");
  EXPECT_GE(stats().rebinds, 10u);
}

// A bucket that missed moves made through other buckets (a few, then 301) catches up with
// all of them at its next step. x has two copies of different contents; the eager
// reference holds the bound one's.
TEST_F(GraphsTest, BucketsCatchUpWithMovesMadeOnOtherBuckets) {
  for (int device_patch : {0, 1}) {
    SCOPED_TRACE(device_patch ? "device patching" : "host patching");
    start_set(CGRT_REPLAY_POINTER_UPDATE, device_patch);
    const size_t xbytes = eng.bytes[synth::X];
    CUdeviceptr xs[2] = {cur[synth::X], eng.alloc(xbytes)};
    ASSERT_NE(xs[1], 0u);
    std::vector<unsigned char> content[2] = {std::vector<unsigned char>(xbytes), std::vector<unsigned char>(xbytes)};
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    ASSERT_EQ(eng.drv->cuMemcpyDtoH(content[0].data(), xs[0], xbytes), CUDA_SUCCESS);
    eng.randomize(rng, xs[1], 0, xbytes / 4);
    ASSERT_EQ(eng.drv->cuMemcpyDtoH(content[1].data(), xs[1], xbytes), CUDA_SUCCESS);
    auto use = [&](int w) {
      cur[synth::X] = xs[w];
      eng.upload(eng.b[synth::X], content[w].data(), xbytes);
      return std::vector<cgrt_binding>{{synth::X, xs[w], 0}};
    };
    step_and_check(CGRT_GRAPH_DECODE, 5, use(1), "decode bucket of 8, x moved");
    step_and_check(CGRT_GRAPH_BLOCK, 3, use(0), "block bucket of 12, x moved back");
    // 301 moves on the decode bucket of 2 while the others wait.
    for (int i = 0; i < 301; i++) {
      const cgrt_binding b = {synth::X, xs[(i + 1) % 2], 0};
      CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, &b, 1));
    }
    sync_reference_kv();  // those steps had no eager twin
    step_and_check(CGRT_GRAPH_DECODE, 5, use(1), "decode bucket of 8 after 301 moves");
    step_and_check(CGRT_GRAPH_BLOCK, 3, use(1), "block bucket of 12 after 301 moves");
    step_and_check(CGRT_GRAPH_DECODE, 5, use(0), "decode bucket of 8, one more move");
    TearDown();
    if (HasFailure()) return;
  }
}

// Buckets exactly as many moves behind as the set's move log holds (256) catch up
// through the log: x moves once, at the log's oldest entry (to a copy of different
// content), out 254 times in between (back where it started), y once, at the newest
// entry. A missed oldest entry leaves x stale, a missed newest one writes the old y.
TEST_F(GraphsTest, MoveLogCatchUpAtItsCapacity) {
  for (int device_patch : {0, 1}) {
    SCOPED_TRACE(device_patch ? "device patching" : "host patching");
    start_set(CGRT_REPLAY_POINTER_UPDATE, device_patch);
    const size_t xbytes = eng.bytes[synth::X];
    const CUdeviceptr x1 = eng.alloc(xbytes), out1 = eng.alloc(eng.bytes[synth::OUT]),
                      y1 = eng.alloc(eng.bytes[synth::Y]);
    ASSERT_NE(x1, 0u);
    ASSERT_NE(out1, 0u);
    ASSERT_NE(y1, 0u);
    eng.randomize(rng, x1, 0, xbytes / 4);
    std::vector<unsigned char> x1_content(xbytes);
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    ASSERT_EQ(eng.drv->cuMemcpyDtoH(x1_content.data(), x1, xbytes), CUDA_SUCCESS);
    step_and_check(CGRT_GRAPH_DECODE, 5, {}, "decode bucket of 8 in step");
    const CUdeviceptr outs[2] = {cur[synth::OUT], out1};
    for (int i = 0; i < 256; i++) {
      const cgrt_binding b = i == 0     ? cgrt_binding{synth::X, x1, 0}
                             : i == 255 ? cgrt_binding{synth::Y, y1, 0}
                                        : cgrt_binding{synth::OUT, outs[i % 2], 0};
      CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 2, &b, 1));
    }
    // Those steps had no eager twin: bring the reference's KV cache, x and y in line.
    sync_reference_kv();
    ASSERT_EQ(eng.drv->cuMemcpyDtoDAsync(y1, eng.b[synth::Y], eng.bytes[synth::Y], nullptr), CUDA_SUCCESS);
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    eng.upload(eng.b[synth::X], x1_content.data(), xbytes);
    cur[synth::X] = x1;
    cur[synth::Y] = y1;
    const uint64_t patched_before = patched();
    step_and_check(CGRT_GRAPH_DECODE, 5, {}, "decode bucket of 8, 256 moves behind");
    step_and_check(CGRT_GRAPH_BLOCK, 3, {}, "block bucket of 12, 256 moves behind");
    if (!device_patch) {
      EXPECT_GT(patched(), patched_before) << "the buckets patched x and out on the host";
    }
    TearDown();
    if (HasFailure()) return;
  }
}

TEST_F(GraphsTest, CopyInReplay) {
  start_set(CGRT_REPLAY_COPY_IN);
  step_and_check(CGRT_GRAPH_DECODE, 6, {}, "baseline");
  CUdeviceptr x2 = eng.alloc(eng.bytes[synth::X]);
  CUdeviceptr y2 = eng.alloc(eng.bytes[synth::Y]);
  eng.randomize(rng, x2, eng.b[synth::X], eng.max_rows);
  // Inputs are copied into the static buffers, outputs copied out: read y from y2.
  auto bt = prepare(6, 1);
  write_a(bt);
  uint64_t before = patched();
  std::vector<cgrt_binding> bind = {{synth::X, x2, 0}, {synth::Y, y2, 0}};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, bind.data(), bind.size()));
  eng.eager_reference(bt, eng.b);
  ASSERT_EQ(sync(), CGRT_SUCCESS);
  EXPECT_EQ(eng.get<float>(y2, 6), eng.get<float>(eng.b[synth::Y], 6));
  EXPECT_EQ(eng.get<float>(eng.a[synth::OUT], 6), eng.get<float>(eng.b[synth::OUT], 6));
  EXPECT_EQ(patched() - before, 0u) << "copy-in replay never patches nodes";
  EXPECT_EQ(stats().copies, 3u);  // x in, y in (INOUT), y out
  CUdeviceptr big = eng.alloc(eng.bytes[synth::X] * 2);
  cgrt_binding too_big = {synth::X, big, eng.bytes[synth::X] * 2};
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, &too_big, 1));
}

TEST_F(GraphsTest, ExecUpdateReplayAndReinstantiateOnTopologyChange) {
  start_set(CGRT_REPLAY_EXEC_UPDATE);
  step_and_check(CGRT_GRAPH_DECODE, 3, {}, "baseline");
  CUdeviceptr x2 = eng.alloc(eng.bytes[synth::X]);
  eng.randomize(rng, x2, eng.b[synth::X], eng.max_rows);
  cur[synth::X] = x2;
  step_and_check(CGRT_GRAPH_DECODE, 3, {{synth::X, x2, 0}}, "exec update");
  EXPECT_EQ(stats().exec_updates, 1u);
  EXPECT_EQ(stats().reinstantiations, 0u);
  step_and_check(CGRT_GRAPH_DECODE, 3, {{synth::X, x2, 0}}, "no move: no update");
  EXPECT_EQ(stats().exec_updates, 1u);
  eng.extra_node = 1;  // the re-capture now has another node: the update is refused
  CUdeviceptr x3 = eng.alloc(eng.bytes[synth::X]);
  eng.randomize(rng, x3, eng.b[synth::X], eng.max_rows);
  cur[synth::X] = x3;
  step_and_check(CGRT_GRAPH_DECODE, 3, {{synth::X, x3, 0}}, "re-instantiate");
  EXPECT_EQ(stats().reinstantiations, 1u);
  step_and_check(CGRT_GRAPH_DECODE, 2, {}, "after re-instantiation");
}

// Every driver call of a step that moves buffers fails once in turn; the next step
// succeeds and matches eager.
void GraphsTest::fault_step(int device_patch) {
  start(synth::Config(), 1);
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  o.device_patch = device_patch;
  init_cur();
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  step_and_check(CGRT_GRAPH_DECODE, 3, {}, "baseline");
  CUdeviceptr xs[2] = {eng.alloc(eng.bytes[synth::X]), eng.alloc(eng.bytes[synth::Y])};
  CUdeviceptr ys[2] = {eng.alloc(eng.bytes[synth::Y]), eng.alloc(eng.bytes[synth::Y])};
  cgrt_fault_plan plan{};
  plan.size = sizeof plan;
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  std::vector<cgrt_binding> bind = {{synth::X, xs[0], 0}, {synth::Y, ys[0], 0}};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 5, bind.data(), bind.size()));
  unsigned long n = cgrt_fault_calls();
  cgrt_fault_set(nullptr);
  // Host patching: attn, scale and memcpy node updates + metadata + launch; device
  // patching: the memcpy node + launch (the kernel nodes go through the mailbox).
  ASSERT_GE(n, device_patch ? 2u : 4u);
  sync_reference_kv();  // that step had no eager twin
  for (unsigned long i = 1; i <= n; i++) {
    int w = (int)(i % 2);
    eng.randomize(rng, xs[w], eng.b[synth::X], eng.max_rows);
    bind = {{synth::X, xs[w], 0}, {synth::Y, ys[w], 0}};
    cur[synth::X] = xs[w];
    cur[synth::Y] = ys[w];
    int reqs = 1 + (int)(i % 7);
    plan.fail_at = i;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    cgrt_status st = cgrt_graphs_step(set, CGRT_GRAPH_DECODE, reqs, bind.data(), bind.size());
    std::string sym = cgrt_fault_last_symbol();
    cgrt_fault_set(nullptr);
    EXPECT_TRUE(st == CGRT_SUCCESS || st == CGRT_ERROR_DRIVER) << i << " " << sym << " " << cgrt_status_name(st);
    // A step that ran (the fault fell past its calls) had no eager twin.
    sync_reference_kv();
    // The same step again succeeds and matches eager.
    step_and_check(CGRT_GRAPH_DECODE, reqs, bind, "after a step fault");
    if (HasFailure()) {
      ADD_FAILURE() << "fault at call " << i << " (" << sym << ")";
      return;
    }
  }
}

TEST_F(GraphsTest, FaultInjectionAcrossPatchAndLaunch) { fault_step(0); }
TEST_F(GraphsTest, FaultInjectionAcrossDevicePatchAndLaunch) { fault_step(1); }

}  // namespace cgrt_graphs_test
