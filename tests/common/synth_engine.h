// The tests' synthetic host engine, over cgrt's public API only (the graph tests and the
// adversarial suite both drive cgrt with it): its own kernels (synth_kernels.h, loaded
// with cgrt_module_load, C references registered for the emulation), buffer sets "a"
// (captured and replayed), "b" (the eager reference) and alternates to rebind to, an
// enqueue callback, and an eager reference that runs the same kernels on "b" with
// metadata built on the host. Every driver call it makes goes through cgrt (so through
// the fault-injection wrapper when the runtime has one).
//
// One step (enqueue): synth_attn(seq_lens, positions, slot_mapping, x -> kv, out),
// synth_scale(out -> y), a copy y -> z, a memset of scratch (where the host gives
// `memset_d32`: the public API has no asynchronous memset), synth_scale(w_in -> w_out).
#ifndef CGRT_TESTS_COMMON_SYNTH_ENGINE_H
#define CGRT_TESTS_COMMON_SYNTH_ENGINE_H

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_module.h"
#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"
#include "tests/common/synth_kernels.h"

namespace synth {

enum Buf { REQ_SEQ, REQ_POS, BT, SEQ, POS, SLOT, X, KV, OUT, Y, Z, SCR, WIN, WOUT, NB };
extern const char *const kBufNames[NB];

struct Config {
  int max_reqs = 32;
  int block_len = 4;  // block mode k (0: none)
  int block_size = 16;
  int max_blocks = 8;
  int max_model_len = 120;
  int alternates = 0;          // extra copies of every buffer to rebind to
  int lane = 0;                // workspace lane of the reservations
  std::string tag = "synth";   // prefix of the reservation names
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
  // Where the buffer sets live: by default reservations of the runtime's workspace (lane
  // cfg.lane, named cfg.tag + ".a", ".b", ".alt<i>"); when `allocate` is set, memory it
  // returns, one allocation a buffer (given back with `release` by destroy()).
  std::function<cgrt_status(size_t bytes, CUdeviceptr *out)> allocate;
  std::function<void(CUdeviceptr)> release;
  // An asynchronous 32-bit memset on a stream (the scratch and dirty_counter nodes); the
  // step has no memset without it.
  std::function<cgrt_status(CUdeviceptr dst, unsigned value, size_t n, CUstream s)> memset_d32;

  // Registers the references (once per process), loads the module, makes the buffer
  // sets, zeroes them and fills x and w_in with the same random values (from `seed`) in
  // "a" and "b". On failure returns the status (the thread's message says why) and what
  // was made stays for destroy(); calling it again on the same runtime then completes
  // it. On another runtime it starts afresh.
  cgrt_status init(cgrt_runtime *rt, const Config &cfg, uint32_t seed = 7);
  // Unloads the module and gives back what `allocate` made, after synchronizing
  // (workspace reservations belong to the runtime).
  cgrt_status destroy();

  // The options of a set over buffers "a" (metadata on, block mode when cfg.block_len).
  void options(cgrt_graphs_options *o, cgrt_buffer_desc *descs);
  static cgrt_status enqueue_cb(void *user, CUstream s, const cgrt_batch_desc *d);
  cgrt_status enqueue(CUstream s, int rows, const CUdeviceptr *p);

  Batch random_batch(std::mt19937 &g, int reqs, int k, int headroom = 0) const;
  // Uploads the per-request inputs to the buffers at `p`, zeroes OUT there.
  cgrt_status write_inputs(const CUdeviceptr *p, const Batch &b);
  // `steps` eager decode steps on the buffers at `on` (host metadata, the same kernels,
  // rows = real rows; OUT is not zeroed), then synchronizes.
  cgrt_status run_eager(const Batch &b, const CUdeviceptr *on, int steps = 1);
  // The eager reference on "b": zeroes OUT there, then run_eager.
  cgrt_status eager(const Batch &b, int steps = 1);
  // Compares what the replay left at `cur` with the eager reference "b" for the real rows
  // (and inert padding up to bucket_rows); "" when equal, else what differs.
  std::string compare(const CUdeviceptr *cur, const Batch &b, int bucket_rows);
  // Copies bytes[f] from src to dst (device to device, complete on return).
  cgrt_status copy(CUdeviceptr dst, CUdeviceptr src, Buf f);

  cgrt_runtime *rt = nullptr;
  cgrt_module *mod = nullptr;
  CUfunction f_attn = nullptr, f_scale = nullptr;
  Config cfg;
  int max_rows = 0;
  size_t bytes[NB] = {};
  CUdeviceptr a[NB] = {}, b[NB] = {};
  std::vector<std::vector<CUdeviceptr>> alt;  // alt[i][f]: alternate i of buffer f

  // Knobs of the enqueue callback.
  int fail_at_rows = -1;          // fail the enqueue when padded rows equal this
  int grow_workspace = 0;         // request a larger workspace from the callback
  int extra_node = 0;             // add a node (topology change)
  int calls = 0;                  // enqueues so far
  CUdeviceptr ws_ptr = 0;         // when set, the last kernel writes here instead of w_out
  CUdeviceptr dirty_counter = 0;  // when set, the step leaves this counter at 1 (memset_d32)

 private:
  cgrt_status make_set(const char *suffix, CUdeviceptr *p, const cgrt_tensor_desc *d);
  std::vector<CUdeviceptr> allocated_;
};

}  // namespace synth

#endif
