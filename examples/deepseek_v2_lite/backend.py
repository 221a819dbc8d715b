"""The slice of cgrt the model example uses, behind one small interface.

Everything the example needs from cgrt goes through this module: a runtime, MLA plans and
their decode, workspace lock and statistics, graph sets whose step is a Python callable,
live-range registration for checked replay, and (on the CPU emulation) torch work as
nodes of the captured graphs. It binds libcgrt.so with ctypes directly until the Python
package python/cgrt/ is merged; switching to the package changes this file only
(see /work/notes/model_needs.md for what the model needs from the package).

Library lookup: $CGRT_LIBRARY, else libcgrt.so under the repository's bazel-bin
(`bazel build //:libcgrt.so`).

The graph-step design (GPU):
  * the step callable receives cgrt's stream and runs under
    torch.cuda.stream(torch.cuda.ExternalStream(stream)), so PyTorch launches there and
    cgrt's stream capture records PyTorch's kernels together with cgrt's;
  * while cgrt captures (and warms up), PyTorch's allocations go to a private
    torch.cuda.MemPool that lives as long as the graph set. Memory a graph writes is
    therefore never handed to later work outside the graphs (the same guarantee as
    torch.cuda.graph's private pool). Graph sets of one Backend share the pool: their
    replays are serialized on one stream, as torch.cuda.graph's shared pools are.
The same design on the CPU emulation: PyTorch's CPU work cannot be captured, so every
torch "segment" of the step is launched as an emulated kernel (a registered C reference
that calls back into Python) whose parameters are the data pointers of its tensors: the
captured graph holds it as a kernel node, and cgrt's pointer-updated replay patches it
like any other node when a bound buffer moves.
"""
import ctypes
import os
import threading

import torch

STATUS = {0: "CGRT_SUCCESS", 1: "CGRT_ERROR_INVALID_ARGUMENT", 2: "CGRT_ERROR_INVALID_HANDLE",
          3: "CGRT_ERROR_NO_DRIVER", 4: "CGRT_ERROR_NO_DEVICE", 5: "CGRT_ERROR_UNSUPPORTED_DEVICE",
          6: "CGRT_ERROR_OUT_OF_MEMORY", 7: "CGRT_ERROR_DRIVER", 8: "CGRT_ERROR_WORKSPACE_LOCKED",
          9: "CGRT_ERROR_GUARD_CORRUPTED", 10: "CGRT_ERROR_COUNTERS_DIRTY", 11: "CGRT_ERROR_CAPTURING",
          12: "CGRT_ERROR_CAPTURE_FAILED", 13: "CGRT_ERROR_NO_BUCKET", 14: "CGRT_ERROR_STALE_POINTER",
          15: "CGRT_ERROR_CALLBACK_FAILED", 16: "CGRT_ERROR_NOT_SUPPORTED", 17: "CGRT_ERROR_INTERNAL"}
STALE_POINTER = 14
CALLBACK_FAILED = 15

DRIVERS = {"auto": 0, "cuda": 1, "emulated": 2}
DECODE, BLOCK = 0, 1
IN, OUT, INOUT = 1, 2, 3
LANE_TARGET, LANE_DRAFT = 0, 1

u64 = ctypes.c_uint64
size_t = ctypes.c_size_t
c_int = ctypes.c_int


class CgrtError(RuntimeError):
    """A cgrt call failed: .status (e.g. 'CGRT_ERROR_STALE_POINTER'), .code, .message."""

    def __init__(self, func, code, message):
        self.func, self.code, self.message = func, code, message
        self.status = STATUS.get(code, f"CGRT_STATUS_{code}")
        super().__init__(f"{func}: {self.status}: {message}")


class RuntimeOptions(ctypes.Structure):
    _fields_ = [("size", size_t), ("device_ordinal", c_int), ("driver", c_int),
                ("driver_library", ctypes.c_char_p), ("fault_injection", c_int),
                ("emulated_compute_capability", c_int)]


class RuntimeInfo(ctypes.Structure):
    _fields_ = [("size", size_t), ("driver", c_int), ("driver_version", c_int), ("device_ordinal", c_int),
                ("device_name", ctypes.c_char * 256), ("cc_major", c_int), ("cc_minor", c_int),
                ("sm_count", c_int), ("total_memory", size_t), ("free_memory", size_t)]


class MlaOptions(ctypes.Structure):
    _fields_ = [("size", size_t), ("max_num_seqs", c_int), ("block_len", c_int), ("heads", c_int),
                ("dcp_world_size", c_int), ("page_size", c_int), ("max_model_len", c_int),
                ("max_blocks_per_seq", c_int), ("combine", c_int), ("lane", c_int),
                ("programmatic_launch", c_int)]


class MlaPlanInfo(ctypes.Structure):
    _fields_ = [("size", size_t), ("max_rows", c_int), ("q_heads", c_int), ("fast_path", c_int),
                ("head_tile", c_int), ("heads_per_cta", c_int), ("head_groups", c_int), ("splits", c_int),
                ("workspace_bytes", size_t), ("counter_bytes", size_t), ("fixed_split_bytes", size_t),
                ("split_kernel", ctypes.c_char_p), ("one_row_kernel", ctypes.c_char_p),
                ("counters_min_rows", c_int)]


class MlaArgs(ctypes.Structure):
    _fields_ = [("size", size_t), ("q", u64), ("kv_cache", u64), ("block_table", u64), ("seq_lens", u64),
                ("out", u64), ("lse", u64), ("num_rows", c_int), ("softmax_scale", ctypes.c_float)]


class BatchDesc(ctypes.Structure):
    _fields_ = [("mode", c_int), ("block_len", c_int), ("num_reqs", c_int), ("rows", c_int),
                ("padded_reqs", c_int), ("padded_rows", c_int), ("capturing", c_int), ("draft_step", c_int),
                ("buffers", ctypes.POINTER(u64)), ("num_buffers", size_t), ("while_body", c_int)]


class BufferDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("ptr", u64), ("bytes", size_t), ("dir", c_int)]


class GraphMeta(ctypes.Structure):
    _fields_ = [("enabled", c_int), ("req_seq_lens", c_int), ("req_positions", c_int), ("block_table", c_int),
                ("seq_lens", c_int), ("positions", c_int), ("slot_mapping", c_int), ("block_size", c_int),
                ("max_blocks_per_seq", c_int), ("draft_remaining", c_int)]


ENQUEUE_FN = ctypes.CFUNCTYPE(c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(BatchDesc))
REBUILD_FN = ctypes.CFUNCTYPE(c_int, ctypes.c_void_p, ctypes.c_void_p, c_int, ctypes.POINTER(BatchDesc))


class GraphsOptions(ctypes.Structure):
    _fields_ = [("size", size_t), ("max_num_seqs", c_int), ("max_model_len", c_int), ("num_heads", c_int),
                ("dcp_world_size", c_int), ("enable_decode", c_int), ("block_len", c_int),
                ("capture_sizes", ctypes.POINTER(c_int)), ("num_capture_sizes", size_t),
                ("max_capture_rows", c_int), ("warmup_runs", c_int), ("enqueue", ENQUEUE_FN),
                ("user", ctypes.c_void_p), ("buffers", ctypes.POINTER(BufferDesc)), ("num_buffers", size_t),
                ("meta", GraphMeta), ("replay_mode", c_int), ("checked_replay", c_int),
                ("fail_past_largest", c_int), ("stream", ctypes.c_void_p), ("draft_steps", c_int),
                ("draft_rebuild", REBUILD_FN), ("draft_while", c_int), ("device_patch", c_int)]


class Binding(ctypes.Structure):
    _fields_ = [("buffer", c_int), ("ptr", u64), ("bytes", size_t)]


class Range(ctypes.Structure):
    _fields_ = [("base", u64), ("bytes", size_t), ("what", ctypes.c_char_p)]


class GraphsStats(ctypes.Structure):
    _fields_ = [("size", size_t), ("steps", u64), ("replays", u64), ("eager_fallbacks", u64), ("rebinds", u64),
                ("nodes_patched", u64), ("copies", u64), ("exec_updates", u64), ("reinstantiations", u64),
                ("draft_loops", u64), ("buckets", size_t), ("nodes", size_t), ("capture_seconds", ctypes.c_double),
                ("graph_memory_bytes", size_t), ("draft_while_loops", u64), ("draft_while_available", c_int),
                ("device_patches", u64), ("device_nodes_patched", u64)]


class BucketInfo(ctypes.Structure):
    _fields_ = [("size", size_t), ("mode", c_int), ("draft", c_int), ("rows", c_int), ("captured", c_int),
                ("nodes", size_t), ("patch_sites", size_t), ("capture_seconds", ctypes.c_double),
                ("instantiate_seconds", ctypes.c_double), ("memory_bytes", size_t), ("replays", u64),
                ("draft_while", c_int), ("device_patch", c_int)]


class WorkspaceStats(ctypes.Structure):
    _fields_ = [("size", size_t), ("reservations", size_t), ("buffers", size_t), ("bytes_requested", size_t),
                ("bytes_allocated", size_t), ("counter_bytes", size_t), ("locked", c_int)]


class EmulatedLaunch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint)]


EMU_KERNEL_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(EmulatedLaunch), ctypes.POINTER(ctypes.c_ubyte),
                                 ctypes.POINTER(size_t))
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_int, ctypes.c_char_p)


def _struct(cls, **kw):
    s = cls()
    s.size = ctypes.sizeof(cls)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def repo_root():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(here))


def find_library():
    env = os.environ.get("CGRT_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise FileNotFoundError(f"CGRT_LIBRARY={env} does not exist")
        return env
    root = repo_root()
    for rel in ("bazel-bin/libcgrt.so", "bazel-bin/libcgrt.so.1", "bazel-bin/.devlib/libcgrt.so"):
        p = os.path.join(root, rel)
        if os.path.exists(p):
            return p
    raise FileNotFoundError("libcgrt.so not found: build it with `bazel build //:libcgrt.so` in "
                            f"{root}, or set CGRT_LIBRARY to its path")


_LIB = None
_LIB_LOCK = threading.Lock()


def _declare(lib):
    P, V = ctypes.POINTER, ctypes.c_void_p
    sigs = {
        "cgrt_status_name": (ctypes.c_char_p, [c_int]),
        "cgrt_last_error": (ctypes.c_char_p, []),
        "cgrt_set_log_callback": (None, [LOG_FN, V, c_int]),
        "cgrt_runtime_options_init": (None, [P(RuntimeOptions)]),
        "cgrt_runtime_create": (c_int, [P(RuntimeOptions), P(V)]),
        "cgrt_runtime_destroy": (c_int, [V]),
        "cgrt_runtime_get_info": (c_int, [V, P(RuntimeInfo)]),
        "cgrt_runtime_synchronize": (c_int, [V]),
        "cgrt_workspace_lock": (c_int, [V]),
        "cgrt_workspace_get_stats": (c_int, [V, P(WorkspaceStats)]),
        "cgrt_workspace_verify": (c_int, [V]),
        "cgrt_counters_verify": (c_int, [V]),
        "cgrt_mla_options_init": (None, [P(MlaOptions)]),
        "cgrt_mla_plan_create": (c_int, [V, P(MlaOptions), P(V)]),
        "cgrt_mla_plan_destroy": (None, [V]),
        "cgrt_mla_plan_get_info": (c_int, [V, P(MlaPlanInfo)]),
        "cgrt_mla_decode": (c_int, [V, V, P(MlaArgs)]),
        "cgrt_graphs_options_init": (None, [P(GraphsOptions)]),
        "cgrt_graphs_create": (c_int, [V, P(GraphsOptions), P(V)]),
        "cgrt_graphs_destroy": (c_int, [V]),
        "cgrt_graphs_capture": (c_int, [V]),
        "cgrt_graphs_step": (c_int, [V, c_int, c_int, P(Binding), size_t]),
        "cgrt_graphs_draft": (c_int, [V, c_int, P(Binding), size_t]),
        "cgrt_graphs_set_ranges": (c_int, [V, P(Range), size_t]),
        "cgrt_graphs_stream": (V, [V]),
        "cgrt_graphs_get_stats": (c_int, [V, P(GraphsStats)]),
        "cgrt_graphs_bucket_count": (size_t, [V]),
        "cgrt_graphs_get_bucket": (c_int, [V, size_t, P(BucketInfo)]),
        "cgrt_graphs_bucket_rows": (c_int, [V, c_int, c_int]),
        "cgrt_module_load": (c_int, [V, V, P(V)]),
        "cgrt_module_unload": (c_int, [V]),
        "cgrt_module_function": (c_int, [V, ctypes.c_char_p, P(V)]),
        "cgrt_launch_kernel": (c_int, [V, V, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                                       ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, V, P(V)]),
        "cgrt_emulated_kernel_register": (c_int, [ctypes.c_char_p, size_t, P(size_t), EMU_KERNEL_FN]),
        "cgrt_stream_synchronize": (c_int, [V, V]),
    }
    optional = {  # the device-memory API (branch rel); absent from older builds
        "cgrt_mem_register": (c_int, [V, u64, size_t]),
        "cgrt_mem_unregister": (c_int, [V, u64]),
    }
    for name, (res, args) in list(sigs.items()) + list(optional.items()):
        try:
            f = getattr(lib, name)
        except AttributeError:
            if name in optional:
                continue
            raise RuntimeError(f"{lib._name}: missing symbol {name} (rebuild libcgrt.so)")
        f.restype, f.argtypes = res, args
    return lib


def lib():
    global _LIB
    with _LIB_LOCK:
        if _LIB is None:
            _LIB = _declare(ctypes.CDLL(find_library()))
        return _LIB


def check(func, code):
    if code != 0:
        L = lib()
        raise CgrtError(func, code, (L.cgrt_last_error() or b"").decode(errors="replace"))


def ptr(t):
    return int(t.data_ptr())


def nbytes(t):
    return t.numel() * t.element_size()


# ---- torch segments as emulated kernels (CPU emulation only) ------------------------
_SEG_KERNEL = b"cgrt_py_torch_segment"
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
    """Process-wide table of torch segments that the emulation runs as kernel nodes."""

    def __init__(self):
        self.sites = {}
        self.next_id = 1
        self.error = None
        self.lock = threading.Lock()
        sizes = (size_t * (1 + SEG_MAX_TENSORS))(*([8] * (1 + SEG_MAX_TENSORS)))
        self.cfn = EMU_KERNEL_FN(self._run)
        check("cgrt_emulated_kernel_register",
              lib().cgrt_emulated_kernel_register(_SEG_KERNEL, 1 + SEG_MAX_TENSORS, sizes, self.cfn))

    def add(self, fn, tensors, once):
        with self.lock:
            sid = self.next_id
            self.next_id += 1
            self.sites[sid] = (fn, [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors], once)
        return sid

    def _run(self, launch, params, offsets):
        try:
            raw = ctypes.cast(params, ctypes.c_void_p).value
            word = lambda i: u64.from_address(raw + offsets[i]).value  # noqa: E731
            sid = word(0)
            fn, specs, once = self.sites[sid]
            ts = [tensor_at(word(1 + i), *spec) for i, spec in enumerate(specs)]
            fn(*ts)
            if once:
                del self.sites[sid]
        except BaseException as e:  # noqa: BLE001 - reported after the cgrt call returns
            if self.error is None:
                self.error = e

    def take_error(self):
        e, self.error = self.error, None
        return e


_SEGMENTS = None


class Backend:
    """A cgrt runtime plus what the example needs around it."""

    def __init__(self, driver=None, device=0, log_level=1):
        self.lib = lib()
        if driver is None:
            driver = os.environ.get("CGRT_DRIVER", "auto")
        self._log_cb = LOG_FN(self._log)
        self.log_lines = []
        self.lib.cgrt_set_log_callback(self._log_cb, None, log_level)
        opts = RuntimeOptions()
        self.lib.cgrt_runtime_options_init(ctypes.byref(opts))
        opts.device_ordinal = device
        opts.driver = DRIVERS[driver]
        if driver != "emulated" and torch.cuda.is_available():
            torch.cuda.init()  # the primary context exists before cgrt takes it: one context
        h = ctypes.c_void_p()
        check("cgrt_runtime_create", self.lib.cgrt_runtime_create(ctypes.byref(opts), ctypes.byref(h)))
        self.rt = h
        self.info = self._info()
        self.emulated = self.info["driver"] == "emulated"
        self.device = torch.device("cpu") if self.emulated else torch.device("cuda", device)
        self.plans = []
        self.sets = []
        self.pool = None if self.emulated else torch.cuda.MemPool()
        self._registered = {}   # base -> (bytes, name) live ranges for checked replay
        self._module = None
        self._seg_fn = None
        self.has_mem_register = hasattr(self.lib, "cgrt_mem_register")

    def _log(self, user, level, msg):
        line = msg.decode(errors="replace")
        self.log_lines.append(line)
        if level <= 1 or os.environ.get("CGRT_EXAMPLE_VERBOSE"):
            print(f"[cgrt {['error', 'warn', 'info', 'debug'][min(level, 3)]}] {line}", flush=True)

    def _info(self):
        i = _struct(RuntimeInfo)
        check("cgrt_runtime_get_info", self.lib.cgrt_runtime_get_info(self.rt, ctypes.byref(i)))
        return {"driver": "cuda" if i.driver == 1 else "emulated", "driver_version": i.driver_version,
                "device_name": i.device_name.decode(errors="replace"), "sm_count": i.sm_count,
                "compute_capability": f"{i.cc_major}.{i.cc_minor}", "total_memory": i.total_memory,
                "free_memory": i.free_memory}

    def close(self):
        for s in reversed(self.sets):
            s.close()
        for p in reversed(self.plans):
            p.close()
        if self._module is not None:
            self.lib.cgrt_module_unload(self._module)
            self._module = None
        if self.rt:
            self.lib.cgrt_runtime_destroy(self.rt)
            self.rt = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- workspaces ----
    def lock(self):
        check("cgrt_workspace_lock", self.lib.cgrt_workspace_lock(self.rt))

    def workspace_stats(self):
        s = _struct(WorkspaceStats)
        check("cgrt_workspace_get_stats", self.lib.cgrt_workspace_get_stats(self.rt, ctypes.byref(s)))
        return {k: getattr(s, k) for k, _ in WorkspaceStats._fields_ if k != "size"}

    def verify(self):
        check("cgrt_counters_verify", self.lib.cgrt_counters_verify(self.rt))
        check("cgrt_workspace_verify", self.lib.cgrt_workspace_verify(self.rt))

    def synchronize(self):
        if not self.emulated:
            torch.cuda.synchronize()
        check("cgrt_runtime_synchronize", self.lib.cgrt_runtime_synchronize(self.rt))

    # ---- MLA ----
    def mla_plan(self, **kw):
        p = MlaPlan(self, **kw)
        self.plans.append(p)
        return p

    # ---- live ranges (checked replay) ----
    def register(self, t, name="tensor"):
        """Makes the tensor's memory known to cgrt (checked replay accepts pointers into it,
        and refuses them once it is unregistered)."""
        base, n = ptr(t), nbytes(t)
        if self.has_mem_register:
            check("cgrt_mem_register", self.lib.cgrt_mem_register(self.rt, base, n))
        self._registered[base] = (n, name)
        self._push_ranges()

    def unregister(self, t_or_base):
        base = t_or_base if isinstance(t_or_base, int) else ptr(t_or_base)
        if base not in self._registered:
            raise ValueError(f"0x{base:x} is not registered")
        if self.has_mem_register:
            check("cgrt_mem_unregister", self.lib.cgrt_mem_unregister(self.rt, base))
        del self._registered[base]
        self._push_ranges()

    def _push_ranges(self):
        if self.has_mem_register:
            return
        for s in self.sets:
            s.set_ranges(self._registered)

    # ---- graph sets ----
    def graph_set(self, step, buffers, **kw):
        s = GraphSet(self, step, buffers, **kw)
        self.sets.append(s)
        if not self.has_mem_register and self._registered:
            s.set_ranges(self._registered)
        return s

    # ---- torch work inside a step ----
    def segment(self, stream, fn, *tensors, once=False):
        """Runs fn(*tensors) as part of the work on `stream`. On a GPU: a plain call (the
        caller has made `stream` PyTorch's current stream). On the emulation: an emulated
        kernel launch whose parameters are the tensors' addresses (a kernel node when the
        stream captures). fn must write its results into the tensors it is given."""
        if not self.emulated:
            fn(*tensors)
            return
        global _SEGMENTS
        if _SEGMENTS is None:
            _SEGMENTS = _Segments()
        if self._seg_fn is None:
            m = ctypes.c_void_p()
            image = ctypes.create_string_buffer(b"cgrt example: torch segments (emulation)")
            check("cgrt_module_load", self.lib.cgrt_module_load(self.rt, image, ctypes.byref(m)))
            self._module = m
            f = ctypes.c_void_p()
            check("cgrt_module_function", self.lib.cgrt_module_function(m, _SEG_KERNEL, ctypes.byref(f)))
            self._seg_fn = f
        if len(tensors) > SEG_MAX_TENSORS:
            raise ValueError(f"a segment takes at most {SEG_MAX_TENSORS} tensors")
        for t in tensors:
            if t.device.type != "cpu":
                raise ValueError("emulation segments take CPU tensors")
        sid = _SEGMENTS.add(fn, tensors, once)
        vals = [u64(sid)] + [u64(ptr(t)) for t in tensors] + [u64(0)] * (SEG_MAX_TENSORS - len(tensors))
        args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        st = self.lib.cgrt_launch_kernel(self.rt, self._seg_fn, 1, 1, 1, 1, 1, 1, 0, stream, args)
        check("cgrt_launch_kernel", st)
        self.raise_segment_error()

    @staticmethod
    def raise_segment_error():
        if _SEGMENTS is not None:
            e = _SEGMENTS.take_error()
            if e is not None:
                raise RuntimeError("a torch segment failed inside an emulated kernel") from e

    def torch_stream(self, stream):
        """A context that makes cgrt's `stream` PyTorch's current stream (GPU), or nothing."""
        if self.emulated:
            return _Null()
        return torch.cuda.stream(torch.cuda.ExternalStream(int(stream or 0), device=self.device))

    def stream_handle(self, torch_stream=None):
        if self.emulated:
            return None
        s = torch_stream if torch_stream is not None else torch.cuda.current_stream(self.device)
        return ctypes.c_void_p(int(s.cuda_stream))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class MlaPlan:
    def __init__(self, be, max_num_seqs, heads, max_model_len, page_size, max_blocks_per_seq=0, block_len=1,
                 lane=LANE_TARGET, combine=None):
        self.be = be
        o = MlaOptions()
        be.lib.cgrt_mla_options_init(ctypes.byref(o))
        o.max_num_seqs, o.heads, o.max_model_len, o.page_size = max_num_seqs, heads, max_model_len, page_size
        o.max_blocks_per_seq, o.block_len, o.lane = max_blocks_per_seq, block_len, lane
        if combine is not None:
            o.combine = {"workspace": 0, "counters": 1, "auto": 2}[combine]
        h = ctypes.c_void_p()
        check("cgrt_mla_plan_create", be.lib.cgrt_mla_plan_create(be.rt, ctypes.byref(o), ctypes.byref(h)))
        self.h = h
        self.heads = heads
        i = _struct(MlaPlanInfo)
        check("cgrt_mla_plan_get_info", be.lib.cgrt_mla_plan_get_info(h, ctypes.byref(i)))
        self.info = {k: getattr(i, k) for k, _ in MlaPlanInfo._fields_ if k != "size"}
        for k in ("split_kernel", "one_row_kernel"):
            self.info[k] = (self.info[k] or b"").decode()
        self._args = _struct(MlaArgs)

    def close(self):
        if self.h:
            self.be.lib.cgrt_mla_plan_destroy(self.h)
            self.h = None

    def decode(self, stream, q, kv_cache, block_table, seq_lens, out, lse, num_rows, softmax_scale):
        """cgrt_mla_decode on `stream`: q bf16 [rows, heads, 576], kv_cache bf16 [pages, page, 576],
        block_table int32 [reqs, max_blocks], seq_lens int32 [reqs], out bf16 [rows, heads, 512],
        lse fp32 [rows, heads]."""
        a = self._args
        a.q, a.kv_cache, a.block_table = ptr(q), ptr(kv_cache), ptr(block_table)
        a.seq_lens, a.out, a.lse = ptr(seq_lens), ptr(out), ptr(lse)
        a.num_rows, a.softmax_scale = int(num_rows), float(softmax_scale)
        check("cgrt_mla_decode", self.be.lib.cgrt_mla_decode(self.h, stream, ctypes.byref(a)))


class Batch:
    """What a step callable receives (cgrt_batch_desc, with the bound tensors by name)."""

    def __init__(self, d, tensors):
        self.mode, self.block_len = d.mode, d.block_len
        self.num_reqs, self.rows = d.num_reqs, d.rows
        self.padded_reqs, self.padded_rows = d.padded_reqs, d.padded_rows
        self.capturing, self.draft_step, self.while_body = bool(d.capturing), d.draft_step, bool(d.while_body)
        self.t = tensors  # name -> tensor at the address cgrt hands the callback


class GraphSet:
    """A cgrt graph set whose step is a Python callable step(stream, batch).

    buffers: list of (name, tensor, dir); the tensors are the capture-time (static) ones.
    meta: dict with the names of req_seq_lens, req_positions, block_table, seq_lens,
    positions, slot_mapping buffers, block_size, max_blocks_per_seq (or None).
    Bindings (step/draft) map buffer names to tensors, which must be at least as large as the
    registered ones; a bound tensor stays current (pointer-updated replay) and is kept alive
    here until the next binding of the same buffer replaces it."""

    def __init__(self, be, step, buffers, max_num_seqs, max_model_len, capture_sizes=None, meta=None,
                 draft_steps=0, checked_replay=False, stream=None, warmup_runs=1, num_heads=0, replay_mode=0,
                 device_patch=False, name="graphs"):
        self.be, self.step_fn, self.name = be, step, name
        self.names = [b[0] for b in buffers]
        self.ids = {n: i for i, n in enumerate(self.names)}
        self.current = [b[1] for b in buffers]
        self.static = list(self.current)
        self._descs = (BufferDesc * len(buffers))()
        self._cnames = [ctypes.c_char_p(n.encode()) for n in self.names]
        for i, (n, t, d) in enumerate(buffers):
            if not t.is_contiguous():
                raise ValueError(f"buffer {n} must be contiguous")
            self._descs[i].name = self._cnames[i]
            self._descs[i].ptr, self._descs[i].bytes, self._descs[i].dir = ptr(t), nbytes(t), d
        o = GraphsOptions()
        be.lib.cgrt_graphs_options_init(ctypes.byref(o))
        o.max_num_seqs, o.max_model_len, o.num_heads = max_num_seqs, max_model_len, num_heads
        self._sizes = None
        if capture_sizes:
            self._sizes = (c_int * len(capture_sizes))(*capture_sizes)
            o.capture_sizes, o.num_capture_sizes = self._sizes, len(capture_sizes)
        o.warmup_runs = warmup_runs
        self._enqueue = ENQUEUE_FN(self._call)
        o.enqueue = self._enqueue
        o.buffers, o.num_buffers = self._descs, len(buffers)
        if meta:
            m = o.meta
            m.enabled = 1
            for k in ("req_seq_lens", "req_positions", "block_table", "seq_lens", "positions", "slot_mapping"):
                setattr(m, k, self.ids[meta[k]])
            m.block_size, m.max_blocks_per_seq = meta["block_size"], meta["max_blocks_per_seq"]
        o.replay_mode, o.checked_replay = replay_mode, int(checked_replay)
        o.fail_past_largest = 1
        o.stream = stream
        o.draft_steps = draft_steps
        o.device_patch = int(device_patch)
        self._opts = o
        self.error = None
        h = ctypes.c_void_p()
        check("cgrt_graphs_create", be.lib.cgrt_graphs_create(be.rt, ctypes.byref(o), ctypes.byref(h)))
        self.h = h
        self.stream = be.lib.cgrt_graphs_stream(h)
        self._bind = (Binding * max(1, len(buffers)))()
        self._ranges = None
        self.on_capture_call = None  # hook(batch) run first in every callback (benchmarks)

    def close(self):
        if self.h:
            self.be.lib.cgrt_graphs_destroy(self.h)
            self.h = None

    def _call(self, user, stream, desc):
        try:
            d = desc.contents
            tensors = {}
            for i, n in enumerate(self.names):
                addr = d.buffers[i]
                t = self.current[i]
                if ptr(t) != addr:  # cgrt's current address must be the one we bound
                    raise RuntimeError(f"buffer {n}: cgrt hands 0x{addr:x}, the set holds 0x{ptr(t):x}")
                tensors[n] = t
            b = Batch(d, tensors)
            if self.on_capture_call is not None:
                self.on_capture_call(b)
            if self.be.emulated:
                self.step_fn(stream, b)
            else:
                # Allocations while cgrt warms up or captures go to the private pool.
                with torch.cuda.use_mem_pool(self.be.pool), self.be.torch_stream(stream):
                    self.step_fn(stream, b)
            return 0
        except BaseException as e:  # noqa: BLE001 - re-raised after the cgrt call returns
            if self.error is None:
                self.error = e
            return CALLBACK_FAILED

    def _raise(self, func, code):
        err, self.error = self.error, None
        seg = _SEGMENTS.take_error() if _SEGMENTS is not None else None
        if code != 0:
            msg = (self.be.lib.cgrt_last_error() or b"").decode(errors="replace")
            exc = CgrtError(func, code, msg)
            raise exc from (err or seg)
        if err is not None or seg is not None:
            raise RuntimeError(f"{self.name}: step callable failed") from (err or seg)

    def capture(self):
        st = self.be.lib.cgrt_graphs_capture(self.h)
        self._raise("cgrt_graphs_capture", st)

    def _bindings(self, bindings):
        n = 0
        for name, t in (bindings or {}).items():
            i = self.ids[name]
            if nbytes(t) < self._descs[i].bytes:
                raise ValueError(f"binding {name}: {nbytes(t)} bytes < registered {self._descs[i].bytes}")
            if t.device != self.static[i].device or t.dtype != self.static[i].dtype or not t.is_contiguous():
                raise ValueError(f"binding {name}: device/dtype/contiguity differ from the registered tensor")
            self._bind[n].buffer, self._bind[n].ptr, self._bind[n].bytes = i, ptr(t), 0
            n += 1
        return n

    def _commit(self, bindings):
        for name, t in (bindings or {}).items():
            self.current[self.ids[name]] = t

    def step(self, num_reqs, bindings=None, mode=DECODE):
        n = self._bindings(bindings)
        st = self.be.lib.cgrt_graphs_step(self.h, mode, int(num_reqs), self._bind, n)
        if st not in (1, 2):  # cgrt keeps the new addresses unless the call was refused outright
            self._commit(bindings)
        self._raise("cgrt_graphs_step", st)

    def draft(self, num_reqs, bindings=None):
        n = self._bindings(bindings)
        st = self.be.lib.cgrt_graphs_draft(self.h, int(num_reqs), self._bind, n)
        if st not in (1, 2, 16):
            self._commit(bindings)
        self._raise("cgrt_graphs_draft", st)

    def set_ranges(self, registered):
        arr = (Range * max(1, len(registered)))()
        self._range_names = []
        for i, (base, (n, what)) in enumerate(registered.items()):
            c = ctypes.c_char_p(what.encode())
            self._range_names.append(c)
            arr[i].base, arr[i].bytes, arr[i].what = base, n, c
        self._ranges = arr
        check("cgrt_graphs_set_ranges", self.be.lib.cgrt_graphs_set_ranges(self.h, arr, len(registered)))

    def bucket_rows(self, num_reqs, mode=DECODE):
        return self.be.lib.cgrt_graphs_bucket_rows(self.h, mode, int(num_reqs))

    def stats(self):
        s = _struct(GraphsStats)
        check("cgrt_graphs_get_stats", self.be.lib.cgrt_graphs_get_stats(self.h, ctypes.byref(s)))
        return {k: getattr(s, k) for k, _ in GraphsStats._fields_ if k != "size"}

    def buckets(self):
        out = []
        for i in range(self.be.lib.cgrt_graphs_bucket_count(self.h)):
            b = _struct(BucketInfo)
            check("cgrt_graphs_get_bucket", self.be.lib.cgrt_graphs_get_bucket(self.h, i, ctypes.byref(b)))
            out.append({k: getattr(b, k) for k, _ in BucketInfo._fields_ if k != "size"})
        return out
