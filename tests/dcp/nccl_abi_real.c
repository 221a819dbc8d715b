/* NCCL's own declarations (nccl.h, where the toolkit installs it) as plain numbers, for
 * nccl_abi_test to compare with the declarations of runtime/nccl.h. Kept apart: the two
 * headers declare the same names. */
#include <stddef.h>

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
#define CGRT_TEST_HAVE_NCCL_H 1
#endif
#endif

#ifdef CGRT_TEST_HAVE_NCCL_H
int cgrt_test_nccl_h_present(void) { return 1; }
/* sizeof(ncclUniqueId), then the offsets of ncclConfig_t's first nine fields. */
void cgrt_test_nccl_h_layout(size_t out[10]) {
  out[0] = sizeof(ncclUniqueId);
  out[1] = offsetof(ncclConfig_t, size);
  out[2] = offsetof(ncclConfig_t, magic);
  out[3] = offsetof(ncclConfig_t, version);
  out[4] = offsetof(ncclConfig_t, blocking);
  out[5] = offsetof(ncclConfig_t, cgaClusterSize);
  out[6] = offsetof(ncclConfig_t, minCTAs);
  out[7] = offsetof(ncclConfig_t, maxCTAs);
  out[8] = offsetof(ncclConfig_t, netName);
  out[9] = offsetof(ncclConfig_t, splitShare);
}
/* The enum values cgrt uses, in a fixed order. */
void cgrt_test_nccl_h_values(int out[24]) {
  const int v[24] = {ncclSuccess,      ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
                     ncclInvalidUsage, ncclRemoteError,        ncclInProgress,  ncclInt8,          ncclUint8,
                     ncclInt32,        ncclUint32,             ncclInt64,       ncclUint64,        ncclFloat16,
                     ncclFloat32,      ncclFloat64,            ncclBfloat16,    ncclSum,           ncclProd,
                     ncclMax,          ncclMin,                ncclAvg,         NCCL_CONFIG_UNDEF_INT};
  for (int i = 0; i < 24; i++) out[i] = v[i];
}
unsigned cgrt_test_nccl_h_magic(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  return c.magic;
}
#else
int cgrt_test_nccl_h_present(void) { return 0; }
void cgrt_test_nccl_h_layout(size_t out[10]) { (void)out; }
void cgrt_test_nccl_h_values(int out[24]) { (void)out; }
unsigned cgrt_test_nccl_h_magic(void) { return 0; }
#endif
