// A small world of live cgrt objects for one case (see world.h).
#include "tests/adversarial/world.h"

#include <cstring>
#include <string>

#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_workspace.h"

namespace adv {

EngineConfig small_engine() {
  EngineConfig e;
  e.max_reqs = 4;
  e.block_len = 2;
  e.block_size = 8;
  e.max_blocks = 8;
  e.max_model_len = 60;
  e.alternates = 1;
  e.tag = "adv";
  return e;
}

cgrt_mla_options small_mla(int max_num_seqs, int block_len) {
  cgrt_mla_options o;
  cgrt_mla_options_init(&o);
  o.max_num_seqs = max_num_seqs;
  o.block_len = block_len;
  o.heads = 16;
  o.max_model_len = 64 * max_num_seqs;
  return o;
}

World::World(Ctx &ctx, int fault_injection) : c(ctx) { rt = new_runtime(c, fault_injection); }

World::~World() {
  if (set_ != nullptr) c.expect_ok(cgrt_graphs_destroy(set_), "cgrt_graphs_destroy (world)");
  cgrt_mla_plan_destroy(plan_);
  if (eng_made_) c.expect_ok(eng_.destroy(), "cgrt_module_unload (world)");
  if (rt != nullptr) c.expect_ok(cgrt_runtime_destroy(rt), "cgrt_runtime_destroy (world)");
}

Engine *World::engine() {
  if (rt == nullptr) return nullptr;
  if (!eng_made_) {
    eng_made_ = true;
    if (!c.expect_ok(eng_.init(rt, small_engine()), "engine init (world)")) return nullptr;
  }
  return eng_.f_scale != nullptr ? &eng_ : nullptr;
}

cgrt_graphs *World::graphs(void (*tweak)(cgrt_graphs_options *)) {
  if (set_ != nullptr) return set_;
  Engine *e = engine();
  if (e == nullptr) return nullptr;
  cgrt_graphs_options o;
  e->options(&o, descs);
  if (tweak != nullptr) tweak(&o);
  if (!c.expect_ok(cgrt_graphs_create(rt, &o, &set_), "cgrt_graphs_create (world)")) return nullptr;
  if (!c.expect_ok(cgrt_graphs_capture(set_), "cgrt_graphs_capture (world)")) return nullptr;
  return set_;
}

cgrt_module *World::module() {
  Engine *e = engine();
  return e ? e->mod : nullptr;
}

CUfunction World::function() {
  Engine *e = engine();
  return e ? e->f_scale : nullptr;
}

cgrt_mla_plan *World::plan() {
  if (plan_ != nullptr || rt == nullptr) return plan_;
  cgrt_mla_options o = small_mla(2, 2);
  if (!c.expect_ok(cgrt_mla_plan_create(rt, &o, &plan_), "cgrt_mla_plan_create (world)")) plan_ = nullptr;
  return plan_;
}

CUdeviceptr World::buffer(size_t bytes) {
  if (rt == nullptr) return 0;
  cgrt_tensor_desc d = desc1((int64_t)bytes, CGRT_DTYPE_U8);
  CUdeviceptr p = 0;
  std::string name = "adv.world." + std::to_string(buffers_++);
  if (!c.expect_ok(cgrt_workspace_request(rt, 0, name.c_str(), &d, 1, &p), "cgrt_workspace_request (world)"))
    return 0;
  if (!c.expect_ok(cgrt_memset_d8(rt, p, 0, bytes), "cgrt_memset_d8 (world)")) return 0;
  return p;
}

cgrt_mla_args World::mla_args() {
  if (!args_made_ && plan() != nullptr) {
    args_made_ = true;
    const size_t rows = 4, heads = 16, pages = 4;
    memset(&args_, 0, sizeof args_);
    args_.size = sizeof args_;
    args_.q = buffer(rows * heads * 576 * 2);
    args_.kv_cache = buffer(pages * 64 * 576 * 2);
    args_.block_table = buffer(2 * 2 * 4);
    args_.seq_lens = buffer(2 * 4);
    args_.out = buffer(rows * heads * 512 * 2);
    args_.lse = buffer(rows * heads * 4);
    args_.num_rows = (int)rows;
    args_.softmax_scale = 0.0417f;
  }
  return args_;
}

cgrt_status World::capture_with_probe(std::function<void(CUstream)> probe, cgrt_graphs **out) {
  *out = nullptr;
  Engine *e = engine();
  if (e == nullptr) return CGRT_ERROR_INTERNAL;
  probe_.eng = e;
  probe_.fn = std::move(probe);
  probe_.done = false;
  cgrt_graphs_options o;
  e->options(&o, descs);
  static const int sizes[] = {2};
  o.capture_sizes = sizes;
  o.num_capture_sizes = 1;
  o.block_len = 0;
  o.user = &probe_;
  o.enqueue = [](void *user, CUstream s, const cgrt_batch_desc *d) {
    Probe *p = static_cast<Probe *>(user);
    if (d->capturing && !p->done) {
      p->done = true;
      p->fn(s);
    }
    return p->eng->enqueue(s, d->padded_rows, d->buffers);
  };
  if (!c.expect_ok(cgrt_graphs_create(rt, &o, out), "cgrt_graphs_create (probe)")) return CGRT_ERROR_INTERNAL;
  cgrt_status st = cgrt_graphs_capture(*out);
  c.check(probe_.done, "the enqueue callback never ran under capture");
  return st;
}

cgrt_graphs *World::dead_graphs() {
  Engine *e = engine();
  if (e == nullptr) return nullptr;
  cgrt_graphs_options o;
  cgrt_buffer_desc d[NB];
  e->options(&o, d);
  cgrt_graphs *s = nullptr;
  if (!c.expect_ok(cgrt_graphs_create(rt, &o, &s), "cgrt_graphs_create (dead set)")) return nullptr;
  c.expect_ok(cgrt_graphs_destroy(s), "cgrt_graphs_destroy (dead set)");
  return s;
}

cgrt_mla_plan *World::dead_plan() {
  if (rt == nullptr) return nullptr;
  cgrt_mla_options o = small_mla(1);
  cgrt_mla_plan *p = nullptr;
  if (!c.expect_ok(cgrt_mla_plan_create(rt, &o, &p), "cgrt_mla_plan_create (dead plan)")) return nullptr;
  cgrt_mla_plan_destroy(p);
  return p;
}

cgrt_module *World::dead_module() {
  if (rt == nullptr) return nullptr;
  cgrt_module *m = nullptr;
  if (!c.expect_ok(cgrt_module_load(rt, synth::kernels_image(), &m), "cgrt_module_load (dead module)")) return nullptr;
  c.expect_ok(cgrt_module_unload(m), "cgrt_module_unload (dead module)");
  return m;
}

}  // namespace adv
