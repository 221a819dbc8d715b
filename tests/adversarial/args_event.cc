// Bad-argument cases of include/cgrt/cgrt_event.h.
#include <cstring>
#include <string>
#include <vector>

#include "cgrt/cgrt_event.h"
#include "tests/adversarial/args_common.h"

namespace adv {
namespace {

cgrt_event *dead_event(Ctx &c, cgrt_runtime *rt) {
  cgrt_event *e = nullptr;
  if (!c.expect_ok(cgrt_event_create(rt, &e), "cgrt_event_create")) return nullptr;
  cgrt_event_destroy(e);
  return e;
}

void event_args() {
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
    add("args", std::string("cgrt_event_create/") + kBadNames[b], [b](Ctx &c) {
      World w(c);
      if (!w.rt) return;
      cgrt_runtime *dead = dead_runtime(c);
      cgrt_event *e = static_cast<cgrt_event *>(foreign());
      c.expect(cgrt_event_create(bad_handle(b, w.rt, dead), &e), {IH}, std::string("create with a ") + kBadNames[b]);
      c.check(e == nullptr, "*out is not NULL after a failed cgrt_event_create");
    });
  add("args", "cgrt_event_create/out NULL", [](Ctx &c) {
    World w(c);
    if (w.rt) c.expect(cgrt_event_create(w.rt, nullptr), {IA}, "create(rt, NULL)");
  });
  using ECall = cgrt_status (*)(cgrt_event *, cgrt_event *);
  struct H {
    const char *fn;
    ECall call;
  };
  static const H kHandles[] = {
      {"cgrt_event_record", [](cgrt_event *e, cgrt_event *) { return cgrt_event_record(e, nullptr); }},
      {"cgrt_event_synchronize", [](cgrt_event *e, cgrt_event *) { return cgrt_event_synchronize(e); }},
      {"cgrt_event_query", [](cgrt_event *e, cgrt_event *) {
         int done = 0;
         return cgrt_event_query(e, &done);
       }},
      {"cgrt_event_elapsed_ms", [](cgrt_event *e, cgrt_event *live) {
         float ms;
         return cgrt_event_elapsed_ms(e, live, &ms);
       }},
  };
  for (const H &h : kHandles)
    for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
      add("args", std::string(h.fn) + "/" + kBadNames[b], [&h, b](Ctx &c) {
        World w(c);
        cgrt_event *live = nullptr;
        if (!w.rt || !c.expect_ok(cgrt_event_create(w.rt, &live), "create")) return;
        c.expect_ok(cgrt_event_record(live, nullptr), "record");
        cgrt_event *dead = dead_event(c, w.rt);
        c.expect(h.call(bad_handle(b, live, dead), live), {IH}, std::string(h.fn) + " with a " + kBadNames[b]);
        c.expect_ok(cgrt_event_synchronize(live), "the live event after");
        cgrt_event_destroy(live);
      });
  for (Bad b : {B_NULL, B_DEAD, B_FOREIGN, B_MISALIGNED})
    add("args", std::string("cgrt_event_destroy/") + kBadNames[b] + " is a no-op", [b](Ctx &c) {
      World w(c);
      cgrt_event *live = nullptr;
      if (!w.rt || !c.expect_ok(cgrt_event_create(w.rt, &live), "create")) return;
      cgrt_event_destroy(bad_handle(b, live, dead_event(c, w.rt)));
      c.expect_ok(cgrt_event_record(live, nullptr), "the live event after");
      cgrt_event_destroy(live);
    });
  struct A {
    const char *what;
    cgrt_status (*call)(World &, cgrt_event *, cgrt_event *);
    std::vector<cgrt_status> want;
  };
  static const A kArgs[] = {
      {"cgrt_event_query/done NULL", [](World &, cgrt_event *a, cgrt_event *) { return cgrt_event_query(a, nullptr); },
       {IA}},
      {"cgrt_event_query/never recorded: done",
       [](World &w, cgrt_event *a, cgrt_event *) {
         int done = 0;
         cgrt_status st = cgrt_event_query(a, &done);
         if (st == OK && done != 1) w.c.bad("an event never recorded is not done");
         return st;
       },
       {OK}},
      {"cgrt_event_synchronize/never recorded returns at once",
       [](World &, cgrt_event *a, cgrt_event *) { return cgrt_event_synchronize(a); }, {OK}},
      {"cgrt_event_elapsed_ms/ms NULL",
       [](World &, cgrt_event *a, cgrt_event *b) {
         cgrt_event_record(a, nullptr);
         cgrt_event_record(b, nullptr);
         return cgrt_event_elapsed_ms(a, b, nullptr);
       },
       {IA}},
      {"cgrt_event_elapsed_ms/never recorded",
       [](World &, cgrt_event *a, cgrt_event *b) {
         float ms;
         return cgrt_event_elapsed_ms(a, b, &ms);
       },
       {IA}},
      {"cgrt_event_elapsed_ms/events of two runtimes",
       [](World &, cgrt_event *a, cgrt_event *) {
         cgrt_event *k = nullptr;
         if (cgrt_event_create(keeper(), &k) != OK) return OK;
         cgrt_event_record(a, nullptr);
         cgrt_event_record(k, nullptr);
         float ms;
         cgrt_status st = cgrt_event_elapsed_ms(a, k, &ms);
         cgrt_event_destroy(k);
         return st;
       },
       {IA}},
      {"cgrt_event_elapsed_ms/an event and itself",
       [](World &w, cgrt_event *a, cgrt_event *) {
         float ms = -1;
         cgrt_event_record(a, nullptr);
         cgrt_status st = cgrt_event_elapsed_ms(a, a, &ms);
         if (st == OK && ms != 0.0f) w.c.bad("elapsed time from an event to itself is not 0");
         return st;
       },
       {OK}},
  };
  for (const A &k : kArgs)
    add("args", k.what, [&k](Ctx &c) {
      World w(c);
      cgrt_event *a = nullptr, *b = nullptr;
      if (!w.rt || !c.expect_ok(cgrt_event_create(w.rt, &a), "create") ||
          !c.expect_ok(cgrt_event_create(w.rt, &b), "create"))
        return;
      c.expect(k.call(w, a, b), k.want, k.what);
      cgrt_event_destroy(a);
      cgrt_event_destroy(b);
    });
}

Register reg([] {
  event_args();
});

}  // namespace
}  // namespace adv
