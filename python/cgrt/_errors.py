"""Exceptions keyed by cgrt_status (include/cgrt/cgrt_status.h).

Every failed call raises the subclass of :class:`Error` for its status. The exception
carries the status value (``status``), its name (``status_name``, e.g.
``"CGRT_ERROR_STALE_POINTER"``) and the calling thread's ``cgrt_last_error()`` message
(``message``).
"""

__all__ = ["Error", "LibraryNotFoundError", "EmulatedKernelError", "error_class", "STATUS_NAMES"]


class Error(RuntimeError):
    """A cgrt call failed. ``status``: the cgrt_status value; ``status_name``: its name;
    ``message``: cgrt_last_error() of the failing call (or the package's own message)."""

    status = None  # set on each subclass

    def __init__(self, message, status=None, status_name=None):
        if status is not None:
            self.status = status
        self.status_name = status_name or STATUS_NAMES.get(self.status, "CGRT_STATUS_UNKNOWN")
        self.message = message
        super().__init__(f"{self.status_name}: {message}" if message else self.status_name)


class LibraryNotFoundError(ImportError):
    """libcgrt.so was not found (the message lists where the package looked)."""


# (value, NAME without CGRT_, class name, extra base) — the list of cgrt_status.h.
_STATUSES = [
    (1, "ERROR_INVALID_ARGUMENT", "InvalidArgumentError", ValueError),
    (2, "ERROR_INVALID_HANDLE", "InvalidHandleError", None),
    (3, "ERROR_NO_DRIVER", "NoDriverError", None),
    (4, "ERROR_NO_DEVICE", "NoDeviceError", None),
    (5, "ERROR_UNSUPPORTED_DEVICE", "UnsupportedDeviceError", None),
    (6, "ERROR_OUT_OF_MEMORY", "OutOfMemoryError", MemoryError),
    (7, "ERROR_DRIVER", "DriverError", None),
    (8, "ERROR_WORKSPACE_LOCKED", "WorkspaceLockedError", None),
    (9, "ERROR_GUARD_CORRUPTED", "GuardCorruptedError", None),
    (10, "ERROR_COUNTERS_DIRTY", "CountersDirtyError", None),
    (11, "ERROR_CAPTURING", "CapturingError", None),
    (12, "ERROR_CAPTURE_FAILED", "CaptureFailedError", None),
    (13, "ERROR_NO_BUCKET", "NoBucketError", None),
    (14, "ERROR_STALE_POINTER", "StalePointerError", None),
    (15, "ERROR_CALLBACK_FAILED", "CallbackFailedError", None),
    (16, "ERROR_NOT_SUPPORTED", "NotSupportedError", None),
    (17, "ERROR_INTERNAL", "InternalError", None),
]

STATUS_NAMES = {0: "CGRT_SUCCESS"}
_BY_STATUS = {}
for _value, _name, _cls, _extra in _STATUSES:
    STATUS_NAMES[_value] = "CGRT_" + _name
    _bases = (Error,) if _extra is None else (Error, _extra)
    _klass = type(_cls, _bases, {"status": _value, "__module__": "cgrt",
                                 "__doc__": f"CGRT_{_name} (status {_value})."})
    _BY_STATUS[_value] = _klass
    globals()[_cls] = _klass
    __all__.append(_cls)
del _value, _name, _cls, _extra, _bases, _klass


class EmulatedKernelError(_BY_STATUS[15]):
    """A Python reference kernel (cgrt.register_emulated_kernel) raised while a cgrt call
    ran it on the emulation; its exception is ``__cause__``. A CGRT_ERROR_CALLBACK_FAILED
    raised by the package: ``call_status`` is the status the C call itself returned (0:
    the call succeeded and its effects, a launch or new bindings, took place)."""

    __module__ = "cgrt"

    def __init__(self, message, call_status=0):
        super().__init__(message)
        self.call_status = call_status


def error_class(status):
    """The exception class of a status value (Error itself for an unknown value)."""
    return _BY_STATUS.get(int(status), Error)
