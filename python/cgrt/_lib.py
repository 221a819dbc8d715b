"""Loading libcgrt.so and the typed ctypes signature of every public C function.

Search order for the library (the first that exists wins):
  1. the ``CGRT_LIBRARY`` environment variable: the path of the file to load (when set,
     nothing else is tried);
  2. the package directory (``libcgrt.so.1``, then ``libcgrt.so``): the library the wheel
     bundles (``pip install ./python`` builds it with Bazel and copies it there);
  3. when the package is imported from the source tree (``PYTHONPATH=python`` or an
     editable install), that tree's ``bazel-bin`` (``libcgrt.so.1``, then ``libcgrt.so``).
"""
import ctypes
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int,
                    c_int64, c_size_t, c_ubyte, c_uint, c_uint64, c_ulong, c_ulonglong, c_void_p)

from ._errors import STATUS_NAMES, EmulatedKernelError, LibraryNotFoundError, error_class

CUdeviceptr = c_ulonglong
CUstream = c_void_p
CUfunction = c_void_p
handle = c_void_p

MAX_TENSOR_DIMS = 6
EMULATED_MAX_PARAMS = 32


class RuntimeOptions(Structure):
    _fields_ = [("size", c_size_t), ("device_ordinal", c_int), ("driver", c_int),
                ("driver_library", c_char_p), ("fault_injection", c_int),
                ("emulated_compute_capability", c_int)]


class RuntimeInfo(Structure):
    _fields_ = [("size", c_size_t), ("driver", c_int), ("driver_version", c_int),
                ("device_ordinal", c_int), ("device_name", c_char * 256),
                ("compute_capability_major", c_int), ("compute_capability_minor", c_int),
                ("sm_count", c_int), ("total_memory", c_size_t), ("free_memory", c_size_t)]


class TensorDesc(Structure):
    _fields_ = [("ndim", c_int), ("shape", c_int64 * MAX_TENSOR_DIMS), ("dtype", c_int)]


class WorkspaceStats(Structure):
    _fields_ = [("size", c_size_t), ("reservations", c_size_t), ("buffers", c_size_t),
                ("bytes_requested", c_size_t), ("bytes_allocated", c_size_t),
                ("counter_bytes", c_size_t), ("locked", c_int)]


class FaultPlan(Structure):
    _fields_ = [("size", c_size_t), ("fail_at", c_ulong), ("symbol", c_char_p), ("result", c_int),
                ("sticky", c_int)]


class EmulatedLaunch(Structure):
    _fields_ = [("grid", c_uint * 3), ("block", c_uint * 3), ("shared_bytes", c_uint)]


class BatchDesc(Structure):
    _fields_ = [("mode", c_int), ("block_len", c_int), ("num_reqs", c_int), ("rows", c_int),
                ("padded_reqs", c_int), ("padded_rows", c_int), ("capturing", c_int),
                ("draft_step", c_int), ("buffers", POINTER(CUdeviceptr)), ("num_buffers", c_size_t),
                ("while_body", c_int), ("warmup", c_int)]


class BufferDesc(Structure):
    _fields_ = [("name", c_char_p), ("ptr", CUdeviceptr), ("bytes", c_size_t), ("dir", c_int)]


class GraphMeta(Structure):
    _fields_ = [("enabled", c_int), ("req_seq_lens", c_int), ("req_positions", c_int),
                ("block_table", c_int), ("seq_lens", c_int), ("positions", c_int),
                ("slot_mapping", c_int), ("block_size", c_int), ("max_blocks_per_seq", c_int),
                ("draft_remaining", c_int)]


class Range(Structure):
    _fields_ = [("base", CUdeviceptr), ("bytes", c_size_t), ("what", c_char_p)]


ENQUEUE_FN = CFUNCTYPE(c_int, c_void_p, CUstream, POINTER(BatchDesc))
DRAFT_REBUILD_FN = CFUNCTYPE(c_int, c_void_p, CUstream, c_int, POINTER(BatchDesc))
LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
WORKSPACE_VISIT_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_size_t, c_size_t)
# cgrt_emulated_kernel_fn(const cgrt_emulated_launch *, const unsigned char *params,
# const size_t *param_offsets): the pointers arrive as ints (cheaper than ctypes pointers)
EMULATED_KERNEL_FN = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p)


class GraphsOptions(Structure):
    _fields_ = [("size", c_size_t), ("max_num_seqs", c_int), ("max_model_len", c_int),
                ("num_heads", c_int), ("dcp_world_size", c_int), ("enable_decode", c_int),
                ("block_len", c_int), ("capture_sizes", POINTER(c_int)),
                ("num_capture_sizes", c_size_t), ("max_capture_rows", c_int),
                ("warmup_runs", c_int), ("enqueue", ENQUEUE_FN), ("user", c_void_p),
                ("buffers", POINTER(BufferDesc)), ("num_buffers", c_size_t), ("meta", GraphMeta),
                ("replay_mode", c_int), ("checked_replay", c_int), ("fail_past_largest", c_int),
                ("stream", CUstream), ("draft_steps", c_int), ("draft_rebuild", DRAFT_REBUILD_FN),
                ("draft_while", c_int), ("device_patch", c_int), ("verify_len", c_int),
                ("warmup_once", c_int), ("serial_capture", c_int), ("device_launch", c_int),
                ("device_launch_idle_us", c_uint)]


class Binding(Structure):
    _fields_ = [("buffer", c_int), ("ptr", CUdeviceptr), ("bytes", c_size_t)]


class GraphsStats(Structure):
    _fields_ = [("size", c_size_t), ("steps", c_uint64), ("replays", c_uint64),
                ("eager_fallbacks", c_uint64), ("rebinds", c_uint64), ("nodes_patched", c_uint64),
                ("copies", c_uint64), ("exec_updates", c_uint64), ("reinstantiations", c_uint64),
                ("draft_loops", c_uint64), ("buckets", c_size_t), ("nodes", c_size_t),
                ("capture_seconds", c_double), ("graph_memory_bytes", c_size_t),
                ("draft_while_loops", c_uint64), ("draft_while_available", c_int),
                ("device_patches", c_uint64), ("device_nodes_patched", c_uint64),
                ("device_launches", c_uint64), ("launcher_starts", c_uint64),
                ("last_device_step_ns", c_uint64)]


class BucketInfo(Structure):
    _fields_ = [("size", c_size_t), ("mode", c_int), ("draft", c_int), ("rows", c_int),
                ("captured", c_int), ("nodes", c_size_t), ("patch_sites", c_size_t),
                ("capture_seconds", c_double), ("instantiate_seconds", c_double),
                ("memory_bytes", c_size_t), ("replays", c_uint64), ("draft_while", c_int),
                ("device_patch", c_int), ("table_bytes", c_size_t), ("pinned_bytes", c_size_t),
                ("patch_param_bytes", c_size_t), ("host_patch_nodes", c_size_t), ("device_launch", c_int)]


class MlaOptions(Structure):
    _fields_ = [("size", c_size_t), ("max_num_seqs", c_int), ("block_len", c_int), ("heads", c_int),
                ("dcp_world_size", c_int), ("page_size", c_int), ("max_model_len", c_int),
                ("max_blocks_per_seq", c_int), ("combine", c_int), ("lane", c_int),
                ("programmatic_launch", c_int), ("causal", c_int), ("kv_dtype", c_int),
                ("kv_scale", c_float), ("v_head_dim", c_int)]


class MlaPlanInfo(Structure):
    _fields_ = [("size", c_size_t), ("max_rows", c_int), ("q_heads", c_int), ("fast_path", c_int),
                ("head_tile", c_int), ("heads_per_cta", c_int), ("head_groups", c_int),
                ("splits", c_int), ("workspace_bytes", c_size_t), ("counter_bytes", c_size_t),
                ("fixed_split_bytes", c_size_t), ("split_kernel", c_char_p),
                ("one_row_kernel", c_char_p), ("counters_min_rows", c_int), ("kv_shared", c_int),
                ("latent_bytes", c_size_t)]


class MlaArgs(Structure):
    _fields_ = [("size", c_size_t), ("q", CUdeviceptr), ("kv_cache", CUdeviceptr),
                ("block_table", CUdeviceptr), ("seq_lens", CUdeviceptr), ("out", CUdeviceptr),
                ("lse", CUdeviceptr), ("num_rows", c_int), ("softmax_scale", c_float),
                ("w_uv", CUdeviceptr)]


class Remap(Structure):
    _fields_ = [("from", CUdeviceptr), ("to", CUdeviceptr), ("bytes", c_size_t)]


STRUCTS = {  # C name -> ctypes class (tests compare layouts with the C compiler's)
    "cgrt_runtime_options": RuntimeOptions, "cgrt_runtime_info": RuntimeInfo,
    "cgrt_tensor_desc": TensorDesc, "cgrt_workspace_stats": WorkspaceStats,
    "cgrt_fault_plan": FaultPlan, "cgrt_emulated_launch": EmulatedLaunch,
    "cgrt_batch_desc": BatchDesc, "cgrt_buffer_desc": BufferDesc, "cgrt_graph_meta": GraphMeta,
    "cgrt_range": Range, "cgrt_graphs_options": GraphsOptions, "cgrt_binding": Binding,
    "cgrt_graphs_stats": GraphsStats, "cgrt_bucket_info": BucketInfo,
    "cgrt_mla_options": MlaOptions, "cgrt_mla_plan_info": MlaPlanInfo, "cgrt_mla_args": MlaArgs,
    "cgrt_remap": Remap,
}

S = "status"  # restype marker: a cgrt_status, checked (a failure raises)
P = POINTER
U = c_uint

# Every public function of include/cgrt/*.h: name -> (restype, argtypes).
SIGNATURES = {
    # cgrt_status.h
    "cgrt_status_name": (c_char_p, [c_int]),
    "cgrt_status_string": (c_char_p, [c_int]),
    "cgrt_last_error": (c_char_p, []),
    "cgrt_set_log_callback": (None, [LOG_FN, c_void_p, c_int]),
    # cgrt_version.h
    "cgrt_version": (c_int, []),
    # cgrt_runtime.h
    "cgrt_runtime_options_init": (None, [P(RuntimeOptions)]),
    "cgrt_runtime_create": (S, [P(RuntimeOptions), P(handle)]),
    "cgrt_runtime_destroy": (S, [handle]),
    "cgrt_runtime_get_info": (S, [handle, P(RuntimeInfo)]),
    "cgrt_driver_kind_name": (c_char_p, [c_int]),
    "cgrt_runtime_synchronize": (S, [handle]),
    # cgrt_workspace.h
    "cgrt_dtype_size": (c_size_t, [c_int]),
    "cgrt_workspace_request": (S, [handle, c_int, c_char_p, P(TensorDesc), c_size_t, P(CUdeviceptr)]),
    "cgrt_workspace_lock": (S, [handle]),
    "cgrt_workspace_is_locked": (c_int, [handle]),
    "cgrt_workspace_get_stats": (S, [handle, P(WorkspaceStats)]),
    "cgrt_workspace_visit": (S, [handle, WORKSPACE_VISIT_FN, c_void_p]),
    "cgrt_workspace_verify": (S, [handle]),
    "cgrt_counters_decode_bytes": (c_size_t, [c_size_t, c_size_t, c_int]),
    "cgrt_counters_reserve": (S, [handle, c_size_t]),
    "cgrt_counters_get": (S, [handle, P(CUdeviceptr), P(c_size_t)]),
    "cgrt_counters_verify": (S, [handle]),
    # cgrt_memory.h
    "cgrt_memcpy_htod": (S, [handle, CUdeviceptr, c_void_p, c_size_t]),
    "cgrt_memcpy_dtoh": (S, [handle, c_void_p, CUdeviceptr, c_size_t]),
    "cgrt_memcpy_dtod_async": (S, [handle, CUdeviceptr, CUdeviceptr, c_size_t, CUstream]),
    "cgrt_memset_d8": (S, [handle, CUdeviceptr, c_ubyte, c_size_t]),
    "cgrt_stream_synchronize": (S, [handle, CUstream]),
    "cgrt_mem_alloc": (S, [handle, c_size_t, P(CUdeviceptr)]),
    "cgrt_mem_free": (S, [handle, CUdeviceptr]),
    "cgrt_mem_register": (S, [handle, CUdeviceptr, c_size_t]),
    "cgrt_mem_unregister": (S, [handle, CUdeviceptr]),
    # cgrt_event.h
    "cgrt_event_create": (S, [handle, P(handle)]),
    "cgrt_event_destroy": (None, [handle]),
    "cgrt_event_record": (S, [handle, CUstream]),
    "cgrt_event_synchronize": (S, [handle]),
    "cgrt_event_query": (S, [handle, P(c_int)]),
    "cgrt_event_elapsed_ms": (S, [handle, handle, P(c_float)]),
    # cgrt_segment.h
    "cgrt_stream_capturing": (S, [handle, CUstream, P(c_int)]),
    "cgrt_segment_begin": (S, [handle, CUstream, P(handle)]),
    "cgrt_segment_end": (S, [handle]),
    "cgrt_segment_nodes": (S, [handle, P(c_size_t)]),
    "cgrt_segment_append": (S, [handle, P(Remap), c_size_t]),
    "cgrt_segment_compare": (S, [handle, handle, P(Remap), c_size_t]),
    "cgrt_segment_destroy": (None, [handle]),
    # cgrt_module.h
    "cgrt_module_load": (S, [handle, c_void_p, P(handle)]),
    "cgrt_module_unload": (S, [handle]),
    "cgrt_module_function": (S, [handle, c_char_p, P(CUfunction)]),
    "cgrt_launch_kernel": (S, [handle, CUfunction, U, U, U, U, U, U, U, CUstream, P(c_void_p)]),
    "cgrt_emulated_kernel_register": (S, [c_char_p, c_size_t, P(c_size_t), EMULATED_KERNEL_FN]),
    # cgrt_fault.h
    "cgrt_fault_set": (S, [P(FaultPlan)]),
    "cgrt_fault_calls": (c_ulong, []),
    "cgrt_fault_injected": (c_ulong, []),
    "cgrt_fault_last_symbol": (c_char_p, []),
    # cgrt_graphs.h
    "cgrt_graphs_options_init": (None, [P(GraphsOptions)]),
    "cgrt_graphs_create": (S, [handle, P(GraphsOptions), P(handle)]),
    "cgrt_graphs_destroy": (S, [handle]),
    "cgrt_graphs_capture": (S, [handle]),
    "cgrt_graphs_recapture": (S, [handle, c_int, c_int]),
    "cgrt_graphs_step": (S, [handle, c_int, c_int, P(Binding), c_size_t]),
    "cgrt_graphs_draft": (S, [handle, c_int, P(Binding), c_size_t]),
    "cgrt_graphs_set_ranges": (S, [handle, P(Range), c_size_t]),
    "cgrt_graphs_stream": (CUstream, [handle]),
    "cgrt_graphs_get_stats": (S, [handle, P(GraphsStats)]),
    "cgrt_graphs_synchronize": (S, [handle]),
    "cgrt_graphs_bucket_count": (c_size_t, [handle]),
    "cgrt_graphs_get_bucket": (S, [handle, c_size_t, P(BucketInfo)]),
    "cgrt_graphs_bucket_rows": (c_int, [handle, c_int, c_int]),
    "cgrt_graphs_bucket_exec": (S, [handle, c_size_t, c_uint, P(c_void_p)]),
    # cgrt_mla.h
    "cgrt_mla_options_init": (None, [P(MlaOptions)]),
    "cgrt_mla_plan_create": (S, [handle, P(MlaOptions), P(handle)]),
    "cgrt_mla_plan_destroy": (None, [handle]),
    "cgrt_mla_plan_get_info": (S, [handle, P(MlaPlanInfo)]),
    "cgrt_mla_decode": (S, [handle, CUstream, P(MlaArgs)]),
    # cgrt_dcp.h (no Python wrapper yet: structs passed as raw pointers)
    "cgrt_dcp_options_init": (None, [c_void_p]),
    "cgrt_dcp_unique_id": (S, [handle, c_char_p, c_void_p]),
    "cgrt_dcp_group_create": (S, [handle, c_void_p, P(handle)]),
    "cgrt_dcp_group_destroy": (None, [handle]),
    "cgrt_dcp_step": (S, [handle, CUstream, c_void_p]),
    "cgrt_dcp_wait": (S, [handle, CUstream]),
    "cgrt_dcp_agree": (S, [handle, c_int, P(c_int)]),
    "cgrt_dcp_group_get_info": (S, [handle, c_void_p]),
    "cgrt_dcp_local_len": (c_int, [c_int, c_int, c_int, c_int]),
}

# Declared in /work/notes/api.md for include/cgrt/cgrt_memory.h and implemented on another
# branch: resolved when first called (a library without them raises a clear error then)
# until that branch is merged. Once merged this set is empty and every function is
# required when the library loads.
PENDING = {"cgrt_mem_alloc", "cgrt_mem_free", "cgrt_mem_register", "cgrt_mem_unregister"}


# Exceptions of Python reference kernels (cgrt.register_emulated_kernel), per thread
# ident: the first one since the thread's last checked call, as (kernel name, exception).
_kernel_errors = {}


def kernel_failed(name, exc):
    """Called by a Python reference kernel that raised (on the thread running the kernel)."""
    _kernel_errors.setdefault(threading.get_ident(), (name, exc))


def _kernel_error(result):
    """The EmulatedKernelError for this thread's pending kernel exception (or None)."""
    got = _kernel_errors.pop(threading.get_ident(), None)
    if got is None:
        return None
    name, exc = got
    what = f"emulated kernel {name!r} (a Python reference) raised {type(exc).__name__}: {exc}"
    if result != 0:
        raw = lib.cgrt_last_error()
        what += f"; the call itself failed with {STATUS_NAMES.get(result, result)}: " + \
            (raw.decode("utf-8", "replace") if raw else "")
    else:
        what += "; the call itself returned CGRT_SUCCESS (its other effects took place)"
    err = EmulatedKernelError(what, call_status=result)
    err.__cause__ = exc
    return err


def _errcheck(result, func, args):
    if _kernel_errors:
        err = _kernel_error(result)
        if err is not None:
            raise err
    if result != 0:
        raw = lib.cgrt_last_error()
        raise error_class(result)(raw.decode("utf-8", "replace") if raw else "", status=result)
    return result


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def _source_tree():
    """The repository root when the package is imported from <repo>/python/cgrt, else None."""
    root = os.path.dirname(os.path.dirname(_package_dir()))
    return root if os.path.isfile(os.path.join(root, "python", "_build", "cgrt_build.py")) else None


def candidates():
    """The paths tried, in order (see the module docstring)."""
    env = os.environ.get("CGRT_LIBRARY")
    if env:
        return [env]
    paths = []
    names = ("libcgrt.so.1", "libcgrt.so")
    paths += [os.path.join(_package_dir(), n) for n in names]
    root = _source_tree()
    if root is not None:
        paths += [os.path.join(root, "bazel-bin", n) for n in names]
    return paths


_cdll = None
_path = None
_lock = threading.Lock()


class _Lib:
    """The loaded library: one attribute per public function, typed (argtypes, restype);
    functions that return a cgrt_status raise :class:`cgrt.Error` subclasses on failure."""

    def __getattr__(self, name):
        if name not in SIGNATURES:
            raise AttributeError(f"cgrt has no public function {name!r}")
        load()
        fn = _bind(name)
        setattr(self, name, fn)
        return fn

    @property
    def path(self):
        load()
        return _path


def _bind(name):
    restype, argtypes = SIGNATURES[name]
    try:
        fn = getattr(_cdll, name)
    except AttributeError:
        raise error_class(16)(f"{name} is not exported by {_path} (a libcgrt.so older than this "
                              f"package?)", status=16) from None
    fn.argtypes = argtypes
    if restype == S:
        fn.restype = c_int
        fn.errcheck = _errcheck
    else:
        fn.restype = restype
    return fn


lib = _Lib()


def raw_function(name):
    """A second, untyped foreign function object for a cgrt_status function (restype int,
    no argtypes, no errcheck): the caller passes ctypes objects of the exact C types (or
    Python ints for C int parameters) and checks the status itself with check_status.
    For per-step paths that must not pay ctypes' conversions."""
    if SIGNATURES.get(name, (None,))[0] != S:
        raise AttributeError(f"{name!r} is not a public function returning cgrt_status")
    getattr(lib, name)  # loads the library and checks the export
    fn = _cdll[name]  # a new object: the typed one stays as it is
    fn.restype = c_int
    fn.argtypes = None
    return fn


def check_status(result):
    """What the typed functions' errcheck does after the call: raises for a failed status
    or a pending Python reference kernel exception of this thread."""
    return _errcheck(result, None, None)


def load():
    """Loads libcgrt.so (once) and checks that it exports every required function."""
    global _cdll, _path
    if _cdll is not None:
        return _cdll
    with _lock:
        if _cdll is not None:
            return _cdll
        tried = []
        for p in candidates():
            if not os.path.exists(p):
                tried.append(f"{p} (missing)")
                continue
            try:
                cdll = ctypes.CDLL(os.path.abspath(p))
            except OSError as e:
                tried.append(f"{p} ({e})")
                continue
            missing = [n for n in SIGNATURES if n not in PENDING and not hasattr(cdll, n)]
            if missing:
                tried.append(f"{p} (lacks {', '.join(sorted(missing)[:4])}...)")
                continue
            _cdll, _path = cdll, os.path.abspath(p)
            return _cdll
        raise LibraryNotFoundError(
            "cgrt: libcgrt.so not found; install the package with `pip install ./python` (it builds "
            "and bundles the library), run `bazel build //:libcgrt_soname` in the source tree, or "
            "set CGRT_LIBRARY to its path. Tried: " + "; ".join(tried))
