"""Capture segments (include/cgrt/cgrt_segment.h): capture one layer of a step, append
the others as copies with their own buffers.

A decoder's step runs the same layer L times over different weights and KV caches; under
stream capture the host still runs all L layers once per bucket. :func:`repeat` runs the
layers of a step: outside capture it calls ``run(i)`` for every layer; under capture it
runs layer 0 (and layer 1, compared with layer 0 remapped: the contract checked) and has
cgrt append copies of the captured layer for the rest, each with layer i's buffers in
place of the captured layer's. Where the comparison finds a difference (a per-layer
scalar, a temporary the allocator placed elsewhere, an address a kernel encodes in a way
cgrt cannot see) it captures every layer for real instead and says why in its report.

    report = cgrt.repeat(rt, stream, len(layers), lambda i: layer(i, x),
                         lambda i: list(weights[i].values()) + [kv_cache[i]])
"""
from ctypes import byref, c_int, c_size_t, c_void_p

from . import _lib
from ._errors import NotSupportedError
from ._handle import Handle
from ._lib import lib
from ._streams import stream_ptr

__all__ = ["Segment", "RepeatReport", "repeat", "layer_remaps", "stream_capturing", "ALIGN"]

ALIGN = 256  # CGRT_SEGMENT_ALIGN: a remap moves addresses by a multiple of this


def stream_capturing(runtime, stream):
    """True when `stream` is capturing (cgrt_stream_capturing)."""
    out = c_int()
    lib.cgrt_stream_capturing(runtime.handle, stream_ptr(stream), byref(out))
    return bool(out.value)


def _remaps(remaps):
    arr = (_lib.Remap * max(1, len(remaps)))()
    for i, (a, b, n) in enumerate(remaps):
        arr[i] = _lib.Remap(int(a), int(b), int(n))
    return arr, len(remaps)


class Segment(Handle):
    """cgrt_segment: opened on a capturing stream; the nodes captured until :meth:`end`.
    ``close()`` (or leaving a ``with`` block) destroys it; what it captured or appended
    stays in the capture."""

    _kind = "segment"

    def __init__(self, runtime, stream):
        out = c_void_p()
        lib.cgrt_segment_begin(runtime.handle, stream_ptr(stream), byref(out))
        super().__init__(out.value, lib.cgrt_segment_destroy, parent=runtime)
        self._ended = False

    def end(self):
        lib.cgrt_segment_end(self.handle)
        self._ended = True
        return self

    @property
    def nodes(self):
        """Nodes of the ended segment."""
        n = c_size_t()
        lib.cgrt_segment_nodes(self.handle, byref(n))
        return n.value

    def append(self, remaps=()):
        """Appends a copy to the capture; remaps: (from, to, bytes) triples."""
        arr, n = _remaps(remaps)
        lib.cgrt_segment_append(self.handle, arr, n)

    def compare(self, other, remaps=()):
        """Raises NotSupportedError naming the first difference unless `other` is this
        segment remapped."""
        arr, n = _remaps(remaps)
        lib.cgrt_segment_compare(self.handle, other.handle, arr, n)


def _span(b):
    """(address, bytes) of a buffer: a (address, bytes) pair, or a tensor-like object
    (torch.Tensor, cgrt.DeviceArray: data_ptr() and nbytes)."""
    if isinstance(b, tuple):
        return int(b[0]), int(b[1])
    ptr = b.data_ptr() if callable(getattr(b, "data_ptr", None)) else b.ptr
    n = b.nbytes if hasattr(b, "nbytes") else b.numel() * b.element_size()
    return int(ptr), int(n)


def layer_remaps(src, dst):
    """The remaps moving layer `src`'s buffers to layer `dst`'s (sequences matched by
    position): equal sizes required; buffers at the same address and repeats dropped;
    raises ValueError for sizes that differ, overlapping source buffers, or a move that
    is not a multiple of ALIGN bytes."""
    if len(src) != len(dst):
        raise ValueError(f"layer buffers: {len(src)} vs {len(dst)}")
    out = {}
    for k, (a, b) in enumerate(zip(src, dst)):
        (pa, na), (pb, nb) = _span(a), _span(b)
        if na != nb:
            raise ValueError(f"layer buffer {k}: {na} bytes vs {nb}")
        if pa == pb or na == 0:
            continue
        if (pb - pa) % ALIGN:
            raise ValueError(f"layer buffer {k}: moving 0x{pa:x} to 0x{pb:x} is not a multiple of {ALIGN} bytes")
        if out.get(pa, (pb, na)) != (pb, na):
            raise ValueError(f"layer buffer {k}: 0x{pa:x} maps to two places")
        out[pa] = (pb, na)
    rs = sorted((a, b, n) for a, (b, n) in out.items())
    for (a0, _, n0), (a1, _, _) in zip(rs, rs[1:]):
        if a1 < a0 + n0:
            raise ValueError(f"layer buffers overlap: 0x{a0:x} ({n0} bytes) and 0x{a1:x}")
    return rs


class RepeatReport:
    """What :func:`repeat` did: layers run by the host (`run_layers`), layers appended as
    copies (`appended`), nodes per copied layer (`segment_nodes`), and why it captured
    every layer instead (`fallback`: None when it did not)."""

    __slots__ = ("layers", "run_layers", "appended", "segment_nodes", "fallback")

    def __init__(self, layers):
        self.layers, self.run_layers, self.appended, self.segment_nodes, self.fallback = layers, 0, 0, 0, None

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return f"RepeatReport({self.as_dict()})"


def repeat(runtime, stream, count, run, buffers, verify=True, capturing=None, warmup=False):
    """Runs the `count` layers of a step on `stream`: ``run(i)`` enqueues layer i,
    ``buffers(i)`` lists layer i's own buffers (tensors or (address, bytes)), position by
    position like every other layer's. Outside capture (``capturing`` None: asked of the
    stream) every layer runs. Under capture layer 0 runs, then with `verify` layer 1,
    compared with layer 0 remapped; the other layers are appended as copies of the last
    layer run. A comparison that fails, or buffers that cannot be remapped, make it run
    every remaining layer instead (report.fallback says why). `warmup` (a graph set's
    warm-up run before a capture, Batch.warmup): only the layers the capture will run
    (0, and 1 with `verify`), since a warm-up exists to run once, outside capture, the
    code the capture runs; its results are discarded. Returns a RepeatReport."""
    rep = RepeatReport(count)
    if warmup:
        rep.run_layers = min(count, 2 if verify else 1)
        for i in range(rep.run_layers):
            run(i)
        return rep
    if capturing is None:
        capturing = stream_capturing(runtime, stream)
    first = 2 if verify else 1
    if capturing and count > first:
        try:
            remaps = [layer_remaps(buffers(first - 1), buffers(i)) for i in range(first, count)]
            check = layer_remaps(buffers(0), buffers(1)) if verify else None
        except ValueError as e:
            rep.fallback = f"layer buffers cannot be remapped: {e}"
            capturing = False
    if not capturing or count <= first:
        for i in range(count):
            run(i)
        rep.run_layers = count
        return rep
    segments = []

    def run_rest(first_left, why):
        rep.fallback = why
        for i in range(first_left, count):
            run(i)
        rep.run_layers = count
        return rep

    try:
        s0 = Segment(runtime, stream)
        segments.append(s0)
        run(0)
        try:
            s0.end()  # NotSupportedError: a node cgrt cannot copy (the capture is unaffected)
        except NotSupportedError as e:
            return run_rest(1, e.message)
        base, rep.run_layers = s0, 1
        if verify:
            s1 = Segment(runtime, stream)
            segments.append(s1)
            run(1)
            rep.run_layers = 2
            try:
                s1.end()
                s0.compare(s1, check)
            except NotSupportedError as e:
                return run_rest(2, e.message)
            base = s1
        rep.segment_nodes = base.nodes
        for r in remaps:  # a failure here fails the capture (copies half added)
            base.append(r)
            rep.appended += 1
        return rep
    finally:
        for s in segments:
            s.close()
