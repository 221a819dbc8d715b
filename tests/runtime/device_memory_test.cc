// Device memory known to the runtime (cgrt_memory.h): cgrt_mem_alloc / cgrt_mem_free,
// cgrt_mem_register / cgrt_mem_unregister (memory that is not there refused), and the
// buffer registry behind them.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_workspace.h"
#include "runtime/runtime_internal.h"  // the driver table and the registry: the seams under test
#include "tests/common/test_util.h"

namespace {

class DeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = cgrt_test::make_runtime();
    ASSERT_NE(rt_, nullptr);
  }
  void TearDown() override {
    if (rt_) {
      EXPECT_EQ(cgrt_runtime_destroy(rt_), CGRT_SUCCESS);
    }
  }
  size_t registry_size() {
    cgrt__alloc_range r[16];
    return cgrt__buffers_snapshot(rt_, r, 16, nullptr);
  }
  cgrt_runtime *rt_ = nullptr;
};

TEST_F(DeviceMemory, AllocFreeRoundTripAndArguments) {
  CUdeviceptr p = 0;
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_alloc(rt_, 0, &p));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_alloc(rt_, 64, nullptr));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_mem_alloc(nullptr, 64, &p));
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt_, 1000, &p));
  ASSERT_NE(p, 0u);
  EXPECT_EQ(p % 256, 0u);
  EXPECT_EQ(registry_size(), 1u);
  std::vector<int> in(250), out(250);
  for (int i = 0; i < 250; i++) in[i] = i * 7;
  CGRT_ASSERT_OK(cgrt_memcpy_htod(rt_, p, in.data(), 1000));
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt_, out.data(), p, 1000));
  EXPECT_EQ(in, out);
  CGRT_ASSERT_OK(cgrt_mem_free(rt_, 0));  // no-op
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_free(rt_, p + 256));  // not a base
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_free(rt_, 0xdead000));
  CGRT_ASSERT_OK(cgrt_mem_free(rt_, p));
  EXPECT_EQ(registry_size(), 0u);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_free(rt_, p));  // freed twice
  // Workspaces and the counter buffer are in the registry too.
  cgrt_tensor_desc t{};
  t.ndim = 1;
  t.shape[0] = 100;
  t.dtype = CGRT_DTYPE_F32;
  CUdeviceptr w = 0;
  CGRT_ASSERT_OK(cgrt_workspace_request(rt_, CGRT_LANE_TARGET, "w", &t, 1, &w));
  CGRT_ASSERT_OK(cgrt_counters_reserve(rt_, 64));
  EXPECT_EQ(registry_size(), 2u);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_free(rt_, w));  // not cgrt_mem_alloc's
}

TEST_F(DeviceMemory, RuntimeDestroyFreesLiveAllocationsWithAWarningEach) {
  cgrt_runtime_info before{};
  before.size = sizeof before;
  CGRT_ASSERT_OK(cgrt_runtime_get_info(rt_, &before));
  CUdeviceptr a = 0, b = 0, c = 0;
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt_, 4096, &a));
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt_, 8192, &b));
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt_, 64, &c));
  CGRT_ASSERT_OK(cgrt_mem_free(rt_, c));
  const bool emulated = cgrt_test::is_emulated(rt_);
  EXPECT_EQ(cgrt_test::warnings_containing("cgrt_mem_alloc allocation still live",
                                           [&] { EXPECT_EQ(cgrt_runtime_destroy(rt_), CGRT_SUCCESS); }),
            2u);
  rt_ = nullptr;
  if (emulated) {  // the emulation counts device memory exactly: all of it came back
    rt_ = cgrt_test::make_runtime();
    ASSERT_NE(rt_, nullptr);
    cgrt_runtime_info after{};
    after.size = sizeof after;
    CGRT_ASSERT_OK(cgrt_runtime_get_info(rt_, &after));
    EXPECT_EQ(after.free_memory, before.free_memory);
  }
}

TEST_F(DeviceMemory, RegisterChecksTheRangeAgainstTheDriver) {
  const cgrt__driver *d = rt_->drv;
  CUdeviceptr ext = 0;
  ASSERT_EQ(d->cuMemAlloc(&ext, 4096), CUDA_SUCCESS);
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, 0, 64));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, ext, 0));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, ~(CUdeviceptr)0 - 8, 64));  // wraps
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, ext, (size_t)1 << 30));   // past it
  EXPECT_NE(std::string(cgrt_last_error()).find("past the end"), std::string::npos) << cgrt_last_error();
  if (!cgrt_test::is_emulated(rt_)) {  // host memory the driver does not know
    std::vector<char> host(256);
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, (CUdeviceptr)(uintptr_t)host.data(), 256));
  }
  CGRT_ASSERT_OK(cgrt_mem_register(rt_, ext + 1024, 1024));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, ext + 1536, 64));  // overlaps
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, ext, 2048));       // overlaps
  CGRT_ASSERT_OK(cgrt_mem_register(rt_, ext, 1024));  // adjacent
  cgrt__alloc_range r[4];
  ASSERT_EQ(cgrt__buffers_snapshot(rt_, r, 4, nullptr), 2u);
  EXPECT_EQ(r[0].base, ext);  // sorted
  EXPECT_EQ(r[0].id, r[1].id) << "one allocation, one buffer id";
  EXPECT_EQ(r[0].id & CGRT__OWNED_ID_BIT, 0u) << "the driver's id";
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_unregister(rt_, ext + 8));  // not a base
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt_, ext));
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt_, ext + 1024));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_unregister(rt_, ext));  // twice
  // A cgrt_mem_alloc allocation is in the registry already.
  CUdeviceptr own = 0;
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt_, 512, &own));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, own, 512));
  CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_unregister(rt_, own));
  CGRT_ASSERT_OK(cgrt_mem_free(rt_, own));
  ASSERT_EQ(d->cuMemFree(ext), CUDA_SUCCESS);
}

// On the emulation host memory joins as a host-backed array: copies and fills reach it
// while it is registered, and only then.
TEST_F(DeviceMemory, HostMemoryRegistersOnTheEmulationOnly) {
  std::vector<uint8_t> host(1024, 0), back(1024, 0);
  const CUdeviceptr h = (CUdeviceptr)(uintptr_t)host.data();
  if (!cgrt_test::is_emulated(rt_)) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt_, h, host.size()));
    return;
  }
  CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_memset_d8(rt_, h, 0x5a, host.size()));  // unknown to the driver
  CGRT_ASSERT_OK(cgrt_mem_register(rt_, h, host.size()));
  CGRT_ASSERT_OK(cgrt_memset_d8(rt_, h, 0x5a, host.size()));
  EXPECT_EQ(host, std::vector<uint8_t>(1024, 0x5a));
  CGRT_ASSERT_OK(cgrt_memcpy_dtoh(rt_, back.data(), h, back.size()));
  EXPECT_EQ(back, host);
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt_, h));
  CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_memset_d8(rt_, h, 0, host.size()));
  // Registered again it is a new allocation to the driver: a new buffer id.
  uint64_t id1 = 0, id2 = 0;
  CGRT_ASSERT_OK(cgrt_mem_register(rt_, h, host.size()));
  ASSERT_EQ(cgrt__buffer_id(rt_->drv, h, host.size(), &id1), CUDA_SUCCESS);
  CGRT_ASSERT_OK(cgrt_mem_unregister(rt_, h));
  CGRT_ASSERT_OK(cgrt_mem_register(rt_, h, host.size()));
  ASSERT_EQ(cgrt__buffer_id(rt_->drv, h, host.size(), &id2), CUDA_SUCCESS);
  EXPECT_NE(id1, id2);
  // Left registered: cgrt_runtime_destroy releases it.
}

// The registry does not change while the runtime captures.
TEST_F(DeviceMemory, RefusedDuringCapture) {
  CUdeviceptr p = 0, q = 0;
  CGRT_ASSERT_OK(cgrt_mem_alloc(rt_, 256, &p));
  cgrt__runtime_capture_begin(rt_);
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_mem_alloc(rt_, 256, &q));
  EXPECT_EQ(q, 0u);
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_mem_free(rt_, p));
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_mem_register(rt_, p, 64));
  CGRT_EXPECT_STATUS(CGRT_ERROR_CAPTURING, cgrt_mem_unregister(rt_, p));
  cgrt__runtime_capture_end(rt_);
  CGRT_ASSERT_OK(cgrt_mem_free(rt_, p));
}

// The driver's buffer ids: one per allocation, never reused, even at a reused address.
TEST_F(DeviceMemory, BufferIdsAreNeverReused) {
  const cgrt__driver *d = rt_->drv;
  uint64_t last = 0;
  int reused = 0;
  CUdeviceptr prev = 0;
  for (int i = 0; i < 32; i++) {
    CUdeviceptr p = 0;
    ASSERT_EQ(d->cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    uint64_t id = 0;
    ASSERT_EQ(cgrt__buffer_id(d, p + 100, 3996, &id), CUDA_SUCCESS);
    EXPECT_EQ(cgrt__buffer_id(d, p, (size_t)1 << 22, &id), CUDA_ERROR_NOT_FOUND);
    EXPECT_NE(id, last) << "allocation " << i;
    reused += p == prev;
    last = id;
    prev = p;
    ASSERT_EQ(d->cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(cgrt__buffer_id(d, p, 0, &id), CUDA_ERROR_INVALID_VALUE) << "freed";
  }
  RecordProperty("addresses_reused", reused);
}

// ---- registering memory that is not there (adversarial finding L4) --------------------

// The emulation registered any host address as a host-backed array (0xdead000 included);
// on the real driver such an address is no allocation either.
TEST(MemRegister, AnAddressNeverAllocatedIsRefused) {
  cgrt_runtime *rt = cgrt_test::make_runtime();
  ASSERT_NE(rt, nullptr);
  long ps = sysconf(_SC_PAGESIZE);
  void *gone = mmap(nullptr, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(munmap((char *)gone + ps, ps), 0);  // a hole in the middle
  const struct {
    CUdeviceptr base;
    size_t bytes;
    const char *what;
  } cases[] = {
      {0xdead000, 4096, "0xdead000"},
      {(CUdeviceptr)(uintptr_t)gone + ps, 64, "an unmapped page"},
      {(CUdeviceptr)(uintptr_t)gone, 3 * (size_t)ps, "a range across an unmapped page"},
  };
  for (const auto &c : cases) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, cgrt_mem_register(rt, c.base, c.bytes));
    EXPECT_NE(std::string(cgrt_last_error()).find("is not inside memory the"), std::string::npos)
        << c.what << ": " << cgrt_last_error();
  }
  if (cgrt_test::is_emulated(rt)) {  // mapped host memory is a host-backed array there
    CGRT_ASSERT_OK(cgrt_mem_register(rt, (CUdeviceptr)(uintptr_t)gone, (size_t)ps));
    CGRT_ASSERT_OK(cgrt_mem_unregister(rt, (CUdeviceptr)(uintptr_t)gone));
  }
  munmap(gone, ps);
  munmap((char *)gone + 2 * ps, 2 * ps);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
