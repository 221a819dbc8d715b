// runtime/nccl.h declares NCCL's ABI itself (cgrt builds without nccl.h): where the
// toolkit installs nccl.h, its types and values must be NCCL's; where a libnccl.so.2 is
// installed, the real table must load from it (ncclGetVersion needs no GPU).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <sys/stat.h>

#include "runtime/nccl.h"

extern "C" {
int cgrt_test_nccl_h_present(void);
void cgrt_test_nccl_h_layout(size_t out[10]);
void cgrt_test_nccl_h_values(int out[24]);
unsigned cgrt_test_nccl_h_magic(void);
}

namespace {

TEST(NcclAbi, DeclarationsAreNcclsOwn) {
  if (!cgrt_test_nccl_h_present()) GTEST_SKIP() << "nccl.h is not installed with the CUDA toolkit here";
  size_t layout[10];
  cgrt_test_nccl_h_layout(layout);
  EXPECT_EQ(layout[0], sizeof(ncclUniqueId));
  const size_t mine[9] = {offsetof(cgrt__nccl_config, size),           offsetof(cgrt__nccl_config, magic),
                          offsetof(cgrt__nccl_config, version),        offsetof(cgrt__nccl_config, blocking),
                          offsetof(cgrt__nccl_config, cgaClusterSize), offsetof(cgrt__nccl_config, minCTAs),
                          offsetof(cgrt__nccl_config, maxCTAs),        offsetof(cgrt__nccl_config, netName),
                          offsetof(cgrt__nccl_config, splitShare)};
  for (int i = 0; i < 9; i++) EXPECT_EQ(layout[i + 1], mine[i]) << "ncclConfig_t field " << i;
  int v[24];
  cgrt_test_nccl_h_values(v);
  const int want[24] = {ncclSuccess,      ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
                        ncclInvalidUsage, ncclRemoteError,        ncclInProgress,  ncclInt8,          ncclUint8,
                        ncclInt32,        ncclUint32,             ncclInt64,       ncclUint64,        ncclFloat16,
                        ncclFloat32,      ncclFloat64,            ncclBfloat16,    ncclSum,           ncclProd,
                        ncclMax,          ncclMin,                ncclAvg,         CGRT__NCCL_UNDEF_INT};
  for (int i = 0; i < 24; i++) EXPECT_EQ(v[i], want[i]) << "value " << i;
  EXPECT_EQ(cgrt_test_nccl_h_magic(), CGRT__NCCL_CONFIG_MAGIC);
}

TEST(NcclAbi, RealTableLoadsFromAnInstalledLibrary) {
  const char *const paths[] = {"/usr/local/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                               "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
  const char *found = nullptr;
  struct stat st;
  for (const char *p : paths)
    if (!found && stat(p, &st) == 0) found = p;
  if (!found) GTEST_SKIP() << "no libnccl.so.2 in the toolkit or system folders";
  char msg[1024] = "";
  const cgrt__nccl *t = cgrt__nccl_real(found, msg, sizeof msg);
  ASSERT_NE(t, nullptr) << msg;
  EXPECT_STREQ(t->name, "nccl");
  EXPECT_STREQ(t->path, found);
  EXPECT_GE(t->version, CGRT__NCCL_MIN_VERSION);
  EXPECT_EQ(t, cgrt__nccl_real(found, msg, sizeof msg)) << "resolved once per path";
  EXPECT_NE(std::string(t->ncclGetErrorString(ncclInvalidUsage)).find("invalid usage"), std::string::npos);
}

}  // namespace
