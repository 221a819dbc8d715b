// Bad-argument cases of include/cgrt/cgrt_module.h (modules, launches, emulated
// references).
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_module.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void module_cases() {
  runtime_handle_cases("cgrt_module_load", [](World &, cgrt_runtime *rt) {
    cgrt_module *m = nullptr;
    cgrt_status st = cgrt_module_load(rt, synth::kernels_image(), &m);
    if (st == OK) cgrt_module_unload(m);
    return st;
  });
  A("cgrt_module_load/image NULL", [](Ctx &c) {
    World w(c);
    cgrt_module *m = static_cast<cgrt_module *>(foreign());
    if (!w.rt) return;
    c.expect(cgrt_module_load(w.rt, nullptr, &m), {IA}, "module_load(rt, NULL, &m)");
    c.check(m == nullptr, "*out is not NULL after a failed cgrt_module_load");
  });
  A("cgrt_module_load/out NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_module_load(w.rt, synth::kernels_image(), nullptr), {IA}, "module_load(rt, image, NULL)");
  });
  for (int variant = 0; variant < 2; variant++) {
    A(std::string("cgrt_module_load/") + (variant ? "PTX text that is not PTX" : "4 KiB of junk as image"),
      [variant](Ctx &c) {
        World w(c);
        if (!w.rt) return;
        static char ptx[] = "//\n.version 99.9\n.target sm_999\nthis is not ptx at all {\n";
        const void *image = variant ? (const void *)ptx : foreign();
        cgrt_module *m = static_cast<cgrt_module *>(foreign());
        cgrt_status st = cgrt_module_load(w.rt, image, &m);
        // The emulation loads any image (its kernels are the registered references).
        if (c.emulated)
          c.expect(st, {OK, CGRT_ERROR_UNSUPPORTED_DEVICE}, "cgrt_module_load of junk");
        else
          c.expect(st, {CGRT_ERROR_UNSUPPORTED_DEVICE}, "cgrt_module_load of junk");
        if (st == OK)
          cgrt_module_unload(m);
        else
          c.check(m == nullptr, "*out is not NULL after a failed cgrt_module_load");
      });
  }
  A("cgrt_module_unload/NULL is a no-op", [](Ctx &c) { c.expect_ok(cgrt_module_unload(nullptr), "unload(NULL)"); });
  for (Bad b : {B_DEAD, B_FOREIGN, B_MISALIGNED})
    A(std::string("cgrt_module_unload/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      cgrt_module *live = w.module();
      if (!live) return;
      cgrt_module *dead = w.dead_module();
      c.expect(cgrt_module_unload(bad_handle(b, live, dead)), {IH}, "cgrt_module_unload");
      CUfunction f;
      c.expect_ok(cgrt_module_function(live, "synth_scale", &f), "the live module after");
    });
  module_handle_cases("cgrt_module_function", [](World &, cgrt_module *m) {
    CUfunction f;
    return cgrt_module_function(m, "synth_scale", &f);
  });
  struct FnCase {
    const char *what;
    cgrt_status (*call)(cgrt_module *);
  };
  static const FnCase kFn[] = {
      {"name NULL", [](cgrt_module *m) { CUfunction f; return cgrt_module_function(m, nullptr, &f); }},
      {"out NULL", [](cgrt_module *m) { return cgrt_module_function(m, "synth_scale", nullptr); }},
      {"no such kernel", [](cgrt_module *m) { CUfunction f; return cgrt_module_function(m, "adv_no_such_kernel", &f); }},
      {"name \"\"", [](cgrt_module *m) { CUfunction f; return cgrt_module_function(m, "", &f); }},
      {"name of 100000 characters",
       [](cgrt_module *m) {
         std::string n(100000, 'k');
         CUfunction f;
         return cgrt_module_function(m, n.c_str(), &f);
       }},
  };
  for (const FnCase &k : kFn)
    A(std::string("cgrt_module_function/") + k.what, [&k](Ctx &c) {
      World w(c);
      cgrt_module *m = w.module();
      if (m) c.expect(k.call(m), {IA}, std::string("cgrt_module_function with ") + k.what);
    });

  runtime_handle_cases("cgrt_launch_kernel", [](World &w, cgrt_runtime *rt) {
    int n = 0;
    CUdeviceptr p = w.buffer(64);
    float a = 1;
    void *args[] = {&n, &p, &p, &a};
    return cgrt_launch_kernel(rt, w.function(), 1, 1, 1, 32, 1, 1, 0, nullptr, args);
  });
  struct LaunchCase {
    const char *what;
    unsigned g[3], b[3], shmem;
    bool null_fn, null_args;
    std::vector<cgrt_status> want;
    const char *emu_only;
  };
  static const LaunchCase kLaunch[] = {
      {"fn NULL", {1, 1, 1}, {32, 1, 1}, 0, true, false, {IA}, nullptr},
      {"grid_x 0", {0, 1, 1}, {32, 1, 1}, 0, false, false, {IA}, nullptr},
      {"grid_y 0", {1, 0, 1}, {32, 1, 1}, 0, false, false, {IA}, nullptr},
      {"grid_z 0", {1, 1, 0}, {32, 1, 1}, 0, false, false, {IA}, nullptr},
      {"block_x 0", {1, 1, 1}, {0, 1, 1}, 0, false, false, {IA}, nullptr},
      {"block_y 0", {1, 1, 1}, {32, 0, 1}, 0, false, false, {IA}, nullptr},
      {"block_z 0", {1, 1, 1}, {32, 1, 0}, 0, false, false, {IA}, nullptr},
      {"block of 2048 threads", {1, 1, 1}, {2048, 1, 1}, 0, false, false, {DRV, IA}, nullptr},
      {"block 32 x 32 x 2", {1, 1, 1}, {32, 32, 2}, 0, false, false, {DRV, IA}, nullptr},
      {"grid_y 65536", {1, 65536, 1}, {32, 1, 1}, 0, false, false, {DRV, IA}, nullptr},
      {"grid_x UINT_MAX", {UINT_MAX, 1, 1}, {32, 1, 1}, 0, false, false, {DRV, IA}, nullptr},
      {"shared_bytes UINT_MAX", {1, 1, 1}, {32, 1, 1}, UINT_MAX, false, false, {DRV, IA}, nullptr},
      {"args NULL for a kernel with parameters", {1, 1, 1}, {32, 1, 1}, 0, false, true, {DRV, IA},
       "the real driver's handling of NULL kernelParams is not specified"},
  };
  for (const LaunchCase &k : kLaunch) {
    CaseOpts co;
    co.emu_only = k.emu_only;
    A(std::string("cgrt_launch_kernel/") + k.what, [&k](Ctx &c) {
      World w(c);
      CUfunction f = w.function();
      CUdeviceptr p = w.buffer(64);
      if (!f || !p) return;
      int n = 0;
      float a = 1;
      void *args[] = {&n, &p, &p, &a};
      cgrt_status st = cgrt_launch_kernel(w.rt, k.null_fn ? nullptr : f, k.g[0], k.g[1], k.g[2], k.b[0], k.b[1],
                                          k.b[2], k.shmem, nullptr, k.null_args ? nullptr : args);
      c.expect(st, k.want, std::string("cgrt_launch_kernel with ") + k.what);
      c.expect_ok(cgrt_runtime_synchronize(w.rt), "the runtime after the refused launch");
    }, co);
  }

  static void (*const noop)(const cgrt_emulated_launch *, const unsigned char *, const size_t *) =
      [](const cgrt_emulated_launch *, const unsigned char *, const size_t *) {};
  struct RegCase {
    const char *what;
    cgrt_status (*call)();
    std::vector<cgrt_status> want;
  };
  static const RegCase kReg[] = {
      {"name NULL", [] { size_t s[] = {4}; return cgrt_emulated_kernel_register(nullptr, 1, s, noop); }, {IA}},
      {"fn NULL", [] { size_t s[] = {4}; return cgrt_emulated_kernel_register("adv_reg_x", 1, s, nullptr); }, {IA}},
      {"num_params 33",
       [] {
         std::vector<size_t> s(33, 4);
         return cgrt_emulated_kernel_register("adv_reg_x", 33, s.data(), noop);
       },
       {IA}},
      {"num_params SIZE_MAX",
       [] { size_t s[] = {4}; return cgrt_emulated_kernel_register("adv_reg_x", SIZE_MAX, s, noop); }, {IA}},
      {"param_sizes NULL with 2 parameters",
       [] { return cgrt_emulated_kernel_register("adv_reg_x", 2, nullptr, noop); }, {IA}},
      {"a parameter of size 0",
       [] { size_t s[] = {4, 0}; return cgrt_emulated_kernel_register("adv_reg_x", 2, s, noop); }, {IA}},
      {"a parameter of size SIZE_MAX",
       [] { size_t s[] = {4, SIZE_MAX}; return cgrt_emulated_kernel_register("adv_reg_x", 2, s, noop); }, {IA}},
      {"a parameter of 1 MiB",
       [] { size_t s[] = {(size_t)1 << 20}; return cgrt_emulated_kernel_register("adv_reg_x", 1, s, noop); }, {IA}},
      {"parameters whose packed size overflows",
       [] {
         size_t s[] = {SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1};
         return cgrt_emulated_kernel_register("adv_reg_x", 2, s, noop);
       },
       {IA}},
      {"32 parameters of 4 KiB (past the driver's 32764-byte limit)",
       [] {
         std::vector<size_t> s(32, 4096);
         return cgrt_emulated_kernel_register("adv_reg_x", 32, s.data(), noop);
       },
       {IA}},
  };
  for (const RegCase &k : kReg)
    A(std::string("cgrt_emulated_kernel_register/") + k.what, [&k](Ctx &c) {
      cgrt_status st = k.call();
      c.expect(st, k.want, std::string("cgrt_emulated_kernel_register with ") + k.what);
    });
  A("cgrt_emulated_kernel_register/the name of one of cgrt's own kernels", [](Ctx &c) {
    // cgrt's embedded kernels run their built-in references on the emulation; a host
    // reference registered under one of their names would replace it for every runtime
    // of the process (here: the probe every cgrt_runtime_create launches).
    size_t s[] = {8, 4};
    cgrt_status st = cgrt_emulated_kernel_register("cgrt_probe", 2, s, noop);
    c.expect(st, {IA}, "cgrt_emulated_kernel_register(\"cgrt_probe\", ...)");
    if (st == OK) {
      cgrt_runtime_options o;
      cgrt_runtime_options_init(&o);
      o.driver = CGRT_DRIVER_EMULATED;
      cgrt_runtime *rt = nullptr;
      cgrt_status cs = cgrt_runtime_create(&o, &rt);
      c.check(cs == OK, "after it, cgrt_runtime_create on the emulation fails: " + name_of(cs) + ": " +
                            cgrt_last_error());
      cgrt_runtime_destroy(rt);
    }
  });
}

Register reg([] {
  module_cases();
});

}  // namespace
}  // namespace adv
