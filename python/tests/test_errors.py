"""Every bad input raises, before any launch, with the documented exception."""
import ctypes
import math

import pytest

import cgrt
import kernels


def test_runtime_options(rt):
    with pytest.raises(TypeError, match="unknown option"):
        cgrt.Runtime(drivr="emulated")
    with pytest.raises(ValueError, match="driver"):
        cgrt.Runtime(driver="gpu")
    with pytest.raises(cgrt.InvalidArgumentError):
        cgrt.Runtime(driver="emulated", device_ordinal=-1)
    with pytest.raises(cgrt.NoDeviceError):
        cgrt.Runtime(driver="emulated", device_ordinal=7)
    with pytest.raises(cgrt.UnsupportedDeviceError, match="compute capability 8.0"):
        cgrt.Runtime(driver="emulated", emulated_compute_capability=80)


def test_closed_handles_raise(rt):
    ev = rt.event()
    ev.close()
    ev.close()  # a second close is a no-op
    with pytest.raises(cgrt.InvalidHandleError, match="closed"):
        ev.record()
    rt.close()
    with pytest.raises(cgrt.InvalidHandleError):
        rt.synchronize()
    with pytest.raises(cgrt.InvalidHandleError):
        rt.event()


def test_events(rt):
    a, b = rt.event(), rt.event()
    with pytest.raises(TypeError):
        a.elapsed_ms(3)
    with pytest.raises(cgrt.InvalidArgumentError, match="never recorded"):
        a.elapsed_ms(b)
    with pytest.raises(TypeError, match="stream"):
        a.record(stream=1.5)
    with cgrt.Runtime(driver="emulated") as other:
        c = other.event()
        a.record()
        c.record()
        with pytest.raises(cgrt.InvalidArgumentError, match="two runtimes"):
            a.elapsed_ms(c)
    with pytest.raises(cgrt.InvalidHandleError):
        cgrt.lib.cgrt_event_record(None, None)


def test_workspaces_and_copies(rt):
    with pytest.raises(TypeError, match="dtype"):
        rt.workspace_request("w", [((4,), "float64")])
    with pytest.raises(ValueError, match="dimensions"):
        rt.workspace_request("w", [((1,) * 7, "float32")])
    with pytest.raises(cgrt.InvalidArgumentError):
        rt.workspace_request("w", [((-4,), "float32")])
    (buf,) = rt.workspace_request("w", [((16,), "float32")])
    rt.workspace_lock()
    with pytest.raises(cgrt.WorkspaceLockedError, match="'w'"):
        rt.workspace_request("w", [((32,), "float32")])
    assert rt.workspace_request("w", [((8,), "float32")])[0].ptr == buf.ptr
    with pytest.raises(cgrt.InvalidArgumentError):
        rt.memcpy_htod(0, b"abcd")
    with pytest.raises(cgrt.DriverError):  # not memory the emulated driver knows
        rt.memcpy_htod(16, b"abcd")
    with pytest.raises(ValueError, match="read-only"):
        rt.memcpy_dtoh(b"immutable", buf)
    with pytest.raises(ValueError, match="do not fit"):
        rt.memcpy_dtoh(bytearray(4), buf, 8)
    with pytest.raises(TypeError):
        rt.memset(True, 0, 4)
    with pytest.raises(TypeError):
        rt.memcpy_htod(buf, 1234)


def test_tensors():
    with pytest.raises(TypeError, match="expected a torch tensor"):
        cgrt.as_tensor(object(), "x")
    t = cgrt.Tensor(4096, (2, 3), None, "float32", "cpu", None, None, "test")
    from cgrt._tensor import check
    with pytest.raises(TypeError, match="dtype float32, expected int32"):
        check(t, "x", dtype="int32")
    with pytest.raises(ValueError, match=r"shape \[2, 3\], expected \[\*, 4\]"):
        check(t, "x", shape=(None, 4))
    with pytest.raises(ValueError, match="not 8192-byte aligned"):
        check(t, "x", align=8192)
    with pytest.raises(ValueError, match="not contiguous"):
        check(cgrt.Tensor(4096, (2, 3), (1, 2), "float32", "cpu", None, None, "t"), "x")
    with pytest.raises(ValueError, match="host memory"):
        check(t, "x", emulated=False)
    with pytest.raises(ValueError, match="CUDA memory"):
        check(cgrt.Tensor(4096, (1,), None, "float32", "cuda", 0, None, "t"), "x", emulated=True)
    with pytest.raises(ValueError, match="cuda:1"):
        check(cgrt.Tensor(4096, (1,), None, "float32", "cuda", 1, None, "t"), "x", device_index=0)
    with pytest.raises(ValueError, match="null data pointer"):
        check(cgrt.Tensor(0, (1,), None, "float32", "cpu", None, None, "t"), "x")
    with pytest.raises(TypeError, match="4 bytes"):
        cgrt.reinterpret(t, "bfloat16")


def test_modules_and_launches(rt):
    kernels.register()
    with pytest.raises(TypeError, match="image"):
        rt.load_module(b"")
    mod = rt.load_module(b"any image on the emulation")
    with pytest.raises(cgrt.InvalidArgumentError, match="no kernel 'nope'"):
        mod.function("nope")
    fn = mod.function("pytest_axpy")
    (x,) = rt.workspace_request("k", [((4,), "float32")])
    with pytest.raises(TypeError, match="has no size"):
        fn.launch(1, 1, [2.0, x, x, ctypes.c_int32(4)])
    with pytest.raises(ValueError, match="grid"):
        fn.launch(0, 1, [ctypes.c_float(2.0), x, x, ctypes.c_int32(4)])
    with pytest.raises(cgrt.InvalidArgumentError, match="size 0"):
        cgrt.register_emulated_kernel("pytest_bad", [4, 0], lambda call: None)


def _mla_tensors(rt, rows=2, heads=16, pages=2, page=64, mbps=2, dt=None):
    names = [((rows, heads, 576), "bfloat16"), ((pages, page, 576), "bfloat16"), ((rows, mbps), "int32"),
             ((rows,), "int32"), ((rows, heads, 512), "bfloat16"), ((rows, heads), "float32")]
    bufs = rt.workspace_request("mla.args", names)
    for b in bufs:  # zero seq_lens and block table: every row is padding
        rt.memset(b, 0, b.nbytes)
    return bufs


def test_mla(rt):
    with pytest.raises(cgrt.InvalidArgumentError):
        rt.mla_plan(max_num_seqs=2, max_model_len=128)  # heads missing
    with pytest.raises(cgrt.InvalidArgumentError):
        rt.mla_plan(max_num_seqs=2, heads=16, max_model_len=128, page_size=48)
    with pytest.raises(ValueError, match="combine"):
        rt.mla_plan(max_num_seqs=2, heads=16, max_model_len=128, combine="fast")
    plan = rt.mla_plan(max_num_seqs=2, heads=16, max_model_len=128)
    q, kv, bt, sl, out, lse = _mla_tensors(rt)
    plan.decode(q, kv, bt, sl, out, lse, 0.1)  # well-formed (zero seq_lens: padding)
    with pytest.raises(TypeError, match="MlaPlan"):
        cgrt.mla_decode(rt, q, kv, bt, sl, out, lse, 0.1)
    for scale in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="softmax_scale"):
            plan.decode(q, kv, bt, sl, out, lse, scale)
    with pytest.raises(TypeError, match="q: dtype int32"):
        plan.decode(bt, kv, bt, sl, out, lse, 0.1)
    with pytest.raises(TypeError, match="lse: dtype bfloat16"):
        plan.decode(q, kv, bt, sl, out, out, 0.1)
    with pytest.raises(ValueError, match="num_rows 3"):
        plan.decode(q, kv, bt, sl, out, lse, 0.1, num_rows=3)
    with pytest.raises(ValueError, match="num_rows 0"):
        plan.decode(q, kv, bt, sl, out, lse, 0.1, num_rows=0)
    wrong = cgrt.Tensor(q.ptr, (2, 8, 576), None, "bfloat16", "cpu", None, q, "test")
    with pytest.raises(ValueError, match=r"q: shape \[2, 8, 576\], expected \[\*, 16, 576\]"):
        plan.decode(wrong, kv, bt, sl, out, lse, 0.1)
    out1 = cgrt.Tensor(out.ptr, (1, 16, 512), None, "bfloat16", "cpu", None, out, "test")
    with pytest.raises(ValueError, match="out: 1 rows for num_rows 2"):
        plan.decode(q, kv, bt, sl, out1, lse, 0.1)
    odd = cgrt.Tensor(q.ptr + 2, (2, 16, 576), None, "bfloat16", "cpu", None, q, "test")
    with pytest.raises(ValueError, match="q: address .* not 16-byte aligned"):
        plan.decode(odd, kv, bt, sl, out, lse, 0.1)
    strided = cgrt.Tensor(out.ptr, (2, 16, 512), (16 * 512, 1, 16), "bfloat16", "cpu", None, out, "test")
    with pytest.raises(ValueError, match="out: not contiguous"):
        plan.decode(q, kv, bt, sl, strided, lse, 0.1)
    kvbad = cgrt.Tensor(kv.ptr, (2, 32, 576), None, "bfloat16", "cpu", None, kv, "test")
    with pytest.raises(ValueError, match="kv_cache: shape"):
        plan.decode(q, kvbad, bt, sl, out, lse, 0.1)
    cuda = cgrt.Tensor(q.ptr, (2, 16, 576), None, "bfloat16", "cuda", 0, q, "test")
    with pytest.raises(ValueError, match="CUDA memory .* emulated runtime"):
        plan.decode(cuda, kv, bt, sl, out, lse, 0.1)
    short = cgrt.Tensor(sl.ptr, (1,), None, "int32", "cpu", None, sl, "test")
    with pytest.raises(ValueError, match="seq_lens: 1 entries for 2 requests"):
        plan.decode(q, kv, bt, short, out, lse, 0.1)


def _axpy_set(rt, step, **kw):
    (x, y) = rt.workspace_request("g", [((16,), "float32"), ((16,), "float32")])
    return rt.graphs(step, max_num_seqs=4, max_model_len=16, buffers=[("x", x, "in"), ("y", y)],
                     capture_sizes=[4], **kw), x, y


def test_graph_sets(rt):
    with pytest.raises(TypeError, match="callable"):
        rt.graphs(None, max_num_seqs=4, max_model_len=8)
    (x,) = rt.workspace_request("b", [((16,), "float32")])
    with pytest.raises(TypeError, match="buffers"):
        rt.graphs(lambda s, b: None, max_num_seqs=4, max_model_len=8, buffers=[x])
    with pytest.raises(ValueError, match="twice"):
        rt.graphs(lambda s, b: None, max_num_seqs=4, max_model_len=8, buffers=[("x", x), ("x", x)])
    with pytest.raises(ValueError, match="direction"):
        rt.graphs(lambda s, b: None, max_num_seqs=4, max_model_len=8, buffers=[("x", x, "both")])
    with pytest.raises(TypeError, match="meta: unknown keys"):
        rt.graphs(lambda s, b: None, max_num_seqs=4, max_model_len=8, buffers=[("x", x)],
                  meta={"block_size": 16, "max_blocks_per_seq": 1, "seqlens": "x"})
    with pytest.raises(KeyError, match="no buffer named 'y'"):
        rt.graphs(lambda s, b: None, max_num_seqs=4, max_model_len=8, buffers=[("x", x)],
                  meta={"block_size": 16, "max_blocks_per_seq": 1, "seq_lens": "y"})
    with pytest.raises(TypeError, match="set by the package"):
        rt.graphs(lambda s, b: None, max_num_seqs=4, max_model_len=8, enqueue=None)
    with pytest.raises(cgrt.InvalidArgumentError, match="max_num_seqs"):
        rt.graphs(lambda s, b: None, max_num_seqs=0, max_model_len=8)

    def boom(stream, batch):
        raise KeyError("boom")

    gs, _, _ = _axpy_set(rt, boom)
    with pytest.raises(cgrt.CaptureFailedError) as e:
        gs.capture()
    assert isinstance(e.value.__cause__, KeyError)

    kernels.register()
    fn = rt.load_module(b"img").function("pytest_axpy")

    def step(stream, b):
        fn.launch(1, 1, [ctypes.c_float(1.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs, x, y = _axpy_set(rt, step)
    gs.capture()
    (x2, f64) = rt.workspace_request("g2", [((16,), "float32"), ((16,), "int32")])
    with pytest.raises(KeyError, match="'z'"):
        gs.step(1, bind={"z": x2})
    with pytest.raises(TypeError, match="dtype int32, expected float32"):
        gs.step(1, bind={"x": f64})
    small = cgrt.Tensor(x2.ptr, (8,), None, "float32", "cpu", None, x2, "test")
    with pytest.raises(ValueError, match=r"shape \[8\], expected \[16\]"):
        gs.step(1, bind={"x": small})
    with pytest.raises(ValueError, match="mode"):
        gs.step(1, mode="prefill")
    with pytest.raises(cgrt.InvalidArgumentError, match="num_reqs"):
        gs.step(5)
    with pytest.raises(cgrt.InvalidArgumentError):
        gs.step(1, mode="block")  # block mode not captured
    with pytest.raises(cgrt.NotSupportedError):
        gs.draft(1)

    def reenter(stream, b):
        gs2.step(1)

    gs2, _, _ = _axpy_set(rt, reenter)
    with pytest.raises(cgrt.CaptureFailedError) as e:
        gs2.capture()
    assert isinstance(e.value.__cause__, RuntimeError) and "inside this graph set's step" in str(e.value.__cause__)
