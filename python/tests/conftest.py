"""pytest fixtures for the cgrt package: tests run on the CPU emulation (no GPU needed);
test_torch_gpu.py runs with torch on a GPU and skips otherwise."""
import os
import struct
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))  # the source tree, unless installed

import cgrt  # noqa: E402


def has_symbols(*names):
    cdll = cgrt.load()
    return all(hasattr(cdll, n) for n in names)


MEM_API = ("cgrt_mem_alloc", "cgrt_mem_free", "cgrt_mem_register", "cgrt_mem_unregister")
needs_mem_api = pytest.mark.skipif(
    not has_symbols(*MEM_API),
    reason="this libcgrt.so lacks cgrt_mem_alloc/free/register/unregister (the device-memory API "
           "of another branch, not merged yet)")


def floats(arr):
    """The float32 values of a device array."""
    return list(struct.unpack(f"{arr.size}f", arr.to_bytes()))


def fill(rt, arr, values):
    """Writes float32 values into a device array (complete on return)."""
    rt.memcpy_htod(arr, struct.pack(f"{len(values)}f", *values))


@pytest.fixture
def rt():
    r = cgrt.Runtime(driver="emulated")
    yield r
    r.close()


@pytest.fixture
def warnings_log():
    lines = []
    cgrt.set_log_callback(lambda level, msg: lines.append((level, msg)), "warn")
    yield lines
    cgrt.set_log_callback(None)
