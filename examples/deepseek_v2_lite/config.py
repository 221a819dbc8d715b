"""Model and serving configurations of the DeepSeek-V2-Lite-shaped example.

FULL is the shape the example serves on a GPU; REDUCED is the same architecture made
small enough for cgrt's CPU emulation (the C reference kernels) and for CI.

What differs from DeepSeek-V2-Lite, on purpose (the README repeats it):
  * a dense SwiGLU MLP in every layer instead of the MoE. Its width, 10944, is the
    dense first layer's; it is also close to what one token activates in the MoE
    layers (6 routed + 2 shared experts of 1408 = 11264), so the per-layer weight
    traffic of a decode step at small batch is realistic. At large batch the MoE reads
    more distinct experts than this dense MLP does.
  * plain rotary embedding (theta 10000, rotate-half layout) instead of YaRN, and
    softmax scale 1/sqrt(qk_nope + rope) without YaRN's mscale.
  * seeded random weights; the prompt's latent KV is random ("synthetic prefill").
  * the vocabulary is kept at 102400; the LM head is its own matrix, as in
    DeepSeek-V2-Lite (tie_head=True ties it to the embedding). Tied, random weights
    make greedy decoding degenerate: the final hidden state is mostly the fed token's
    embedding (median cosine 0.92), so the tied head's argmax is the fed token again and
    greedy decoding repeats it forever (704 of 704 greedy tokens). With its own head,
    greedy decoding follows a random map of the fed token that the context perturbs (0
    of 704 repeat), and the drafter's agreement with it is a measurement, not a given.
  * the MTP drafter's W_proj starts as [I; 0]: it passes the normalized embedding of its
    token and ignores the hidden state, so the drafter predicts the target's "bigram"
    part (one decoder layer of its own on top). Random weights cannot be trained; this is
    the part of the target a trained drafter learns first. 194 of its 640 first drafts
    (0.30) equal the full target's greedy tokens.
  Figures: draft_agreement.py (and --tie-head): 64 requests at 1K context, 11 target
  steps each, fp32 reference attention, on a CPU.
The attention shapes are the real ones: 16 heads, kv_lora_rank 512, rope 64,
qk_nope 128, v_head 128, a paged latent KV cache of 576 values per token (bf16), and
the absorbed-weight decode that cgrt's MLA kernel (576-wide q, 512-wide output) serves.
"""
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelConfig:
    hidden: int = 2048
    layers: int = 27
    heads: int = 16
    kv_lora_rank: int = 512  # fixed by cgrt_mla_decode (576 = 512 + 64)
    rope_dim: int = 64       # fixed by cgrt_mla_decode
    qk_nope: int = 128
    v_head: int = 128
    intermediate: int = 10944
    vocab: int = 102400
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    page_size: int = 64      # tokens per KV page (cgrt: 16, 32 or 64)
    seed: int = 1234
    # Standard deviation of the rows of the prompt's synthetic latent KV.
    kv_init_std: float = 1.0
    # The LM head is the embedding (True) or its own matrix (False, DeepSeek-V2-Lite's).
    tie_head: bool = False

    @property
    def latent(self) -> int:
        """Values per token in the latent KV cache (and per head in MLA's q)."""
        return self.kv_lora_rank + self.rope_dim

    @property
    def qk_head(self) -> int:
        return self.qk_nope + self.rope_dim

    @property
    def softmax_scale(self) -> float:
        return self.qk_head ** -0.5

    def check(self) -> None:
        if self.kv_lora_rank != 512 or self.rope_dim != 64:
            raise ValueError("cgrt_mla_decode serves kv_lora_rank 512 + rope 64 (576 values per token), "
                             f"got {self.kv_lora_rank} + {self.rope_dim}")
        if self.page_size not in (16, 32, 64):
            raise ValueError(f"page_size {self.page_size}: cgrt serves 16, 32 or 64")
        if self.rope_dim % 2:
            raise ValueError("rope_dim must be even")


FULL = ModelConfig()

# Two layers, hidden 256, 4 heads, narrow heads, a small vocabulary, 16-token pages:
# the MLA shapes that cgrt's kernel fixes (576 / 512) stay.
REDUCED = ModelConfig(hidden=256, layers=2, heads=4, qk_nope=32, v_head=32, intermediate=512,
                      vocab=512, page_size=16)


def with_layers(cfg: ModelConfig, layers: int) -> ModelConfig:
    return replace(cfg, layers=layers)


def vllm_capture_sizes(max_rows: int, multiple_of: int = 1) -> list:
    """vLLM's default CUDA-graph capture sizes: 1, 2, 4, then multiples of 8 up to 256,
    then multiples of 16, cut at max_rows (which is always included). With speculative
    decoding every size is rounded up to a multiple of 1 + spec_tokens (multiple_of)."""
    if max_rows < 1:
        raise ValueError("max_rows must be >= 1")
    sizes, s = [], 1
    while True:
        r = -(-s // multiple_of) * multiple_of
        sizes.append(min(r, -(-max_rows // multiple_of) * multiple_of))
        if r >= max_rows:
            break
        s = s * 2 if s < 4 else (8 if s < 8 else (s + 8 if s < 256 else s + 16))
    return sorted(set(sizes))
