"""Host kernels through cgrt's driver table (cgrt_module.h), and C references of kernels
for the emulation written in Python."""
import ctypes
import threading
from ctypes import byref, c_size_t, c_void_p

from . import _lib
from ._handle import Handle
from ._lib import lib
from ._streams import stream_ptr
from ._tensor import as_tensor

__all__ = ["Module", "Function", "EmulatedCall", "register_emulated_kernel", "launch_kernel"]


class Module(Handle):
    """cgrt_module: a module image (fatbin, cubin or PTX bytes) loaded on the runtime's
    context; on the emulation any image loads and kernels run their registered references."""

    _kind = "module"

    def __init__(self, runtime, image):
        if not isinstance(image, (bytes, bytearray)) or not image:
            raise TypeError("load_module: the image must be non-empty bytes")
        data = bytes(image) + b"\0"  # PTX text must be NUL-terminated
        out = c_void_p()
        lib.cgrt_module_load(runtime.handle, data, byref(out))
        self.runtime = runtime
        super().__init__(out.value, lib.cgrt_module_unload, parent=runtime)

    def function(self, name):
        """The kernel `name` (an extern "C" symbol) as a :class:`Function`."""
        out = c_void_p()
        lib.cgrt_module_function(self.handle, name.encode(), byref(out))
        return Function(self, name, out.value)


class Function:
    """A kernel of a loaded module; valid while the module is open."""

    def __init__(self, module, name, ptr):
        self.module, self.name, self.ptr = module, name, ptr

    def launch(self, grid, block, args, shared_bytes=0, stream=None):
        launch_kernel(self.module.runtime, self, grid, block, args, shared_bytes, stream)

    def __repr__(self):
        return f"<cgrt.Function {self.name}>"


def _dims(d, what):
    d = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(d) <= 3 or any(not isinstance(x, int) or x < 1 for x in d):
        raise ValueError(f"{what}: expected 1 to 3 positive ints, got {d!r}")
    return d + (1,) * (3 - len(d))


def _arg(a, i):
    if isinstance(a, ctypes._SimpleCData) or isinstance(a, ctypes.Structure):
        return a
    if isinstance(a, (int, float)):
        raise TypeError(f"kernel argument {i}: a Python {type(a).__name__} has no size; wrap it "
                        f"(ctypes.c_int32, c_int64, c_float, c_uint64...)")
    return ctypes.c_uint64(as_tensor(a, f"kernel argument {i}").ptr)  # an array: its address


def launch_kernel(runtime, fn, grid, block, args, shared_bytes=0, stream=None):
    """cgrt_launch_kernel: `args` are ctypes values (their sizes are the kernel's
    parameter sizes) or arrays (passed as 8-byte addresses)."""
    g, b = _dims(grid, "grid"), _dims(block, "block")
    vals = [_arg(a, i) for i, a in enumerate(args)]
    ptrs = (c_void_p * max(len(vals), 1))(*[ctypes.addressof(v) for v in vals])
    fptr = fn.ptr if isinstance(fn, Function) else int(fn)
    lib.cgrt_launch_kernel(runtime.handle, fptr, g[0], g[1], g[2], b[0], b[1], b[2], int(shared_bytes),
                           stream_ptr(stream), ptrs)


class EmulatedCall:
    """What a Python reference kernel receives: ``grid``, ``block``, ``shared_bytes`` and
    its parameters, read with ``param(i, ctype)`` (e.g. ctypes.c_int32) or ``ptr(i)``.
    Valid only while the kernel runs (it reads the emulation's launch in place)."""

    __slots__ = ("_launch", "_params", "_offsets", "_n")

    def __init__(self, launch, params, offsets, n):
        self._launch, self._params, self._offsets, self._n = launch, params, offsets, n

    @property
    def grid(self):
        return tuple(_lib.EmulatedLaunch.from_address(self._launch).grid)

    @property
    def block(self):
        return tuple(_lib.EmulatedLaunch.from_address(self._launch).block)

    @property
    def shared_bytes(self):
        return _lib.EmulatedLaunch.from_address(self._launch).shared_bytes

    def _at(self, i):
        if not -self._n <= i < self._n:
            raise IndexError(f"parameter {i}: the kernel has {self._n}")
        return self._params + c_size_t.from_address(self._offsets + _SIZE_T * (i % self._n)).value

    def param(self, i, ctype):
        return ctype.from_address(self._at(i)).value

    def ptr(self, i):
        return ctypes.c_uint64.from_address(self._at(i)).value


_SIZE_T = ctypes.sizeof(c_size_t)
_emulated = []  # every callback ever registered stays alive (the C table keeps its pointer)
_emulated_lock = threading.Lock()


def register_emulated_kernel(name, param_sizes, fn):
    """Registers fn(call: EmulatedCall) as the C reference the emulation runs for kernel
    `name` (cgrt_emulated_kernel_register), with the byte sizes of its parameters. It runs
    the whole grid at once and must leave memory as the kernel would.

    A kernel has no status to return, so an exception fn raises is kept (the first one
    per thread until it is reported) and the cgrt call that ran the kernel (a launch,
    ``GraphSet.step``/``draft``/``capture``, a synchronization...) raises
    :class:`cgrt.EmulatedKernelError` with it as ``__cause__`` when it returns; that
    call's own effects stand (``call_status`` says what the C call returned). Kernels run
    on the thread that makes the cgrt call."""
    n = len(param_sizes)
    sizes = (c_size_t * max(n, 1))(*param_sizes)

    def body(launch, params, offsets):
        try:
            fn(EmulatedCall(launch, params or 0, offsets or 0, n))
        except BaseException as e:  # noqa: BLE001 - reported by the cgrt call that ran it
            _lib.kernel_failed(name, e)

    cb = _lib.EMULATED_KERNEL_FN(body)
    with _emulated_lock:
        lib.cgrt_emulated_kernel_register(name.encode(), n, sizes, cb)
        _emulated.append(cb)
