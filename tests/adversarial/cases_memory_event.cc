// Lifecycle and thread cases of the device-memory and event APIs
// (include/cgrt/cgrt_memory.h: cgrt_mem_*, include/cgrt/cgrt_event.h): an allocation freed
// under a captured graph, its address handed out again, registered host-backed arrays,
// events outliving their runtime, calls during capture, 8 threads. Their bad-argument
// cases are in args_memory.cc and args_event.cc.
#include <climits>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_event.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"
#include "tests/adversarial/world.h"

namespace adv {
namespace {

const cgrt_status OK = CGRT_SUCCESS, IA = CGRT_ERROR_INVALID_ARGUMENT, IH = CGRT_ERROR_INVALID_HANDLE,
                  DRV = CGRT_ERROR_DRIVER, OOM = CGRT_ERROR_OUT_OF_MEMORY, CAP = CGRT_ERROR_CAPTURING;

// A captured checked set over the engine whose buffer X is rebound to `x`.
struct CheckedSet {
  World w;
  cgrt_graphs *s = nullptr;
  Engine *e = nullptr;
  explicit CheckedSet(Ctx &c) : w(c) {
    s = w.graphs([](cgrt_graphs_options *o) { o->checked_replay = 1; });
    e = w.engine();
  }
  bool ok() const { return s != nullptr; }
  // A step with X bound to x; OUT holds a sentinel, so "nothing launched" is visible.
  cgrt_status step(CUdeviceptr x, bool *launched) {
    std::vector<float> sentinel((size_t)e->max_rows, 5.0f), back((size_t)e->max_rows);
    cgrt_memcpy_htod(w.rt, e->a[OUT], sentinel.data(), sentinel.size() * 4);
    cgrt_binding b = {X, x, 0};
    cgrt_status st = cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 2, x ? &b : nullptr, x ? 1 : 0);
    cgrt_runtime_synchronize(w.rt);
    cgrt_memcpy_dtoh(w.rt, back.data(), e->a[OUT], back.size() * 4);
    *launched = back != sentinel;
    return st;
  }
};

void mem_lifecycle() {
  add("lifecycle", "checked replay refuses a cgrt_mem_alloc allocation freed under the graph", [](Ctx &c) {
    CheckedSet k(c);
    if (!k.ok()) return;
    CUdeviceptr p = 0;
    bool launched = false;
    if (!c.expect_ok(cgrt_mem_alloc(k.w.rt, k.e->bytes[X], &p), "alloc")) return;
    c.expect_ok(k.step(p, &launched), "a checked step on the live allocation");
    c.expect_ok(cgrt_mem_free(k.w.rt, p), "free");
    c.expect(k.step(0, &launched), {CGRT_ERROR_STALE_POINTER}, "a checked step on the freed allocation");
    c.check(!launched, "the refused step launched");
    cgrt_binding back = {X, k.e->a[X], 0};
    c.expect_ok(cgrt_graphs_step(k.s, CGRT_GRAPH_DECODE, 2, &back, 1), "a step bound back");
  });
  add("lifecycle", "checked replay refuses a freed allocation whose address was handed out again", [](Ctx &c) {
    CheckedSet k(c);
    if (!k.ok()) return;
    CUdeviceptr p = 0, q = 0;
    bool launched = false;
    if (!c.expect_ok(cgrt_mem_alloc(k.w.rt, k.e->bytes[X], &p), "alloc")) return;
    c.expect_ok(k.step(p, &launched), "a checked step on the allocation");
    c.expect_ok(cgrt_mem_free(k.w.rt, p), "free");
    std::vector<CUdeviceptr> others;
    for (int i = 0; i < 64 && q != p; i++) {
      if (!c.expect_ok(cgrt_mem_alloc(k.w.rt, k.e->bytes[X], &q), "alloc again")) break;
      others.push_back(q);
    }
    if (q == p) {
      c.expect(k.step(0, &launched), {CGRT_ERROR_STALE_POINTER}, "a checked step after the address was reused");
      c.check(!launched, "the refused step launched");
    } else {
      c.skip("the driver did not hand the freed address out again within 64 allocations");
    }
    for (CUdeviceptr o : others) cgrt_mem_free(k.w.rt, o);
  });
  add("lifecycle", "a registered host-backed array: bound, checked, unregistered, refused", [](Ctx &c) {
    CheckedSet k(c);
    if (!k.ok()) return;
    static std::vector<float> host;
    host.assign((size_t)k.e->max_rows + 64, 0.25f);
    CUdeviceptr b = (CUdeviceptr)(uintptr_t)host.data();
    bool launched = false;
    if (!c.expect_ok(cgrt_mem_register(k.w.rt, b, host.size() * 4), "register")) return;
    c.expect_ok(k.step(b, &launched), "a checked step on the registered array");
    c.expect_ok(cgrt_mem_unregister(k.w.rt, b), "unregister");
    c.expect(k.step(0, &launched), {CGRT_ERROR_STALE_POINTER}, "a checked step after unregistering");
    c.check(!launched, "the refused step launched");
  }, CaseOpts{60, "host-backed arrays exist on the emulation only"});
  add("lifecycle", "cgrt_mem_alloc and cgrt_mem_free during capture are refused", [](Ctx &c) {
    World w(c);
    CUdeviceptr live = 0, got = 0;
    if (!w.rt || !c.expect_ok(cgrt_mem_alloc(w.rt, 256, &live), "alloc before")) return;
    cgrt_status a = OK, f = OK;
    cgrt_graphs *s = nullptr;
    cgrt_status cap = w.capture_with_probe(
        [&](CUstream) {
          a = cgrt_mem_alloc(w.rt, 256, &got);
          f = cgrt_mem_free(w.rt, live);
        },
        &s);
    c.expect(cap, {OK, CGRT_ERROR_CAPTURE_FAILED}, "capture");
    c.check(a == CAP, "cgrt_mem_alloc during capture returned " + name_of(a));
    c.check(f == CAP, "cgrt_mem_free during capture returned " + name_of(f));
    if (got) cgrt_mem_free(w.rt, got);
    c.expect_ok(cgrt_mem_free(w.rt, live), "the allocation is freed after the capture");
    c.expect_ok(cgrt_graphs_destroy(s), "destroy");
  });
  add("lifecycle", "cgrt_runtime_destroy frees live cgrt_mem_alloc allocations (one WARN each)", [](Ctx &c) {
    static int warns;
    warns = 0;
    cgrt_runtime *rt = new_runtime(c);
    if (!rt) return;
    CUdeviceptr p[3];
    for (CUdeviceptr &x : p) c.expect_ok(cgrt_mem_alloc(rt, 1 << 16, &x), "alloc");
    cgrt_set_log_callback([](void *, cgrt_log_level l, const char *) { warns += l == CGRT_LOG_WARN; }, nullptr,
                          CGRT_LOG_WARN);
    c.expect_ok(cgrt_runtime_destroy(rt), "destroy with 3 live allocations");
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
    c.check(warns >= 3, "cgrt_runtime_destroy logged " + std::to_string(warns) + " warnings for 3 live allocations");
  });
  add("threads", "8 threads allocate, bind, step and free", [](Ctx &c) {
    CheckedSet k(c);
    if (!k.ok()) return;
    std::vector<std::thread> th;
    std::vector<std::string> errs(8);
    for (int t = 0; t < 8; t++)
      th.emplace_back([&, t] {
        cgrt_runtime_synchronize(k.w.rt);
        for (int i = 0; i < (c.full ? 200 : 20); i++) {
          CUdeviceptr p = 0;
          if (cgrt_mem_alloc(k.w.rt, 4096 + 256 * (size_t)t, &p) != OK) {
            errs[(size_t)t] = std::string("alloc: ") + cgrt_last_error();
            return;
          }
          if (t < 2) {  // two threads step with X bound to their fresh allocation
            cgrt_binding b = {X, p, 0};
            cgrt_status st = cgrt_graphs_step(k.s, CGRT_GRAPH_DECODE, 1, &b, 1);
            if (st != OK && st != CGRT_ERROR_STALE_POINTER) errs[(size_t)t] = std::string("step: ") + cgrt_last_error();
            cgrt_runtime_synchronize(k.w.rt);
          }
          if (t >= 2 && cgrt_mem_free(k.w.rt, p) != OK) errs[(size_t)t] = std::string("free: ") + cgrt_last_error();
        }
      });
    for (std::thread &x : th) x.join();
    for (int t = 0; t < 8; t++) c.check(errs[(size_t)t].empty(), "thread " + std::to_string(t) + ": " + errs[(size_t)t]);
    cgrt_binding back = {X, k.e->a[X], 0};
    c.expect_ok(cgrt_graphs_step(k.s, CGRT_GRAPH_DECODE, 1, &back, 1), "a step bound back");
    c.allow_device_leak();  // threads 0-1 keep their last allocations: freed with the runtime
  });
}


void event_lifecycle() {
  add("lifecycle", "an event outliving its runtime", [](Ctx &c) {
    cgrt_runtime *rt = new_runtime(c);
    cgrt_event *e = nullptr;
    if (!rt || !c.expect_ok(cgrt_event_create(rt, &e), "create")) return (void)cgrt_runtime_destroy(rt);
    c.expect_ok(cgrt_event_record(e, nullptr), "record");
    c.expect_ok(cgrt_runtime_destroy(rt), "cgrt_runtime_destroy with a live event");
    c.expect(cgrt_event_record(e, nullptr), {IH}, "record afterwards");
    c.expect(cgrt_event_synchronize(e), {IH}, "synchronize afterwards");
    int done = 0;
    c.expect(cgrt_event_query(e, &done), {IH}, "query afterwards");
    cgrt_event_destroy(e);  // a no-op
  });
  add("lifecycle", "a destroyed event's address is never a live event again", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    std::vector<cgrt_event *> dead, live;
    for (int i = 0; i < 24; i++) {
      cgrt_event *e = nullptr;
      if (!c.expect_ok(cgrt_event_create(w.rt, &e), "create")) break;
      bool reused = false;
      for (cgrt_event *d : dead) reused |= d == e;
      if (reused) {
        c.bad("a new event has the address of a destroyed one");
        live.push_back(e);
        break;
      }
      if (i % 2 == 0) {
        cgrt_event_destroy(e);
        dead.push_back(e);
        c.expect(cgrt_event_record(e, nullptr), {IH}, "the destroyed event");
      } else {
        live.push_back(e);
      }
    }
    for (cgrt_event *e : live) cgrt_event_destroy(e);
  });
  add("lifecycle", "events during capture: record allowed, synchronize/query/elapsed refused", [](Ctx &c) {
    World w(c);
    cgrt_event *ev = nullptr;
    if (!w.rt || !c.expect_ok(cgrt_event_create(w.rt, &ev), "create")) return;
    cgrt_status rec = OK, sync = OK, query = OK;
    cgrt_graphs *s = nullptr;
    cgrt_status cap = w.capture_with_probe(
        [&](CUstream st) {
          rec = cgrt_event_record(ev, st);
          sync = cgrt_event_synchronize(ev);
          int done;
          query = cgrt_event_query(ev, &done);
        },
        &s);
    c.expect(cap, {OK, CGRT_ERROR_CAPTURE_FAILED}, "capture");
    c.check(rec == OK, "cgrt_event_record on the capturing stream returned " + name_of(rec));
    c.check(sync == CAP, "cgrt_event_synchronize during capture returned " + name_of(sync));
    c.check(query == CAP, "cgrt_event_query during capture returned " + name_of(query));
    float ms;
    cgrt_event *other = nullptr;
    if (c.expect_ok(cgrt_event_create(w.rt, &other), "create")) {
      c.expect_ok(cgrt_event_record(other, nullptr), "record outside capture");
      c.expect(cgrt_event_elapsed_ms(other, ev, &ms), {CAP, IA}, "elapsed to an event recorded in a capture");
      cgrt_event_destroy(other);
    }
    c.expect_ok(cgrt_event_record(ev, nullptr), "record again outside capture");
    c.expect_ok(cgrt_event_synchronize(ev), "then synchronize");
    cgrt_event_destroy(ev);
    c.expect_ok(cgrt_graphs_destroy(s), "destroy");
  });
  add("threads", "8 threads record, query, synchronize and time events", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    cgrt_event *shared = nullptr;
    if (!c.expect_ok(cgrt_event_create(w.rt, &shared), "create")) return;
    std::vector<std::thread> th;
    std::vector<std::string> errs(8);
    for (int t = 0; t < 8; t++)
      th.emplace_back([&, t] {
        cgrt_event *a = nullptr, *b = nullptr;
        if (cgrt_event_create(w.rt, &a) != OK || cgrt_event_create(w.rt, &b) != OK) {
          errs[(size_t)t] = std::string("create: ") + cgrt_last_error();
          return;
        }
        for (int i = 0; i < (c.full ? 500 : 50); i++) {
          float ms = 0;
          int done = 0;
          if (cgrt_event_record(a, nullptr) != OK || cgrt_event_record(shared, nullptr) != OK ||
              cgrt_event_record(b, nullptr) != OK || cgrt_event_query(shared, &done) != OK ||
              cgrt_event_synchronize(b) != OK || cgrt_event_elapsed_ms(a, b, &ms) != OK || ms < 0) {
            errs[(size_t)t] = std::string("iteration ") + std::to_string(i) + ": " + cgrt_last_error();
            break;
          }
        }
        cgrt_event_destroy(a);
        cgrt_event_destroy(b);
      });
    for (std::thread &x : th) x.join();
    for (int t = 0; t < 8; t++) c.check(errs[(size_t)t].empty(), "thread " + std::to_string(t) + ": " + errs[(size_t)t]);
    cgrt_event_destroy(shared);
  });
}

Register reg([] {
  mem_lifecycle();
  event_lifecycle();
});

}  // namespace
}  // namespace adv
