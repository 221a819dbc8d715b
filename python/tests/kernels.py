"""Python reference kernels for the emulation (registered once per process)."""
import ctypes

import cgrt

_done = []
FAIL = {"on": False, "exc": ValueError("pytest_flaky was told to fail")}


def _axpy(call):  # y[i] = a * x[i] + y[i] for i < n
    a = call.param(0, ctypes.c_float)
    n = call.param(3, ctypes.c_int32)
    x = (ctypes.c_float * n).from_address(call.ptr(1))
    y = (ctypes.c_float * n).from_address(call.ptr(2))
    for i in range(n):
        y[i] = a * x[i] + y[i]


def _flaky(call):  # axpy, or raises FAIL["exc"] while FAIL["on"]
    if FAIL["on"]:
        raise FAIL["exc"]
    _axpy(call)


def register():
    if not _done:
        cgrt.register_emulated_kernel("pytest_axpy", [4, 8, 8, 4], _axpy)
        cgrt.register_emulated_kernel("pytest_flaky", [4, 8, 8, 4], _flaky)
        _done.append(1)
