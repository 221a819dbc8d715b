/* The graph-meta kernels (kernels/graph_meta.cu) as graphs/ launches and indexes them:
 * their arguments, each at the position kernels/graph_meta.h names, and the two parts of
 * the kernels' contract that the parameter index relies on: num_reqs is parameter
 * CGRT__META_NUM_REQS of the kernels a step patches, and the WHILE kernels' conditional
 * handle is a value, never a pointer. */
#include <string.h>

#include "graphs/graphs_internal.h"

unsigned gx_meta_grid(int rows) {
  unsigned grid = (unsigned)((rows + GX_META_THREADS - 1) / GX_META_THREADS);
  return grid ? grid : 1;
}

static void put_int(gx_meta_args *a, int p, int v) { memcpy(&a->val[p], &v, sizeof v); }
static void put_u64(gx_meta_args *a, int p, uint64_t v) { a->val[p] = v; }
/* A metadata buffer's address (0 for an unset buffer id). */
static void put_buf(gx_meta_args *a, int p, const CUdeviceptr *addr, int id) {
  put_u64(a, p, id >= 0 ? (uint64_t)addr[id] : 0);
}

static void start(gx_meta_args *a) {
  memset(a, 0, sizeof(*a));
  for (int p = 0; p < CGRT__META_MAX_PARAMS; p++) a->args[p] = &a->val[p];
}

void gx_meta_prepare(const cgrt_graphs *set, const CUdeviceptr *addr, int num_reqs, int padded_rows,
                     int block_len, gx_meta_args *a) {
  const cgrt_graph_meta *m = &set->o.meta;
  start(a);
  put_int(a, CGRT__META_PREPARE_NUM_REQS, num_reqs);
  put_int(a, CGRT__META_PREPARE_PADDED_ROWS, padded_rows);
  put_int(a, CGRT__META_PREPARE_BLOCK_LEN, block_len);
  put_int(a, CGRT__META_PREPARE_BLOCK_SIZE, m->block_size);
  put_int(a, CGRT__META_PREPARE_MAX_BLOCKS, m->max_blocks_per_seq);
  put_buf(a, CGRT__META_PREPARE_REQ_SEQ_LENS, addr, m->req_seq_lens);
  put_buf(a, CGRT__META_PREPARE_REQ_POSITIONS, addr, m->req_positions);
  put_buf(a, CGRT__META_PREPARE_BLOCK_TABLE, addr, m->block_table);
  put_buf(a, CGRT__META_PREPARE_SEQ_LENS, addr, m->seq_lens);
  put_buf(a, CGRT__META_PREPARE_POSITIONS, addr, m->positions);
  put_buf(a, CGRT__META_PREPARE_SLOT_MAPPING, addr, m->slot_mapping);
}

void gx_meta_advance(const cgrt_graphs *set, const CUdeviceptr *addr, int num_reqs, int padded_rows,
                     gx_meta_args *a) {
  const cgrt_graph_meta *m = &set->o.meta;
  start(a);
  put_int(a, CGRT__META_ADVANCE_NUM_REQS, num_reqs);
  put_int(a, CGRT__META_ADVANCE_PADDED_ROWS, padded_rows);
  put_int(a, CGRT__META_ADVANCE_MAX_MODEL_LEN, set->o.max_model_len);
  put_int(a, CGRT__META_ADVANCE_BLOCK_SIZE, m->block_size);
  put_int(a, CGRT__META_ADVANCE_MAX_BLOCKS, m->max_blocks_per_seq);
  put_buf(a, CGRT__META_ADVANCE_BLOCK_TABLE, addr, m->block_table);
  put_buf(a, CGRT__META_ADVANCE_SEQ_LENS, addr, m->seq_lens);
  put_buf(a, CGRT__META_ADVANCE_POSITIONS, addr, m->positions);
  put_buf(a, CGRT__META_ADVANCE_SLOT_MAPPING, addr, m->slot_mapping);
}

void gx_meta_while_begin(const cgrt_graphs *set, const CUdeviceptr *addr, int num_reqs, uint64_t handle,
                         gx_meta_args *a) {
  const cgrt_graph_meta *m = &set->o.meta;
  start(a);
  put_int(a, CGRT__META_WHILE_BEGIN_NUM_REQS, num_reqs);
  put_buf(a, CGRT__META_WHILE_BEGIN_REQ_SEQ_LENS, addr, m->req_seq_lens);
  put_buf(a, CGRT__META_WHILE_BEGIN_DRAFT_REMAINING, addr, m->draft_remaining);
  put_u64(a, CGRT__META_WHILE_BEGIN_STATE, set->while_state);
  put_u64(a, CGRT__META_WHILE_BEGIN_HANDLE, handle);
}

void gx_meta_advance_while(const cgrt_graphs *set, const CUdeviceptr *addr, int padded_rows, uint64_t handle,
                           gx_meta_args *a) {
  const cgrt_graph_meta *m = &set->o.meta;
  start(a);
  put_int(a, CGRT__META_ADVANCE_WHILE_PADDED_ROWS, padded_rows);
  put_int(a, CGRT__META_ADVANCE_WHILE_STEPS, set->o.draft_steps);
  put_int(a, CGRT__META_ADVANCE_WHILE_MAX_MODEL_LEN, set->o.max_model_len);
  put_int(a, CGRT__META_ADVANCE_WHILE_BLOCK_SIZE, m->block_size);
  put_int(a, CGRT__META_ADVANCE_WHILE_MAX_BLOCKS, m->max_blocks_per_seq);
  put_buf(a, CGRT__META_ADVANCE_WHILE_BLOCK_TABLE, addr, m->block_table);
  put_buf(a, CGRT__META_ADVANCE_WHILE_SEQ_LENS, addr, m->seq_lens);
  put_buf(a, CGRT__META_ADVANCE_WHILE_POSITIONS, addr, m->positions);
  put_buf(a, CGRT__META_ADVANCE_WHILE_SLOT_MAPPING, addr, m->slot_mapping);
  put_buf(a, CGRT__META_ADVANCE_WHILE_DRAFT_REMAINING, addr, m->draft_remaining);
  put_u64(a, CGRT__META_ADVANCE_WHILE_STATE, set->while_state);
  put_u64(a, CGRT__META_ADVANCE_WHILE_HANDLE, handle);
}

int gx_meta_takes_reqs(const cgrt_graphs *set, CUfunction f) {
  if (f == NULL || set->f_prepare == NULL) return 0;
  return f == set->f_prepare || f == set->f_advance || f == set->f_while_begin;
}

int gx_is_handle_param(const cgrt_graphs *set, CUfunction f, uint32_t p) {
  if (f == NULL) return 0;
  return (f == set->f_while_begin && p == CGRT__META_WHILE_BEGIN_HANDLE) ||
         (f == set->f_advance_while && p == CGRT__META_ADVANCE_WHILE_HANDLE);
}
