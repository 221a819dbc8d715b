// A small world of live cgrt objects for one case (runtime, engine, captured graph set,
// MLA plan and its tensors), made on demand and destroyed with the World, and handles of
// each kind that are no longer live. Public headers only.
#ifndef CGRT_TESTS_ADVERSARIAL_WORLD_H
#define CGRT_TESTS_ADVERSARIAL_WORLD_H

#include <functional>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_module.h"
#include "tests/common/synth_engine.h"
#include "tests/adversarial/fixture.h"
#include "tests/adversarial/harness.h"

namespace adv {

// The suite's host engine is the tests' synthetic engine (tests/common/synth_engine.h):
// buffer sets in workspace reservations, no memset node (the public API has none).
using EngineConfig = synth::Config;
using synth::Batch;
using synth::Buf;
using synth::Engine;
using synth::kBufNames;
using synth::REQ_SEQ, synth::REQ_POS, synth::BT, synth::SEQ, synth::POS, synth::SLOT, synth::X, synth::KV,
    synth::OUT, synth::Y, synth::Z, synth::SCR, synth::WIN, synth::WOUT, synth::NB;

// The engine configuration of the small worlds: 4 requests, block mode k = 2, blocks of 8
// tokens, 60 tokens at most, one alternate of each buffer, reservations named "adv.*".
EngineConfig small_engine();
// MLA options of a small plan: 16 heads, max_model_len 64 x max_num_seqs.
cgrt_mla_options small_mla(int max_num_seqs = 2, int block_len = 1);

class World {
 public:
  explicit World(Ctx &c, int fault_injection = 0);
  ~World();
  World(const World &) = delete;
  World &operator=(const World &) = delete;

  Ctx &c;
  cgrt_runtime *rt = nullptr;  // NULL when it could not be made (recorded)

  // Each returns NULL (with a misbehaviour recorded) when it could not be made.
  Engine *engine();
  // A captured set over the engine's buffers; `tweak` may change the options first.
  cgrt_graphs *graphs(void (*tweak)(cgrt_graphs_options *) = nullptr);
  cgrt_module *module();  // the engine's module
  CUfunction function();  // synth_scale of the engine's module
  cgrt_mla_plan *plan();
  // Valid decode arguments for plan() (every row padding: seq_lens 0).
  cgrt_mla_args mla_args();
  // A device buffer of `bytes` (a workspace reservation of its own).
  CUdeviceptr buffer(size_t bytes);

  // A decode-only set over the engine's buffers (one bucket of 2 rows) whose enqueue
  // callback, the first time it runs under capture, calls probe(capture stream) before
  // the step. Creates and captures it; returns the capture's status (*out holds the set,
  // NULL if it could not be made, recorded).
  cgrt_status capture_with_probe(std::function<void(CUstream)> probe, cgrt_graphs **out);

  // Handles made and destroyed again.
  cgrt_graphs *dead_graphs();
  cgrt_mla_plan *dead_plan();
  cgrt_module *dead_module();

  cgrt_buffer_desc descs[NB];

 private:
  Engine eng_;
  bool eng_made_ = false;
  cgrt_graphs *set_ = nullptr;
  cgrt_mla_plan *plan_ = nullptr;
  cgrt_mla_args args_{};
  bool args_made_ = false;
  int buffers_ = 0;
  struct Probe {
    Engine *eng = nullptr;
    std::function<void(CUstream)> fn;
    bool done = false;
  } probe_;
};

}  // namespace adv

#endif
