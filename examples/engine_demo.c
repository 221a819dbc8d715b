/* engine_demo: what a host inference engine does with cgrt, end to end.
 *
 *  1. Create a runtime (the GPU when there is a usable one, else the CPU emulation).
 *  2. Warm-up: MLA decode plans for single-token decode and for non-causal k-token draft
 *     blocks reserve their worst-case workspaces and counters; the host's own buffers are
 *     reserved too; then everything is locked (a request past the worst case is refused).
 *  3. Capture: one graph per (mode, padded batch size) of the decode step (MLA attention).
 *  4. Serve: randomized batches (requests joining and leaving, contexts growing, input and
 *     output buffers moving between two copies) by replay with pointer updates; every
 *     step is checked against an eager run of the same kernels on the same inputs.
 *  5. Summary: steps, replays per bucket, fallbacks, rebinds, step times, capture time,
 *     memory reserved.
 *
 * Usage: engine_demo [steps] [--device-patch]
 *   steps           default 3000 on a GPU, 2000 on the emulation
 *   --device-patch  moved buffers are patched on the device (cgrt_graphs_options.device_patch) */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgrt/cgrt_graphs.h"
#include "cgrt/cgrt_memory.h"
#include "cgrt/cgrt_mla.h"
#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    cgrt_status st_ = (call);                                                                        \
    if (st_ != CGRT_SUCCESS) {                                                                       \
      fprintf(stderr, "engine_demo: %s failed: %s: %s\n", #call, cgrt_status_name(st_), cgrt_last_error()); \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

enum { B_Q, B_KV, B_BT, B_SEQ, B_OUT, B_LSE, B_COUNT };
enum { D = 576, DV = 512 };

typedef struct demo {
  cgrt_runtime *rt;
  cgrt_mla_plan *plan[2]; /* [CGRT_GRAPH_DECODE], [CGRT_GRAPH_BLOCK] */
  int max_num_seqs, k, heads, page, max_blocks, max_ctx, max_rows;
  float scale;
} demo;

/* The decode step the graphs capture: MLA attention over the paged latent KV cache. */
static cgrt_status enqueue_step(void *user, CUstream stream, const cgrt_batch_desc *b) {
  demo *d = user;
  cgrt_mla_args a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.q = b->buffers[B_Q];
  a.kv_cache = b->buffers[B_KV];
  a.block_table = b->buffers[B_BT];
  a.seq_lens = b->buffers[B_SEQ];
  a.out = b->buffers[B_OUT];
  a.lse = b->buffers[B_LSE];
  a.num_rows = b->padded_rows;
  a.softmax_scale = d->scale;
  return cgrt_mla_decode(d->plan[b->mode], stream, &a);
}

static void log_to_stderr(void *user, cgrt_log_level level, const char *msg) {
  (void)user;
  static const char *names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "[cgrt %s] %s\n", names[level], msg);
}

static void print_reservation(void *user, int lane, const char *name, size_t buffers, size_t bytes) {
  (void)user;
  printf("  %-6s %-14s %2zu buffer(s) %12zu bytes (%8.2f MiB)\n", lane == CGRT_LANE_TARGET ? "target" : "draft",
         name, buffers, bytes, bytes / 1048576.0);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}
static float frnd(void) { return (float)(rnd() % 20001) / 10000.0f - 1.0f; }

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double pct(double *v, size_t n, double p) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

static cgrt_tensor_desc t1(int64_t n, cgrt_dtype dt) {
  cgrt_tensor_desc x;
  memset(&x, 0, sizeof x);
  x.ndim = 1;
  x.shape[0] = n;
  x.dtype = dt;
  return x;
}

int main(int argc, char **argv) {
  cgrt_set_log_callback(log_to_stderr, NULL, CGRT_LOG_WARN);
  demo d;
  memset(&d, 0, sizeof d);
  CHECK(cgrt_runtime_create(NULL, &d.rt));
  cgrt_runtime_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  CHECK(cgrt_runtime_get_info(d.rt, &info));
  int emulated = info.driver == CGRT_DRIVER_EMULATED;
  printf("cgrt engine_demo\n");
  printf("device: %s (%s driver, CUDA %d.%d, compute capability %d.%d, %d SMs, %.1f GiB)\n", info.device_name,
         cgrt_driver_kind_name(info.driver), info.driver_version / 1000, (info.driver_version % 1000) / 10,
         info.compute_capability_major, info.compute_capability_minor, info.sm_count,
         info.total_memory / 1073741824.0);
  if (emulated) printf("note: no usable GPU here; running on cgrt's CPU emulation of the CUDA driver (small shapes)\n");

  /* Configuration: a DeepSeek-style MLA rank; smaller on the emulation (C reference kernels). */
  d.max_num_seqs = emulated ? 8 : 64;
  d.k = emulated ? 2 : 4;
  d.heads = emulated ? 8 : 16;
  d.page = emulated ? 16 : 64;
  d.max_ctx = emulated ? 64 : 4096;
  d.max_blocks = (d.max_ctx + d.page - 1) / d.page;
  d.max_rows = d.max_num_seqs * d.k;
  d.scale = 1.0f / sqrtf((float)D);
  int steps = emulated ? 2000 : 3000, device_patch = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device-patch")) device_patch = 1;
    else steps = atoi(argv[i]);
  }
  if (steps < 1) steps = 1;
  printf("config: max_num_seqs=%d block_len=%d heads=%d page=%d max_context=%d max_rows=%d steps=%d\n",
         d.max_num_seqs, d.k, d.heads, d.page, d.max_ctx, d.max_rows, steps);

  /* ---- warm-up: every reservation at its worst case, then lock ---- */
  for (int mode = 0; mode < 2; mode++) {
    cgrt_mla_options mo;
    cgrt_mla_options_init(&mo);
    mo.max_num_seqs = d.max_num_seqs;
    mo.block_len = mode == CGRT_GRAPH_DECODE ? 1 : d.k;
    mo.heads = d.heads;
    mo.page_size = d.page;
    mo.max_model_len = d.max_ctx;
    mo.max_blocks_per_seq = d.max_blocks;
    mo.combine = mode == CGRT_GRAPH_DECODE ? CGRT_MLA_COMBINE_COUNTERS : CGRT_MLA_COMBINE_WORKSPACE;
    CHECK(cgrt_mla_plan_create(d.rt, &mo, &d.plan[mode]));
  }
  const size_t qh = (size_t)d.heads, rows = (size_t)d.max_rows;
  const size_t n_pages = (size_t)d.max_num_seqs * (size_t)d.max_blocks;
  const size_t q_bytes = rows * qh * D * 2, out_bytes = rows * qh * DV * 2, lse_bytes = rows * qh * 4;
  const size_t kv_bytes = n_pages * (size_t)d.page * D * 2;
  const size_t bt_bytes = (size_t)d.max_num_seqs * (size_t)d.max_blocks * 4, seq_bytes = (size_t)d.max_num_seqs * 4;
  /* Host buffers: two copies of q and out (the engine moves between them), the eager
   * reference outputs, the KV cache and the metadata. */
  cgrt_tensor_desc io[9] = {t1((int64_t)q_bytes, CGRT_DTYPE_U8),   t1((int64_t)q_bytes, CGRT_DTYPE_U8),
                            t1((int64_t)out_bytes, CGRT_DTYPE_U8), t1((int64_t)out_bytes, CGRT_DTYPE_U8),
                            t1((int64_t)lse_bytes, CGRT_DTYPE_U8), t1((int64_t)out_bytes, CGRT_DTYPE_U8),
                            t1((int64_t)lse_bytes, CGRT_DTYPE_U8), t1((int64_t)bt_bytes, CGRT_DTYPE_U8),
                            t1((int64_t)seq_bytes, CGRT_DTYPE_U8)};
  CUdeviceptr p[9], kv;
  CHECK(cgrt_workspace_request(d.rt, CGRT_LANE_TARGET, "engine.io", io, 9, p));
  cgrt_tensor_desc kvd = t1((int64_t)kv_bytes, CGRT_DTYPE_U8);
  CHECK(cgrt_workspace_request(d.rt, CGRT_LANE_TARGET, "engine.kv", &kvd, 1, &kv));
  CUdeviceptr q_buf[2] = {p[0], p[1]}, out_buf[2] = {p[2], p[3]}, lse_buf = p[4], out_ref = p[5], lse_ref = p[6];
  CUdeviceptr bt = p[7], seq = p[8];
  CHECK(cgrt_workspace_lock(d.rt));

  cgrt_workspace_stats ws;
  memset(&ws, 0, sizeof ws);
  ws.size = sizeof ws;
  CHECK(cgrt_workspace_get_stats(d.rt, &ws));
  printf("warm-up: reserved and locked (%zu reservations, %zu buffers):\n", ws.reservations, ws.buffers);
  CHECK(cgrt_workspace_visit(d.rt, print_reservation, NULL));
  printf("  counters              %12zu bytes\n", ws.counter_bytes);
  printf("  device bytes held: %zu (%.2f MiB, alignment and guards included)\n", ws.bytes_allocated,
         ws.bytes_allocated / 1048576.0);
  for (int mode = 0; mode < 2; mode++) {
    cgrt_mla_plan_info pi;
    memset(&pi, 0, sizeof pi);
    pi.size = sizeof pi;
    CHECK(cgrt_mla_plan_get_info(d.plan[mode], &pi));
    printf("  mla plan %-6s: %s, %d splits, %s path, partials %.2f MiB (fixed next_pow2 split: %.2f MiB)\n",
           mode ? "block" : "decode", pi.split_kernel, pi.splits, pi.fast_path ? "fast" : "generic",
           pi.workspace_bytes / 1048576.0, pi.fixed_split_bytes / 1048576.0);
  }
  {
    cgrt_tensor_desc big = t1((int64_t)q_bytes + 1, CGRT_DTYPE_U8);
    CUdeviceptr x;
    cgrt_status st = cgrt_workspace_request(d.rt, CGRT_LANE_TARGET, "engine.io", &big, 1, &x);
    printf("  lock holds: request past the worst case -> %s (%s)\n", cgrt_status_name(st), cgrt_last_error());
    if (st != CGRT_ERROR_WORKSPACE_LOCKED) return 1;
  }

  /* ---- host data: KV cache, one page range per request slot (shuffled) ---- */
  uint16_t *h = malloc(kv_bytes > q_bytes ? kv_bytes : q_bytes);
  int32_t *h_bt = malloc(bt_bytes), *h_seq = malloc(seq_bytes);
  uint16_t *h_out = malloc(out_bytes), *h_ref = malloc(out_bytes);
  float *h_lse = malloc(lse_bytes), *h_lse_ref = malloc(lse_bytes);
  int *len = calloc((size_t)d.max_num_seqs, sizeof(int)), *slots = malloc(sizeof(int) * (size_t)d.max_num_seqs);
  int32_t *perm = malloc(sizeof(int32_t) * n_pages);
  double *t_step = malloc(sizeof(double) * (size_t)steps), *t_sync = malloc(sizeof(double) * (size_t)steps);
  if (!h || !h_bt || !h_seq || !h_out || !h_ref || !h_lse || !h_lse_ref || !len || !slots || !perm || !t_step || !t_sync) {
    fprintf(stderr, "engine_demo: out of host memory\n");
    return 1;
  }
  for (size_t i = 0; i < kv_bytes / 2; i++) h[i] = to_bf16(frnd());
  CHECK(cgrt_memcpy_htod(d.rt, kv, h, kv_bytes));
  for (size_t i = 0; i < n_pages; i++) perm[i] = (int32_t)i;
  for (size_t i = n_pages - 1; i > 0; i--) {
    size_t j = rnd() % (i + 1);
    int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }

  /* ---- capture ---- */
  cgrt_buffer_desc bufs[B_COUNT] = {
      {"q", q_buf[0], q_bytes, CGRT_BUFFER_IN},         {"kv_cache", kv, kv_bytes, CGRT_BUFFER_IN},
      {"block_table", bt, bt_bytes, CGRT_BUFFER_IN},     {"seq_lens", seq, seq_bytes, CGRT_BUFFER_IN},
      {"out", out_buf[0], out_bytes, CGRT_BUFFER_OUT},   {"lse", lse_buf, lse_bytes, CGRT_BUFFER_OUT}};
  cgrt_graphs_options go;
  cgrt_graphs_options_init(&go);
  go.max_num_seqs = d.max_num_seqs;
  go.max_model_len = d.max_ctx;
  go.num_heads = d.heads;
  go.block_len = d.k;
  go.enqueue = enqueue_step;
  go.user = &d;
  go.buffers = bufs;
  go.num_buffers = B_COUNT;
  go.max_capture_rows = d.max_rows;
  go.device_patch = device_patch;
  /* Warm-up and capture read seq_lens: start from an all-padding batch. */
  memset(h_seq, 0, seq_bytes);
  memset(h_bt, 0, bt_bytes);
  CHECK(cgrt_memcpy_htod(d.rt, seq, h_seq, seq_bytes));
  CHECK(cgrt_memcpy_htod(d.rt, bt, h_bt, bt_bytes));
  cgrt_graphs *set = NULL;
  CHECK(cgrt_graphs_create(d.rt, &go, &set));
  cgrt_set_log_callback(log_to_stderr, NULL, emulated ? CGRT_LOG_WARN : CGRT_LOG_INFO);
  CHECK(cgrt_graphs_capture(set));
  cgrt_set_log_callback(log_to_stderr, NULL, CGRT_LOG_WARN);
  cgrt_graphs_stats gs;
  memset(&gs, 0, sizeof gs);
  gs.size = sizeof gs;
  CHECK(cgrt_graphs_get_stats(set, &gs));
  printf("capture: %zu graphs (decode + block buckets), %zu nodes, %.3f s capture+instantiate+upload, %.2f MiB graph "
         "memory\n",
         gs.buckets, gs.nodes, gs.capture_seconds, gs.graph_memory_bytes / 1048576.0);
  CUstream stream = cgrt_graphs_stream(set);

  /* ---- serve ---- */
  int cur_q = 0, cur_out = 0, active = 0;
  long mismatched_steps = 0, padding_violations = 0;
  double max_diff = 0;
  for (int s = 0; s < steps; s++) {
    cgrt_graph_mode mode = (rnd() % 10) < 7 ? CGRT_GRAPH_DECODE : CGRT_GRAPH_BLOCK;
    int k = mode == CGRT_GRAPH_DECODE ? 1 : d.k;
    /* Requests leave (finished) and join (new prompts); contexts grow. */
    for (int r = 0; r < d.max_num_seqs; r++) {
      if (len[r] > 0 && (rnd() % 16 == 0 || len[r] + k > d.max_ctx)) len[r] = 0, active--;
      else if (len[r] > 0) len[r] += k;
      else if (rnd() % 4 == 0) len[r] = 1 + (int)(rnd() % (uint32_t)(d.max_ctx - d.k)), active++;
    }
    int n = 0;
    for (int r = 0; r < d.max_num_seqs; r++)
      if (len[r] > 0) slots[n++] = r;
    if (n == 0) {
      len[0] = 1 + (int)(rnd() % 8), slots[n++] = 0, active++;
    }
    /* Metadata of this batch: request i is slot slots[i]; padding entries are 0. */
    memset(h_seq, 0, seq_bytes);
    for (int i = 0; i < n; i++) {
      h_seq[i] = len[slots[i]];
      for (int b = 0; b < d.max_blocks; b++) h_bt[(size_t)i * d.max_blocks + b] = perm[(size_t)slots[i] * d.max_blocks + b];
    }
    CHECK(cgrt_memcpy_htod(d.rt, seq, h_seq, seq_bytes));
    CHECK(cgrt_memcpy_htod(d.rt, bt, h_bt, (size_t)n * d.max_blocks * 4));
    /* Inputs move: every few steps the engine writes q into the other copy, and output
     * goes to the other copy. */
    cgrt_binding bind[2];
    size_t nb = 0;
    if (s % 5 == 4) cur_q ^= 1, bind[nb++] = (cgrt_binding){B_Q, q_buf[cur_q], 0};
    if (s % 7 == 6) cur_out ^= 1, bind[nb++] = (cgrt_binding){B_OUT, out_buf[cur_out], 0};
    int rows_now = n * k;
    for (size_t i = 0; i < (size_t)rows_now * qh * D; i++) h[i] = to_bf16(frnd());
    CHECK(cgrt_memcpy_htod(d.rt, q_buf[cur_q], h, (size_t)rows_now * qh * D * 2));
    int bucket = cgrt_graphs_bucket_rows(set, mode, n);

    double t0 = now_us();
    CHECK(cgrt_graphs_step(set, mode, n, bind, nb));
    double t1 = now_us();
    CHECK(cgrt_stream_synchronize(d.rt, stream));
    double t2 = now_us();
    t_step[s] = t1 - t0;
    t_sync[s] = t2 - t0;

    /* Eager reference: the same kernels on the same inputs, same padded row count. */
    cgrt_mla_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.q = q_buf[cur_q], a.kv_cache = kv, a.block_table = bt, a.seq_lens = seq;
    a.out = out_ref, a.lse = lse_ref;
    a.num_rows = bucket > 0 ? bucket : rows_now;
    a.softmax_scale = d.scale;
    CHECK(cgrt_mla_decode(d.plan[mode], stream, &a));
    CHECK(cgrt_stream_synchronize(d.rt, stream));
    size_t cmp_rows = (size_t)a.num_rows;
    CHECK(cgrt_memcpy_dtoh(d.rt, h_out, out_buf[cur_out], cmp_rows * qh * DV * 2));
    CHECK(cgrt_memcpy_dtoh(d.rt, h_ref, out_ref, cmp_rows * qh * DV * 2));
    CHECK(cgrt_memcpy_dtoh(d.rt, h_lse, lse_buf, cmp_rows * qh * 4));
    CHECK(cgrt_memcpy_dtoh(d.rt, h_lse_ref, lse_ref, cmp_rows * qh * 4));
    int bad = 0;
    for (size_t i = 0; i < (size_t)rows_now * qh * DV; i++) {
      double diff = fabs((double)from_bf16(h_out[i]) - (double)from_bf16(h_ref[i]));
      if (diff > max_diff) max_diff = diff;
      if (h_out[i] != h_ref[i]) bad = 1;
    }
    for (size_t i = 0; i < (size_t)rows_now * qh; i++)
      if (!(h_lse[i] == h_lse_ref[i])) bad = 1;
    for (size_t i = (size_t)rows_now * qh * DV; i < cmp_rows * qh * DV; i++)
      if (h_out[i] != 0) padding_violations++;
    for (size_t i = (size_t)rows_now * qh; i < cmp_rows * qh; i++)
      if (!(isinf(h_lse[i]) && h_lse[i] < 0)) padding_violations++;
    mismatched_steps += bad;
    if ((s + 1) % (steps / 5 > 0 ? steps / 5 : 1) == 0)
      fprintf(stderr, "engine_demo: %d/%d steps served (%d requests active)\n", s + 1, steps, n);
  }
  CHECK(cgrt_counters_verify(d.rt));
  CHECK(cgrt_workspace_verify(d.rt));

  memset(&gs, 0, sizeof gs); /* the served steps only (before the steady-state steps) */
  gs.size = sizeof gs;
  CHECK(cgrt_graphs_get_stats(set, &gs));

  /* Steady state, for comparison with the served steps above (whose host time follows
   * synchronous input copies and an eager check): the same decode batch replayed
   * back to back, (a) with a synchronize after each step, (b) queued without waiting. */
  int steady_n = d.max_num_seqs / 2 > 0 ? d.max_num_seqs / 2 : 1;
  const int steady = steps < 400 ? steps : 400;
  double *t_a = malloc((size_t)steady * sizeof(double)), *t_b = malloc((size_t)steady * sizeof(double));
  if (!t_a || !t_b) {
    fprintf(stderr, "engine_demo: out of host memory\n");
    return 1;
  }
  for (int i = 0; i < steady; i++) {
    double t0 = now_us();
    CHECK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, steady_n, NULL, 0));
    t_a[i] = now_us() - t0;
    CHECK(cgrt_stream_synchronize(d.rt, stream));
  }
  for (int i = 0; i < steady; i++) {
    double t0 = now_us();
    CHECK(cgrt_graphs_step(set, CGRT_GRAPH_DECODE, steady_n, NULL, 0));
    t_b[i] = now_us() - t0;
  }
  CHECK(cgrt_stream_synchronize(d.rt, stream));
  CHECK(cgrt_counters_verify(d.rt));

  /* ---- summary ---- */
  printf("served %" PRIu64 " steps: %" PRIu64 " replays, %" PRIu64 " eager fallbacks, %" PRIu64
         " steps with rebinds (%" PRIu64 " node updates by the host, %" PRIu64 " kernel nodes patched on the device)\n",
         gs.steps, gs.replays, gs.eager_fallbacks, gs.rebinds, gs.nodes_patched, gs.device_nodes_patched);
  printf("replays per bucket:");
  for (size_t i = 0; i < cgrt_graphs_bucket_count(set); i++) {
    cgrt_bucket_info bi;
    memset(&bi, 0, sizeof bi);
    bi.size = sizeof bi;
    CHECK(cgrt_graphs_get_bucket(set, i, &bi));
    if (bi.replays) printf(" %s%d:%" PRIu64, bi.mode == CGRT_GRAPH_DECODE ? "d" : "b", bi.rows, bi.replays);
  }
  printf("\n");
  printf("step host time (cgrt_graphs_step): p50 %.1f us, p99 %.1f us; step+sync: p50 %.1f us, p99 %.1f us\n",
         pct(t_step, (size_t)steps, 0.5), pct(t_step, (size_t)steps, 0.99), pct(t_sync, (size_t)steps, 0.5),
         pct(t_sync, (size_t)steps, 0.99));
  printf("steady state, %d decode requests: step host time p50 %.1f us (synchronized after each), %.1f us "
         "(queued back to back)\n", steady_n, pct(t_a, (size_t)steady, 0.5), pct(t_b, (size_t)steady, 0.5));
  printf("capture: %.3f s for %zu graphs; memory reserved: %.2f MiB workspaces+counters, %.2f MiB graphs\n",
         gs.capture_seconds, gs.buckets, ws.bytes_allocated / 1048576.0, gs.graph_memory_bytes / 1048576.0);
  printf("checked against eager: %ld of %d steps differ (max |diff| %.3g), %ld padding values not inert; counters and "
         "guards verified\n",
         mismatched_steps, steps, max_diff, padding_violations);
  int ok = mismatched_steps == 0 && padding_violations == 0;
  printf("engine_demo: %s\n", ok ? "OK" : "MISMATCH");

  CHECK(cgrt_graphs_destroy(set));
  cgrt_mla_plan_destroy(d.plan[0]);
  cgrt_mla_plan_destroy(d.plan[1]);
  CHECK(cgrt_runtime_destroy(d.rt));
  free(h), free(h_bt), free(h_seq), free(h_out), free(h_ref), free(h_lse), free(h_lse_ref);
  free(len), free(slots), free(perm), free(t_step), free(t_sync), free(t_a), free(t_b);
  return ok ? 0 : 1;
}
