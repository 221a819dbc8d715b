"""Graph sets whose step is a Python callable: capture per bucket, replay with rebinding;
a captured step equals eager (emulation, Python reference kernel)."""
import ctypes
import random

import pytest

import cgrt
import kernels
from conftest import fill as _fill
from conftest import floats as _floats
from conftest import needs_mem_api


@pytest.fixture
def axpy(rt):
    kernels.register()
    return rt.load_module(b"image").function("pytest_axpy")


@pytest.mark.parametrize("replay_mode", ["pointer_update", "copy_in", "exec_update"])
def test_captured_step_equals_eager_with_rebinding(rt, axpy, replay_mode):
    n = 32
    xs = rt.workspace_request("xs", [((n,), "float32")] * 4)
    y, y_eager = rt.workspace_request("ys", [((n,), "float32")] * 2)
    seen = []

    def step(stream, b):
        seen.append((b.capturing, b.padded_rows))
        axpy.launch(1, 32, [ctypes.c_float(0.5), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=n, max_model_len=64, buffers=[("x", xs[0], "in"), ("y", y, "inout")],
                   capture_sizes=[1, 4, 16, 32], replay_mode=replay_mode)
    gs.capture()
    assert sorted(b["rows"] for b in gs.buckets()) == [1, 4, 16, 32]
    assert all(b["captured"] for b in gs.buckets())
    assert sorted(r for c, r in seen if c) == [1, 4, 16, 32]
    rng = random.Random(7)
    for i, x in enumerate(xs):
        _fill(rt, x, [rng.uniform(-4, 4) for _ in range(n)])
    start = [rng.uniform(-1, 1) for _ in range(n)]
    _fill(rt, y, start)
    _fill(rt, y_eager, start)
    steps_before = seen[:]
    for k in range(12):
        reqs = rng.randint(1, n)
        x = xs[rng.randrange(len(xs))]
        bind = {"x": x} if k % 3 else None
        if bind is None:  # no rebinding: the step uses the current binding
            x = gs._bound[0]
        gs.step(reqs, bind=bind)
        rt.stream_synchronize(gs.stream)
        rows = gs.bucket_rows(reqs)
        assert rows >= reqs and rows in (1, 4, 16, 32)
        axpy.launch(1, 32, [ctypes.c_float(0.5), x, y_eager, ctypes.c_int32(rows)])  # eager
        rt.synchronize()
        assert _floats(y) == _floats(y_eager), f"step {k}: {reqs} requests, bucket {rows}"
    if replay_mode == "exec_update":  # a rebinding re-captures the bucket: never eager
        assert all(c for c, _ in seen[len(steps_before):]) and len(seen) > len(steps_before)
    else:  # every step was a replay: the callable did not run again
        assert seen == steps_before
    stats = gs.stats()
    assert stats["steps"] == 12 and stats["replays"] == 12 and stats["eager_fallbacks"] == 0
    if replay_mode == "pointer_update":
        assert stats["rebinds"] > 0 and stats["nodes_patched"] > 0


def test_device_launched_steps_equal_eager_after_synchronize(rt, axpy):
    """device_launch=1: each step is triggered through pinned memory and launched by the
    set's launcher (the emulation's C reference of it); synchronize() waits for it."""
    n = 16
    xs = rt.workspace_request("dl_xs", [((n,), "float32")] * 2)
    y, y_eager = rt.workspace_request("dl_ys", [((n,), "float32")] * 2)

    def step(stream, b):
        axpy.launch(1, 32, [ctypes.c_float(0.5), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=n, max_model_len=64, buffers=[("x", xs[0], "in"), ("y", y, "inout")],
                   capture_sizes=[4, 16], device_launch=1, device_patch=1)
    gs.capture()
    assert [b["device_launch"] for b in gs.buckets()] == [1, 1]
    rng = random.Random(3)
    for x in xs:
        _fill(rt, x, [rng.uniform(-4, 4) for _ in range(n)])
    start = [rng.uniform(-1, 1) for _ in range(n)]
    _fill(rt, y, start)
    _fill(rt, y_eager, start)
    for k in range(8):
        reqs = rng.randint(1, n)
        x = xs[k % 2]
        gs.step(reqs, bind={"x": x})
        gs.synchronize()
        rows = gs.bucket_rows(reqs)
        axpy.launch(1, 32, [ctypes.c_float(0.5), x, y_eager, ctypes.c_int32(rows)])
        rt.synchronize()
        assert _floats(y) == _floats(y_eager), f"step {k}: {reqs} requests, bucket {rows}"
    stats = gs.stats()
    assert stats["device_launches"] == 8 and stats["launcher_starts"] >= 1
    with pytest.raises(cgrt.InvalidArgumentError, match="device_launch needs replay_mode"):
        rt.graphs(step, max_num_seqs=n, max_model_len=64, buffers=[("x", xs[0]), ("y", y)],
                  replay_mode="copy_in", device_launch=1)


def test_batch_addresses_follow_the_bindings(rt, axpy):
    x, x2, y = rt.workspace_request("ab", [((8,), "float32")] * 3)
    got = []

    def step(stream, b):
        got.append((b.addresses, b["x"].ptr, b.stream))
        axpy.launch(1, 1, [ctypes.c_float(1.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=8, max_model_len=8, buffers=[("x", x), ("y", y)], capture_sizes=[8])
    gs.capture()
    assert got[0][0] == (x.ptr, y.ptr) and got[0][1] == x.ptr and got[1][2] != 0
    gs.step(2, bind={"x": x2})
    gs.recapture(8)  # the step runs again with the buffer bound now
    assert got[-1][0] == (x2.ptr, y.ptr) and got[-1][1] == x2.ptr


def test_graph_set_on_host_arrays():
    np = pytest.importorskip("numpy", reason="numpy is optional: host-array test needs it")
    kernels.register()
    with cgrt.Runtime(driver="emulated") as rt:
        fn = rt.load_module(b"image").function("pytest_axpy")
        x = np.arange(16, dtype=np.float32)
        x2 = np.full(16, 3, dtype=np.float32)
        y = np.zeros(16, dtype=np.float32)

        def step(stream, b):
            fn.launch(1, 1, [ctypes.c_float(2.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

        gs = rt.graphs(step, max_num_seqs=16, max_model_len=8, buffers=[("x", x, "in"), ("y", y)],
                       capture_sizes=[4, 16], warmup_runs=0)
        gs.capture()
        gs.step(3)
        rt.synchronize()
        assert y[:4].tolist() == [0, 2, 4, 6] and not y[4:].any()
        gs.step(5, bind={"x": x2})
        rt.synchronize()
        assert y[:4].tolist() == [6, 8, 10, 12] and y[4:16].tolist() == [6] * 12
        with pytest.raises(TypeError, match="'<f8' is not one cgrt knows"):
            gs.step(1, bind={"x": np.zeros(16)})


@needs_mem_api
def test_checked_replay_refuses_a_freed_and_reallocated_buffer(rt, axpy):
    x = rt.empty(16, "float32")
    y = rt.empty(16, "float32")
    rt.memset(y, 0, y.nbytes)

    def step(stream, b):
        axpy.launch(1, 1, [ctypes.c_float(1.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=4, max_model_len=8, buffers=[("x", x), ("y", y)], capture_sizes=[4],
                   checked_replay=True)
    gs.capture()
    gs.step(1)
    x2 = rt.empty(16, "float32")
    gs.step(1, bind={"x": x2})
    addr = x2.ptr
    del x2  # the set keeps the bound array alive: nothing is freed
    gs.step(1)
    raw = rt.alloc(64)
    gs.step(1, bind={"x": raw})
    rt.free(raw)
    with pytest.raises(cgrt.StalePointerError):
        gs.step(1)
    assert addr
