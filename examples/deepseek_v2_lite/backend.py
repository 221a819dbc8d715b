"""What the model example takes from the cgrt Python package (python/cgrt), in one place.

The package gives the runtime, MLA plans, graph sets whose step is a Python callable (with
PyTorch's allocations during capture routed to a private pool), registrations and
emulated kernels. This module adds what the example needs on top:
  * Backend: one runtime, its plans and graph sets, one private pool shared by the sets
    (their graphs replay one at a time on one stream, like graphs captured with
    torch.cuda.graph(pool=...)), live ranges for checked replay (cgrt_mem_register when the
    library has it, else ranges declared on every set);
  * MLA decode from inside a step through the typed C function (the package's checked
    cgrt.mla_decode validates seven tensors per call: 27 calls per step would add host
    time to the eager baseline that is not PyTorch's);
  * "segments" on the CPU emulation: PyTorch's CPU work cannot be captured, so each
    PyTorch segment of a step is launched as an emulated kernel (a Python C reference,
    cgrt.register_emulated_kernel) whose parameters are its tensors' addresses: the graph
    holds it as a kernel node, and pointer-updated replay patches it like any other node
    when a bound buffer moves. On a GPU a segment is a plain call on the current stream.

Library lookup is the package's: $CGRT_LIBRARY, the installed package, or the
repository's bazel-bin (`bazel build //:libcgrt.so //:libcgrt_soname`). The package is
imported from the repository's python/ when it is not installed.
"""
import ctypes
import os
import sys
import threading

import torch

try:
    import cgrt
except ImportError:  # not installed: the repository's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "python"))
    import cgrt
from cgrt import _lib as _clib

Error = cgrt.Error
IN, OUT, INOUT = "in", "out", "inout"
LANE_TARGET, LANE_DRAFT = 0, 1


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_library():
    """The libcgrt.so the package loads (raises cgrt.LibraryNotFoundError)."""
    cgrt.load()
    return cgrt.lib.path


def ptr(t):
    return int(t.data_ptr())


def nbytes(t):
    return t.numel() * t.element_size()


# ---- PyTorch segments as emulated kernels (CPU emulation only) ----------------------
_SEG_KERNEL = "example_torch_segment"  # names beginning with "cgrt_" are cgrt's own
SEG_MAX_TENSORS = 24


def tensor_at(address, shape, stride, dtype):
    """A CPU tensor viewing host memory at `address` (the emulation's device memory)."""
    if any(s == 0 for s in shape):
        return torch.empty(shape, dtype=dtype)
    span = 1 + sum((s - 1) * st for s, st in zip(shape, stride))
    itemsize = torch.empty((), dtype=dtype).element_size()
    buf = (ctypes.c_ubyte * (span * itemsize)).from_address(address)
    return torch.frombuffer(buf, dtype=dtype, count=span).as_strided(shape, stride)


class _Segments:
    """Process-wide table of the segments the emulation runs as kernel nodes: parameter 0
    is the segment's id, parameters 1.. its tensors' addresses (read at each run, so a
    patched node runs on the rebound memory)."""

    def __init__(self):
        self.sites, self.ids, self.next_id, self.error = {}, {}, 1, None
        self.lock = threading.Lock()
        cgrt.register_emulated_kernel(_SEG_KERNEL, [8] * (1 + SEG_MAX_TENSORS), self._run)

    def add(self, fn, tensors, once):
        """The id of fn over tensors of these shapes: one id per (fn, shapes) unless
        `once`, so that two layers running the same function on their own tensors launch
        the same kernel with the same parameters but for the addresses (cgrt.repeat)."""
        specs = [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors]
        key = (fn, tuple(specs))
        with self.lock:
            if not once and key in self.ids:
                return self.ids[key]
            sid = self.next_id
            self.next_id += 1
            self.sites[sid] = (fn, specs, once)
            if not once:
                self.ids[key] = sid
        return sid

    def _run(self, call):
        try:
            sid = call.ptr(0)
            fn, specs, once = self.sites[sid]
            fn(*[tensor_at(call.ptr(1 + i), *spec) for i, spec in enumerate(specs)])
            if once:
                del self.sites[sid]
        except BaseException as e:  # noqa: BLE001 - a kernel cannot fail: raised after the launch
            if self.error is None:
                self.error = e

    def raise_error(self):
        e, self.error = self.error, None
        if e is not None:
            raise RuntimeError("a PyTorch segment failed inside an emulated kernel") from e


_SEGMENTS = None


class Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Backend:
    """A cgrt runtime plus what the example needs around it."""

    def __init__(self, driver=None, device=0):
        if driver is None:
            driver = os.environ.get("CGRT_DRIVER") or "auto"
        if driver != "emulated" and torch.cuda.is_available():
            torch.cuda.init()  # torch's primary context first; cgrt retains the same one
        self.log_lines = []
        cgrt.set_log_callback(self._log, level="warn")
        self.rt = cgrt.Runtime(driver=driver, device_ordinal=device)
        i = self.rt.info()
        self.info = {"driver": i.driver, "driver_version": i.driver_version, "device_name": i.device_name,
                     "sm_count": i.sm_count, "compute_capability": f"{i.compute_capability_major}."
                     f"{i.compute_capability_minor}", "total_memory": i.total_memory,
                     "free_memory": i.free_memory, "library": cgrt.lib.path}
        self.emulated = self.rt.emulated
        self.device = torch.device("cpu") if self.emulated else torch.device("cuda", device)
        self.pool = None if self.emulated else torch.cuda.graph_pool_handle()
        self.sets, self.plans = [], []
        self._registered = {}  # base -> (bytes, what)
        try:
            cgrt.lib.cgrt_mem_register  # noqa: B018 - resolves the symbol
            self.has_mem_register = True
        except cgrt.Error:
            self.has_mem_register = False
        self._seg_fn = None

    def _log(self, level, msg):
        self.log_lines.append(msg)
        print(f"[cgrt {level}] {msg}", flush=True)

    def close(self):
        for base in list(self._registered):
            self.unregister(base)
        self.rt.close()  # closes plans, graph sets and the module first

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- workspaces ----
    def lock(self):
        self.rt.workspace_lock()

    def workspace_stats(self):
        return self.rt.workspace_stats()

    def verify(self):
        self.rt.counters_verify()
        self.rt.workspace_verify()

    def synchronize(self):
        if not self.emulated:
            torch.cuda.synchronize(self.device)
        self.rt.synchronize()

    # ---- MLA ----
    def mla_plan(self, **kw):
        p = MlaPlan(self, **kw)
        self.plans.append(p)
        return p

    # ---- live ranges (checked replay) ----
    def register(self, t, what="tensor"):
        """Makes the tensor's memory known to cgrt: checked replay accepts pointers into it
        while it is registered and refuses them afterwards. Unlike cgrt.Registration this
        does not keep the tensor alive: the engine owns its memory (and check_stale.py frees
        a registered cache on purpose)."""
        base, n = ptr(t), nbytes(t)
        if self.has_mem_register:
            cgrt.lib.cgrt_mem_register(self.rt.handle, base, n)
        self._registered[base] = (n, what)
        self._push_ranges()

    def unregister(self, t_or_base):
        base = t_or_base if isinstance(t_or_base, int) else ptr(t_or_base)
        if base not in self._registered:
            raise ValueError(f"0x{base:x} is not registered")
        del self._registered[base]
        if self.has_mem_register:
            cgrt.lib.cgrt_mem_unregister(self.rt.handle, base)
        self._push_ranges()

    def register_torch_segments(self):
        """Registers the rest of PyTorch's device memory (GPU only): every segment of its
        caching allocator (torch.cuda.memory_snapshot(): the general cache and the graph
        sets' private pool), less the ranges already registered, one cgrt_mem_register per
        piece. Checked replay then accepts the pointers of torch's own kernels into memory
        that the engine does not register one by one (weights, rope tables, the
        activations and temporaries of the private pool) while those segments live, and
        still refuses a pointer into a freed and unregistered range: such a range lies in
        no registration, since it was registered on its own and is not part of a piece.
        Call it after the capture (the private pool's segments exist from then on); returns
        the number of pieces registered."""
        if self.emulated or not self.has_mem_register:
            return 0
        torch.cuda.synchronize(self.device)
        taken = sorted((b, b + n) for b, (n, _) in self._registered.items())
        count = 0
        for seg in torch.cuda.memory_snapshot():
            if seg.get("device", self.device.index) != self.device.index:
                continue
            lo, end = int(seg["address"]), int(seg["address"]) + int(seg["total_size"])
            for b, e in taken + [(end, end)]:
                if e <= lo:
                    continue
                if b > lo:
                    cgrt.lib.cgrt_mem_register(self.rt.handle, lo, min(b, end) - lo)
                    self._registered[lo] = (min(b, end) - lo, f"torch segment piece of 0x{seg['address']:x}")
                    count += 1
                lo = max(lo, e)
                if lo >= end:
                    break
        self._push_ranges()
        return count

    def _push_ranges(self):
        if not self.has_mem_register:
            for s in self.sets:
                s.set_ranges([(b, n, w) for b, (n, w) in self._registered.items()])

    # ---- graph sets ----
    def graph_set(self, step, buffers, **kw):
        """A cgrt.GraphSet of this runtime: `step(stream, batch)`, `buffers` a list of
        (name, tensor, direction); keywords as cgrt.GraphSet's. Steps past the largest
        bucket fail (fail_past_largest) instead of running eagerly."""
        kw.setdefault("fail_past_largest", 1)
        if self.pool is not None:
            kw.setdefault("torch_pool", self.pool)
        s = self.rt.graphs(step, buffers=buffers, **kw)
        self.sets.append(s)
        if not self.has_mem_register and self._registered:
            self._push_ranges()
        return s

    def repeat(self, stream, count, run, buffers, warmup=False):
        """The layers of a step under a capture by one of the sets: cgrt.repeat (layer 0
        and 1 run and compared, the others appended as copies); in the warm-up before
        it, layers 0 and 1 only. Returns its report."""
        return cgrt.repeat(self.rt, stream, count, run, buffers, capturing=not warmup, warmup=warmup)

    # ---- PyTorch work inside a step ----
    def segment(self, stream, fn, *tensors, once=False):
        """Runs fn(*tensors) as part of the work on `stream`: a plain call on a GPU (the
        caller made `stream` PyTorch's current stream), an emulated kernel on the emulation
        (a kernel node when the stream captures). fn writes its results into its tensors."""
        if not self.emulated:
            fn(*tensors)
            return
        global _SEGMENTS
        if _SEGMENTS is None:
            _SEGMENTS = _Segments()
        if self._seg_fn is None:
            self._seg_fn = self.rt.load_module(b"cgrt example: PyTorch segments (emulation)").function(_SEG_KERNEL)
        if len(tensors) > SEG_MAX_TENSORS:
            raise ValueError(f"a segment takes at most {SEG_MAX_TENSORS} tensors")
        if any(t.device.type != "cpu" for t in tensors):
            raise ValueError("segments on the emulation take CPU tensors")
        sid = _SEGMENTS.add(fn, tensors, once)
        args = [ctypes.c_uint64(sid)] + [ctypes.c_uint64(ptr(t)) for t in tensors]
        args += [ctypes.c_uint64(0)] * (SEG_MAX_TENSORS - len(tensors))
        cgrt.launch_kernel(self.rt, self._seg_fn, 1, 1, args, stream=stream)
        _SEGMENTS.raise_error()

    def raise_segment_error(self):
        if _SEGMENTS is not None:
            _SEGMENTS.raise_error()

    def torch_stream(self, stream):
        """A context making cgrt's `stream` PyTorch's current stream (GPU), else nothing."""
        if self.emulated:
            return Null()
        return torch.cuda.stream(torch.cuda.ExternalStream(int(stream or 0), device=self.device))

    def stream_handle(self, torch_stream=None):
        """The CUstream (int) of a torch stream, default the current one; None on the emulation."""
        if self.emulated:
            return None
        s = torch_stream if torch_stream is not None else torch.cuda.current_stream(self.device)
        return int(s.cuda_stream)


class MlaPlan:
    """A cgrt.MlaPlan, its info, and an unchecked decode for the model's inner loop (the
    model's tensors are allocated to the plan's shapes once; their checks are the package's
    cgrt.mla_decode, used by the tests)."""

    def __init__(self, be, **options):
        self.be = be
        self.plan = be.rt.mla_plan(**options)
        self.info = self.plan.info()
        self.v_head_dim = self.plan.v_head_dim  # > 0: decode applies W_UV (cgrt_mla_vproj)
        self.proj, self.proj_below = None, 0
        self._args = _clib.MlaArgs(size=ctypes.sizeof(_clib.MlaArgs))
        self._decode = cgrt.lib.cgrt_mla_decode

    def pair_projection(self, proj):
        """Steps of fewer rows than this plan's counters_min_rows (those that merge through
        the workspace's combine kernel) run `proj`, the same plan with v_head_dim: its value
        projection reads W_UV while the combine runs and replaces the W_UV bmm. Steps that
        merge through counters have no combine to hide the weight read behind and keep the
        bmm (measured: docs/mla_decode.md, "The value projection")."""
        self.proj, self.proj_below = proj, int(self.info["counters_min_rows"])

    def for_rows(self, rows):
        """The plan a step of `rows` rows runs (pair_projection)."""
        return self.proj if self.proj is not None and rows < self.proj_below else self

    def decode(self, stream, q, kv_cache, block_table, seq_lens, out, lse, num_rows, softmax_scale, w_uv=None):
        """cgrt_mla_decode on `stream`: q bf16 [rows, heads, 576], kv_cache bf16 [pages, page,
        576], block_table int32 [reqs, max_blocks], seq_lens int32 [reqs], out bf16 [rows,
        heads, 512] (a plan of v_head_dim v: [rows, heads, v], with w_uv bf16 [heads, 512,
        v]), lse fp32 [rows, heads]."""
        a = self._args
        a.q, a.kv_cache, a.block_table = ptr(q), ptr(kv_cache), ptr(block_table)
        a.seq_lens, a.out, a.lse = ptr(seq_lens), ptr(out), ptr(lse)
        a.w_uv = ptr(w_uv) if w_uv is not None else 0
        a.num_rows, a.softmax_scale = int(num_rows), float(softmax_scale)
        self._decode(self.plan.handle, stream, ctypes.byref(a))

    def checked_decode(self, stream, *a, **kw):
        cgrt.mla_decode(self.plan, *a, stream=stream, **kw)
