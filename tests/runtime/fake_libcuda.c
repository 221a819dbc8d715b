/* A fake libcuda.so.1 for the driver-selection tests: it loads and resolves like the
 * real one, then fails the way a broken install does, as chosen by fake_cuda_set_mode
 * (the test dlopens the same file to call it). Only what the selection calls is real;
 * every other entry point resolves to a function that returns CUDA_ERROR_NOT_SUPPORTED.
 * No CUDA header: the few types are spelled out. */
#include <string.h>

typedef int fake_result;
enum {
  FAKE_INIT_FAIL = 1,    /* cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH */
  FAKE_NO_DEVICE = 2,    /* cuInit: CUDA_ERROR_NO_DEVICE */
  FAKE_ZERO_DEVICES = 3, /* cuDeviceGetCount: 0 */
  FAKE_CC80 = 4,         /* one device of compute capability 8.0 */
  FAKE_OLD = 5           /* cuDriverGetVersion: 12000 */
};
static int g_mode = FAKE_INIT_FAIL;

void fake_cuda_set_mode(int mode) { g_mode = mode; }

static fake_result f_init(unsigned flags) {
  (void)flags;
  if (g_mode == FAKE_INIT_FAIL) return 803;
  if (g_mode == FAKE_NO_DEVICE) return 100;
  return 0;
}
fake_result cuDriverGetVersion(int *v) {
  *v = g_mode == FAKE_OLD ? 12000 : 12080;
  return 0;
}
static fake_result f_count(int *n) {
  *n = g_mode == FAKE_ZERO_DEVICES ? 0 : 1;
  return 0;
}
static fake_result f_get(int *dev, int ordinal) {
  *dev = ordinal;
  return 0;
}
static fake_result f_attribute(int *v, int attribute, int dev) {
  (void)dev;
  *v = attribute == 75 ? 8 : 0; /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / MINOR (76) */
  return 0;
}
static fake_result f_other(void) { return 801; /* CUDA_ERROR_NOT_SUPPORTED */ }

fake_result cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
  (void)version, (void)flags;
  if (strcmp(symbol, "cuInit") == 0) *pfn = (void *)f_init;
  else if (strcmp(symbol, "cuDriverGetVersion") == 0) *pfn = (void *)cuDriverGetVersion;
  else if (strcmp(symbol, "cuDeviceGetCount") == 0) *pfn = (void *)f_count;
  else if (strcmp(symbol, "cuDeviceGet") == 0) *pfn = (void *)f_get;
  else if (strcmp(symbol, "cuDeviceGetAttribute") == 0) *pfn = (void *)f_attribute;
  else *pfn = (void *)f_other;
  if (status) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
  return 0;
}
