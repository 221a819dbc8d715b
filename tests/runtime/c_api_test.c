/* Every public header, included from strict C11 (-std=c11 -pedantic -Werror), and the
 * runtime used from C: a host written in C gets the same API. */
#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_status.h"
#include "cgrt/cgrt_types.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/runtime/all_headers.h"

#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond)                                               \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: %s\n", __FILE__, __LINE__, #cond, cgrt_last_error()); \
      failures++;                                                 \
    }                                                             \
  } while (0)

int main(void) {
  cgrt_runtime_options o;
  cgrt_runtime *rt = NULL;
  cgrt_tensor_desc d;
  CUdeviceptr p = 0;
  cgrt_runtime_info info;

  CHECK(strcmp(cgrt_status_name(CGRT_ERROR_NO_DRIVER), "CGRT_ERROR_NO_DRIVER") == 0);
  cgrt_runtime_options_init(&o);
  o.driver = CGRT_DRIVER_EMULATED;
  CHECK(cgrt_runtime_create(&o, &rt) == CGRT_SUCCESS);
  if (!rt) return 1;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  CHECK(cgrt_runtime_get_info(rt, &info) == CGRT_SUCCESS);
  CHECK(info.driver == CGRT_DRIVER_EMULATED);
  memset(&d, 0, sizeof d);
  d.ndim = 1;
  d.shape[0] = 100;
  d.dtype = CGRT_DTYPE_BF16;
  CHECK(cgrt_workspace_request(rt, CGRT_LANE_DRAFT, "c", &d, 1, &p) == CGRT_SUCCESS);
  CHECK(p != 0 && p % CGRT_WORKSPACE_ALIGNMENT == 0);
  CHECK(cgrt_workspace_lock(rt) == CGRT_SUCCESS);
  d.shape[0] = 101;
  CHECK(cgrt_workspace_request(rt, CGRT_LANE_DRAFT, "c", &d, 1, &p) == CGRT_ERROR_WORKSPACE_LOCKED);
  CHECK(strstr(cgrt_last_error(), "202") != NULL);
  CHECK(cgrt_runtime_destroy(rt) == CGRT_SUCCESS);
  printf("c_api_test: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
