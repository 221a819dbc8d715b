// cgrt_emulated_kernel_register is documented thread-safe, also with lookups and launches
// of the same name (issue 14, item 8): 8 threads re-register a kernel, look it up and
// launch it at once. Run under ThreadSanitizer too:
//   bazel test --config=tsan //tests/runtime:registry_race_test
// The registry serves the emulation only: the test runs on the emulation on any machine.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <cstdint>
#include <thread>
#include <vector>

#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

constexpr int32_t kTagA = 0x0A0A, kTagB = 0x0B0B;

// Two references of one kernel (int *out, int slot): each writes its own tag.
int32_t *out_slot(const unsigned char *p, const size_t *off) {
  int32_t *out = (int32_t *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[0]));
  return out + *(const int32_t *)(const void *)(p + off[1]);
}
void write_a(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) { *out_slot(p, off) = kTagA; }
void write_b(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) { *out_slot(p, off) = kTagB; }

TEST(EmulatedKernelRegistry, ReRegistrationRacesWithLookupsAndLaunches) {
  const size_t sizes[2] = {8, 4};
  CGRT_ASSERT_OK(cgrt_emulated_kernel_register("race_kernel", 2, sizes, write_a));
  cgrt_runtime *rt = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  constexpr int kThreads = 8, kIters = 200;
  CUdeviceptr out = 0;
  CGRT_ASSERT_OK(cgrt_test::request_1d(rt, 0, "race.out", kThreads, CGRT_DTYPE_I32, &out));
  static const unsigned char image[16] = {1};  // any image loads on the emulation
  cgrt_module *shared = nullptr;
  CGRT_ASSERT_OK(cgrt_module_load(rt, image, &shared));
  CUfunction shared_fn = nullptr;  // looked up once, launched by every launching thread
  CGRT_ASSERT_OK(cgrt_module_function(shared, "race_kernel", &shared_fn));

  std::atomic<int> bad{0}, failed{0}, launches{0};
  std::atomic<bool> go{false};
  auto registrar = [&](int id) {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < kIters; i++)
      if (cgrt_emulated_kernel_register("race_kernel", 2, sizes, (i + id) % 2 ? write_b : write_a) != CGRT_SUCCESS)
        failed++;
  };
  auto launcher = [&](int slot) {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < kIters; i++) {
      CUfunction f = shared_fn;
      cgrt_module *m = nullptr;
      if (i % 2) {  // a fresh lookup through a new module
        if (cgrt_module_load(rt, image, &m) != CGRT_SUCCESS || cgrt_module_function(m, "race_kernel", &f) != CGRT_SUCCESS) {
          failed++;
          cgrt_module_unload(m);
          continue;
        }
      }
      int32_t s = slot, zero = 0, got = 0;
      void *args[] = {&out, &s};
      if (cgrt_memcpy_htod(rt, out + 4 * (CUdeviceptr)slot, &zero, 4) != CGRT_SUCCESS ||
          cgrt_launch_kernel(rt, f, 1, 1, 1, 1, 1, 1, 0, nullptr, args) != CGRT_SUCCESS ||
          cgrt_memcpy_dtoh(rt, &got, out + 4 * (CUdeviceptr)slot, 4) != CGRT_SUCCESS)
        failed++;
      else if (got != kTagA && got != kTagB)
        bad++;
      launches++;
      if (m && cgrt_module_unload(m) != CGRT_SUCCESS) failed++;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; i++)
    threads.emplace_back(i % 2 ? std::function<void()>([&, i] { registrar(i); })
                               : std::function<void()>([&, i] { launcher(i); }));
  go = true;
  for (auto &th : threads) th.join();
  EXPECT_EQ(failed.load(), 0) << cgrt_last_error();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(launches.load(), kThreads / 2 * kIters);
  CGRT_ASSERT_OK(cgrt_module_unload(shared));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
