"""The floors next to a cgrt step's host time, called the way PreparedStep calls cgrt
(untyped ctypes function objects, arguments already in C form):

  launch      a bare cuGraphLaunch of the bucket's own executable (cgrt_graphs_bucket_exec)
              on the set's stream, through libcuda directly: the driver's floor for that
              graph plus one ctypes call (GPU only);
  nobind      cgrt_graphs_step without bindings: cgrt's step path without rebinding;
  ctypes      cgrt_graphs_bucket_rows: a foreign call that does almost nothing in C.

Under device_patch each direct launch needs a mailbox slot: cgrt_graphs_bucket_exec(set,
index, k) fills the next k slots with "nothing moved", and exactly k bare launches follow
(include/cgrt/cgrt_graphs.h); `launch` asks for the next 32 whenever the last are used.
"""
import ctypes

import cgrt
from cgrt import _lib


class Floors:
    def __init__(self, gs, rows, mode="decode"):
        self.gs, self.rows, self.mode = gs, rows, mode
        self.index = next(i for i, b in enumerate(gs.buckets())
                          if b["mode"] == mode and not b["draft"] and b["rows"] == rows)
        self.h = ctypes.c_void_p(gs.handle)
        self._step = _lib.raw_function("cgrt_graphs_step")
        self._rows = _lib._cdll["cgrt_graphs_bucket_rows"]  # a new untyped object
        self._rows.restype, self._rows.argtypes = ctypes.c_int, None
        self._zero = ctypes.c_size_t(0)
        self._m = cgrt.graphs.MODES[mode]
        self.launch_fn = None
        self._left = 0
        if not gs.runtime.emulated:
            cuda = ctypes.CDLL("libcuda.so.1")
            fn = cuda["cuGraphLaunch"]
            fn.restype, fn.argtypes = ctypes.c_int, None
            self.launch_fn, self.exec, self.stream = fn, ctypes.c_void_p(), ctypes.c_void_p(gs.stream)

    def nobind(self, n):
        r = self._step(self.h, self._m, n, None, self._zero)
        if r:
            _lib.check_status(r)

    def ctypes_call(self, n):
        self._rows(self.h, self._m, n)

    def _reserve(self):
        """Outside the timed call: the next 32 direct launches (mailbox slots)."""
        cgrt.lib.cgrt_graphs_bucket_exec(self.gs.handle, self.index, 32, ctypes.byref(self.exec))
        self._left = 32

    def before(self):
        if self._left == 0:
            self._reserve()

    def launch(self, _n=None):
        r = self.launch_fn(self.exec, self.stream)
        self._left -= 1
        if r:
            raise RuntimeError(f"cuGraphLaunch returned {r}")

    def finish(self):
        """Makes the launches still reserved (inert, nothing moved) so that the set's next
        step finds the mailbox in step."""
        while self._left > 0:
            self.launch()
