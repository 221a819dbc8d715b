// Category "fault": a fault at every driver call of a full workload (runtime, engine
// warm-up, reservations, counters, an MLA plan, the lock, a graph set with checked
// replay, its capture, steps with rebinding checked against eager, a draft loop, an MLA
// decode, verification, teardown; the draft loop is a conditional WHILE node where the
// driver has them), through cgrt_fault.h, in two modes:
//   once/<symbol>#<k>:   the k-th call of <symbol> fails once;
//   sticky/<symbol>#<k>: every call of <symbol> from its k-th on fails (a persistent
//                        fault), until the workload sees a failure.
// Every call must return SUCCESS or a status its header documents for a driver failure,
// with a message naming the failed call; once the plan is cleared the failed operation
// succeeds when tried again, every later step equals eager, nothing leaks, and a new
// runtime on the same thread runs a small workload correctly.
// The plan case counts the workload's calls per driver entry point (the names come from
// cgrt's driver table) and checks that they add up to the unfiltered count.
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cgrt/cgrt_fault.h"
#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"
#include "tests/adversarial/world.h"

namespace adv {
namespace {

const char *const kDriverSymbols[] = {
#include "tests/adversarial/driver_symbols.inc"
};

const cgrt_status OK = CGRT_SUCCESS, DRV = CGRT_ERROR_DRIVER, OOM = CGRT_ERROR_OUT_OF_MEMORY;

// Calls whose failure may legitimately keep what they should have released.
bool is_release(const std::string &s) {
  return s == "cuMemFree" || s == "cuMemFreeHost" || s == "cuModuleUnload" || s == "cuStreamDestroy" ||
         s == "cuEventDestroy" || s == "cuGraphDestroy" || s == "cuGraphExecDestroy" || s == "cuDevicePrimaryCtxRelease";
}

struct FaultSpec {
  bool sticky = false;
  std::string symbol;
  unsigned long k = 0;
  int result = 999;
};

// The workload. With a spec it expects that fault; without, any failure misbehaves.
class Workload {
 public:
  Workload(Ctx &c, const FaultSpec *spec, int fault_injection) : c_(c), spec_(spec), fi_(fault_injection) {}

  // Runs everything, teardown included. Returns false when it had to stop early.
  bool run(int steps) {
    bool ok = body(steps);
    teardown();
    return ok;
  }
  int failures() const { return failures_; }
  bool injected() const { return injected_; }

 private:
  Ctx &c_;
  const FaultSpec *spec_;
  int fi_;
  bool cleared_ = false, injected_ = false;
  int failures_ = 0;
  cgrt_runtime *rt_ = nullptr;
  Engine eng_;
  bool eng_made_ = false;
  cgrt_graphs *set_ = nullptr;
  cgrt_graphs *dl_ = nullptr;  // device_launch
  cgrt_mla_plan *plan_ = nullptr;
  cgrt_buffer_desc descs_[NB];
  CUdeviceptr mla_[6] = {};
  std::vector<CUdeviceptr> cur_;

  void note_injected() {
    if (!cleared_ && cgrt_fault_injected() > 0) injected_ = true;
  }

  // Runs f; on a failure checks that it is clean, clears the plan and runs f again,
  // which must then succeed (unless retry is false: the object is gone either way).
  template <class F>
  bool op(const std::string &name, std::initializer_list<cgrt_status> allowed, F f, bool retry = true) {
    cgrt_status st = f();
    note_injected();
    if (st == OK) return true;
    std::string msg = cgrt_last_error();
    if (spec_ == nullptr || cleared_ || !injected_) {
      c_.bad(name + " failed " + (cleared_ ? "after the fault was cleared" : "with no fault injected") + ": " +
             name_of(st) + " \"" + msg + "\"");
      return false;
    }
    failures_++;
    // A call failing with CUDA_ERROR_OUT_OF_MEMORY may give CGRT_ERROR_OUT_OF_MEMORY.
    bool in = st == OOM && spec_->result == 2;
    for (cgrt_status a : allowed) in |= a == st;
    if (!in) c_.bad(name + ": a driver failure gave " + name_of(st) + " (\"" + msg + "\")");
    if (msg.empty())
      c_.bad(name + ": " + name_of(st) + " with an empty cgrt_last_error()");
    else if (msg.find(spec_->symbol) == std::string::npos)
      c_.bad(name + ": the message does not name the failed call " + spec_->symbol + ": \"" + msg + "\"");
    cgrt_fault_set(nullptr);
    cleared_ = true;
    if (!retry) return true;
    st = f();
    if (st != OK) {
      c_.bad(name + " failed again after the fault was cleared: " + name_of(st) + " \"" + cgrt_last_error() + "\"");
      return false;
    }
    return true;
  }

  bool compare(const Batch &b, int bucket, const std::string &what) {
    std::string d;
    bool read_ok = op("compare " + what, {DRV}, [&] {
      d = eng_.compare(cur_.data(), b, bucket);
      bool io = d.compare(0, 8, "reading ") == 0 || d.compare(0, 12, "synchronize:") == 0;
      return io ? DRV : OK;
    });
    if (!read_ok) return false;
    if (!d.empty() && d.compare(0, 8, "reading ") != 0 && d.compare(0, 12, "synchronize:") != 0) {
      c_.bad(what + ": the results differ from eager" + (injected_ ? " (after a fault no call reported)" : "") +
             ": " + d);
      return false;
    }
    return true;
  }

  bool body(int steps) {
    if (!op("cgrt_runtime_create",
            {CGRT_ERROR_NO_DRIVER, CGRT_ERROR_NO_DEVICE, CGRT_ERROR_UNSUPPORTED_DEVICE, OOM, DRV}, [&] {
              cgrt_runtime_options o;
              cgrt_runtime_options_init(&o);
              o.fault_injection = fi_;
              rt_ = static_cast<cgrt_runtime *>(foreign());
              cgrt_status st = cgrt_runtime_create(&o, &rt_);
              if (st != OK && rt_ != nullptr) {
                c_.bad("cgrt_runtime_create failed but *out is not NULL");
                rt_ = nullptr;
              }
              return st;
            }))
      return false;
    EngineConfig ec = small_engine();
    eng_made_ = true;
    if (!op("engine init", {DRV, OOM, CGRT_ERROR_UNSUPPORTED_DEVICE}, [&] { return eng_.init(rt_, ec, 11); }))
      return false;
    cur_.assign(eng_.a, eng_.a + NB);
    if (!op("cgrt_counters_reserve", {DRV, OOM}, [&] { return cgrt_counters_reserve(rt_, 4096); })) return false;
    if (!op("cgrt_mla_plan_create", {DRV, OOM}, [&] {
          cgrt_mla_options o = small_mla(1);
          return cgrt_mla_plan_create(rt_, &o, &plan_);
        }))
      return false;
    if (!op("MLA tensors", {DRV, OOM}, [&] {
          const size_t sz[6] = {16 * 576 * 2, 64 * 576 * 2, 4, 4, 16 * 512 * 2, 16 * 4};
          cgrt_tensor_desc d[6];
          for (int i = 0; i < 6; i++) d[i] = desc1((int64_t)sz[i], CGRT_DTYPE_U8);
          cgrt_status st = cgrt_workspace_request(rt_, 0, "adv.fault.mla", d, 6, mla_);
          for (int i = 0; st == OK && i < 6; i++) st = cgrt_memset_d8(rt_, mla_[i], 0, sz[i]);
          return st;
        }))
      return false;
    if (!op("cgrt_workspace_lock", {DRV, OOM}, [&] { return cgrt_workspace_lock(rt_); })) return false;
    if (!op("cgrt_graphs_create", {DRV, OOM}, [&] {
          cgrt_graphs_options o;
          eng_.options(&o, descs_);
          static const int sizes[] = {1, 2, 4};
          o.capture_sizes = sizes;
          o.num_capture_sizes = 3;
          o.checked_replay = 1;
          o.draft_steps = 2;
          o.draft_while = 1;
          return cgrt_graphs_create(rt_, &o, &set_);
        }))
      return false;
    if (!op("cgrt_graphs_capture", {CGRT_ERROR_CAPTURE_FAILED, OOM, DRV}, [&] { return cgrt_graphs_capture(set_); }))
      return false;
    std::mt19937 g(17);
    const Buf movable[] = {X, OUT, KV, Y, WIN};
    for (int i = 0; i < steps; i++) {
      cgrt_graph_mode mode = i % 2 ? CGRT_GRAPH_BLOCK : CGRT_GRAPH_DECODE;
      int k = mode == CGRT_GRAPH_BLOCK ? 2 : 1;
      int reqs = 1 + (int)(g() % 4);
      std::vector<cgrt_binding> bind;
      if (i % 2 == 1) {
        Buf f = movable[g() % 5];
        int where = (int)(g() % 2);
        CUdeviceptr to = where ? eng_.alt[0][f] : eng_.a[f];
        if (to != cur_[f]) {
          if (!op("copy before a rebinding", {DRV}, [&] { return eng_.copy(to, cur_[f], f); })) return false;
          cur_[f] = to;
        }
        bind.push_back({(int)f, to, 0});
      }
      Batch b = eng_.random_batch(g, reqs, k);
      std::string what = "step " + std::to_string(i);
      // Inputs and step together: a step that failed after its launch (checked replay
      // verifies after it) is tried again from fresh inputs.
      if (!op(what + ": inputs and cgrt_graphs_step", {DRV, CGRT_ERROR_CAPTURE_FAILED, CGRT_ERROR_CALLBACK_FAILED}, [&] {
            cgrt_status st = eng_.write_inputs(cur_.data(), b);
            return st != OK ? st : cgrt_graphs_step(set_, mode, reqs, bind.data(), bind.size());
          }))
        return false;
      if (!op(what + ": eager", {DRV}, [&] { return eng_.eager(b); })) return false;
      if (!compare(b, cgrt_graphs_bucket_rows(set_, mode, reqs), what)) return false;
    }
    Batch b = eng_.random_batch(g, 3, 1, 2);
    if (!op("draft: inputs and cgrt_graphs_draft", {DRV, CGRT_ERROR_CAPTURE_FAILED}, [&] {
          cgrt_status st = eng_.write_inputs(cur_.data(), b);
          return st != OK ? st : cgrt_graphs_draft(set_, 3, nullptr, 0);
        }))
      return false;
    if (!op("draft: eager", {DRV}, [&] { return eng_.eager(b, 2); })) return false;
    if (!compare(b, cgrt_graphs_bucket_rows(set_, CGRT_GRAPH_DECODE, 3), "draft loop")) return false;
    // A device-launched set over the same engine: capture, steps (one moving a buffer:
    // a host patch of its memcpy node, re-uploaded), each waited for with
    // cgrt_graphs_synchronize, against eager.
    if (!op("cgrt_graphs_create (device_launch)", {DRV, OOM}, [&] {
          cgrt_graphs_options o;
          eng_.options(&o, descs_);
          static const int sizes[] = {2, 4};
          o.capture_sizes = sizes;
          o.num_capture_sizes = 2;
          o.device_patch = 1;
          o.device_launch = 1;
          for (int f = 0; f < NB; f++) descs_[f].ptr = cur_[f];
          return cgrt_graphs_create(rt_, &o, &dl_);
        }))
      return false;
    if (!op("cgrt_graphs_capture (device_launch)", {CGRT_ERROR_CAPTURE_FAILED, OOM, DRV},
            [&] { return cgrt_graphs_capture(dl_); }))
      return false;
    for (int i = 0; i < 3; i++) {
      std::vector<cgrt_binding> bind;
      if (i == 1) {
        const Buf f = Y;  // read by a memcpy node: patched on the host
        CUdeviceptr to = cur_[f] == eng_.a[f] ? eng_.alt[0][f] : eng_.a[f];
        if (!op("copy before a rebinding (device_launch)", {DRV}, [&] { return eng_.copy(to, cur_[f], f); }))
          return false;
        cur_[f] = to;
        bind.push_back({(int)f, to, 0});
      }
      Batch b = eng_.random_batch(g, 2 + i % 2, 1);
      std::string what = "device-launched step " + std::to_string(i);
      if (!op(what + ": inputs, step, synchronize", {DRV}, [&] {
            cgrt_status st = eng_.write_inputs(cur_.data(), b);
            if (st == OK) st = cgrt_graphs_step(dl_, CGRT_GRAPH_DECODE, b.reqs, bind.data(), bind.size());
            return st != OK ? st : cgrt_graphs_synchronize(dl_);
          }))
        return false;
      if (!op(what + ": eager", {DRV}, [&] { return eng_.eager(b); })) return false;
      if (!compare(b, cgrt_graphs_bucket_rows(dl_, CGRT_GRAPH_DECODE, b.reqs), what)) return false;
    }
    if (!op("cgrt_mla_decode", {DRV}, [&] {
          cgrt_mla_args a;
          memset(&a, 0, sizeof a);
          a.size = sizeof a;
          a.q = mla_[0];
          a.kv_cache = mla_[1];
          a.block_table = mla_[2];
          a.seq_lens = mla_[3];
          a.out = mla_[4];
          a.lse = mla_[5];
          a.num_rows = 1;
          a.softmax_scale = 0.04f;
          cgrt_status st = cgrt_mla_decode(plan_, nullptr, &a);
          return st == OK ? cgrt_runtime_synchronize(rt_) : st;
        }))
      return false;
    if (!op("cgrt_workspace_verify", {DRV}, [&] { return cgrt_workspace_verify(rt_); })) return false;
    if (!op("cgrt_counters_verify", {DRV}, [&] { return cgrt_counters_verify(rt_); })) return false;
    return true;
  }

  void teardown() {
    if (dl_ != nullptr) {
      cgrt_status st = cgrt_graphs_destroy(dl_);
      note_injected();
      c_.expect_ok(st, "cgrt_graphs_destroy (device_launch)");
    }
    if (set_ != nullptr) {
      cgrt_status st = cgrt_graphs_destroy(set_);
      note_injected();
      c_.expect_ok(st, "cgrt_graphs_destroy");
    }
    cgrt_mla_plan_destroy(plan_);
    if (eng_made_ && eng_.mod != nullptr)
      op("cgrt_module_unload", {DRV}, [&] { return eng_.destroy(); }, /*retry=*/false);
    if (rt_ != nullptr) {
      cgrt_status st = cgrt_runtime_destroy(rt_);
      note_injected();
      c_.expect_ok(st, "cgrt_runtime_destroy");
    }
  }
};

int workload_steps(const Ctx &c) { return c.full ? 12 : 6; }

FaultSpec parse(const std::string &arg) {
  FaultSpec s;
  size_t slash = arg.find('/'), hash = arg.find('#');
  s.sticky = arg.compare(0, slash, "sticky") == 0;
  s.symbol = arg.substr(slash + 1, hash - slash - 1);
  s.k = strtoul(arg.c_str() + hash + 1, nullptr, 10);
  s.result = s.sticky || s.k % 2 ? 999 : 2;
  return s;
}

void set_plan(const FaultSpec *s, unsigned long fail_at) {
  cgrt_fault_plan p;
  memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.symbol = s ? s->symbol.c_str() : nullptr;
  p.fail_at = fail_at;
  p.result = s ? s->result : 0;
  p.sticky = s ? s->sticky : 0;
  cgrt_fault_set(&p);
}

std::vector<std::string> plan(Ctx &c) {
  std::vector<std::string> specs;
  {
    Workload warm(c, nullptr, 1);  // also: the workload is clean without faults
    if (!warm.run(workload_steps(c))) return specs;
  }
  set_plan(nullptr, 0);
  {
    Workload w(c, nullptr, 1);
    w.run(workload_steps(c));
  }
  unsigned long total = cgrt_fault_calls();
  set_plan(nullptr, 0);
  {
    Workload w(c, nullptr, 1);
    w.run(workload_steps(c));
  }
  c.check(cgrt_fault_calls() == total, "the workload's driver calls differ between two runs: " + std::to_string(total) +
                                           " and " + std::to_string(cgrt_fault_calls()));
  std::map<std::string, unsigned long> per;
  unsigned long sum = 0;
  for (const char *sym : kDriverSymbols) {
    FaultSpec s;
    s.symbol = sym;
    set_plan(&s, 0);
    Workload w(c, nullptr, 1);
    w.run(workload_steps(c));
    unsigned long n = cgrt_fault_calls();
    if (n > 0) per[sym] = n;
    sum += n;
  }
  cgrt_fault_set(nullptr);
  c.check(sum == total, "per-symbol counts add up to " + std::to_string(sum) + ", the unfiltered count is " +
                            std::to_string(total) + " (a driver call missing from the list?)");
  std::mt19937 g((unsigned)c.seed * 7919u + 3u);
  for (const auto &kv : per) {
    for (unsigned long k = 1; k <= kv.second; k++) {
      bool take = c.full || k == 1 || k == kv.second || g() % 16 == 0;
      if (!take) continue;
      specs.push_back("once/" + kv.first + "#" + std::to_string(k));
      if (c.full || k == 1 || g() % 2 == 0) specs.push_back("sticky/" + kv.first + "#" + std::to_string(k));
    }
  }
  (void)total;
  return specs;
}

void run_fault(Ctx &c) {
  FaultSpec s = parse(c.arg);
  if (s.sticky ? is_release(s.symbol) : s.symbol == "cuMemFree") c.allow_device_leak();
  set_plan(&s, s.k);
  {
    Workload w(c, &s, 1);
    w.run(workload_steps(c));
    cgrt_fault_set(nullptr);
    c.check(w.injected(), "the fault was never injected (the workload made fewer calls of " + s.symbol +
                              " than when counted)");
  }
  // Recovery: a new runtime on the same thread runs a small workload correctly.
  World w(c);
  Engine *e = w.engine();
  cgrt_graphs *set = w.graphs();
  if (!e || !set) {
    c.bad("after the fault, a new runtime on this thread cannot run the small workload");
    return;
  }
  std::mt19937 g(3);
  Batch b = e->random_batch(g, 3, 1);
  if (c.expect_ok(e->write_inputs(e->a, b), "recovery: inputs") &&
      c.expect_ok(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, 3, nullptr, 0), "recovery: step") &&
      c.expect_ok(e->eager(b), "recovery: eager")) {
    std::string d = e->compare(e->a, b, cgrt_graphs_bucket_rows(set, CGRT_GRAPH_DECODE, 3));
    c.check(d.empty(), "recovery: the step differs from eager: " + d);
  }
}

Register reg([] { add_generator("fault", plan, run_fault, CaseOpts{30, nullptr}); });

}  // namespace
}  // namespace adv
