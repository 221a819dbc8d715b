/* engine_demo: what a host inference engine does with cgrt at start-up.
 *
 * 1. Create a runtime (the GPU if there is a usable one, else the CPU emulation).
 * 2. Warm-up: reserve every scratch buffer of the decode step at its worst case
 *    (max batch x speculative block rows, heads x DCP ranks) and the counter buffer of
 *    the multi-CTA kernels, then lock.
 * 3. Show that the lock holds: a request past the worst case is refused with a message.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_workspace.h"

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cgrt_status st_ = (call);                                                                    \
    if (st_ != CGRT_SUCCESS) {                                                                   \
      fprintf(stderr, "engine_demo: %s failed: %s: %s\n", #call, cgrt_status_name(st_), cgrt_last_error()); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static void log_to_stderr(void *user, cgrt_log_level level, const char *msg) {
  (void)user;
  static const char *names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "[cgrt %s] %s\n", names[level], msg);
}

static void print_reservation(void *user, int lane, const char *name, size_t buffers, size_t bytes) {
  (void)user;
  printf("  %-6s %-22s %2zu buffer(s) %12zu bytes (%.2f MiB)\n", lane == CGRT_LANE_TARGET ? "target" : "draft",
         name, buffers, bytes, bytes / 1048576.0);
}

static cgrt_tensor_desc tensor(int ndim, const int64_t *shape, cgrt_dtype dtype) {
  cgrt_tensor_desc d;
  memset(&d, 0, sizeof d);
  d.ndim = ndim;
  for (int i = 0; i < ndim; i++) d.shape[i] = shape[i];
  d.dtype = dtype;
  return d;
}

int main(void) {
  /* Decode configuration of a DeepSeek-style MLA model on one rank. */
  const int64_t max_num_seqs = 256, block_len = 4, heads = 16, dcp = 1, max_model_len = 163840;
  const int64_t page_size = 64, max_blocks = (max_model_len + page_size - 1) / page_size;
  const int64_t max_rows = max_num_seqs * block_len;

  cgrt_set_log_callback(log_to_stderr, NULL, CGRT_LOG_INFO);
  cgrt_runtime *rt = NULL;
  CHECK(cgrt_runtime_create(NULL, &rt));
  cgrt_runtime_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  CHECK(cgrt_runtime_get_info(rt, &info));
  printf("cgrt engine_demo\n");
  printf("device: %s (%s driver, CUDA %d.%d, compute capability %d.%d, %d SMs, %.1f GiB)\n", info.device_name,
         cgrt_driver_kind_name(info.driver), info.driver_version / 1000, (info.driver_version % 1000) / 10,
         info.compute_capability_major, info.compute_capability_minor, info.sm_count,
         info.total_memory / 1073741824.0);
  if (info.driver == CGRT_DRIVER_EMULATED)
    printf("note: no usable GPU here; running on cgrt's CPU emulation of the CUDA driver\n");
  printf("config: max_num_seqs=%" PRId64 " block_len=%" PRId64 " heads=%" PRId64 " dcp=%" PRId64
         " max_model_len=%" PRId64 " -> max_rows=%" PRId64 "\n",
         max_num_seqs, block_len, heads, dcp, max_model_len, max_rows);

  /* Warm-up: worst-case reservations for both lanes (target model and draft model). */
  for (int lane = CGRT_LANE_TARGET; lane <= CGRT_LANE_DRAFT; lane++) {
    int64_t s_q[3] = {max_rows, heads * dcp, 576}, s_out[3] = {max_rows, heads * dcp, 512};
    int64_t s_lse[2] = {max_rows, heads * dcp}, s_rows[1] = {max_rows};
    int64_t s_bt[2] = {max_num_seqs, max_blocks};
    cgrt_tensor_desc step[6] = {
        tensor(3, s_q, CGRT_DTYPE_BF16),  tensor(3, s_out, CGRT_DTYPE_BF16), tensor(2, s_lse, CGRT_DTYPE_F32),
        tensor(1, s_rows, CGRT_DTYPE_I32), tensor(1, s_rows, CGRT_DTYPE_I32), tensor(2, s_bt, CGRT_DTYPE_I32)};
    CUdeviceptr p[6];
    CHECK(cgrt_workspace_request(rt, lane, "decode.io", step, 6, p));
  }
  CHECK(cgrt_counters_reserve(rt, cgrt_counters_decode_bytes((size_t)max_rows, (size_t)(heads * dcp), info.sm_count)));
  CHECK(cgrt_workspace_lock(rt));

  cgrt_workspace_stats ws;
  memset(&ws, 0, sizeof ws);
  ws.size = sizeof ws;
  CHECK(cgrt_workspace_get_stats(rt, &ws));
  printf("reserved and locked (%zu reservations, %zu buffers):\n", ws.reservations, ws.buffers);
  CHECK(cgrt_workspace_visit(rt, print_reservation, NULL));
  printf("  counters                      %12zu bytes\n", ws.counter_bytes);
  printf("  total device bytes held: %zu (%.2f MiB; alignment and guard words included)\n", ws.bytes_allocated,
         ws.bytes_allocated / 1048576.0);

  /* The lock holds: one row more than the worst case is refused, nothing moves. */
  int64_t s_q_big[3] = {max_rows + 1, heads * dcp, 576};
  cgrt_tensor_desc too_big = tensor(3, s_q_big, CGRT_DTYPE_BF16);
  CUdeviceptr p;
  cgrt_status st = cgrt_workspace_request(rt, CGRT_LANE_TARGET, "decode.io", &too_big, 1, &p);
  printf("request past the worst case after lock: %s (%s)\n", cgrt_status_name(st), cgrt_last_error());
  if (st != CGRT_ERROR_WORKSPACE_LOCKED) return 1;
  CHECK(cgrt_workspace_verify(rt));
  CHECK(cgrt_counters_verify(rt));
  printf("guard words and counters verified\n");
  CHECK(cgrt_runtime_destroy(rt));
  return 0;
}
