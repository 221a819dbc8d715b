// Standalone GPU harness for the MLA decode kernels (no cgrt runtime needed): checks
// every kernel against its C reference (kernels/mla_decode_ref.c, fp32) and times the
// benchmark shapes. Build (here, no GPU needed):
//   nvcc -std=c++17 -O2 -I. -gencode=arch=compute_90a,code=sm_90a \
//     bench/mla_decode/gpu_harness.cu kernels/mla_decode_ref.c kernels/registry.c \
//     kernels/probe_ref.c -o .gpu_mla/mla_harness
// Run: mla_harness check | bench [json_path] | quick
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/mla_decode.cu"
#include "kernels/registry.h"

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static int g_sm = 132;

__global__ void fill_bf16(bf16 *p, size_t n, uint32_t seed, float amp) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed ^ (uint32_t)(i >> 32) * 40503u;
    x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
    p[i] = __float2bfloat16(((x & 0xffffff) / 16777216.0f * 2.f - 1.f) * amp);
  }
}

struct Case {
  std::string name;
  int reqs, bl, qh, ps;
  std::vector<int> lens; // per request
  int counters;          // combine strategy: 0 workspace, 1 counters
  long long page_base;   // first page index used (64-bit addressing test)
  int min_tiles = 0;     // 0: default of the strategy
};

static float bf2f(uint16_t v) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }

struct Dev {
  bf16 *q = 0, *kv = 0, *out = 0;
  int *bt = 0, *lens = 0, *meta = 0;
  float *lse = 0, *po = 0, *pl = 0;
  unsigned *cnt = 0;
};

struct Launch {
  cgrt__mla_shape s;
  int rows, qh, mbps, ps, bl, cap;
  float scale;
  int counters;
  int min_tiles;
};

static void launch(const Launch &L, const Dev &d, const int *bt, cudaStream_t st) {
  cgrt_mla_schedule<<<1, 1024, 0, st>>>(d.lens, d.meta, L.rows, L.bl, L.cap, L.s.parts, L.min_tiles);
  dim3 grid(L.s.groups, L.s.parts);
  unsigned *cnt = L.counters ? d.cnt : nullptr;
  if (L.s.m64)
    cgrt_mla_split_m64<<<grid, L.s.threads, L.s.smem, st>>>(d.q, d.kv, bt, d.meta, d.out, d.lse, d.po, d.pl, cnt,
                                                          L.rows, L.qh, L.s.hg, L.s.parts, L.mbps, L.ps, L.bl, L.scale,
                                                          nullptr, L.cap, L.min_tiles, 0);
  else
    cgrt_mla_split_m16<<<grid, L.s.threads, L.s.smem, st>>>(d.q, d.kv, bt, d.meta, d.out, d.lse, d.po, d.pl, cnt,
                                                          L.rows, L.qh, L.s.hg, L.s.parts, L.mbps, L.ps, L.bl, L.scale,
                                                          nullptr, L.cap, L.min_tiles, 0);
  if (!L.counters) cgrt_mla_combine<<<dim3(L.qh, L.rows, L.rows * L.qh <= 256 ? 4 : (L.rows * L.qh <= 1024 ? 2 : 1)), 256, 0, st>>>(d.meta, d.po, d.pl, d.out, d.lse, L.rows, L.qh);
}

// Packs parameters as the driver does and runs the C reference of `name`.
template <typename... A>
static void run_ref(const char *name, unsigned gx, unsigned gy, A... args) {
  const cgrt__ref_kernel *k = cgrt__ref_kernel_find(name);
  if (!k) { fprintf(stderr, "no ref %s\n", name); exit(1); }
  size_t offs[CGRT__REF_MAX_PARAMS];
  size_t total = cgrt__ref_param_layout(k, offs);
  std::vector<unsigned char> buf(total + 16);
  size_t i = 0;
  auto put = [&](auto v) { memcpy(buf.data() + offs[i], &v, sizeof v); i++; };
  (put(args), ...);
  cgrt__ref_launch l = {{gx, gy, 1}, {128, 1, 1}, 0};
  k->fn(&l, buf.data(), offs);
}

static void setup_attrs() {
  CK(cudaFuncSetAttribute(cgrt_mla_split_m16, cudaFuncAttributeMaxDynamicSharedMemorySize, CGRT_MLA_M16_SMEM));
  CK(cudaFuncSetAttribute(cgrt_mla_split_m64, cudaFuncAttributeMaxDynamicSharedMemorySize, CGRT_MLA_M64_SMEM));
}

static bool check_case(const Case &c, std::mt19937 &rng) {
  Launch L;
  cgrt__mla_choose(c.qh, g_sm, &L.s);
  L.rows = c.reqs * c.bl; L.qh = c.qh; L.ps = c.ps; L.bl = c.bl; L.counters = c.counters;
  L.min_tiles = c.min_tiles ? c.min_tiles : (c.counters ? CGRT_MLA_MIN_TILES_COUNTERS : CGRT_MLA_MIN_TILES_WORKSPACE);
  int maxlen = 1;
  for (int x : c.lens) maxlen = std::max(maxlen, x);
  L.mbps = (maxlen + c.ps - 1) / c.ps;
  L.cap = L.mbps * c.ps;
  L.scale = 0.1352f;
  const long long used_pages = (long long)c.reqs * L.mbps;
  const long long num_pages = c.page_base + used_pages;
  const size_t kv_elems = (size_t)num_pages * c.ps * CGRT_MLA_D;
  const size_t q_elems = (size_t)L.rows * c.qh * CGRT_MLA_D;
  const size_t slots = (size_t)L.rows + L.s.parts;
  Dev d;
  CK(cudaMalloc(&d.kv, kv_elems * 2));
  CK(cudaMalloc(&d.q, q_elems * 2));
  CK(cudaMalloc(&d.out, (size_t)L.rows * c.qh * 512 * 2));
  CK(cudaMalloc(&d.lse, (size_t)L.rows * c.qh * 4));
  CK(cudaMalloc(&d.bt, (size_t)c.reqs * L.mbps * 4));
  CK(cudaMalloc(&d.lens, (size_t)c.reqs * 4));
  CK(cudaMalloc(&d.meta, (size_t)(2 * L.rows + 2) * 4));
  CK(cudaMalloc(&d.po, slots * c.qh * 512 * 4));
  CK(cudaMalloc(&d.pl, slots * c.qh * 4));
  CK(cudaMalloc(&d.cnt, (size_t)L.rows * c.qh * 4));
  CK(cudaMemset(d.cnt, 0, (size_t)L.rows * c.qh * 4));
  uint32_t seed = rng();
  // only the used pages need data; fill them (contiguous range at page_base)
  fill_bf16<<<1024, 256>>>(d.kv + (size_t)c.page_base * c.ps * CGRT_MLA_D, (size_t)used_pages * c.ps * CGRT_MLA_D, seed, 1.f);
  fill_bf16<<<1024, 256>>>(d.q, q_elems, seed ^ 0x9e3779b9u, 1.f);
  CK(cudaGetLastError());
  // block table: a random permutation of the used pages
  std::vector<int> perm(used_pages);
  for (long long i = 0; i < used_pages; i++) perm[i] = (int)(c.page_base + i);
  std::shuffle(perm.begin(), perm.end(), rng);
  CK(cudaMemcpy(d.bt, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.lens, c.lens.data(), c.reqs * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(d.out, 0xff, (size_t)L.rows * c.qh * 512 * 2)); // poison (NaN)
  CK(cudaMemset(d.lse, 0xff, (size_t)L.rows * c.qh * 4));
  bool ok = true;
  double worst = 0;
  long bad = 0;
  for (int rep = 0; rep < 2; rep++) { // twice: counters must be back at 0 for the 2nd
    launch(L, d, d.bt, 0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  }
  // host copies (used pages only, remapped to 0..used_pages)
  std::vector<uint16_t> kvh((size_t)used_pages * c.ps * CGRT_MLA_D), qhst(q_elems), outg((size_t)L.rows * c.qh * 512);
  std::vector<float> lseg((size_t)L.rows * c.qh);
  std::vector<unsigned> cnth((size_t)L.rows * c.qh);
  CK(cudaMemcpy(kvh.data(), d.kv + (size_t)c.page_base * c.ps * CGRT_MLA_D, kvh.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(qhst.data(), d.q, q_elems * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(outg.data(), d.out, outg.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lseg.data(), d.lse, lseg.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(cnth.data(), d.cnt, cnth.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<int> bth(perm);
  for (auto &x : bth) x -= (int)c.page_base;
  std::vector<int> meta(2 * L.rows + 2);
  std::vector<uint16_t> outr(outg.size(), 0xffff);
  std::vector<float> lser(lseg.size(), NAN);
  std::vector<float> por(slots * c.qh * 512), plr(slots * c.qh);
  std::vector<unsigned> cntr(cnth.size(), 0);
  run_ref("cgrt_mla_schedule", 1, 1, (uint64_t)(uintptr_t)c.lens.data(), (uint64_t)(uintptr_t)meta.data(), L.rows, L.bl, L.cap, L.s.parts, L.min_tiles);
  // compare meta with device
  std::vector<int> metag(meta.size());
  CK(cudaMemcpy(metag.data(), d.meta, metag.size() * 4, cudaMemcpyDeviceToHost));
  if (metag != meta) { printf("  meta mismatch\n"); ok = false; }
  run_ref(L.s.m64 ? "cgrt_mla_split_m64" : "cgrt_mla_split_m16", L.s.groups, L.s.parts,
          (uint64_t)(uintptr_t)qhst.data(), (uint64_t)(uintptr_t)kvh.data(), (uint64_t)(uintptr_t)bth.data(),
          (uint64_t)(uintptr_t)meta.data(), (uint64_t)(uintptr_t)outr.data(), (uint64_t)(uintptr_t)lser.data(),
          (uint64_t)(uintptr_t)por.data(), (uint64_t)(uintptr_t)plr.data(),
          (uint64_t)(uintptr_t)(c.counters ? cntr.data() : nullptr), L.rows, L.qh, L.s.hg, L.s.parts, L.mbps, L.ps, L.bl, L.scale,
                                                          nullptr, L.cap, L.min_tiles, 0);
  if (!c.counters)
    run_ref("cgrt_mla_combine", c.qh, L.rows, (uint64_t)(uintptr_t)meta.data(), (uint64_t)(uintptr_t)por.data(),
            (uint64_t)(uintptr_t)plr.data(), (uint64_t)(uintptr_t)outr.data(), (uint64_t)(uintptr_t)lser.data(), L.rows, L.qh);
  // independent naive fp32 attention (full context per row) against the C reference
  double nnum = 0, nden = 0;
  {
    std::vector<float> sc, acc(512);
    for (int r = 0; r < L.rows; r++) {
      int len = meta[r];
      if (!len) continue;
      const int *btr = bth.data() + (size_t)(r / c.bl) * L.mbps;
      sc.resize(len);
      for (int h = 0; h < c.qh; h++) {
        const uint16_t *qr = qhst.data() + ((size_t)r * c.qh + h) * 576;
        float mx = -INFINITY;
        for (int t = 0; t < len; t++) {
          const uint16_t *k = kvh.data() + ((size_t)btr[t / c.ps] * c.ps + t % c.ps) * 576;
          float s = 0;
          for (int i = 0; i < 576; i++) s += bf2f(qr[i]) * bf2f(k[i]);
          sc[t] = s * L.scale; mx = std::max(mx, sc[t]);
        }
        double sum = 0; std::fill(acc.begin(), acc.end(), 0.f);
        for (int t = 0; t < len; t++) {
          const uint16_t *k = kvh.data() + ((size_t)btr[t / c.ps] * c.ps + t % c.ps) * 576;
          float w = expf(sc[t] - mx); sum += w;
          for (int i = 0; i < 512; i++) acc[i] += w * bf2f(k[i]);
        }
        for (int i = 0; i < 512; i++) {
          float rf = acc[i] / sum, cr = bf2f(outr[((size_t)r * c.qh + h) * 512 + i]);
          nnum += (double)(rf - cr) * (rf - cr); nden += (double)rf * rf;
        }
        float l2 = mx + logf(sum);
        if (fabsf(l2 - lser[(size_t)r * c.qh + h]) > 1e-2) { bad++; }
      }
    }
  }
  double nrel = nden > 0 ? sqrt(nnum / nden) : 0;
  if (nrel > 1e-2) ok = false;
  double num = 0, den = 0, maxlse = 0;
  for (int r = 0; r < L.rows; r++) {
    const bool pad = meta[r] == 0;
    double rn = 0, rd = 0;
    for (int h = 0; h < c.qh; h++) {
      for (int k = 0; k < 512; k++) {
        size_t i = ((size_t)r * c.qh + h) * 512 + k;
        float g = bf2f(outg[i]), rf = bf2f(outr[i]);
        if (!std::isfinite(g)) { bad++; continue; }
        if (pad && outg[i] != 0) bad++;
        rn += (g - rf) * (g - rf); rd += (double)rf * rf;
      }
      size_t j = (size_t)r * c.qh + h;
      if (pad) { if (!(std::isinf(lseg[j]) && lseg[j] < 0)) bad++; }
      else { if (!std::isfinite(lseg[j])) bad++; else maxlse = std::max(maxlse, (double)fabsf(lseg[j] - lser[j])); }
    }
    num += rn; den += rd;
    if (rd > 0) worst = std::max(worst, sqrt(rn / rd));
  }
  long dirty = 0;
  for (unsigned x : cnth) dirty += x != 0;
  double rel = den > 0 ? sqrt(num / den) : 0;
  if (bad || dirty || rel > 1e-2 || worst > 2e-2 || maxlse > 2e-2) ok = false;
  printf("%-4s %-34s rows=%4d qh=%3d ps=%2d %s path=%s hg=%2d G=%d P=%3d ref_vs_naive=%.1e rel=%.2e worst_row=%.2e dlse=%.1e bad=%ld dirty=%ld\n",
         ok ? "OK" : "FAIL", c.name.c_str(), L.rows, c.qh, c.ps, c.counters ? "counters " : "workspace",
         L.s.fast ? "fast" : "generic", L.s.hg, L.s.groups, L.s.parts, nrel, rel, worst, maxlse, bad, dirty);
  cudaFree(d.kv); cudaFree(d.q); cudaFree(d.out); cudaFree(d.lse); cudaFree(d.bt); cudaFree(d.lens);
  cudaFree(d.meta); cudaFree(d.po); cudaFree(d.pl); cudaFree(d.cnt);
  return ok;
}

static std::vector<int> mixed_lens(int n, std::mt19937 &rng, int maxlen, bool pads) {
  std::vector<int> v(n);
  for (int i = 0; i < n; i++) {
    int k = rng() % 6;
    v[i] = k == 0 ? 1 + rng() % 40 : k == 1 ? 1 + rng() % 600 : k == 2 ? maxlen : 1 + rng() % maxlen;
    if (pads && rng() % 5 == 0) v[i] = 0;
  }
  if (n > 1) v[1] = maxlen;
  return v;
}

static int check_all(bool quick, bool tiny) {
  std::mt19937 rng(1234);
  std::vector<Case> cs;
  if (tiny) {
    for (int comb = 0; comb < 2; comb++) {
      cs.push_back({"tiny h16", 4, 1, 16, 16, {1, 70, 0, 300}, comb, 0});
      cs.push_back({"tiny h128", 3, 1, 128, 64, {200, 0, 33}, comb, 0});
      cs.push_back({"tiny h24 k2", 2, 2, 24, 32, {90, 5}, comb, 0});
    }
    int fails = 0;
    for (auto &c : cs) fails += !check_case(c, rng);
    printf("check: %d cases, %d failed\n", (int)cs.size(), fails);
    return fails;
  }
  int heads[] = {1, 8, 16, 24, 32, 48, 64, 96, 128};
  int pss[] = {16, 32, 64};
  for (int hi = 0; hi < 9; hi++)
    for (int comb = 0; comb < 2; comb++) {
      int ps = pss[(hi + comb) % 3];
      cs.push_back({"heads mixed", 6, 1, heads[hi], ps, mixed_lens(6, rng, 3000, true), comb, 0});
    }
  for (int ps : pss)
    for (int comb = 0; comb < 2; comb++) cs.push_back({"page sizes", 5, 1, 16, ps, {1, 33, 0, 700, 64}, comb, 0});
  for (int comb = 0; comb < 2; comb++) {
    cs.push_back({"mixed 1..32768 h16", 12, 1, 16, 64, {1, 32768, 5, 0, 17000, 33, 1024, 2, 32767, 0, 9000, 100}, comb, 0});
    cs.push_back({"mixed 1..32768 h128", 6, 1, 128, 32, {32768, 1, 0, 4095, 12000, 31}, comb, 0});
    cs.push_back({"block rows k=3 h16", 5, 3, 16, 16, {100, 0, 5000, 1, 257}, comb, 0});
    cs.push_back({"block rows k=2 h64 dcp", 4, 2, 64, 64, {3000, 77, 0, 640}, comb, 0});
    cs.push_back({"all padding", 4, 1, 16, 64, {0, 0, 0, 0}, comb, 0});
    cs.push_back({"single row long", 1, 1, 16, 64, {8192}, comb, 0});
    cs.push_back({"many rows", 300, 1, 16, 16, mixed_lens(300, rng, 2048, true), comb, 0});
    // 64-bit: pages beyond 2^31 elements (2^31 / (64*576) = 58254 pages)
    if (!quick) cs.push_back({"64-bit offsets h16", 4, 1, 16, 64, {4000, 1, 0, 2500}, comb, 60000});
  }
  int fails = 0;
  for (auto &c : cs) fails += !check_case(c, rng);
  printf("check: %d cases, %d failed\n", (int)cs.size(), fails);
  return fails;
}

// ---------------- timing ----------------
static double time_copy() {
  size_t n = 2ull << 30;
  void *a, *b;
  CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 3; i++) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
  std::vector<float> ts;
  for (int i = 0; i < 10; i++) {
    cudaEventRecord(e0); cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice); cudaEventRecord(e1);
    cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  cudaFree(a); cudaFree(b);
  return 2.0 * n / (ts[ts.size() / 2] * 1e-3) / 1e12;
}

struct BenchRes { double us_eager, us_graph, tbps, tflops; };

static BenchRes bench_shape(int batch, int qh, int ctx, int counters, int ps = 64, int min_tiles = 0) {
  Launch L;
  cgrt__mla_choose(qh, g_sm, &L.s);
  L.rows = batch; L.qh = qh; L.ps = ps; L.bl = 1; L.counters = counters;
  L.min_tiles = min_tiles ? min_tiles : (counters ? CGRT_MLA_MIN_TILES_COUNTERS : CGRT_MLA_MIN_TILES_WORKSPACE);
  L.mbps = (ctx + ps - 1) / ps; L.cap = L.mbps * ps; L.scale = 0.1352f;
  const double kv_bytes = (double)batch * ctx * 576 * 2;
  int copies = (int)std::max(1.0, std::ceil(400e6 / kv_bytes));
  const long long pages_per = (long long)batch * L.mbps;
  const long long num_pages = pages_per * copies;
  Dev d;
  size_t slots = (size_t)L.rows + L.s.parts;
  CK(cudaMalloc(&d.kv, (size_t)num_pages * ps * 576 * 2));
  CK(cudaMalloc(&d.q, (size_t)batch * qh * 576 * 2));
  CK(cudaMalloc(&d.out, (size_t)batch * qh * 512 * 2));
  CK(cudaMalloc(&d.lse, (size_t)batch * qh * 4));
  CK(cudaMalloc(&d.bt, (size_t)num_pages * 4));
  CK(cudaMalloc(&d.lens, (size_t)batch * 4));
  CK(cudaMalloc(&d.meta, (size_t)(2 * batch + 2) * 4));
  CK(cudaMalloc(&d.po, slots * qh * 512 * 4));
  CK(cudaMalloc(&d.pl, slots * qh * 4));
  CK(cudaMalloc(&d.cnt, (size_t)batch * qh * 4));
  CK(cudaMemset(d.cnt, 0, (size_t)batch * qh * 4));
  fill_bf16<<<2048, 256>>>(d.kv, (size_t)num_pages * ps * 576, 7, 1.f);
  fill_bf16<<<256, 256>>>(d.q, (size_t)batch * qh * 576, 9, 1.f);
  std::vector<int> bt(num_pages);
  for (long long i = 0; i < num_pages; i++) bt[i] = (int)i;
  CK(cudaMemcpy(d.bt, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int> lens(batch, ctx);
  CK(cudaMemcpy(d.lens, lens.data(), batch * 4, cudaMemcpyHostToDevice));
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 5; i++) launch(L, d, d.bt + (i % copies) * pages_per, st);
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  const int reps = 30;
  std::vector<float> ts;
  for (int i = 0; i < reps; i++) {
    cudaEventRecord(e0, st);
    launch(L, d, d.bt + (i % copies) * pages_per, st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  double eager = ts[reps / 2] * 1e3;
  // graphs: one per KV copy, replayed in turn
  std::vector<cudaGraphExec_t> ex(copies);
  for (int c = 0; c < copies; c++) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    launch(L, d, d.bt + c * pages_per, st);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ex[c], g, 0));
    cudaGraphDestroy(g);
  }
  for (int i = 0; i < 3; i++) cudaGraphLaunch(ex[i % copies], st);
  ts.clear();
  for (int i = 0; i < reps; i++) {
    cudaEventRecord(e0, st);
    cudaGraphLaunch(ex[i % copies], st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  double graph = ts[reps / 2] * 1e3;
  CK(cudaGetLastError());
  std::vector<unsigned> cnt((size_t)batch * qh);
  CK(cudaMemcpy(cnt.data(), d.cnt, cnt.size() * 4, cudaMemcpyDeviceToHost));
  for (unsigned x : cnt) if (x) { printf("COUNTERS DIRTY\n"); exit(1); }
  for (auto e : ex) cudaGraphExecDestroy(e);
  cudaStreamDestroy(st);
  cudaFree(d.kv); cudaFree(d.q); cudaFree(d.out); cudaFree(d.lse); cudaFree(d.bt); cudaFree(d.lens);
  cudaFree(d.meta); cudaFree(d.po); cudaFree(d.pl); cudaFree(d.cnt);
  double best = std::min(eager, graph);
  (void)best;
  BenchRes r;
  r.us_eager = eager; r.us_graph = graph;
  r.tbps = kv_bytes / (graph * 1e-6) / 1e12;
  r.tflops = 2.0 * batch * qh * (double)ctx * (576 + 512) / (graph * 1e-6) / 1e12;
  return r;
}

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "check";
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  g_sm = prop.multiProcessorCount;
  setup_attrs();
  if (mode == "check" || mode == "quick" || mode == "tiny") return check_all(mode == "quick", mode == "tiny") ? 1 : 0;
  if (mode == "sweep") {
    int sh[][3] = {{1, 16, 8192}, {32, 16, 8192}, {128, 16, 8192}, {32, 128, 8192}, {128, 128, 4096}};
    for (auto &x : sh)
      for (int comb = 0; comb < 2; comb++)
        for (int mt : {1, 2, 4, 8, 16, 32}) {
          BenchRes r = bench_shape(x[0], x[1], x[2], comb, 64, mt);
          printf("sweep batch=%3d heads=%3d ctx=%5d %-9s min_tiles=%2d eager=%8.2f graph=%8.2f us %.3f TB/s %.1f TFLOP/s\n",
                 x[0], x[1], x[2], comb ? "counters" : "workspace", mt, r.us_eager, r.us_graph, r.tbps, r.tflops);
        }
    return 0;
  }
  int shapes[][3] = {{1, 16, 8192}, {32, 16, 8192}, {128, 16, 8192}, {64, 16, 32768},
                     {64, 32, 16384}, {32, 128, 8192}, {128, 128, 4096}, {128, 16, 32768}};
  double copy = time_copy();
  printf("d2d copy: %.3f TB/s   gpu=%s sm=%d\n", copy, prop.name, g_sm);
  FILE *jf = argc > 2 ? fopen(argv[2], "w") : nullptr;
  std::string js = "{\"gpu\":\"" + std::string(prop.name) + "\",\"copy_tbps\":" + std::to_string(copy) + ",\"results\":[";
  bool first = true;
  for (auto &s : shapes)
    for (int comb = 0; comb < 2; comb++) {
      BenchRes r = bench_shape(s[0], s[1], s[2], comb);
      printf("batch=%3d heads=%3d ctx=%5d %-9s eager=%8.2f us graph=%8.2f us  %.3f TB/s (%.0f%% of copy)  %.1f TFLOP/s\n",
             s[0], s[1], s[2], comb ? "counters" : "workspace", r.us_eager, r.us_graph, r.tbps, 100 * r.tbps / copy, r.tflops);
      char b[512];
      snprintf(b, sizeof b, "%s{\"batch\":%d,\"heads\":%d,\"context\":%d,\"combine\":\"%s\",\"us_eager\":%.3f,\"us_graph\":%.3f,\"kv_tbps\":%.4f,\"tflops\":%.2f}",
               first ? "" : ",", s[0], s[1], s[2], comb ? "counters" : "workspace", r.us_eager, r.us_graph, r.tbps, r.tflops);
      js += b; first = false;
    }
  js += "]}";
  if (jf) { fprintf(jf, "%s\n", js.c_str()); fclose(jf); }
  return 0;
}
