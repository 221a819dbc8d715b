// The DCP step inside a graph set (cgrt_graphs.h) on every rank: captured per bucket from
// the set's enqueue callback (warm-up and capture meet the other ranks), the ranks agree
// on keeping the graphs, and replays with the queries and outputs rebound to other
// buffers give the single-rank reference of the new queries.
#include <random>

#include "cgrt/cgrt_graphs.h"
#include "tests/dcp/dcp_harness.h"

namespace dcp_test {
namespace {

enum { BUF_Q, BUF_OUT, BUF_LSE };

// The set's enqueue callback: one DCP step over the buffers' current addresses.
cgrt_status enqueue(void *user, CUstream stream, const cgrt_batch_desc *batch) {
  Rank *k = static_cast<Rank *>(user);
  cgrt_dcp_args a = k->a;
  a.q = batch->buffers[BUF_Q];
  a.out = batch->buffers[BUF_OUT];
  a.lse = batch->buffers[BUF_LSE];
  a.num_rows = batch->padded_rows;
  return cgrt_dcp_step(k->g, stream, &a);
}

class DcpGraphs : public Harness {
 protected:
  void SetUp() override {
    if (max_world() < 2) GTEST_SKIP() << "DCP needs 2 GPUs (or the emulation)";
  }
};

TEST_F(DcpGraphs, CapturedPerBucketAndReplayedWithRebinding) {
  for (cgrt_dcp_merge merge : {CGRT_DCP_MERGE_ALL_TO_ALL, CGRT_DCP_MERGE_REDUCE_SCATTER}) {
    SCOPED_TRACE(merge);
    Batch b;
    b.world = 2;
    b.merge = merge;
    b.lens = {120, 0, 31, 64};
    b.fill(41);
    Batch b2 = b;  // the same KV, other queries
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    for (auto &x : b2.q) x = f2bf(uni(rng));
    const Result ref = reference(b), ref2 = reference(b2);
    const cgrt_dcp_id id = new_id();
    std::vector<Result> got(b.world), got2(b.world);
    ranks(b.world, [&](int r) {
      Rank k;
      setup(k, b, r, id);
      if (!k.g) return;
      const cgrt__driver *d = k.t.rt->drv;
      // Other buffers for the second step: its queries, and outputs elsewhere.
      const std::vector<uint16_t> q2 = rank_q(b2, r, false);
      const CUdeviceptr q_alt = k.t.alloc(q2.size() * 2), out_alt = k.t.alloc((size_t)b.rows() * b.heads * DV * 2),
                        lse_alt = k.t.alloc((size_t)b.rows() * b.heads * 4);
      k.t.put(q_alt, q2.data(), q2.size() * 2);
      const cgrt_buffer_desc bufs[] = {
          {"q", k.t.q, q2.size() * 2, CGRT_BUFFER_IN},
          {"out", k.t.out, (size_t)b.rows() * b.heads * DV * 2, CGRT_BUFFER_OUT},
          {"lse", k.t.lse, (size_t)b.rows() * b.heads * 4, CGRT_BUFFER_OUT},
      };
      const int sizes[] = {2, 4};
      cgrt_graphs_options o;
      cgrt_graphs_options_init(&o);
      o.max_num_seqs = b.rows();
      o.max_model_len = b.max_len();
      o.num_heads = b.heads;
      o.dcp_world_size = b.world;
      o.capture_sizes = sizes;
      o.num_capture_sizes = 2;
      o.enqueue = enqueue;
      o.user = &k;
      o.buffers = bufs;
      o.num_buffers = 3;
      cgrt_graphs *set = nullptr;
      ASSERT_EQ(cgrt_graphs_create(k.t.rt, &o, &set), CGRT_SUCCESS) << cgrt_last_error();
      const cgrt_status cst = cgrt_graphs_capture(set);
      EXPECT_EQ(cst, CGRT_SUCCESS) << cgrt_last_error();
      int all_ok = 0;
      ASSERT_EQ(cgrt_dcp_agree(k.g, cst == CGRT_SUCCESS, &all_ok), CGRT_SUCCESS) << cgrt_last_error();
      ASSERT_EQ(all_ok, 1);
      // Replay at the captured addresses, then with every buffer moved.
      ASSERT_EQ(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, b.rows(), nullptr, 0), CGRT_SUCCESS) << cgrt_last_error();
      ASSERT_EQ(cgrt_dcp_wait(k.g, cgrt_graphs_stream(set)), CGRT_SUCCESS) << cgrt_last_error();
      got[r] = fetch(k, b);
      const cgrt_binding moved[] = {{BUF_Q, q_alt, q2.size() * 2},
                                    {BUF_OUT, out_alt, (size_t)b.rows() * b.heads * DV * 2},
                                    {BUF_LSE, lse_alt, (size_t)b.rows() * b.heads * 4}};
      ASSERT_EQ(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, b.rows(), moved, 3), CGRT_SUCCESS) << cgrt_last_error();
      ASSERT_EQ(cgrt_dcp_wait(k.g, cgrt_graphs_stream(set)), CGRT_SUCCESS) << cgrt_last_error();
      Rank view;  // reads the moved outputs
      view.t.rt = k.t.rt;
      view.t.out = out_alt;
      view.t.lse = lse_alt;
      got2[r] = fetch(view, b);
      view.t.rt = nullptr;  // not its allocations
      cgrt_graphs_stats st{};
      st.size = sizeof st;
      ASSERT_EQ(cgrt_graphs_get_stats(set, &st), CGRT_SUCCESS);
      EXPECT_EQ(st.replays, 2u) << "the steps ran as graph replays";
      EXPECT_EQ(st.eager_fallbacks, 0u);
      EXPECT_GE(st.rebinds, 1u);
      cgrt_graphs_destroy(set);
      (void)d;
    });
    for (int r = 0; r < b.world; r++) {
      compare(got[r], heads_of(b, ref, r), 2e-2, 2e-2, "replay, rank " + std::to_string(r));
      compare(got2[r], heads_of(b2, ref2, r), 2e-2, 2e-2, "rebound replay, rank " + std::to_string(r));
    }
  }
}

}  // namespace
}  // namespace dcp_test
