// Graph capture and replay through the public API (include/cgrt/cgrt_graphs.h), on the
// driver CGRT_DRIVER selects: the emulation in CI, the real driver on an H200.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/graphs/synth_engine.h"

using synth::Engine;

namespace {

class GraphsTest : public ::testing::Test {
 protected:
  cgrt_runtime *rt = nullptr;
  Engine eng;
  cgrt_graphs *set = nullptr;
  cgrt_buffer_desc descs[synth::NB];
  std::mt19937 rng{1234};

  void start(synth::Config cfg = synth::Config(), int fault = 0) {
    rt = cgrt_test::make_runtime(fault);
    ASSERT_NE(rt, nullptr);
    ASSERT_TRUE(eng.init(rt, cfg)) << "engine setup failed";
    eng.randomize(rng, eng.a.p[synth::X], eng.b.p[synth::X], eng.max_rows);
    eng.randomize(rng, eng.a.p[synth::WIN], eng.b.p[synth::WIN], eng.max_rows);
  }
  void TearDown() override {
    cgrt_fault_set(nullptr);
    if (set) {
      EXPECT_EQ(cgrt_graphs_destroy(set), CGRT_SUCCESS);
    }
    set = nullptr;
    eng.destroy();
    if (rt) cgrt_runtime_destroy(rt);
    rt = nullptr;
  }
  void make_set(const cgrt_graphs_options *o) {
    CGRT_ASSERT_OK(cgrt_graphs_create(rt, o, &set));
  }
  void default_set(cgrt_replay_mode mode = CGRT_REPLAY_POINTER_UPDATE, int device_patch = 0) {
    cgrt_graphs_options o;
    eng.options(&o, descs);
    o.replay_mode = mode;
    o.device_patch = device_patch;
    make_set(&o);
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  }
  // A runtime, the synthetic engine, a captured default set and cur = the a-side buffers.
  void start_set(cgrt_replay_mode mode = CGRT_REPLAY_POINTER_UPDATE, int device_patch = 0) {
    start();
    default_set(mode, device_patch);
    init_cur();
  }
  cgrt_status sync() { return cgrt_runtime_synchronize(rt); }
  // Steps that ran without an eager twin: copy the replayed KV cache to the reference's.
  void sync_reference_kv() {
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    ASSERT_EQ(eng.drv->cuMemcpyDtoDAsync(eng.b.p[synth::KV], cur[synth::KV], eng.a.bytes[synth::KV], nullptr),
              CUDA_SUCCESS);
    ASSERT_EQ(sync(), CGRT_SUCCESS);
  }

  // Current addresses of the set's buffers (a, as moved by bindings).
  std::vector<CUdeviceptr> cur;

  // Prepares one step: zeroes OUT in both copies, writes the per-request inputs.
  synth::Engine::Batch prepare(int reqs, int k, int headroom = 0) {
    auto bt = eng.random_batch(rng, reqs, k, headroom);
    std::vector<float> zero((size_t)eng.max_rows, 0.0f);
    eng.put(cur[synth::OUT], zero);
    eng.put(eng.b.p[synth::OUT], zero);
    return bt;
  }
  void write_a(const synth::Engine::Batch &bt) {
    eng.put(cur[synth::REQ_SEQ], bt.seq);
    eng.put(cur[synth::REQ_POS], bt.pos);
    eng.put(cur[synth::BT], bt.bt);
  }

  // Compares replayed results (at cur) with the eager reference (b).
  void expect_same(const synth::Engine::Batch &bt, int bucket_rows, const char *what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(sync(), CGRT_SUCCESS) << cgrt_last_error();
    int rows = bt.reqs * bt.k;
    using synth::Buf;
    for (Buf f : {synth::OUT, synth::Y, synth::Z, synth::WOUT}) {
      auto va = eng.get<float>(cur[f], rows), vb = eng.get<float>(eng.b.p[f], rows);
      EXPECT_EQ(va, vb) << "buffer " << synth::kNames[f] << " rows " << rows;
    }
    size_t kvn = eng.a.bytes[synth::KV] / 4;
    EXPECT_EQ(eng.get<float>(cur[synth::KV], kvn), eng.get<float>(eng.b.p[synth::KV], kvn)) << "kv cache";
    EXPECT_EQ(eng.get<int32_t>(cur[synth::SEQ], rows), eng.get<int32_t>(eng.b.p[synth::SEQ], rows));
    EXPECT_EQ(eng.get<int64_t>(cur[synth::POS], rows), eng.get<int64_t>(eng.b.p[synth::POS], rows));
    EXPECT_EQ(eng.get<int64_t>(cur[synth::SLOT], rows), eng.get<int64_t>(eng.b.p[synth::SLOT], rows));
    if (bucket_rows > rows) {  // padding rows are inert
      auto seq = eng.get<int32_t>(cur[synth::SEQ], bucket_rows);
      auto slot = eng.get<int64_t>(cur[synth::SLOT], bucket_rows);
      auto out = eng.get<float>(cur[synth::OUT], bucket_rows);
      for (int i = rows; i < bucket_rows; i++) {
        EXPECT_EQ(seq[i], 0) << "padding row " << i;
        EXPECT_EQ(slot[i], -1) << "padding row " << i;
        EXPECT_EQ(out[i], 0.0f) << "padding row " << i;
      }
    }
  }

  // One random step in `mode` through the set vs the eager reference.
  void step_and_check(cgrt_graph_mode mode, int reqs, const std::vector<cgrt_binding> &bind,
                      const char *what) {
    int k = mode == CGRT_GRAPH_BLOCK ? eng.cfg.block_len : 1;
    auto bt = prepare(reqs, k);
    write_a(bt);
    int bucket = cgrt_graphs_bucket_rows(set, mode, reqs);
    CGRT_ASSERT_OK(cgrt_graphs_step(set, mode, reqs, bind.data(), bind.size()));
    eng.eager_reference(bt, eng.b.p);
    expect_same(bt, bucket, what);
  }
  void init_cur() { cur.assign(eng.a.p, eng.a.p + synth::NB); }
  // A new copy of buffer f holding what the eager reference's copy holds; it becomes the
  // current address (the caller binds it). 0 on failure (a test failure is recorded).
  CUdeviceptr move_to_copy(synth::Buf f) {
    const CUdeviceptr alt = eng.alloc(eng.a.bytes[f]);
    std::vector<unsigned char> bytes(eng.a.bytes[f]);
    if (alt == 0 || sync() != CGRT_SUCCESS ||
        eng.drv->cuMemcpyDtoH(bytes.data(), eng.b.p[f], bytes.size()) != CUDA_SUCCESS) {
      ADD_FAILURE() << "copying " << synth::kNames[f];
      return 0;
    }
    eng.upload(alt, bytes.data(), bytes.size());
    cur[f] = alt;
    return alt;
  }
  uint64_t patched() {
    cgrt_graphs_stats s{};
    s.size = sizeof s;
    EXPECT_EQ(cgrt_graphs_get_stats(set, &s), CGRT_SUCCESS);
    return s.nodes_patched;
  }
  cgrt_graphs_stats stats() {
    cgrt_graphs_stats s{};
    s.size = sizeof s;
    EXPECT_EQ(cgrt_graphs_get_stats(set, &s), CGRT_SUCCESS);
    return s;
  }
  // Buckets whose kernel nodes are patched on the device.
  size_t device_patched_buckets() {
    size_t n = 0;
    for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
      cgrt_bucket_info b{};
      b.size = sizeof b;
      EXPECT_EQ(cgrt_graphs_get_bucket(set, i, &b), CGRT_SUCCESS);
      n += b.device_patch ? 1 : 0;
    }
    return n;
  }
  void fault_capture(int device_patch);
  void capture_faults(const cgrt_graphs_options &o, const std::function<void()> &after);
  void fault_step(int device_patch);
  void draft_loop(int device_patch);
};

TEST_F(GraphsTest, DefaultBucketsAndDispatch) {
  start();
  default_set();
  // decode: 1, 2, 4, 8, 16, 24, 32 (max_num_seqs 32); block k=4: multiples of 4 up to 128.
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 1), 1);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 3), 4);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 9), 16);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 17), 24);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 32), 32);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_BLOCK, 1), 4);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_BLOCK, 3), 16);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_BLOCK, 5), 24);
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_BLOCK, 32), 128);
  size_t n = cgrt_graphs_bucket_count(set);
  int prev = 1 << 30, decode = 0, block = 0;
  for (size_t i = 0; i < n; i++) {
    cgrt_bucket_info b{};
    b.size = sizeof b;
    CGRT_ASSERT_OK(cgrt_graphs_get_bucket(set, i, &b));
    EXPECT_TRUE(b.captured);
    EXPECT_GE(b.nodes, 6u);  // metadata + attn + scale + memcpy + memset + scale
    if (b.mode == CGRT_GRAPH_BLOCK) {
      EXPECT_EQ(b.rows % 4, 0);
      if (block++ == 0) prev = 1 << 30;
    } else {
      decode++;
    }
    EXPECT_LT(b.rows, prev) << "largest first";
    prev = b.rows;
  }
  EXPECT_EQ(decode, 7);
  EXPECT_EQ(block, 2 + 15);  // 4, 8, 16, 24, ..., 128
  cgrt_graphs_stats s = stats();
  EXPECT_EQ(s.buckets, n);
  EXPECT_GT(s.capture_seconds, 0.0);
}

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
    step_and_check(CGRT_GRAPH_DECODE, 5, {{(int)c.buf, alt, 0}}, synth::kNames[c.buf]);
    EXPECT_EQ(patched() - before, c.nodes) << "nodes patched for " << synth::kNames[c.buf];
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
    step_and_check(CGRT_GRAPH_DECODE, 5, {{(int)c.buf, alt, 0}}, synth::kNames[c.buf]);
    cgrt_graphs_stats after = stats();
    EXPECT_EQ(after.nodes_patched - before.nodes_patched, c.host) << synth::kNames[c.buf];
    EXPECT_EQ(after.device_nodes_patched - before.device_nodes_patched, c.device) << synth::kNames[c.buf];
    EXPECT_EQ(after.device_patches - before.device_patches, c.device ? 1u : 0u) << synth::kNames[c.buf];
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
      CUdeviceptr alt = eng.alloc(eng.a.bytes[f]);
      ASSERT_NE(alt, 0u);
      ASSERT_EQ(sync(), CGRT_SUCCESS);
      ASSERT_EQ(eng.drv->cuMemcpyDtoDAsync(alt, cur[f], eng.a.bytes[f], nullptr), CUDA_SUCCESS);
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
  cgrt_graphs_options o;
  cgrt_graphs_options_init(&o);
  o.max_num_seqs = 4;
  o.max_model_len = 16;
  o.enqueue = ManyBuffers::enqueue;
  o.user = &mb;
  o.buffers = bufs.data();
  o.num_buffers = bufs.size();
  int sizes[] = {4};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 1;
  o.device_patch = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
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

// A bucket that missed moves made through other buckets (a few, then 301) catches up with
// all of them at its next step. x has two copies of different contents; the eager
// reference holds the bound one's.
TEST_F(GraphsTest, BucketsCatchUpWithMovesMadeOnOtherBuckets) {
  for (int device_patch : {0, 1}) {
    SCOPED_TRACE(device_patch ? "device patching" : "host patching");
    start_set(CGRT_REPLAY_POINTER_UPDATE, device_patch);
    const size_t xbytes = eng.a.bytes[synth::X];
    CUdeviceptr xs[2] = {cur[synth::X], eng.alloc(xbytes)};
    ASSERT_NE(xs[1], 0u);
    std::vector<unsigned char> content[2] = {std::vector<unsigned char>(xbytes), std::vector<unsigned char>(xbytes)};
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    ASSERT_EQ(eng.drv->cuMemcpyDtoH(content[0].data(), xs[0], xbytes), CUDA_SUCCESS);
    eng.randomize(rng, xs[1], 0, xbytes / 4);
    ASSERT_EQ(eng.drv->cuMemcpyDtoH(content[1].data(), xs[1], xbytes), CUDA_SUCCESS);
    auto use = [&](int w) {
      cur[synth::X] = xs[w];
      eng.upload(eng.b.p[synth::X], content[w].data(), xbytes);
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
    const size_t xbytes = eng.a.bytes[synth::X];
    const CUdeviceptr x1 = eng.alloc(xbytes), out1 = eng.alloc(eng.a.bytes[synth::OUT]),
                      y1 = eng.alloc(eng.a.bytes[synth::Y]);
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
    ASSERT_EQ(eng.drv->cuMemcpyDtoDAsync(y1, eng.b.p[synth::Y], eng.a.bytes[synth::Y], nullptr), CUDA_SUCCESS);
    ASSERT_EQ(sync(), CGRT_SUCCESS);
    eng.upload(eng.b.p[synth::X], x1_content.data(), xbytes);
    cur[synth::X] = x1;
    cur[synth::Y] = y1;
    const uint64_t patched_before = patched();
    step_and_check(CGRT_GRAPH_DECODE, 5, {}, "decode bucket of 8, 256 moves behind");
    step_and_check(CGRT_GRAPH_BLOCK, 3, {}, "block bucket of 12, 256 moves behind");
    if (!device_patch) EXPECT_GT(patched(), patched_before) << "the buckets patched x and out on the host";
    TearDown();
    if (HasFailure()) return;
  }
}

TEST_F(GraphsTest, CopyInReplay) {
  start_set(CGRT_REPLAY_COPY_IN);
  step_and_check(CGRT_GRAPH_DECODE, 6, {}, "baseline");
  CUdeviceptr x2 = eng.alloc(eng.a.bytes[synth::X]);
  CUdeviceptr y2 = eng.alloc(eng.a.bytes[synth::Y]);
  eng.randomize(rng, x2, eng.b.p[synth::X], eng.max_rows);
  // Inputs are copied into the static buffers, outputs copied out: read y from y2.
  auto bt = prepare(6, 1);
  write_a(bt);
  uint64_t before = patched();
  std::vector<cgrt_binding> bind = {{synth::X, x2, 0}, {synth::Y, y2, 0}};
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, bind.data(), bind.size()));
  eng.eager_reference(bt, eng.b.p);
  ASSERT_EQ(sync(), CGRT_SUCCESS);
  EXPECT_EQ(eng.get<float>(y2, 6), eng.get<float>(eng.b.p[synth::Y], 6));
  EXPECT_EQ(eng.get<float>(eng.a.p[synth::OUT], 6), eng.get<float>(eng.b.p[synth::OUT], 6));
  EXPECT_EQ(patched() - before, 0u) << "copy-in replay never patches nodes";
  EXPECT_EQ(stats().copies, 3u);  // x in, y in (INOUT), y out
  CUdeviceptr big = eng.alloc(eng.a.bytes[synth::X] * 2);
  cgrt_binding too_big = {synth::X, big, eng.a.bytes[synth::X] * 2};
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, &too_big, 1));
}

TEST_F(GraphsTest, ExecUpdateReplayAndReinstantiateOnTopologyChange) {
  start_set(CGRT_REPLAY_EXEC_UPDATE);
  step_and_check(CGRT_GRAPH_DECODE, 3, {}, "baseline");
  CUdeviceptr x2 = eng.alloc(eng.a.bytes[synth::X]);
  eng.randomize(rng, x2, eng.b.p[synth::X], eng.max_rows);
  cur[synth::X] = x2;
  step_and_check(CGRT_GRAPH_DECODE, 3, {{synth::X, x2, 0}}, "exec update");
  EXPECT_EQ(stats().exec_updates, 1u);
  EXPECT_EQ(stats().reinstantiations, 0u);
  step_and_check(CGRT_GRAPH_DECODE, 3, {{synth::X, x2, 0}}, "no move: no update");
  EXPECT_EQ(stats().exec_updates, 1u);
  eng.extra_node = 1;  // the re-capture now has another node: the update is refused
  CUdeviceptr x3 = eng.alloc(eng.a.bytes[synth::X]);
  eng.randomize(rng, x3, eng.b.p[synth::X], eng.max_rows);
  cur[synth::X] = x3;
  step_and_check(CGRT_GRAPH_DECODE, 3, {{synth::X, x3, 0}}, "re-instantiate");
  EXPECT_EQ(stats().reinstantiations, 1u);
  step_and_check(CGRT_GRAPH_DECODE, 2, {}, "after re-instantiation");
}

TEST_F(GraphsTest, CheckedReplayCatchesWorkspaceReallocatedAfterCapture) {
  start();
  cgrt_tensor_desc t{};
  t.ndim = 1;
  t.shape[0] = eng.max_rows;
  t.dtype = CGRT_DTYPE_F32;
  CUdeviceptr ws = 0;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.w", &t, 1, &ws));
  eng.ws_ptr = ws;
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  auto bt = prepare(4, 1);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  // The workspace grows (not locked): new storage, the old address is freed.
  t.shape[0] = 4 * eng.max_rows;
  CUdeviceptr ws2 = 0;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.w", &t, 1, &ws2));
  ASSERT_NE(ws2, ws);
  std::vector<float> sentinel((size_t)eng.max_rows, 5.0f);
  eng.put(eng.a.p[synth::OUT], sentinel);
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("gt_scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parameter 2"), std::string::npos) << msg;
  EXPECT_EQ(eng.get<float>(eng.a.p[synth::OUT], 4), std::vector<float>(4, 5.0f)) << "nothing launched";
}

TEST_F(GraphsTest, CheckedReplayCatchesUndeclaredRange) {
  start();
  CUdeviceptr h = eng.alloc((size_t)eng.max_rows * 4);
  eng.ws_ptr = h;
  cgrt_range r = {h, (size_t)eng.max_rows * 4, "host scratch"};
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, &r, 1));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  auto bt = prepare(2, 4);
  write_a(bt);
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, nullptr, 0));  // the host freed it
  CGRT_EXPECT_STATUS(CGRT_ERROR_STALE_POINTER, cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
  CGRT_ASSERT_OK(cgrt_graphs_set_ranges(set, &r, 1));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_BLOCK, 2, nullptr, 0));
}

TEST_F(GraphsTest, CheckedReplayVerifiesCountersAfterLaunch) {
  start();
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt, 4096));
  CUdeviceptr counters = 0;
  size_t bytes = 0;
  CGRT_ASSERT_OK(cgrt_counters_get(rt, &counters, &bytes));
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.checked_replay = 1;
  o.block_len = 0;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 4, {}, "clean counters");
  // A step whose kernels leave a counter non-zero (captured that way).
  eng.dirty_counter = counters + 12;
  CGRT_ASSERT_OK(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 4));
  CGRT_EXPECT_STATUS(CGRT_ERROR_COUNTERS_DIRTY, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("checked replay"), std::string::npos) << msg;
  uint32_t zero = 0;
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, counters + 12, &zero, 4));
  eng.dirty_counter = 0;
  CGRT_ASSERT_OK(cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 4));
  CGRT_ASSERT_OK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 4, nullptr, 0));
}

static std::vector<std::string> g_log;
static void log_sink(void *, cgrt_log_level, const char *m) { g_log.push_back(m); }

TEST_F(GraphsTest, CaptureReportsProgressThroughTheLog) {
  start();
  g_log.clear();
  cgrt_set_log_callback(log_sink, nullptr, CGRT_LOG_INFO);
  default_set();
  cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  size_t per_bucket = 0, summary = 0;
  for (const auto &m : g_log) {
    per_bucket += m.find("captured decode bucket") != std::string::npos ||
                  m.find("captured block bucket") != std::string::npos;
    summary += m.find("captured 24 graphs (0 failed)") != std::string::npos;
  }
  EXPECT_EQ(per_bucket, cgrt_graphs_bucket_count(set));
  EXPECT_EQ(summary, 1u);
}

TEST_F(GraphsTest, CaptureFailureLeavesSetAndStreamUsable) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  make_set(&o);
  eng.fail_at_rows = 16;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_capture(set));
  std::string msg = cgrt_last_error();
  EXPECT_NE(msg.find("16 rows"), std::string::npos) << msg;
  EXPECT_NE(msg.find("enqueue callback"), std::string::npos) << msg;
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 10), 24) << "16 skipped";
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 10, {}, "other buckets usable");
  eng.fail_at_rows = -1;
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));  // captures the missing bucket on the same stream
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 10), 16);
  step_and_check(CGRT_GRAPH_DECODE, 10, {}, "recaptured bucket");

  // A workspace growth inside the callback during capture.
  eng.grow_workspace = 1;
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURE_FAILED, cgrt_graphs_recapture(set, CGRT_GRAPH_DECODE, 8));
  msg = cgrt_last_error();
  EXPECT_NE(msg.find("CGRT_ERROR_CAPTURING"), std::string::npos) << msg;
  eng.grow_workspace = 0;
  step_and_check(CGRT_GRAPH_DECODE, 12, {}, "after a failed re-capture");
  EXPECT_EQ(cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 7), 16) << "8 is gone";
}

TEST_F(GraphsTest, EagerFallbackPastLargestBucket) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  int sizes[] = {4, 1, 2};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 3;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  init_cur();
  step_and_check(CGRT_GRAPH_DECODE, 6, {}, "eager fallback");
  step_and_check(CGRT_GRAPH_BLOCK, 3, {}, "block eager fallback");
  EXPECT_EQ(stats().eager_fallbacks, 2u);
  step_and_check(CGRT_GRAPH_DECODE, 3, {}, "replay");
  EXPECT_EQ(stats().replays, 1u);
  cgrt_graphs_destroy(set);
  set = nullptr;
  o.fail_past_largest = 1;
  make_set(&o);
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  CGRT_EXPECT_STATUS(CGRT_ERROR_NO_BUCKET, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 6, nullptr, 0));
}

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
  const size_t xbytes = eng.a.bytes[synth::X];
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
    eng.upload(eng.b.p[synth::X], content[w].data(), xbytes);
    const cgrt_binding bind = {synth::X, cur[synth::X], 0};
    CGRT_ASSERT_OK(cgrt_graphs_draft(set, reqs, &bind, 1));
    eng.eager_reference(bt, eng.b.p, 3);
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
  const synth::Engine::Batch *bt;
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
    eng.eager_reference(bt, eng.b.p, 3);
    expect_same(bt, bucket, "dcp draft fallback");
  }
  EXPECT_EQ(rb.calls, 4 * 2);
  EXPECT_EQ(stats().replays, 4u * 3u);
}

// ---- draft loops as a conditional WHILE node ---------------------------------------------

// Steps a WHILE draft loop takes (cgrt_graphs.h, cgrt_graphs_draft): step i runs when
// i < K and some request is active for it; rem empty: no draft_remaining buffer.
static int while_steps(const synth::Engine::Batch &bt, int K, int max_len, const std::vector<int32_t> &rem) {
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
  void draft_and_check(const synth::Engine::Batch &bt, int expect_n, const std::vector<cgrt_binding> &bind,
                       const char *what) {
    SCOPED_TRACE(what);
    int bucket = cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, bt.reqs);
    uint64_t before = stats().draft_while_loops;
    CGRT_ASSERT_OK(cgrt_graphs_draft(set, bt.reqs, bind.data(), bind.size()));
    EXPECT_EQ(stats().draft_while_loops, before + 1) << "ran as a WHILE loop";
    eng.eager_reference(bt, eng.b.p, expect_n);
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
    draft_and_check(bt2, K, {{(int)b, alt, 0}}, synth::kNames[b]);
    EXPECT_GT(patched(), before) << "nodes patched for " << synth::kNames[b];
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
    eng.eager_reference(bt, eng.b.p, K);
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

// ---- fault injection -------------------------------------------------------------------

// Every driver call of a capture fails once in turn; the set stays usable.
void GraphsTest::fault_capture(int device_patch) {
  start(synth::Config(), 1);
  cgrt_graphs_options o;
  eng.options(&o, descs);
  o.block_len = 0;
  o.device_patch = device_patch;
  int sizes[] = {8, 4};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 2;
  init_cur();
  capture_faults(o, [&] { step_and_check(CGRT_GRAPH_DECODE, 3, {}, "after a capture fault"); });
}

// Fails each driver call of cgrt_graphs_capture once in turn, on a fresh set each time:
// the capture returns a capture status with a message, a second capture succeeds, and
// `after` checks that the set works.
void GraphsTest::capture_faults(const cgrt_graphs_options &o, const std::function<void()> &after) {
  make_set(&o);
  cgrt_fault_plan plan{};
  plan.size = sizeof plan;
  CGRT_ASSERT_OK(cgrt_fault_set(&plan));
  CGRT_ASSERT_OK(cgrt_graphs_capture(set));
  unsigned long n = cgrt_fault_calls();
  cgrt_fault_set(nullptr);
  ASSERT_GT(n, 10u);
  cgrt_graphs_destroy(set);
  set = nullptr;
  for (unsigned long i = 1; i <= n; i++) {
    make_set(&o);
    plan.fail_at = i;
    CGRT_ASSERT_OK(cgrt_fault_set(&plan));
    cgrt_status st = cgrt_graphs_capture(set);
    std::string sym = cgrt_fault_last_symbol();
    cgrt_fault_set(nullptr);
    EXPECT_TRUE(st == CGRT_SUCCESS || st == CGRT_ERROR_CAPTURE_FAILED || st == CGRT_ERROR_DRIVER ||
                st == CGRT_ERROR_OUT_OF_MEMORY)
        << "call " << i << " (" << sym << "): " << cgrt_status_name(st) << ": " << cgrt_last_error();
    if (st != CGRT_SUCCESS) {
      EXPECT_STRNE(cgrt_last_error(), "") << "call " << i;
    }
    CGRT_ASSERT_OK(cgrt_graphs_capture(set));
    after();
    cgrt_graphs_destroy(set);
    set = nullptr;
    if (HasFailure()) {
      ADD_FAILURE() << "fault at call " << i << " (" << sym << ")";
      return;
    }
  }
}

TEST_F(GraphsTest, FaultInjectionAcrossCaptureInstantiate) { fault_capture(0); }
TEST_F(GraphsTest, FaultInjectionAcrossCaptureWithDevicePatch) { fault_capture(1); }

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
  CUdeviceptr xs[2] = {eng.alloc(eng.a.bytes[synth::X]), eng.alloc(eng.a.bytes[synth::Y])};
  CUdeviceptr ys[2] = {eng.alloc(eng.a.bytes[synth::Y]), eng.alloc(eng.a.bytes[synth::Y])};
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
    eng.randomize(rng, xs[w], eng.b.p[synth::X], eng.max_rows);
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

TEST_F(GraphsTest, InvalidArguments) {
  start();
  cgrt_graphs_options o;
  eng.options(&o, descs);
  cgrt_graphs *s = nullptr;
  o.enqueue = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &s));
  eng.options(&o, descs);
  descs[synth::SEQ].bytes = 8;  // too small for the largest bucket
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_create(rt, &o, &s));
  EXPECT_NE(std::string(cgrt_last_error()).find("seq_lens"), std::string::npos);
  eng.options(&o, descs);
  make_set(&o);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 0, nullptr, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 33, nullptr, 0));
  cgrt_binding bad = {99, 1, 0};
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 1, &bad, 1));
  CGRT_EXPECT_STATUS(CGRT_ERROR_NOT_SUPPORTED, cgrt_graphs_draft(set, 1, nullptr, 0));
  EXPECT_EQ(cgrt_graphs_destroy(nullptr), CGRT_SUCCESS);
}

static void scale_ref_public(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  int n = *(const int *)(const void *)(p + off[0]);
  const float *in = (const float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[1]));
  float *out = (float *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[2]));
  float a = *(const float *)(const void *)(p + off[3]);
  for (int i = 0; i < n; i++) out[i] = in[i] * a + 1.0f;
}

TEST_F(GraphsTest, ModuleApiLoadsAndLaunchesAHostKernel) {
  start();
  size_t sizes[4] = {4, 8, 8, 4};
  CGRT_ASSERT_OK(cgrt_emulated_kernel_register("gt_scale", 4, sizes, scale_ref_public));
  cgrt_module *m = nullptr;
  CGRT_ASSERT_OK(cgrt_module_load(rt, cgrt_test_graphs_fatbin[0].image, &m));
  CUfunction f = nullptr;
  CGRT_ASSERT_OK(cgrt_module_function(m, "gt_scale", &f));
  CUfunction none = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_module_function(m, "no_such_kernel", &none));
  std::vector<float> in(64), out(64);
  for (int i = 0; i < 64; i++) in[i] = (float)i;
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt, eng.a.p[synth::WIN], in.data(), 256));
  int n = 64;
  CUdeviceptr pin = eng.a.p[synth::WIN], pout = eng.a.p[synth::WOUT];
  float a = 2.0f;
  void *args[] = {&n, &pin, &pout, &a};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args));
  CGRT_ASSERT_OK(cgrt_stream_synchronize(rt, nullptr));
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, out.data(), pout, 256));
  for (int i = 0; i < 64; i++) EXPECT_EQ(out[i], 2.0f * i + 1.0f);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_launch_kernel(rt, f, 0, 1, 1, 64, 1, 1, 0, nullptr, args));
  CGRT_ASSERT_OK(cgrt_module_unload(m));
  EXPECT_EQ(cgrt_module_unload(nullptr), CGRT_SUCCESS);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_module_unload(m));  // unloaded twice
  CUfunction f2 = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_module_function(m, "x", &f2));
}

TEST_F(GraphsTest, RuntimeDestroyTakesLiveSets) {
  start();
  default_set();
  eng.destroy();
  cgrt_graphs *dead = set;
  EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS);  // destroys the set, logs a warning
  rt = nullptr;
  set = nullptr;
  // The set went with the runtime: its handle is no longer live, and nothing reads it.
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_step(dead, CGRT_GRAPH_DECODE, 1, nullptr, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_destroy(dead));
}

TEST_F(GraphsTest, DestroyedSetIsRejected) {
  start();
  default_set();
  cgrt_graphs *dead = set;
  CGRT_ASSERT_OK(cgrt_graphs_destroy(set));
  set = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_destroy(dead));
  EXPECT_NE(std::string(cgrt_last_error()).find("not a live graph set"), std::string::npos);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_step(dead, CGRT_GRAPH_DECODE, 1, nullptr, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_graphs_capture(dead));
  EXPECT_EQ(cgrt_graphs_bucket_rows(dead, CGRT_GRAPH_DECODE, 1), 0);
  EXPECT_EQ(cgrt_graphs_bucket_count(dead), 0u);
}

}  // namespace
