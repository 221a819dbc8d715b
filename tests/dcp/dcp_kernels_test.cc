// The DCP kernels (kernels/dcp/kernel_table.h) launched through the runtime (the C
// references on the emulation, the GPU kernels with CGRT_DRIVER=cuda) against an
// independent host computation: every row has a reference and is in the fatbin; the
// merge of 1-4 ranks, bf16 and fp32 partials, padding items, skipped ranks; the
// rescale of the reduce-scatter merge; the transpose with aligned and unaligned blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dcp/kernel_table.h"
#include "tests/dcp/dcp_harness.h"
#include "kernels/registry.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

namespace {

const cgrt__dcp_kernel kRows[] = {CGRT__DCP_KERNELS(CGRT__DCP_KERNEL_ROW)};

using dcp_test::bf2f;
using dcp_test::f2bf;

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
    if (src) {
      EXPECT_EQ(rt_->drv->cuMemcpyHtoD(p, src, bytes), CUDA_SUCCESS);
    }
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
  if (want_lse) {
    ASSERT_EQ(t->rt_->drv->cuMemcpyDtoH(olse.data(), d_lse, olse.size() * 4), CUDA_SUCCESS);
  }
  for (int i = 0; i < items; i++) {
    double m = -INFINITY;
    for (int w = 0; w < ranks; w++) m = std::max(m, (double)lse[(size_t)w * items + i]);
    if (std::isinf(m)) {
      for (int c = 0; c < 512; c++) ASSERT_EQ(out[(size_t)i * 512 + c], 0) << "padding item " << i;
      if (want_lse) {
        EXPECT_TRUE(std::isinf(olse[i]) && olse[i] < 0);
      }
      continue;
    }
    double s = 0;
    for (int w = 0; w < ranks; w++) s += std::exp(lse[(size_t)w * items + i] - m);
    const double total = m + std::log(s);
    if (want_lse) {
      EXPECT_NEAR(olse[i], total, 1e-5 * std::max(1.0, std::fabs(total)));
    }
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

// The reduce-scatter merge's local half: summing every rank's rescaled slices gives the
// merged output; padding items and ranks without tokens give zeros.
TEST_F(DcpKernels, RescaledSlicesSumToTheMerge) {
  const int world = 3, heads = 2, rows = 3, qh = world * heads;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.f, 1.f), lu(-2.f, 5.f);
  std::vector<float> lse_all((size_t)world * rows * qh);
  for (int w = 0; w < world; w++)
    for (int r = 0; r < rows; r++)
      for (int g = 0; g < qh; g++)
        lse_all[((size_t)w * rows + r) * qh + g] = r == 0 || (r == 1 && w == 2) ? -INFINITY : lu(rng);
  std::vector<std::vector<uint16_t>> parts(world, std::vector<uint16_t>((size_t)rows * qh * 512));
  std::vector<std::vector<uint16_t>> slices(world);
  std::vector<std::vector<float>> own_lse(world, std::vector<float>((size_t)rows * heads, NAN));
  CUdeviceptr d_lse = put(lse_all.data(), lse_all.size() * 4);
  for (int rank = 0; rank < world; rank++) {
    for (auto &x : parts[rank]) x = f2bf(uni(rng));
    CUdeviceptr d_part = put(parts[rank].data(), parts[rank].size() * 2);
    CUdeviceptr d_dst = put(nullptr, (size_t)world * rows * heads * 512 * 2);
    CUdeviceptr d_out_lse = put(own_lse[rank].data(), own_lse[rank].size() * 4);
    int rw = rows, hh = heads, ww = world, rk = rank;
    void *params[] = {&d_part, &d_lse, &rw, &hh, &ww, &rk, &d_dst, &d_out_lse};
    launch("cgrt_dcp_rescale", (unsigned)(rows * qh), 1, params);
    slices[rank].resize((size_t)world * rows * heads * 512);
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(slices[rank].data(), d_dst, slices[rank].size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(own_lse[rank].data(), d_out_lse, own_lse[rank].size() * 4), CUDA_SUCCESS);
  }
  for (int j = 0; j < world; j++)
    for (int r = 0; r < rows; r++)
      for (int h = 0; h < heads; h++) {
        const int g = j * heads + h;
        double m = -INFINITY;
        for (int w = 0; w < world; w++) m = std::max(m, (double)lse_all[((size_t)w * rows + r) * qh + g]);
        const double total = std::isinf(m) ? m : [&] {
          double s = 0;
          for (int w = 0; w < world; w++) s += std::exp(lse_all[((size_t)w * rows + r) * qh + g] - m);
          return m + std::log(s);
        }();
        if (std::isinf(total)) {
          EXPECT_TRUE(std::isinf(own_lse[j][(size_t)r * heads + h]));
        } else {
          EXPECT_NEAR(own_lse[j][(size_t)r * heads + h], total, 1e-5 * std::max(1.0, std::fabs(total)));
        }
        for (int c = 0; c < 512; c++) {
          double want = 0, got = 0, mag = 0;  // each slice is rounded to bf16: bound by the terms
          for (int w = 0; w < world; w++) {
            const double lw = lse_all[((size_t)w * rows + r) * qh + g];
            const double term = std::isinf(lw) ? 0 : std::exp(lw - total) * bf2f(parts[w][((size_t)r * qh + g) * 512 + c]);
            want += term;
            mag += std::fabs(term);
            got += bf2f(slices[w][(((size_t)j * rows + r) * heads + h) * 512 + c]);
          }
          ASSERT_NEAR(got, want, 1e-6 + mag / 128) << j << "," << r << "," << h << "," << c;
        }
      }
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
    launch("cgrt_dcp_transpose", (unsigned)na, (unsigned)nb, params);
    ASSERT_EQ(rt_->drv->cuMemcpyDtoH(dst.data(), dd, dst.size()), CUDA_SUCCESS);
    for (int i = 0; i < na; i++)
      for (int j = 0; j < nb; j++)
        ASSERT_EQ(0, memcmp(&dst[(j * na + i) * bytes], &src[(i * nb + j) * bytes], bytes)) << i << "," << j;
  }
}

}  // namespace
