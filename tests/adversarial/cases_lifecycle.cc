// Category "lifecycle": handles used in the wrong order or after their time (double
// destroy, a parent destroyed before its children, a destroyed handle's address handed
// out again, a handle of another kind), locked workspaces, calls made inside a capture
// that must fail (and the capture that must recover), and the context of a new thread.
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"
#include "tests/adversarial/world.h"

namespace adv {
namespace {

const cgrt_status OK = CGRT_SUCCESS, IA = CGRT_ERROR_INVALID_ARGUMENT, IH = CGRT_ERROR_INVALID_HANDLE;

void L(const std::string &name, CaseFn fn, CaseOpts o = {}) { add("lifecycle", name, std::move(fn), o); }

cgrt_status info_of(cgrt_runtime *rt) {
  cgrt_runtime_info i;
  memset(&i, 0, sizeof i);
  i.size = sizeof i;
  return cgrt_runtime_get_info(rt, &i);
}

// ---- destroy order -----------------------------------------------------------------------

void destroy_cases() {
  L("runtime destroyed twice", [](Ctx &c) {
    cgrt_runtime *rt = new_runtime(c);
    if (!rt) return;
    c.expect_ok(cgrt_runtime_destroy(rt), "first destroy");
    c.expect(cgrt_runtime_destroy(rt), {IH}, "second destroy");
  });
  L("graph set destroyed twice", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = w.dead_graphs();
    if (s) c.expect(cgrt_graphs_destroy(s), {IH}, "second cgrt_graphs_destroy");
  });
  L("module unloaded twice", [](Ctx &c) {
    World w(c);
    cgrt_module *m = w.dead_module();
    if (m) c.expect(cgrt_module_unload(m), {IH}, "second cgrt_module_unload");
  });
  L("graph set outliving its runtime", [](Ctx &c) {
    cgrt_runtime *rt = new_runtime(c);
    if (!rt) return;
    Engine e;
    cgrt_graphs *s = nullptr;
    cgrt_buffer_desc d[NB];
    cgrt_graphs_options o;
    if (!c.expect_ok(e.init(rt, small_engine()), "engine init")) return (void)cgrt_runtime_destroy(rt);
    e.options(&o, d);
    if (!c.expect_ok(cgrt_graphs_create(rt, &o, &s), "create") || !c.expect_ok(cgrt_graphs_capture(s), "capture"))
      return (void)cgrt_runtime_destroy(rt);
    c.expect_ok(e.destroy(), "module unload");
    c.expect_ok(cgrt_runtime_destroy(rt), "cgrt_runtime_destroy with a live graph set");
    c.expect(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 1, nullptr, 0), {IH}, "a step of the set afterwards");
    cgrt_graphs_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    c.expect(cgrt_graphs_get_stats(s, &st), {IH}, "cgrt_graphs_get_stats afterwards");
    c.expect(cgrt_graphs_capture(s), {IH}, "cgrt_graphs_capture afterwards");
    c.check(cgrt_graphs_bucket_count(s) == 0, "cgrt_graphs_bucket_count afterwards is not 0");
    c.expect(cgrt_graphs_destroy(s), {IH}, "cgrt_graphs_destroy afterwards (destroyed with the runtime)");
  });
  L("MLA plan outliving its runtime", [](Ctx &c) {
    cgrt_runtime *rt = new_runtime(c);
    if (!rt) return;
    cgrt_mla_options o = small_mla();
    cgrt_mla_plan *p = nullptr;
    if (!c.expect_ok(cgrt_mla_plan_create(rt, &o, &p), "plan create")) return (void)cgrt_runtime_destroy(rt);
    c.expect_ok(cgrt_runtime_destroy(rt), "cgrt_runtime_destroy with a live plan");
    cgrt_mla_plan_info i;
    memset(&i, 0, sizeof i);
    i.size = sizeof i;
    c.expect(cgrt_mla_plan_get_info(p, &i), {IH}, "cgrt_mla_plan_get_info afterwards");
    cgrt_mla_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    c.expect(cgrt_mla_decode(p, nullptr, &a), {IH}, "cgrt_mla_decode afterwards");
    cgrt_mla_plan_destroy(p);  // a no-op
  });
  L("module outliving its runtime", [](Ctx &c) {
    cgrt_runtime *rt = new_runtime(c);
    if (!rt) return;
    cgrt_module *m = nullptr;
    if (!c.expect_ok(cgrt_module_load(rt, synth::kernels_image(), &m), "module load"))
      return (void)cgrt_runtime_destroy(rt);
    c.expect_ok(cgrt_runtime_destroy(rt), "cgrt_runtime_destroy with a loaded module");
    CUfunction f = nullptr;
    c.expect(cgrt_module_function(m, "synth_scale", &f), {IH}, "cgrt_module_function afterwards");
    c.expect(cgrt_module_unload(m), {IH}, "cgrt_module_unload afterwards");
  });
  L("launch of a function whose module was unloaded",
    [](Ctx &c) {
      World w(c);
      if (!w.engine()) return;  // the references are registered
      cgrt_module *m = nullptr;
      CUfunction f = nullptr;
      if (!c.expect_ok(cgrt_module_load(w.rt, synth::kernels_image(), &m), "load") ||
          !c.expect_ok(cgrt_module_function(m, "synth_scale", &f), "function"))
        return;
      c.expect_ok(cgrt_module_unload(m), "unload");
      CUdeviceptr p = w.buffer(64);
      int n = 4;
      float a = 2;
      void *args[] = {&n, &p, &p, &a};
      c.expect(cgrt_launch_kernel(w.rt, f, 1, 1, 1, 32, 1, 1, 0, nullptr, args), {CGRT_ERROR_DRIVER, IA},
               "cgrt_launch_kernel of a function of an unloaded module");
    },
    CaseOpts{60, "launching a function of an unloaded module is undefined on the real driver"});
}

// ---- a destroyed handle's address must not become a live handle again ----------------------

template <class T>
void reuse_case(const char *kind, T *(*make)(Ctx &, World &), void (*destroy)(T *), cgrt_status (*use)(T *)) {
  L(std::string("a destroyed ") + kind + "'s address is never a live " + kind + " again", [=](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    std::set<T *> dead;
    std::vector<T *> live;
    for (int round = 0; round < 64 && c.misbehaviours().empty(); round++) {
      T *x = make(c, w);
      if (x == nullptr) break;
      if (dead.count(x)) {
        c.bad(std::string("a new ") + kind + " has the address of a destroyed one (round " + std::to_string(round) +
              "): the old handle now acts on the new object");
        live.push_back(x);
        break;
      }
      if (round % 2 == 0) {
        destroy(x);
        dead.insert(x);
        c.expect(use(x), {IH}, std::string("the destroyed ") + kind);
      } else {
        live.push_back(x);
      }
    }
    for (T *x : live) c.expect_ok(use(x), std::string("a live ") + kind);
    for (T *x : live) destroy(x);
  });
}

void reuse_cases() {
  reuse_case<cgrt_runtime>(
      "runtime", [](Ctx &c, World &) { return new_runtime(c); }, [](cgrt_runtime *r) { cgrt_runtime_destroy(r); },
      info_of);
  reuse_case<cgrt_graphs>(
      "graph set",
      [](Ctx &c, World &w) -> cgrt_graphs * {
        Engine *e = w.engine();
        if (!e) return nullptr;
        cgrt_graphs_options o;
        e->options(&o, w.descs);
        cgrt_graphs *s = nullptr;
        return c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "cgrt_graphs_create") ? s : nullptr;
      },
      [](cgrt_graphs *s) { cgrt_graphs_destroy(s); },
      [](cgrt_graphs *s) {
        cgrt_graphs_stats st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        return cgrt_graphs_get_stats(s, &st);
      });
  reuse_case<cgrt_mla_plan>(
      "MLA plan",
      [](Ctx &c, World &w) -> cgrt_mla_plan * {
        cgrt_mla_options o = small_mla();
        cgrt_mla_plan *p = nullptr;
        return c.expect_ok(cgrt_mla_plan_create(w.rt, &o, &p), "cgrt_mla_plan_create") ? p : nullptr;
      },
      cgrt_mla_plan_destroy,
      [](cgrt_mla_plan *p) {
        cgrt_mla_plan_info i;
        memset(&i, 0, sizeof i);
        i.size = sizeof i;
        return cgrt_mla_plan_get_info(p, &i);
      });
  reuse_case<cgrt_module>(
      "module",
      [](Ctx &c, World &w) -> cgrt_module * {
        cgrt_module *m = nullptr;
        return c.expect_ok(cgrt_module_load(w.rt, synth::kernels_image(), &m), "cgrt_module_load") ? m : nullptr;
      },
      [](cgrt_module *m) { cgrt_module_unload(m); },
      [](cgrt_module *m) {
        CUfunction f;
        cgrt_status st = cgrt_module_function(m, "synth_scale", &f);
        return st == IA ? OK : st;  // the emulation may not know the name yet: still live
      });
  L("destroying a destroyed runtime's handle leaves the runtime made after it alive", [](Ctx &c) {
    // Made and destroyed until the allocator hands the old address out again (it does at
    // once with glibc, never with ASan's quarantine).
    for (int round = 0; round < 32; round++) {
      cgrt_runtime *a = new_runtime(c);
      if (!a) return;
      c.expect_ok(cgrt_runtime_destroy(a), "destroy");
      cgrt_runtime *b = new_runtime(c);
      if (!b) return;
      cgrt_status st = cgrt_runtime_destroy(a);  // the old handle
      if (a == b) {
        c.bad("the new runtime has the destroyed one's address; destroying the old handle returned " + name_of(st));
        if (info_of(b) == IH) return;  // it was destroyed through the old handle
      } else {
        c.expect(st, {IH}, "cgrt_runtime_destroy of the old handle");
      }
      c.expect_ok(info_of(b), "the new runtime afterwards");
      cgrt_runtime_destroy(b);
      if (a == b || !c.misbehaviours().empty()) return;
    }
  });
}

// ---- handles of another kind ------------------------------------------------------------

void kind_cases() {
  L("a live handle of another kind is not live", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = w.graphs();
    cgrt_mla_plan *p = w.plan();
    cgrt_module *m = w.module();
    if (!s || !p || !m) return;
    cgrt_graphs_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    c.expect(cgrt_graphs_get_stats(reinterpret_cast<cgrt_graphs *>(w.rt), &st), {IH}, "a runtime as graph set");
    c.expect(cgrt_graphs_get_stats(reinterpret_cast<cgrt_graphs *>(p), &st), {IH}, "a plan as graph set");
    c.expect(info_of(reinterpret_cast<cgrt_runtime *>(s)), {IH}, "a graph set as runtime");
    c.expect(info_of(reinterpret_cast<cgrt_runtime *>(m)), {IH}, "a module as runtime");
    cgrt_mla_plan_info pi;
    memset(&pi, 0, sizeof pi);
    pi.size = sizeof pi;
    c.expect(cgrt_mla_plan_get_info(reinterpret_cast<cgrt_mla_plan *>(s), &pi), {IH}, "a graph set as plan");
    CUfunction f;
    c.expect(cgrt_module_function(reinterpret_cast<cgrt_module *>(w.rt), "synth_scale", &f), {IH}, "a runtime as module");
    c.expect(cgrt_module_unload(reinterpret_cast<cgrt_module *>(p)), {IH}, "a plan as module");
    c.expect(cgrt_graphs_destroy(reinterpret_cast<cgrt_graphs *>(m)), {IH}, "a module as graph set");
    c.expect(cgrt_runtime_destroy(reinterpret_cast<cgrt_runtime *>(s)), {IH}, "a graph set as runtime (destroy)");
    cgrt_mla_plan_destroy(reinterpret_cast<cgrt_mla_plan *>(w.rt));  // a no-op
    c.expect_ok(info_of(w.rt), "the runtime after all that");
    c.expect_ok(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 2, nullptr, 0), "the graph set after all that");
    c.expect_ok(cgrt_mla_plan_get_info(p, &pi), "the plan after all that");
    c.expect_ok(cgrt_module_function(m, "synth_scale", &f), "the module after all that");
  });
}

// ---- locked workspaces ------------------------------------------------------------------

void lock_cases() {
  L("after the lock, growth fails and leaves addresses and contents intact", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    cgrt_tensor_desc d[2] = {desc1(1000, CGRT_DTYPE_F32), desc1(77, CGRT_DTYPE_I64)};
    CUdeviceptr p[2] = {}, q[3] = {};
    if (!c.expect_ok(cgrt_workspace_request(w.rt, 3, "adv.lock", d, 2, p), "reserve")) return;
    std::vector<float> pattern(1000);
    for (size_t i = 0; i < pattern.size(); i++) pattern[i] = (float)i * 0.5f;
    c.expect_ok(cgrt_memcpy_htod(w.rt, p[0], pattern.data(), 4000), "fill");
    c.expect_ok(cgrt_counters_reserve(w.rt, 4096), "counters");
    c.expect_ok(cgrt_workspace_lock(w.rt), "lock");
    c.expect_ok(cgrt_workspace_lock(w.rt), "lock again (idempotent)");
    c.check(cgrt_workspace_is_locked(w.rt) == 1, "cgrt_workspace_is_locked after the lock");
    cgrt_tensor_desc bigger[2] = {desc1(1001, CGRT_DTYPE_F32), desc1(77, CGRT_DTYPE_I64)};
    c.expect(cgrt_workspace_request(w.rt, 3, "adv.lock", bigger, 2, q), {CGRT_ERROR_WORKSPACE_LOCKED}, "grow buffer 0");
    cgrt_tensor_desc more[3] = {d[0], d[1], desc1(1, CGRT_DTYPE_U8)};
    c.expect(cgrt_workspace_request(w.rt, 3, "adv.lock", more, 3, q), {CGRT_ERROR_WORKSPACE_LOCKED}, "a third buffer");
    c.expect(cgrt_workspace_request(w.rt, 3, "adv.new", d, 1, q), {CGRT_ERROR_WORKSPACE_LOCKED}, "a new reservation");
    c.expect(cgrt_workspace_request(w.rt, 4, "adv.lock", d, 1, q), {CGRT_ERROR_WORKSPACE_LOCKED},
             "the same name in another lane");
    c.expect(cgrt_counters_reserve(w.rt, 8192), {CGRT_ERROR_WORKSPACE_LOCKED}, "grow the counters");
    c.expect_ok(cgrt_counters_reserve(w.rt, 64), "counters that fit");
    cgrt_tensor_desc smaller = desc1(10, CGRT_DTYPE_F32);
    if (c.expect_ok(cgrt_workspace_request(w.rt, 3, "adv.lock", &smaller, 1, q), "a request that fits"))
      c.check(q[0] == p[0], "a request that fits after the lock moved the buffer");
    std::vector<float> back(1000);
    c.expect_ok(cgrt_memcpy_dtoh(w.rt, back.data(), p[0], 4000), "read back");
    c.check(back == pattern, "the contents changed after refused requests");
    c.expect_ok(cgrt_workspace_verify(w.rt), "guards intact");
    cgrt_mla_options o = small_mla();
    cgrt_mla_plan *plan = nullptr;
    c.expect(cgrt_mla_plan_create(w.rt, &o, &plan), {CGRT_ERROR_WORKSPACE_LOCKED},
             "an MLA plan that needs a new reservation after the lock");
    c.check(plan == nullptr, "*out is not NULL after a refused plan");
  });
  L("an MLA plan that fits the locked reservation is made", [](Ctx &c) {
    World w(c);
    if (!w.plan()) return;
    c.expect_ok(cgrt_workspace_lock(w.rt), "lock");
    cgrt_mla_options o = small_mla();
    o.max_num_seqs = 1;
    cgrt_mla_plan *p = nullptr;
    c.expect_ok(cgrt_mla_plan_create(w.rt, &o, &p), "a smaller plan after the lock");
    cgrt_mla_plan_destroy(p);
    o.max_num_seqs = 64;
    c.expect(cgrt_mla_plan_create(w.rt, &o, &p), {CGRT_ERROR_WORKSPACE_LOCKED}, "a larger plan after the lock");
  });
  L("checked replay refuses a buffer whose reservation grew after capture (old storage freed)", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = w.graphs([](cgrt_graphs_options *o) { o->checked_replay = 1; });
    Engine *e = w.engine();
    if (!s) return;
    c.expect_ok(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 2, nullptr, 0), "a checked step before the growth");
    c.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
    // Grow the reservation that holds the captured buffers: new storage, the old freed.
    cgrt_tensor_desc d[NB];
    CUdeviceptr p[NB];
    for (int i = 0; i < NB; i++) d[i] = desc1((int64_t)e->bytes[i] * 2, CGRT_DTYPE_U8);
    if (!c.expect_ok(cgrt_workspace_request(w.rt, 0, (e->cfg.tag + ".a").c_str(), d, NB, p), "grow the reservation"))
      return;
    c.check(p[X] != e->a[X], "the grown reservation kept its address");
    c.expect(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 2, nullptr, 0), {CGRT_ERROR_STALE_POINTER},
             "a checked step on the freed storage");
    cgrt_runtime_synchronize(w.rt);
  });
  L("a workspace visit callback may call cgrt", [](Ctx &c) {
    World w(c);
    if (!w.engine()) return;
    struct U {
      cgrt_runtime *rt;
      int calls = 0, ok = 0;
    } u{w.rt};
    cgrt_status st = cgrt_workspace_visit(
        w.rt,
        [](void *user, int, const char *, size_t, size_t) {
          U *x = static_cast<U *>(user);
          cgrt_workspace_stats s;
          memset(&s, 0, sizeof s);
          s.size = sizeof s;
          x->calls++;
          x->ok += cgrt_workspace_get_stats(x->rt, &s) == CGRT_SUCCESS;
        },
        &u);
    c.expect_ok(st, "cgrt_workspace_visit whose callback calls cgrt_workspace_get_stats");
    c.check(u.calls > 0 && u.ok == u.calls, "cgrt_workspace_get_stats from the visit callback failed");
  }, CaseOpts{4, nullptr});
}

// ---- calls during capture ---------------------------------------------------------------------

// call(world, engine, scratch): scratch is 64 bytes of device memory of its own.
using ProbeCall = std::function<cgrt_status(World &, Engine &, CUdeviceptr)>;
void capture_case(const std::string &what, ProbeCall call, std::vector<cgrt_status> want,
                  bool other_set = false) {
  L("during capture: " + what, [=](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    // Made before the capture: what the probe needs.
    CUdeviceptr scratch = w.buffer(64);
    if (other_set && !w.graphs()) return;
    cgrt_status got = OK;
    std::string msg;
    cgrt_graphs *s = nullptr;
    cgrt_status cap = w.capture_with_probe(
        [&](CUstream) {
          got = call(w, *e, scratch);
          msg = cgrt_last_error();
        },
        &s);
    if (!s) return;
    c.expect_msg(got, msg, want, what + " during capture");
    c.expect(cap, {OK, CGRT_ERROR_CAPTURE_FAILED}, "cgrt_graphs_capture around it");
    // The set, the stream and the thread recover: capture again (the probe is spent).
    if (cap != OK) c.expect_ok(cgrt_graphs_capture(s), "cgrt_graphs_capture again");
    Batch b;
    std::mt19937 g(5);
    b = e->random_batch(g, 2, 1);
    if (c.expect_ok(e->write_inputs(e->a, b), "inputs") &&
        c.expect_ok(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 2, nullptr, 0), "a step afterwards") &&
        c.expect_ok(e->eager(b), "eager")) {
      std::string d = e->compare(e->a, b, 2);
      c.check(d.empty(), "the step afterwards differs from eager: " + d);
    }
    c.expect_ok(cgrt_graphs_destroy(s), "cgrt_graphs_destroy");
    cgrt_runtime *rt2 = new_runtime(c);  // the thread is no longer capturing
    cgrt_runtime_destroy(rt2);
  });
}

void capture_cases() {
  const cgrt_status CAP = CGRT_ERROR_CAPTURING, DRV = CGRT_ERROR_DRIVER;
  capture_case("a new workspace reservation", [](World &w, Engine &, CUdeviceptr) {
    cgrt_tensor_desc d = desc1(64, CGRT_DTYPE_F32);
    CUdeviceptr p;
    return cgrt_workspace_request(w.rt, 0, "adv.during", &d, 1, &p);
  }, {CAP});
  capture_case("growing a reservation", [](World &w, Engine &e, CUdeviceptr) {
    cgrt_tensor_desc d = desc1((int64_t)e.bytes[REQ_SEQ] * 4, CGRT_DTYPE_U8);
    CUdeviceptr p;
    return cgrt_workspace_request(w.rt, 0, (e.cfg.tag + ".a").c_str(), &d, 1, &p);
  }, {CAP});
  capture_case("a workspace request that fits", [](World &w, Engine &e, CUdeviceptr) {
    cgrt_tensor_desc d = desc1(4, CGRT_DTYPE_U8);
    CUdeviceptr p;
    return cgrt_workspace_request(w.rt, 0, (e.cfg.tag + ".a").c_str(), &d, 1, &p);
  }, {OK});
  capture_case("growing the counters", [](World &w, Engine &, CUdeviceptr) { return cgrt_counters_reserve(w.rt, 1 << 16); }, {CAP});
  capture_case("cgrt_workspace_lock", [](World &w, Engine &, CUdeviceptr) { return cgrt_workspace_lock(w.rt); }, {CAP});
  capture_case("cgrt_mla_plan_create", [](World &w, Engine &, CUdeviceptr) {
    cgrt_mla_options o = small_mla();
    cgrt_mla_plan *p = nullptr;
    cgrt_status st = cgrt_mla_plan_create(w.rt, &o, &p);
    cgrt_mla_plan_destroy(p);
    return st;
  }, {CAP});
  capture_case("cgrt_runtime_synchronize", [](World &w, Engine &, CUdeviceptr) { return cgrt_runtime_synchronize(w.rt); }, {CAP, DRV});
  capture_case("cgrt_stream_synchronize of the legacy stream",
               [](World &w, Engine &, CUdeviceptr) { return cgrt_stream_synchronize(w.rt, nullptr); }, {CAP, DRV});
  capture_case("cgrt_memcpy_htod", [](World &w, Engine &, CUdeviceptr p) {
    int v = 1;
    return cgrt_memcpy_htod(w.rt, p, &v, 4);
  }, {CAP, DRV});
  capture_case("cgrt_memcpy_dtoh", [](World &w, Engine &, CUdeviceptr p) {
    int v = 1;
    return cgrt_memcpy_dtoh(w.rt, &v, p, 4);
  }, {CAP, DRV});
  capture_case("cgrt_memset_d8", [](World &w, Engine &, CUdeviceptr p) { return cgrt_memset_d8(w.rt, p, 0, 4); },
               {CAP, DRV});
  capture_case("cgrt_workspace_verify", [](World &w, Engine &, CUdeviceptr) { return cgrt_workspace_verify(w.rt); }, {CAP, DRV});
  capture_case("cgrt_counters_verify", [](World &w, Engine &, CUdeviceptr) {
    cgrt_counters_reserve(w.rt, 64);  // may be refused: nothing to verify then
    return cgrt_counters_verify(w.rt);
  }, {CAP, DRV, OK});
  // Headers that say "must not be called during capture" without a status: refused, or
  // done without harm (the capture and the steps after it still check out).
  capture_case("cgrt_module_load", [](World &w, Engine &, CUdeviceptr) {
    cgrt_module *m = nullptr;
    cgrt_status st = cgrt_module_load(w.rt, synth::kernels_image(), &m);
    if (st == OK) cgrt_module_unload(m);
    return st;
  }, {CAP, DRV, OK});
  capture_case("cgrt_runtime_create", [](World &, Engine &, CUdeviceptr) {
    cgrt_runtime *rt = nullptr;
    cgrt_status st = cgrt_runtime_create(nullptr, &rt);
    if (st == OK) cgrt_runtime_destroy(rt);
    return st;
  }, {CAP, DRV});
  capture_case("cgrt_graphs_create of another set", [](World &w, Engine &e, CUdeviceptr) {
    cgrt_graphs_options o;
    cgrt_buffer_desc d[NB];
    e.options(&o, d);
    cgrt_graphs *s = nullptr;
    cgrt_status st = cgrt_graphs_create(w.rt, &o, &s);
    if (st == OK) cgrt_graphs_destroy(s);
    return st;
  }, {CAP});  // graph-set calls are refused on the capturing thread (cgrt_graphs.h)
  capture_case("a step of another, captured set", [](World &w, Engine &, CUdeviceptr) {
    cgrt_graphs *other = w.graphs();
    return other ? cgrt_graphs_step(other, CGRT_GRAPH_DECODE, 1, nullptr, 0) : CAP;
  }, {CAP}, true);
  // Allowed during capture.
  capture_case("cgrt_runtime_get_info (allowed)", [](World &w, Engine &, CUdeviceptr) { return info_of(w.rt); }, {OK});
  capture_case("cgrt_workspace_get_stats (allowed)", [](World &w, Engine &, CUdeviceptr) {
    cgrt_workspace_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    return cgrt_workspace_get_stats(w.rt, &s);
  }, {OK});
  capture_case("cgrt_module_function (allowed)", [](World &, Engine &e, CUdeviceptr) {
    CUfunction f;
    return cgrt_module_function(e.mod, "synth_attn", &f);
  }, {OK});
  capture_case("cgrt_fault_set (allowed)", [](World &, Engine &, CUdeviceptr) { return cgrt_fault_set(nullptr); }, {OK});
}

// ---- capture failures and recovery ----------------------------------------------------------

void capture_failure_cases() {
  L("a bucket whose capture failed: steps of its size still equal eager", [](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    e->fail_at_rows = 2;
    cgrt_graphs_options o;
    e->options(&o, w.descs);
    o.block_len = 0;
    cgrt_graphs *s = nullptr;
    if (!c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "create")) return;
    c.expect(cgrt_graphs_capture(s), {CGRT_ERROR_CAPTURE_FAILED}, "capture with the bucket of 2 failing");
    e->fail_at_rows = -1;
    std::mt19937 g(9);
    for (int reqs : {2, 1, 3, 2}) {
      Batch b = e->random_batch(g, reqs, 1);
      if (!c.expect_ok(e->write_inputs(e->a, b), "inputs")) break;
      cgrt_status st = cgrt_graphs_step(s, CGRT_GRAPH_DECODE, reqs, nullptr, 0);
      if (!c.expect_ok(st, "a step of " + std::to_string(reqs) + " requests") || !c.expect_ok(e->eager(b), "eager"))
        break;
      std::string d = e->compare(e->a, b, cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, reqs));
      c.check(d.empty(), "step of " + std::to_string(reqs) + " requests differs from eager: " + d);
    }
    c.expect_ok(cgrt_graphs_destroy(s), "destroy");
  });
  L("capture sizes unsorted, repeated and past the largest batch: steps equal eager", [](Ctx &c) {
    World w(c);
    Engine *e = w.engine();
    if (!e) return;
    cgrt_graphs_options o;
    e->options(&o, w.descs);
    static const int sizes[] = {4, 1, 4, 1000, 2, 2, 65536};
    o.capture_sizes = sizes;
    o.num_capture_sizes = 7;
    cgrt_graphs *s = nullptr;
    if (!c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "create") || !c.expect_ok(cgrt_graphs_capture(s), "capture"))
      return (void)cgrt_graphs_destroy(s);
    std::mt19937 g(4);
    for (int i = 0; i < 12; i++) {
      cgrt_graph_mode mode = i % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
      int k = i % 2 ? 2 : 1, reqs = 1 + i % 4;
      Batch b = e->random_batch(g, reqs, k);
      if (!c.expect_ok(e->write_inputs(e->a, b), "inputs") ||
          !c.expect_ok(cgrt_graphs_step(s, mode, reqs, nullptr, 0), "step") || !c.expect_ok(e->eager(b), "eager"))
        break;
      std::string d = e->compare(e->a, b, cgrt_graphs_bucket_rows(s, mode, reqs));
      if (!c.check(d.empty(), "step " + std::to_string(i) + " differs from eager: " + d)) break;
    }
    c.expect_ok(cgrt_graphs_destroy(s), "destroy");
  });
  L("a persistent cuStreamEndCapture failure leaves the thread able to capture again", [](Ctx &c) {
    {
      World w(c, 1);
      cgrt_graphs *s = nullptr;
      Engine *e = w.engine();
      if (!e) return;
      cgrt_graphs_options o;
      e->options(&o, w.descs);
      o.block_len = 0;
      if (!c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "create")) return;
      cgrt_fault_plan p;
      memset(&p, 0, sizeof p);
      p.size = sizeof p;
      p.symbol = "cuStreamEndCapture";
      p.fail_at = 1;
      p.sticky = 1;
      cgrt_fault_set(&p);
      c.expect(cgrt_graphs_capture(s), {CGRT_ERROR_CAPTURE_FAILED, CGRT_ERROR_DRIVER}, "capture with EndCapture failing");
      cgrt_fault_set(nullptr);
      c.expect_ok(cgrt_graphs_destroy(s), "destroy the set");
    }
    World w2(c);
    cgrt_graphs *s2 = w2.graphs();
    if (s2) c.expect_ok(cgrt_graphs_step(s2, CGRT_GRAPH_DECODE, 3, nullptr, 0), "a step on a new runtime");
  });
}

// ---- the context of a new thread --------------------------------------------------------------

void thread_context_cases() {
  struct First {
    const char *what;
    void (*call)(World &, cgrt_graphs *);
  };
  static const First kFirst[] = {
      {"cgrt_graphs_get_stats",
       [](World &, cgrt_graphs *s) {
         cgrt_graphs_stats st;
         memset(&st, 0, sizeof st);
         st.size = sizeof st;
         cgrt_graphs_get_stats(s, &st);
       }},
      {"cgrt_graphs_set_ranges",
       [](World &w, cgrt_graphs *s) {
         cgrt_range r = {w.engine()->alt[0][X], 64, "r"};
         cgrt_graphs_set_ranges(s, &r, 1);
       }},
      {"cgrt_graphs_get_bucket",
       [](World &, cgrt_graphs *s) {
         cgrt_bucket_info b;
         memset(&b, 0, sizeof b);
         b.size = sizeof b;
         cgrt_graphs_get_bucket(s, 0, &b);
       }},
      {"cgrt_graphs_bucket_rows", [](World &, cgrt_graphs *s) { cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, 2); }},
      {"cgrt_graphs_stream", [](World &, cgrt_graphs *s) { cgrt_graphs_stream(s); }},
      {"cgrt_workspace_get_stats",
       [](World &w, cgrt_graphs *) {
         cgrt_workspace_stats st;
         memset(&st, 0, sizeof st);
         st.size = sizeof st;
         cgrt_workspace_get_stats(w.rt, &st);
       }},
      {"cgrt_workspace_is_locked", [](World &w, cgrt_graphs *) { cgrt_workspace_is_locked(w.rt); }},
      {"nothing (the first cgrt call of the thread is the step)", [](World &, cgrt_graphs *) {}},
  };
  for (const First &k : kFirst)
    L(std::string("a new thread whose first cgrt call is ") + k.what + " can step", [&k](Ctx &c) {
      World w(c);
      cgrt_graphs *s = w.graphs();
      if (!s) return;
      cgrt_status st = OK;
      std::string msg;
      std::thread t([&] {
        k.call(w, s);
        st = cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 2, nullptr, 0);
        msg = cgrt_last_error();
      });
      t.join();
      std::string first = k.what;
      bool nothing = first.compare(0, 7, "nothing") == 0;
      if (nothing) {
        // The header asks for a current context then (any cgrt call, or the CUDA runtime):
        // a clean status either way.
        if (st != OK && (msg.empty() || st == CGRT_ERROR_INTERNAL))
          c.bad("a step on a fresh thread failed uncleanly: " + name_of(st) + " \"" + msg + "\"");
      } else if (st != OK) {
        c.bad("a step after " + first + " on a new thread returned " + name_of(st) + " (\"" + msg + "\")");
      }
      c.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
    });
}

Register reg([] {
  destroy_cases();
  reuse_cases();
  kind_cases();
  lock_cases();
  capture_cases();
  capture_failure_cases();
  thread_context_cases();
});

}  // namespace
}  // namespace adv
