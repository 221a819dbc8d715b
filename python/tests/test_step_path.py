"""The per-step path of GraphSet.step with torch tensors (CPU tensors on the emulation):
the cached checks accept what the generic checks accept and raise the same errors, the
binding array is reused per key set, and exceptions of Python reference kernels surface
from the cgrt call that ran them."""
import ctypes

import pytest

import cgrt
import kernels

torch = pytest.importorskip("torch", reason="torch is not installed (CPU torch is enough for these tests)")


@pytest.fixture
def axpy(rt):
    kernels.register()
    return rt.load_module(b"image").function("pytest_axpy")


def _set(rt, fn, x, y, **kw):
    def step(stream, b):
        fn.launch(1, 1, [ctypes.c_float(2.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=16, max_model_len=8, buffers=[("x", x, "in"), ("y", y)],
                   capture_sizes=[4, 16], warmup_runs=0, **kw)
    gs.capture()
    return gs


def test_torch_bindings_replay_like_eager_and_reuse_one_array(rt, axpy):
    x, y = torch.zeros(16), torch.zeros(16)
    gs = _set(rt, axpy, x, y)
    ring = [torch.full((16,), float(k + 1)) for k in range(3)]
    expect = torch.zeros(16)
    arrays = set()
    for k in range(6):
        t = ring[k % 3]
        gs.step(3, bind={"x": t})
        rt.synchronize()
        expect[:4] += 2 * t[:4]
        assert torch.equal(y, expect), f"step {k}"
        assert gs._bound[0] is t and gs._bound_ptr[0] == t.data_ptr()
        arrays.add(id(gs._plans[("x",)][1]))
    assert len(arrays) == 1  # one prebuilt binding array for the key set ("x",)
    gs.step(3, bind={0: ring[0]})  # ids and names are distinct key sets of the same buffer
    gs.step(3, bind={"x": ring[1], "y": y})
    assert set(gs._plans) == {("x",), (0,), ("x", "y")}
    assert gs.stats()["replays"] == 8


def test_torch_mismatches_raise_the_generic_errors_and_change_nothing(rt, axpy):
    x, y = torch.zeros(16), torch.zeros(16)
    gs = _set(rt, axpy, x, y)
    good = torch.ones(16)
    gs.step(1, bind={"x": good})
    bad = {
        "dtype int32, expected float32": (TypeError, torch.zeros(16, dtype=torch.int32)),
        "dtype bfloat16, expected float32": (TypeError, torch.zeros(16, dtype=torch.bfloat16)),
        r"shape \[8\], expected \[16\]": (ValueError, torch.zeros(8)),
        r"shape \[16, 1\], expected \[16\]": (ValueError, torch.zeros(16, 1)),
        "not contiguous": (ValueError, torch.zeros(32)[::2]),
    }
    replays = gs.stats()["replays"]
    for msg, (exc, t) in bad.items():
        for _ in range(2):  # also once the key set's array is cached
            with pytest.raises(exc, match=msg):
                gs.step(1, bind={"x": t})
    with pytest.raises(ValueError, match=r"binding 'y': shape"):
        gs.step(1, bind={"x": good, "y": torch.zeros(8)})  # the first binding was fine
    assert gs.stats()["replays"] == replays and gs._bound[0] is good
    with pytest.raises(KeyError, match="'z'"):
        gs.step(1, bind={"z": good})
    gs.step(1, bind={1: y})  # (1,) is cached now; True hashes like 1 but is no buffer id
    with pytest.raises(KeyError, match="True"):
        gs.step(1, bind={True: y})
    # what the generic path accepts is accepted: a Parameter (a subclass), a raw address
    p = torch.nn.Parameter(torch.full((16,), 3.0), requires_grad=False)
    gs.step(1, bind={"x": p})
    assert gs._bound[0] is p
    gs.step(1, bind={"x": good.data_ptr()})
    assert gs._bound_ptr[0] == good.data_ptr() and gs.stats()["replays"] == replays + 3


def test_a_python_reference_kernel_exception_is_raised_by_the_launch(rt):
    kernels.register()
    fn = rt.load_module(b"image").function("pytest_flaky")
    (x,) = rt.workspace_request("k", [((4,), "float32")])
    kernels.FAIL["on"] = True
    try:
        with pytest.raises(cgrt.EmulatedKernelError) as e:
            fn.launch(1, 1, [ctypes.c_float(1.0), x, x, ctypes.c_int32(4)])
    finally:
        kernels.FAIL["on"] = False
    assert isinstance(e.value, cgrt.CallbackFailedError) and e.value.status_name == "CGRT_ERROR_CALLBACK_FAILED"
    assert e.value.call_status == 0 and e.value.__cause__ is kernels.FAIL["exc"]
    assert "pytest_flaky" in str(e.value) and "told to fail" in str(e.value)
    fn.launch(1, 1, [ctypes.c_float(1.0), x, x, ctypes.c_int32(4)])  # reported once: nothing pending
    rt.synchronize()


def test_a_kernel_exception_in_a_replay_is_raised_by_the_step_and_its_bindings_stand(rt):
    kernels.register()
    fn = rt.load_module(b"image").function("pytest_flaky")
    x, y, x2 = torch.zeros(16), torch.zeros(16), torch.ones(16)
    gs = _set(rt, fn, x, y)
    kernels.FAIL["on"] = True
    try:
        with pytest.raises(cgrt.EmulatedKernelError) as e:
            gs.step(2, bind={"x": x2})
    finally:
        kernels.FAIL["on"] = False
    assert e.value.__cause__ is kernels.FAIL["exc"] and e.value.call_status == 0
    assert gs._bound[0] is x2  # the C call succeeded: x2 is bound
    gs.step(2)
    rt.synchronize()
    assert y[:4].tolist() == [2.0] * 4


def test_a_kernel_exception_in_a_warm_up_fails_the_capture_with_the_chain(rt):
    kernels.register()
    fn = rt.load_module(b"image").function("pytest_flaky")
    x, y = torch.zeros(16), torch.zeros(16)

    def step(stream, b):
        fn.launch(1, 1, [ctypes.c_float(2.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=16, max_model_len=8, buffers=[("x", x), ("y", y)], capture_sizes=[4])
    kernels.FAIL["on"] = True
    try:
        with pytest.raises(cgrt.Error) as e:
            gs.capture()
    finally:
        kernels.FAIL["on"] = False
    assert isinstance(e.value.__cause__, cgrt.EmulatedKernelError)
    assert e.value.__cause__.__cause__ is kernels.FAIL["exc"]


def test_device_array_bindings(rt, axpy):
    x, y = rt.empty(16, "float32"), rt.empty(16, "float32")
    rt.memset(y, 0, y.nbytes)
    gs = _set(rt, axpy, x, y)
    x2 = rt.empty(16, "float32").copy_from(bytes((ctypes.c_float * 16)(*[1.0] * 16)))
    gs.step(2, bind={"x": x2})
    rt.synchronize()
    assert y.numpy()[:4].tolist() == [2.0] * 4 and gs._bound[0] is x2
    with pytest.raises(TypeError, match="dtype int32, expected float32"):
        gs.step(2, bind={"x": rt.empty(16, "int32")})
    with pytest.raises(ValueError, match=r"shape \[8\], expected \[16\]"):
        gs.step(2, bind={"x": rt.empty(8, "float32")})
    gone = rt.empty(16, "float32")
    gone.close()
    with pytest.raises(cgrt.InvalidHandleError):
        gs.step(2, bind={"x": gone})
    assert gs._bound[0] is x2


def test_prepared_steps_replay_like_eager_and_keep_the_sets_record(rt, axpy):
    x, y = torch.zeros(16), torch.zeros(16)
    gs = _set(rt, axpy, x, y)
    ring = [torch.full((16,), float(k + 1)) for k in range(3)]
    preps = [gs.prepare({"x": t}) for t in ring]
    expect = torch.zeros(16)
    for k in range(7):
        preps[k % 3](3 + (k % 2))  # 3 or 4 requests: one bucket, num_reqs patched
        rt.synchronize()
        expect[:4] += 2 * ring[k % 3][:4]
        assert torch.equal(y, expect), f"step {k}"
        assert gs._prep is preps[k % 3], "the per-step path only remembers which one ran"
        gs._sync_bound()
        assert gs._bound[0] is ring[k % 3] and gs._bound_ptr[0] == ring[k % 3].data_ptr()
    gs.step(3, bind={"x": ring[0]})  # the general path in between: the record stays right
    preps[0](3)
    gs._sync_bound()
    assert gs._bound[0] is ring[0]
    rt.synchronize()
    expect[:4] += 4 * ring[0][:4]
    assert torch.equal(y, expect)
    # A prepared step that binds fewer buffers than the pending one does not supersede it:
    # y stays bound to what the first one bound, and the set keeps it alive.
    y2 = torch.zeros(16)
    both = gs.prepare({"x": ring[1], "y": y2})
    only_x = gs.prepare({"x": ring[2]})
    both(3)
    only_x(3)
    del both
    gs._sync_bound()
    assert gs._bound[0] is ring[2] and gs._bound[1] is y2 and gs._bound_ptr[1] == y2.data_ptr()
    rt.synchronize()
    assert torch.equal(y2[:4], 2 * ring[1][:4] + 2 * ring[2][:4])
    st = gs.stats()
    assert st["replays"] == 11 and st["rebinds"] >= 7


def test_prepare_checks_once_and_calls_refuse_what_step_refuses(rt, axpy):
    x, y = torch.zeros(16), torch.zeros(16)
    gs = _set(rt, axpy, x, y)
    with pytest.raises(TypeError, match="dtype int32, expected float32"):
        gs.prepare({"x": torch.zeros(16, dtype=torch.int32)})
    with pytest.raises(ValueError, match=r"shape \[8\], expected \[16\]"):
        gs.prepare({"x": torch.zeros(8)})
    with pytest.raises(KeyError, match="no buffer named 'z'"):
        gs.prepare({"z": torch.zeros(16)})
    with pytest.raises(ValueError, match="no bindings"):
        gs.prepare({})
    ps = gs.prepare({"x": torch.ones(16)})
    with pytest.raises(cgrt.InvalidArgumentError, match="num_reqs 17"):
        ps(17)
    with pytest.raises(cgrt.InvalidArgumentError, match="num_reqs 0"):
        ps(0)
    raw = gs.prepare({"x": 0})  # a raw address, unchecked here as in step(): the C call refuses null
    with pytest.raises(cgrt.InvalidArgumentError, match="binding 0"):
        raw(1)
    gs.close()
    with pytest.raises(cgrt.InvalidHandleError, match="closed"):
        ps(1)


def test_prepared_step_inside_the_step_raises_and_fails_the_call(rt, axpy):
    x, y = torch.zeros(16), torch.zeros(16)
    holder = {}

    def step(stream, b):
        if not b.capturing and "ps" in holder:
            holder["ps"](1)
        axpy.launch(1, 1, [ctypes.c_float(2.0), b["x"], b["y"], ctypes.c_int32(b.padded_rows)], stream=stream)

    gs = rt.graphs(step, max_num_seqs=16, max_model_len=8, buffers=[("x", x, "in"), ("y", y)],
                   capture_sizes=[4], warmup_runs=0)
    gs.capture()
    holder["ps"] = gs.prepare({"x": torch.ones(16)})
    with pytest.raises(cgrt.CallbackFailedError) as ei:
        holder["ps"](8)  # past the largest bucket: runs the step eagerly, which calls ps
    assert isinstance(ei.value.__cause__, RuntimeError)
    assert "inside this graph set's step" in str(ei.value.__cause__)
