// What the "args" cases (args_*.cc, one file per public header) share: the statuses they
// expect, the registration of a case in the category, the cases of a handle that is not
// live (NULL, destroyed, foreign, misaligned) for each kind of handle, and a struct with a
// canary after it. Each case is named "<function>/<what is wrong>"; the function must
// return the status its header documents, with a non-empty cgrt_last_error(), without
// crashing or leaking (the runner checks sanitizer reports, LeakSanitizer and, on the
// emulation, device memory after each case).
#ifndef CGRT_TESTS_ADVERSARIAL_ARGS_COMMON_H
#define CGRT_TESTS_ADVERSARIAL_ARGS_COMMON_H

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_runtime.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"
#include "tests/adversarial/world.h"

namespace adv {

constexpr cgrt_status OK = CGRT_SUCCESS, IA = CGRT_ERROR_INVALID_ARGUMENT, IH = CGRT_ERROR_INVALID_HANDLE,
                  OOM = CGRT_ERROR_OUT_OF_MEMORY, DRV = CGRT_ERROR_DRIVER;

inline void A(const std::string &name, CaseFn fn, CaseOpts o = {}) { add("args", name, std::move(fn), o); }

// ---- handles that are not live, for every function that takes one ---------------------

// fn(world, handle) -> status, for a runtime handle; `want` for a non-live one.
using RtCall = cgrt_status (*)(World &, cgrt_runtime *);
inline void runtime_handle_cases(const char *fn_name, RtCall call, std::initializer_list<cgrt_status> null_want = {IH}) {
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
inline void set_handle_cases(const char *fn_name, SetCall call, cgrt_status null_want = IH) {
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
inline void plan_handle_cases(const char *fn_name, PlanCall call) {
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
inline void module_handle_cases(const char *fn_name, ModCall call, cgrt_status null_want = IH) {
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

inline cgrt_graphs *live_set(World &w) { return w.graphs(); }
inline cgrt_graphs *dead_set(World &w) { return w.dead_graphs(); }
inline cgrt_runtime *live_rt(World &w) { return w.rt; }
inline cgrt_runtime *dead_rt(World &w) { return dead_runtime(w.c); }

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

inline cgrt_status get_info(cgrt_runtime *rt, size_t size) {
  Canaried<cgrt_runtime_info> i(size);
  return cgrt_runtime_get_info(rt, i.get());
}

}  // namespace adv

#endif
