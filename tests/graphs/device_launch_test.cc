// Device-launched replay (options.device_launch): steps launched by cgrt's launcher kernel
// on the device, their completion read from pinned memory (cgrt_graphs_synchronize).
#include <unistd.h>

#include "cgrt/cgrt_fault.h"
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

class DeviceLaunchTest : public GraphsTest {
 protected:
  // The default set over the synthetic engine with device launch (and device_patch as
  // given), captured; cur = the a-side buffers. Skips where the device lacks the
  // launcher (the status says why).
  void dl_set(int device_patch, const std::function<void(cgrt_graphs_options &)> &edit = {}) {
    cgrt_graphs_options o;
    eng.options(&o, descs);
    o.device_patch = device_patch;
    o.device_launch = 1;
    if (edit) edit(o);
    cgrt_status st = cgrt_graphs_create(rt, &o, &set);
    if (st == CGRT_ERROR_NOT_SUPPORTED && getenv("CUDA_FORCE_PTX_JIT") != nullptr)
      GTEST_SKIP() << "CUDA_FORCE_PTX_JIT loads PTX only: the launcher needs cgrt's SASS image: "
                   << cgrt_last_error();
    ASSERT_EQ(st, CGRT_SUCCESS) << cgrt_last_error();
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
    init_cur();
  }
  size_t device_launched_buckets() {
    size_t n = 0;
    for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
      cgrt_bucket_info b{};
      b.size = sizeof b;
      EXPECT_EQ(cgrt_graphs_get_bucket(set, i, &b), CGRT_SUCCESS);
      n += b.device_launch ? 1 : 0;
    }
    return n;
  }
  // One random step through the set, waited for with cgrt_graphs_synchronize (the
  // device-launched step is ordered with no stream), against the eager reference.
  void dl_step(cgrt_graph_mode mode, int reqs, const std::vector<cgrt_binding> &bind, const char *what) {
    int k = mode == CGRT_GRAPH_BLOCK ? eng.cfg.block_len : 1;
    auto bt = prepare(reqs, k);
    write_a(bt);
    int bucket = cgrt_graphs_bucket_rows(set, mode, reqs);
    CGRT_ASSERT_OK(cgrt_graphs_step(set, mode, reqs, bind.data(), bind.size()));
    CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
    eng.eager_reference(bt, eng.b);
    expect_same(bt, bucket, what);
  }
};

// Every bucket is device-launched; steps with moved buffers (patched on the device and,
// for the memcpy/memset nodes, on the host with a re-upload), num_reqs changes and both
// modes match the eager reference; each step counts one device launch.
TEST_F(DeviceLaunchTest, StepsMatchEagerWithMovesAndModes) {
  start();
  dl_set(1);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_EQ(device_launched_buckets(), cgrt_graphs_bucket_count(set));
  dl_step(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  cgrt_graphs_stats s0 = stats();
  EXPECT_EQ(s0.device_launches, 1u);
  EXPECT_GE(s0.launcher_starts, 1u);
  for (synth::Buf f : {synth::X, synth::Y, synth::Z, synth::SCR, synth::KV, synth::OUT, synth::BT}) {
    const CUdeviceptr alt = move_to_copy(f);
    ASSERT_NE(alt, 0u);
    dl_step(CGRT_GRAPH_DECODE, 5, {{(int)f, alt, 0}}, synth::kBufNames[f]);
    if (HasFailure()) return;
  }
  dl_step(CGRT_GRAPH_DECODE, 7, {}, "num_reqs change");
  for (int t = 0; t < 12; t++) {
    std::vector<cgrt_binding> bind;
    for (synth::Buf f : {synth::X, synth::OUT, synth::Y}) {
      if (rng() % 2) continue;
      const CUdeviceptr alt = move_to_copy(f);
      ASSERT_NE(alt, 0u);
      bind.push_back({(int)f, alt, 0});
    }
    cgrt_graph_mode mode = t % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
    dl_step(mode, 1 + (int)(rng() % 32), bind, mode == CGRT_GRAPH_BLOCK ? "block" : "decode");
    if (HasFailure()) return;
  }
  cgrt_graphs_stats s = stats();
  EXPECT_EQ(s.device_launches, s.steps) << "every step of a device-launched bucket";
  EXPECT_GT(s.last_device_step_ns, 0u) << "the last step's GPU time";
  EXPECT_LT(s.last_device_step_ns, 10000000000ull);
  EXPECT_EQ(s.replays, s.steps);
}

// Without device patching every move is a host patch: the step waits for the device,
// patches, re-uploads, then triggers; results still match.
TEST_F(DeviceLaunchTest, HostPatchedMovesReuploadBeforeTheTrigger) {
  start();
  dl_set(0);
  if (HasFatalFailure() || IsSkipped()) return;
  for (synth::Buf f : {synth::X, synth::OUT, synth::KV, synth::Y}) {
    const CUdeviceptr alt = move_to_copy(f);
    ASSERT_NE(alt, 0u);
    const uint64_t patched0 = patched();
    dl_step(CGRT_GRAPH_DECODE, 3, {{(int)f, alt, 0}}, synth::kBufNames[f]);
    EXPECT_GT(patched() - patched0, 0u) << synth::kBufNames[f];
    if (HasFailure()) return;
  }
  EXPECT_EQ(stats().device_launches, stats().steps);
}

// A device-launched step re-uploads its executable (cuGraphUpload, then a wait for the
// stream) only when the host patched one of its nodes: moves that the patch node delivers
// on the device cost the host no driver call for the bucket (the trigger's whole point).
// Each buffer is moved alone; the uploads of the step are counted through the fault
// injector.
TEST_F(DeviceLaunchTest, DevicePatchedMovesDoNotReupload) {
  start(synth::Config(), 1);
  dl_set(1);
  if (HasFatalFailure() || IsSkipped()) return;
  dl_step(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  int device_only = 0, host_patched = 0;
  for (synth::Buf f : {synth::X, synth::Y, synth::Z, synth::SCR, synth::KV, synth::OUT, synth::BT}) {
    const CUdeviceptr alt = move_to_copy(f);
    ASSERT_NE(alt, 0u);
    const cgrt_graphs_stats s0 = stats();
    cgrt_fault_plan plan = {};
    plan.size = sizeof plan;
    plan.symbol = "cuGraphUpload"; /* counted, never failed (fail_at 0) */
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    dl_step(CGRT_GRAPH_DECODE, 5, {{(int)f, alt, 0}}, synth::kBufNames[f]);
    const unsigned long uploads = cgrt_fault_calls();
    CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
    if (HasFailure()) return;
    const cgrt_graphs_stats s1 = stats();
    const uint64_t host = s1.nodes_patched - s0.nodes_patched;
    const uint64_t device = s1.device_nodes_patched - s0.device_nodes_patched;
    if (host > 0) {
      host_patched++;
      EXPECT_EQ(uploads, 1u) << synth::kBufNames[f] << ": " << host << " nodes patched on the host";
    } else {
      EXPECT_EQ(uploads, 0u) << synth::kBufNames[f] << ": " << device << " nodes patched on the device only";
      if (device > 0) device_only++;
    }
  }
  EXPECT_GT(device_only, 0) << "no buffer was patched on the device alone: the test checked nothing";
  EXPECT_GT(host_patched, 0) << "no buffer needed a host patch (memcpy / memset nodes)";
}

// Steps triggered back to back before one wait (each reads the KV cache the previous one
// wrote), and host-launched work of the set between device-launched steps (an eager step
// past the largest bucket, a bare launch of cgrt_graphs_bucket_exec), each ordered after
// the steps before it. The host writes inputs only after cgrt_graphs_synchronize (the
// contract: a device-launched step is ordered with no stream).
TEST_F(DeviceLaunchTest, QueuedStepsAndHostLaunchesKeepTheirOrder) {
  start();
  static int sizes[] = {4, 8};
  dl_set(1, [](cgrt_graphs_options &o) {
    o.capture_sizes = sizes;
    o.num_capture_sizes = 2;
  });
  if (HasFatalFailure() || IsSkipped()) return;
  {  // 40 steps on the same inputs, past the 31 that may be queued, then one wait
    auto bt = prepare(4, 1);
    write_a(bt);
    for (int i = 0; i < 40; i++) CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));  // before the host writes inputs again
    for (int i = 0; i < 40; i++) eng.eager_reference(bt, eng.b);
    expect_same(bt, 4, "40 queued steps");
    if (HasFailure()) return;
  }
  // A device-launched step, then at once a step past the largest bucket (8), which runs
  // eagerly on the replay stream and reads the KV cache the first one wrote: the inputs
  // of both are written before either.
  {
    auto bt = prepare(12, 1);
    write_a(bt);
    synth::Batch first = bt;
    first.reqs = 4;
    ASSERT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 12), 0);
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 12, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
    eng.eager_reference(first, eng.b);
    eng.eager_reference(bt, eng.b);
    expect_same(bt, 0, "device-launched, then eager");
  }
  // A device-launched step, a bare host launch of its bucket (8 rows, index 0), and a
  // device-launched step again, each after the one before.
  {
    auto bt = prepare(6, 1);
    write_a(bt);
    CUgraphExec x = nullptr;
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_graphs_bucket_exec(set, 0, 1, &x));
    ASSERT_EQ(eng.drv->cuGraphLaunch(x, cgrt_graphs_stream(set)), CUDA_SUCCESS);
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, nullptr, 0));
    CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
    for (int i = 0; i < 3; i++) eng.eager_reference(bt, eng.b);
    expect_same(bt, 8, "device, bare host launch, device");
  }
  cgrt_graphs_stats s = stats();
  EXPECT_EQ(s.eager_fallbacks, 1u);
  EXPECT_EQ(s.device_launches, s.steps - 1);
  EXPECT_EQ(s.replays, s.steps - 1 + 0u) << "bare launches are not counted";
}

// A bucket the driver refuses to instantiate for device launch keeps the host launch;
// device- and host-launched buckets mix in one set.
TEST_F(DeviceLaunchTest, RefusedBucketKeepsTheHostLaunch) {
  start(synth::Config(), 1);
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.symbol = "cuGraphInstantiateWithFlags";
  plan.fail_at = 2;  // 1: the scheduler graph (create); 2: the first bucket's device-launch try
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  dl_set(1);
  const unsigned long injected = cgrt_fault_injected();
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_EQ(injected, 1u);
  ASSERT_EQ(device_launched_buckets() + 1, cgrt_graphs_bucket_count(set));
  cgrt_bucket_info b{};
  b.size = sizeof b;
  CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, 0, &b));
  EXPECT_EQ(b.device_launch, 0) << "the first bucket captured";
  EXPECT_EQ(b.captured, 1);
  for (int t = 0; t < 10; t++) {
    dl_step(CGRT_GRAPH_DECODE, 1 + (int)(rng() % 32), {}, "mixed");
    if (HasFailure()) return;
  }
  cgrt_graphs_stats s = stats();
  EXPECT_LT(s.device_launches, s.steps);
}

// The launcher's start fails: the step returns CGRT_ERROR_DRIVER naming it and is not
// triggered (nothing of it runs); the next step starts the launcher and runs.
TEST_F(DeviceLaunchTest, FailedLauncherStartIsAStatus) {
  start(synth::Config(), 1);
  dl_set(1);
  if (HasFatalFailure() || IsSkipped()) return;
  dl_step(CGRT_GRAPH_DECODE, 3, {}, "before");
  CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
  cgrt_fault_plan plan = {};
  plan.size = sizeof plan;
  plan.symbol = "cuGraphLaunch";
  plan.fail_at = 1;
  // The launcher exits between steps only after its idle time: wait it out so that the
  // next step must start it.
  usleep(20000);
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  cgrt_status st = cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0);
  std::string msg = cgrt_last_error();
  const unsigned long injected = cgrt_fault_injected();
  CGRT_ASSERT_OK(cgrt_fault_set(nullptr));
  ASSERT_EQ(injected, 1u);
  EXPECT_EQ(st, CGRT_ERROR_DRIVER);
  EXPECT_NE(msg.find("starting the launcher"), std::string::npos) << msg;
  dl_step(CGRT_GRAPH_DECODE, 4, {}, "after the failed start");
}

TEST_F(DeviceLaunchTest, OptionsAreChecked) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.device_launch = 2;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &set));
  EXPECT_NE(std::string(cgrt_last_error()).find("device_launch 2"), std::string::npos) << cgrt_last_error();
  o.device_launch = 1;
  o.replay_mode = CGRT_REPLAY_COPY_IN;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &set));
  EXPECT_NE(std::string(cgrt_last_error()).find("CGRT_REPLAY_POINTER_UPDATE"), std::string::npos);
  o.replay_mode = CGRT_REPLAY_POINTER_UPDATE;
  o.device_launch_idle_us = 60000001u;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &set));
  EXPECT_EQ(set, nullptr);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_synchronize(nullptr));
}

// A set without device launch: cgrt_graphs_synchronize waits for its replay stream.
TEST_F(DeviceLaunchTest, SynchronizeWithoutDeviceLaunchWaitsForTheStream) {
  start_set();
  auto bt = prepare(3, 1);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_graphs_synchronize(set));
  EXPECT_EQ(stats().device_launches, 0u);
  EXPECT_EQ(stats().launcher_starts, 0u);
  eng.eager_reference(bt, eng.b);
  expect_same(bt, cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 3), "host launch");
}

}  // namespace cgrt_graphs_test
