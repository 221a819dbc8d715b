// Buckets: default sizes, dispatch to the smallest bucket that fits, eager fallback
// past the largest.
#include "tests/graphs/graphs_fixture.h"

namespace cgrt_graphs_test {

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

}  // namespace cgrt_graphs_test
