"""cgrt.repeat and cgrt.Segment (include/cgrt/cgrt_segment.h) on the emulation: layers
captured once and appended as copies with their own buffers compute what every layer
captured computes; a layer that differs by more than its buffers is caught and captured
for real; warm-ups run the captured layers only; bad remaps are refused."""
import ctypes

import pytest

import cgrt
import kernels
from conftest import fill as _fill
from conftest import floats

N, LAYERS = 64, 6


@pytest.fixture
def axpy(rt):
    kernels.register()
    return rt.load_module(b"image").function("pytest_axpy")


class Layers:
    """Layer l: y += a_l * w_l (pytest_axpy), y the set's buffer, w_l the layer's own
    weights; a_l = 1 except where a test sets another scalar (a contract break)."""

    def __init__(self, rt, axpy, scale=None):
        self.rt, self.axpy = rt, axpy
        self.w = [rt.empty((N,), "float32") for _ in range(LAYERS)]
        assert all(w.ptr % cgrt.ALIGN == 0 for w in self.w), "the emulation's allocations are 256-byte aligned"
        for l, w in enumerate(self.w):
            _fill(rt, w, [float(l + 1) + i / 64 for i in range(N)])
        self.scale = scale or {}
        self.reports, self.ran = [], []

    def run(self, stream, y, l):
        self.ran.append(l)
        a = self.scale.get(l, 1.0)
        self.axpy.launch(1, 32, [ctypes.c_float(a), self.w[l], y, ctypes.c_int32(N)], stream=stream)

    def step(self, stream, b):
        rep = cgrt.repeat(self.rt, stream, LAYERS, lambda l: self.run(stream, b["y"], l), lambda l: [self.w[l]],
                          warmup=b.warmup)
        if b.capturing:
            self.reports.append(rep)

    def expected(self, y0):
        return [y0[i] + sum(self.scale.get(l, 1.0) * (l + 1 + i / 64) for l in range(LAYERS)) for i in range(N)]


def _set(rt, layers, step=None):
    y = rt.empty((N,), "float32")
    gs = rt.graphs(step or layers.step, max_num_seqs=4, max_model_len=16, buffers=[("y", y, "inout")],
                   capture_sizes=[4])
    gs.capture()
    return gs, y


def _replay(rt, gs, y, layers):
    y0 = [i / 8 for i in range(N)]
    _fill(rt, y, y0)
    gs.step(4)
    rt.stream_synchronize(gs.stream)
    return floats(y), layers.expected(y0)


def test_appended_layers_compute_what_captured_layers_do(rt, axpy):
    full = Layers(rt, axpy)
    gs_full, y_full = _set(rt, full, step=lambda s, b: [full.run(s, b["y"], l) for l in range(LAYERS)])
    layers = Layers(rt, axpy)
    gs, y = _set(rt, layers)
    (rep,) = layers.reports
    assert (rep.run_layers, rep.appended, rep.segment_nodes, rep.fallback) == (2, LAYERS - 2, 1, None)
    assert layers.ran == [0, 1, 0, 1]  # the warm-up and the capture run layers 0 and 1 only
    assert gs.stats()["nodes"] == gs_full.stats()["nodes"]
    got, want = _replay(rt, gs, y, layers)
    assert got == pytest.approx(want, rel=1e-6)


def test_a_per_layer_scalar_is_caught_and_every_layer_captured(rt, axpy):
    layers = Layers(rt, axpy, scale={1: 3.0})
    gs, y = _set(rt, layers)
    (rep,) = layers.reports
    assert rep.run_layers == LAYERS and rep.appended == 0
    assert "parameter 0" in rep.fallback and "0x40400000" in rep.fallback, rep.fallback
    got, want = _replay(rt, gs, y, layers)
    assert got == pytest.approx(want, rel=1e-6)


def test_outside_capture_every_layer_runs(rt, axpy):
    layers = Layers(rt, axpy)
    y = rt.empty((N,), "float32")
    _fill(rt, y, [0.0] * N)
    rep = cgrt.repeat(rt, None, LAYERS, lambda l: layers.run(None, y, l), lambda l: [layers.w[l]])
    assert rep.run_layers == LAYERS and rep.appended == 0 and not cgrt.stream_capturing(rt, None)
    assert floats(y) == pytest.approx(layers.expected([0.0] * N), rel=1e-6)


def test_layer_remaps_refuses_what_cannot_be_remapped():
    assert cgrt.layer_remaps([(0x10000, 512)], [(0x10000, 512)]) == []  # the same buffer: nothing to move
    assert cgrt.layer_remaps([(0x10000, 512)], [(0x20000, 512)]) == [(0x10000, 0x20000, 512)]
    with pytest.raises(ValueError, match="multiple of 256"):
        cgrt.layer_remaps([(0x10000, 512)], [(0x20010, 512)])
    with pytest.raises(ValueError, match="512 bytes vs 256"):
        cgrt.layer_remaps([(0x10000, 512)], [(0x20000, 256)])
    with pytest.raises(ValueError, match="overlap"):
        cgrt.layer_remaps([(0x10000, 512), (0x10100, 256)], [(0x20000, 512), (0x30000, 256)])
    with pytest.raises(ValueError, match="buffers: 1 vs 2"):
        cgrt.layer_remaps([(0x10000, 512)], [(0x20000, 512), (0x30000, 512)])


def test_a_segment_outside_capture_is_refused(rt):
    with pytest.raises(cgrt.InvalidArgumentError, match="not capturing"):
        cgrt.Segment(rt, None)
