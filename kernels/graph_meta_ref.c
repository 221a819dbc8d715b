/* Reference of kernels/graph_meta.cu (same semantics; see the comment there). */
#include <stdint.h>

#include "kernels/ref_tables.h"

static long long slot_of(const int32_t *bt, int r, int max_blocks, int block_size, long long pos) {
  if (pos < 0) return -1;
  long long b = pos / block_size;
  if (b >= max_blocks) return -1;
  long long blk = bt[(long long)r * max_blocks + b];
  if (blk < 0) return -1;
  return blk * block_size + pos % block_size;
}

#define P(T, i) CGRT__REF_PARAM(T, p, off, i)
#define PTR(T, i) ((T *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, i))

static void prepare_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  int num_reqs = P(int, 0), padded_rows = P(int, 1), block_len = P(int, 2), block_size = P(int, 3),
      max_blocks = P(int, 4);
  const int32_t *req_seq_lens = PTR(const int32_t, 5);
  const int64_t *req_positions = PTR(const int64_t, 6);
  const int32_t *block_table = PTR(const int32_t, 7);
  int32_t *seq_lens = PTR(int32_t, 8);
  int64_t *positions = PTR(int64_t, 9);
  int64_t *slots = PTR(int64_t, 10);
  long long threads = (long long)l->grid[0] * l->block[0];
  int rows = num_reqs * block_len;
  for (long long i = 0; i < threads && i < padded_rows; i++) {
    if (i < rows) {
      int r = (int)(i / block_len), j = (int)(i % block_len);
      long long pos = req_positions[r] + j;
      seq_lens[i] = req_seq_lens[r];
      positions[i] = pos;
      slots[i] = slot_of(block_table, r, max_blocks, block_size, pos);
    } else {
      seq_lens[i] = 0;
      positions[i] = 0;
      slots[i] = -1;
    }
  }
}

static void advance_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  int num_reqs = P(int, 0), padded_rows = P(int, 1), max_model_len = P(int, 2), block_size = P(int, 3),
      max_blocks = P(int, 4);
  const int32_t *block_table = PTR(const int32_t, 5);
  int32_t *seq_lens = PTR(int32_t, 6);
  int64_t *positions = PTR(int64_t, 7);
  int64_t *slots = PTR(int64_t, 8);
  long long threads = (long long)l->grid[0] * l->block[0];
  for (long long i = 0; i < threads && i < padded_rows && i < num_reqs; i++) {
    int s = seq_lens[i];
    if (s <= 0) continue;
    seq_lens[i] = s + 1 < max_model_len ? s + 1 : max_model_len;
    long long pos = positions[i] + 1;
    positions[i] = pos;
    slots[i] = slot_of(block_table, (int)i, max_blocks, block_size, pos);
  }
}

/* The emulation's device-side cudaGraphSetConditional (runtime/emu/emu.h; //kernels:refs
 * cannot depend on //runtime/emu, it links through //runtime). Weak: a binary without
 * the emulation never runs these references. */
extern void cgrt__emu_set_conditional(uint64_t handle, unsigned value) __attribute__((weak));

static void set_conditional(uint64_t handle, unsigned value) {
  if (cgrt__emu_set_conditional != NULL) cgrt__emu_set_conditional(handle, value);
}

static void while_begin_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  int num_reqs = P(int, 0);
  const int32_t *req_seq_lens = PTR(const int32_t, 1);
  const int32_t *remaining = PTR(const int32_t, 2);
  uint32_t *state = PTR(uint32_t, 3);
  uint64_t handle = P(uint64_t, 4);
  int any = 0;
  for (int r = 0; r < num_reqs; r++)
    if (req_seq_lens[r] > 0 && (remaining == NULL || remaining[r] > 0)) any = 1;
  state[0] = 0;
  state[1] = (uint32_t)num_reqs;
  set_conditional(handle, any ? 1u : 0u);
}

static void advance_while_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  int padded_rows = P(int, 0), steps = P(int, 1), max_model_len = P(int, 2), block_size = P(int, 3),
      max_blocks = P(int, 4);
  const int32_t *block_table = PTR(const int32_t, 5);
  int32_t *seq_lens = PTR(int32_t, 6);
  int64_t *positions = PTR(int64_t, 7);
  int64_t *slots = PTR(int64_t, 8);
  const int32_t *remaining = PTR(const int32_t, 9);
  uint32_t *state = PTR(uint32_t, 10);
  uint64_t handle = P(uint64_t, 11);
  int it = (int)state[0] + 1;
  int n = (int)state[1];
  if (n > padded_rows) n = padded_rows;
  int any = 0;
  for (int r = 0; it < steps && r < n; r++) {
    int s = seq_lens[r];
    if (s > 0 && s < max_model_len && (remaining == NULL || remaining[r] > it)) any = 1;
  }
  for (int i = 0; any && i < n; i++) {
    int s = seq_lens[i];
    if (s <= 0) continue;
    seq_lens[i] = s + 1 < max_model_len ? s + 1 : max_model_len;
    long long pos = positions[i] + 1;
    positions[i] = pos;
    slots[i] = slot_of(block_table, i, max_blocks, block_size, pos);
  }
  state[0] = any ? (uint32_t)it : 0u;
  set_conditional(handle, any ? 1u : 0u);
}

const cgrt__ref_kernel cgrt__ref_table_graph_meta[] = {
    {"cgrt_graph_meta_prepare", 11, {4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8}, prepare_ref},
    {"cgrt_graph_meta_advance", 9, {4, 4, 4, 4, 4, 8, 8, 8, 8}, advance_ref},
    {"cgrt_graph_meta_while_begin", 5, {4, 8, 8, 8, 8}, while_begin_ref},
    {"cgrt_graph_meta_advance_while", 12, {4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8, 8}, advance_while_ref},
    {0},
};
