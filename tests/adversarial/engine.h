// A synthetic host engine over cgrt's public API only (the adversarial suite's twin of
// tests/graphs/synth_engine.h): its own kernels (adv_kernels.cu, loaded with
// cgrt_module_load; C references registered with cgrt_emulated_kernel_register), buffers
// carved from workspace reservations (a captured set "a", an eager set "b" and alternates
// to rebind to), an enqueue callback, and an eager reference that runs the same kernels
// on "b" with metadata built on the host. Every driver call it makes goes through cgrt
// (so through the fault-injection wrapper when the runtime has one).
#ifndef CGRT_TESTS_ADVERSARIAL_ENGINE_H
#define CGRT_TESTS_ADVERSARIAL_ENGINE_H

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_runtime.h"

namespace adv {

enum Buf { REQ_SEQ, REQ_POS, BT, SEQ, POS, SLOT, X, KV, OUT, Y, Z, WIN, WOUT, NB };
extern const char *const kBufNames[NB];

struct EngineConfig {
  int max_reqs = 8;
  int block_len = 2;       // block mode k (0: none)
  int block_size = 8;
  int max_blocks = 8;
  int max_model_len = 60;
  int alternates = 2;      // extra copies of every buffer to rebind to
  int lane = 0;            // workspace lane of the engine's reservations
  std::string tag = "adv"; // prefix of the reservation names
};

// One step's per-request inputs.
struct Batch {
  int reqs = 0, k = 1;
  std::vector<int32_t> seq;
  std::vector<int64_t> pos;
  std::vector<int32_t> bt;  // max_reqs * max_blocks
};

class Engine {
 public:
  // Registers the references (once per process), loads the module, reserves the buffer
  // sets (not locked) and zeroes/randomizes them. On failure returns the status (the
  // thread's message says why) and what was made stays for destroy(); calling it again
  // then completes it.
  cgrt_status init(cgrt_runtime *rt, const EngineConfig &cfg, uint32_t seed = 7);
  // Unloads the module (the reservations belong to the runtime).
  cgrt_status destroy();

  // The options of a set over buffers "a" (metadata on, block mode when cfg.block_len).
  void options(cgrt_graphs_options *o, cgrt_buffer_desc *descs);
  static cgrt_status enqueue_cb(void *user, CUstream s, const cgrt_batch_desc *d);
  cgrt_status enqueue(CUstream s, int rows, const CUdeviceptr *p);

  Batch random_batch(std::mt19937 &g, int reqs, int k, int headroom = 0) const;
  // Uploads the per-request inputs to the buffers at `p`, zeroes OUT there.
  cgrt_status write_inputs(const CUdeviceptr *p, const Batch &b);
  // The eager reference on "b" for `steps` decode steps (OUT is not zeroed between).
  cgrt_status eager(const Batch &b, int steps = 1);
  // Compares what the replay left at `cur` with the eager reference "b" for the real rows
  // (and inert padding up to bucket_rows); "" when equal, else what differs.
  std::string compare(const CUdeviceptr *cur, const Batch &b, int bucket_rows);
  // Copies bytes[f] from src to dst (device to device, complete on return).
  cgrt_status copy(CUdeviceptr dst, CUdeviceptr src, Buf f);

  cgrt_runtime *rt = nullptr;
  cgrt_module *mod = nullptr;
  CUfunction f_attn = nullptr, f_scale = nullptr;
  EngineConfig cfg;
  int max_rows = 0;
  size_t bytes[NB] = {};
  CUdeviceptr a[NB] = {}, b[NB] = {};
  std::vector<std::vector<CUdeviceptr>> alt;  // alt[i][f]: alternate i of buffer f
  int fail_at_rows = -1;  // the enqueue fails when padded rows equal this
};

// The test fatbin's image (adv_kernels.cu).
const void *adv_kernels_image();

// Registers the engine's C references (adv_attn, adv_scale) for the emulation: once per
// process, or again (the same references) when `again` is set.
cgrt_status register_engine_refs(bool again = false);

}  // namespace adv

#endif
