"""The runtime, its events, device memory and registrations, workspaces and copies."""
import ctypes
import threading
from ctypes import byref, c_float, c_int, c_size_t, c_void_p

from . import _lib
from ._errors import Error
from ._handle import Handle
from ._lib import CUdeviceptr, lib
from ._options import defaults, enum_value, make_options
from ._streams import stream_ptr
from ._tensor import DTYPES, Tensor, as_tensor, check

__all__ = ["Runtime", "Event", "DeviceArray", "Registration", "RuntimeInfo", "DRIVERS",
           "runtime_defaults", "set_log_callback", "version", "status_name", "last_error"]

DRIVERS = {"auto": 0, "cuda": 1, "emulated": 2}
_LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}


def version():
    """cgrt_version() of the loaded library (major * 10000 + minor * 100 + patch)."""
    return lib.cgrt_version()


def status_name(status):
    return lib.cgrt_status_name(int(status)).decode()


def last_error():
    """cgrt_last_error() of the calling thread."""
    return lib.cgrt_last_error().decode("utf-8", "replace")


_log_keep = [None]
_log_lock = threading.Lock()


def set_log_callback(fn, level="warn"):
    """Routes cgrt's log lines to fn(level: str, message: str) up to `level`
    ("error", "warn", "info", "debug"); None restores the silent default. fn must not
    call back into cgrt; an exception it raises is dropped."""
    names = {v: k for k, v in _LOG_LEVELS.items()}
    with _log_lock:
        if fn is None:
            lib.cgrt_set_log_callback(_lib.LOG_FN(), None, 0)
            _log_keep[0] = None
            return

        def sink(user, lvl, msg):
            try:
                fn(names.get(lvl, str(lvl)), msg.decode("utf-8", "replace"))
            except Exception:
                pass

        cb = _lib.LOG_FN(sink)
        lib.cgrt_set_log_callback(cb, None, enum_value(level, _LOG_LEVELS, "level"))
        _log_keep[0] = cb  # after the switch: the old callback is no longer called


def runtime_defaults():
    """cgrt_runtime_options_init's defaults as a dict."""
    return defaults(_lib.RuntimeOptions, "cgrt_runtime_options_init")


class RuntimeInfo:
    """cgrt_runtime_info as attributes (driver is "cuda" or "emulated")."""

    def __init__(self, info):
        for name, _ in _lib.RuntimeInfo._fields_:
            if name != "size":
                setattr(self, name, getattr(info, name))
        self.device_name = info.device_name.decode("utf-8", "replace")
        self.driver = lib.cgrt_driver_kind_name(info.driver).decode()

    def __repr__(self):
        return (f"RuntimeInfo({self.driver} driver {self.driver_version}, {self.device_name}, "
                f"cc {self.compute_capability_major}.{self.compute_capability_minor}, "
                f"{self.sm_count} SMs)")


class Runtime(Handle):
    """cgrt_runtime: one device through its primary context (the one PyTorch and the CUDA
    runtime use), or the CPU emulation.

    Keyword options are those of cgrt_runtime_options with its C defaults:
    ``driver`` ("auto", "cuda", "emulated"), ``device_ordinal``, ``driver_library``,
    ``fault_injection``, ``emulated_compute_capability``.
    """

    _kind = "runtime"

    def __init__(self, **options):
        conv = {"driver": lambda v: enum_value(v, DRIVERS, "driver"),
                "driver_library": lambda v: None if v is None else str(v).encode()}
        opts = make_options(_lib.RuntimeOptions, "cgrt_runtime_options_init", options, conv)
        out = c_void_p()
        lib.cgrt_runtime_create(byref(opts), byref(out))
        super().__init__(out.value, lib.cgrt_runtime_destroy)
        info = self.info()
        self.emulated = info.driver == "emulated"
        self.device_ordinal = info.device_ordinal

    def info(self):
        i = _lib.RuntimeInfo(size=ctypes.sizeof(_lib.RuntimeInfo))
        lib.cgrt_runtime_get_info(self.handle, byref(i))
        return RuntimeInfo(i)

    def synchronize(self):
        lib.cgrt_runtime_synchronize(self.handle)

    def stream_synchronize(self, stream=None):
        lib.cgrt_stream_synchronize(self.handle, stream_ptr(stream))

    def check_tensor(self, obj, name, **kw):
        """as_tensor + check against this runtime's device (see cgrt._tensor.check)."""
        return check(as_tensor(obj, name), name, emulated=self.emulated,
                     device_index=self.device_ordinal, **kw)

    # ---- children -------------------------------------------------------------------
    def event(self):
        """A new :class:`Event` (timing enabled)."""
        return Event(self)

    def empty(self, shape, dtype="uint8"):
        """A :class:`DeviceArray` of cgrt_mem_alloc memory (uninitialised)."""
        return DeviceArray(self, shape, dtype)

    def register(self, obj, nbytes=None):
        """Registers an external array's memory (cgrt_mem_register) for checked replay
        and, on the emulation, for copies; returns a :class:`Registration`."""
        return Registration(self, obj, nbytes)

    def load_module(self, image):
        from .module import Module
        return Module(self, image)

    def mla_plan(self, **options):
        from .mla import MlaPlan
        return MlaPlan(self, **options)

    def graphs(self, step, **options):
        from .graphs import GraphSet
        return GraphSet(self, step, **options)

    # ---- memory ---------------------------------------------------------------------
    def alloc(self, nbytes):
        """cgrt_mem_alloc: a raw device address the caller frees with free()."""
        out = CUdeviceptr()
        lib.cgrt_mem_alloc(self.handle, int(nbytes), byref(out))
        return out.value

    def free(self, ptr):
        lib.cgrt_mem_free(self.handle, int(ptr))

    def memcpy_htod(self, dst, src):
        """Copies a host buffer (bytes-like or an array with __array_interface__) to a
        device address or array. Complete on return."""
        dptr = _address(dst)
        buf, nbytes, keep = _host_buffer(src)
        lib.cgrt_memcpy_htod(self.handle, dptr, buf, nbytes)
        del keep

    def memcpy_dtoh(self, dst, src, nbytes=None):
        """Copies device memory into a writable host buffer (bytearray, numpy array...)."""
        buf, size, keep = _host_buffer(dst, writable=True)
        n = size if nbytes is None else int(nbytes)
        if n > size:
            raise ValueError(f"memcpy_dtoh: {n} bytes do not fit the destination's {size}")
        lib.cgrt_memcpy_dtoh(self.handle, buf, _address(src), n)
        del keep

    def memcpy_dtod_async(self, dst, src, nbytes, stream=None):
        lib.cgrt_memcpy_dtod_async(self.handle, _address(dst), _address(src), int(nbytes),
                                   stream_ptr(stream))

    def memset(self, dst, value, nbytes):
        lib.cgrt_memset_d8(self.handle, _address(dst), int(value), int(nbytes))

    # ---- workspaces and counters ----------------------------------------------------
    def workspace_request(self, name, buffers, lane=0):
        """Requests reservation (lane, name) for `buffers`, a list of (shape, dtype);
        returns one DeviceArray view per buffer (owned by the runtime)."""
        descs = (_lib.TensorDesc * len(buffers))()
        for d, (shape, dtype) in zip(descs, buffers):
            shape = tuple(shape)
            if len(shape) > _lib.MAX_TENSOR_DIMS:
                raise ValueError(f"workspace_request: {len(shape)} dimensions (at most "
                                 f"{_lib.MAX_TENSOR_DIMS})")
            d.ndim = len(shape)
            for i, s in enumerate(shape):
                d.shape[i] = s
            d.dtype = _dtype_value(dtype)
        ptrs = (CUdeviceptr * len(buffers))()
        lib.cgrt_workspace_request(self.handle, lane, name.encode(), descs, len(buffers), ptrs)
        return [DeviceArray._view(self, p, shape, dtype) for p, (shape, dtype) in zip(ptrs, buffers)]

    def workspace_lock(self):
        lib.cgrt_workspace_lock(self.handle)

    @property
    def workspace_locked(self):
        return bool(lib.cgrt_workspace_is_locked(self.handle))

    def workspace_stats(self):
        s = _lib.WorkspaceStats(size=ctypes.sizeof(_lib.WorkspaceStats))
        lib.cgrt_workspace_get_stats(self.handle, byref(s))
        return {f: getattr(s, f) for f, _ in _lib.WorkspaceStats._fields_ if f != "size"}

    def workspace_visit(self):
        """[(lane, name, buffers, bytes)] per reservation, in creation order."""
        rows = []
        cb = _lib.WORKSPACE_VISIT_FN(lambda u, lane, name, n, b: rows.append((lane, name.decode(), n, b)))
        lib.cgrt_workspace_visit(self.handle, cb, None)
        return rows

    def workspace_verify(self):
        lib.cgrt_workspace_verify(self.handle)

    def counters_reserve(self, nbytes):
        lib.cgrt_counters_reserve(self.handle, int(nbytes))

    def counters(self):
        """(address, bytes) of the counter buffer."""
        p, n = CUdeviceptr(), c_size_t()
        lib.cgrt_counters_get(self.handle, byref(p), byref(n))
        return p.value, n.value

    def counters_verify(self):
        lib.cgrt_counters_verify(self.handle)


def _dtype_value(dtype):
    if dtype not in DTYPES:
        raise TypeError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    return DTYPES[dtype][0]


def _address(x):
    """A device address from an int, a DeviceArray or any accepted array."""
    if isinstance(x, bool):
        raise TypeError("expected a device address or an array, got a bool")
    if isinstance(x, int):
        return x
    return as_tensor(x, "address").ptr


def _host_buffer(obj, writable=False):
    """(address, nbytes, keep-alive) of host memory: bytes-like objects, ctypes arrays,
    arrays with __array_interface__ (contiguous)."""
    if hasattr(obj, "__array_interface__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        t = check(as_tensor(obj, "host buffer"), "host buffer")
        if t.device != "cpu":
            raise ValueError("host buffer: not host memory")
        if writable and obj.__array_interface__["data"][1]:
            raise ValueError("host buffer: read-only array")
        return t.ptr, t.nbytes, obj
    mv = memoryview(obj)
    if not mv.contiguous:
        raise ValueError("host buffer: not contiguous")
    if writable and mv.readonly:
        raise ValueError("host buffer: read-only (use a bytearray or a writable array)")
    n = mv.nbytes
    if mv.readonly:
        buf = ctypes.create_string_buffer(mv.tobytes(), n) if n else None
        return (ctypes.addressof(buf) if buf else None), n, buf
    carr = (ctypes.c_char * n).from_buffer(mv.cast("B")) if n else None
    return (ctypes.addressof(carr) if carr is not None else None), n, (mv, carr)


class Event(Handle):
    """cgrt_event (timing enabled): record on a stream, wait, query, time."""

    _kind = "event"

    def __init__(self, runtime):
        out = c_void_p()
        lib.cgrt_event_create(runtime.handle, byref(out))
        super().__init__(out.value, lib.cgrt_event_destroy, parent=runtime)

    def record(self, stream=None):
        """Records after the work enqueued so far on `stream` (None: the legacy default
        stream). Capture-safe."""
        lib.cgrt_event_record(self.handle, stream_ptr(stream))

    def synchronize(self):
        lib.cgrt_event_synchronize(self.handle)

    def query(self):
        """True when the recorded work has completed."""
        done = c_int()
        lib.cgrt_event_query(self.handle, byref(done))
        return bool(done.value)

    def elapsed_ms(self, end):
        """Milliseconds from this event's record to `end`'s (waits for `end`)."""
        if not isinstance(end, Event):
            raise TypeError(f"elapsed_ms: expected a cgrt.Event, got {type(end).__name__}")
        ms = c_float()
        lib.cgrt_event_elapsed_ms(self.handle, end.handle, byref(ms))
        return ms.value


class DeviceArray(Handle):
    """A dense array in device memory that cgrt allocated (cgrt_mem_alloc, freed on close),
    or a view of runtime-owned memory (workspace buffers: never freed by Python).

    On the emulation its memory is host memory: ``__array_interface__`` lets numpy view
    it without a copy (bfloat16 shows as uint16). On a GPU it exposes
    ``__cuda_array_interface__`` (bfloat16 excepted: use ``torch_view``)."""

    _kind = "device array"

    def __init__(self, runtime, shape, dtype="uint8"):
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        _dtype_value(dtype)
        nbytes = DTYPES[dtype][1]
        for s in shape:
            if s < 0:
                raise ValueError(f"empty: negative dimension in {shape}")
            nbytes *= s
        ptr = CUdeviceptr()
        lib.cgrt_mem_alloc(runtime.handle, max(nbytes, 1), byref(ptr))
        self._init(runtime, ptr.value, shape, dtype)
        rt_ptr = runtime.handle
        super().__init__(ptr.value, lambda p: lib.cgrt_mem_free(rt_ptr, p), parent=runtime)

    def _init(self, runtime, ptr, shape, dtype):
        self.runtime, self.ptr, self.shape, self.dtype = runtime, ptr, shape, dtype
        self.itemsize = DTYPES[dtype][1]
        n = 1
        for s in shape:
            n *= s
        self.size, self.nbytes = n, n * self.itemsize

    @classmethod
    def _view(cls, runtime, ptr, shape, dtype):
        self = cls.__new__(cls)
        self._init(runtime, ptr, tuple(shape), dtype)
        Handle.__init__(self, ptr, lambda p: None, parent=runtime)
        return self

    def _cgrt_tensor(self):
        self.handle  # raises once closed
        return Tensor(self.ptr, self.shape, None, self.dtype,
                      "cpu" if self.runtime.emulated else "cuda",
                      None if self.runtime.emulated else self.runtime.device_ordinal, self, "cgrt")

    def _interface(self):
        typestr = {"uint8": "|u1", "int32": "<i4", "int64": "<i8", "float16": "<f2",
                   "bfloat16": "<u2", "float32": "<f4"}[self.dtype]
        return {"shape": self.shape, "typestr": typestr, "data": (self.handle, False),
                "strides": None, "version": 3}

    @property
    def __array_interface__(self):
        if not self.runtime.emulated:
            raise AttributeError("__array_interface__: device memory of a GPU runtime (use numpy())")
        return self._interface()

    @property
    def __cuda_array_interface__(self):
        if self.runtime.emulated:
            raise AttributeError("__cuda_array_interface__: host memory on the emulation")
        if self.dtype == "bfloat16":
            raise AttributeError("__cuda_array_interface__ has no bfloat16 (use torch_view())")
        return self._interface()

    def copy_from(self, src):
        """Fills the array from host memory of the same byte size."""
        buf, n, keep = _host_buffer(src)
        if n != self.nbytes:
            raise ValueError(f"copy_from: {n} bytes for an array of {self.nbytes}")
        lib.cgrt_memcpy_htod(self.runtime.handle, self.handle, buf, n)
        del keep
        return self

    def to_bytes(self):
        out = bytearray(self.nbytes)
        if self.nbytes:
            self.runtime.memcpy_dtoh(out, self.handle)
        return bytes(out)

    def numpy(self):
        """A numpy copy (needs numpy; bfloat16 comes back as uint16 bits)."""
        import numpy as np
        dt = {"bfloat16": np.uint16}.get(self.dtype, self.dtype)
        out = np.empty(self.shape, dtype=dt)
        if self.nbytes:
            self.runtime.memcpy_dtoh(out, self.handle)
        return out

    def torch_view(self):
        """A torch tensor on the same memory (GPU runtime; shares the primary context)."""
        import torch
        if self.runtime.emulated:
            raise ValueError("torch_view: the emulation's memory is host memory")
        dt = getattr(torch, self.dtype)
        raw = torch.as_tensor(_U8View(self.handle, self.nbytes, self.runtime.device_ordinal),
                              device=f"cuda:{self.runtime.device_ordinal}")
        return raw.view(dt).view(self.shape)

    def __len__(self):
        return self.shape[0] if self.shape else 1

    def __repr__(self):
        state = "closed" if self.closed else f"0x{self.ptr:x}"
        return f"<cgrt.DeviceArray {self.dtype}{list(self.shape)} {state}>"


class _U8View:
    def __init__(self, ptr, nbytes, device):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "strides": None, "version": 3}


class Registration(Handle):
    """An external array's memory registered with the runtime (cgrt_mem_register); close
    unregisters it. Keeps the array alive while registered."""

    _kind = "registration"

    def __init__(self, runtime, obj, nbytes=None):
        t = runtime.check_tensor(obj, "register", contiguous=nbytes is None)
        size = t.nbytes if nbytes is None else int(nbytes)
        lib.cgrt_mem_register(runtime.handle, t.ptr, size)
        self.ptr, self.nbytes, self.tensor = t.ptr, size, t
        rt_ptr = runtime.handle
        super().__init__(t.ptr, lambda p: lib.cgrt_mem_unregister(rt_ptr, p), parent=runtime, keep=(t,))
