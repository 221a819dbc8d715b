"""One view of the arrays cgrt accepts: torch tensors, anything with
``__cuda_array_interface__`` or DLPack (``__dlpack__``), numpy arrays (host memory, for
the CPU emulation) and cgrt's own :class:`cgrt.DeviceArray`.

Nothing here imports torch, numpy or CuPy: an object is recognised by its interface.
"""
import ctypes
from ctypes import POINTER, Structure, c_int, c_int64, c_uint8, c_uint16, c_uint64, c_void_p

__all__ = ["Tensor", "as_tensor", "reinterpret", "DTYPES"]

# name -> (cgrt_dtype value, itemsize); the names are numpy/torch's.
DTYPES = {"uint8": (0, 1), "int32": (1, 4), "int64": (2, 8), "float16": (3, 2),
          "bfloat16": (4, 2), "float32": (5, 4)}

# 16-bit integers: not cgrt dtypes, but host arrays of them can be reinterpreted (bfloat16 bits)
_ITEMSIZE = dict({k: v[1] for k, v in DTYPES.items()}, uint16=2, int16=2)
_TYPESTR = {"<u2": "uint16", "<i2": "int16", "|u1": "uint8", "<u1": "uint8", "<i4": "int32", "<i8": "int64", "<f2": "float16",
            "<f4": "float32"}
_DL_CODES = {(1, 8): "uint8", (0, 32): "int32", (0, 64): "int64", (2, 16): "float16",
             (4, 16): "bfloat16", (2, 32): "float32"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


class Tensor:
    """A dense-or-strided array described by its address: ``ptr`` (int), ``shape``,
    ``strides`` (in elements), ``dtype`` (a key of DTYPES), ``device`` (``"cuda"`` or
    ``"cpu"``), ``device_index`` (None when the producer does not say), ``owner`` (kept
    alive with the view), ``source`` (torch, cai, dlpack, numpy, cgrt)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "device_index", "owner", "source")

    def __init__(self, ptr, shape, strides, dtype, device, device_index, owner, source):
        self.ptr, self.shape, self.dtype = int(ptr or 0), tuple(int(s) for s in shape), dtype
        self.strides = tuple(int(s) for s in strides) if strides is not None else _dense(self.shape)
        self.device, self.device_index, self.owner, self.source = device, device_index, owner, source

    @property
    def itemsize(self):
        return _ITEMSIZE[self.dtype]

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self):
        return self.numel * self.itemsize

    @property
    def contiguous(self):
        if self.numel <= 1:
            return True
        return all(st == d for sh, st, d in zip(self.shape, self.strides, _dense(self.shape)) if sh != 1)

    def __repr__(self):
        return (f"cgrt.Tensor({self.source}, {self.dtype}{list(self.shape)}, {self.device}"
                f"{'' if self.device_index is None else ':%d' % self.device_index}, ptr=0x{self.ptr:x})")


def _dense(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def _from_torch(t):
    name = str(t.dtype).replace("torch.", "")
    if name not in DTYPES:
        raise TypeError(f"torch dtype {t.dtype} is not one cgrt knows ({', '.join(DTYPES)})")
    dev = t.device
    return Tensor(t.data_ptr(), tuple(t.shape), tuple(t.stride()), name, dev.type,
                  dev.index if dev.type == "cuda" else None, t, "torch")


def _strides_from_bytes(strides, itemsize, what):
    if strides is None:
        return None
    out = []
    for s in strides:
        if s % itemsize:
            raise ValueError(f"{what}: byte stride {s} is not a multiple of the item size {itemsize}")
        out.append(s // itemsize)
    return out


def _from_interface(obj, iface, device, source):
    typestr = iface["typestr"]
    dtype = _TYPESTR.get(typestr)
    if dtype is None and getattr(getattr(obj, "dtype", None), "name", None) == "bfloat16":
        dtype = "bfloat16"  # ml_dtypes.bfloat16 (typestr <V2)
    if dtype is None:
        raise TypeError(f"array typestr {typestr!r} is not one cgrt knows "
                        f"({', '.join(DTYPES)}; bfloat16 through torch, DLPack or ml_dtypes)")
    ptr = iface["data"][0] if iface.get("data") else 0
    strides = _strides_from_bytes(iface.get("strides"), _ITEMSIZE[dtype], source)
    return Tensor(ptr, iface["shape"], strides, dtype, device, None, obj, source)


class _DLDevice(Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", _DLDevice), ("ndim", c_int), ("dtype", _DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj):
    capsule = obj.__dlpack__()
    addr = _capsule_pointer(capsule, b"dltensor")
    if not addr:
        raise TypeError("__dlpack__() did not return a 'dltensor' capsule")
    # DLManagedTensor starts with its DLTensor; the capsule (kept as the owner) calls the
    # producer's deleter when it is collected, as DLPack specifies for unconsumed capsules.
    t = _DLTensor.from_address(addr)
    d = t.dtype
    dtype = _DL_CODES.get((d.code, d.bits)) if d.lanes == 1 else None
    if dtype is None:
        raise TypeError(f"DLPack dtype (code {d.code}, bits {d.bits}, lanes {d.lanes}) is not one cgrt "
                        f"knows ({', '.join(DTYPES)})")
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
    kind = t.device.device_type
    if kind in (_DL_CUDA, _DL_CUDA_MANAGED):
        device, index = "cuda", t.device.device_id
    elif kind in (_DL_CPU, _DL_CUDA_HOST):
        device, index = "cpu", None
    else:
        raise TypeError(f"DLPack device type {kind} is neither CUDA nor CPU memory")
    return Tensor((t.data or 0) + t.byte_offset, shape, strides, dtype, device, index, (obj, capsule),
                  "dlpack")


def as_tensor(obj, name="tensor"):
    """A :class:`Tensor` view of obj, or TypeError naming `name` and what was given."""
    if isinstance(obj, Tensor):
        return obj
    view = getattr(obj, "_cgrt_tensor", None)
    if view is not None:
        return view()
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch" and hasattr(obj, "data_ptr") and hasattr(obj, "stride"):
        return _from_torch(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_interface(obj, obj.__cuda_array_interface__, "cuda", "cai")
    if hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
        return _from_dlpack(obj)
    if hasattr(obj, "__array_interface__"):
        return _from_interface(obj, obj.__array_interface__, "cpu", "numpy")
    raise TypeError(f"{name}: expected a torch tensor, an array with __cuda_array_interface__, "
                    f"__dlpack__ or __array_interface__, or a cgrt.DeviceArray; got {type(obj).__name__}")


def reinterpret(obj, dtype):
    """A view of obj's memory as another dtype of the same item size, e.g. a numpy
    uint16 array as bfloat16 (numpy has no bfloat16)."""
    t = as_tensor(obj, "reinterpret")
    if dtype not in DTYPES:
        raise TypeError(f"reinterpret: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if DTYPES[dtype][1] != t.itemsize:
        raise TypeError(f"reinterpret: {t.dtype} ({t.itemsize} bytes) as {dtype} ({DTYPES[dtype][1]} bytes)")
    return Tensor(t.ptr, t.shape, t.strides, dtype, t.device, t.device_index, t.owner, t.source)


def check(t, name, *, dtype=None, shape=None, contiguous=True, align=None, emulated=None,
          device_index=None):
    """Validates a view before any launch; raises TypeError (dtype) or ValueError (shape,
    contiguity, alignment, device) naming the argument. shape entries may be None (any)."""
    if dtype is not None and t.dtype != dtype:
        raise TypeError(f"{name}: dtype {t.dtype}, expected {dtype}")
    if shape is not None:
        ok = len(t.shape) == len(shape) and all(e is None or e == s for e, s in zip(shape, t.shape))
        if not ok:
            want = "[" + ", ".join("*" if e is None else str(e) for e in shape) + "]"
            raise ValueError(f"{name}: shape {list(t.shape)}, expected {want}")
    if contiguous and not t.contiguous:
        raise ValueError(f"{name}: not contiguous (strides {list(t.strides)} for shape {list(t.shape)})")
    if t.numel and not t.ptr:
        raise ValueError(f"{name}: null data pointer")
    if align and t.ptr % align:
        raise ValueError(f"{name}: address 0x{t.ptr:x} is not {align}-byte aligned")
    if emulated is not None:
        if t.device == "cpu" and not emulated:
            raise ValueError(f"{name}: host memory ({t.source}) on a GPU runtime; host-backed arrays "
                             f"are for the CPU emulation only")
        if t.device == "cuda" and emulated:
            raise ValueError(f"{name}: CUDA memory ({t.source}) on an emulated runtime")
    if (device_index is not None and t.device == "cuda" and t.device_index is not None
            and t.device_index != device_index):
        raise ValueError(f"{name}: on cuda:{t.device_index}, the runtime is on cuda:{device_index}")
    return t
