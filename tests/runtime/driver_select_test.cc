// Driver selection (issue 14, item 11): CGRT_DRIVER has one validated reader, and `auto`
// falls back to the CPU emulation only where no NVIDIA driver is installed; a driver
// that is installed but unusable is refused with CGRT_ERROR_DRIVER. A fake libcuda.so.1
// (fake_libcuda.c, embedded) plays the broken installs. Each test sets CGRT_DRIVER
// itself, so the binary behaves the same on a GPU machine (where the suite runs with
// CGRT_DRIVER=cuda).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cgrt/cgrt_runtime.h"
#include "tests/common/test_util.h"
#include "tests/common/validation_util.h"

extern "C" const unsigned char cgrt_test_fake_cuda[];
extern "C" const unsigned long cgrt_test_fake_cuda_size;

namespace {

enum { FAKE_INIT_FAIL = 1, FAKE_NO_DEVICE = 2, FAKE_ZERO_DEVICES = 3, FAKE_CC80 = 4, FAKE_OLD = 5 };

// The fake library written to a file; `mode` chosen through the loaded copy, which is
// the one cgrt gets (dlopen of the same path returns the same library).
struct FakeDriver {
  std::string path;
  void *handle = nullptr;
  void (*set_mode)(int) = nullptr;
  explicit FakeDriver(const char *tag) {
    const char *dir = getenv("TEST_TMPDIR");
    path = std::string(dir && *dir ? dir : "/tmp") + "/cgrt_fake_libcuda_" + tag + "_" + std::to_string(getpid()) + ".so";
    FILE *f = fopen(path.c_str(), "wb");
    if (!f) return;
    bool ok = fwrite(cgrt_test_fake_cuda, 1, cgrt_test_fake_cuda_size, f) == cgrt_test_fake_cuda_size;
    if (fclose(f) != 0 || !ok) return;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) set_mode = reinterpret_cast<void (*)(int)>(dlsym(handle, "fake_cuda_set_mode"));
  }
  ~FakeDriver() { unlink(path.c_str()); }  // stays mapped: cgrt keeps its table
};

FakeDriver &broken() {
  static FakeDriver d("broken");
  return d;
}

class DriverSelect : public ::testing::Test {
 protected:
  std::string saved;
  bool had = false;
  void SetUp() override {
    const char *e = getenv("CGRT_DRIVER");
    had = e != nullptr;
    if (had) saved = e;
    setenv("CGRT_DRIVER", "auto", 1);
  }
  void TearDown() override {
    if (had) setenv("CGRT_DRIVER", saved.c_str(), 1);
    else unsetenv("CGRT_DRIVER");
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
  }
  // Creates with options.driver AUTO on `library`; returns the status, destroys on success
  // after reading the driver kind.
  cgrt_status create(const char *library, cgrt_driver_kind *kind = nullptr) {
    cgrt_runtime_options o;
    cgrt_runtime_options_init(&o);
    o.driver_library = library;
    cgrt_runtime *rt = reinterpret_cast<cgrt_runtime *>(0x1);
    cgrt_status st = cgrt_runtime_create(&o, &rt);
    if (st != CGRT_SUCCESS) {
      EXPECT_EQ(rt, nullptr);
      return st;
    }
    cgrt_runtime_info info = {};
    info.size = sizeof info;
    EXPECT_EQ(cgrt_runtime_get_info(rt, &info), CGRT_SUCCESS);
    if (kind) *kind = info.driver;
    EXPECT_EQ(cgrt_runtime_destroy(rt), CGRT_SUCCESS);
    return st;
  }
  void expect_refused(const char *library, const std::string &why) {
    CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, create(library));
    std::string msg = cgrt_last_error();
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
    EXPECT_NE(msg.find("CGRT_DRIVER=emulated"), std::string::npos) << msg;
    EXPECT_NE(msg.find(library), std::string::npos) << msg;
  }
};

TEST_F(DriverSelect, NoDriverInstalledRunsTheEmulationAndWarnsEachTime) {
  cgrt_test::WarnSink sink;
  for (int i = 0; i < 2; i++) {
    cgrt_driver_kind kind = CGRT_DRIVER_AUTO;
    CGRT_ASSERT_OK(create("/nonexistent/libcuda.so.1", &kind));
    EXPECT_EQ(kind, CGRT_DRIVER_EMULATED);
  }
  sink.stop();
  ASSERT_EQ(sink.lines.size(), 2u) << "one warning per creation that falls back";
  EXPECT_NE(sink.lines[0].find("no NVIDIA driver"), std::string::npos) << sink.lines[0];
  EXPECT_NE(sink.lines[0].find("CPU emulation"), std::string::npos) << sink.lines[0];
  EXPECT_NE(sink.lines[0].find("/nonexistent/libcuda.so.1"), std::string::npos) << sink.lines[0];
}

TEST_F(DriverSelect, DriverReportingNoDeviceRunsTheEmulation) {
  FakeDriver &d = broken();
  ASSERT_NE(d.set_mode, nullptr) << "fake driver at " << d.path << ": " << dlerror();
  for (int mode : {FAKE_NO_DEVICE, FAKE_ZERO_DEVICES}) {
    d.set_mode(mode);
    cgrt_driver_kind kind = CGRT_DRIVER_AUTO;
    CGRT_ASSERT_OK(create(d.path.c_str(), &kind));
    EXPECT_EQ(kind, CGRT_DRIVER_EMULATED) << "mode " << mode;
  }
}

TEST_F(DriverSelect, InstalledButUnusableDriverIsRefused) {
  FakeDriver &d = broken();
  ASSERT_NE(d.set_mode, nullptr) << "fake driver at " << d.path << ": " << dlerror();
  d.set_mode(FAKE_INIT_FAIL);
  expect_refused(d.path.c_str(), "cuInit/cuDeviceGetCount failed with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH");
  d.set_mode(FAKE_CC80);
  expect_refused(d.path.c_str(), "compute capability 8.0");
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.driver_library = d.path.c_str();
  o.device_ordinal = 3;
  cgrt_runtime *rt = nullptr;
  CGRT_EXPECT_STATUS(CGRT_ERROR_DRIVER, cgrt_runtime_create(&o, &rt));
  EXPECT_NE(std::string(cgrt_last_error()).find("no CUDA device at ordinal 3 (1 found)"), std::string::npos)
      << cgrt_last_error();
  // The same broken driver, emulation asked for on purpose.
  setenv("CGRT_DRIVER", "emulated", 1);
  cgrt_driver_kind kind = CGRT_DRIVER_AUTO;
  CGRT_ASSERT_OK(create(d.path.c_str(), &kind));
  EXPECT_EQ(kind, CGRT_DRIVER_EMULATED);
}

TEST_F(DriverSelect, TooOldDriverIsRefused) {
  static FakeDriver old("old");
  ASSERT_NE(old.set_mode, nullptr) << "fake driver at " << old.path << ": " << dlerror();
  old.set_mode(FAKE_OLD);  // before cgrt resolves this library (once per path)
  expect_refused(old.path.c_str(), "driver supports CUDA 12.0; cgrt needs 12.4");
}

TEST_F(DriverSelect, ToolkitStubLibraryIsRefused) {
  // The toolkit's link-time stub is a classic wrong libcuda.so.1 in containers.
  const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) != 0) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  expect_refused(stub, "cuDriverGetVersion failed with CUDA_ERROR_STUB_LIBRARY");
}

TEST_F(DriverSelect, CgrtDriverHasOneValidatedReader) {
  for (const char *bad : {"gpu", "cuda ", "1"}) {
    setenv("CGRT_DRIVER", bad, 1);
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_ARGUMENT, create(nullptr));
    EXPECT_NE(std::string(cgrt_last_error()).find(std::string("CGRT_DRIVER=\"") + bad + "\""), std::string::npos)
        << cgrt_last_error();
  }
  // Case does not matter; an explicit options.driver does not read the variable.
  setenv("CGRT_DRIVER", "EMULATED", 1);
  cgrt_driver_kind kind = CGRT_DRIVER_AUTO;
  CGRT_ASSERT_OK(create(nullptr, &kind));
  EXPECT_EQ(kind, CGRT_DRIVER_EMULATED);
  setenv("CGRT_DRIVER", "gpu", 1);
  cgrt_runtime *rt = cgrt_test::make_runtime(0, CGRT_DRIVER_EMULATED);
  ASSERT_NE(rt, nullptr);
  CGRT_ASSERT_OK(cgrt_runtime_destroy(rt));
}

}  // namespace
