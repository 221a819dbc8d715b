// Bad-argument cases of include/cgrt/cgrt_runtime.h.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_runtime.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void runtime_cases() {
  A("cgrt_runtime_options_init/NULL", [](Ctx &) { cgrt_runtime_options_init(nullptr); });
  A("cgrt_runtime_create/out NULL", [](Ctx &c) {
    c.expect(cgrt_runtime_create(nullptr, nullptr), {IA}, "cgrt_runtime_create(NULL, NULL)");
  });
  struct OptCase {
    const char *what;
    void (*set)(cgrt_runtime_options *);
    std::vector<cgrt_status> want;
    const char *emu_only;
  };
  static const OptCase kOpts[] = {
      {"options->size 0", [](cgrt_runtime_options *o) { o->size = 0; }, {IA}, nullptr},
      {"options->size 1", [](cgrt_runtime_options *o) { o->size = 1; }, {IA}, nullptr},
      {"options->size SIZE_MAX", [](cgrt_runtime_options *o) { o->size = SIZE_MAX; }, {IA}, nullptr},
      {"driver kind 7", [](cgrt_runtime_options *o) { o->driver = (cgrt_driver_kind)7; }, {IA}, nullptr},
      {"driver kind -1", [](cgrt_runtime_options *o) { o->driver = (cgrt_driver_kind)-1; }, {IA}, nullptr},
      {"device_ordinal -1", [](cgrt_runtime_options *o) { o->device_ordinal = -1; }, {IA}, nullptr},
      {"device_ordinal INT_MIN", [](cgrt_runtime_options *o) { o->device_ordinal = INT_MIN; }, {IA}, nullptr},
      {"device_ordinal 4096", [](cgrt_runtime_options *o) { o->device_ordinal = 4096; }, {CGRT_ERROR_NO_DEVICE},
       nullptr},
      {"device_ordinal INT_MAX", [](cgrt_runtime_options *o) { o->device_ordinal = INT_MAX; },
       {CGRT_ERROR_NO_DEVICE}, nullptr},
      {"driver_library that does not exist",
       [](cgrt_runtime_options *o) {
         o->driver = CGRT_DRIVER_CUDA;
         o->driver_library = "/nonexistent/libcuda.so.1";
       },
       {CGRT_ERROR_NO_DRIVER}, nullptr},
      {"driver_library \"\"",
       [](cgrt_runtime_options *o) {
         o->driver = CGRT_DRIVER_CUDA;
         o->driver_library = "";
       },
       {CGRT_ERROR_NO_DRIVER}, nullptr},
      {"driver_library that is not a CUDA driver (libm.so.6)",
       [](cgrt_runtime_options *o) {
         o->driver = CGRT_DRIVER_CUDA;
         o->driver_library = "libm.so.6";
       },
       {CGRT_ERROR_NO_DRIVER}, nullptr},
      {"emulated device of compute capability 8.0",
       [](cgrt_runtime_options *o) {
         o->driver = CGRT_DRIVER_EMULATED;
         o->emulated_compute_capability = 80;
       },
       {CGRT_ERROR_UNSUPPORTED_DEVICE}, nullptr},
  };
  for (const OptCase &k : kOpts) {
    CaseOpts co;
    co.emu_only = k.emu_only;
    A(std::string("cgrt_runtime_create/") + k.what, [&k](Ctx &c) {
      cgrt_runtime_options o;
      cgrt_runtime_options_init(&o);
      k.set(&o);
      cgrt_runtime *rt = static_cast<cgrt_runtime *>(foreign());
      cgrt_status st = cgrt_runtime_create(&o, &rt);
      c.expect(st, k.want, std::string("cgrt_runtime_create with ") + k.what);
      if (st == OK) {
        cgrt_runtime_destroy(rt);
      } else {
        c.check(rt == nullptr, "cgrt_runtime_create failed but *out is not NULL");
      }
    }, co);
  }
  A("cgrt_runtime_create/options->size larger than the struct (a newer header)", [](Ctx &c) {
    struct {
      cgrt_runtime_options o;
      unsigned char tail[64];
    } big;
    memset(&big, 0, sizeof big);
    cgrt_runtime_options_init(&big.o);
    big.o.size = sizeof big;
    cgrt_runtime *rt = nullptr;
    if (c.expect(cgrt_runtime_create(&big.o, &rt), {OK, IA}, "cgrt_runtime_create with a larger size") &&
        rt != nullptr)
      cgrt_runtime_destroy(rt);
  });
  A("cgrt_runtime_destroy/NULL is a no-op", [](Ctx &c) { c.expect_ok(cgrt_runtime_destroy(nullptr), "destroy(NULL)"); });
  for (Bad b : {B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string("cgrt_runtime_destroy/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_runtime *dead = dead_runtime(c);
      c.expect(cgrt_runtime_destroy(bad_handle(b, w.rt, dead)), {IH}, "cgrt_runtime_destroy");
      // The live runtime must be untouched.
      c.expect_ok(get_info(w.rt, sizeof(cgrt_runtime_info)), "cgrt_runtime_get_info of the live runtime after");
    });
  }
  runtime_handle_cases("cgrt_runtime_get_info",
                       [](World &, cgrt_runtime *rt) { return get_info(rt, sizeof(cgrt_runtime_info)); });
  runtime_handle_cases("cgrt_runtime_synchronize", [](World &, cgrt_runtime *rt) { return cgrt_runtime_synchronize(rt); });
  A("cgrt_runtime_get_info/info NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_runtime_get_info(w.rt, nullptr), {IA}, "get_info(rt, NULL)");
  });
  for (size_t size : {(size_t)0, (size_t)1, sizeof(size_t), offsetof(cgrt_runtime_info, device_name)}) {
    A("cgrt_runtime_get_info/info->size " + std::to_string(size), [size](Ctx &c) {
      World w(c);
      if (w.rt) c.expect(get_info(w.rt, size), {IA}, "get_info with size " + std::to_string(size));
    });
  }
  A("cgrt_runtime_get_info/info->size larger than the struct writes only the struct", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    Canaried<cgrt_runtime_info> i(sizeof(cgrt_runtime_info) + 256);
    if (c.expect(cgrt_runtime_get_info(w.rt, i.get()), {OK, IA}, "get_info with a larger size"))
      c.check(i.canary_intact(), "cgrt_runtime_get_info wrote past sizeof(cgrt_runtime_info)");
  });
  A("cgrt_driver_kind_name/values outside the enum", [](Ctx &c) {
    for (int k : {-1, 3, 99, INT_MAX, INT_MIN}) {
      const char *n = cgrt_driver_kind_name((cgrt_driver_kind)k);
      c.check(n != nullptr && n[0] != 0, "cgrt_driver_kind_name(" + std::to_string(k) + ") is NULL or empty");
    }
    c.check(strcmp(cgrt_driver_kind_name(CGRT_DRIVER_CUDA), "cuda") == 0 &&
                strcmp(cgrt_driver_kind_name(CGRT_DRIVER_EMULATED), "emulated") == 0,
            "cgrt_driver_kind_name of cuda/emulated");
  });
}

Register reg([] {
  runtime_cases();
});

}  // namespace
}  // namespace adv
