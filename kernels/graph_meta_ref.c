/* Reference of kernels/graph_meta.cu (same semantics; see the comment there).
 *
 * Parameter contract (kernels/graph_meta.h): the parameters are read at the positions the
 * lists there name, and the table's rows take their sizes from the same lists. num_reqs is
 * parameter 0 (CGRT__META_NUM_REQS) of prepare, advance and while_begin: a step patches it
 * in the captured nodes; advance_while reads it from state[1]. The conditional handle is
 * the last parameter of the WHILE kernels: a value, never a pointer. */
#include <stdint.h>

#include "kernels/graph_meta.h"
#include "kernels/ref_tables.h"

static long long slot_of(const int32_t *bt, int r, int max_blocks, int block_size, long long pos) {
  if (pos < 0) return -1;
  long long b = pos / block_size;
  if (b >= max_blocks) return -1;
  long long blk = bt[(long long)r * max_blocks + b];
  if (blk < 0) return -1;
  return blk * block_size + pos % block_size;
}

/* Parameter CGRT__META_<name> as a value of type T, or as a pointer to T. */
#define P(T, name) CGRT__REF_PARAM(T, p, off, CGRT__META_##name)
#define PTR(T, name) ((T *)(uintptr_t)CGRT__REF_PARAM(uint64_t, p, off, CGRT__META_##name))

static void prepare_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  int num_reqs = P(int, PREPARE_NUM_REQS), padded_rows = P(int, PREPARE_PADDED_ROWS),
      block_len = P(int, PREPARE_BLOCK_LEN), block_size = P(int, PREPARE_BLOCK_SIZE),
      max_blocks = P(int, PREPARE_MAX_BLOCKS);
  const int32_t *req_seq_lens = PTR(const int32_t, PREPARE_REQ_SEQ_LENS);
  const int64_t *req_positions = PTR(const int64_t, PREPARE_REQ_POSITIONS);
  const int32_t *block_table = PTR(const int32_t, PREPARE_BLOCK_TABLE);
  int32_t *seq_lens = PTR(int32_t, PREPARE_SEQ_LENS);
  int64_t *positions = PTR(int64_t, PREPARE_POSITIONS);
  int64_t *slots = PTR(int64_t, PREPARE_SLOT_MAPPING);
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
  int num_reqs = P(int, ADVANCE_NUM_REQS), padded_rows = P(int, ADVANCE_PADDED_ROWS),
      max_model_len = P(int, ADVANCE_MAX_MODEL_LEN), block_size = P(int, ADVANCE_BLOCK_SIZE),
      max_blocks = P(int, ADVANCE_MAX_BLOCKS);
  const int32_t *block_table = PTR(const int32_t, ADVANCE_BLOCK_TABLE);
  int32_t *seq_lens = PTR(int32_t, ADVANCE_SEQ_LENS);
  int64_t *positions = PTR(int64_t, ADVANCE_POSITIONS);
  int64_t *slots = PTR(int64_t, ADVANCE_SLOT_MAPPING);
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
  int num_reqs = P(int, WHILE_BEGIN_NUM_REQS);
  const int32_t *req_seq_lens = PTR(const int32_t, WHILE_BEGIN_REQ_SEQ_LENS);
  const int32_t *remaining = PTR(const int32_t, WHILE_BEGIN_DRAFT_REMAINING);
  uint32_t *state = PTR(uint32_t, WHILE_BEGIN_STATE);
  uint64_t handle = P(uint64_t, WHILE_BEGIN_HANDLE);
  int any = 0;
  for (int r = 0; r < num_reqs; r++)
    if (req_seq_lens[r] > 0 && (remaining == NULL || remaining[r] > 0)) any = 1;
  state[0] = 0;
  state[1] = (uint32_t)num_reqs;
  set_conditional(handle, any ? 1u : 0u);
}

static void advance_while_ref(const cgrt__ref_launch *l, const unsigned char *p, const size_t *off) {
  (void)l;
  int padded_rows = P(int, ADVANCE_WHILE_PADDED_ROWS), steps = P(int, ADVANCE_WHILE_STEPS),
      max_model_len = P(int, ADVANCE_WHILE_MAX_MODEL_LEN), block_size = P(int, ADVANCE_WHILE_BLOCK_SIZE),
      max_blocks = P(int, ADVANCE_WHILE_MAX_BLOCKS);
  const int32_t *block_table = PTR(const int32_t, ADVANCE_WHILE_BLOCK_TABLE);
  int32_t *seq_lens = PTR(int32_t, ADVANCE_WHILE_SEQ_LENS);
  int64_t *positions = PTR(int64_t, ADVANCE_WHILE_POSITIONS);
  int64_t *slots = PTR(int64_t, ADVANCE_WHILE_SLOT_MAPPING);
  const int32_t *remaining = PTR(const int32_t, ADVANCE_WHILE_DRAFT_REMAINING);
  uint32_t *state = PTR(uint32_t, ADVANCE_WHILE_STATE);
  uint64_t handle = P(uint64_t, ADVANCE_WHILE_HANDLE);
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
    {"cgrt_graph_meta_prepare", CGRT__META_PREPARE_NPARAMS, {CGRT__META_PREPARE_PARAMS(CGRT__META_BYTES)},
     prepare_ref},
    {"cgrt_graph_meta_advance", CGRT__META_ADVANCE_NPARAMS, {CGRT__META_ADVANCE_PARAMS(CGRT__META_BYTES)},
     advance_ref},
    {"cgrt_graph_meta_while_begin", CGRT__META_WHILE_BEGIN_NPARAMS,
     {CGRT__META_WHILE_BEGIN_PARAMS(CGRT__META_BYTES)}, while_begin_ref},
    {"cgrt_graph_meta_advance_while", CGRT__META_ADVANCE_WHILE_NPARAMS,
     {CGRT__META_ADVANCE_WHILE_PARAMS(CGRT__META_BYTES)}, advance_while_ref},
    {0},
};
