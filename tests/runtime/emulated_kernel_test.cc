// C references registered for the emulation (cgrt_module.h: cgrt_emulated_kernel_register):
// parameter sizes are bounded, and the names of cgrt's own kernels are reserved.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "kernels/ref_tables.h"
#include "kernels/registry.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

namespace {

using cgrt_test::request_1d;

void store_tag(const cgrt_emulated_launch *, const unsigned char *p, const size_t *off) {
  int32_t *out = (int32_t *)(uintptr_t)(*(const uint64_t *)(const void *)(p + off[0]));
  *out = *(const int32_t *)(const void *)(p + off[1]);
}

TEST(EmulatedKernel, RegisterBoundsParameterSizes) {
  const size_t good[2] = {8, 4};
  CGRT_ASSERT_OK(cgrt_emulated_kernel_register("validation_store", 2, good, store_tag));
  struct Bad {
    std::vector<size_t> sizes;
    size_t bad_index;
  } bad[] = {
      {{8, SIZE_MAX}, 1},                      // the crash of the issue (memcpy of SIZE_MAX)
      {{SIZE_MAX / 2 + 1, 8}, 0},              // wraps the packed size
      {{32765}, 0},                            // one parameter above the driver's limit
      {{8, 32764}, 1},                         // each fits, together they do not
      {{4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096}, 7},
      {{8, 0}, 1},
  };
  for (const Bad &b : bad) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT,
                       cgrt_emulated_kernel_register("validation_store", b.sizes.size(), b.sizes.data(), store_tag));
    std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find("'validation_store' parameter " + std::to_string(b.bad_index)), std::string::npos) << msg;
  }
  const size_t at_limit[2] = {8, 32756};  // 8 + 32756 = 32764: accepted
  CGRT_EXPECT_STATUS(CGRT_SUCCESS, cgrt_emulated_kernel_register("validation_limit", 2, at_limit, store_tag));

  // The refused registrations replaced nothing: the kernel still runs with {8, 4}.
  cgrt_runtime *rt = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  CUdeviceptr buf = 0;
  CGRT_ASSERT_OK(request_1d(rt, 0, "validation.store", 4, CGRT_DTYPE_I32, &buf));
  static const unsigned char image[16] = {1};  // any image loads on the emulation
  cgrt_module *m = nullptr;
  CGRT_ASSERT_OK(cgrt_module_load(rt, image, &m));
  CUfunction f = nullptr;
  CGRT_ASSERT_OK(cgrt_module_function(m, "validation_store", &f));
  int32_t tag = 4242;
  void *args[] = {&buf, &tag};
  CGRT_ASSERT_OK(cgrt_launch_kernel(rt, f, 1, 1, 1, 1, 1, 1, 0, nullptr, args));
  int32_t got = 0;
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt, &got, buf, sizeof got));
  EXPECT_EQ(got, tag);
  CGRT_ASSERT_OK(cgrt_module_unload(m));
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

// cgrt's own kernels keep their built-in references (adversarial finding F6).
TEST(EmulatedKernel, NamesOfCgrtKernelsAreReserved) {
  // Every built-in reference carries the reserved prefix.
  size_t builtins = 0;
#define CGRT__TEST_TABLE(t)                                               \
  for (const cgrt__ref_kernel *k = t; k->name != nullptr; k++, builtins++) \
    EXPECT_TRUE(cgrt__ref_name_reserved(k->name)) << k->name;
  CGRT__REF_TABLES(CGRT__TEST_TABLE)
#undef CGRT__TEST_TABLE
  EXPECT_GT(builtins, 8u);
  const cgrt__ref_kernel *probe = cgrt__ref_kernel_find("cgrt_probe");
  ASSERT_NE(probe, nullptr);
  const size_t sizes[2] = {8, 4};
  for (const char *name : {"cgrt_probe", "cgrt_graph_meta_prepare", "cgrt_mla_split_m64", "cgrt_not_yet_a_kernel"}) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_emulated_kernel_register(name, 2, sizes, store_tag));
    std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find(std::string("'") + name + "': names beginning with \"cgrt_\" are reserved"), std::string::npos)
        << msg;
    cgrt__ref_kernel k = {name, 2, {8, 4}, (cgrt__ref_fn)(void (*)(void))store_tag};
    EXPECT_EQ(cgrt__ref_kernel_register(&k), -3) << name;
  }
  EXPECT_EQ(cgrt__ref_kernel_find("cgrt_probe"), probe);
  EXPECT_EQ(cgrt__ref_kernel_find("cgrt_not_yet_a_kernel"), nullptr);
  EXPECT_FALSE(cgrt__ref_name_reserved("cgrt"));
  EXPECT_FALSE(cgrt__ref_name_reserved("my_cgrt_kernel"));
  // The emulation's runtimes still run the built-in probe (it checks what it wrote).
  cgrt_runtime *rt = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
