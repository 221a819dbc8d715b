"""cgrt.mla_decode on host arrays on the emulation: equals a numpy reference, and a graph
set whose Python step calls it replays (with rebinding) bit for bit what eager gives."""
import math

import pytest

import cgrt

np = pytest.importorskip("numpy", reason="numpy is optional: the MLA reference needs it")

HEADS, PAGE, PAGES, MBPS = 16, 64, 4, 4
SCALE = 1.0 / math.sqrt(576)


def bf16(x):
    """float32 -> bfloat16 bits (round to nearest even), as uint16."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def aligned(shape, dtype, align=64):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n].view(dtype).reshape(shape)


def make_inputs(rng, rows):
    q = aligned((rows, HEADS, 576), np.uint16)
    q[...] = bf16(rng.standard_normal((rows, HEADS, 576)))
    kv = aligned((PAGES, PAGE, 576), np.uint16)
    kv[...] = bf16(rng.standard_normal((PAGES, PAGE, 576)))
    bt = aligned((rows, MBPS), np.int32)
    for r in range(rows):
        bt[r] = rng.permutation(PAGES)
    return q, kv, bt


def reference(q, kv, bt, seq_lens):
    rows = q.shape[0]
    out = np.zeros((rows, HEADS, 512), np.float32)
    lse = np.full((rows, HEADS), -np.inf, np.float32)
    qf, kvf = f32(q).astype(np.float64), f32(kv).astype(np.float64)
    for r in range(rows):
        n = int(seq_lens[r])
        if n <= 0:
            continue
        toks = np.array([kvf[bt[r, t // PAGE], t % PAGE] for t in range(n)])  # [n, 576]
        s = qf[r] @ toks.T * SCALE  # [heads, n]
        m = s.max(axis=1, keepdims=True)
        p = np.exp(s - m)
        out[r] = (p @ toks[:, :512]) / p.sum(axis=1, keepdims=True)
        lse[r] = (m[:, 0] + np.log(p.sum(axis=1)))
    return out, lse


def outputs(rows):
    return aligned((rows, HEADS, 512), np.uint16), aligned((rows, HEADS), np.float32)


def decode(plan, q, kv, bt, sl, out, lse, rows=None):
    B = cgrt.reinterpret
    cgrt.mla_decode(plan, B(q, "bfloat16"), B(kv, "bfloat16"), bt, sl, B(out, "bfloat16"), lse, SCALE,
                    num_rows=rows)


def test_mla_decode_equals_the_reference(rt):
    rng = np.random.default_rng(3)
    plan = rt.mla_plan(max_num_seqs=3, heads=HEADS, max_model_len=PAGES * PAGE, page_size=PAGE)
    assert plan.info()["q_heads"] == HEADS and plan.max_blocks_per_seq == MBPS
    q, kv, bt = make_inputs(rng, 3)
    sl = aligned((3,), np.int32)
    sl[:] = [200, 37, 0]
    out, lse = outputs(3)
    decode(plan, q, kv, bt, sl, out, lse)
    rt.synchronize()
    ref_out, ref_lse = reference(q, kv, bt, sl)
    np.testing.assert_allclose(f32(out), ref_out, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse[:2], ref_lse[:2], rtol=1e-3, atol=1e-3)
    assert not f32(out[2]).any() and np.isneginf(lse[2]).all()  # padding row


def test_mla_decode_with_the_value_projection(rt):
    """v_head_dim: out = bf16(O) x w_uv per head, [rows, heads, v]; w_uv required by such a
    plan and refused by a plain one, before any launch."""
    rng = np.random.default_rng(5)
    V = 64
    plan = rt.mla_plan(max_num_seqs=3, heads=HEADS, max_model_len=PAGES * PAGE, page_size=PAGE, v_head_dim=V)
    assert plan.v_head_dim == V and plan.info()["latent_bytes"] == 3 * HEADS * 512 * 2
    q, kv, bt = make_inputs(rng, 3)
    sl = aligned((3,), np.int32)
    sl[:] = [200, 37, 0]
    w = aligned((HEADS, 512, V), np.uint16)
    w[...] = bf16(rng.standard_normal((HEADS, 512, V)) * 0.05)
    out, lse = aligned((3, HEADS, V), np.uint16), aligned((3, HEADS), np.float32)
    B = cgrt.reinterpret
    cgrt.mla_decode(plan, B(q, "bfloat16"), B(kv, "bfloat16"), bt, sl, B(out, "bfloat16"), lse, SCALE,
                    w_uv=B(w, "bfloat16"))
    rt.synchronize()
    ref_lat, ref_lse = reference(q, kv, bt, sl)
    ref = np.einsum("rhk,hkv->rhv", f32(bf16(ref_lat)).astype(np.float64), f32(w).astype(np.float64))
    np.testing.assert_allclose(f32(out), ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse[:2], ref_lse[:2], rtol=1e-3, atol=1e-3)
    assert not f32(out[2]).any()  # padding row
    with pytest.raises(ValueError, match="w_uv"):  # a projecting plan without w_uv
        cgrt.mla_decode(plan, B(q, "bfloat16"), B(kv, "bfloat16"), bt, sl, B(out, "bfloat16"), lse, SCALE)
    plain = rt.mla_plan(max_num_seqs=3, heads=HEADS, max_model_len=PAGES * PAGE, page_size=PAGE)
    lat_out, _ = outputs(3)
    with pytest.raises(ValueError, match="v_head_dim"):  # w_uv for a plan that does not project
        cgrt.mla_decode(plain, B(q, "bfloat16"), B(kv, "bfloat16"), bt, sl, B(lat_out, "bfloat16"), lse, SCALE,
                        w_uv=B(w, "bfloat16"))
    with pytest.raises(cgrt.InvalidArgumentError):  # not a multiple of 32
        rt.mla_plan(max_num_seqs=1, heads=HEADS, max_model_len=64, v_head_dim=48)


def e4m3(b):
    """e4m3 bytes -> float64 (bias 7, subnormals; the bytes used here hold no NaN)."""
    b = b.astype(np.int64)
    e, m = (b >> 3) & 15, b & 7
    v = np.where(e == 0, m / 512.0, (1 + m / 8.0) * np.exp2(e - 7.0))
    return np.where(b & 0x80, -v, v)


def test_mla_decode_fp8_cache_equals_the_reference(rt):
    rng = np.random.default_rng(4)
    plan = rt.mla_plan(max_num_seqs=3, heads=HEADS, max_model_len=PAGES * PAGE, page_size=PAGE,
                       kv_dtype="fp8_e4m3", kv_scale=0.5)
    assert plan.info()["split_kernel"] == "cgrt_mla_split_t64_fp8" and plan.options["kv_scale"] == 0.5
    q, _, bt = make_inputs(rng, 3)
    kv8 = aligned((PAGES, PAGE, 576), np.uint8)
    kv8[...] = (rng.integers(0, 2, kv8.shape) << 7) | rng.integers(0, 64, kv8.shape)
    sl = aligned((3,), np.int32)
    sl[:] = [200, 37, 0]
    out, lse = outputs(3)
    cgrt.mla_decode(plan, cgrt.reinterpret(q, "bfloat16"), kv8, bt, sl, cgrt.reinterpret(out, "bfloat16"), lse,
                    SCALE)
    rt.synchronize()
    deq = aligned((PAGES, PAGE, 576), np.uint16)
    deq[...] = bf16(e4m3(kv8) * 0.5)  # exact in bf16
    ref_out, ref_lse = reference(q, deq, bt, sl)
    np.testing.assert_allclose(f32(out), ref_out, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse[:2], ref_lse[:2], rtol=1e-3, atol=1e-3)
    assert not f32(out[2]).any() and np.isneginf(lse[2]).all()  # padding row
    with pytest.raises(ValueError):
        rt.mla_plan(max_num_seqs=1, heads=HEADS, max_model_len=64, kv_dtype="fp16")


def test_graph_set_with_mla_step_replays_what_eager_gives(rt):
    rng = np.random.default_rng(5)
    rows = 4
    plan = rt.mla_plan(max_num_seqs=rows, heads=HEADS, max_model_len=PAGES * PAGE, page_size=PAGE)
    q, kv, bt = make_inputs(rng, rows)
    q2 = aligned(q.shape, np.uint16)
    q2[...] = bf16(rng.standard_normal(q.shape))
    sl = aligned((rows,), np.int32)
    out, lse = outputs(rows)

    def step(stream, b):
        n = b.padded_rows
        B = cgrt.reinterpret
        cgrt.mla_decode(plan, B(b["q"], "bfloat16"), B(kv, "bfloat16"), b["block_table"], b["seq_lens"],
                        B(b["out"], "bfloat16"), b["lse"], SCALE, num_rows=n, stream=stream)

    gs = rt.graphs(step, max_num_seqs=rows, max_model_len=PAGES * PAGE, capture_sizes=[1, 2, 4],
                   buffers=[("q", q, "in"), ("block_table", bt, "in"), ("seq_lens", sl, "in"),
                            ("out", out, "out"), ("lse", lse, "out")])
    gs.capture()
    for k, (reqs, lens, qq) in enumerate([(1, [150], q), (3, [20, 256, 64], q2), (4, [1, 2, 3, 250], q),
                                          (2, [64, 65], q2)]):
        sl[:] = 0
        sl[:reqs] = lens
        gs.step(reqs, bind={"q": qq})
        rt.synchronize()
        bucket = gs.bucket_rows(reqs)
        e_out, e_lse = outputs(rows)
        decode(plan, qq, kv, bt, sl, e_out, e_lse, rows=bucket)
        rt.synchronize()
        assert np.array_equal(out[:bucket], e_out[:bucket]), f"step {k}"
        assert np.array_equal(lse[:bucket].view(np.uint32), e_lse[:bucket].view(np.uint32)), f"step {k}"
    assert gs.stats()["replays"] == 4
