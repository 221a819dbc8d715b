// Category "soak": seeded random steps checked against eager, one case per replay mode
// (pointer update with checked replay and draft loops, pointer update patched on the
// device, copy-in, whole-graph update with draft loops, pointer update with draft loops
// as conditional WHILE nodes: every request stays active for both steps, so the loop
// runs them both and equals two eager steps). Every step picks a mode, a
// request count (past the largest bucket too: eager fallback), moves random buffers to
// another copy of the same contents (metadata buffers included), runs the step and the
// eager twin and compares every output, the KV cache, the metadata and the padding rows.
// The CI slice runs 1,000 steps per mode; --full runs 25,000 per mode (125,000 in
// all). A divergence names the step and the seed; `--only=soak/<mode> --seed=N` replays it.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"
#include "tests/adversarial/world.h"

namespace adv {
namespace {

struct Variant {
  const char *name;
  cgrt_replay_mode mode;
  int device_patch, checked, draft, draft_while;
  int device_launch;
};

const Variant kVariants[] = {
    {"pointer update, checked replay, draft loops", CGRT_REPLAY_POINTER_UPDATE, 0, 1, 1, 0, 0},
    {"pointer update patched on the device", CGRT_REPLAY_POINTER_UPDATE, 1, 0, 0, 0, 0},
    {"copy-in", CGRT_REPLAY_COPY_IN, 0, 0, 0, 0, 0},
    {"whole-graph update, draft loops", CGRT_REPLAY_EXEC_UPDATE, 0, 0, 1, 0, 0},
    {"pointer update, WHILE draft loops", CGRT_REPLAY_POINTER_UPDATE, 0, 0, 1, 1, 0},
    {"launched from the device, patched on the device, draft loops", CGRT_REPLAY_POINTER_UPDATE, 1, 0, 1, 0, 1},
};

void soak(Ctx &c, const Variant &v, int index) {
  const int steps = c.full ? 25000 : 1000;
  const uint64_t seed = c.seed * 1000003u + (uint64_t)index;
  World w(c);
  if (!w.rt) return;
  Engine e;
  EngineConfig ec;
  ec.max_reqs = 8;
  ec.block_len = 2;
  ec.alternates = 2;
  if (!c.expect_ok(e.init(w.rt, ec, (uint32_t)seed), "engine init")) return;
  cgrt_graphs_options o;
  cgrt_buffer_desc d[NB];
  e.options(&o, d);
  static const int sizes[] = {1, 2, 4, 6};  // decode 7-8, block 4-8 requests run eagerly
  o.capture_sizes = sizes;
  o.num_capture_sizes = 4;
  o.replay_mode = v.mode;
  o.device_patch = v.device_patch;
  o.checked_replay = v.checked;
  o.draft_steps = v.draft ? 2 : 0;
  o.draft_while = v.draft_while;
  o.device_launch = v.device_launch;
  cgrt_graphs *s = nullptr;
  if (c.expect_ok(cgrt_graphs_create(w.rt, &o, &s), "cgrt_graphs_create") &&
      c.expect_ok(cgrt_graphs_capture(s), "cgrt_graphs_capture")) {
    std::mt19937_64 g(seed);
    std::mt19937 g32((uint32_t)seed);
    std::vector<CUdeviceptr> cur(e.a, e.a + NB);
    const bool copy_in = v.mode == CGRT_REPLAY_COPY_IN;
    int moved = 0;
    for (int i = 0; i < steps; i++) {
      std::string at = "step " + std::to_string(i) + " (seed " + std::to_string(c.seed) + ")";
      // Bindings: each buffer moves with probability 1/8 to one of its three copies.
      std::vector<cgrt_binding> bind;
      std::vector<CUdeviceptr> loc = copy_in ? std::vector<CUdeviceptr>(e.a, e.a + NB) : cur;
      for (int f = 0; f < NB; f++) {
        if (g() % 8 != 0) continue;
        unsigned which = (unsigned)(g() % 3);
        CUdeviceptr to = which == 0 ? e.a[f] : e.alt[which - 1][f];
        if (to != loc[(size_t)f]) {
          if (!c.expect_ok(e.copy(to, loc[(size_t)f], (Buf)f), at + ": copy before a rebinding")) break;
          moved++;
        }
        loc[(size_t)f] = to;
        bind.push_back({f, to, 0});
      }
      if (!copy_in) cur = loc;
      bool draft = v.draft && g() % 10 == 0;
      cgrt_graph_mode mode = draft || g() % 2 ? CGRT_GRAPH_DECODE : CGRT_GRAPH_BLOCK;
      int k = mode == CGRT_GRAPH_BLOCK ? 2 : 1;
      int reqs = 1 + (int)(g() % (uint64_t)ec.max_reqs);
      if (draft) reqs = 1 + (int)(g() % 6);
      Batch b = e.random_batch(g32, reqs, k, draft ? 2 : 0);
      if (!c.expect_ok(e.write_inputs(loc.data(), b), at + ": inputs")) break;
      cgrt_status st = draft ? cgrt_graphs_draft(s, reqs, bind.data(), bind.size())
                             : cgrt_graphs_step(s, mode, reqs, bind.data(), bind.size());
      if (!c.expect_ok(st, at + (draft ? ": cgrt_graphs_draft" : ": cgrt_graphs_step"))) break;
      // A device-launched step is ordered with no stream: wait for it before reading.
      if (v.device_launch && !c.expect_ok(cgrt_graphs_synchronize(s), at + ": cgrt_graphs_synchronize")) break;
      if (!c.expect_ok(e.eager(b, draft ? 2 : 1), at + ": eager")) break;
      std::string diff = e.compare(loc.data(), b, cgrt_graphs_bucket_rows(s, mode, reqs));
      if (!diff.empty()) {
        c.bad(at + ", " + (draft ? "draft loop" : mode == CGRT_GRAPH_BLOCK ? "block" : "decode") + " of " +
              std::to_string(reqs) + " requests, " + std::to_string(bind.size()) + " bindings: differs from eager: " +
              diff);
        break;
      }
    }
    cgrt_graphs_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (c.expect_ok(cgrt_graphs_get_stats(s, &st), "stats") && c.misbehaviours().empty()) {
      c.check(st.steps + st.draft_loops >= (uint64_t)steps, "fewer steps counted than run");
      c.check(moved > steps / 4, "the soak moved only " + std::to_string(moved) + " buffers");
      c.check(st.eager_fallbacks > 0, "no step ran past the largest bucket");
      if (v.draft_while) c.check(st.draft_while_loops > 0, "no draft loop ran as a WHILE graph");
      if (v.device_launch)
        c.check(st.device_launches > 0 && st.device_launches + st.eager_fallbacks >= st.steps + st.draft_loops,
                "steps of device-launched buckets ran from the host");
    }
  }
  c.expect_ok(cgrt_graphs_destroy(s), "cgrt_graphs_destroy");
  c.expect_ok(e.destroy(), "module unload");
}

Register reg([] {
  for (int i = 0; i < (int)(sizeof kVariants / sizeof kVariants[0]); i++)
    add("soak", kVariants[i].name, [i](Ctx &c) { soak(c, kVariants[i], i); }, CaseOpts{1800, nullptr});
});

}  // namespace
}  // namespace adv
