"""cgrt for Python: the C library libcgrt.so over ctypes (standard library only; numpy,
torch and CuPy are optional). See python/README.md and docs/python.md.

    import cgrt
    with cgrt.Runtime(driver="emulated") as rt:
        ...

Every public C function is reachable, typed, as ``cgrt.lib.<name>``; a failed status
raises the :class:`cgrt.Error` subclass of that status (``cgrt.StalePointerError``...).
"""
from ._errors import *  # noqa: F401,F403 (Error and one class per status)
from ._errors import Error, LibraryNotFoundError, error_class  # noqa: F401
from ._lib import PENDING, SIGNATURES, STRUCTS, candidates, lib, load  # noqa: F401
from ._tensor import DTYPES, Tensor, as_tensor, reinterpret  # noqa: F401
from .graphs import Batch, GraphSet  # noqa: F401
from .mla import MlaPlan, mla_decode, mla_defaults  # noqa: F401
from .module import EmulatedCall, Function, Module, launch_kernel, register_emulated_kernel  # noqa: F401
from .segment import ALIGN, RepeatReport, Segment, layer_remaps, repeat, stream_capturing  # noqa: F401
from .runtime import (DeviceArray, Event, Registration, Runtime, RuntimeInfo, last_error,  # noqa: F401
                      runtime_defaults, set_log_callback, status_name, version)

__version__ = "1.0.0"


def graphs_defaults():
    """cgrt_graphs_options_init's defaults as a dict (callbacks and pointers excluded)."""
    from . import _lib as L
    from ._options import defaults
    d = defaults(L.GraphsOptions, "cgrt_graphs_options_init")
    for k in ("enqueue", "user", "buffers", "capture_sizes", "stream", "draft_rebuild"):
        d.pop(k)
    d["meta"] = {f: getattr(d["meta"], f) for f, _ in L.GraphMeta._fields_}
    return d
