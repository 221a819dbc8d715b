// Shared helpers for the emulation tests: the table, a fixture that checks for leaked
// objects, and the small reference kernels the tests register.
#ifndef CGRT_TESTS_EMU_EMU_TEST_UTIL_H
#define CGRT_TESTS_EMU_EMU_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/registry.h"
#include "runtime/driver.h"
#include "runtime/emu/emu.h"

#define EXPECT_CU(expr) EXPECT_EQ(CUDA_SUCCESS, (expr))
#define ASSERT_CU(expr) ASSERT_EQ(CUDA_SUCCESS, (expr))

namespace emu_test {

struct Pair {
  int x, y;
};

// Registers the test kernels (idempotent):
//   emu_test_axpy(float a, const float *x, float *y, int n): y[i] = a * x[i] + y[i]
//   emu_test_pack(int a, int *out, Pair s, char c, double d): out = {a, s.x, s.y, c, (int)d}
//   emu_test_count(int *counter, int limit, CUgraphConditionalHandle h):
//       ++*counter; cudaGraphSetConditional(h, *counter < limit)
//   emu_test_fill(int *out, int value, int n): out[i] = value
void RegisterKernels();

const cgrt__driver *Drv();

// Initializes the driver, retains the primary context and makes it current (once per
// thread); records cgrt__emu_live_objects() and checks it again after each test.
class EmuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  CUfunction Function(const char *name);
  CUdeviceptr Alloc(size_t bytes);
  void Upload(CUdeviceptr dst, const std::vector<float> &v);
  std::vector<float> Download(CUdeviceptr src, size_t n);
  void LaunchAxpy(CUstream s, float a, CUdeviceptr x, CUdeviceptr y, int n);
  // Adds a WHILE conditional node (no dependencies) to g on the current context; returns
  // the node and writes its handle (created with `default_value`) and its body graph.
  CUgraphNode AddWhile(CUgraph g, unsigned default_value, CUgraphConditionalHandle *h, CUgraph *body);

  const cgrt__driver *d = nullptr;
  CUmodule mod = nullptr;
  CUstream stream = nullptr;
  size_t live_at_start = 0;
  std::vector<CUdeviceptr> allocs;
};

// Makes the primary context current on the calling thread.
void MakeCurrent();

}  // namespace emu_test

#endif
