// The tests' synthetic host engine (see synth_engine.h). Public headers only.
#include "tests/common/synth_engine.h"

#include <algorithm>
#include <cstring>

#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_workspace.h"

namespace synth {

const char *const kBufNames[NB] = {"req_seq_lens", "req_positions", "block_table", "seq_lens", "positions",
                                   "slot_mapping", "x",  "kv", "out", "y", "z", "scratch", "w_in", "w_out"};

cgrt_status Engine::make_set(const char *suffix, CUdeviceptr *p, const cgrt_tensor_desc *d) {
  if (!allocate) return cgrt_workspace_request(rt, cfg.lane, (cfg.tag + suffix).c_str(), d, NB, p);
  for (int i = 0; i < NB; i++) {
    if (p[i] != 0) continue;  // made by an earlier, failed init
    cgrt_status st = allocate(bytes[i], &p[i]);
    if (st != CGRT_SUCCESS) return st;
    allocated_.push_back(p[i]);
  }
  return CGRT_SUCCESS;
}

cgrt_status Engine::init(cgrt_runtime *r, const Config &c, uint32_t seed) {
  if (r != rt) {  // a new runtime: start afresh (what the old one had stays with it)
    mod = nullptr;
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    alt.clear();
    allocated_.clear();
  }
  rt = r;
  cfg = c;
  cgrt_status st = register_refs();
  if (st != CGRT_SUCCESS) return st;
  // Safe to call again after a failure: what was made is kept (a reservation that fits
  // returns the same addresses).
  if (mod == nullptr && (st = cgrt_module_load(rt, kernels_image(), &mod)) != CGRT_SUCCESS) return st;
  if ((st = cgrt_module_function(mod, "synth_attn", &f_attn)) != CGRT_SUCCESS) return st;
  if ((st = cgrt_module_function(mod, "synth_scale", &f_scale)) != CGRT_SUCCESS) return st;
  int k = cfg.block_len > 1 ? cfg.block_len : 1;
  max_rows = cfg.max_reqs * k;
  size_t R = (size_t)cfg.max_reqs, M = (size_t)max_rows, B = (size_t)cfg.max_blocks;
  const size_t sizes[NB] = {R * 4, R * 8, R * B * 4, M * 4, M * 8, M * 8, M * 4,
                            R * B * (size_t)cfg.block_size * 4, M * 4, M * 4, M * 4, M * 4, M * 4, M * 4};
  cgrt_tensor_desc d[NB];
  for (int i = 0; i < NB; i++) {
    bytes[i] = sizes[i];
    memset(&d[i], 0, sizeof d[i]);
    d[i].ndim = 1;
    d[i].shape[0] = (int64_t)sizes[i];
    d[i].dtype = CGRT_DTYPE_U8;
  }
  if ((st = make_set(".a", a, d)) != CGRT_SUCCESS) return st;
  if ((st = make_set(".b", b, d)) != CGRT_SUCCESS) return st;
  alt.resize((size_t)cfg.alternates, std::vector<CUdeviceptr>(NB, 0));
  for (int i = 0; i < cfg.alternates; i++) {
    std::string suffix = ".alt" + std::to_string(i);
    if ((st = make_set(suffix.c_str(), alt[(size_t)i].data(), d)) != CGRT_SUCCESS) return st;
  }
  // Every buffer starts at zero (runs are reproducible); x and w_in hold the same random
  // values in both sets.
  std::vector<const CUdeviceptr *> sets = {a, b};
  for (const std::vector<CUdeviceptr> &s : alt) sets.push_back(s.data());
  for (const CUdeviceptr *s : sets)
    for (int i = 0; i < NB; i++)
      if ((st = cgrt_memset_d8(rt, s[i], 0, bytes[i])) != CGRT_SUCCESS) return st;
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(M);
  for (Buf f : {X, WIN}) {
    for (float &x : v) x = u(g);
    if ((st = cgrt_memcpy_htod(rt, a[f], v.data(), bytes[f])) != CGRT_SUCCESS) return st;
    if ((st = cgrt_memcpy_htod(rt, b[f], v.data(), bytes[f])) != CGRT_SUCCESS) return st;
  }
  return CGRT_SUCCESS;
}

cgrt_status Engine::destroy() {
  if (rt == nullptr) return CGRT_SUCCESS;
  if (!allocated_.empty()) {
    cgrt_runtime_synchronize(rt);  // nothing of the engine's runs on what goes
    for (CUdeviceptr p : allocated_)
      if (release) release(p);
    allocated_.clear();
  }
  cgrt_status st = cgrt_module_unload(mod);
  mod = nullptr;
  rt = nullptr;
  return st;
}

void Engine::options(cgrt_graphs_options *o, cgrt_buffer_desc *descs) {
  cgrt_graphs_options_init(o);
  o->max_num_seqs = cfg.max_reqs;
  o->max_model_len = cfg.max_model_len;
  o->num_heads = 16;
  o->block_len = cfg.block_len;
  o->enqueue = &Engine::enqueue_cb;
  o->user = this;
  for (int i = 0; i < NB; i++) {
    descs[i].name = kBufNames[i];
    descs[i].ptr = a[i];
    descs[i].bytes = bytes[i];
    descs[i].dir = (i == OUT || i == Y || i == Z || i == KV || i == WOUT || i == SCR || i == SEQ || i == POS ||
                    i == SLOT)
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

cgrt_status Engine::enqueue_cb(void *user, CUstream s, const cgrt_batch_desc *d) {
  return static_cast<Engine *>(user)->enqueue(s, d->padded_rows, d->buffers);
}

cgrt_status Engine::enqueue(CUstream s, int rows, const CUdeviceptr *p) {
  calls++;
  if (rows == fail_at_rows) return CGRT_ERROR_INVALID_ARGUMENT;
  cgrt_status st = CGRT_SUCCESS;
  if (grow_workspace) {
    cgrt_tensor_desc t = {};
    t.ndim = 1;
    t.shape[0] = (int64_t)(1 << 14) * calls;
    t.dtype = CGRT_DTYPE_F32;
    CUdeviceptr w = 0;
    if ((st = cgrt_workspace_request(rt, CGRT_LANE_TARGET, (cfg.tag + ".grow").c_str(), &t, 1, &w)) != CGRT_SUCCESS)
      return st;
  }
  unsigned grid = (unsigned)((rows + 127) / 128);
  int n = rows;
  CUdeviceptr seq = p[SEQ], pos = p[POS], slot = p[SLOT], x = p[X], kv = p[KV], out = p[OUT], y = p[Y];
  CUdeviceptr win = p[WIN], wout = ws_ptr ? ws_ptr : p[WOUT];
  float three = 3.0f, two = 2.0f;
  void *a1[] = {&n, &seq, &pos, &slot, &x, &kv, &out};
  st = cgrt_launch_kernel(rt, f_attn, grid, 1, 1, 128, 1, 1, 0, s, a1);
  void *a2[] = {&n, &out, &y, &three};
  if (st == CGRT_SUCCESS) st = cgrt_launch_kernel(rt, f_scale, grid, 1, 1, 128, 1, 1, 0, s, a2);
  if (st == CGRT_SUCCESS) st = cgrt_memcpy_dtod_async(rt, p[Z], p[Y], (size_t)rows * 4, s);
  if (st == CGRT_SUCCESS && memset_d32) st = memset_d32(p[SCR], 7u, (size_t)rows, s);
  void *a3[] = {&n, &win, &wout, &two};
  if (st == CGRT_SUCCESS) st = cgrt_launch_kernel(rt, f_scale, grid, 1, 1, 128, 1, 1, 0, s, a3);
  if (st == CGRT_SUCCESS && dirty_counter)
    st = memset_d32 ? memset_d32(dirty_counter, 1u, 1, s) : CGRT_ERROR_INVALID_ARGUMENT;
  void *a4[] = {&n, &win, &wout, &two};
  if (st == CGRT_SUCCESS && extra_node) st = cgrt_launch_kernel(rt, f_scale, grid, 1, 1, 128, 1, 1, 0, s, a4);
  return st;
}

Batch Engine::random_batch(std::mt19937 &g, int reqs, int k, int headroom) const {
  Batch bt;
  bt.reqs = reqs;
  bt.k = k;
  int cap = cfg.max_blocks * cfg.block_size - headroom;
  std::vector<int32_t> perm((size_t)cfg.max_reqs * cfg.max_blocks);
  for (size_t i = 0; i < perm.size(); i++) perm[i] = (int32_t)i;
  std::shuffle(perm.begin(), perm.end(), g);
  bt.bt = perm;
  bt.seq.assign((size_t)cfg.max_reqs, 0);
  bt.pos.assign((size_t)cfg.max_reqs, 0);
  for (int r = 0; r < reqs; r++) {
    int s = k + (int)(g() % (unsigned)(std::min(cap, cfg.max_model_len) - k));
    bt.seq[(size_t)r] = s;
    bt.pos[(size_t)r] = s - k;
  }
  return bt;
}

cgrt_status Engine::write_inputs(const CUdeviceptr *p, const Batch &bt) {
  std::vector<float> zero((size_t)max_rows, 0.0f);
  cgrt_status st = cgrt_memcpy_htod(rt, p[REQ_SEQ], bt.seq.data(), bt.seq.size() * 4);
  if (st == CGRT_SUCCESS) st = cgrt_memcpy_htod(rt, p[REQ_POS], bt.pos.data(), bt.pos.size() * 8);
  if (st == CGRT_SUCCESS) st = cgrt_memcpy_htod(rt, p[BT], bt.bt.data(), bt.bt.size() * 4);
  if (st == CGRT_SUCCESS) st = cgrt_memcpy_htod(rt, p[OUT], zero.data(), bytes[OUT]);
  return st;
}

cgrt_status Engine::run_eager(const Batch &bt, const CUdeviceptr *on, int steps) {
  cgrt_status st = CGRT_SUCCESS;
  for (int step = 0; st == CGRT_SUCCESS && step < steps; step++) {
    int rows = bt.reqs * bt.k;
    std::vector<int32_t> seq((size_t)rows);
    std::vector<int64_t> pos((size_t)rows), slot((size_t)rows);
    for (int i = 0; i < rows; i++) {
      int r = i / bt.k, j = i % bt.k;
      int s = bt.seq[(size_t)r] + step;
      seq[(size_t)i] = s < cfg.max_model_len ? s : cfg.max_model_len;
      int64_t ps = bt.pos[(size_t)r] + j + step;
      pos[(size_t)i] = ps;
      slot[(size_t)i] = ps < 0 || ps / cfg.block_size >= cfg.max_blocks
                            ? -1
                            : (int64_t)bt.bt[(size_t)r * cfg.max_blocks + ps / cfg.block_size] * cfg.block_size +
                                  ps % cfg.block_size;
    }
    st = cgrt_memcpy_htod(rt, on[SEQ], seq.data(), seq.size() * 4);
    if (st == CGRT_SUCCESS) st = cgrt_memcpy_htod(rt, on[POS], pos.data(), pos.size() * 8);
    if (st == CGRT_SUCCESS) st = cgrt_memcpy_htod(rt, on[SLOT], slot.data(), slot.size() * 8);
    if (st == CGRT_SUCCESS) st = enqueue(nullptr, rows, on);
  }
  if (st == CGRT_SUCCESS) st = cgrt_runtime_synchronize(rt);
  return st;
}

cgrt_status Engine::eager(const Batch &bt, int steps) {
  std::vector<float> zero((size_t)max_rows, 0.0f);
  cgrt_status st = cgrt_memcpy_htod(rt, b[OUT], zero.data(), bytes[OUT]);
  return st == CGRT_SUCCESS ? run_eager(bt, b, steps) : st;
}

namespace {
template <class T>
std::string diff(const char *what, const std::vector<T> &got, const std::vector<T> &want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", eager " +
             std::to_string(want[i]);
  return "";
}
}  // namespace

std::string Engine::compare(const CUdeviceptr *cur, const Batch &bt, int bucket_rows) {
  if (cgrt_runtime_synchronize(rt) != CGRT_SUCCESS) return std::string("synchronize: ") + cgrt_last_error();
  size_t rows = (size_t)(bt.reqs * bt.k), all = (size_t)max_rows;
  auto get = [&](CUdeviceptr p, size_t n, auto *v) {
    v->assign(n, {});
    return cgrt_memcpy_dtoh(rt, v->data(), p, n * sizeof((*v)[0]));
  };
  std::string d;
  std::vector<float> fa, fb;
  for (Buf f : {OUT, Y, Z, WOUT}) {
    if (get(cur[f], rows, &fa) != CGRT_SUCCESS || get(b[f], rows, &fb) != CGRT_SUCCESS)
      return std::string("reading ") + kBufNames[f] + ": " + cgrt_last_error();
    if (!(d = diff(kBufNames[f], fa, fb, rows)).empty()) return d;
  }
  size_t kvn = bytes[KV] / 4;
  if (get(cur[KV], kvn, &fa) != CGRT_SUCCESS || get(b[KV], kvn, &fb) != CGRT_SUCCESS)
    return std::string("reading kv: ") + cgrt_last_error();
  if (!(d = diff("kv", fa, fb, kvn)).empty()) return d;
  std::vector<int32_t> sa, sb;
  std::vector<int64_t> la, lb;
  if (get(cur[SEQ], all, &sa) != CGRT_SUCCESS || get(b[SEQ], rows, &sb) != CGRT_SUCCESS)
    return std::string("reading seq_lens: ") + cgrt_last_error();
  if (!(d = diff("seq_lens", sa, sb, rows)).empty()) return d;
  for (int i = (int)rows; i < bucket_rows; i++)
    if (sa[(size_t)i] != 0) return "padding row " + std::to_string(i) + ": seq_lens " + std::to_string(sa[(size_t)i]);
  if (get(cur[POS], rows, &la) != CGRT_SUCCESS || get(b[POS], rows, &lb) != CGRT_SUCCESS)
    return std::string("reading positions: ") + cgrt_last_error();
  if (!(d = diff("positions", la, lb, rows)).empty()) return d;
  if (get(cur[SLOT], all, &la) != CGRT_SUCCESS || get(b[SLOT], rows, &lb) != CGRT_SUCCESS)
    return std::string("reading slot_mapping: ") + cgrt_last_error();
  if (!(d = diff("slot_mapping", la, lb, rows)).empty()) return d;
  for (int i = (int)rows; i < bucket_rows; i++)
    if (la[(size_t)i] != -1) return "padding row " + std::to_string(i) + ": slot " + std::to_string(la[(size_t)i]);
  if (bucket_rows > (int)rows) {
    if (get(cur[OUT], (size_t)bucket_rows, &fa) != CGRT_SUCCESS) return std::string("reading out: ") + cgrt_last_error();
    for (int i = (int)rows; i < bucket_rows; i++)
      if (fa[(size_t)i] != 0.0f) return "padding row " + std::to_string(i) + ": out " + std::to_string(fa[(size_t)i]);
  }
  return "";
}

cgrt_status Engine::copy(CUdeviceptr dst, CUdeviceptr src, Buf f) {
  if (dst == src) return CGRT_SUCCESS;
  cgrt_status st = cgrt_runtime_synchronize(rt);
  if (st == CGRT_SUCCESS) st = cgrt_memcpy_dtod_async(rt, dst, src, bytes[f], nullptr);
  if (st == CGRT_SUCCESS) st = cgrt_runtime_synchronize(rt);
  return st;
}

}  // namespace synth
