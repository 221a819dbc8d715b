"""The model served through cgrt graph sets: static buffers, warm-up (reserve, lock), the
step callables of the decode, draft and verify sets, and eager references of each.

Graph sets (all replayed on one stream, in order):
  decode   target decode, one row per request (capture sizes: vLLM's, up to max_num_seqs);
  draft    the MTP drafter; cgrt_graphs_draft runs k drafter steps in one graph launch
           (draft_steps = k), the metadata advanced on the device between steps; its last
           step also lays out the verify batch (tokens, lengths, positions, block rows);
  verify   the target over k + 1 single-token rows per request (causal: row j of a
           request has its own seq_len, L + j, in decode mode; cgrt's non-causal
           CGRT_GRAPH_BLOCK rows cannot verify and causal block rows do not exist yet),
           then the acceptance on the device (a seeded synthetic rule, see _accept) and
           the advance of the requests' lengths, positions, last token and hidden state.
So one speculative iteration is two graph launches and no host synchronization.

Row-level metadata (seq_lens, positions, slot_mapping) is written inside each graph by
cgrt's metadata kernel from the request-level inputs (req_seq_lens, req_positions,
block_table), padding rows inert (seq_len 0, slot -1). The eager references compute the
same with PyTorch (meta_prepare / meta_advance below).
"""
import time

import torch

import backend as cg
import fused
from config import ModelConfig, vllm_capture_sizes
from model import Activations, Exec, KVCache, Model, Weights

ROW_META = ("seq_lens", "positions", "slot_mapping")


def meta_prepare(req_seq_lens, req_positions, block_table, seq_lens, positions, slot_mapping, n, B, page):
    """PyTorch version of cgrt_graph_meta_prepare (decode mode): rows < n from their request,
    rows n..B-1 inert."""
    dev = seq_lens.device
    mb = block_table.shape[1]
    real = torch.arange(B, device=dev) < n
    pos = req_positions[:B]
    bi = torch.div(pos, page, rounding_mode="floor")
    ok = real & (pos >= 0) & (bi < mb)
    blk = block_table[:B].gather(1, bi.clamp(0, mb - 1)[:, None]).squeeze(1).long()
    ok = ok & (blk >= 0)
    slot_mapping[:B] = torch.where(ok, blk * page + pos % page, torch.full_like(pos, -1))
    seq_lens[:B] = torch.where(real, req_seq_lens[:B], torch.zeros_like(req_seq_lens[:B]))
    positions[:B] = torch.where(real, pos, torch.zeros_like(pos))


def meta_advance(block_table, seq_lens, positions, slot_mapping, n, B, max_model_len, page):
    """PyTorch version of cgrt_graph_meta_advance: rows < min(n, B) with seq_len > 0 move on
    by one token."""
    m = min(n, B)
    mb = block_table.shape[1]
    s = seq_lens[:m]
    live = s > 0
    pos = positions[:m] + 1
    bi = torch.div(pos, page, rounding_mode="floor")
    blk = block_table[:m].gather(1, bi.clamp(0, mb - 1)[:, None]).squeeze(1).long()
    slot = torch.where((bi < mb) & (blk >= 0), blk * page + pos % page, torch.full_like(pos, -1))
    seq_lens[:m] = torch.where(live, torch.clamp(s + 1, max=max_model_len), s)
    positions[:m] = torch.where(live, pos, positions[:m])
    slot_mapping[:m] = torch.where(live, slot, slot_mapping[:m])


def io_buffers(cfg: ModelConfig, n, max_blocks, device):
    """Static buffers of one graph set (n requests = n rows in decode mode)."""
    z = lambda shape, dt: torch.zeros(shape, dtype=dt, device=device)  # noqa: E731
    return {
        "token_ids": z((n,), torch.int64),
        "req_seq_lens": z((n,), torch.int32),
        "req_positions": z((n,), torch.int64),
        "block_table": z((n, max_blocks), torch.int32),
        "seq_lens": z((n,), torch.int32),
        "positions": z((n,), torch.int64),
        "slot_mapping": torch.full((n,), -1, dtype=torch.int64, device=device),
        "out_tokens": z((n,), torch.int64),
        "out_hidden": z((n, cfg.hidden), torch.bfloat16),
    }


DIRS = {"token_ids": cg.IN, "req_seq_lens": cg.IN, "req_positions": cg.IN, "block_table": cg.IN,
        "seq_lens": cg.INOUT, "positions": cg.INOUT, "slot_mapping": cg.INOUT, "out_tokens": cg.OUT,
        "out_hidden": cg.OUT}


class Engine:
    def __init__(self, be, cfg: ModelConfig, max_num_seqs, max_model_len, num_pages, spec_k=0, spec_seqs=0,
                 kv_distinct=None, checked=False, alpha=None, log_width=512, stream=None, progress=print,
                 decode_sizes=None, device_patch=True, pdl=True, vproj=True, layer_segments=True):
        cfg.check()
        if spec_k < 0:
            raise ValueError("spec_k: 0 (no speculative decoding) or >= 1 draft tokens per iteration")
        self.be, self.cfg, self.progress = be, cfg, progress
        dev = be.device
        self.S, self.max_model_len, self.page = max_num_seqs, max_model_len, cfg.page_size
        self.MB = -(-max_model_len // cfg.page_size)
        # spec_k: draft tokens per iteration; the plans and activations are sized for it,
        # and set_spec_k(k) switches to any k <= spec_k later (new draft / verify sets)
        self.k, self.k_max, self.Ss = spec_k, spec_k, (spec_seqs if spec_k else 0)
        self.Sv = self.Ss * (spec_k + 1)
        self.max_rows = max(self.S, self.Sv)
        self.alpha = alpha
        self.stream = stream  # torch stream the sets replay on (GPU); None: cgrt's own
        # the sets' moved kernel nodes are rewritten on the device from a pinned mailbox (no
        # driver call per node; WHILE draft graphs and the emulation patch on the host)
        self.device_patch = int(bool(device_patch))
        # capture layers 0 and 1 per bucket and append the others as copies (cgrt.repeat);
        # layer_reports: rows of the bucket -> its cgrt.RepeatReport, per captured set
        self.layer_segments = bool(layer_segments)
        self.layer_reports = {}
        self.checked = checked
        t0 = time.perf_counter()
        self.weights = Weights(cfg, dev, with_drafter=bool(spec_k))
        self.kv = KVCache(cfg, num_pages, cfg.layers, dev, distinct=kv_distinct)
        self.act = Activations(cfg, self.max_rows, dev)
        self.draft_kv = KVCache(cfg, num_pages, 1, dev) if spec_k else None
        self.draft_act = Activations(cfg, self.Ss, dev) if spec_k else None
        self.model = Model(cfg, self.weights, self.kv, self.act, max_model_len + 1, self.draft_kv, self.draft_act)
        why = fused.warmup(cfg, dev)  # Triton compiles here, before any capture
        if why:
            self.progress(f"fused kernels: the PyTorch versions ({why})")
        self.progress(f"weights {self.weights.bytes() / 2**30:.2f} GiB, KV caches "
                      f"{self.kv.bytes() / 2**30:.2f} GiB ({self.kv.distinct} distinct for {cfg.layers} layers, "
                      f"{num_pages} pages of {cfg.page_size} tokens), built in {time.perf_counter() - t0:.1f} s")

        # ---- warm-up: every reservation at its worst case, then lock ----
        # programmatic_launch: MLA's split and combine kernels start while the kernel before
        # them finishes (programmatic dependent launch) and wait on the device; 2: the
        # kernel right before each MLA call (the RoPE + KV-cache write, model.py) writes
        # neither seq_lens nor the block table, so the split reads them and schedules the
        # step before its wait, while that kernel runs
        self.pdl = 2 if pdl is True else int(pdl)  # True: 2; or 0, 1, 2 as the option
        # vproj: steps of few rows (those that merge through the combine kernel) run a
        # second plan with v_head_dim: MLA applies W_UV itself after its merge (the value
        # projection reads W_UV while the combine runs) and writes o_proj's input, with no
        # W_UV bmm in the step (backend.MlaPlan.pair_projection)
        self.vproj = bool(vproj)
        mk = dict(heads=cfg.heads, max_model_len=max_model_len, page_size=cfg.page_size,
                  max_blocks_per_seq=self.MB, programmatic_launch=self.pdl)
        self.plan = be.mla_plan(max_num_seqs=self.max_rows, lane=cg.LANE_TARGET, **mk)
        if self.vproj:
            self.plan.pair_projection(be.mla_plan(max_num_seqs=self.max_rows, lane=cg.LANE_TARGET,
                                                  v_head_dim=cfg.v_head, **mk))
        self.dplan = None
        if spec_k:
            self.dplan = be.mla_plan(max_num_seqs=self.Ss, lane=cg.LANE_DRAFT, **mk)
            if self.vproj:
                self.dplan.pair_projection(be.mla_plan(max_num_seqs=self.Ss, lane=cg.LANE_DRAFT,
                                                       v_head_dim=cfg.v_head, **mk))
        be.lock()

        self.dec = io_buffers(cfg, self.S, self.MB, dev)
        self.ref = {"out_tokens": torch.zeros_like(self.dec["out_tokens"]),
                    "out_hidden": torch.zeros_like(self.dec["out_hidden"])}
        if spec_k:
            self._spec_buffers(log_width)
        self.decode_set = self.draft_set = self.verify_set = None
        self.decode_sizes = decode_sizes or vllm_capture_sizes(self.S)
        if checked:
            for i, c in enumerate(self.kv.caches + (self.draft_kv.caches if spec_k else [])):
                be.register(c, f"kv_cache[{i}]")
            for t in self.act.tensors() + (self.draft_act.tensors() if spec_k else []):
                be.register(t, "activations")
            # the sets' static buffers too: checked replay refuses a buffer outside memory
            # the driver or cgrt knows (on the emulation host memory is known once registered)
            statics = dict(self.dec)
            if spec_k:
                statics.update({"v_" + k: t for k, t in self.ver.items()})
                statics.update({"s_req_seq_lens": self.sL, "s_req_positions": self.sP, "s_block_table": self.sbt})
                statics.update({"d_" + k: t for k, t in self.dmeta.items()})
            for k, t in statics.items():
                be.register(t, f"buffer {k}")

    # ---- speculative decoding state ----
    def _spec_buffers(self, log_width):
        cfg, dev, S, k = self.cfg, self.be.device, self.Ss, self.k
        z = lambda shape, dt: torch.zeros(shape, dtype=dt, device=dev)  # noqa: E731
        self.sL = z((S,), torch.int32)          # context length including the last token x
        self.sP = z((S,), torch.int64)          # position of x
        self.sx = z((S,), torch.int64)          # last token (input of the next iteration)
        self.sh = z((S, cfg.hidden), torch.bfloat16)  # target hidden state of the row that gave x
        self.sbt = z((S, self.MB), torch.int32)
        self.dmeta = {"seq_lens": z((S,), torch.int32), "positions": z((S,), torch.int64),
                      "slot_mapping": torch.full((S,), -1, dtype=torch.int64, device=dev)}
        self.d_tokens = z((k, S), torch.int64)
        self.d_hidden = z((k, S, cfg.hidden), torch.bfloat16)
        self.ver = io_buffers(cfg, self.Sv, self.MB, dev)
        self.log_width = log_width
        self.out_log = z((S, log_width), torch.int64)
        self.cursor = z((S,), torch.int64)
        self.acc_sum = z((S,), torch.int64)
        self.match_sum = z((S,), torch.int64)
        self.iters = z((1,), torch.int64)
        g = torch.Generator(device=dev)
        g.manual_seed(self.cfg.seed + 7)
        self.n_unif = 64
        self.unif = torch.rand((self.n_unif, S, k), generator=g, device=dev)
        self.alpha_t = torch.full((1,), -1.0 if self.alpha is None else float(self.alpha), dtype=torch.float32,
                                  device=dev)

    def set_alpha(self, alpha):
        """Acceptance rule of the next iterations (no recapture: the graphs read alpha_t):
        None, the real greedy rule; a float in [0, 1], the forced rate (benchmarks)."""
        self.alpha = alpha
        self.alpha_t.fill_(-1.0 if alpha is None else float(alpha))

    def set_spec_k(self, k):
        """Speculative decoding with k <= spec_k draft tokens from now on: new spec buffers;
        the draft and verify sets of the previous k are closed (capture_spec makes new
        ones). The plans' reservations (made for spec_k) serve every smaller k."""
        if not 1 <= k <= self.k_max:
            raise ValueError(f"k {k}: the engine serves 1..{self.k_max} draft tokens")
        if self.checked:
            raise ValueError("set_spec_k: an engine with checked replay keeps the k it was built with "
                             "(its registered buffers are those of that k)")
        for s in (self.draft_set, self.verify_set):
            if s is not None:
                s.close()
                if s in self.be.sets:
                    self.be.sets.remove(s)
        self.draft_set = self.verify_set = None
        alpha = self.alpha
        self.k, self.Sv = k, self.Ss * (k + 1)
        self._spec_buffers(self.log_width)
        self.set_alpha(alpha)

    def spec_state(self):
        return {"L": self.sL, "P": self.sP, "x": self.sx, "h": self.sh, "log": self.out_log, "cursor": self.cursor,
                "acc": self.acc_sum, "match": self.match_sum, "iters": self.iters}

    # ---- step callables ----
    def _ex(self, stream, b=None):
        return Exec(self.be, stream, kernels=self.be.emulated, capturing=bool(b is not None and b.capturing),
                    layer_segments=self.layer_segments, warmup=bool(b is not None and b.warmup))

    def _forward(self, ex, b, what):
        self.model.forward(ex, b, b.padded_rows, self.plan)
        if ex.report is not None:
            self.layer_reports[(what, b.padded_rows)] = ex.report

    def _decode_step(self, stream, b):
        self._forward(self._ex(stream, b), b, "decode")

    def _expand(self, L, P, x, dtok, bt, vL, vP, vtok, vbt):
        """Lays out the verify batch: request r becomes rows r*(k+1) + j, j = 0..k, with
        token (x, d_1..d_k)[j], position P + j, length L + j and the request's block row."""
        k1 = self.k + 1
        R = L.shape[0]
        j = torch.arange(k1, device=L.device)
        vL.view(R, k1).copy_(L[:, None] + j.to(L.dtype))
        vP.view(R, k1).copy_(P[:, None] + j)
        vtok.view(R, k1)[:, 0].copy_(x)
        vtok.view(R, k1)[:, 1:].copy_(dtok.t())
        vbt.view(R, k1, -1).copy_(bt[:, None, :].expand(R, k1, bt.shape[1]))

    def _accept(self, T, Hh, D, unif, alpha, iters, x, h, L, P, log, cursor, acc, match):
        """Acceptance and advance on the device, no host synchronization.

        The rule is chosen on the device by `alpha` (a one-value fp32 tensor, set_alpha):
        Real rule (alpha < 0, the default): greedy verification. Row j of request r
        holds the target's greedy token T[r, j] after (x, d_1..d_j); draft d_j is
        accepted while it equals T[r, j-1] and every draft before it was accepted, so a =
        the number of leading matches (`match` sums the same count). The request emits
        T[r, 0..a] -- d_1..d_a (equal to T[r, 0..a-1]) and the bonus token T[r, a] --
        which is exactly what plain greedy decoding emits from the same state.

        Forced rule (0 <= alpha <= 1, for benchmarks: random weights make the drafter
        disagree with the target): draft j is accepted when u[iteration mod 64, r, j-1] <
        alpha for it and every draft before it (u: a seeded uniform table on the device);
        the request emits d_1..d_a and T[r, a].

        Rollback of the rejected drafts: the request advances its length, position and
        next KV slot by a + 1 only, and continues from the bonus token and row a's hidden
        state. The KV rows that verify rows a+1..k (and the drafter's later steps) wrote
        past the new length lie at positions the next iteration writes again before any
        row attends to them (lengths bound attention), so nothing else is undone."""
        k, k1 = self.k, self.k + 1
        R = x.shape[0]
        T = T.view(R, k1)
        Dm = D.t()
        m = (Dm == T[:, :k]).long().cumprod(1).sum(1)
        u = unif.index_select(0, iters.remainder(self.n_unif)).squeeze(0)[:R]
        forced = (u < alpha).long().cumprod(1).sum(1)
        a = torch.where(alpha >= 0, forced, m)  # alpha < 0: the real rule
        a1 = a[:, None]
        bonus = T.gather(1, a1)
        x.copy_(bonus.squeeze(1))
        h.copy_(Hh.view(R, k1, -1).gather(1, a1[:, :, None].expand(R, 1, Hh.shape[-1])).squeeze(1))
        E = torch.cat([Dm, T[:, k:]], dim=1).scatter(1, a1, bonus)
        j = torch.arange(k1, device=x.device)[None, :]
        W = log.shape[1]
        idx = cursor[:, None] + j
        idx = torch.where((j <= a1) & (idx < W - 1), idx, torch.full_like(idx, W - 1))
        log.scatter_(1, idx, E)
        L.add_((a + 1).to(L.dtype))
        P.add_(a + 1)
        cursor.add_(a + 1)
        acc.add_(a)
        match.add_(m)
        iters.add_(1)

    @staticmethod
    def _draft_io(b):
        return {"seq_lens": b["d_seq_lens"], "positions": b["d_positions"], "slot_mapping": b["d_slot_mapping"],
                "block_table": b["s_block_table"]}

    def _draft_step(self, stream, b):
        ex = self._ex(stream)
        i, B = b.draft_step, b.padded_rows
        if b.while_body:
            raise RuntimeError("the drafter step depends on draft_step: WHILE bodies are not supported")
        if self.k == 1:  # a plain decode set: one drafter step per launch
            i = 0
        tok_in = self.sx if i == 0 else self.d_tokens[i - 1]
        hid_in = self.sh if i == 0 else self.d_hidden[i - 1]
        self.model.draft_forward(ex, tok_in, hid_in, self._draft_io(b), B, self.dplan, self.d_tokens[i],
                                 self.d_hidden[i])
        if i == self.k - 1:
            self._expand_seg(ex, b, B)

    def _expand_seg(self, ex, t, B):
        V, Bk = self.ver, B * (self.k + 1)
        ex.seg(self._expand, t["s_req_seq_lens"][:B], t["s_req_positions"][:B], self.sx[:B], self.d_tokens[:, :B],
               t["s_block_table"][:B], V["req_seq_lens"][:Bk], V["req_positions"][:Bk], V["token_ids"][:Bk],
               V["block_table"][:Bk])

    def _verify_step(self, stream, b):
        ex = self._ex(stream, b)
        B = b.padded_rows
        self._forward(ex, b, "verify")
        self._accept_seg(ex, b, B)

    def _accept_seg(self, ex, t, B):
        R = B // (self.k + 1)
        ex.seg(self._accept, t["out_tokens"][:B], t["out_hidden"][:B], self.d_tokens[:, :R], self.unif, self.alpha_t,
               self.iters,
               self.sx[:R], self.sh[:R], self.sL[:R], self.sP[:R], self.out_log[:R], self.cursor[:R],
               self.acc_sum[:R], self.match_sum[:R])

    # ---- graph sets ----
    def _stream_handle(self):
        return None if self.stream is None else self.be.stream_handle(self.stream)

    def _meta(self, prefix=""):
        m = {k: prefix + k for k in ("req_seq_lens", "req_positions", "block_table") + ROW_META}
        m.update(block_size=self.page, max_blocks_per_seq=self.MB)
        return m

    def new_decode_set(self, sizes=None, warmup_runs=1, warmup_once=1, serial_capture=0, device_patch=None, **extra):
        """A decode graph set over the engine's buffers (not captured yet). By default one
        eager warm-up for the whole bucket set (before the largest bucket: the step's lazy
        initialisation happens there) and instantiation on cgrt's worker thread while the
        next bucket captures."""
        bufs = [(n, t, DIRS[n]) for n, t in self.dec.items()]
        return self.be.graph_set(
            self._decode_step, bufs, max_num_seqs=self.S, max_model_len=self.max_model_len,
            capture_sizes=sizes or self.decode_sizes, meta=self._meta(), checked_replay=int(self.checked),
            stream=self._stream_handle(), num_heads=self.cfg.heads,
            device_patch=self.device_patch if device_patch is None else int(bool(device_patch)),
            warmup_runs=warmup_runs, warmup_once=warmup_once, serial_capture=serial_capture, **extra)

    def capture_decode(self, sizes=None, account_pool=False, **options):
        """Creates and captures the decode set; seconds. account_pool: log the private
        pool's growth per bucket (GraphSet.pool_log); options: new_decode_set's (e.g.
        device_launch=1)."""
        self.decode_set = self.new_decode_set(sizes, **options)
        if account_pool:
            self.decode_set.account_pool()
        t0 = time.perf_counter()
        self.decode_set.capture()
        return time.perf_counter() - t0

    def capture_spec(self):
        if not self.k:
            raise RuntimeError("the engine was built without speculative decoding (spec_k 0)")
        k = self.k
        dbufs = [("s_req_seq_lens", self.sL, cg.IN), ("s_req_positions", self.sP, cg.IN),
                 ("s_block_table", self.sbt, cg.IN)] + [("d_" + n, self.dmeta[n], cg.INOUT) for n in ROW_META]
        dmeta = {"req_seq_lens": "s_req_seq_lens", "req_positions": "s_req_positions",
                 "block_table": "s_block_table", "seq_lens": "d_seq_lens", "positions": "d_positions",
                 "slot_mapping": "d_slot_mapping", "block_size": self.page, "max_blocks_per_seq": self.MB}
        self.draft_set = self.be.graph_set(
            self._draft_step, dbufs, max_num_seqs=self.Ss, max_model_len=self.max_model_len,
            capture_sizes=vllm_capture_sizes(self.Ss), meta=dmeta, draft_steps=k if k >= 2 else 0,
            checked_replay=int(self.checked),
            stream=self._stream_handle(), num_heads=self.cfg.heads, device_patch=self.device_patch, warmup_once=1)
        vbufs = [(n, t, DIRS[n]) for n, t in self.ver.items()]
        self.verify_set = self.be.graph_set(
            self._verify_step, vbufs, max_num_seqs=self.Sv, max_model_len=self.max_model_len,
            capture_sizes=vllm_capture_sizes(self.Sv, multiple_of=k + 1), meta=self._meta(),
            checked_replay=int(self.checked), stream=self._stream_handle(), num_heads=self.cfg.heads,
            device_patch=self.device_patch, warmup_once=1)
        t0 = time.perf_counter()
        self.draft_set.capture()
        t1 = time.perf_counter()
        self.verify_set.capture()
        return t1 - t0, time.perf_counter() - t1

    # ---- eager references (same segments, same padded row counts, plain calls) ----
    def eager_ex(self):
        return Exec(self.be, None if self.be.emulated else self.be.stream_handle(), kernels=False)

    def eager_decode(self, inputs, n, B, out=None):
        """The decode step eagerly: `inputs` are the request-level tensors (token_ids,
        req_seq_lens, req_positions, block_table); results go to `out` (default self.ref)."""
        d = self.dec
        meta_prepare(inputs["req_seq_lens"], inputs["req_positions"], inputs["block_table"], d["seq_lens"],
                     d["positions"], d["slot_mapping"], n, B, self.page)
        io = {"token_ids": inputs["token_ids"], "block_table": inputs["block_table"]}
        io.update({m: d[m] for m in ROW_META})
        io.update(out or self.ref)
        self.model.forward(self.eager_ex(), io, B, self.plan)

    def eager_spec_iteration(self, n, Bd, Bv):
        """One speculative iteration eagerly, at the graphs' padded sizes Bd (draft) and Bv."""
        ex = self.eager_ex()
        dm, V, k = self.dmeta, self.ver, self.k
        meta_prepare(self.sL, self.sP, self.sbt, dm["seq_lens"], dm["positions"], dm["slot_mapping"], n, Bd, self.page)
        io = {"seq_lens": dm["seq_lens"], "positions": dm["positions"], "slot_mapping": dm["slot_mapping"],
              "block_table": self.sbt}
        for i in range(k):
            if i:
                meta_advance(self.sbt, dm["seq_lens"], dm["positions"], dm["slot_mapping"], n, Bd,
                             self.max_model_len, self.page)
            self.model.draft_forward(ex, self.sx if i == 0 else self.d_tokens[i - 1],
                                     self.sh if i == 0 else self.d_hidden[i - 1], io, Bd, self.dplan,
                                     self.d_tokens[i], self.d_hidden[i])
        self._expand_seg(ex, {"s_req_seq_lens": self.sL, "s_req_positions": self.sP, "s_block_table": self.sbt}, Bd)
        meta_prepare(V["req_seq_lens"], V["req_positions"], V["block_table"], V["seq_lens"], V["positions"],
                     V["slot_mapping"], n * (k + 1), Bv, self.page)
        self.model.forward(ex, V, Bv, self.plan)
        self._accept_seg(ex, V, Bv)

    def draft(self, n):
        """The k drafter steps: one cgrt_graphs_draft launch (k >= 2) or one step (k = 1)."""
        if self.k >= 2:
            self.draft_set.draft(n)
        else:
            self.draft_set.step(n)

    def spec_iteration(self, n):
        """One speculative iteration through the graphs: two launches, no synchronization."""
        self.draft(n)
        self.verify_set.step(n * (self.k + 1))


def pages_for(tokens, page):
    return -(-tokens // page)


def summarize_ms(xs):
    if not xs:
        return {}
    s = sorted(xs)
    pick = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "mean": sum(s) / len(s), "min": s[0], "n": len(s)}


def tensor_equal(a, b):
    return a.shape == b.shape and bool(torch.equal(a, b))


def max_abs_diff(a, b):
    return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0

