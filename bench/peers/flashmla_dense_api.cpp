// Python binding of FlashMLA's sm90 dense (bf16) MLA decode and nothing else.
//
// FlashMLA's own csrc/api/api.cpp binds every kernel family (sparse FP8 decode, sparse
// prefill, sm100 prefill/backward), which costs several minutes of nvcc time. This file
// binds only what the peer benchmark needs, from FlashMLA's unchanged headers:
//   dense_decode_fwd        FlashMLA's dense_attn_decode_interface (csrc/api/dense_decode.h)
//   dense_decode_sched_meta the tile-scheduler metadata kernel (get_mla_metadata's device
//                           work) written into caller-owned tensors, so that it can run
//                           before or inside a CUDA graph capture without allocating.
// Built by build_flashmla.py (torch.utils.cpp_extension, sm_90a, FLASH_MLA_DISABLE_FP16).
#include <pybind11/pybind11.h>

#include "dense_decode.h"

// Number of scheduler parts, exactly as dense_attn_decode_interface computes it.
static int flashmla_num_sm_parts(int s_q, int num_heads_q, int num_heads_k) {
  Arch arch = Arch();
  return std::max(arch.num_sms / num_heads_k / cutlass::ceil_div(s_q * num_heads_q / num_heads_k, 64), 1);
}

// Shape of the metadata tensors for (batch, s_q, heads): (num_sm_parts, ints per part).
static std::tuple<int64_t, int64_t> dense_decode_sched_meta_shape(int64_t s_q, int64_t num_heads_q,
                                                                   int64_t num_heads_k) {
  return {flashmla_num_sm_parts((int)s_q, (int)num_heads_q, (int)num_heads_k),
          (int64_t)(sizeof(DecodingSchedMeta) / sizeof(int))};
}

// Fills tile_scheduler_metadata [num_sm_parts, ints per part] and num_splits [batch + 1]
// (int32, contiguous, on the GPU) from seqlens_k [batch] on the current stream: the same
// kernel and arguments dense_attn_decode_interface launches when it is given no metadata.
static void dense_decode_sched_meta(const at::Tensor &seqlens_k, int64_t s_q, int64_t num_heads_q,
                                    int64_t num_heads_k, at::Tensor &tile_scheduler_metadata,
                                    at::Tensor &num_splits) {
  TORCH_CHECK(seqlens_k.dtype() == torch::kInt32 && seqlens_k.is_cuda() && seqlens_k.is_contiguous(),
              "seqlens_k must be contiguous int32 on the GPU");
  const int batch = (int)seqlens_k.size(0);
  const int parts = flashmla_num_sm_parts((int)s_q, (int)num_heads_q, (int)num_heads_k);
  KU_CHECK_SHAPE(tile_scheduler_metadata, parts, (int)(sizeof(DecodingSchedMeta) / sizeof(int)));
  KU_CHECK_SHAPE(num_splits, batch + 1);
  TORCH_CHECK(tile_scheduler_metadata.dtype() == torch::kInt32 && num_splits.dtype() == torch::kInt32,
              "metadata tensors must be int32");
  KU_CHECK_CONTIGUOUS(tile_scheduler_metadata);
  KU_CHECK_CONTIGUOUS(num_splits);
  at::cuda::CUDAGuard device_guard{(char)seqlens_k.get_device()};
  GetDecodeSchedMetaParams p = {batch,
                                (int)s_q,
                                64,
                                5,
                                -1,
                                -1,
                                nullptr,
                                nullptr,
                                seqlens_k.data_ptr<int>(),
                                (DecodingSchedMeta *)tile_scheduler_metadata.data_ptr(),
                                num_splits.data_ptr<int>(),
                                parts,
                                at::cuda::getCurrentCUDAStream().stream()};
  smxx::decode::run_get_decoding_sched_meta_kernel(p);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "FlashMLA sm90 dense decode (bf16) only";
  m.def("dense_decode_fwd", &dense_attn_decode_interface);
  m.def("dense_decode_sched_meta_shape", &dense_decode_sched_meta_shape);
  m.def("dense_decode_sched_meta", &dense_decode_sched_meta);
}
