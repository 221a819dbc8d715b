// Metadata kernels captured by cgrt's graph sets (graphs/). Reference: graph_meta_ref.c.
//
// Parameter contract (kernels/graph_meta.h, checked at the end of this file): the
// parameters are in the order of the lists there. num_reqs is parameter 0
// (CGRT__META_NUM_REQS) of prepare, advance and while_begin: a step patches it in the
// captured nodes. advance_while reads num_reqs from state[1] instead. The conditional
// handle is the last parameter of the WHILE kernels: a value, never a pointer.
//
// cgrt_graph_meta_prepare: per-request metadata -> per-row metadata, and inert padding.
//   Row i < num_reqs * block_len belongs to request r = i / block_len, j = i % block_len:
//     seq_lens[i] = req_seq_lens[r]            (non-causal block: the full context)
//     positions[i] = req_positions[r] + j
//     slot_mapping[i] = block_table[r * max_blocks + pos / block_size] * block_size
//                       + pos % block_size     (-1 when pos is outside the table)
//   Rows num_reqs * block_len <= i < padded_rows: seq_len 0, position 0, slot -1.
// cgrt_graph_meta_advance (draft loops, one row per request): rows i < num_reqs with
//   seq_lens[i] > 0 take seq_len = min(s + 1, max_model_len), position + 1, and the slot
//   of the new position; other rows are left as they are.
//
// WHILE draft loops (a conditional WHILE node; see cgrt_graphs_options.draft_while).
// state[0] counts the steps the loop has finished (0 between launches), state[1] holds
// the launch's num_reqs (so that the body's nodes never change between steps). A real
// request r < num_reqs is "active" for the next step when its seq_len is in
// (0, max_model_len) and, with a draft_remaining buffer, draft_remaining[r] > the index
// of that step. One block decides for all rows (cross-row "any").
// cgrt_graph_meta_while_begin (before the node): state = {0, num_reqs}; condition = some
//   request is active for step 0 (req_seq_lens[r] > 0 and draft_remaining[r] > 0).
// cgrt_graph_meta_advance_while (last node of the body, after step it - 1 where
//   it = state[0] + 1): when it < steps and some request is active for step it (judged
//   on the seq_lens before advancing), advance every row like cgrt_graph_meta_advance,
//   state[0] = it and condition 1; else advance nothing, state[0] = 0 and condition 0.
#include <stdint.h>

#include <cstddef>
#include <tuple>

#include "kernels/graph_meta.h"

__device__ __forceinline__ long long cgrt__slot(const int *block_table, int r, int max_blocks,
                                                int block_size, long long pos) {
  if (pos < 0) return -1;
  long long b = pos / block_size;
  if (b >= max_blocks) return -1;
  long long blk = block_table[(long long)r * max_blocks + b];
  if (blk < 0) return -1;
  return blk * block_size + pos % block_size;
}

extern "C" __global__ void cgrt_graph_meta_prepare(int num_reqs, int padded_rows, int block_len,
                                                   int block_size, int max_blocks,
                                                   const int *req_seq_lens,
                                                   const long long *req_positions,
                                                   const int *block_table, int *seq_lens,
                                                   long long *positions, long long *slot_mapping) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= padded_rows) return;
  int rows = num_reqs * block_len;
  if (i < rows) {
    int r = i / block_len, j = i % block_len;
    long long pos = req_positions[r] + j;
    seq_lens[i] = req_seq_lens[r];
    positions[i] = pos;
    slot_mapping[i] = cgrt__slot(block_table, r, max_blocks, block_size, pos);
  } else {
    seq_lens[i] = 0;
    positions[i] = 0;
    slot_mapping[i] = -1;
  }
}

extern "C" __global__ void cgrt_graph_meta_advance(int num_reqs, int padded_rows, int max_model_len,
                                                   int block_size, int max_blocks,
                                                   const int *block_table, int *seq_lens,
                                                   long long *positions, long long *slot_mapping) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= padded_rows || i >= num_reqs) return;
  int s = seq_lens[i];
  if (s <= 0) return;
  seq_lens[i] = s + 1 < max_model_len ? s + 1 : max_model_len;
  long long pos = positions[i] + 1;
  positions[i] = pos;
  slot_mapping[i] = cgrt__slot(block_table, i, max_blocks, block_size, pos);
}

extern "C" __global__ void cgrt_graph_meta_while_begin(int num_reqs, const int *req_seq_lens,
                                                       const int *draft_remaining,
                                                       unsigned *state,
                                                       unsigned long long handle) {
  int any = 0;
  for (int r = threadIdx.x; r < num_reqs; r += blockDim.x)
    if (req_seq_lens[r] > 0 && (draft_remaining == nullptr || draft_remaining[r] > 0)) any = 1;
  any = __syncthreads_or(any);
  if (threadIdx.x == 0) {
    state[0] = 0u;
    state[1] = (unsigned)num_reqs;
    cudaGraphSetConditional((cudaGraphConditionalHandle)handle, any ? 1u : 0u);
  }
}

extern "C" __global__ void cgrt_graph_meta_advance_while(int padded_rows, int steps, int max_model_len,
                                                         int block_size, int max_blocks,
                                                         const int *block_table, int *seq_lens,
                                                         long long *positions,
                                                         long long *slot_mapping,
                                                         const int *draft_remaining,
                                                         unsigned *state,
                                                         unsigned long long handle) {
  int it = (int)state[0] + 1;
  int n = (int)state[1];
  if (n > padded_rows) n = padded_rows;
  int any = 0;
  if (it < steps)
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
      int s = seq_lens[r];
      if (s > 0 && s < max_model_len && (draft_remaining == nullptr || draft_remaining[r] > it)) any = 1;
    }
  any = __syncthreads_or(any);
  if (any)
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      int s = seq_lens[i];
      if (s <= 0) continue;
      seq_lens[i] = s + 1 < max_model_len ? s + 1 : max_model_len;
      long long pos = positions[i] + 1;
      positions[i] = pos;
      slot_mapping[i] = cgrt__slot(block_table, i, max_blocks, block_size, pos);
    }
  if (threadIdx.x == 0) {
    state[0] = any ? (unsigned)it : 0u;
    cudaGraphSetConditional((cudaGraphConditionalHandle)handle, any ? 1u : 0u);
  }
}

// The signatures above against the lists of kernels/graph_meta.h: as many parameters,
// each of the listed size.
template <typename F>
struct cgrt__meta_sig;
template <typename... A>
struct cgrt__meta_sig<void(A...)> {
  static constexpr size_t count = sizeof...(A);
  template <size_t i>
  static constexpr size_t bytes() {
    return sizeof(typename std::tuple_element<i, std::tuple<A...>>::type);
  }
};
template <typename F, size_t... i>
constexpr bool cgrt__meta_sizes_are(std::index_sequence<i...>, const size_t (&want)[sizeof...(i)]) {
  bool ok = true;
  ((ok = ok && cgrt__meta_sig<F>::template bytes<i>() == want[i]), ...);
  return ok;
}
#define CGRT__META_CHECK(kernel, LIST, n)                                                             \
  static_assert(cgrt__meta_sig<decltype(kernel)>::count == (n), #kernel ": parameter count");         \
  static_assert(cgrt__meta_sizes_are<decltype(kernel)>(std::make_index_sequence<(n)>(),               \
                                                       {LIST(CGRT__META_BYTES)}),                   \
                #kernel ": parameter sizes")
CGRT__META_CHECK(cgrt_graph_meta_prepare, CGRT__META_PREPARE_PARAMS, CGRT__META_PREPARE_NPARAMS);
CGRT__META_CHECK(cgrt_graph_meta_advance, CGRT__META_ADVANCE_PARAMS, CGRT__META_ADVANCE_NPARAMS);
CGRT__META_CHECK(cgrt_graph_meta_while_begin, CGRT__META_WHILE_BEGIN_PARAMS, CGRT__META_WHILE_BEGIN_NPARAMS);
CGRT__META_CHECK(cgrt_graph_meta_advance_while, CGRT__META_ADVANCE_WHILE_PARAMS,
                 CGRT__META_ADVANCE_WHILE_NPARAMS);
#undef CGRT__META_CHECK
