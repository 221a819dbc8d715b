"""Streams given as ints, torch/CuPy stream objects or anything with __cuda_stream__."""
import ctypes
import sys

__all__ = ["stream_ptr", "torch_current_stream"]


def stream_ptr(stream):
    """The CUstream address of `stream` (0 for None: the legacy default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream: expected a stream, got a bool")
    if isinstance(stream, int):
        return stream
    if isinstance(stream, ctypes.c_void_p):
        return stream.value or 0
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr"):  # cupy.cuda.Stream
        return int(stream.ptr)
    raise TypeError(f"stream: expected None, an int (CUstream), a torch or CuPy stream, or an object "
                    f"with __cuda_stream__; got {type(stream).__name__}")


def torch_current_stream(device_index):
    """torch's current stream on the device (an int), or None when torch is not loaded."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return int(torch.cuda.current_stream(device_index).cuda_stream)
