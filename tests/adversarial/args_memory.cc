// Bad-argument cases of include/cgrt/cgrt_memory.h (copies, device memory known to the
// runtime).
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_memory.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

void memory_cases() {
  runtime_handle_cases("cgrt_memcpy_htod", [](World &w, cgrt_runtime *rt) {
    int v = 1;
    return cgrt_memcpy_htod(rt, w.buffer(64), &v, 4);
  });
  runtime_handle_cases("cgrt_memcpy_dtoh", [](World &w, cgrt_runtime *rt) {
    int v = 1;
    return cgrt_memcpy_dtoh(rt, &v, w.buffer(64), 4);
  });
  runtime_handle_cases("cgrt_memcpy_dtod_async", [](World &w, cgrt_runtime *rt) {
    return cgrt_memcpy_dtod_async(rt, w.buffer(64), w.buffer(64), 4, nullptr);
  });
  runtime_handle_cases("cgrt_memset_d8", [](World &w, cgrt_runtime *rt) { return cgrt_memset_d8(rt, w.buffer(64), 0, 4); });
  runtime_handle_cases("cgrt_stream_synchronize",
                       [](World &, cgrt_runtime *rt) { return cgrt_stream_synchronize(rt, nullptr); });
  const CUdeviceptr kForeignDev = 0xdead000;
  struct MemCase {
    const char *what;
    cgrt_status (*call)(World &, CUdeviceptr buf);
    std::vector<cgrt_status> want;
    const char *emu_only;
  };
  static const char *kRange = "the real driver does not promise to range-check device pointers";
  static const MemCase kMem[] = {
      {"cgrt_memcpy_htod/dst 0", [](World &w, CUdeviceptr) { int v = 0; return cgrt_memcpy_htod(w.rt, 0, &v, 4); }, {IA}, nullptr},
      {"cgrt_memcpy_htod/src NULL", [](World &w, CUdeviceptr b) { return cgrt_memcpy_htod(w.rt, b, nullptr, 4); }, {IA}, nullptr},
      {"cgrt_memcpy_htod/dst 0 and src NULL with 0 bytes",
       [](World &w, CUdeviceptr) { return cgrt_memcpy_htod(w.rt, 0, nullptr, 0); }, {OK}, nullptr},
      {"cgrt_memcpy_htod/dst never allocated (0xdead000)",
       [](World &w, CUdeviceptr) { int v = 0; return cgrt_memcpy_htod(w.rt, 0xdead000, &v, 4); }, {DRV, IA}, nullptr},
      {"cgrt_memcpy_htod/dst is host memory",
       [](World &w, CUdeviceptr) {
         std::vector<int> host(16);
         int v = 0;
         return cgrt_memcpy_htod(w.rt, (CUdeviceptr)(uintptr_t)host.data(), &v, 4);
       },
       {DRV, IA}, kRange},
      {"cgrt_memcpy_htod/past the end of its allocation",
       [](World &w, CUdeviceptr b) {
         std::vector<unsigned char> big(1 << 20);
         return cgrt_memcpy_htod(w.rt, b, big.data(), big.size());
       },
       {DRV, IA}, kRange},
      {"cgrt_memcpy_dtoh/dst NULL", [](World &w, CUdeviceptr b) { return cgrt_memcpy_dtoh(w.rt, nullptr, b, 4); }, {IA}, nullptr},
      {"cgrt_memcpy_dtoh/src 0", [](World &w, CUdeviceptr) { int v; return cgrt_memcpy_dtoh(w.rt, &v, 0, 4); }, {IA}, nullptr},
      {"cgrt_memcpy_dtoh/0 bytes from 0 to NULL",
       [](World &w, CUdeviceptr) { return cgrt_memcpy_dtoh(w.rt, nullptr, 0, 0); }, {OK}, nullptr},
      {"cgrt_memcpy_dtoh/src never allocated (0xdead000)",
       [](World &w, CUdeviceptr) { int v; return cgrt_memcpy_dtoh(w.rt, &v, 0xdead000, 4); }, {DRV, IA}, nullptr},
      {"cgrt_memcpy_dtoh/past the end of its allocation",
       [](World &w, CUdeviceptr b) {
         std::vector<unsigned char> big(1 << 20);
         return cgrt_memcpy_dtoh(w.rt, big.data(), b, big.size());
       },
       {DRV, IA}, kRange},
      {"cgrt_memcpy_dtod_async/dst 0",
       [](World &w, CUdeviceptr b) { return cgrt_memcpy_dtod_async(w.rt, 0, b, 4, nullptr); }, {IA}, nullptr},
      {"cgrt_memcpy_dtod_async/src 0",
       [](World &w, CUdeviceptr b) { return cgrt_memcpy_dtod_async(w.rt, b, 0, 4, nullptr); }, {IA}, nullptr},
      {"cgrt_memcpy_dtod_async/0 bytes between 0 and 0",
       [](World &w, CUdeviceptr) { return cgrt_memcpy_dtod_async(w.rt, 0, 0, 0, nullptr); }, {OK}, nullptr},
      {"cgrt_memcpy_dtod_async/src never allocated (0xdead000)",
       [](World &w, CUdeviceptr b) {
         cgrt_status st = cgrt_memcpy_dtod_async(w.rt, b, 0xdead000, 4, nullptr);
         cgrt_status s2 = cgrt_runtime_synchronize(w.rt);
         return st != OK ? st : s2;
       },
       {DRV, IA}, kRange},
      {"cgrt_memset_d8/dst 0", [](World &w, CUdeviceptr) { return cgrt_memset_d8(w.rt, 0, 1, 4); }, {IA}, nullptr},
      {"cgrt_memset_d8/0 bytes at 0", [](World &w, CUdeviceptr) { return cgrt_memset_d8(w.rt, 0, 1, 0); }, {OK}, nullptr},
      {"cgrt_memset_d8/dst never allocated (0xdead000)",
       [](World &w, CUdeviceptr) { return cgrt_memset_d8(w.rt, 0xdead000, 1, 4); }, {DRV, IA}, nullptr},
      {"cgrt_memset_d8/past the end of its allocation",
       [](World &w, CUdeviceptr b) { return cgrt_memset_d8(w.rt, b, 1, (size_t)1 << 30); }, {DRV, IA}, kRange},
      {"cgrt_memset_d8/SIZE_MAX bytes",
       [](World &w, CUdeviceptr b) { return cgrt_memset_d8(w.rt, b, 1, SIZE_MAX); }, {DRV, IA}, kRange},
      {"cgrt_memcpy_htod/misaligned dst (byte copies land where asked)",
       [](World &w, CUdeviceptr b) {
         unsigned char in[7] = {1, 2, 3, 4, 5, 6, 7}, out[16] = {};
         cgrt_status st = cgrt_memcpy_htod(w.rt, b + 3, in, sizeof in);
         if (st != OK) return st;
         st = cgrt_memcpy_dtoh(w.rt, out, b, sizeof out);
         if (st != OK) return st;
         bool ok = out[2] == 0 && memcmp(out + 3, in, 7) == 0 && out[10] == 0;
         if (!ok) w.c.bad("misaligned byte copy landed elsewhere");
         return st;
       },
       {OK}, nullptr},
  };
  (void)kForeignDev;
  for (const MemCase &k : kMem) {
    CaseOpts co;
    co.emu_only = k.emu_only;
    A(k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      CUdeviceptr b = w.buffer(256);
      if (!b) return;
      cgrt_status st = k.call(w, b);
      c.expect(st, k.want, std::string(k.what));
      c.expect_ok(cgrt_runtime_synchronize(w.rt), "the runtime after the bad copy");
    }, co);
  }
}

void mem_args() {
  using RtCall = cgrt_status (*)(cgrt_runtime *, CUdeviceptr);
  struct H {
    const char *fn;
    RtCall call;
  };
  static const H kHandles[] = {
      {"cgrt_mem_alloc", [](cgrt_runtime *rt, CUdeviceptr) {
         CUdeviceptr p = 0;
         return cgrt_mem_alloc(rt, 256, &p);
       }},
      {"cgrt_mem_free", [](cgrt_runtime *rt, CUdeviceptr p) { return cgrt_mem_free(rt, p); }},
      {"cgrt_mem_register", [](cgrt_runtime *rt, CUdeviceptr p) { return cgrt_mem_register(rt, p, 64); }},
      {"cgrt_mem_unregister", [](cgrt_runtime *rt, CUdeviceptr p) { return cgrt_mem_unregister(rt, p); }},
  };
  for (const H &h : kHandles)
    for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
      add("args", std::string(h.fn) + "/" + kBadNames[b], [&h, b](Ctx &c) {
        World w(c);
        if (!w.rt) return;
        CUdeviceptr p = 0;
        if (!c.expect_ok(cgrt_mem_alloc(w.rt, 256, &p), "cgrt_mem_alloc")) return;
        cgrt_runtime *dead = dead_runtime(c);
        c.expect(h.call(bad_handle(b, w.rt, dead), p), {IH}, std::string(h.fn) + " with a " + kBadNames[b]);
        c.expect_ok(cgrt_mem_free(w.rt, p), "cgrt_mem_free of the live allocation after");
      });
  struct A {
    const char *what;
    cgrt_status (*call)(World &);
    std::vector<cgrt_status> want;
    const char *emu_only;
  };
  static const A kArgs[] = {
      {"cgrt_mem_alloc/0 bytes", [](World &w) { CUdeviceptr p = 1; return cgrt_mem_alloc(w.rt, 0, &p); }, {IA}, nullptr},
      {"cgrt_mem_alloc/out NULL", [](World &w) { return cgrt_mem_alloc(w.rt, 64, nullptr); }, {IA}, nullptr},
      {"cgrt_mem_alloc/SIZE_MAX bytes",
       [](World &w) {
         CUdeviceptr p = 1;
         cgrt_status st = cgrt_mem_alloc(w.rt, SIZE_MAX, &p);
         if (st != OK && p != 0) w.c.bad("*out is not 0 after a failed cgrt_mem_alloc");
         return st;
       },
       {DRV, OOM, IA}, nullptr},
      {"cgrt_mem_alloc/2^50 bytes", [](World &w) { CUdeviceptr p; return cgrt_mem_alloc(w.rt, (size_t)1 << 50, &p); },
       {DRV, OOM}, nullptr},
      {"cgrt_mem_alloc/256-byte aligned",
       [](World &w) {
         for (size_t n : {1, 3, 255, 257, 4097}) {
           CUdeviceptr p = 0;
           cgrt_status st = cgrt_mem_alloc(w.rt, n, &p);
           if (st != OK) return st;
           if (p % 256 != 0) w.c.bad("cgrt_mem_alloc(" + std::to_string(n) + ") is not 256-byte aligned");
           st = cgrt_mem_free(w.rt, p);
           if (st != OK) return st;
         }
         return OK;
       },
       {OK}, nullptr},
      {"cgrt_mem_free/0 is a no-op", [](World &w) { return cgrt_mem_free(w.rt, 0); }, {OK}, nullptr},
      {"cgrt_mem_free/not the base of an allocation (base + 8)",
       [](World &w) {
         CUdeviceptr p = 0;
         cgrt_status st = cgrt_mem_alloc(w.rt, 512, &p);
         if (st != OK) return OK;
         st = cgrt_mem_free(w.rt, p + 8);
         int v = 7;
         if (cgrt_memcpy_htod(w.rt, p, &v, 4) != OK) w.c.bad("the allocation is gone after a refused free");
         cgrt_mem_free(w.rt, p);
         return st;
       },
       {IA}, nullptr},
      {"cgrt_mem_free/twice",
       [](World &w) {
         CUdeviceptr p = 0;
         if (cgrt_mem_alloc(w.rt, 512, &p) != OK || cgrt_mem_free(w.rt, p) != OK) return OK;
         return cgrt_mem_free(w.rt, p);
       },
       {IA}, nullptr},
      {"cgrt_mem_free/an address never allocated (0xdead000)", [](World &w) { return cgrt_mem_free(w.rt, 0xdead000); },
       {IA}, nullptr},
      {"cgrt_mem_free/a workspace buffer", [](World &w) { return cgrt_mem_free(w.rt, w.buffer(256)); }, {IA}, nullptr},
      {"cgrt_mem_free/another runtime's allocation",
       [](World &w) {
         CUdeviceptr p = 0;
         if (cgrt_mem_alloc(keeper(), 256, &p) != OK) return OK;
         cgrt_status st = cgrt_mem_free(w.rt, p);
         cgrt_mem_free(keeper(), p);
         return st;
       },
       {IA}, nullptr},
      {"cgrt_mem_register/base 0", [](World &w) { return cgrt_mem_register(w.rt, 0, 64); }, {IA}, nullptr},
      {"cgrt_mem_register/0 bytes",
       [](World &w) {
         static std::vector<unsigned char> host(256);
         return cgrt_mem_register(w.rt, (CUdeviceptr)(uintptr_t)host.data(), 0);
       },
       {IA}, nullptr},
      {"cgrt_mem_register/a range that wraps past 2^64",
       [](World &w) { return cgrt_mem_register(w.rt, ~(CUdeviceptr)0 - 63, 4096); }, {IA}, nullptr},
      {"cgrt_mem_register/overlapping a cgrt_mem_alloc allocation",
       [](World &w) {
         CUdeviceptr p = 0;
         if (cgrt_mem_alloc(w.rt, 4096, &p) != OK) return OK;
         cgrt_status st = cgrt_mem_register(w.rt, p + 256, 256);
         if (st == OK) cgrt_mem_unregister(w.rt, p + 256);
         cgrt_mem_free(w.rt, p);
         return st;
       },
       {IA}, nullptr},
      {"cgrt_mem_register/overlapping a registered range",
       [](World &w) {
         static std::vector<unsigned char> host(8192);
         CUdeviceptr b = (CUdeviceptr)(uintptr_t)host.data();
         if (cgrt_mem_register(w.rt, b, 4096) != OK) return OK;
         cgrt_status st = cgrt_mem_register(w.rt, b + 1024, 4096);
         if (st == OK) cgrt_mem_unregister(w.rt, b + 1024);
         cgrt_mem_unregister(w.rt, b);
         return st;
       },
       {IA}, "host-backed arrays exist on the emulation only"},
      {"cgrt_mem_register/host memory on a GPU",
       [](World &w) {
         static std::vector<unsigned char> host(4096);
         cgrt_status st = cgrt_mem_register(w.rt, (CUdeviceptr)(uintptr_t)host.data(), host.size());
         if (st == OK) cgrt_mem_unregister(w.rt, (CUdeviceptr)(uintptr_t)host.data());
         return w.c.emulated ? IA : st;  // the emulation accepts it (host-backed arrays)
       },
       {IA}, nullptr},
      {"cgrt_mem_register/an address never allocated (0xdead000)",
       [](World &w) { return cgrt_mem_register(w.rt, 0xdead000, 4096); }, {IA},
       "the emulation may take any host address for a host-backed array"},
      {"cgrt_mem_unregister/not the base of a registered range",
       [](World &w) {
         static std::vector<unsigned char> host(4096);
         CUdeviceptr b = (CUdeviceptr)(uintptr_t)host.data();
         if (cgrt_mem_register(w.rt, b, 1024) != OK) return OK;
         cgrt_status st = cgrt_mem_unregister(w.rt, b + 16);
         cgrt_mem_unregister(w.rt, b);
         return st;
       },
       {IA}, "host-backed arrays exist on the emulation only"},
      {"cgrt_mem_unregister/twice",
       [](World &w) {
         static std::vector<unsigned char> host(4096);
         CUdeviceptr b = (CUdeviceptr)(uintptr_t)host.data();
         if (cgrt_mem_register(w.rt, b, 1024) != OK || cgrt_mem_unregister(w.rt, b) != OK) return OK;
         return cgrt_mem_unregister(w.rt, b);
       },
       {IA}, "host-backed arrays exist on the emulation only"},
      {"cgrt_mem_unregister/a cgrt_mem_alloc allocation",
       [](World &w) {
         CUdeviceptr p = 0;
         if (cgrt_mem_alloc(w.rt, 256, &p) != OK) return OK;
         cgrt_status st = cgrt_mem_unregister(w.rt, p);
         cgrt_mem_free(w.rt, p);
         return st;
       },
       {IA}, nullptr},
  };
  for (const A &k : kArgs)
    add("args", k.what, [&k](Ctx &c) {
      World w(c);
      if (w.rt) c.expect(k.call(w), k.want, k.what);
    }, CaseOpts{60, k.emu_only});
}

Register reg([] {
  memory_cases();
  mem_args();
});

}  // namespace
}  // namespace adv
