// A synthetic host engine for the graph tests: its own kernels (test fatbin + C
// references for the emulation), its buffers, an enqueue callback, and an eager reference
// that runs the same kernels on a second copy of the buffers with host-built metadata.
#ifndef CGRT_TESTS_GRAPHS_SYNTH_ENGINE_H
#define CGRT_TESTS_GRAPHS_SYNTH_ENGINE_H

#include <cuda.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cgrt/cgrt_graphs.h"
#include "kernels/registry.h"
#include "runtime/runtime_internal.h"
#include "tests/common/test_util.h"

// The test fatbin (//tests/graphs:test_fatbin): one module image per .cu file.
struct cgrt_test_fatbin_entry {
  const char *source;
  const unsigned char *image;
  size_t size;
  int optional;  // device-runtime images (rdc_srcs): may fail to load
};
extern "C" const cgrt_test_fatbin_entry cgrt_test_graphs_fatbin[];

namespace synth {

enum Buf {
  REQ_SEQ, REQ_POS, BT, SEQ, POS, SLOT, X, KV, OUT, Y, Z, SCR, WIN, WOUT, NB
};
static const char *kNames[NB] = {"req_seq_lens", "req_positions", "block_table", "seq_lens",
                                 "positions", "slot_mapping", "x", "kv", "out", "y", "z",
                                 "scratch", "w_in", "w_out"};

// ---- C references of test_kernels.cu -------------------------------------------------
inline void attn_ref(const cgrt__ref_launch *, const unsigned char *p, const size_t *off) {
  int rows = CGRT__REF_PARAM(int, p, off, 0);
  auto ptr = [&](int i) { return (void *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, i); };
  const int *seq = (const int *)ptr(1);
  const long long *pos = (const long long *)ptr(2);
  const long long *slots = (const long long *)ptr(3);
  const float *x = (const float *)ptr(4);
  float *kv = (float *)ptr(5);
  float *out = (float *)ptr(6);
  for (int i = 0; i < rows; i++) {
    int s = seq[i];
    if (s <= 0) {
      out[i] = 0.0f;
      continue;
    }
    float v = x[i] * 2.0f + (float)s * 0.5f + (float)(pos[i] % 97) * 0.25f;
    if (slots[i] >= 0) kv[slots[i]] = v;
    out[i] = out[i] * 0.5f + v;
  }
}
inline void scale_ref(const cgrt__ref_launch *, const unsigned char *p, const size_t *off) {
  int n = CGRT__REF_PARAM(int, p, off, 0);
  const float *in = (const float *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, 1);
  float *out = (float *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, 2);
  float a = CGRT__REF_PARAM(float, p, off, 3);
  for (int i = 0; i < n; i++) out[i] = in[i] * a + 1.0f;
}

struct Config {
  int max_reqs = 32;
  int block_len = 4;  // block mode k (0: none)
  int block_size = 16;
  int max_blocks = 8;
  int max_model_len = 120;
};

// One set of device buffers.
struct Buffers {
  CUdeviceptr p[NB] = {};
  size_t bytes[NB] = {};
};

struct Engine {
  cgrt_runtime *rt = nullptr;
  const cgrt__driver *drv = nullptr;
  Config cfg;
  CUmodule mod = nullptr;
  CUfunction f_attn = nullptr, f_scale = nullptr;
  Buffers a, b;  // a: captured/replayed, b: eager reference
  std::vector<CUdeviceptr> extra;  // other allocations (alternates)
  int max_rows = 0;
  // Test knobs for the callback.
  int fail_at_rows = -1;      // fail the enqueue when padded_rows equals this
  int grow_workspace = 0;     // request a larger workspace from the callback
  int extra_node = 0;         // add a node (topology change)
  int calls = 0;
  CUdeviceptr ws_ptr = 0;     // when set, the last kernel writes here instead of w_out
  CUdeviceptr dirty_counter = 0;  // when set, the step leaves this counter at 1
  std::vector<int> layout;

  bool init(cgrt_runtime *r, Config c = Config()) {
    rt = r;
    drv = r->drv;
    cfg = c;
    cgrt__ref_kernel k1 = {"gt_attn", 7, {4, 8, 8, 8, 8, 8, 8}, attn_ref};
    cgrt__ref_kernel k2 = {"gt_scale", 4, {4, 8, 8, 4}, scale_ref};
    if (cgrt__ref_kernel_register(&k1) != 0 || cgrt__ref_kernel_register(&k2) != 0) return false;
    if (drv->cuCtxSetCurrent(r->ctx) != CUDA_SUCCESS) return false;
    if (drv->cuModuleLoadData(&mod, cgrt_test_graphs_fatbin[0].image) != CUDA_SUCCESS) return false;
    if (drv->cuModuleGetFunction(&f_attn, mod, "gt_attn") != CUDA_SUCCESS) return false;
    if (drv->cuModuleGetFunction(&f_scale, mod, "gt_scale") != CUDA_SUCCESS) return false;
    int k = cfg.block_len > 1 ? cfg.block_len : 1;
    max_rows = cfg.max_reqs * k;
    size_t R = (size_t)cfg.max_reqs, M = (size_t)max_rows;
    size_t sizes[NB] = {R * 4, R * 8, R * cfg.max_blocks * 4, M * 4, M * 8, M * 8, M * 4,
                        R * cfg.max_blocks * cfg.block_size * 4, M * 4, M * 4, M * 4, M * 4,
                        M * 4, M * 4};
    for (Buffers *s : {&a, &b})
      for (int i = 0; i < NB; i++) {
        s->bytes[i] = sizes[i];
        if (drv->cuMemAlloc(&s->p[i], sizes[i]) != CUDA_SUCCESS) return false;
        if (drv->cuMemsetD8(s->p[i], 0, sizes[i]) != CUDA_SUCCESS) return false;
      }
    return true;
  }
  void destroy() {
    if (!rt) return;
    drv->cuCtxSetCurrent(rt->ctx);
    drv->cuCtxSynchronize();
    for (Buffers *s : {&a, &b})
      for (int i = 0; i < NB; i++)
        if (s->p[i]) drv->cuMemFree(s->p[i]);
    for (CUdeviceptr p : extra) drv->cuMemFree(p);
    if (mod) drv->cuModuleUnload(mod);
    rt = nullptr;
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    if (drv->cuMemAlloc(&p, bytes) != CUDA_SUCCESS) return 0;
    drv->cuMemsetD8(p, 0, bytes);
    extra.push_back(p);
    return p;
  }

  // The options of a set over buffers `a`.
  void options(cgrt_graphs_options *o, cgrt_buffer_desc *descs) {
    cgrt_graphs_options_init(o);
    o->max_num_seqs = cfg.max_reqs;
    o->max_model_len = cfg.max_model_len;
    o->num_heads = 16;
    o->block_len = cfg.block_len;
    o->enqueue = &Engine::enqueue_cb;
    o->user = this;
    for (int i = 0; i < NB; i++) {
      descs[i].name = kNames[i];
      descs[i].ptr = a.p[i];
      descs[i].bytes = a.bytes[i];
      descs[i].dir = (i == OUT || i == Y || i == Z || i == KV || i == WOUT || i == SCR || i == SEQ ||
                      i == POS || i == SLOT)
                         ? CGRT_BUFFER_INOUT
                         : CGRT_BUFFER_IN;
    }
    o->buffers = descs;
    o->num_buffers = NB;
    o->meta.enabled = 1;
    o->meta.req_seq_lens = REQ_SEQ;
    o->meta.req_positions = REQ_POS;
    o->meta.block_table = BT;
    o->meta.seq_lens = SEQ;
    o->meta.positions = POS;
    o->meta.slot_mapping = SLOT;
    o->meta.block_size = cfg.block_size;
    o->meta.max_blocks_per_seq = cfg.max_blocks;
  }

  static cgrt_status enqueue_cb(void *user, CUstream s, const cgrt_batch_desc *d) {
    return static_cast<Engine *>(user)->enqueue(s, d->padded_rows, d->buffers);
  }

  cgrt_status enqueue(CUstream s, int rows, const CUdeviceptr *p) {
    calls++;
    if (rows == fail_at_rows) return CGRT_ERROR_INVALID_ARGUMENT;
    if (grow_workspace) {
      cgrt_tensor_desc t = {};
      t.ndim = 1;
      t.shape[0] = (int64_t)(1 << 14) * calls;
      t.dtype = CGRT_DTYPE_F32;
      CUdeviceptr w = 0;
      cgrt_status st = cgrt_workspace_request(rt, CGRT_LANE_TARGET, "synth.grow", &t, 1, &w);
      if (st != CGRT_SUCCESS) return st;
    }
    unsigned grid = (unsigned)((rows + 127) / 128);
    int n = rows;
    CUdeviceptr seq = p[SEQ], pos = p[POS], slot = p[SLOT], x = p[X], kv = p[KV], out = p[OUT];
    void *a1[] = {&n, &seq, &pos, &slot, &x, &kv, &out};
    if (drv->cuLaunchKernel(f_attn, grid, 1, 1, 128, 1, 1, 0, s, a1, nullptr) != CUDA_SUCCESS)
      return CGRT_ERROR_DRIVER;
    CUdeviceptr y = p[Y];
    float three = 3.0f;
    void *a2[] = {&n, &out, &y, &three};
    if (drv->cuLaunchKernel(f_scale, grid, 1, 1, 128, 1, 1, 0, s, a2, nullptr) != CUDA_SUCCESS)
      return CGRT_ERROR_DRIVER;
    if (drv->cuMemcpyDtoDAsync(p[Z], p[Y], (size_t)rows * 4, s) != CUDA_SUCCESS) return CGRT_ERROR_DRIVER;
    if (drv->cuMemsetD32Async(p[SCR], 7u, (size_t)rows, s) != CUDA_SUCCESS) return CGRT_ERROR_DRIVER;
    CUdeviceptr win = p[WIN], wout = ws_ptr ? ws_ptr : p[WOUT];
    float two = 2.0f;
    void *a3[] = {&n, &win, &wout, &two};
    if (drv->cuLaunchKernel(f_scale, grid, 1, 1, 128, 1, 1, 0, s, a3, nullptr) != CUDA_SUCCESS)
      return CGRT_ERROR_DRIVER;
    if (dirty_counter && drv->cuMemsetD32Async(dirty_counter, 1u, 1, s) != CUDA_SUCCESS) return CGRT_ERROR_DRIVER;
    if (extra_node) {
      void *a4[] = {&n, &win, &wout, &two};
      if (drv->cuLaunchKernel(f_scale, grid, 1, 1, 128, 1, 1, 0, s, a4, nullptr) != CUDA_SUCCESS)
        return CGRT_ERROR_DRIVER;
    }
    return CGRT_SUCCESS;
  }

  // ---- host data ----------------------------------------------------------------------
  template <typename T>
  void put(CUdeviceptr p, const std::vector<T> &v) { upload(p, v.data(), v.size() * sizeof(T)); }
  // A host-to-device copy that has landed on return. cuMemcpyHtoD from pageable memory
  // returns once the data is staged, and its DMA is ordered on the legacy stream only: a
  // graph launched at once on a non-blocking stream could read the old contents.
  void upload(CUdeviceptr p, const void *src, size_t bytes) {
    ASSERT_EQ(drv->cuMemcpyHtoD(p, src, bytes), CUDA_SUCCESS);
    ASSERT_EQ(drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  template <typename T>
  std::vector<T> get(CUdeviceptr p, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(drv->cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(drv->cuMemcpyDtoH(v.data(), p, n * sizeof(T)), CUDA_SUCCESS);
    return v;
  }

  // Per-request metadata of a batch.
  struct Batch {
    int reqs = 0, k = 1;
    std::vector<int32_t> seq;
    std::vector<int64_t> pos;
    std::vector<int32_t> bt;  // max_reqs * max_blocks
  };
  Batch random_batch(std::mt19937 &g, int reqs, int k, int headroom = 0) {
    Batch bt;
    bt.reqs = reqs;
    bt.k = k;
    int cap = cfg.max_blocks * cfg.block_size - headroom;
    std::vector<int32_t> perm(cfg.max_reqs * cfg.max_blocks);
    for (size_t i = 0; i < perm.size(); i++) perm[i] = (int32_t)i;
    std::shuffle(perm.begin(), perm.end(), g);
    bt.bt = perm;
    bt.seq.assign(cfg.max_reqs, 0);
    bt.pos.assign(cfg.max_reqs, 0);
    for (int r = 0; r < reqs; r++) {
      int s = k + (int)(g() % (unsigned)(std::min(cap, cfg.max_model_len) - k));
      bt.seq[r] = s;
      bt.pos[r] = s - k;
    }
    return bt;
  }
  static int64_t slot_of(const Batch &b, const Config &c, int r, int64_t pos) {
    if (pos < 0 || pos / c.block_size >= c.max_blocks) return -1;
    return (int64_t)b.bt[(size_t)r * c.max_blocks + pos / c.block_size] * c.block_size + pos % c.block_size;
  }
  // Writes the per-request inputs into buffer set s (and returns the per-row expansion).
  void write_inputs(const Buffers &s, const Batch &bt) {
    put(s.p[REQ_SEQ], bt.seq);
    put(s.p[REQ_POS], bt.pos);
    put(s.p[BT], bt.bt);
  }
  void expand(const Batch &bt, int step, std::vector<int32_t> *seq, std::vector<int64_t> *pos,
              std::vector<int64_t> *slot) {
    int rows = bt.reqs * bt.k;
    seq->assign(rows, 0);
    pos->assign(rows, 0);
    slot->assign(rows, -1);
    for (int i = 0; i < rows; i++) {
      int r = i / bt.k, j = i % bt.k;
      int s = bt.seq[r] + step;
      (*seq)[i] = s < cfg.max_model_len ? s : cfg.max_model_len;
      (*pos)[i] = bt.pos[r] + j + step;
      (*slot)[i] = slot_of(bt, cfg, r, (*pos)[i]);
    }
  }
  // The eager reference on buffers b: host metadata, the same kernels, rows = real rows.
  void eager_reference(const Batch &bt, const CUdeviceptr *addr_b, int steps = 1) {
    CUstream s = nullptr;
    for (int st = 0; st < steps; st++) {
      std::vector<int32_t> seq;
      std::vector<int64_t> pos, slot;
      expand(bt, st, &seq, &pos, &slot);
      put(addr_b[SEQ], seq);
      put(addr_b[POS], pos);
      put(addr_b[SLOT], slot);
      ASSERT_EQ(enqueue(s, bt.reqs * bt.k, addr_b), CGRT_SUCCESS);
    }
    ASSERT_EQ(drv->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  // Fills a float buffer (in both sets when `both`) with random values.
  void randomize(std::mt19937 &g, CUdeviceptr pa, CUdeviceptr pb, size_t n) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto &x : v) x = u(g);
    put(pa, v);
    if (pb) put(pb, v);
  }
};

}  // namespace synth

#endif
