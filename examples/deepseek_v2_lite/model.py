"""A DeepSeek-V2-Lite-shaped decoder in PyTorch, decoding with absorbed-weight MLA through
cgrt_mla_decode over a paged latent KV cache (shapes and deviations: config.py).

One decode step over B rows (B is the padded bucket size when the step is captured):
    embed -> 27 x [ RMSNorm -> q / latent-KV projection -> RoPE -> write the token's 576
    latent values into the cache -> q_nope x W_UK (absorbed: 512-wide latent query) ->
    cgrt MLA decode (576-wide q, 512-wide latent output) -> x W_UV -> o_proj -> residual
    -> RMSNorm -> SwiGLU MLP -> residual ] -> RMSNorm -> tied LM head -> argmax.
The PyTorch work is cut into "segments" between the MLA calls; each segment reads and
writes only the tensors it is given (see backend.Backend.segment), so the same code runs
eagerly, inside cgrt's capture on a GPU, inside torch.cuda.graph, and as emulated kernels.

The MTP-style drafter (one decoder layer of the same shape, tied embedding and head):
    u = W_proj [RMSNorm(embed(token)); RMSNorm(hidden)] -> decoder layer (own latent KV
    cache, same block table) -> hidden' ; RMSNorm -> head -> argmax = draft token,
fed its own (token, hidden') at the next draft step.
"""
import math

import torch
import torch.nn.functional as F

from config import ModelConfig


def rms_norm(x, w, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope_tables(cfg: ModelConfig, max_pos: int, device):
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.rope_dim, 2, dtype=torch.float64) / cfg.rope_dim))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float().to(device), ang.sin().float().to(device)


def apply_rope(x, cos, sin):
    """x [..., rows, (heads,) 64] bf16; cos/sin [rows, 64] fp32 broadcast over heads."""
    if x.dim() == 3:
        cos, sin = cos[:, None, :], sin[:, None, :]
    x32 = x.float()
    half = x32.shape[-1] // 2
    rot = torch.cat([-x32[..., half:], x32[..., :half]], dim=-1)
    return (x32 * cos + rot * sin).to(x.dtype)


class _Init:
    """Seeded weights: one generator on the device, drawn in a fixed order (the same seed
    gives the same weights on the same kind of device)."""

    def __init__(self, seed, device):
        self.device = device
        self.g = torch.Generator(device=device)
        self.g.manual_seed(seed)

    def normal(self, shape, std, dtype=torch.bfloat16):
        t = torch.empty(shape, dtype=torch.float32, device=self.device)
        t.normal_(0.0, std, generator=self.g)
        return t.to(dtype)

    def ones(self, n):
        return torch.ones(n, dtype=torch.bfloat16, device=self.device)


def layer_weights(cfg: ModelConfig, init: _Init):
    H, D = cfg.heads, cfg.hidden
    res = 1.0 / math.sqrt(2.0 * cfg.layers)
    return {
        "attn_norm": init.ones(D),
        "w_qkv": init.normal((D, H * cfg.qk_head + cfg.latent), D ** -0.5),  # q (no LoRA) + kv_a
        "kv_norm": init.ones(cfg.kv_lora_rank),
        "w_uk": init.normal((H, cfg.qk_nope, cfg.kv_lora_rank), cfg.qk_nope ** -0.5),
        "w_uv_t": init.normal((H, cfg.kv_lora_rank, cfg.v_head), cfg.kv_lora_rank ** -0.5),
        "w_o": init.normal((H * cfg.v_head, D), (H * cfg.v_head) ** -0.5 * res),
        "mlp_norm": init.ones(D),
        "w_gate_up": init.normal((D, 2 * cfg.intermediate), D ** -0.5),
        "w_down": init.normal((cfg.intermediate, D), cfg.intermediate ** -0.5 * res),
    }


class Weights:
    def __init__(self, cfg: ModelConfig, device, with_drafter=False):
        cfg.check()
        init = _Init(cfg.seed, device)
        self.embed = init.normal((cfg.vocab, cfg.hidden), 1.0)
        self.final_norm = init.ones(cfg.hidden)
        self.layers = [layer_weights(cfg, init) for _ in range(cfg.layers)]
        self.drafter = None
        if with_drafter:
            d = layer_weights(cfg, init)
            d["enorm"], d["hnorm"] = init.ones(cfg.hidden), init.ones(cfg.hidden)
            d["w_proj"] = init.normal((2 * cfg.hidden, cfg.hidden), (2 * cfg.hidden) ** -0.5)
            self.drafter = d

    def bytes(self):
        ts = [self.embed, self.final_norm] + [t for lw in self.layers for t in lw.values()]
        if self.drafter:
            ts += list(self.drafter.values())
        return sum(t.numel() * t.element_size() for t in ts)


def weight_bytes(cfg: ModelConfig, drafter=False):
    """Bytes of the weights Weights(cfg) allocates (for sizing before allocating)."""
    H, D = cfg.heads, cfg.hidden
    layer = (2 * D + cfg.kv_lora_rank + D * (H * cfg.qk_head + cfg.latent) + H * cfg.qk_nope * cfg.kv_lora_rank
             + H * cfg.kv_lora_rank * cfg.v_head + H * cfg.v_head * D + 3 * D * cfg.intermediate)
    n = cfg.vocab * D + D + cfg.layers * layer
    if drafter:
        n += layer + 2 * D + 2 * D * D
    return 2 * n


class KVCache:
    """Paged latent KV caches [num_pages + 1, page, 576] bf16, the last page of each being the
    "trash" page where padding rows (slot -1) write. `distinct` caches serve the layers:
    layer l uses cache l % distinct (distinct < layers only where memory cannot hold one
    cache per layer; the benchmark says so in its output)."""

    def __init__(self, cfg: ModelConfig, num_pages, layers, device, distinct=None, zero=True):
        self.cfg, self.num_pages, self.page = cfg, num_pages, cfg.page_size
        self.distinct = layers if distinct is None else max(1, min(distinct, layers))
        alloc = torch.zeros if zero else torch.empty
        self.caches = [alloc((num_pages + 1, cfg.page_size, cfg.latent), dtype=torch.bfloat16, device=device)
                       for _ in range(self.distinct)]
        self.layer_cache = [self.caches[l % self.distinct] for l in range(layers)]
        self.trash_slot = num_pages * cfg.page_size

    def bytes(self):
        return sum(c.numel() * 2 for c in self.caches)

    def fill_pages(self, pages, generator, std):
        """Synthetic prefill: random latent values in these pages of every cache."""
        if len(pages) == 0:
            return
        dev = self.caches[0].device
        idx = torch.as_tensor(pages, dtype=torch.long, device=dev)
        for c in self.caches:
            v = torch.empty((len(pages), self.page, self.cfg.latent), dtype=torch.float32, device=dev)
            v.normal_(0.0, std, generator=generator)
            c.index_copy_(0, idx, v.to(torch.bfloat16))

    def fill_all(self, generator, std):
        for c in self.caches:
            for i in range(0, c.shape[0], 4096):
                c[i:i + 4096].normal_(0.0, std, generator=generator)


class Activations:
    """Static activations between segments (max_rows rows)."""

    def __init__(self, cfg: ModelConfig, max_rows, device):
        self.hidden = torch.zeros((max_rows, cfg.hidden), dtype=torch.bfloat16, device=device)
        self.q = torch.zeros((max_rows, cfg.heads, cfg.latent), dtype=torch.bfloat16, device=device)
        self.attn = torch.zeros((max_rows, cfg.heads, cfg.kv_lora_rank), dtype=torch.bfloat16, device=device)
        self.lse = torch.zeros((max_rows, cfg.heads), dtype=torch.float32, device=device)

    def tensors(self):
        return [self.hidden, self.q, self.attn, self.lse]


class Exec:
    """How a step launches its work: seg(fn, *tensors) and mla(plan, ...), on `stream`.
    kernels=True makes segments emulated kernels (cgrt's CPU emulation, inside graph
    callbacks, so that they are captured); otherwise they are plain calls on the current
    (PyTorch) stream."""

    def __init__(self, be, stream, kernels):
        self.be, self.stream, self.kernels = be, stream, kernels

    def seg(self, fn, *tensors):
        if self.kernels:
            self.be.segment(self.stream, fn, *tensors)
        else:
            fn(*tensors)

    def mla(self, plan, q, kv, block_table, seq_lens, out, lse, rows, scale):
        plan.decode(self.stream, q, kv, block_table, seq_lens, out, lse, rows, scale)


class Model:
    """The target decoder (and optionally the drafter) over given weights and caches."""

    def __init__(self, cfg: ModelConfig, weights: Weights, kv: KVCache, act: Activations, max_pos,
                 draft_kv: KVCache = None, draft_act: Activations = None):
        self.cfg, self.w, self.kv, self.act = cfg, weights, kv, act
        self.draft_kv, self.draft_act = draft_kv, draft_act
        self.cos, self.sin = rope_tables(cfg, max_pos, weights.embed.device)

    # ---- segments (each writes its results into the tensors it is given) ----
    def _embed(self, tokens, hidden):
        hidden.copy_(self.w.embed.index_select(0, tokens))

    def _pre_attn(self, lw, kv_cache, trash_slot):
        cfg = self.cfg
        H, nope, R = cfg.heads, cfg.qk_nope, cfg.kv_lora_rank

        def fn(hidden, positions, slots, kv, q_out):
            B = hidden.shape[0]
            x = rms_norm(hidden, lw["attn_norm"], cfg.rms_eps)
            qkv = x @ lw["w_qkv"]
            q = qkv[:, :H * cfg.qk_head].view(B, H, cfg.qk_head)
            kv_a = qkv[:, H * cfg.qk_head:]
            cos = self.cos.index_select(0, positions)
            sin = self.sin.index_select(0, positions)
            q_pe = apply_rope(q[..., nope:], cos, sin)
            k_pe = apply_rope(kv_a[:, R:], cos, sin)
            c = rms_norm(kv_a[:, :R], lw["kv_norm"], cfg.rms_eps)
            q_lat = torch.bmm(q[..., :nope].transpose(0, 1), lw["w_uk"])  # [H, B, 512]
            q_out[:, :, :R].copy_(q_lat.transpose(0, 1))
            q_out[:, :, R:].copy_(q_pe)
            slot = torch.where(slots >= 0, slots, torch.full_like(slots, trash_slot))
            kv.view(-1, cfg.latent).index_copy_(0, slot, torch.cat([c, k_pe], dim=-1))

        return fn

    def _post_attn(self, lw):
        cfg = self.cfg

        def fn(attn, hidden):
            B = attn.shape[0]
            o = torch.bmm(attn.transpose(0, 1), lw["w_uv_t"])  # [H, B, v_head]
            hidden.add_(o.transpose(0, 1).reshape(B, cfg.heads * cfg.v_head) @ lw["w_o"])
            x = rms_norm(hidden, lw["mlp_norm"], cfg.rms_eps)
            gate, up = (x @ lw["w_gate_up"]).chunk(2, dim=-1)
            hidden.add_((F.silu(gate) * up) @ lw["w_down"])

        return fn

    def _head(self, hidden, out_hidden, out_tokens):
        x = rms_norm(hidden, self.w.final_norm, self.cfg.rms_eps)
        logits = x @ self.w.embed.t()
        out_tokens.copy_(torch.argmax(logits, dim=-1))
        out_hidden.copy_(hidden)

    def _layer(self, ex, lw, kv_cache, trash_slot, act, io, plan, B):
        ex.seg(self._pre_attn(lw, kv_cache, trash_slot), act.hidden[:B], io["positions"][:B],
               io["slot_mapping"][:B], kv_cache, act.q[:B])
        ex.mla(plan, act.q[:B], kv_cache, io["block_table"], io["seq_lens"], act.attn[:B], act.lse[:B], B,
               self.cfg.softmax_scale)
        ex.seg(self._post_attn(lw), act.attn[:B], act.hidden[:B])

    # ---- steps ----
    def forward(self, ex: Exec, io, B, plan):
        """One target decode step over B rows. io: token_ids int64, positions int64,
        slot_mapping int64, seq_lens int32, block_table int32 [reqs, max_blocks] (row-level:
        one row per request in decode), out_tokens int64, out_hidden bf16."""
        act = self.act
        ex.seg(self._embed, io["token_ids"][:B], act.hidden[:B])
        for l, lw in enumerate(self.w.layers):
            self._layer(ex, lw, self.kv.layer_cache[l], self.kv.trash_slot, act, io, plan, B)
        ex.seg(self._head, act.hidden[:B], io["out_hidden"][:B], io["out_tokens"][:B])

    def _draft_in(self, dw):
        cfg = self.cfg

        def fn(tokens, hidden_in, hidden):
            e = rms_norm(self.w.embed.index_select(0, tokens), dw["enorm"], cfg.rms_eps)
            h = rms_norm(hidden_in, dw["hnorm"], cfg.rms_eps)
            hidden.copy_(torch.cat([e, h], dim=-1) @ dw["w_proj"])

        return fn

    def draft_forward(self, ex: Exec, tokens, hidden_in, io, B, plan, out_tokens, out_hidden):
        """One drafter step over B rows: (token, hidden) -> (draft token, hidden')."""
        dw, act, kv = self.w.drafter, self.draft_act, self.draft_kv
        ex.seg(self._draft_in(dw), tokens[:B], hidden_in[:B], act.hidden[:B])
        self._layer(ex, dw, kv.layer_cache[0], kv.trash_slot, act, io, plan, B)
        ex.seg(self._head, act.hidden[:B], out_hidden[:B], out_tokens[:B])


# ---- references for checking ---------------------------------------------------------

def reference_mla(q, kv_cache, block_table, seq_lens, scale, page):
    """fp32 MLA decode over the paged latent cache, one row per request: returns (out
    [rows, heads, 512] fp32, lse [rows, heads] fp32). Rows with seq_len <= 0: 0 and -inf."""
    rows, heads = q.shape[0], q.shape[1]
    out = torch.zeros((rows, heads, 512), dtype=torch.float32, device=q.device)
    lse = torch.full((rows, heads), float("-inf"), dtype=torch.float32, device=q.device)
    lens = seq_lens.tolist()
    for r in range(rows):
        L = lens[r]
        if L <= 0:
            continue
        npg = -(-L // page)
        pages = block_table[r, :npg].long()
        K = kv_cache.index_select(0, pages).reshape(-1, kv_cache.shape[-1])[:L].float()
        s = (q[r].float() @ K.t()) * scale
        lse[r] = torch.logsumexp(s, dim=-1)
        out[r] = torch.softmax(s, dim=-1) @ K[:, :512]
    return out, lse


def reference_attention_unabsorbed(cfg: ModelConfig, lw, q_nope, q_pe, kv_rows):
    """Textbook MLA for one row over its latent rows kv_rows [L, 576] (fp32): keys
    [W_UK c ; k_pe], values W_UV c per head; returns [heads, v_head] (the input of o_proj)."""
    c, k_pe = kv_rows[:, :cfg.kv_lora_rank].float(), kv_rows[:, cfg.kv_lora_rank:].float()
    w_uk, w_uv_t = lw["w_uk"].float(), lw["w_uv_t"].float()
    out = []
    for h in range(cfg.heads):
        k = torch.cat([c @ w_uk[h].t(), k_pe], dim=-1)   # [L, qk_nope + rope]
        v = c @ w_uv_t[h]                                 # [L, v_head]
        s = (torch.cat([q_nope[h].float(), q_pe[h].float()]) @ k.t()) * cfg.softmax_scale
        out.append(torch.softmax(s, dim=-1) @ v)
    return torch.stack(out)
