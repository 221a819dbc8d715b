"""A DeepSeek-V2-Lite-shaped decoder in PyTorch, decoding with absorbed-weight MLA through
cgrt_mla_decode over a paged latent KV cache (shapes and deviations: config.py).

One decode step over B rows (B is the padded bucket size when the step is captured):
    embed -> 27 x [ RMSNorm -> q / latent-KV projection -> RoPE -> write the token's 576
    latent values into the cache -> q_nope x W_UK (absorbed: 512-wide latent query) ->
    cgrt MLA decode (576-wide q, 512-wide latent output) -> x W_UV -> o_proj -> residual
    -> RMSNorm -> SwiGLU MLP -> residual ] -> RMSNorm -> LM head -> argmax.
The PyTorch work is cut into "segments" between the MLA calls; each segment reads and
writes only the tensors it is given (see backend.Backend.segment), so the same code runs
eagerly, inside cgrt's capture on a GPU, inside torch.cuda.graph, and as emulated kernels.

The MTP-style drafter (one decoder layer of the same shape, the target's embedding and head):
    u = W_proj [RMSNorm(embed(token)); RMSNorm(hidden)] -> decoder layer (own latent KV
    cache, same block table) -> hidden' ; RMSNorm -> head -> argmax = draft token,
fed its own (token, hidden') at the next draft step. W_proj starts as [I; 0] (config.py
says why).
"""
import math

import torch

from config import ModelConfig
from fused import rms_norm_into, rms_norm_ref, rope_kv_write, rope_ref, silu_mul_into


def rms_norm(x, w, eps):
    """RMSNorm in fp32, one rounding at the end (fused.rms_norm_ref: what the fused
    kernel computes)."""
    return rms_norm_ref(x, w, eps)


def rope_tables(cfg: ModelConfig, max_pos: int, device):
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.rope_dim, 2, dtype=torch.float64) / cfg.rope_dim))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float().to(device).contiguous(), ang.sin().float().to(device).contiguous()


def apply_rope(x, cos, sin):
    """x [..., rows, (heads,) 64] bf16; cos/sin [rows, 64] fp32 broadcast over heads."""
    if x.dim() == 3:
        cos, sin = cos[:, None, :], sin[:, None, :]
    return rope_ref(x, cos, sin)


def _aligned(t, align=256):
    """t on a GPU (PyTorch's CUDA allocator places tensors 512-byte aligned); on the CPU
    (cgrt's emulation) t at a 256-byte-aligned address, as device memory would be: layer
    segments (cgrt.repeat) move a layer's addresses by multiples of 256 bytes."""
    if t.device.type != "cpu" or t.data_ptr() % align == 0:
        return t
    n = t.numel() * t.element_size()
    raw = torch.empty(n + align, dtype=torch.uint8)
    off = (-raw.data_ptr()) % align
    out = raw[off:off + n].view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


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
        return _aligned(t.to(dtype))

    def ones(self, n):
        return _aligned(torch.ones(n, dtype=torch.bfloat16, device=self.device))


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
        # the LM head [vocab, hidden]: the embedding itself when tied
        self.head = self.embed if cfg.tie_head else init.normal((cfg.vocab, cfg.hidden), 1.0)
        self.drafter = None
        if with_drafter:
            d = layer_weights(cfg, init)
            d["enorm"], d["hnorm"] = init.ones(cfg.hidden), init.ones(cfg.hidden)
            # [I; 0]: the normalized embedding of the token passes, the hidden state does not
            # (config.py: the drafter predicts the target's bigram part)
            d["w_proj"] = torch.cat([torch.eye(cfg.hidden), torch.zeros(cfg.hidden, cfg.hidden)]).to(
                dtype=torch.bfloat16, device=device)
            self.drafter = d

    def bytes(self):
        ts = [self.embed, self.final_norm] + [t for lw in self.layers for t in lw.values()]
        if self.head is not self.embed:
            ts.append(self.head)
        if self.drafter:
            ts += list(self.drafter.values())
        return sum(t.numel() * t.element_size() for t in ts)


def weight_bytes(cfg: ModelConfig, drafter=False):
    """Bytes of the weights Weights(cfg) allocates (for sizing before allocating)."""
    H, D = cfg.heads, cfg.hidden
    layer = (2 * D + cfg.kv_lora_rank + D * (H * cfg.qk_head + cfg.latent) + H * cfg.qk_nope * cfg.kv_lora_rank
             + H * cfg.kv_lora_rank * cfg.v_head + H * cfg.v_head * D + 3 * D * cfg.intermediate)
    n = cfg.vocab * D * (1 if cfg.tie_head else 2) + D + cfg.layers * layer
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
        self.caches = [_aligned(alloc((num_pages + 1, cfg.page_size, cfg.latent), dtype=torch.bfloat16, device=device))
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
        # the attention projected by W_UV (the input of o_proj), written by cgrt's MLA when
        # its plan projects (v_head_dim), else by the W_UV bmm
        self.o = torch.zeros((max_rows, cfg.heads, cfg.v_head), dtype=torch.bfloat16, device=device)
        # the layers' scratch: the same buffers in every layer, so that a layer allocates
        # nothing and every layer launches its work on the same addresses but for its
        # weights and cache (what cgrt.repeat's copies rely on; no allocator in the step)
        self.x = torch.zeros((max_rows, cfg.hidden), dtype=torch.bfloat16, device=device)
        self.qkv = torch.zeros((max_rows, cfg.heads * cfg.qk_head + cfg.latent), dtype=torch.bfloat16,
                               device=device)
        self.gu = torch.zeros((max_rows, 2 * cfg.intermediate), dtype=torch.bfloat16, device=device)
        self.act = torch.zeros((max_rows, cfg.intermediate), dtype=torch.bfloat16, device=device)

    def tensors(self):
        return [self.hidden, self.q, self.attn, self.lse, self.o, self.x, self.qkv, self.gu, self.act]


class Exec:
    """How a step launches its work: seg(fn, *tensors) and mla(plan, ...), on `stream`.
    kernels=True makes segments emulated kernels (cgrt's CPU emulation, inside graph
    callbacks, so that they are captured); otherwise they are plain calls on the current
    (PyTorch) stream."""

    def __init__(self, be, stream, kernels, capturing=False, layer_segments=False, warmup=False):
        self.be, self.stream, self.kernels = be, stream, kernels
        self.capturing, self.layer_segments, self.warmup = capturing, layer_segments, warmup
        self.report = None  # the last repeat()'s cgrt.RepeatReport (layer segments)

    def repeat(self, count, run, buffers):
        """Runs layers 0..count-1 (run(l)); under a cgrt capture with layer_segments, the
        first layer(s) run and cgrt appends copies of them with layer l's buffers
        (buffers(l), cgrt.repeat: compared on layer 1 first, every layer run where the
        comparison fails); a warm-up before such a capture runs those layers only."""
        if not ((self.capturing or self.warmup) and self.layer_segments):
            for l in range(count):
                run(l)
            return
        rep = self.be.repeat(self.stream, count, run, buffers, warmup=self.warmup)
        if not self.warmup:
            self.report = rep

    def seg(self, fn, *tensors):
        if self.kernels:
            self.be.segment(self.stream, fn, *tensors)
        else:
            fn(*tensors)

    def step_begin(self, io, B):
        """Called once per step before the layers (per-step attention metadata)."""

    def mla(self, plan, q, kv, block_table, seq_lens, out, lse, rows, scale, proj=None):
        """The attention of one layer; returns the tensor holding its output: `out`, the
        latent [rows, heads, 512], or where the plan projects steps of this many rows
        (MlaPlan.for_rows: cgrt's value projection after the merge, cgrt_mla_vproj) and
        proj = (o, w_uv) is given, o [rows, heads, v_head] = the latent x W_UV."""
        p = plan.for_rows(rows)
        if p.v_head_dim and proj is not None:
            p.decode(self.stream, q, kv, block_table, seq_lens, proj[0], lse, rows, scale, proj[1])
            return proj[0]
        plan.decode(self.stream, q, kv, block_table, seq_lens, out, lse, rows, scale)
        return out


class PeerExec(Exec):
    """The same step with attention by a peer library (bench/peers/mla_peers.py: FlashMLA
    or FlashInfer) instead of cgrt: PyTorch work as plain calls on the current stream
    (GPU only), the peer's per-step plan once per step, then peer.run per layer on the
    same q / cache / output buffers (q [B, 1, H, 576], out [B, 1, H, 512]; no LSE)."""

    def __init__(self, be, peer, heads):
        super().__init__(be, None, kernels=False)
        self.peer, self.heads = peer, heads

    def step_begin(self, io, B):
        # FlashMLA's plan is device work (captured with the step); FlashInfer's is host
        # work, made before each replay instead (TorchGraphs.step), never under capture
        if self.peer.plan_is_device_work or not torch.cuda.is_current_stream_capturing():
            self.peer.plan(io["block_table"][:B], io["seq_lens"][:B], self.heads, 1, False)

    def mla(self, plan, q, kv, block_table, seq_lens, out, lse, rows, scale, proj=None):
        # the peers' attention ends at the latent output: the W_UV bmm follows
        B, H = q.shape[0], q.shape[1]
        if self.peer.name == "flashmla":  # it allocates its output: use it, no copy into `out`
            o = self.peer.run(q.view(B, 1, H, q.shape[2]), kv, block_table[:B], seq_lens[:B], scale, False)
            return o.view(B, H, o.shape[-1])
        self.peer.run(q.view(B, 1, H, q.shape[2]), kv, block_table[:B], seq_lens[:B], scale, False,
                      out=out.view(B, 1, H, out.shape[2]))
        return out


class Model:
    """The target decoder (and optionally the drafter) over given weights and caches."""

    def __init__(self, cfg: ModelConfig, weights: Weights, kv: KVCache, act: Activations, max_pos,
                 draft_kv: KVCache = None, draft_act: Activations = None):
        self.cfg, self.w, self.kv, self.act = cfg, weights, kv, act
        self.draft_kv, self.draft_act = draft_kv, draft_act
        self.cos, self.sin = rope_tables(cfg, max_pos, weights.embed.device)

    # ---- segments (each writes its results into the tensors it is given) ----
    # The step is lean: per layer RMSNorm, the q / kv_a projection, the absorbed q_nope x
    # W_UK written straight into q[:, :, :512] (strided bmm output), ONE kernel for the
    # latent RMSNorm + RoPE + KV-cache write + q_pe into MLA's q (last before MLA: see
    # _pre_attn), MLA, the W_UV bmm reading
    # MLA's output in place and writing o in [rows, heads, v_head] order, o_proj with the
    # residual add in the GEMM (addmm_, beta 1), RMSNorm, gate/up, SiLU x up (one kernel),
    # down with the residual add in the GEMM: 11 kernels + MLA's per layer.
    def _embed(self, tokens, hidden):
        torch.index_select(self.w.embed, 0, tokens, out=hidden)

    # The per-layer segments are fixed functions that take the layer's weights as tensors
    # (never closures over one layer's): every layer launches the same work but for its
    # buffers, which is what lets a capture copy a layer for the others (cgrt.repeat).
    _PRE_W = ("attn_norm", "w_qkv", "w_uk", "kv_norm")
    _POST_W = ("w_uv_t", "w_o", "mlp_norm", "w_gate_up", "w_down")

    def _pre_attn(self, hidden, positions, slots, kv, q_out, xbuf, qkvbuf, attn_norm, w_qkv, w_uk, kv_norm):
        cfg = self.cfg
        H, nope, R, qk = cfg.heads, cfg.qk_nope, cfg.kv_lora_rank, cfg.qk_head
        B = hidden.shape[0]
        x = rms_norm_into(hidden, attn_norm, cfg.rms_eps, xbuf)
        qkv = torch.mm(x, w_qkv, out=qkvbuf)
        q_nope = qkv[:, :H * qk].view(B, H, qk)[..., :nope].transpose(0, 1)  # [H, B, nope], no copy
        torch.bmm(q_nope, w_uk, out=q_out[:, :, :R].transpose(0, 1))  # straight into q
        # last before the MLA: it writes neither seq_lens nor the block table and lets
        # the MLA split launch early (programmatic_launch 2, engine.py)
        rope_kv_write(qkv, positions, slots, self.cos, self.sin, kv_norm, cfg.rms_eps, kv, q_out,
                      self._trash_slot(kv), H, qk, nope)

    def _trash_slot(self, kv):
        """The trash slot of a cache: its last page (KVCache)."""
        return (kv.shape[0] - 1) * kv.shape[1]

    def _post_attn(self, attn, hidden, obuf, xbuf, gubuf, abuf, w_uv_t, w_o, mlp_norm, w_gate_up, w_down):
        cfg = self.cfg
        H, vh = cfg.heads, cfg.v_head
        B = attn.shape[0]
        if attn.shape[-1] == vh:  # projected by cgrt's MLA already (cgrt_mla_vproj): attn is obuf
            o = attn
        else:
            o = obuf
            torch.bmm(attn.transpose(0, 1), w_uv_t, out=o.transpose(0, 1))  # [H, B, v] into [B, H, v]
        hidden.addmm_(o.view(B, H * vh), w_o)
        x = rms_norm_into(hidden, mlp_norm, cfg.rms_eps, xbuf)
        gu = torch.mm(x, w_gate_up, out=gubuf)
        a = silu_mul_into(gu, abuf)
        hidden.addmm_(a, w_down)

    def _head(self, hidden, out_hidden, out_tokens):
        x = rms_norm_into(hidden, self.w.final_norm, self.cfg.rms_eps, torch.empty_like(hidden))
        logits = torch.mm(x, self.w.head.t())
        torch.argmax(logits, dim=-1, out=out_tokens)
        out_hidden.copy_(hidden)

    def _layer(self, ex, lw, kv_cache, trash_slot, act, io, plan, B):
        assert trash_slot == self._trash_slot(kv_cache)
        ex.seg(self._pre_attn, act.hidden[:B], io["positions"][:B], io["slot_mapping"][:B], kv_cache, act.q[:B],
               act.x[:B], act.qkv[:B], *[lw[k] for k in self._PRE_W])
        # where cgrt's plan projects (steps of few rows), MLA writes o_proj's input itself:
        # no W_UV bmm after it (_post_attn sees the v_head-wide output)
        attn = ex.mla(plan, act.q[:B], kv_cache, io["block_table"], io["seq_lens"], act.attn[:B], act.lse[:B], B,
                      self.cfg.softmax_scale, proj=(act.o[:B], lw["w_uv_t"]))
        ex.seg(self._post_attn, attn, act.hidden[:B], act.o[:B], act.x[:B], act.gu[:B], act.act[:B],
               *[lw[k] for k in self._POST_W])

    # ---- steps ----
    def forward(self, ex: Exec, io, B, plan):
        """One target decode step over B rows. io: token_ids int64, positions int64,
        slot_mapping int64, seq_lens int32, block_table int32 [reqs, max_blocks] (row-level:
        one row per request in decode), out_tokens int64, out_hidden bf16."""
        act = self.act
        # the buffers once (a cgrt Batch looks each name up): the layers take them from here
        io = {k: io[k] for k in ("token_ids", "positions", "slot_mapping", "block_table", "seq_lens", "out_tokens",
                                 "out_hidden")}
        ex.step_begin(io, B)
        ex.seg(self._embed, io["token_ids"][:B], act.hidden[:B])
        layers, caches = self.w.layers, self.kv.layer_cache
        ex.repeat(len(layers), lambda l: self._layer(ex, layers[l], caches[l], self.kv.trash_slot, act, io, plan, B),
                  lambda l: list(layers[l].values()) + [caches[l]])
        ex.seg(self._head, act.hidden[:B], io["out_hidden"][:B], io["out_tokens"][:B])

    def _draft_in(self, dw):
        cfg = self.cfg
        D = cfg.hidden

        def fn(tokens, hidden_in, hidden):
            B = tokens.shape[0]
            u = torch.empty((B, 2 * D), dtype=hidden.dtype, device=hidden.device)
            rms_norm_into(self.w.embed.index_select(0, tokens), dw["enorm"], cfg.rms_eps, u[:, :D])
            rms_norm_into(hidden_in, dw["hnorm"], cfg.rms_eps, u[:, D:])
            torch.mm(u, dw["w_proj"], out=hidden)

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
