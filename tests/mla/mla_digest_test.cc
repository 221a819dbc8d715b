// Bit digests of the t64 kernels (cgrt_mla_split_t64 / _row1 and their FP8 e4m3
// counterparts): a fixed set of cases (one-row steps, many rows of mixed lengths with
// padding, block rows apart and causal, head groups, page sizes, both merges), each
// checked against the fp32 host reference (mla_harness.h) like every MLA test, and each
// printed as one line "digest <case> <FNV-1a 64 of the output and LSE bits>". Two builds
// of the library are compared by running this binary of each on the same GPU and
// comparing the lines (the A/B of a kernel change that must keep the bits:
// docs/mla_decode.md). The cases and their inputs depend on nothing but this file.
#include <cstdio>

#include "tests/mla/mla_harness.h"

namespace {

using namespace mla_test;

uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

class MlaDigest : public Harness {
 protected:
  unsigned case_seed(const Case &c) const override {
    return 4242u + c.heads * 5 + c.page_size + (int)c.combine + (int)c.lens.size() + 97 * c.fp8 + 31 * c.block_len;
  }
  void digest(const Case &c, const std::string &name) {
    check(c, name);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_FALSE(last_out_.empty());
    uint64_t h = fnv1a(last_out_.data(), last_out_.size() * 2, 1469598103934665603ull);
    h = fnv1a(last_lse_.data(), last_lse_.size() * 4, h);
    printf("digest %s %016llx\n", name.c_str(), (unsigned long long)h);
    fflush(stdout);
  }
  // The cases, bf16 (fp8 0) or FP8 e4m3 (fp8 1).
  void run_all(int fp8) {
    const std::string f = fp8 ? "fp8" : "bf16";
    const int big = emulated_ ? 300 : 2048;
    std::mt19937 rng(77 + fp8);
    for (cgrt_mla_combine cb : {CGRT_MLA_COMBINE_WORKSPACE, CGRT_MLA_COMBINE_COUNTERS}) {
      const std::string m = cb == CGRT_MLA_COMBINE_COUNTERS ? "cnt" : "ws";
      Case c;
      c.fp8 = fp8;
      c.kv_scale = fp8 ? 0.43f : 1.f;
      c.combine = cb;
      c.launches = 2;
      // One-row steps (the _row1 kernels with the workspace): long, short, one tile.
      for (int len : {emulated_ ? 500 : 16384, 200, 64}) {
        c.reqs = 1;
        c.lens = {len};
        digest(c, f + "/" + m + "/row1/len" + std::to_string(len));
      }
      // Many rows of mixed lengths with padding, page sizes 16 / 32 / 64.
      for (int ps : {16, 32, 64}) {
        c.reqs = emulated_ ? 4 : 16;
        c.page_size = ps;
        c.lens = mixed(c.reqs, big, rng, true);
        digest(c, f + "/" + m + "/rows/ps" + std::to_string(ps));
      }
      c.page_size = 64;
      // Head groups: 12 heads (one group of 12), 32 heads (two groups).
      for (int h : {12, 32}) {
        c.heads = h;
        c.reqs = emulated_ ? 3 : 8;
        c.lens = mixed(c.reqs, big / 2, rng, true);
        digest(c, f + "/" + m + "/heads" + std::to_string(h));
      }
      // Block rows apart (8 heads, k = 2: the t64 kernels), non-causal and causal.
      c.heads = 8;
      c.block_len = 2;
      c.reqs = emulated_ ? 2 : 6;
      c.lens = mixed(c.reqs, big / 2, rng, true);
      digest(c, f + "/" + m + "/k2");
      c.causal = 1;
      digest(c, f + "/" + m + "/k2causal");
    }
  }
};

TEST_F(MlaDigest, Bf16) { run_all(0); }
TEST_F(MlaDigest, Fp8) { run_all(1); }

}  // namespace
