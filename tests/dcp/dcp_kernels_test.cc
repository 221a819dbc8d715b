// The DCP kernels (kernels/dcp/kernel_table.h) launched through the runtime (the C
// references on the emulation, the GPU kernels with CGRT_DRIVER=cuda) against an
// independent host computation: every row has a reference and is in the fatbin; the
// merge of 1-4 ranks, bf16 and fp32 partials, padding items, skipped ranks; the
// transpose with aligned and unaligned blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dcp/kernel_table.h"
#include "kernels/registry.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace {

const cgrt__dcp_kernel kRows[] = {CGRT__DCP_KERNELS(CGRT__DCP_KERNEL_ROW)};

uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float bf2f(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

class DcpKernels : public ::testing::Test {

 public:
  void SetUp() override {
    rt_ = cgrt_test::make_runtime();
    ASSERT_NE(rt_, nullptr);
  }
  void TearDown() override {
    for (CUdeviceptr p : allocs_) rt_->drv->cuMemFree(p);
    cgrt_runtime_destroy(rt_);
  }
  CUdeviceptr put(const void *src, size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(rt_->drv->cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    allocs_.push_back(p);
    if (src) EXPECT_EQ(rt_->drv->cuMemcpyHtoD(p, src, bytes), CUDA_SUCCESS);
    return p;
  }
  void launch(const char *name, unsigned gx, unsigned gy, void **params) {
    CUfunction f = nullptr;
    CGRT_ASSERT_OK(cgrt__runtime_function(rt_, name, &f));
    ASSERT_EQ(rt_->drv->cuLaunchKernel(f, gx, gy, 1, 128, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(rt_->drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }

  cgrt_runtime *rt_ = nullptr;
  std::vector<CUdeviceptr> allocs_;
  friend void merge_case(DcpKernels *, int, int, bool, bool, unsigned);
};

TEST_F(DcpKernels, EveryRowHasAReferenceAndIsInTheFatbin) {
  for (const auto &k : kRows) {
    SCOPED_TRACE(k.name);
    const cgrt__ref_kernel *ref = cgrt__ref_kernel_find(k.name);
    ASSERT_NE(ref, nullptr);
    EXPECT_EQ((int)ref->num_params, k.params);
    EXPECT_EQ(cgrt__ref_kernel_check(ref, nullptr), 0);
    CUfunction f = nullptr;
    CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt__runtime_function(rt_, k.name, &f));
    EXPECT_EQ(k.threads, 128);
  }
}

// ranks partials of `items` items, each rank's slice at a stride with its LSEs after
// the partials; rank w's LSE is -inf (and its partial NaN) where skip(w, i).
void merge_case(DcpKernels *t, int ranks, int items, bool fp32, bool want_lse, unsigned seed) {
  SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(items) + " items" + (fp32 ? ", fp32" : ", bf16"));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f), lu(-3.f, 6.f);
  const size_t es = fp32 ? 4 : 2, part = (size_t)items * 512 * es, lse_off = part;
  const size_t stride = (part + (size_t)items * 4 + 255) / 256 * 256;
  std::vector<unsigned char> buf(stride * ranks);
  std::vector<float> lse((size_t)ranks * items), val((size_t)ranks * items * 512);
  for (int w = 0; w < ranks; w++)
    for (int i = 0; i < items; i++) {
      // item 0: padding (every rank -inf); item 1: only rank 0; others: random skips.
      const bool skip = i == 0 || (i == 1 && w > 0) || (i > 1 && rng() % 5 == 0 && w > 0);
      const float l = skip ? -INFINITY : lu(rng);
      lse[(size_t)w * items + i] = l;
      memcpy(&buf[w * stride + lse_off + 4 * i], &l, 4);
      for (int c = 0; c < 512; c++) {
        float v = skip ? NAN : uni(rng);
        unsigned char *dst = &buf[w * stride + ((size_t)i * 512 + c) * es];
        if (fp32) {
          memcpy(dst, &v, 4);
        } else {
          const uint16_t b = f2bf(v);
          memcpy(dst, &b, 2);
          v = bf2f(b);
        }
        val[((size_t)w * items + i) * 512 + c] = v;
      }
    }
  CUdeviceptr d_parts = t->put(buf.data(), buf.size());
  std::vector<uint16_t> out((size_t)items * 512, 0x7fc1);
  std::vector<float> olse(items, NAN);
  CUdeviceptr d_out = t->put(out.data(), out.size() * 2), d_lse = want_lse ? t->put(olse.data(), olse.size() * 4) : 0;
  long long st = (long long)stride, lo = (long long)lse_off;
  int f = fp32, n = ranks, it = items;
  void *params[] = {&d_parts, &st, &lo, &f, &n, &it, &d_out, &d_lse};
  t->launch("cgrt_dcp_merge", (unsigned)items, 1, params);
  ASSERT_EQ(t->rt_->drv->cuMemcpyDtoH(out.data(), d_out, out.size() * 2), CUDA_SUCCESS);
  if (want_lse) ASSERT_EQ(t->rt_->drv->cuMemcpyDtoH(olse.data(), d_lse, olse.size() * 4), CUDA_SUCCESS);
  for (int i = 0; i < items; i++) {
    double m = -INFINITY;
    for (int w = 0; w < ranks; w++) m = std::max(m, (double)lse[(size_t)w * items + i]);
    if (std::isinf(m)) {
      for (int c = 0; c < 512; c++) ASSERT_EQ(out[(size_t)i * 512 + c], 0) << "padding item " << i;
      if (want_lse) EXPECT_TRUE(std::isinf(olse[i]) && olse[i] < 0);
      continue;
    }
    double s = 0;
    for (int w = 0; w < ranks; w++) s += std::exp(lse[(size_t)w * items + i] - m);
    const double total = m + std::log(s);
    if (want_lse) EXPECT_NEAR(olse[i], total, 1e-5 * std::max(1.0, std::fabs(total)));
    for (int c = 0; c < 512; c++) {
      double want = 0;
      for (int w = 0; w < ranks; w++) {
        const double lw = lse[(size_t)w * items + i];
        if (!std::isinf(lw)) want += std::exp(lw - total) * val[((size_t)w * items + i) * 512 + c];
      }
      const float got = bf2f(out[(size_t)i * 512 + c]);
      ASSERT_NEAR(got, want, 1e-5 + std::fabs(want) / 128) << "item " << i << " value " << c;
    }
  }
}

TEST_F(DcpKernels, MergeMatchesTheHost) {
  unsigned seed = 1;
  for (int ranks = 1; ranks <= 4; ranks++)
    for (bool fp32 : {false, true}) merge_case(this, ranks, 7, fp32, ranks != 3, seed++);
}

TEST_F(DcpKernels, TransposeMovesEveryBlock) {
  for (long long bytes : {4LL, 12LL, 64LL, 1040LL}) {
    SCOPED_TRACE(bytes);
    const int na = 3, nb = 5;
    std::vector<unsigned char> src((size_t)na * nb * bytes), dst(src.size(), 0xee);
    for (size_t i = 0; i < src.size(); i++) src[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr ds = put(src.data(), src.size()), dd = put(dst.data(), dst.size());
    // src [a][b], dst [b][a]
    int a = na, b = nb;
    long long ssa = nb * bytes, ssb = bytes, dsa = bytes, dsb = na * bytes;
    void *params[] = {&ds, &dd, &a, &b, &bytes, &ssa, &ssb, &dsa, &dsb};
    launch("cgrt_dcp_transpose", (unsigned)nb, (unsigned)na, params);
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(dst.data(), dd, dst.size()), CUDA_SUCCESS);
    for (int i = 0; i < na; i++)
      for (int j = 0; j < nb; j++)
        ASSERT_EQ(0, memcmp(&dst[(j * na + i) * bytes], &src[(i * nb + j) * bytes], bytes)) << i << "," << j;
  }
}

}  // namespace
