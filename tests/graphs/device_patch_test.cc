// Device patching: kernel nodes rewritten on the device by the patch node.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

// device_patch: the same moves as above; kernel nodes are rewritten on the device by the
// patch node (moved buffers delivered through the mailbox, no driver call), memcpy/memset
// nodes still on the host.
TEST_F(GraphsTest, DevicePatchRebindingMatchesEagerWithOneHostUpdatePerStep) {
  start();
  default_set(CGRT_REPLAY_POINTER_UPDATE, 1);
  if (device_patched_buckets() == 0 && getenv("CUDA_FORCE_PTX_JIT") != nullptr)
    GTEST_SKIP() << "CUDA_FORCE_PTX_JIT loads PTX only: device patching needs cgrt's SASS image "
                    "(kernels/graph_patch.cu is linked with the device runtime)";
  ASSERT_EQ(device_patched_buckets(), cgrt_graphs_bucket_count(set))
      << "every bucket should patch on the device (emulation and CUDA 12.4+ on sm_90a)";
  for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
    cgrt_bucket_info b{};
    b.size = sizeof b;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, i, &b));
    EXPECT_EQ(b.host_patch_nodes, 2u) << "the memcpy (Z <- Y) and memset (SCR) nodes, bucket " << i;
    EXPECT_EQ(b.table_bytes, 0u) << "the site table is in the patch node's parameters";
    EXPECT_GT(b.patch_param_bytes, 0u);
  }
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 5, {}, "baseline");
  struct Case {
    synth::Buf buf;
    uint64_t host, device;  // node updates by the host / kernel nodes rewritten on the device
  } cases[] = {{synth::X, 0, 1},   {synth::Y, 1, 1},    {synth::Z, 1, 0},   {synth::SCR, 1, 0},
               {synth::WIN, 0, 1}, {synth::WOUT, 0, 1}, {synth::SEQ, 0, 2}, {synth::KV, 0, 1},
               {synth::OUT, 0, 2}, {synth::BT, 0, 1}};
  for (const Case &c : cases) {
    const CUdeviceptr alt = move_to_copy(c.buf);
    ASSERT_NE(alt, 0u);
    cgrt_graphs_stats before = stats();
    step_and_check(CGRT_GRAPH_DECODE, 5, {{(int)c.buf, alt, 0}}, synth::kBufNames[c.buf]);
    cgrt_graphs_stats after = stats();
    EXPECT_EQ(after.nodes_patched - before.nodes_patched, c.host) << synth::kBufNames[c.buf];
    EXPECT_EQ(after.device_nodes_patched - before.device_nodes_patched, c.device) << synth::kBufNames[c.buf];
    EXPECT_EQ(after.device_patches - before.device_patches, c.device ? 1u : 0u) << synth::kBufNames[c.buf];
    before = after;
    step_and_check(CGRT_GRAPH_DECODE, 5, {{(int)c.buf, alt, 0}}, "same address again");
    after = stats();
    EXPECT_EQ(after.nodes_patched + after.device_patches + after.device_nodes_patched,
              before.nodes_patched + before.device_patches + before.device_nodes_patched);
    if (HasFailure()) return;
  }
  // num_reqs changes within a bucket (5 -> 7 requests, bucket 8): the metadata node is
  // rewritten on the device, nothing on the host but the patch node.
  cgrt_graphs_stats before = stats();
  step_and_check(CGRT_GRAPH_DECODE, 7, {}, "num_reqs change");
  cgrt_graphs_stats after = stats();
  EXPECT_EQ(after.nodes_patched, before.nodes_patched);
  EXPECT_EQ(after.device_patches - before.device_patches, 1u);
  EXPECT_EQ(after.device_nodes_patched - before.device_nodes_patched, 1u);
  // Several buffers at once and every bucket of both modes, against eager.
  for (int t = 0; t < 16; t++) {
    std::vector<cgrt_binding> bind;
    for (synth::Buf f : {synth::X, synth::OUT, synth::Y, synth::KV}) {
      if (rng() % 2) continue;
      CUdeviceptr alt = eng.alloc(eng.bytes[f]);
      ASSERT_NE(alt, 0u);
      ASSERT_EQ(sync(), CGRT_SUCCESS);
      ASSERT_EQ(eng.drv->cuMemcpyDtoDAsync(alt, cur[f], eng.bytes[f], nullptr), CUDA_SUCCESS);
      cur[f] = alt;
      bind.push_back({(int)f, alt, 0});
    }
    int reqs = 1 + (int)(rng() % 32);
    cgrt_graph_mode mode = t % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
    step_and_check(mode, reqs, bind, mode == CGRT_GRAPH_BLOCK ? "block, moved" : "decode, moved");
    if (HasFailure()) return;
  }
  EXPECT_LE(stats().device_patches, stats().steps);
}

// More moved buffers than the patch kernel's 256 threads read in one pass.
struct ManyBuffers {
  static constexpr int kPairs = 130;  // 260 buffers, 130 kernel nodes
  static constexpr int kN = 64;
  CUfunction f_scale = nullptr;
  const cgrt__driver *drv = nullptr;
  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *mb = static_cast<ManyBuffers *>(user);
    const cgrt__driver *drv = mb->drv;
    for (int i = 0; i < kPairs; i++) {
      int n = kN;
      CUdeviceptr in = d->buffers[2 * i], out = d->buffers[2 * i + 1];
      float a = (float)(i + 1);
      void *args[] = {&n, &in, &out, &a};
      if (drv->cuLaunchKernel(mb->f_scale, 1, 1, 1, 64, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS)
        return CGRT_ERROR_DRIVER;
    }
    return CGRT_SUCCESS;
  }
};

TEST_F(GraphsTest, DevicePatchMovesManyBuffersAtOnce) {
  start();
  ManyBuffers mb;
  mb.f_scale = eng.f_scale;
  mb.drv = eng.drv;
  const int nb = 2 * ManyBuffers::kPairs;
  std::vector<cgrt_buffer_desc> bufs(nb);
  std::vector<std::string> names(nb);
  std::vector<CUdeviceptr> alt(nb);
  for (int i = 0; i < nb; i++) {
    names[i] = (i % 2 ? "out" : "in") + std::to_string(i / 2);
    bufs[i].name = names[i].c_str();
    bufs[i].ptr = eng.alloc(ManyBuffers::kN * 4);
    bufs[i].bytes = ManyBuffers::kN * 4;
    bufs[i].dir = i % 2 ? CGRT_BUFFER_OUT : CGRT_BUFFER_IN;
    alt[i] = eng.alloc(ManyBuffers::kN * 4);
    ASSERT_NE(bufs[i].ptr, 0u);
    ASSERT_NE(alt[i], 0u);
  }
  one_bucket_set(ManyBuffers::enqueue, &mb, bufs.data(), bufs.size(), 1);
  if (HasFatalFailure()) return;
  if (device_patched_buckets() == 0 && getenv("CUDA_FORCE_PTX_JIT") != nullptr)
    GTEST_SKIP() << "CUDA_FORCE_PTX_JIT loads PTX only: device patching needs cgrt's SASS image";
  ASSERT_EQ(device_patched_buckets(), 1u);
  std::vector<cgrt_binding> bind;
  for (int round = 0; round < 3; round++) {
    // Move every buffer (round 0, 2: to alt; round 1: back), with fresh inputs.
    bind.clear();
    for (int i = 0; i < nb; i++) bind.push_back({i, round % 2 ? bufs[i].ptr : alt[i], 0});
    std::vector<std::vector<float>> in(ManyBuffers::kPairs, std::vector<float>(ManyBuffers::kN));
    for (int p = 0; p < ManyBuffers::kPairs; p++) {
      for (int j = 0; j < ManyBuffers::kN; j++) in[p][j] = (float)(rng() % 1000) / 8.0f;
      CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, bind[2 * p].ptr, in[p].data(), ManyBuffers::kN * 4));
      std::vector<float> zero(ManyBuffers::kN, 0.0f);
      CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, bind[2 * p + 1].ptr, zero.data(), ManyBuffers::kN * 4));
    }
    cgrt_graphs_stats before = stats();
    CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, bind.data(), bind.size()));
    ASSERT_EQ(sync(), CGRT_SUCCESS) << cgrt_last_error();
    cgrt_graphs_stats after = stats();
    EXPECT_EQ(after.device_patches - before.device_patches, 1u);
    EXPECT_EQ(after.device_nodes_patched - before.device_nodes_patched, (uint64_t)ManyBuffers::kPairs);
    EXPECT_EQ(after.nodes_patched, before.nodes_patched);
    for (int p = 0; p < ManyBuffers::kPairs; p++) {
      std::vector<float> out(ManyBuffers::kN);
      CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, out.data(), bind[2 * p + 1].ptr, ManyBuffers::kN * 4));
      for (int j = 0; j < ManyBuffers::kN; j++)
        ASSERT_EQ(out[j], in[p][j] * (float)(p + 1) + 1.0f) << "round " << round << " pair " << p << " i " << j;
    }
  }
}

// A chain of `nodes` scale kernels over two buffers: out = in * (i + 1) + 1 for node i,
// so after the step out = in * nodes + 1. Two pointer sites per node.
struct Chain {
  static constexpr int kN = 64;
  int nodes = 0;
  CUfunction f_scale = nullptr;
  const cgrt__driver *drv = nullptr;
  static cgrt_status enqueue(void *user, CUstream s, const cgrt_batch_desc *d) {
    auto *c = static_cast<Chain *>(user);
    for (int i = 0; i < c->nodes; i++) {
      int n = kN;
      CUdeviceptr in = d->buffers[0], out = d->buffers[1];
      float a = (float)(i + 1);
      void *args[] = {&n, &in, &out, &a};
      if (c->drv->cuLaunchKernel(c->f_scale, 1, 1, 1, 64, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS)
        return CGRT_ERROR_DRIVER;
    }
    return CGRT_SUCCESS;
  }
};

// The site table travels in the patch node's kernel parameters (the smallest size class
// that holds it: no device memory of cgrt's own), or in device memory when it is larger
// than the largest class (32760 bytes: more than 1363 sites); both patch alike, and the
// patch node's launch count (the mailbox's `consumed`) stays in step through direct
// launches of cgrt_graphs_bucket_exec between steps.
TEST_F(GraphsTest, DevicePatchTableInParametersOrDeviceMemory) {
  start();
  for (int nodes : {4, 100, 700}) {
    SCOPED_TRACE("nodes " + std::to_string(nodes));
    Chain c;
    c.nodes = nodes;
    c.f_scale = eng.f_scale;
    c.drv = eng.drv;
    cgrt_buffer_desc bufs[2];
    CUdeviceptr a[2], b[2];
    const char *names[2] = {"in", "out"};
    for (int i = 0; i < 2; i++) {
      a[i] = eng.alloc(Chain::kN * 4);
      b[i] = eng.alloc(Chain::kN * 4);
      ASSERT_NE(a[i], 0u);
      ASSERT_NE(b[i], 0u);
      bufs[i].name = names[i];
      bufs[i].ptr = a[i];
      bufs[i].bytes = Chain::kN * 4;
      bufs[i].dir = i ? CGRT_BUFFER_OUT : CGRT_BUFFER_IN;
    }
    one_bucket_set(Chain::enqueue, &c, bufs, 2, 1);
    if (HasFatalFailure()) return;
    if (device_patched_buckets() == 0 && getenv("CUDA_FORCE_PTX_JIT") != nullptr)
      GTEST_SKIP() << "CUDA_FORCE_PTX_JIT loads PTX only: device patching needs cgrt's SASS image";
    ASSERT_EQ(device_patched_buckets(), 1u);
    cgrt_bucket_info info{};
    info.size = sizeof info;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, 0, &info));
    // group starts of 2 buffers + num_reqs (4 words, 8-aligned), then 24 bytes per site
    const size_t table = 16 + 24 * 2 * (size_t)nodes;
    if (table + 24 <= 32760) {
      EXPECT_EQ(info.table_bytes, 0u) << "the table is in the parameters";
      size_t want = 0;  // the smallest class of kernels/graph_patch.h that holds it
      for (size_t c : {1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32760})
        if (want == 0 && table + 24 <= c) want = c;
      EXPECT_EQ(info.patch_param_bytes, want);
    } else {
      EXPECT_EQ(info.table_bytes, table) << "too large for the parameters: device memory, exactly";
      EXPECT_EQ(info.patch_param_bytes, 0u);
    }
    EXPECT_GT(info.pinned_bytes, 0u);
    CUstream s = cgrt_graphs_stream(set);
    for (int round = 0; round < 6; round++) {
      // Rounds 1, 3, 5 move both buffers after three direct launches of the bucket (with
      // the addresses and num_reqs of the last step); rounds 2 and 4 keep them.
      static const int side[6] = {0, 1, 1, 0, 0, 1};
      CUdeviceptr in = side[round] ? b[0] : a[0], out = side[round] ? b[1] : a[1];
      if (round % 2 == 1) {
        CUgraphExec x = nullptr;
        CGRT_ASSERT_OK(cgrt_graphs_bucket_exec(set, 0, 3, &x));
        for (int k = 0; k < 3; k++) ASSERT_EQ(eng.drv->cuGraphLaunch(x, s), CUDA_SUCCESS);
      }
      std::vector<float> vin(Chain::kN);
      for (int j = 0; j < Chain::kN; j++) vin[j] = (float)(rng() % 64) / 4.0f;
      ASSERT_EQ(sync(), CGRT_SUCCESS);
      eng.put(in, vin);
      eng.put(out, std::vector<float>(Chain::kN, -1.0f));
      cgrt_binding bind[2] = {{0, in, 0}, {1, out, 0}};
      cgrt_graphs_stats before = stats();
      CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1 + round % 4, bind, 2));
      ASSERT_EQ(sync(), CGRT_SUCCESS) << cgrt_last_error();
      cgrt_graphs_stats after = stats();
      EXPECT_EQ(after.nodes_patched, before.nodes_patched) << "nothing patched on the host";
      std::vector<float> got = eng.get<float>(out, Chain::kN);
      for (int j = 0; j < Chain::kN; j++)
        ASSERT_EQ(got[j], vin[j] * (float)nodes + 1.0f) << "round " << round << " i " << j;
    }
    // Steps queued back to back, each moving both buffers (on a GPU the later launches'
    // moves are in the mailbox before the earlier launches run): the last step of each
    // side leaves its result.
    std::vector<float> va(Chain::kN), vb(Chain::kN);
    for (int j = 0; j < Chain::kN; j++) {
      va[j] = (float)j;
      vb[j] = (float)(2 * j + 1);
    }
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    eng.put(a[0], va);
    eng.put(b[0], vb);
    for (int k = 0; k < 8; k++) {
      cgrt_binding bind[2] = {{0, k % 2 ? b[0] : a[0], 0}, {1, k % 2 ? b[1] : a[1], 0}};
      CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1 + k % 4, bind, 2));
    }
    ASSERT_EQ(sync(), CGRT_SUCCESS) << cgrt_last_error();
    std::vector<float> ga = eng.get<float>(a[1], Chain::kN), gb = eng.get<float>(b[1], Chain::kN);
    for (int j = 0; j < Chain::kN; j++) {
      ASSERT_EQ(ga[j], va[j] * (float)nodes + 1.0f) << "queued, side a, i " << j;
      ASSERT_EQ(gb[j], vb[j] * (float)nodes + 1.0f) << "queued, side b, i " << j;
    }
    cgrt_graphs_destroy(set);
    set = nullptr;
  }
}

TEST_F(GraphsTest, DevicePatchRejectsIncompatibleOptions) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.device_patch = 1;
  o.replay_mode = CGRT_REPLAY_EXEC_UPDATE;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &set));
  EXPECT_NE(std::string(cgrt_last_error()).find("device_patch"), std::string::npos) << cgrt_last_error();
  EXPECT_EQ(set, nullptr);
  o.replay_mode = CGRT_REPLAY_POINTER_UPDATE;
  o.device_patch = 2;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &set));
  EXPECT_EQ(set, nullptr);
}

}  // namespace cgrt_graphs_test
