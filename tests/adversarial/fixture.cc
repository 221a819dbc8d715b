// Shared pieces of the adversarial cases (see fixture.h).
#include "tests/adversarial/fixture.h"

#include <cstring>

namespace adv {

namespace {
cgrt_runtime *g_keeper;
bool g_keeper_tried, g_emulated = true;
std::string g_keeper_error;
}  // namespace

cgrt_runtime *keeper() {
  if (!g_keeper_tried) {
    g_keeper_tried = true;
    cgrt_runtime_options o;
    cgrt_runtime_options_init(&o);
    cgrt_status st = cgrt_runtime_create(&o, &g_keeper);
    if (st != CGRT_SUCCESS) {
      g_keeper = nullptr;
      g_keeper_error = name_of(st) + ": " + cgrt_last_error();
    } else {
      cgrt_runtime_info info;
      memset(&info, 0, sizeof info);
      info.size = sizeof info;
      if (cgrt_runtime_get_info(g_keeper, &info) == CGRT_SUCCESS) g_emulated = info.driver == CGRT_DRIVER_EMULATED;
    }
  }
  return g_keeper;
}

const std::string &keeper_error() { return g_keeper_error; }

bool keeper_emulated() {
  keeper();
  return g_emulated;
}

size_t device_free() {
  cgrt_runtime_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  if (keeper() == nullptr || cgrt_runtime_get_info(keeper(), &info) != CGRT_SUCCESS) return 0;
  return info.free_memory;
}

cgrt_runtime *new_runtime(Ctx &c, int fault_injection) {
  cgrt_runtime_options o;
  cgrt_runtime_options_init(&o);
  o.fault_injection = fault_injection;
  cgrt_runtime *rt = nullptr;
  if (!c.expect_ok(cgrt_runtime_create(&o, &rt), "cgrt_runtime_create (fixture)")) return nullptr;
  return rt;
}

cgrt_runtime *dead_runtime(Ctx &c) {
  cgrt_runtime *rt = new_runtime(c);
  if (rt != nullptr) c.expect_ok(cgrt_runtime_destroy(rt), "cgrt_runtime_destroy (fixture)");
  return rt;
}

const char *const kBadNames[4] = {"NULL handle", "destroyed handle", "foreign pointer as handle",
                                  "misaligned pointer into a live handle"};

void *foreign() {
  alignas(64) static unsigned char junk[4096];
  memset(junk, 0xA5, sizeof junk);
  junk[sizeof junk - 1] = 0;  // read as text (a PTX image), it ends inside the block
  return junk;
}

cgrt_tensor_desc desc1(int64_t n, cgrt_dtype t) {
  cgrt_tensor_desc d;
  memset(&d, 0, sizeof d);
  d.ndim = 1;
  d.shape[0] = n;
  d.dtype = t;
  return d;
}

}  // namespace adv
