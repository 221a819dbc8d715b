// Category "threads": 8 threads at once on everything the headers document as
// thread-safe, meant for ThreadSanitizer (bazel test --config=tsan //tests/adversarial/...):
// runtimes made and destroyed in parallel, per-thread error messages, the log callback,
// one runtime's workspaces, counters, copies and statistics, modules and launches, the
// emulated-kernel registry under lookups and launches, steps of one graph set (with
// bindings, statistics and declared ranges), graph sets captured in parallel, MLA plans on
// eight lanes, and the fault-injection counters. Every thread checks its own results; a
// data race is a misbehaviour through the sanitizer's report.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
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

constexpr int kThreads = 8;
const cgrt_status OK = CGRT_SUCCESS;

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(mu_);
    int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      gen_++;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return gen != gen_; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

// Runs fn(t, ctx_t) on kThreads threads, each with a Ctx of its own, and merges what they
// found into c.
void run_threads(Ctx &c, const std::function<void(int, Ctx &)> &fn) {
  std::vector<Ctx> ctx(kThreads, c);
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; t++) th.emplace_back([&, t] { fn(t, ctx[(size_t)t]); });
  for (std::thread &x : th) x.join();
  for (int t = 0; t < kThreads; t++)
    for (const std::string &m : ctx[(size_t)t].misbehaviours()) c.bad("thread " + std::to_string(t) + ": " + m);
}

int iters(const Ctx &c, int ci, int full) { return c.full ? full : ci; }

void T(const std::string &name, CaseFn fn, const char *emu_only = nullptr) {
  add("threads", name, std::move(fn), CaseOpts{120, emu_only});
}

void runtime_cases() {
  T("8 threads make, use and destroy runtimes", [](Ctx &c) {
    int n = iters(c, 3, 20);
    run_threads(c, [&](int t, Ctx &x) {
      for (int i = 0; i < n; i++) {
        cgrt_runtime *rt = new_runtime(x);
        if (!rt) return;
        cgrt_runtime_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        x.expect_ok(cgrt_runtime_get_info(rt, &info), "get_info");
        cgrt_tensor_desc d = desc1(64 + t, CGRT_DTYPE_F32);
        CUdeviceptr p;
        x.expect_ok(cgrt_workspace_request(rt, t % CGRT_MAX_LANES, "adv.t", &d, 1, &p), "request");
        x.expect_ok(cgrt_workspace_lock(rt), "lock");
        x.expect_ok(cgrt_runtime_synchronize(rt), "synchronize");
        x.expect_ok(cgrt_runtime_destroy(rt), "destroy");
      }
    });
  });
  T("8 threads: each thread's cgrt_last_error is its own", [](Ctx &c) {
    int n = iters(c, 50, 500);
    Barrier bar(kThreads);
    run_threads(c, [&](int t, Ctx &x) {
      cgrt_runtime *rt = keeper();
      std::string mine = "adv.thread" + std::to_string(t);
      bar.wait();
      for (int i = 0; i < n; i++) {
        cgrt_tensor_desc d = desc1(4, CGRT_DTYPE_F32);
        CUdeviceptr p;
        cgrt_workspace_request(rt, -1 - t, mine.c_str(), &d, 1, &p);  // lane out of range
        std::string msg = cgrt_last_error();
        if (msg.find(mine) == std::string::npos || msg.find(std::to_string(-1 - t)) == std::string::npos) {
          x.bad("cgrt_last_error() is not this thread's: \"" + msg + "\"");
          return;
        }
        std::this_thread::yield();
        cgrt_status_name((cgrt_status)(i % 20));
        cgrt_status_string((cgrt_status)(i % 20));
      }
    });
  });
  T("8 threads: the log callback set and cleared while runtimes log", [](Ctx &c) {
    static std::atomic<int> bad_user{0}, calls{0};
    static int users[4];
    bad_user = 0;
    calls = 0;
    int n = iters(c, 4, 30);
    run_threads(c, [&](int t, Ctx &x) {
      if (t < 4) {
        for (int i = 0; i < n * 20; i++) {
          cgrt_set_log_callback(
              [](void *user, cgrt_log_level, const char *m) {
                bool known = false;
                for (int &u : users) known |= user == &u;
                if (!known || m == nullptr) bad_user++;
                calls++;
              },
              &users[t], CGRT_LOG_DEBUG);
          cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
        }
      } else {
        for (int i = 0; i < n; i++) {
          cgrt_runtime *rt = new_runtime(x);
          cgrt_runtime_destroy(rt);
        }
      }
    });
    cgrt_set_log_callback(nullptr, nullptr, CGRT_LOG_ERROR);
    c.check(bad_user == 0, "the log callback was called with a user or message that was never set");
  });
}

void shared_runtime_cases() {
  T("8 threads on one runtime: reservations, counters, statistics, visit, lock", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    Barrier bar(kThreads);
    std::vector<CUdeviceptr> shared(kThreads), own(kThreads);
    int n = iters(c, 10, 100);
    run_threads(c, [&](int t, Ctx &x) {
      cgrt_tensor_desc ds = desc1(1024, CGRT_DTYPE_F32), dof = desc1(100 + t, CGRT_DTYPE_I64);
      std::string name = "adv.own" + std::to_string(t);
      bar.wait();
      for (int i = 0; i < n; i++) {
        x.expect_ok(cgrt_workspace_request(w.rt, 0, "adv.shared", &ds, 1, &shared[(size_t)t]), "shared request");
        x.expect_ok(cgrt_workspace_request(w.rt, t % 2, name.c_str(), &dof, 1, &own[(size_t)t]), "own request");
        x.expect_ok(cgrt_counters_reserve(w.rt, (size_t)64 * (t + 1)), "counters");
        CUdeviceptr cp;
        size_t cb;
        x.expect_ok(cgrt_counters_get(w.rt, &cp, &cb), "counters_get");
        cgrt_workspace_stats st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        x.expect_ok(cgrt_workspace_get_stats(w.rt, &st), "get_stats");
        x.expect_ok(cgrt_workspace_visit(w.rt, [](void *, int, const char *, size_t, size_t) {}, nullptr), "visit");
        cgrt_workspace_is_locked(w.rt);
      }
      bar.wait();
      if (t == 0) x.expect_ok(cgrt_workspace_lock(w.rt), "lock");
      bar.wait();
      for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        x.expect_ok(cgrt_workspace_request(w.rt, 0, "adv.shared", &ds, 1, &p), "shared request after the lock");
        x.check(p == shared[0], "the shared reservation moved after the lock");
        cgrt_tensor_desc big = desc1(4096, CGRT_DTYPE_F32);
        x.expect(cgrt_workspace_request(w.rt, 0, "adv.shared", &big, 1, &p), {CGRT_ERROR_WORKSPACE_LOCKED},
                 "growth after the lock");
        x.expect_ok(cgrt_workspace_verify(w.rt), "verify");
        x.expect_ok(cgrt_counters_verify(w.rt), "counters_verify");
      }
    });
    for (int t = 1; t < kThreads; t++)
      c.check(shared[(size_t)t] == shared[0], "threads got different addresses for one reservation");
  });
  T("8 threads on one runtime: copies, memsets and stream synchronization", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    std::vector<CUdeviceptr> buf(kThreads), buf2(kThreads);
    for (int t = 0; t < kThreads; t++) buf[(size_t)t] = w.buffer(4096), buf2[(size_t)t] = w.buffer(4096);
    int n = iters(c, 20, 300);
    run_threads(c, [&](int t, Ctx &x) {
      std::vector<uint32_t> in(1024), out(1024);
      for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < in.size(); j++) in[j] = (uint32_t)(t * 100000 + i * 1000 + (int)j);
        x.expect_ok(cgrt_memcpy_htod(w.rt, buf[(size_t)t], in.data(), 4096), "htod");
        x.expect_ok(cgrt_memcpy_dtod_async(w.rt, buf2[(size_t)t], buf[(size_t)t], 4096, nullptr), "dtod");
        x.expect_ok(cgrt_stream_synchronize(w.rt, nullptr), "stream sync");
        x.expect_ok(cgrt_memcpy_dtoh(w.rt, out.data(), buf2[(size_t)t], 4096), "dtoh");
        if (out != in) {
          x.bad("a thread read back another thread's data");
          return;
        }
        x.expect_ok(cgrt_memset_d8(w.rt, buf2[(size_t)t], (unsigned char)t, 4096), "memset");
        x.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
      }
    });
  });
  T("8 threads: modules loaded, looked up, launched and unloaded", [](Ctx &c) {
    World w(c);
    if (!w.engine()) return;
    std::vector<CUdeviceptr> buf(kThreads);
    for (int t = 0; t < kThreads; t++) buf[(size_t)t] = w.buffer(256 * 4);
    int n = iters(c, 10, 100);
    run_threads(c, [&](int t, Ctx &x) {
      std::vector<float> in(256), out(256);
      for (int i = 0; i < n; i++) {
        cgrt_module *m = nullptr;
        CUfunction f = nullptr;
        if (!x.expect_ok(cgrt_module_load(w.rt, synth::kernels_image(), &m), "load")) return;
        if (x.expect_ok(cgrt_module_function(m, "synth_scale", &f), "function")) {
          for (int j = 0; j < 256; j++) in[(size_t)j] = (float)(t + i + j);
          x.expect_ok(cgrt_memcpy_htod(w.rt, buf[(size_t)t], in.data(), 1024), "htod");
          int cnt = 128;
          CUdeviceptr p = buf[(size_t)t], q = buf[(size_t)t] + 512;
          float a = 2.0f;
          void *args[] = {&cnt, &p, &q, &a};
          x.expect_ok(cgrt_launch_kernel(w.rt, f, 1, 1, 1, 128, 1, 1, 0, nullptr, args), "launch");
          x.expect_ok(cgrt_memcpy_dtoh(w.rt, out.data(), buf[(size_t)t], 1024), "dtoh");
          for (int j = 0; j < 128; j++)
            if (out[(size_t)(128 + j)] != in[(size_t)j] * 2.0f + 1.0f) {
              x.bad("a launch computed the wrong value");
              break;
            }
        }
        x.expect_ok(cgrt_module_unload(m), "unload");
      }
    });
  });
  T("8 threads: an emulated kernel re-registered while others look it up and launch it", [](Ctx &c) {
    World w(c);
    if (!w.engine()) return;
    std::vector<CUdeviceptr> buf(kThreads);
    for (int t = 0; t < kThreads; t++) buf[(size_t)t] = w.buffer(1024);
    int n = iters(c, 30, 300);
    run_threads(c, [&](int t, Ctx &x) {
      for (int i = 0; i < n; i++) {
        if (t < 2) {
          x.expect_ok(synth::register_refs(true), "re-register");
          continue;
        }
        CUfunction f = nullptr;
        if (!x.expect_ok(cgrt_module_function(w.module(), "synth_scale", &f), "function")) return;
        int cnt = 64;
        CUdeviceptr p = buf[(size_t)t], q = buf[(size_t)t] + 512;
        float a = 1.0f;
        void *args[] = {&cnt, &p, &q, &a};
        x.expect_ok(cgrt_launch_kernel(w.rt, f, 1, 1, 1, 64, 1, 1, 0, nullptr, args), "launch");
      }
    });
  });
}

void graphs_cases() {
  T("8 threads step one graph set, rebind, read statistics and declare ranges", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = w.graphs([](cgrt_graphs_options *o) { o->checked_replay = 1; });
    Engine *e = w.engine();
    if (!s) return;
    std::atomic<uint64_t> ok_steps{0};
    int n = iters(c, 20, 300);
    run_threads(c, [&](int t, Ctx &x) {
      std::mt19937 g((unsigned)t);
      // A step needs the runtime's context current on its thread: a cgrt call on the
      // runtime makes it so (cgrt_graphs.h).
      x.expect_ok(cgrt_runtime_synchronize(w.rt), "cgrt_runtime_synchronize on a new thread");
      for (int i = 0; i < n; i++) {
        switch (t % 4) {
          case 0:
          case 1: {
            cgrt_graph_mode mode = g() % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
            cgrt_binding b = {X, g() % 2 ? e->alt[0][X] : e->a[X], 0};
            cgrt_status st = cgrt_graphs_step(s, mode, 1 + (int)(g() % 4), &b, 1);
            if (x.expect_ok(st, "step")) ok_steps++;
            break;
          }
          case 2: {
            cgrt_graphs_stats st;
            memset(&st, 0, sizeof st);
            st.size = sizeof st;
            x.expect_ok(cgrt_graphs_get_stats(s, &st), "get_stats");
            size_t nb = cgrt_graphs_bucket_count(s);
            cgrt_bucket_info bi;
            memset(&bi, 0, sizeof bi);
            bi.size = sizeof bi;
            if (nb > 0) x.expect_ok(cgrt_graphs_get_bucket(s, g() % nb, &bi), "get_bucket");
            cgrt_graphs_bucket_rows(s, CGRT_GRAPH_DECODE, 1 + (int)(g() % 4));
            cgrt_graphs_stream(s);
            break;
          }
          default: {
            cgrt_range r[2] = {{e->b[X], e->bytes[X], "b.x"}, {e->b[Y], e->bytes[Y], "b.y"}};
            x.expect_ok(cgrt_graphs_set_ranges(s, r, 1 + g() % 2), "set_ranges");
            break;
          }
        }
      }
    });
    c.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
    cgrt_graphs_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (c.expect_ok(cgrt_graphs_get_stats(s, &st), "get_stats"))
      c.check(st.steps == ok_steps.load(), "stats.steps " + std::to_string(st.steps) + " != successful steps " +
                                               std::to_string(ok_steps.load()));
  });
  T("8 threads: 2 re-capture one set while 6 read its statistics and buckets", [](Ctx &c) {
    World w(c);
    cgrt_graphs *s = w.graphs();
    if (!s) return;
    int n = iters(c, 3, 30);
    run_threads(c, [&](int t, Ctx &x) {
      x.expect_ok(cgrt_runtime_synchronize(w.rt), "cgrt_runtime_synchronize on a new thread");
      for (int i = 0; i < n; i++) {
        if (t < 2) {
          x.expect_ok(cgrt_graphs_recapture(s, t ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE, 1 + i % 4), "recapture");
          continue;
        }
        for (int j = 0; j < 20; j++) {
          cgrt_graphs_stats st;
          memset(&st, 0, sizeof st);
          st.size = sizeof st;
          x.expect_ok(cgrt_graphs_get_stats(s, &st), "get_stats");
          cgrt_bucket_info bi;
          memset(&bi, 0, sizeof bi);
          bi.size = sizeof bi;
          size_t nb = cgrt_graphs_bucket_count(s);
          if (nb) x.expect_ok(cgrt_graphs_get_bucket(s, (size_t)j % nb, &bi), "get_bucket");
          cgrt_graphs_bucket_rows(s, CGRT_GRAPH_BLOCK, 1 + j % 4);
        }
      }
    });
    c.expect_ok(cgrt_graphs_step(s, CGRT_GRAPH_DECODE, 3, nullptr, 0), "a step afterwards");
  });
  T("8 threads each capture and step a graph set of their own on one runtime", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    std::vector<Engine> eng(kThreads);
    for (int t = 0; t < kThreads; t++) {
      EngineConfig ec = small_engine();
      ec.tag = "adv.t" + std::to_string(t);
      ec.lane = t % CGRT_MAX_LANES;
      if (!c.expect_ok(eng[(size_t)t].init(w.rt, ec, (uint32_t)t), "engine init")) return;
    }
    Barrier bar(kThreads);
    int n = iters(c, 4, 40);
    run_threads(c, [&](int t, Ctx &x) {
      Engine &e = eng[(size_t)t];
      cgrt_graphs_options o;
      cgrt_buffer_desc d[NB];
      e.options(&o, d);
      cgrt_graphs *s = nullptr;
      bar.wait();
      if (!x.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "create")) return;
      if (x.expect_ok(cgrt_graphs_capture(s), "capture")) {
        std::mt19937 g((unsigned)t);
        for (int i = 0; i < n; i++) {
          cgrt_graph_mode mode = i % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
          int k = mode == CGRT_GRAPH_BLOCK ? 2 : 1, reqs = 1 + (int)(g() % 4);
          Batch b = e.random_batch(g, reqs, k);
          if (!x.expect_ok(e.write_inputs(e.a, b), "inputs") ||
              !x.expect_ok(cgrt_graphs_step(s, mode, reqs, nullptr, 0), "step") || !x.expect_ok(e.eager(b), "eager"))
            break;
          std::string diff = e.compare(e.a, b, cgrt_graphs_bucket_rows(s, mode, reqs));
          if (!x.check(diff.empty(), "step " + std::to_string(i) + " differs from eager: " + diff)) break;
        }
      }
      x.expect_ok(cgrt_graphs_destroy(s), "destroy");
    });
    for (Engine &e : eng) c.expect_ok(e.destroy(), "module unload");
  });
  T("8 threads: MLA plans made, queried and run on eight lanes", [](Ctx &c) {
    World w(c);
    if (!w.rt) return;
    std::vector<cgrt_mla_args> args(kThreads);
    for (int t = 0; t < kThreads; t++) {
      cgrt_mla_args &a = args[(size_t)t];
      memset(&a, 0, sizeof a);
      a.size = sizeof a;
      a.q = w.buffer(16 * 576 * 2);
      a.kv_cache = w.buffer(64 * 576 * 2);
      a.block_table = w.buffer(4);
      a.seq_lens = w.buffer(4);
      a.out = w.buffer(16 * 512 * 2);
      a.lse = w.buffer(16 * 4);
      a.num_rows = 1;
      a.softmax_scale = 0.05f;
    }
    c.expect_ok(cgrt_counters_reserve(w.rt, 1 << 16), "counters");
    Barrier bar(kThreads);
    int n = iters(c, 3, 20);
    run_threads(c, [&](int t, Ctx &x) {
      bar.wait();
      for (int i = 0; i < n; i++) {
        cgrt_mla_options o = small_mla(1);
        o.lane = t;
        cgrt_mla_plan *p = nullptr;
        if (!x.expect_ok(cgrt_mla_plan_create(w.rt, &o, &p), "plan create")) return;
        cgrt_mla_plan_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        x.expect_ok(cgrt_mla_plan_get_info(p, &info), "get_info");
        x.expect_ok(cgrt_mla_decode(p, nullptr, &args[(size_t)t]), "decode");
        x.expect_ok(cgrt_runtime_synchronize(w.rt), "synchronize");
        cgrt_mla_plan_destroy(p);
      }
    });
  });
  T("8 threads: fault-injection counters read and reset while runtimes run", [](Ctx &c) {
    int n = iters(c, 3, 20);
    run_threads(c, [&](int t, Ctx &x) {
      for (int i = 0; i < n; i++) {
        if (t < 3) {
          for (int j = 0; j < 50; j++) {
            x.expect_ok(cgrt_fault_set(nullptr), "fault_set");
            cgrt_fault_calls();
            cgrt_fault_injected();
            const char *s = cgrt_fault_last_symbol();
            x.check(s != nullptr, "cgrt_fault_last_symbol() is NULL");
          }
        } else {
          cgrt_runtime *rt = new_runtime(x, 1);  // counted, never failed
          cgrt_runtime_destroy(rt);
        }
      }
    });
  });
}

Register reg([] {
  runtime_cases();
  shared_runtime_cases();
  graphs_cases();
});

}  // namespace
}  // namespace adv
