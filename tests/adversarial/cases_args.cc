// Category "args": bad arguments to every function the public headers declare. Each case
// is named "<function>/<what is wrong>"; the function must return the status its header
// documents, with a non-empty cgrt_last_error(), without crashing or leaking (the runner
// checks sanitizer reports, LeakSanitizer and, on the emulation, device memory after each
// case). A coverage case checks that every declared function has cases here.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_status.h"
#include "cgrt/cgrt_version.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"
#include "tests/adversarial/world.h"

namespace adv {
namespace {

const cgrt_status OK = CGRT_SUCCESS, IA = CGRT_ERROR_INVALID_ARGUMENT, IH = CGRT_ERROR_INVALID_HANDLE,
                  OOM = CGRT_ERROR_OUT_OF_MEMORY, DRV = CGRT_ERROR_DRIVER;

const char *const kPublicFunctions[] = {
#include "tests/adversarial/public_functions.inc"
};

void A(const std::string &name, CaseFn fn, CaseOpts o = {}) { add("args", name, std::move(fn), o); }

// ---- handles that are not live, for every function that takes one ---------------------


// fn(world, handle) -> status, for a runtime handle; `want` for a non-live one.
using RtCall = cgrt_status (*)(World &, cgrt_runtime *);
void runtime_handle_cases(const char *fn_name, RtCall call, std::initializer_list<cgrt_status> null_want = {IH}) {
  std::vector<cgrt_status> nw(null_want);
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string(fn_name) + "/" + kBadNames[b], [=](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      w.engine();  // live objects around, so that a confused handle has something to hit
      cgrt_runtime *dead = dead_runtime(c);
      cgrt_runtime *h = bad_handle(b, w.rt, dead);
      cgrt_status st = call(w, h);
      if (b == B_NULL && nw.size() == 1)
        c.expect(st, {nw[0]}, std::string(fn_name) + " with a NULL runtime");
      else
        c.expect(st, {IH}, std::string(fn_name) + " with a " + kBadNames[b]);
    });
  }
}

using SetCall = cgrt_status (*)(World &, cgrt_graphs *);
void set_handle_cases(const char *fn_name, SetCall call, cgrt_status null_want = IH) {
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string(fn_name) + "/" + kBadNames[b], [=](Ctx &c) {
      World w(c);
      cgrt_graphs *live = w.graphs();
      if (!live) return;
      cgrt_graphs *dead = w.dead_graphs();
      c.expect(call(w, bad_handle(b, live, dead)), {b == B_NULL ? null_want : IH},
               std::string(fn_name) + " with a " + kBadNames[b]);
    });
  }
}

using PlanCall = cgrt_status (*)(World &, cgrt_mla_plan *);
void plan_handle_cases(const char *fn_name, PlanCall call) {
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string(fn_name) + "/" + kBadNames[b], [=](Ctx &c) {
      World w(c);
      cgrt_mla_plan *live = w.plan();
      if (!live) return;
      cgrt_mla_plan *dead = w.dead_plan();
      c.expect(call(w, bad_handle(b, live, dead)), {IH}, std::string(fn_name) + " with a " + kBadNames[b]);
    });
  }
}

using ModCall = cgrt_status (*)(World &, cgrt_module *);
void module_handle_cases(const char *fn_name, ModCall call, cgrt_status null_want = IH) {
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string(fn_name) + "/" + kBadNames[b], [=](Ctx &c) {
      World w(c);
      cgrt_module *live = w.module();
      if (!live) return;
      cgrt_module *dead = w.dead_module();
      c.expect(call(w, bad_handle(b, live, dead)), {b == B_NULL ? null_want : IH},
               std::string(fn_name) + " with a " + kBadNames[b]);
    });
  }
}

// A value-returning function of a handle must answer its "not live" value.
template <class T, class R>
void value_handle_cases(const char *fn_name, T *(*make_live)(World &), T *(*make_dead)(World &), R (*call)(T *),
                        R want) {
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED}) {
    A(std::string(fn_name) + "/" + kBadNames[b], [=](Ctx &c) {
      World w(c);
      T *live = make_live(w);
      if (!live) return;
      T *dead = make_dead(w);
      R got = call(bad_handle(b, live, dead));
      c.check(got == want, std::string(fn_name) + " with a " + kBadNames[b] + " did not answer its not-live value");
    });
  }
}

cgrt_graphs *live_set(World &w) { return w.graphs(); }
cgrt_graphs *dead_set(World &w) { return w.dead_graphs(); }
cgrt_runtime *live_rt(World &w) { return w.rt; }
cgrt_runtime *dead_rt(World &w) { return dead_runtime(w.c); }

// A struct whose `size` field the caller sets, inside a larger buffer with a canary after
// it: a call must not write past what it knows of the struct.
template <class T>
struct Canaried {
  alignas(16) unsigned char buf[sizeof(T) + 256];
  Canaried(size_t size) {
    memset(buf, 0x5C, sizeof buf);
    memset(buf, 0, sizeof(T));
    memcpy(buf, &size, sizeof size);
  }
  T *get() { return reinterpret_cast<T *>(buf); }
  bool canary_intact() const {
    for (size_t i = sizeof(T); i < sizeof buf; i++)
      if (buf[i] != 0x5C) return false;
    return true;
  }
};

cgrt_status get_info(cgrt_runtime *rt, size_t size) {
  Canaried<cgrt_runtime_info> i(size);
  return cgrt_runtime_get_info(rt, i.get());
}

// ---- status, log, runtime ----------------------------------------------------------------

void status_cases() {
  A("cgrt_status_name/every status and values outside the list", [](Ctx &c) {
    std::set<std::string> seen;
    for (int s = 0; s <= CGRT_ERROR_INTERNAL; s++) {
      const char *n = cgrt_status_name((cgrt_status)s);
      if (!c.check(n != nullptr && strncmp(n, "CGRT_", 5) == 0, "status " + std::to_string(s) + " has no CGRT_ name"))
        continue;
      c.check(seen.insert(n).second, std::string("two statuses are named ") + n);
    }
    for (int s : {-1, (int)CGRT_ERROR_INTERNAL + 1, 1000, INT_MAX, INT_MIN}) {
      const char *n = cgrt_status_name((cgrt_status)s);
      c.check(n != nullptr && strcmp(n, "CGRT_STATUS_UNKNOWN") == 0,
              "cgrt_status_name(" + std::to_string(s) + ") is not CGRT_STATUS_UNKNOWN");
    }
  });
  A("cgrt_status_string/every status and values outside the list", [](Ctx &c) {
    for (int s : {0, 1, 7, (int)CGRT_ERROR_INTERNAL, -1, (int)CGRT_ERROR_INTERNAL + 1, INT_MAX, INT_MIN}) {
      const char *n = cgrt_status_string((cgrt_status)s);
      c.check(n != nullptr && n[0] != 0, "cgrt_status_string(" + std::to_string(s) + ") is NULL or empty");
    }
  });
  A("cgrt_last_error/empty on a thread without failures, set after one", [](Ctx &c) {
    std::string fresh = "?", after;
    std::thread t([&] {
      fresh = cgrt_last_error();
      cgrt_runtime_create(nullptr, nullptr);
      after = cgrt_last_error();
    });
    t.join();
    c.check(fresh.empty(), "a new thread's cgrt_last_error() is \"" + fresh + "\", not \"\"");
    c.check(!after.empty(), "cgrt_last_error() is empty after a failing call");
  });
  A("cgrt_set_log_callback/NULL callback and levels outside the enum", [](Ctx &c) {
    static int calls;
    calls = 0;
    auto fn = [](void *, cgrt_log_level, const char *m) { calls += m != nullptr; };
    cgrt_set_log_callback(nullptr, nullptr, (cgrt_log_level)99);
    cgrt_set_log_callback(fn, nullptr, (cgrt_log_level)-7);
    cgrt_set_log_callback(fn, nullptr, (cgrt_log_level)INT_MAX);
    World w(c);  // logs at INFO: must reach the sink without crashing
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
    c.check(w.rt != nullptr, "no runtime with a log sink at level INT_MAX");
  });
}

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

// ---- workspaces and counters ---------------------------------------------------------------

cgrt_status request1(cgrt_runtime *rt, int lane, const char *name, cgrt_tensor_desc d) {
  CUdeviceptr p = 0;
  return cgrt_workspace_request(rt, lane, name, &d, 1, &p);
}

void workspace_cases() {
  A("cgrt_dtype_size/values outside the enum", [](Ctx &c) {
    for (int t : {-1, 6, 99, INT_MAX, INT_MIN})
      c.check(cgrt_dtype_size((cgrt_dtype)t) == 0, "cgrt_dtype_size(" + std::to_string(t) + ") is not 0");
    c.check(cgrt_dtype_size(CGRT_DTYPE_U8) == 1 && cgrt_dtype_size(CGRT_DTYPE_I32) == 4 &&
                cgrt_dtype_size(CGRT_DTYPE_I64) == 8 && cgrt_dtype_size(CGRT_DTYPE_F16) == 2 &&
                cgrt_dtype_size(CGRT_DTYPE_BF16) == 2 && cgrt_dtype_size(CGRT_DTYPE_F32) == 4,
            "cgrt_dtype_size of the known dtypes");
  });
  runtime_handle_cases("cgrt_workspace_request",
                       [](World &, cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(16, CGRT_DTYPE_F32)); });
  runtime_handle_cases("cgrt_workspace_lock", [](World &, cgrt_runtime *rt) { return cgrt_workspace_lock(rt); });
  runtime_handle_cases("cgrt_workspace_get_stats", [](World &, cgrt_runtime *rt) {
    cgrt_workspace_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    return cgrt_workspace_get_stats(rt, &s);
  });
  runtime_handle_cases("cgrt_workspace_visit", [](World &, cgrt_runtime *rt) {
    return cgrt_workspace_visit(rt, [](void *, int, const char *, size_t, size_t) {}, nullptr);
  });
  runtime_handle_cases("cgrt_workspace_verify", [](World &, cgrt_runtime *rt) { return cgrt_workspace_verify(rt); });
  runtime_handle_cases("cgrt_counters_reserve", [](World &, cgrt_runtime *rt) { return cgrt_counters_reserve(rt, 64); });
  runtime_handle_cases("cgrt_counters_get", [](World &, cgrt_runtime *rt) {
    CUdeviceptr p;
    size_t n;
    return cgrt_counters_get(rt, &p, &n);
  });
  runtime_handle_cases("cgrt_counters_verify", [](World &, cgrt_runtime *rt) { return cgrt_counters_verify(rt); });
  value_handle_cases<cgrt_runtime, int>("cgrt_workspace_is_locked", live_rt, dead_rt, cgrt_workspace_is_locked, 0);

  struct ReqCase {
    const char *what;
    cgrt_status (*call)(cgrt_runtime *);
    std::vector<cgrt_status> want;
  };
  static const ReqCase kReq[] = {
      {"lane -1", [](cgrt_runtime *rt) { return request1(rt, -1, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"lane CGRT_MAX_LANES",
       [](cgrt_runtime *rt) { return request1(rt, CGRT_MAX_LANES, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"lane INT_MAX", [](cgrt_runtime *rt) { return request1(rt, INT_MAX, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"lane INT_MIN", [](cgrt_runtime *rt) { return request1(rt, INT_MIN, "x", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"name NULL", [](cgrt_runtime *rt) { return request1(rt, 0, nullptr, desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"name \"\"", [](cgrt_runtime *rt) { return request1(rt, 0, "", desc1(16, CGRT_DTYPE_F32)); }, {IA}},
      {"name of 100000 characters",
       [](cgrt_runtime *rt) {
         std::string n(100000, 'n');
         return request1(rt, 0, n.c_str(), desc1(16, CGRT_DTYPE_F32));
       },
       {IA, OK}},
      {"descs NULL",
       [](cgrt_runtime *rt) {
         CUdeviceptr p;
         return cgrt_workspace_request(rt, 0, "x", nullptr, 1, &p);
       },
       {IA}},
      {"ptrs NULL",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         return cgrt_workspace_request(rt, 0, "x", &d, 1, nullptr);
       },
       {IA}},
      {"count 0",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         CUdeviceptr p;
         return cgrt_workspace_request(rt, 0, "x", &d, 0, &p);
       },
       {IA}},
      {"ndim -1",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = -1;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"ndim CGRT_MAX_TENSOR_DIMS + 1",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = CGRT_MAX_TENSOR_DIMS + 1;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"ndim INT_MAX",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = INT_MAX;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"negative dimension", [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(-1, CGRT_DTYPE_F32)); }, {IA}},
      {"dimension INT64_MIN",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(INT64_MIN, CGRT_DTYPE_F32)); }, {IA}},
      {"dtype 99", [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(16, (cgrt_dtype)99)); }, {IA}},
      {"dtype -1", [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(16, (cgrt_dtype)-1)); }, {IA}},
      {"shape product overflows (INT64_MAX x INT64_MAX)",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(INT64_MAX, CGRT_DTYPE_U8);
         d.ndim = 2;
         d.shape[1] = INT64_MAX;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"bytes overflow (2^62 floats)",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1((int64_t)1 << 62, CGRT_DTYPE_F32)); }, {IA}},
      {"6 dimensions of 2^11 (2^66 bytes)",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(2048, CGRT_DTYPE_U8);
         d.ndim = 6;
         for (int i = 0; i < 6; i++) d.shape[i] = 2048;
         return request1(rt, 0, "x", d);
       },
       {IA}},
      {"4 TiB (out of memory)",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1((int64_t)1 << 40, CGRT_DTYPE_F32)); }, {OOM}},
      {"zero-size dimension",
       [](cgrt_runtime *rt) { return request1(rt, 0, "x", desc1(0, CGRT_DTYPE_F32)); }, {OK, IA}},
      {"ndim 0 (a scalar)",
       [](cgrt_runtime *rt) {
         cgrt_tensor_desc d = desc1(16, CGRT_DTYPE_F32);
         d.ndim = 0;
         return request1(rt, 0, "x", d);
       },
       {OK, IA}},
      {"count 4097 buffers of junk descriptors beyond the first",
       [](cgrt_runtime *rt) {
         std::vector<cgrt_tensor_desc> d(4097, desc1(1, CGRT_DTYPE_U8));
         std::vector<CUdeviceptr> p(4097);
         return cgrt_workspace_request(rt, 0, "x", d.data(), d.size(), p.data());
       },
       {OK, IA}},
  };
  for (const ReqCase &k : kReq) {
    A(std::string("cgrt_workspace_request/") + k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_status st = k.call(w.rt);
      c.expect(st, k.want, std::string("cgrt_workspace_request with ") + k.what);
    });
  }
  A("cgrt_workspace_get_stats/stats NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_workspace_get_stats(w.rt, nullptr), {IA}, "get_stats(rt, NULL)");
  });
  for (size_t size : {(size_t)0, (size_t)1, sizeof(cgrt_workspace_stats) - 1}) {
    A("cgrt_workspace_get_stats/stats->size " + std::to_string(size), [size](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      Canaried<cgrt_workspace_stats> s(size);
      c.expect(cgrt_workspace_get_stats(w.rt, s.get()), {IA}, "get_stats with size " + std::to_string(size));
      c.check(s.canary_intact(), "cgrt_workspace_get_stats wrote past the struct");
    });
  }
  A("cgrt_workspace_get_stats/stats->size larger than the struct writes only the struct", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    Canaried<cgrt_workspace_stats> s(sizeof(cgrt_workspace_stats) + 256);
    if (c.expect(cgrt_workspace_get_stats(w.rt, s.get()), {OK, IA}, "get_stats with a larger size"))
      c.check(s.canary_intact(), "cgrt_workspace_get_stats wrote past sizeof(cgrt_workspace_stats)");
  });
  A("cgrt_workspace_visit/fn NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_workspace_visit(w.rt, nullptr, nullptr), {IA}, "visit(rt, NULL)");
  });
  A("cgrt_counters_decode_bytes/products that overflow saturate to SIZE_MAX", [](Ctx &c) {
    struct {
      size_t rows, heads;
      int sms;
    } v[] = {{SIZE_MAX, 2, 0},          {(size_t)1 << 62, 4, 0}, {SIZE_MAX / 4 - 1, 1, 0},
             {SIZE_MAX / 4 + 1, 1, 132}, {(size_t)1 << 32, (size_t)1 << 32, 132}, {SIZE_MAX, SIZE_MAX, INT_MAX}};
    for (auto &x : v) {
      unsigned __int128 n = (unsigned __int128)x.rows * x.heads;
      if (x.sms > 0 && (unsigned __int128)x.sms > n) n = (unsigned)x.sms;
      unsigned __int128 exact = (n + 7) / 8 * 8 * 4;
      size_t want = exact > SIZE_MAX ? SIZE_MAX : (size_t)exact;
      size_t got = cgrt_counters_decode_bytes(x.rows, x.heads, x.sms);
      c.check(got == want, "cgrt_counters_decode_bytes(" + std::to_string(x.rows) + ", " + std::to_string(x.heads) +
                               ", " + std::to_string(x.sms) + ") = " + std::to_string(got) + ", expected " +
                               std::to_string(want));
    }
  });
  A("cgrt_counters_decode_bytes/zero and negative sizes", [](Ctx &c) {
    c.check(cgrt_counters_decode_bytes(0, 0, 0) == 0, "decode_bytes(0, 0, 0) != 0");
    c.check(cgrt_counters_decode_bytes(0, 16, -5) == 0, "decode_bytes(0, 16, -5) != 0");
    c.check(cgrt_counters_decode_bytes(1, 1, 132) == 544, "decode_bytes(1, 1, 132) != 544");
    c.check(cgrt_counters_decode_bytes(3, 5, INT_MIN) == 64, "decode_bytes(3, 5, INT_MIN) != 64");
  });
  struct CntCase {
    const char *what;
    size_t bytes;
    std::vector<cgrt_status> want;
  };
  static const CntCase kCnt[] = {{"0 bytes", 0, {IA, OK}},
                                 {"SIZE_MAX bytes", SIZE_MAX, {IA, OOM}},
                                 {"SIZE_MAX - 5 bytes (rounding to 32 overflows)", SIZE_MAX - 5, {IA, OOM}},
                                 {"2^63 + 1 bytes", ((size_t)1 << 63) + 1, {IA, OOM}},
                                 {"2^40 + 1 bytes", ((size_t)1 << 40) + 1, {IA, OOM}},
                                 {"decode_bytes of an overflowing product", 0, {IA, OOM}}};
  for (const CntCase &k : kCnt) {
    A(std::string("cgrt_counters_reserve/") + k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      size_t bytes = k.bytes;
      if (std::string(k.what).find("overflowing") != std::string::npos)
        bytes = cgrt_counters_decode_bytes(SIZE_MAX / 2, 4, 132);
      cgrt_status st = cgrt_counters_reserve(w.rt, bytes);
      c.expect(st, k.want, std::string("cgrt_counters_reserve(") + std::to_string(bytes) + ")");
      CUdeviceptr p = 0;
      size_t n = 0;
      if (c.expect_ok(cgrt_counters_get(w.rt, &p, &n), "cgrt_counters_get after") && st != OK)
        c.check(n == 0, "a refused cgrt_counters_reserve left a counter buffer of " + std::to_string(n) + " bytes");
    });
  }
  A("cgrt_counters_get/ptr NULL", [](Ctx &c) {
    World w(c);
    size_t n;
    if (w.rt) c.expect(cgrt_counters_get(w.rt, nullptr, &n), {IA}, "counters_get(rt, NULL, &n)");
  });
  A("cgrt_counters_get/bytes NULL", [](Ctx &c) {
    World w(c);
    CUdeviceptr p;
    if (w.rt) c.expect(cgrt_counters_get(w.rt, &p, nullptr), {OK, IA}, "counters_get(rt, &p, NULL)");
  });
}

// ---- copies ---------------------------------------------------------------------------------

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

// ---- modules, launches, emulated references -----------------------------------------------

void module_cases() {
  runtime_handle_cases("cgrt_module_load", [](World &, cgrt_runtime *rt) {
    cgrt_module *m = nullptr;
    cgrt_status st = cgrt_module_load(rt, adv_kernels_image(), &m);
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
    if (w.rt) c.expect(cgrt_module_load(w.rt, adv_kernels_image(), nullptr), {IA}, "module_load(rt, image, NULL)");
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
      c.expect_ok(cgrt_module_function(live, "adv_scale", &f), "the live module after");
    });
  module_handle_cases("cgrt_module_function", [](World &, cgrt_module *m) {
    CUfunction f;
    return cgrt_module_function(m, "adv_scale", &f);
  });
  struct FnCase {
    const char *what;
    cgrt_status (*call)(cgrt_module *);
  };
  static const FnCase kFn[] = {
      {"name NULL", [](cgrt_module *m) { CUfunction f; return cgrt_module_function(m, nullptr, &f); }},
      {"out NULL", [](cgrt_module *m) { return cgrt_module_function(m, "adv_scale", nullptr); }},
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

// ---- fault injection -------------------------------------------------------------------------

void fault_cases() {
  for (size_t size : {(size_t)0, (size_t)1, offsetof(cgrt_fault_plan, sticky)})
    A("cgrt_fault_set/plan->size " + std::to_string(size), [size](Ctx &c) {
      cgrt_fault_plan p;
      memset(&p, 0, sizeof p);
      p.size = size;
      c.expect(cgrt_fault_set(&p), {IA}, "cgrt_fault_set with size " + std::to_string(size));
    });
  A("cgrt_fault_set/NULL clears", [](Ctx &c) { c.expect_ok(cgrt_fault_set(nullptr), "cgrt_fault_set(NULL)"); });
  A("cgrt_fault_set/symbol of 100000 characters", [](Ctx &c) {
    std::string s(100000, 'c');
    cgrt_fault_plan p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.symbol = s.c_str();
    p.fail_at = 1;
    c.expect(cgrt_fault_set(&p), {OK, IA}, "cgrt_fault_set with a long symbol");
    World w(c, 1);  // no call has that name: nothing fails
    cgrt_fault_set(nullptr);
  });
  A("cgrt_fault_set/symbol that is a prefix of a driver call (\"cuMem\")", [](Ctx &c) {
    cgrt_fault_plan p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.symbol = "cuMem";
    p.fail_at = 1;
    p.sticky = 1;
    c.expect_ok(cgrt_fault_set(&p), "cgrt_fault_set(\"cuMem\")");
    World w(c, 1);  // must create: no call is named "cuMem"
    c.check(cgrt_fault_injected() == 0, "a plan for \"cuMem\" failed some other call");
    cgrt_fault_set(nullptr);
  });
  A("cgrt_fault_calls/counts nothing without a fault-injected runtime", [](Ctx &c) {
    c.expect_ok(cgrt_fault_set(nullptr), "cgrt_fault_set(NULL)");
    World w(c, 0);
    c.check(cgrt_fault_calls() == 0, "calls of a runtime without fault injection were counted");
  });
  A("cgrt_fault_injected/0 after a cleared plan", [](Ctx &c) {
    cgrt_fault_set(nullptr);
    World w(c, 1);
    c.check(cgrt_fault_injected() == 0, "faults injected without a plan");
  });
  A("cgrt_fault_last_symbol/never NULL", [](Ctx &c) {
    cgrt_fault_set(nullptr);
    const char *s = cgrt_fault_last_symbol();
    c.check(s != nullptr && s[0] == 0, "cgrt_fault_last_symbol() after a reset is not \"\"");
    World w(c, 1);
    s = cgrt_fault_last_symbol();
    c.check(s != nullptr && strncmp(s, "cu", 2) == 0, "cgrt_fault_last_symbol() does not name a driver call");
  });
}

// ---- graph sets ----------------------------------------------------------------------------

struct GraphOptCase {
  const char *what;
  void (*set)(cgrt_graphs_options *, World &);
  std::vector<cgrt_status> want;
};

void graphs_cases() {
  A("cgrt_graphs_options_init/NULL", [](Ctx &) { cgrt_graphs_options_init(nullptr); });
  runtime_handle_cases("cgrt_graphs_create", [](World &w, cgrt_runtime *rt) {
    cgrt_graphs_options o;
    w.engine()->options(&o, w.descs);
    cgrt_graphs *s = nullptr;
    cgrt_status st = cgrt_graphs_create(rt, &o, &s);
    if (st == OK) cgrt_graphs_destroy(s);
    return st;
  });
  A("cgrt_graphs_create/out NULL", [](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    cgrt_graphs_options o;
    e->options(&o, w.descs);
    c.expect(cgrt_graphs_create(w.rt, &o, nullptr), {IA}, "graphs_create(rt, &o, NULL)");
  });
  A("cgrt_graphs_create/options NULL", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = static_cast<cgrt_graphs *>(foreign());
    if (!w.rt) return;
    c.expect(cgrt_graphs_create(w.rt, nullptr, &s), {IA}, "graphs_create(rt, NULL, &s)");
    c.check(s == nullptr, "*out is not NULL after a failed cgrt_graphs_create");
  });
  static int two_ints[2] = {2, 4};
  static int zero_size[] = {0, 4}, neg_size[] = {-3, 4}, max_size[] = {INT_MAX}, min_size[] = {INT_MIN};
  static const GraphOptCase kOpts[] = {
      {"options->size 0", [](cgrt_graphs_options *o, World &) { o->size = 0; }, {IA}},
      {"options->size one short", [](cgrt_graphs_options *o, World &) { o->size = sizeof *o - 1; }, {IA}},
      {"max_num_seqs 0", [](cgrt_graphs_options *o, World &) { o->max_num_seqs = 0; }, {IA}},
      {"max_num_seqs -1", [](cgrt_graphs_options *o, World &) { o->max_num_seqs = -1; }, {IA}},
      {"max_num_seqs INT_MAX", [](cgrt_graphs_options *o, World &) { o->max_num_seqs = INT_MAX; }, {IA}},
      {"max_num_seqs CGRT_GRAPHS_MAX_ROWS + 1",
       [](cgrt_graphs_options *o, World &) { o->max_num_seqs = CGRT_GRAPHS_MAX_ROWS + 1; }, {IA}},
      {"max_model_len 0", [](cgrt_graphs_options *o, World &) { o->max_model_len = 0; }, {IA}},
      {"max_model_len INT_MIN", [](cgrt_graphs_options *o, World &) { o->max_model_len = INT_MIN; }, {IA}},
      {"enqueue NULL", [](cgrt_graphs_options *o, World &) { o->enqueue = nullptr; }, {IA}},
      {"block_len 1", [](cgrt_graphs_options *o, World &) { o->block_len = 1; }, {IA}},
      {"block_len -1", [](cgrt_graphs_options *o, World &) { o->block_len = -1; }, {IA}},
      {"block_len INT_MAX", [](cgrt_graphs_options *o, World &) { o->block_len = INT_MAX; }, {IA}},
      {"no mode enabled",
       [](cgrt_graphs_options *o, World &) {
         o->enable_decode = 0;
         o->block_len = 0;
       },
       {IA}},
      {"dcp_world_size 0", [](cgrt_graphs_options *o, World &) { o->dcp_world_size = 0; }, {IA}},
      {"dcp_world_size -1", [](cgrt_graphs_options *o, World &) { o->dcp_world_size = -1; }, {IA}},
      {"warmup_runs -1", [](cgrt_graphs_options *o, World &) { o->warmup_runs = -1; }, {IA}},
      {"draft_steps 1", [](cgrt_graphs_options *o, World &) { o->draft_steps = 1; }, {IA}},
      {"draft_steps -2", [](cgrt_graphs_options *o, World &) { o->draft_steps = -2; }, {IA}},
      {"replay_mode 3", [](cgrt_graphs_options *o, World &) { o->replay_mode = (cgrt_replay_mode)3; }, {IA}},
      {"replay_mode -1", [](cgrt_graphs_options *o, World &) { o->replay_mode = (cgrt_replay_mode)-1; }, {IA}},
      {"device_patch 2", [](cgrt_graphs_options *o, World &) { o->device_patch = 2; }, {IA}},
      {"device_patch with exec-update replay",
       [](cgrt_graphs_options *o, World &) {
         o->device_patch = 1;
         o->replay_mode = CGRT_REPLAY_EXEC_UPDATE;
       },
       {IA}},
      {"num_buffers CGRT_GRAPHS_MAX_BUFFERS + 1",
       [](cgrt_graphs_options *o, World &) {
         o->num_buffers = CGRT_GRAPHS_MAX_BUFFERS + 1;
         o->meta.enabled = 0;
       },
       {IA}},
      {"num_buffers SIZE_MAX",
       [](cgrt_graphs_options *o, World &) {
         o->num_buffers = SIZE_MAX;
         o->meta.enabled = 0;
       },
       {IA}},
      {"buffers NULL with num_buffers 1",
       [](cgrt_graphs_options *o, World &) {
         o->buffers = nullptr;
         o->num_buffers = 1;
         o->meta.enabled = 0;
       },
       {IA}},
      {"a buffer at address 0", [](cgrt_graphs_options *o, World &w) { w.descs[X].ptr = 0; (void)o; }, {IA}},
      {"a buffer of 0 bytes", [](cgrt_graphs_options *o, World &w) { w.descs[X].bytes = 0; (void)o; }, {IA}},
      {"a buffer of direction 0",
       [](cgrt_graphs_options *o, World &w) { w.descs[X].dir = (cgrt_buffer_dir)0; (void)o; }, {IA}},
      {"a buffer of direction 4",
       [](cgrt_graphs_options *o, World &w) { w.descs[X].dir = (cgrt_buffer_dir)4; (void)o; }, {IA}},
      {"two buffers that overlap",
       [](cgrt_graphs_options *o, World &w) { w.descs[Y].ptr = w.descs[X].ptr + 4; (void)o; }, {IA}},
      {"a buffer whose range wraps past 2^64",
       [](cgrt_graphs_options *o, World &w) {
         w.descs[X].ptr = ~(CUdeviceptr)0 - 15;
         w.descs[X].bytes = 64;
         (void)o;
       },
       {IA}},
      {"a buffer of SIZE_MAX bytes",
       [](cgrt_graphs_options *o, World &w) { w.descs[WIN].bytes = SIZE_MAX; (void)o; }, {IA}},
      {"a capture size of 0",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = zero_size;
         o->num_capture_sizes = 2;
       },
       {IA}},
      {"a negative capture size",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = neg_size;
         o->num_capture_sizes = 2;
       },
       {IA}},
      {"capture size INT_MAX",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = max_size;
         o->num_capture_sizes = 1;
       },
       {IA, OK}},
      {"capture size INT_MIN",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = min_size;
         o->num_capture_sizes = 1;
       },
       {IA}},
      {"num_capture_sizes whose byte size overflows size_t",
       [](cgrt_graphs_options *o, World &) {
         o->capture_sizes = two_ints;
         o->num_capture_sizes = SIZE_MAX / sizeof(int) + 3;
       },
       {IA, OOM}},
      {"max_capture_rows -5", [](cgrt_graphs_options *o, World &) { o->max_capture_rows = -5; }, {IA}},
      {"meta.block_size 0", [](cgrt_graphs_options *o, World &) { o->meta.block_size = 0; }, {IA}},
      {"meta.max_blocks_per_seq -1", [](cgrt_graphs_options *o, World &) { o->meta.max_blocks_per_seq = -1; }, {IA}},
      {"meta.seq_lens -1", [](cgrt_graphs_options *o, World &) { o->meta.seq_lens = -1; }, {IA}},
      {"meta.slot_mapping out of range", [](cgrt_graphs_options *o, World &) { o->meta.slot_mapping = NB; }, {IA}},
      {"meta.block_table too small for max_blocks_per_seq",
       [](cgrt_graphs_options *o, World &) { o->meta.max_blocks_per_seq *= 2; }, {IA}},
      {"meta.draft_remaining -2",
       [](cgrt_graphs_options *o, World &) {
         o->draft_steps = 2;
         o->draft_while = 1;
         o->meta.draft_remaining = -2;
       },
       {IA}},
      {"meta.draft_remaining out of range",
       [](cgrt_graphs_options *o, World &) {
         o->draft_steps = 2;
         o->draft_while = 1;
         o->meta.draft_remaining = NB + 3;
       },
       {IA}},
      {"draft_steps INT_MAX (an unrolled loop of 2^31 steps)",
       [](cgrt_graphs_options *o, World &) { o->draft_steps = INT_MAX; }, {IA}},
      {"draft loops without metadata",
       [](cgrt_graphs_options *o, World &) {
         o->draft_steps = 2;
         o->meta.enabled = 0;
       },
       {IA}},
  };
  for (const GraphOptCase &k : kOpts)
    A(std::string("cgrt_graphs_create/") + k.what, [&k](Ctx &c) {
      World w(c);
      Engine *e = w.engine();
      if (!e) return;
      cgrt_graphs_options o;
      e->options(&o, w.descs);
      k.set(&o, w);
      cgrt_graphs *s = static_cast<cgrt_graphs *>(foreign());
      cgrt_status st = cgrt_graphs_create(w.rt, &o, &s);
      c.expect(st, k.want, std::string("cgrt_graphs_create with ") + k.what);
      if (st == OK)
        cgrt_graphs_destroy(s);
      else
        c.check(s == nullptr, "*out is not NULL after a failed cgrt_graphs_create");
    });

  A("cgrt_graphs_destroy/NULL is a no-op", [](Ctx &c) { c.expect_ok(cgrt_graphs_destroy(nullptr), "destroy(NULL)"); });
  for (Bad b : {B_DEAD, B_FOREIGN, B_MISALIGNED})
    A(std::string("cgrt_graphs_destroy/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      cgrt_graphs *live = w.graphs();
      if (!live) return;
      cgrt_graphs *dead = w.dead_graphs();
      c.expect(cgrt_graphs_destroy(bad_handle(b, live, dead)), {IH}, "cgrt_graphs_destroy");
      c.expect_ok(cgrt_graphs_step(live, CGRT_GRAPH_DECODE, 1, nullptr, 0), "a step of the live set after");
    });
  set_handle_cases("cgrt_graphs_capture", [](World &, cgrt_graphs *s) { return cgrt_graphs_capture(s); });
  set_handle_cases("cgrt_graphs_recapture",
                   [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, 1); });
  set_handle_cases("cgrt_graphs_step",
                   [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 0); });
  set_handle_cases("cgrt_graphs_draft", [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, 1, nullptr, 0); });
  set_handle_cases("cgrt_graphs_set_ranges", [](World &w, cgrt_graphs *s) {
    cgrt_range r = {w.buffer(64), 64, "r"};
    return cgrt_graphs_set_ranges(s, &r, 1);
  });
  set_handle_cases("cgrt_graphs_get_stats", [](World &, cgrt_graphs *s) {
    cgrt_graphs_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    return cgrt_graphs_get_stats(s, &st);
  });
  set_handle_cases("cgrt_graphs_get_bucket", [](World &, cgrt_graphs *s) {
    cgrt_bucket_info bi;
    memset(&bi, 0, sizeof bi);
    bi.size = sizeof bi;
    return cgrt_graphs_get_bucket(s, 0, &bi);
  });
  set_handle_cases("cgrt_graphs_bucket_exec", [](World &, cgrt_graphs *s) {
    CUgraphExec x = nullptr;
    return cgrt_graphs_bucket_exec(s, 0, 0, &x);
  });
  value_handle_cases<cgrt_graphs, CUstream>("cgrt_graphs_stream", live_set, dead_set, cgrt_graphs_stream, nullptr);
  value_handle_cases<cgrt_graphs, size_t>("cgrt_graphs_bucket_count", live_set, dead_set, cgrt_graphs_bucket_count,
                                          (size_t)0);
  value_handle_cases<cgrt_graphs, int>(
      "cgrt_graphs_bucket_rows", live_set, dead_set,
      [](cgrt_graphs *s) { return cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, 1); }, 0);

  struct SetCase {
    const char *what;
    cgrt_status (*call)(World &, cgrt_graphs *);
    std::vector<cgrt_status> want;
    void (*tweak)(cgrt_graphs_options *);
  };
  static const SetCase kSet[] = {
      {"cgrt_graphs_recapture/rows 0", [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, 0); },
       {IA}, nullptr},
      {"cgrt_graphs_recapture/rows -7",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, -7); }, {IA}, nullptr},
      {"cgrt_graphs_recapture/rows INT_MAX",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, CGRT_GRAPH_DECODE, INT_MAX); },
       {CGRT_ERROR_NO_BUCKET}, nullptr},
      {"cgrt_graphs_recapture/mode 5",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_recapture(s, (cgrt_graph_mode)5, 1); },
       {IA, CGRT_ERROR_NO_BUCKET}, nullptr},
      {"cgrt_graphs_step/mode 2", [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, (cgrt_graph_mode)2, 1, nullptr, 0); },
       {IA}, nullptr},
      {"cgrt_graphs_step/mode -1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, (cgrt_graph_mode)-1, 1, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs 0", [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 0, nullptr, 0); },
       {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs -1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, -1, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs INT_MIN",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, INT_MIN, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs max_num_seqs + 1",
       [](World &w, cgrt_graphs *s) {
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, w.engine()->cfg.max_reqs + 1, nullptr, 0);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/num_reqs INT_MAX",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_BLOCK, INT_MAX, nullptr, 0); }, {IA}, nullptr},
      {"cgrt_graphs_step/bindings NULL with num_bindings 1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 1); }, {IA}, nullptr},
      {"cgrt_graphs_step/binding of buffer -1",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {-1, w.engine()->alt[0][X], 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding of buffer num_buffers",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {NB, w.engine()->alt[0][X], 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding of buffer INT_MAX",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {INT_MAX, w.engine()->alt[0][X], 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding to address 0",
       [](World &, cgrt_graphs *s) {
         cgrt_binding b = {X, 0, 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding smaller than the registered buffer",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {X, w.engine()->alt[0][X], 4};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_step/binding whose range wraps past 2^64",
       [](World &, cgrt_graphs *s) {
         cgrt_binding b = {X, ~(CUdeviceptr)0 - 7, SIZE_MAX};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {IA, CGRT_ERROR_STALE_POINTER},
       [](cgrt_graphs_options *o) { o->checked_replay = 1; }},
      {"cgrt_graphs_step/the same buffer bound twice in one call",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b[2] = {{X, w.engine()->alt[0][X], 0}, {X, w.engine()->a[X], 0}};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, b, 2);
       },
       {IA, OK}, nullptr},
      {"cgrt_graphs_step/a mode that was never captured",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_step(s, CGRT_GRAPH_BLOCK, 1, nullptr, 0); }, {IA},
       [](cgrt_graphs_options *o) { o->block_len = 0; }},
      {"cgrt_graphs_step/checked replay, binding to an address never allocated (0xdead000)",
       [](World &, cgrt_graphs *s) {
         cgrt_binding b = {X, 0xdead000, 0};
         return cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
       },
       {CGRT_ERROR_STALE_POINTER}, [](cgrt_graphs_options *o) { o->checked_replay = 1; }},
      {"cgrt_graphs_step/checked replay, binding to host memory cgrt never allocated",
       [](World &w, cgrt_graphs *s) {
         static std::vector<unsigned char> host;
         host.assign(w.engine()->bytes[X] + 4096, 0);
         cgrt_binding b = {X, (CUdeviceptr)(uintptr_t)host.data(), 0};
         cgrt_status st = cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, &b, 1);
         cgrt_runtime_synchronize(w.rt);
         return st;
       },
       {CGRT_ERROR_STALE_POINTER}, [](cgrt_graphs_options *o) { o->checked_replay = 1; }},
      {"cgrt_graphs_draft/no draft loops captured",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, 1, nullptr, 0); }, {CGRT_ERROR_NOT_SUPPORTED}, nullptr},
      {"cgrt_graphs_draft/num_reqs 0", [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, 0, nullptr, 0); }, {IA},
       [](cgrt_graphs_options *o) { o->draft_steps = 2; }},
      {"cgrt_graphs_draft/num_reqs -3", [](World &, cgrt_graphs *s) { return cgrt_graphs_draft(s, -3, nullptr, 0); }, {IA},
       [](cgrt_graphs_options *o) { o->draft_steps = 2; }},
      {"cgrt_graphs_draft/binding of buffer -1",
       [](World &w, cgrt_graphs *s) {
         cgrt_binding b = {-1, w.engine()->alt[0][X], 0};
         return cgrt_graphs_draft(s, 1, &b, 1);
       },
       {IA}, [](cgrt_graphs_options *o) { o->draft_steps = 2; }},
      {"cgrt_graphs_set_ranges/ranges NULL with count 1",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_set_ranges(s, nullptr, 1); }, {IA}, nullptr},
      {"cgrt_graphs_set_ranges/ranges NULL with count 0 (clears)",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_set_ranges(s, nullptr, 0); }, {OK}, nullptr},
      {"cgrt_graphs_set_ranges/base 0",
       [](World &, cgrt_graphs *s) {
         cgrt_range r = {0, 64, "zero"};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_set_ranges/0 bytes",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), 0, "empty"};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_set_ranges/a range that wraps past 2^64",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), SIZE_MAX, "wraps"};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {IA}, nullptr},
      {"cgrt_graphs_set_ranges/what NULL",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), 64, nullptr};
         return cgrt_graphs_set_ranges(s, &r, 1);
       },
       {OK, IA}, nullptr},
      {"cgrt_graphs_set_ranges/count SIZE_MAX",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.buffer(64), 64, "r"};
         return cgrt_graphs_set_ranges(s, &r, SIZE_MAX);
       },
       {IA, OOM}, nullptr},
      {"cgrt_graphs_get_stats/stats NULL", [](World &, cgrt_graphs *s) { return cgrt_graphs_get_stats(s, nullptr); }, {IA},
       nullptr},
      {"cgrt_graphs_get_stats/stats->size 0",
       [](World &w, cgrt_graphs *s) {
         Canaried<cgrt_graphs_stats> st(0);
         cgrt_status r = cgrt_graphs_get_stats(s, st.get());
         w.c.check(st.canary_intact(), "cgrt_graphs_get_stats wrote past the struct");
         return r;
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_stats/stats->size larger than the struct writes only the struct",
       [](World &w, cgrt_graphs *s) {
         Canaried<cgrt_graphs_stats> st(sizeof(cgrt_graphs_stats) + 256);
         cgrt_status r = cgrt_graphs_get_stats(s, st.get());
         w.c.check(st.canary_intact(), "cgrt_graphs_get_stats wrote past sizeof(cgrt_graphs_stats)");
         return r;
       },
       {OK, IA}, nullptr},
      {"cgrt_graphs_get_bucket/index == bucket count",
       [](World &, cgrt_graphs *s) {
         cgrt_bucket_info bi;
         memset(&bi, 0, sizeof bi);
         bi.size = sizeof bi;
         return cgrt_graphs_get_bucket(s, cgrt_graphs_bucket_count(s), &bi);
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_bucket/index SIZE_MAX",
       [](World &, cgrt_graphs *s) {
         cgrt_bucket_info bi;
         memset(&bi, 0, sizeof bi);
         bi.size = sizeof bi;
         return cgrt_graphs_get_bucket(s, SIZE_MAX, &bi);
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_bucket/info NULL", [](World &, cgrt_graphs *s) { return cgrt_graphs_get_bucket(s, 0, nullptr); },
       {IA}, nullptr},
      {"cgrt_graphs_bucket_exec/exec NULL",
       [](World &, cgrt_graphs *s) { return cgrt_graphs_bucket_exec(s, 0, 0, nullptr); }, {IA}, nullptr},
      {"cgrt_graphs_bucket_exec/index SIZE_MAX",
       [](World &, cgrt_graphs *s) {
         CUgraphExec x = nullptr;
         return cgrt_graphs_bucket_exec(s, SIZE_MAX, 0, &x);
       },
       {IA}, nullptr},
      {"cgrt_graphs_bucket_exec/launches UINT_MAX",
       [](World &, cgrt_graphs *s) {
         CUgraphExec x = nullptr;
         return cgrt_graphs_bucket_exec(s, 0, UINT_MAX, &x);
       },
       {IA}, nullptr},
      {"cgrt_graphs_get_bucket/info->size 0",
       [](World &w, cgrt_graphs *s) {
         Canaried<cgrt_bucket_info> bi(0);
         cgrt_status r = cgrt_graphs_get_bucket(s, 0, bi.get());
         w.c.check(bi.canary_intact(), "cgrt_graphs_get_bucket wrote past the struct");
         return r;
       },
       {IA}, nullptr},
      {"cgrt_graphs_bucket_rows/bad mode and request counts answer 0",
       [](World &w, cgrt_graphs *s) {
         for (int m : {-1, 2, 99})
           w.c.check(cgrt_graphs_bucket_rows(s, (cgrt_graph_mode)m, 1) == 0,
                     "cgrt_graphs_bucket_rows with mode " + std::to_string(m) + " != 0");
         for (int n : {0, -1, INT_MIN, INT_MAX})
           w.c.check(cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, n) == 0,
                     "cgrt_graphs_bucket_rows with num_reqs " + std::to_string(n) + " != 0");
         return OK;
       },
       {OK}, nullptr},
  };
  for (const SetCase &k : kSet)
    A(k.what, [&k](Ctx &c) {
      World w(c);
      cgrt_graphs *s = w.graphs(k.tweak);
      if (!s) return;
      cgrt_status st = k.call(w, s);
      c.expect(st, k.want, std::string(k.what));
    });
  A("cgrt_graphs_step/before cgrt_graphs_capture", [](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    cgrt_graphs_options o;
    e->options(&o, w.descs);
    cgrt_graphs *s = nullptr;
    if (!c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "cgrt_graphs_create")) return;
    c.expect(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 0), {IA, OK}, "a step before any capture");
    c.expect_ok(cgrt_graphs_destroy(s), "cgrt_graphs_destroy");
  });
}

// ---- MLA ---------------------------------------------------------------------------------

void mla_cases() {
  A("cgrt_mla_options_init/NULL", [](Ctx &) { cgrt_mla_options_init(nullptr); });
  runtime_handle_cases("cgrt_mla_plan_create", [](World &, cgrt_runtime *rt) {
    cgrt_mla_options o = small_mla(1);
    cgrt_mla_plan *p = nullptr;
    cgrt_status st = cgrt_mla_plan_create(rt, &o, &p);
    cgrt_mla_plan_destroy(p);
    return st;
  });
  struct PlanOpt {
    const char *what;
    void (*set)(cgrt_mla_options *);
    std::vector<cgrt_status> want;
  };
  static const PlanOpt kOpts[] = {
      {"options->size 0", [](cgrt_mla_options *o) { o->size = 0; }, {IA}},
      {"options->size 4", [](cgrt_mla_options *o) { o->size = 4; }, {IA}},
      {"max_num_seqs 0", [](cgrt_mla_options *o) { o->max_num_seqs = 0; }, {IA}},
      {"max_num_seqs -1", [](cgrt_mla_options *o) { o->max_num_seqs = -1; }, {IA}},
      {"heads 0", [](cgrt_mla_options *o) { o->heads = 0; }, {IA}},
      {"heads -16", [](cgrt_mla_options *o) { o->heads = -16; }, {IA}},
      {"block_len 0", [](cgrt_mla_options *o) { o->block_len = 0; }, {IA}},
      {"dcp_world_size 0", [](cgrt_mla_options *o) { o->dcp_world_size = 0; }, {IA}},
      {"page_size 0", [](cgrt_mla_options *o) { o->page_size = 0; }, {IA}},
      {"page_size 8", [](cgrt_mla_options *o) { o->page_size = 8; }, {IA}},
      {"page_size 48", [](cgrt_mla_options *o) { o->page_size = 48; }, {IA}},
      {"page_size 128", [](cgrt_mla_options *o) { o->page_size = 128; }, {IA}},
      {"max_model_len 0", [](cgrt_mla_options *o) { o->max_model_len = 0; }, {IA}},
      {"max_model_len INT_MAX with max_blocks_per_seq 0",
       [](cgrt_mla_options *o) {
         o->max_model_len = INT_MAX;
         o->max_blocks_per_seq = 0;
       },
       {IA}},
      {"max_blocks_per_seq -1", [](cgrt_mla_options *o) { o->max_blocks_per_seq = -1; }, {IA}},
      {"combine 3", [](cgrt_mla_options *o) { o->combine = (cgrt_mla_combine)3; }, {IA}},
      {"combine -1", [](cgrt_mla_options *o) { o->combine = (cgrt_mla_combine)-1; }, {IA}},
      {"lane -1", [](cgrt_mla_options *o) { o->lane = -1; }, {IA}},
      {"lane CGRT_MAX_LANES", [](cgrt_mla_options *o) { o->lane = CGRT_MAX_LANES; }, {IA}},
      {"programmatic_launch 3", [](cgrt_mla_options *o) { o->programmatic_launch = 3; }, {IA}},
      {"programmatic_launch -1", [](cgrt_mla_options *o) { o->programmatic_launch = -1; }, {IA}},
      {"max_num_seqs x block_len overflows int",
       [](cgrt_mla_options *o) {
         o->max_num_seqs = INT_MAX;
         o->block_len = 4;
       },
       {IA}},
      {"heads x dcp_world_size overflows int",
       [](cgrt_mla_options *o) {
         o->heads = INT_MAX / 2;
         o->dcp_world_size = 4;
       },
       {IA}},
      {"max_num_seqs and heads INT_MAX", [](cgrt_mla_options *o) { o->max_num_seqs = o->heads = INT_MAX; }, {IA}},
      {"partials of about 275 GB (out of memory)",
       [](cgrt_mla_options *o) {
         o->max_num_seqs = 1 << 20;
         o->heads = 128;
       },
       {OOM, IA}},
  };
  for (const PlanOpt &k : kOpts)
    A(std::string("cgrt_mla_plan_create/") + k.what, [&k](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_mla_options o = small_mla(2);
      k.set(&o);
      cgrt_mla_plan *p = static_cast<cgrt_mla_plan *>(foreign());
      cgrt_status st = cgrt_mla_plan_create(w.rt, &o, &p);
      c.expect(st, k.want, std::string("cgrt_mla_plan_create with ") + k.what);
      if (st == OK)
        cgrt_mla_plan_destroy(p);
      else
        c.check(p == nullptr, "*out is not NULL after a failed cgrt_mla_plan_create");
    });
  A("cgrt_mla_plan_create/options NULL", [](Ctx &c) {
    World w(c);
    cgrt_mla_plan *p = nullptr;
    if (w.rt) c.expect(cgrt_mla_plan_create(w.rt, nullptr, &p), {IA}, "plan_create(rt, NULL, &p)");
  });
  A("cgrt_mla_plan_create/out NULL", [](Ctx &c) {
    World w(c);
    cgrt_mla_options o = small_mla(1);
    if (w.rt) c.expect(cgrt_mla_plan_create(w.rt, &o, nullptr), {IA}, "plan_create(rt, &o, NULL)");
  });
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
    A(std::string("cgrt_mla_plan_destroy/") + kBadNames[b] + " is a no-op", [b](Ctx &c) {
      World w(c);
      cgrt_mla_plan *live = w.plan();
      if (!live) return;
      cgrt_mla_plan *dead = w.dead_plan();
      cgrt_mla_plan_destroy(bad_handle(b, live, dead));
      cgrt_mla_plan_info i;
      memset(&i, 0, sizeof i);
      i.size = sizeof i;
      c.expect_ok(cgrt_mla_plan_get_info(live, &i), "the live plan after");
    });
  plan_handle_cases("cgrt_mla_plan_get_info", [](World &, cgrt_mla_plan *p) {
    cgrt_mla_plan_info i;
    memset(&i, 0, sizeof i);
    i.size = sizeof i;
    return cgrt_mla_plan_get_info(p, &i);
  });
  A("cgrt_mla_plan_get_info/info NULL", [](Ctx &c) {
    World w(c);
    if (cgrt_mla_plan *p = w.plan()) c.expect(cgrt_mla_plan_get_info(p, nullptr), {IA}, "get_info(plan, NULL)");
  });
  for (size_t size : {(size_t)0, sizeof(size_t), offsetof(cgrt_mla_plan_info, split_kernel)})
    A("cgrt_mla_plan_get_info/info->size " + std::to_string(size), [size](Ctx &c) {
      World w(c);
      cgrt_mla_plan *p = w.plan();
      if (!p) return;
      Canaried<cgrt_mla_plan_info> i(size);
      c.expect(cgrt_mla_plan_get_info(p, i.get()), {IA}, "get_info with size " + std::to_string(size));
      c.check(i.canary_intact(), "cgrt_mla_plan_get_info wrote past the struct");
    });
  plan_handle_cases("cgrt_mla_decode", [](World &w, cgrt_mla_plan *p) {
    cgrt_mla_args a = w.mla_args();
    return cgrt_mla_decode(p, nullptr, &a);
  });
  struct DecCase {
    const char *what;
    void (*set)(cgrt_mla_args *);
  };
  static const DecCase kDec[] = {
      {"args->size 0", [](cgrt_mla_args *a) { a->size = 0; }},
      {"args->size 8", [](cgrt_mla_args *a) { a->size = 8; }},
      {"q 0", [](cgrt_mla_args *a) { a->q = 0; }},
      {"kv_cache 0", [](cgrt_mla_args *a) { a->kv_cache = 0; }},
      {"block_table 0", [](cgrt_mla_args *a) { a->block_table = 0; }},
      {"seq_lens 0", [](cgrt_mla_args *a) { a->seq_lens = 0; }},
      {"out 0", [](cgrt_mla_args *a) { a->out = 0; }},
      {"lse 0", [](cgrt_mla_args *a) { a->lse = 0; }},
      {"q misaligned (+2)", [](cgrt_mla_args *a) { a->q += 2; }},
      {"kv_cache misaligned (+8)", [](cgrt_mla_args *a) { a->kv_cache += 8; }},
      {"out misaligned (+4)", [](cgrt_mla_args *a) { a->out += 4; }},
      {"block_table misaligned (+2)", [](cgrt_mla_args *a) { a->block_table += 2; }},
      {"seq_lens misaligned (+1)", [](cgrt_mla_args *a) { a->seq_lens += 1; }},
      {"lse misaligned (+2)", [](cgrt_mla_args *a) { a->lse += 2; }},
      {"num_rows 0", [](cgrt_mla_args *a) { a->num_rows = 0; }},
      {"num_rows -2", [](cgrt_mla_args *a) { a->num_rows = -2; }},
      {"num_rows max_rows + 2", [](cgrt_mla_args *a) { a->num_rows = 6; }},
      {"num_rows INT_MAX", [](cgrt_mla_args *a) { a->num_rows = INT_MAX; }},
      {"num_rows not a multiple of block_len", [](cgrt_mla_args *a) { a->num_rows = 3; }},
      {"softmax_scale NaN", [](cgrt_mla_args *a) { a->softmax_scale = NAN; }},
      {"softmax_scale +inf", [](cgrt_mla_args *a) { a->softmax_scale = INFINITY; }},
      {"softmax_scale 0", [](cgrt_mla_args *a) { a->softmax_scale = 0.0f; }},
      {"softmax_scale -1", [](cgrt_mla_args *a) { a->softmax_scale = -1.0f; }},
  };
  A("cgrt_mla_decode/args NULL", [](Ctx &c) {
    World w(c);
    if (cgrt_mla_plan *p = w.plan()) c.expect(cgrt_mla_decode(p, nullptr, nullptr), {IA}, "decode(plan, NULL, NULL)");
  });
  for (const DecCase &k : kDec)
    A(std::string("cgrt_mla_decode/") + k.what, [&k](Ctx &c) {
      World w(c);
      cgrt_mla_plan *p = w.plan();
      cgrt_mla_args a = w.mla_args();
      if (!p || !a.q) return;
      k.set(&a);
      c.expect(cgrt_mla_decode(p, nullptr, &a), {IA}, std::string("cgrt_mla_decode with ") + k.what);
      c.expect_ok(cgrt_runtime_synchronize(w.rt), "the runtime after");
    });
  A("cgrt_mla_decode/valid arguments (control)", [](Ctx &c) {
    World w(c);
    cgrt_mla_plan *p = w.plan();
    cgrt_mla_args a = w.mla_args();
    if (!p || !a.q) return;
    c.expect_ok(cgrt_mla_decode(p, nullptr, &a), "cgrt_mla_decode with valid arguments");
    c.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
  });
}

// ---- cgrt_version: takes nothing, so its case checks the one thing it promises -----------------

void version_case() {
  A("cgrt_version/matches the headers and can be called before anything else", [](Ctx &c) {
    c.check(cgrt_version() == CGRT_VERSION, "cgrt_version() is " + std::to_string(cgrt_version()) +
                                                ", the headers say " + std::to_string(CGRT_VERSION));
  });
}

// ---- every public function has cases here ---------------------------------------------------

void coverage_case() {
  A("every public function has bad-argument cases", [](Ctx &c) {
    std::set<std::string> covered;
    for (const std::string &n : case_names()) {
      if (n.compare(0, 5, "args/") != 0) continue;
      size_t slash = n.find('/', 5);
      if (slash != std::string::npos) covered.insert(n.substr(5, slash - 5));
    }
    size_t declared = 0;
    for (const char *f : kPublicFunctions) {
      declared++;
      c.check(covered.count(f) > 0, std::string(f) + " (declared in include/cgrt/) has no case in tests/adversarial");
    }
    c.check(declared >= 50, "only " + std::to_string(declared) + " public functions found in include/cgrt/*.h");
  });
}

Register reg([] {
  status_cases();
  runtime_cases();
  workspace_cases();
  memory_cases();
  module_cases();
  fault_cases();
  graphs_cases();
  mla_cases();
  version_case();
  coverage_case();
});

}  // namespace
}  // namespace adv
