"""torch on a GPU: one shared context, mla_decode eager and inside torch.cuda.graph
capture, a graph set whose step runs torch ops, checked replay of a freed buffer.
Skips (with the reason) without torch or a CUDA device."""
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the GPU tests need it)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the torch GPU tests need one", allow_module_level=True)

import cgrt  # noqa: E402
from conftest import needs_mem_api  # noqa: E402

HEADS, PAGE = 16, 64


@pytest.fixture(scope="module")
def grt():
    torch.zeros(1, device="cuda")  # torch's context exists first
    r = cgrt.Runtime(driver="cuda")
    yield r
    r.close()


def _ref(q, kv, bt, sl, scale):
    rows = q.shape[0]
    out = torch.zeros(rows, HEADS, 512, dtype=torch.float32, device=q.device)
    lse = torch.full((rows, HEADS), -math.inf, device=q.device)
    for r in range(rows):
        n = int(sl[r])
        if n <= 0:
            continue
        pages = bt[r, : (n + PAGE - 1) // PAGE].long()
        toks = kv[pages].reshape(-1, 576)[:n].float()
        s = q[r].float() @ toks.T * scale
        lse[r] = torch.logsumexp(s, dim=1)
        out[r] = torch.softmax(s, dim=1) @ toks[:, :512]
    return out, lse


def _inputs(rows, pages=8):
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(rows, HEADS, 576, device="cuda", generator=g).bfloat16()
    kv = torch.randn(pages, PAGE, 576, device="cuda", generator=g).bfloat16()
    bt = torch.stack([torch.randperm(pages, device="cuda", generator=g) for _ in range(rows)]).int()
    sl = torch.randint(1, pages * PAGE, (rows,), device="cuda", generator=g, dtype=torch.int32)
    out = torch.empty(rows, HEADS, 512, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(rows, HEADS, device="cuda")
    return q, kv, bt, sl, out, lse


def test_one_context_shared_with_torch(grt):
    assert grt.info().driver == "cuda"
    t = torch.arange(256, device="cuda", dtype=torch.int32)
    back = bytearray(1024)
    grt.memcpy_dtoh(back, t.data_ptr())  # a torch pointer is valid in cgrt's context
    assert bytes(back) == t.cpu().numpy().tobytes()
    (buf,) = grt.workspace_request("torch.share", [((256,), "int32")])
    grt.memcpy_htod(buf, t.cpu().numpy().tobytes())
    view = torch.as_tensor(buf, device="cuda")  # and a cgrt pointer in torch's
    assert torch.equal(view, t)


def test_mla_decode_eager_and_inside_torch_cuda_graph(grt):
    rows, scale = 4, 1 / math.sqrt(576)
    plan = grt.mla_plan(max_num_seqs=rows, heads=HEADS, max_model_len=8 * PAGE, page_size=PAGE)
    q, kv, bt, sl, out, lse = _inputs(rows)
    cgrt.mla_decode(plan, q, kv, bt, sl, out, lse, scale)  # eager, torch's current stream
    ref_out, ref_lse = _ref(q, kv, bt, sl, scale)
    torch.testing.assert_close(out.float(), ref_out, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-3, atol=1e-3)
    eager = out.clone()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        cgrt.mla_decode(plan, q, kv, bt, sl, out, lse, scale)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        cgrt.mla_decode(plan, q, kv, bt, sl, out, lse, scale)
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
    with pytest.raises(ValueError, match="not contiguous"):
        cgrt.mla_decode(plan, q.transpose(0, 1), kv, bt, sl, out, lse, scale)
    with pytest.raises(TypeError, match="dtype float32"):
        cgrt.mla_decode(plan, q.float(), kv, bt, sl, out, lse, scale)
    with pytest.raises(ValueError, match="host memory"):
        cgrt.mla_decode(plan, q.cpu(), kv, bt, sl, out, lse, scale)


def test_graph_set_with_a_torch_step(grt):
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, 128, device="cuda")
    y = torch.empty(64, 128, device="cuda")

    def step(stream, b):
        assert torch.cuda.current_stream().cuda_stream == stream
        h = torch.relu(b["x"][: b.padded_rows] @ w)  # a temporary from the private pool in capture
        b["y"][: b.padded_rows].copy_(h * 2)

    gs = grt.graphs(step, max_num_seqs=64, max_model_len=64, capture_sizes=[8, 64],
                    buffers=[("x", x, "in"), ("y", y, "out")])
    gs.capture()
    assert gs._pool is not None and gs._pool.uses == 2
    x2 = torch.randn(64, 128, device="cuda")
    for inp in (x, x2, x):
        gs.step(5, bind={"x": inp})
        expect = torch.relu(inp[:8] @ w) * 2
        junk = torch.randn(64, 128, device="cuda")  # eager allocations after replay
        torch.testing.assert_close(y[:8], expect)
        del junk
    gs.close()


def test_prepared_steps_and_pool_growth_per_bucket(grt):
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, 128, device="cuda")
    y = torch.empty(64, 128, device="cuda")

    def step(stream, b):
        h = torch.relu(b["x"][: b.padded_rows] @ w)  # a temporary from the private pool in capture
        b["y"][: b.padded_rows].copy_(h * 2)

    run = torch.cuda.Stream()
    with torch.cuda.stream(run):  # the set replays on torch's current stream: the fast path
        gs = grt.graphs(step, max_num_seqs=64, max_model_len=64, capture_sizes=[8, 64],
                        buffers=[("x", x, "in"), ("y", y, "out")], stream=run.cuda_stream, warmup_once=1)
        gs.account_pool()
        gs.capture()
        log = gs.pool_log()
        assert [r for r, _ in log] == [64, 8]  # largest first
        assert log[0][1] > 0 and log[1][1] >= 0
        segs = sum(seg["total_size"] for seg in torch.cuda.memory_snapshot()
                   if tuple(seg.get("segment_pool_id", ())) == tuple(gs._pool.id))
        assert segs == sum(g for _, g in log)  # the pool's segments, all counted
        ring = [torch.randn(64, 128, device="cuda") for _ in range(3)]
        preps = [gs.prepare({"x": t}) for t in ring]
        for k in range(6):
            preps[k % 3](5)
            expect = torch.relu(ring[k % 3][:8] @ w) * 2
            torch.testing.assert_close(y[:8], expect)
        gs._sync_bound()  # the set's record is brought up to date lazily
        assert gs._bound[0] is ring[2]
    gs.close()


def _torch_graph(pool, stream, x, w, out):
    """A torch.cuda.graph into `pool` whose temporary comes from the pool."""
    g = torch.cuda.CUDAGraph()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, pool=pool, stream=stream):
        out.copy_(torch.relu(x @ w) * 3)
    torch.cuda.current_stream().wait_stream(stream)
    return g


def test_private_pool_use_counts_match_torch_graphs(grt):
    """The set's begin/end/release calls keep torch's pool use counts consistent: torch
    graphs capture after the set (fresh pool, the set's own pool), before and after a set
    sharing their pool, and the pools outlive every destruction order below; a broken
    count fails capture_begin with "use_count > 0 INTERNAL ASSERT FAILED"."""
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, 128, device="cuda")
    y = torch.empty(64, 128, device="cuda")
    z = torch.empty(64, 128, device="cuda")
    side = torch.cuda.Stream()

    def step(stream, b):
        b["y"][: b.padded_rows].copy_(torch.relu(b["x"][: b.padded_rows] @ w) * 2)

    def new_set(**kw):
        gs = grt.graphs(step, max_num_seqs=64, max_model_len=64, capture_sizes=[8, 64],
                        buffers=[("x", x, "in"), ("y", y, "out")], **kw)
        gs.capture()
        return gs

    def check(gs, graphs):
        for g in graphs:
            z.zero_()
            g.replay()
            torch.testing.assert_close(z, torch.relu(x @ w) * 3)
        gs.step(5)
        torch.testing.assert_close(y[:8], torch.relu(x[:8] @ w) * 2)

    # the set's own pool; torch graphs after it into a fresh pool and into the set's pool
    gs = new_set()
    own, fresh = gs._pool.id, torch.cuda.graph_pool_handle()
    graphs = [_torch_graph(p, side, x, w, z) for p in (fresh, fresh, own, own)]
    check(gs, graphs)
    gs.close()  # gives back the set's uses; the torch graphs on `own` keep it live
    graphs.append(_torch_graph(own, side, x, w, z))
    del graphs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    # a handle shared by torch graphs and a set: the first torch graph goes before the set
    shared = torch.cuda.graph_pool_handle()
    g1 = _torch_graph(shared, side, x, w, z)
    gs = new_set(torch_pool=shared)
    check(gs, [g1])
    del g1  # the set keeps the pool live for the next capture
    g2 = _torch_graph(shared, side, x, w, z)
    gs2 = new_set(torch_pool=shared)
    check(gs2, [g2])
    gs.close()
    gs2.close()
    z.zero_()
    g2.replay()  # the last user of the pool, after both sets are gone
    torch.testing.assert_close(z, torch.relu(x @ w) * 3)
    del g2
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


@needs_mem_api
def test_checked_replay_refuses_a_freed_and_reused_torch_buffer(grt):
    x = torch.randn(1 << 20, device="cuda")
    y = torch.zeros(1 << 20, device="cuda")
    reg_x, reg_y = grt.register(x), grt.register(y)

    def step(stream, b):
        b["y"].add_(b["x"])

    gs = grt.graphs(step, max_num_seqs=1, max_model_len=8, capture_sizes=[1], checked_replay=True,
                    buffers=[("x", x), ("y", y)])
    gs.capture()
    gs.step(1)
    raw = grt.alloc(x.numel() * 4)
    gs.step(1, bind={"x": raw})
    grt.free(raw)
    # The case is the reused address (only the buffer id tells): allocate the same size
    # until the driver hands raw's address out again, holding the misses so that they do
    # not come back; a bounded number of tries.
    again, misses = None, []
    for _ in range(64):
        p = grt.alloc(x.numel() * 4)
        if p == raw:
            again = p
            break
        misses.append(p)
    for p in misses:
        grt.free(p)
    if again is None:
        pytest.fail(f"the driver never handed the freed address 0x{raw:x} out again in 64 allocations "
                    f"of {x.numel() * 4} bytes: the freed-and-reused case cannot be made")
    before = y.clone()
    with pytest.raises(cgrt.StalePointerError) as refused:
        gs.step(1)
    assert "reused" in str(refused.value), str(refused.value)  # refused by its buffer id
    torch.cuda.synchronize()
    assert torch.equal(y, before)  # nothing launched
    grt.free(again)
    gs.close()
    reg_x.close()
    reg_y.close()


def test_record_stream_only_when_the_replay_stream_is_not_torchs_current(grt, monkeypatch):
    x = torch.randn(64, 128, device="cuda")
    y = torch.zeros(64, 128, device="cuda")
    side = torch.cuda.Stream()

    def step(stream, b):
        b["y"][: b.padded_rows].copy_(b["x"][: b.padded_rows] * 2)

    gs = grt.graphs(step, max_num_seqs=64, max_model_len=64, capture_sizes=[8, 64],
                    buffers=[("x", x, "in"), ("y", y, "out")], stream=side.cuda_stream)
    gs.capture()
    recorded = []
    original = torch.Tensor.record_stream

    def spy(t, s):
        recorded.append(int(s.cuda_stream))
        return original(t, s)

    monkeypatch.setattr(torch.Tensor, "record_stream", spy)
    # the replay stream is torch's current stream: stream order suffices, nothing recorded
    with torch.cuda.stream(side):
        x2 = torch.full((64, 128), 3.0, device="cuda")
        gs.step(5, bind={"x": x2})
    side.synchronize()
    assert recorded == [] and torch.equal(y[:8], torch.full((8, 128), 6.0, device="cuda"))
    # torch's current stream is another one: ordered both ways, the tensor recorded
    x3 = torch.empty(64, 128, device="cuda")
    x3.fill_(5.0)  # queued on the default stream just before the step: the replay waits for it
    gs.step(5, bind={"x": x3})
    y8 = y[:8].clone()  # the default stream waits for the replay
    torch.cuda.synchronize()
    assert recorded == [side.cuda_stream]
    assert torch.equal(y8, torch.full((8, 128), 10.0, device="cuda"))
    gs.close()
