"""The reduced DeepSeek-V2-Lite-shaped model on cgrt's CPU emulation (no GPU needed):
captured steps equal eager steps bit for bit (with rebinding and padding), absorbed MLA
through cgrt_mla_decode matches textbook MLA in fp32, checked replay refuses a step that
points into freed memory, and the speculative loop (draft loop + verify + acceptance)
through graphs equals its eager run.

Needs PyTorch (CPU is enough) and libcgrt.so (`bazel build //:libcgrt.so`, or
$CGRT_LIBRARY); each test is skipped with the reason when either is missing, and the
tests of the model when the runtime the environment selects is not the emulation
(CGRT_DRIVER=cuda, or auto with a GPU).
Run: python3 -m pytest examples/deepseek_v2_lite -q
"""
import os
import sys
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backend as cg  # noqa: E402
from config import REDUCED, vllm_capture_sizes, with_layers  # noqa: E402
from engine import Engine, pages_for  # noqa: E402
from model import Exec, apply_rope, reference_attention_unabsorbed, reference_mla, rms_norm  # noqa: E402

try:
    cg.find_library()
    _NO_LIB = None
except cg.cgrt.LibraryNotFoundError as e:
    _NO_LIB = str(e)

pytestmark = pytest.mark.skipif(_NO_LIB is not None, reason=f"libcgrt.so is not built: {_NO_LIB}")


@pytest.fixture
def be():
    """The runtime the environment selects ($CGRT_DRIVER, else auto); the tests need it to
    be the emulation: their device memory is torch CPU tensors and their torch segments
    run as emulated kernels, which a runtime on the real driver cannot launch."""
    try:
        b = cg.Backend()
    except cg.cgrt.Error as e:
        pytest.skip(f"no runtime (CGRT_DRIVER={os.environ.get('CGRT_DRIVER') or 'auto'}): {e}")
    if not b.emulated:
        driver = b.info["driver"]
        b.close()
        pytest.skip(f"the runtime is on the {driver} driver (CGRT_DRIVER="
                    f"{os.environ.get('CGRT_DRIVER') or 'auto'}), not the emulation these tests run on "
                    "(torch CPU tensors as device memory); run them with CGRT_DRIVER=emulated")
    yield b
    b.close()


def _say(*a):
    pass


def _requests(eng, n, ctxs, seed):
    """Request-level inputs for n requests with the given contexts on scattered pages."""
    cfg = eng.cfg
    g = torch.Generator()
    g.manual_seed(seed)
    perm = torch.randperm(eng.kv.num_pages, generator=g).tolist()
    bt = torch.zeros((eng.S, eng.MB), dtype=torch.int32)
    used = 0
    for i, c in enumerate(ctxs):
        need = pages_for(c + 1, cfg.page_size)
        pages = perm[used:used + need]
        used += need
        bt[i, :need] = torch.tensor(pages, dtype=torch.int32)
        eng.kv.fill_pages(pages, g, cfg.kv_init_std)
    lens = torch.zeros(eng.S, dtype=torch.int32)
    lens[:n] = torch.tensor([c + 1 for c in ctxs], dtype=torch.int32)
    pos = torch.zeros(eng.S, dtype=torch.int64)
    pos[:n] = torch.tensor(ctxs, dtype=torch.int64)
    tok = torch.randint(0, cfg.vocab, (eng.S,), generator=g)
    return {"token_ids": tok, "req_seq_lens": lens, "req_positions": pos, "block_table": bt}


def test_capture_sizes_follow_vllm():
    assert vllm_capture_sizes(8) == [1, 2, 4, 8]
    assert vllm_capture_sizes(40) == [1, 2, 4, 8, 16, 24, 32, 40]
    assert vllm_capture_sizes(16, multiple_of=4) == [4, 8, 16]
    assert vllm_capture_sizes(272)[-3:] == [256, 272] or vllm_capture_sizes(272)[-2:] == [256, 272]


def test_weight_bytes_formula():
    from model import Weights, weight_bytes
    for drafter in (False, True):
        assert weight_bytes(REDUCED, drafter) == Weights(REDUCED, torch.device("cpu"), drafter).bytes()
    assert 4.5e9 < weight_bytes(__import__("config").FULL, True) < 5.5e9
    tied = replace(REDUCED, tie_head=True)
    assert weight_bytes(tied) == Weights(tied, torch.device("cpu")).bytes() == weight_bytes(REDUCED) - 2 * 512 * 256


def test_untied_head_makes_greedy_decoding_move():
    """The bigram part of the model (the head over the normalized embedding of the fed
    token, which dominates the random model's final hidden state): tied, its argmax is the
    fed token itself for nearly every token, so greedy decoding would repeat it; with the
    model's own head almost never. The drafter's W_proj passes that embedding ([I; 0])."""
    from model import Weights
    for tie, lo, hi in ((True, 0.9, 1.0), (False, 0.0, 0.05)):
        cfg = replace(REDUCED, tie_head=tie)
        w = Weights(cfg, torch.device("cpu"), with_drafter=True)
        x = rms_norm(w.embed, w.final_norm, cfg.rms_eps).float()
        same = float((torch.argmax(x @ w.head.float().t(), dim=-1) == torch.arange(cfg.vocab)).float().mean())
        assert lo <= same <= hi, (tie, same)
        D = cfg.hidden
        assert torch.equal(w.drafter["w_proj"].float(), torch.cat([torch.eye(D), torch.zeros(D, D)]))


def test_captured_step_equals_eager_with_rebinding(be):
    eng = Engine(be, REDUCED, 8, 300, 200, progress=_say)
    eng.capture_decode()
    assert [b["rows"] for b in eng.decode_set.buckets()] == [8, 4, 2, 1]
    outs = []
    for step, ctxs in enumerate([[37], [5, 180, 64], [17, 90, 3, 250, 33], [37]]):
        n = len(ctxs)
        inputs = _requests(eng, n, ctxs, seed=step)  # new tensors each step: every input buffer moves
        B = eng.decode_set.bucket_rows(n)
        assert B >= n
        eng.decode_set.step(n, bind=inputs)
        got_tok = eng.dec["out_tokens"][:B].clone()
        got_h = eng.dec["out_hidden"][:B].clone()
        eng.eager_decode(inputs, n, B)
        assert torch.equal(got_tok, eng.ref["out_tokens"][:B]), f"step {step}: tokens differ from eager"
        assert torch.equal(got_h, eng.ref["out_hidden"][:B]), f"step {step}: hidden states differ from eager"
        assert torch.isfinite(got_h.float()).all()
        outs.append(got_h[:n].clone())
        # padding rows are inert: no KV written for them (slot -1 -> trash page), seq_len 0
        assert int(eng.dec["seq_lens"][n:B].abs().sum()) == 0
        assert bool((eng.dec["slot_mapping"][n:B] == -1).all())
    st = eng.decode_set.stats()
    # the engine's sets patch moved nodes on the device (device_patch, its default)
    assert st["replays"] == 4 and st["rebinds"] == 4 and st["device_nodes_patched"] > 0 and st["nodes_patched"] == 0
    # the replay computes from its inputs: the same request at another step (other KV
    # contents, since the pages were refilled) gives another result
    assert not torch.equal(outs[0], outs[3])


def test_layer_segments_capture_two_layers_and_copy_the_rest(be):
    """Under capture the engine runs layers 0 and 1, cgrt compares them and appends the
    others as copies with their own weights and caches (cgrt.repeat); the graph holds as
    many nodes as with every layer captured, and replays to the eager result."""
    cfg = with_layers(REDUCED, 5)
    full = Engine(be, cfg, 4, 300, 200, progress=_say, layer_segments=False)
    full.capture_decode()
    nodes_full = full.decode_set.stats()["nodes"]
    full_runs = []
    pre_full = full.model._pre_attn
    full.model._pre_attn = lambda *a: (full_runs.append(1), pre_full(*a))
    full.capture_decode()
    assert len(full_runs) == cfg.layers  # without segments the warm-up runs every layer
    assert full.layer_reports == {}
    eng = Engine(be, cfg, 4, 300, 200, progress=_say)
    runs = []
    pre = eng.model._pre_attn  # counts the layers that run (eagerly: the warm-up's)
    eng.model._pre_attn = lambda *a: (runs.append(1), pre(*a))
    eng.capture_decode()
    assert len(runs) == 2, "the warm-up runs the layers the capture runs: 0 and 1"
    reps = eng.layer_reports
    assert sorted(rows for _, rows in reps) == [1, 2, 4]
    for key, r in reps.items():
        assert r.fallback is None, f"{key}: {r.fallback}"
        assert (r.run_layers, r.appended) == (2, 3), key
        assert r.segment_nodes >= 3, key  # two torch segments and the MLA at least
    assert eng.decode_set.stats()["nodes"] == nodes_full
    inputs = _requests(eng, 3, [40, 7, 150], seed=11)
    eng.decode_set.step(3, bind=inputs)
    B = eng.decode_set.bucket_rows(3)
    got_tok, got_h = eng.dec["out_tokens"][:B].clone(), eng.dec["out_hidden"][:B].clone()
    eng.eager_decode(inputs, 3, B)
    assert torch.equal(got_tok, eng.ref["out_tokens"][:B])
    assert torch.equal(got_h, eng.ref["out_hidden"][:B])
    # every layer's cache got its own row: the copies wrote layer l's cache, not layer 1's
    slot = int(eng.dec["slot_mapping"][0])
    rows = [eng.kv.layer_cache[l].view(-1, cfg.latent)[slot].float() for l in range(cfg.layers)]
    assert all(not torch.equal(rows[a], rows[b]) for a in range(cfg.layers) for b in range(a))


def test_device_launched_decode_equals_eager(be):
    """The decode set with device_launch: each step triggered through pinned memory and
    launched by cgrt's launcher (the emulation's reference of it), waited for with
    synchronize(), equals eager; every step is a device launch."""
    eng = Engine(be, REDUCED, 8, 300, 200, progress=_say)
    eng.capture_decode(device_launch=1)
    assert all(b["device_launch"] for b in eng.decode_set.buckets())
    for step, ctxs in enumerate([[37], [5, 180, 64], [17, 90, 3, 250, 33]]):
        n = len(ctxs)
        inputs = _requests(eng, n, ctxs, seed=10 + step)
        B = eng.decode_set.bucket_rows(n)
        eng.decode_set.step(n, bind=inputs)
        eng.decode_set.synchronize()  # ordered with no stream: wait before reading
        got_tok = eng.dec["out_tokens"][:B].clone()
        got_h = eng.dec["out_hidden"][:B].clone()
        eng.eager_decode(inputs, n, B)
        assert torch.equal(got_tok, eng.ref["out_tokens"][:B]), f"step {step}: tokens differ from eager"
        assert torch.equal(got_h, eng.ref["out_hidden"][:B]), f"step {step}: hidden states differ from eager"
    st = eng.decode_set.stats()
    assert st["device_launches"] == 3 and st["replays"] == 3 and st["last_device_step_ns"] > 0


def test_value_projection_in_mla_equals_the_bmm(be):
    """vproj: cgrt's MLA applies W_UV after its merge (cgrt_mla_vproj) and writes o_proj's
    input; the step then runs no W_UV bmm. Its captured step equals its eager step bit for
    bit, and both agree with the engine that runs the bmm (the same weights and inputs)."""
    proj = Engine(be, REDUCED, 8, 300, 200, progress=_say)  # the default; first: its latent reservation
    plain = Engine(be, REDUCED, 8, 300, 200, progress=_say, vproj=False)
    below = proj.plan.proj_below  # steps below the counters threshold project
    assert proj.plan.for_rows(1).v_head_dim == REDUCED.v_head and plain.plan.for_rows(1).v_head_dim == 0
    assert proj.plan.for_rows(below).v_head_dim == 0 and 1 < below <= 8, below
    assert proj.plan.proj.info["latent_bytes"] == 8 * REDUCED.heads * 512 * 2
    proj.capture_decode()
    for step, ctxs in enumerate([[37, 5], [17, 90, 3, 250, 33]]):
        n = len(ctxs)
        B = proj.decode_set.bucket_rows(n)
        got = []
        for eng in (proj, plain):
            inputs = _requests(eng, n, ctxs, seed=40 + step)  # the same pages and values in both
            eng.eager_decode(inputs, n, B)
            got.append(eng.ref["out_hidden"][:n].float().clone())
            if eng is proj:
                eng.decode_set.step(n, bind=inputs)
                assert torch.equal(eng.dec["out_hidden"][:B], eng.ref["out_hidden"][:B]), f"step {step}"
                assert torch.equal(eng.dec["out_tokens"][:B], eng.ref["out_tokens"][:B]), f"step {step}"
        # the projection sums the bf16 latent in fp32 like the bmm; only the order differs
        err = float((got[0] - got[1]).abs().max() / got[1].abs().max())
        assert err < 2e-2, f"step {step}: vproj against the W_UV bmm, relative error {err:.3g}"
        assert not torch.equal(got[0], torch.zeros_like(got[0]))


def test_absorbed_mla_matches_textbook_mla(be):
    cfg = REDUCED
    eng = Engine(be, cfg, 4, 300, 120, progress=_say)
    ctxs = [40, 130, 7]
    n = len(ctxs)
    inputs = _requests(eng, n, ctxs, seed=11)
    B = 4
    eng.eager_decode(inputs, n, B)
    # layer 0 once more, by hand, from a known hidden state
    g = torch.Generator()
    g.manual_seed(3)
    hidden = (torch.randn((B, cfg.hidden), generator=g)).to(torch.bfloat16)
    lw, kv = eng.weights.layers[0], eng.kv.layer_cache[0]
    d = eng.dec
    q = torch.zeros_like(eng.act.q[:B])
    eng.model._pre_attn(hidden, d["positions"][:B], d["slot_mapping"][:B], kv, q, torch.empty_like(hidden),
                        torch.empty_like(eng.act.qkv[:B]), *[lw[k] for k in eng.model._PRE_W])
    attn = torch.zeros_like(eng.act.attn[:B])
    lse = torch.zeros_like(eng.act.lse[:B])
    Exec(be, None, kernels=False).mla(eng.plan, q, kv, inputs["block_table"], d["seq_lens"], attn, lse, B,
                                      cfg.softmax_scale)
    ref_out, ref_lse = reference_mla(q, kv, inputs["block_table"], d["seq_lens"], cfg.softmax_scale, cfg.page_size)
    assert (attn.float() - ref_out).abs().max() < 0.02
    assert torch.allclose(lse[:n], ref_lse[:n], atol=1e-3, rtol=1e-3)
    assert bool((attn[n:] == 0).all()) and bool(torch.isinf(lse[n:]).all())
    o_abs = torch.bmm(attn.float().transpose(0, 1), lw["w_uv_t"].float()).transpose(0, 1)  # [B, H, v_head]
    x = rms_norm(hidden, lw["attn_norm"], cfg.rms_eps)
    qh = (x @ lw["w_qkv"])[:, :cfg.heads * cfg.qk_head].view(B, cfg.heads, cfg.qk_head)
    cos = eng.model.cos.index_select(0, d["positions"][:B])
    sin = eng.model.sin.index_select(0, d["positions"][:B])
    q_pe = apply_rope(qh[..., cfg.qk_nope:], cos, sin)
    for r in range(n):
        L = ctxs[r] + 1
        pages = inputs["block_table"][r, :pages_for(L, cfg.page_size)].long()
        rows = kv.index_select(0, pages).reshape(-1, cfg.latent)[:L]
        o_ref = reference_attention_unabsorbed(cfg, lw, qh[r, :, :cfg.qk_nope], q_pe[r], rows)
        err = (o_abs[r] - o_ref).abs().max() / o_ref.abs().max()
        assert err < 0.05, f"row {r}: absorbed vs textbook MLA relative error {err:.3g}"


def test_checked_replay_refuses_freed_kv_cache(be):
    import check_stale
    ok, results = check_stale.run(be, REDUCED)
    assert results and results[0]["status"] == "CGRT_ERROR_STALE_POINTER"
    assert results[0]["outputs_untouched"] and results[0]["replays_added"] == 0
    assert ok


def test_speculative_loop_equals_eager(be):
    import spec
    k, S, iters = 3, 4, 2
    max_model_len = 200 + iters * (k + 1) + 2 * k
    eng = Engine(be, REDUCED, S, max_model_len, pages_for(S * (max_model_len + 32), REDUCED.page_size), spec_k=k,
                 spec_seqs=S, log_width=iters * (k + 1) + 2, progress=_say)
    eng.capture_spec()
    drafts = [b for b in eng.draft_set.buckets() if b["draft"]]
    assert drafts and all(b["captured"] for b in drafts)
    assert all(b["rows"] % (k + 1) == 0 for b in eng.verify_set.buckets())
    import random
    n = 3
    spec.setup_round(eng, random.Random(1), __import__("common").Pages(eng.kv.num_pages, 1), torch.Generator(),
                     n, 200, iters)
    snap = spec.snapshot(eng)
    loops0 = eng.draft_set.stats()["draft_loops"]
    for _ in range(iters):
        eng.spec_iteration(n)
    assert eng.draft_set.stats()["draft_loops"] - loops0 == iters  # one launch per k proposals
    got = spec.snapshot(eng)
    emitted = int(got["cursor"][:n].sum())
    assert emitted == int(got["acc"][:n].sum()) + n * iters
    assert bool((got["L"][:n] - snap["L"][:n] == got["cursor"][:n].to(torch.int32)).all())
    spec.restore(eng, snap)
    Bd, Bv = eng.draft_set.bucket_rows(n), eng.verify_set.bucket_rows(n * (k + 1))
    for _ in range(iters):
        eng.eager_spec_iteration(n, Bd, Bv)
    assert spec.compare(eng, got, spec.snapshot(eng), n) == []


def test_failure_report_names_the_stage_and_ends_with_the_message_head(capsys):
    import common
    common.stage("case x: the step")
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nsecond line\n"
                               "Exception raised from check at CUDAException.cpp:42 (most recent call first):\n"
                               "frame #0: c10::Error::Error(...) (libc10.so)\n"
                               "frame #1: THPVariable_foo (libtorch_python.so)") from inner
    except RuntimeError as e:
        common.report_exception("demo", e)
    out = capsys.readouterr().out.splitlines()
    assert "frame #1: THPVariable_foo (libtorch_python.so)" in out  # the full text first
    tail = out[out.index("==== demo: the exception's first lines:"):]
    assert not any("frame #" in ln for ln in tail)
    assert any("second line" in ln for ln in tail) and any("caused by KeyError: 'inner'" in ln for ln in tail)
    assert out[-1] == ("demo: FAILED during case x: the step: RuntimeError: CUDA error: an illegal memory access "
                       "was encountered")


def _drafter_copies_target(eng, noise):
    """A 1-layer target and a drafter that computes nearly the same function: the drafter's
    layer is the target's, W_proj passes the normalized embedding through (hidden part 0),
    the embedding rows are scaled to RMS 1 (so RMSNorm(embed) ~ embed), and the drafter's
    cache holds the target's prompt KV. Its drafts then mostly equal the target's greedy
    tokens, so the real rule accepts some and rejects others."""
    w = eng.weights
    d, lw = w.drafter, w.layers[0]
    for key, t in lw.items():
        d[key].copy_(t)
    D = eng.cfg.hidden
    d["w_proj"].zero_()
    d["w_proj"][:D].copy_(torch.eye(D, dtype=torch.bfloat16))
    e = w.embed.float()
    w.embed.copy_((e / e.pow(2).mean(-1, keepdim=True).sqrt()).to(torch.bfloat16))
    # a little noise in the drafter's MLP so that some drafts differ from the target's tokens
    g = torch.Generator()
    g.manual_seed(5)
    d["w_down"].add_((torch.randn(d["w_down"].shape, generator=g) * noise * d["w_down"].float().std()).to(torch.bfloat16))


@pytest.mark.parametrize("k", [1, 3])
def test_speculative_real_acceptance_equals_greedy_decode(be, k):
    """Acceptance decided on the device by comparing drafts with the target's greedy
    tokens: the emitted tokens equal plain greedy decoding's, drafts were both accepted and
    rejected (so the rollback path ran), and the graphs equal their eager run."""
    import random

    import common
    import spec
    from config import with_layers
    cfg = with_layers(REDUCED, 1)
    S, iters = 4, 4
    max_model_len = 200 + iters * (k + 1) + 2 * k + 2
    eng = Engine(be, cfg, S, max_model_len, pages_for(S * (max_model_len + 32), cfg.page_size), spec_k=k,
                 spec_seqs=S, log_width=iters * (k + 1) + 2, progress=_say)
    _drafter_copies_target(eng, noise=2.0)
    eng.capture_spec()
    n = 3
    spec.setup_round(eng, random.Random(2), common.Pages(eng.kv.num_pages, 2), torch.Generator(), n, 200, iters)
    eng.draft_kv.caches[0].copy_(eng.kv.caches[0])
    snap = spec.snapshot(eng)
    for _ in range(iters):
        eng.spec_iteration(n)
    got = spec.snapshot(eng)
    acc, emitted = int(got["acc"][:n].sum()), int(got["cursor"][:n].sum())
    assert acc == int(got["match"][:n].sum())  # the real rule accepts exactly the greedy matches
    assert 0 < acc < n * k * iters, f"{acc} of {n * k * iters} drafts accepted: no accept/reject mix"
    assert emitted == acc + n * iters
    assert bool((got["L"][:n] - snap["L"][:n] == got["cursor"][:n].to(torch.int32)).all())
    spec.restore(eng, snap)
    Bd, Bv = eng.draft_set.bucket_rows(n), eng.verify_set.bucket_rows(n * (k + 1))
    for _ in range(iters):
        eng.eager_spec_iteration(n, Bd, Bv)
    assert spec.compare(eng, got, spec.snapshot(eng), n) == []
    spec.restore(eng, snap)
    ref_tok, ref_lg = spec.greedy_reference(eng, snap, n, int(got["cursor"][:n].max()))
    g = spec.compare_with_greedy(got, n, ref_tok, ref_lg)
    assert g["compared"] == emitted and g["mismatches"] == 0, g


def test_forced_acceptance_rate_without_recapture(be):
    """set_alpha switches the captured graphs to the forced rule (benchmarks) and back."""
    import random

    import common
    import spec
    k, S, iters = 2, 2, 6
    max_model_len = 120 + iters * (k + 1) + 2 * k + 2
    eng = Engine(be, REDUCED, S, max_model_len, pages_for(S * (max_model_len + 32), REDUCED.page_size), spec_k=k,
                 spec_seqs=S, log_width=iters * (k + 1) + 2, progress=_say)
    eng.capture_spec()
    spec.setup_round(eng, random.Random(4), common.Pages(eng.kv.num_pages, 4), torch.Generator(), S, 100, iters)
    snap = spec.snapshot(eng)
    eng.set_alpha(1.0)
    for _ in range(iters):
        eng.spec_iteration(S)
    st = spec.snapshot(eng)
    assert int(st["acc"][:S].sum()) == S * k * iters  # every draft forced in
    spec.restore(eng, snap)
    eng.set_alpha(None)
    for _ in range(iters):
        eng.spec_iteration(S)
    st = spec.snapshot(eng)
    assert int(st["acc"][:S].sum()) == int(st["match"][:S].sum())


def test_fused_triton_kernels_match_pytorch_versions_on_gpu():
    """The Triton kernels of fused.py against the PyTorch versions of the same functions
    (which the emulation runs), on the reduced model's sizes; bf16 rounding apart."""
    import fused
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the Triton kernels run on CUDA tensors only")
    if fused.triton is None:
        pytest.skip(f"Triton is not importable: {fused.WHY}")
    why = fused.warmup(REDUCED, torch.device("cuda"))
    assert why is None, why
    cfg, dev = REDUCED, torch.device("cuda")
    g = torch.Generator(device=dev)
    g.manual_seed(7)
    bf = dict(dtype=torch.bfloat16, device=dev)
    B, H, R = 5, cfg.heads, cfg.kv_lora_rank
    x = torch.randn((B, cfg.hidden), generator=g, device=dev).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn((cfg.hidden,), generator=g, device=dev)).to(torch.bfloat16)
    got = fused.rms_norm_into(x, w, cfg.rms_eps, torch.empty_like(x))
    assert (got.float() - fused.rms_norm_ref(x, w, cfg.rms_eps).float()).abs().max() < 0.05
    gu = torch.randn((B, 2 * cfg.intermediate), generator=g, device=dev).to(torch.bfloat16)
    got = fused.silu_mul_into(gu, torch.empty((B, cfg.intermediate), **bf))
    I = cfg.intermediate
    ref = torch.nn.functional.silu(gu[:, :I].float()) * gu[:, I:].float()
    assert (got.float() - ref).abs().max() < 0.05 * (1 + ref.abs().max())
    from model import rope_tables
    cos, sin = rope_tables(cfg, 300, dev)
    qkv = torch.randn((B, H * cfg.qk_head + cfg.latent), generator=g, device=dev).to(torch.bfloat16)
    pos = torch.tensor([0, 7, 150, 299, 42], dtype=torch.int64, device=dev)
    slots = torch.tensor([3, -1, 17, 40, 5], dtype=torch.int64, device=dev)
    kvw = (1 + 0.1 * torch.randn((R,), generator=g, device=dev)).to(torch.bfloat16)
    kv_a, kv_b = torch.zeros((4, cfg.page_size, cfg.latent), **bf), torch.zeros((4, cfg.page_size, cfg.latent), **bf)
    q_a, q_b = torch.zeros((B, H, cfg.latent), **bf), torch.zeros((B, H, cfg.latent), **bf)
    trash = 3 * cfg.page_size
    fused.rope_kv_write(qkv, pos, slots, cos, sin, kvw, cfg.rms_eps, kv_a, q_a, trash, H, cfg.qk_head, cfg.qk_nope)
    fused._rope_kv_torch(qkv, pos, slots, cos, sin, kvw, cfg.rms_eps, kv_b.view(-1, cfg.latent), q_b, trash, H,
                         cfg.qk_head, cfg.qk_nope, R)
    assert (kv_a.float() - kv_b.float()).abs().max() < 0.05
    assert (q_a.float() - q_b.float()).abs().max() < 0.05
    assert bool((kv_a.view(-1, cfg.latent)[trash] != 0).any())  # the padding row went to the trash slot
