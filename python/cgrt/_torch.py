"""PyTorch's caching allocator during cgrt's captures: a private memory pool.

cgrt captures a graph set's buckets itself (cuStreamBeginCapture on its own stream), so
PyTorch does not know a capture is under way. Inside the step callback, while cgrt
captures, the tensors PyTorch allocates come from a private pool of the graph set
(``torch.cuda.graph_pool_handle()``, the mechanism ``torch.cuda.graph`` uses):
  - the pool's blocks are only handed out to allocations made while one of the set's
    captures is routed to it, never to eager work; a block freed during a capture goes
    back to the pool, not to the general cache, so memory a captured graph writes is
    never reused by later work while the graph can still run;
  - buckets of one set share the pool (like graphs captured with ``pool=``): a temporary
    of one bucket may reuse a temporary of another, which is safe because the set's
    graphs run one at a time on one replay stream and a step's temporaries live only
    within the step;
  - routing also tells the allocator a capture is under way, so it defers cudaFree and
    event queries that would invalidate the capture;
  - the pool is released (its memory returns to the allocator) only after the graph set
    is destroyed, when no graph can write it any more.

The use count follows torch's own CUDAGraph exactly (capture_begin: one
beginAllocateToPool, which creates the pool or adds a use; capture_end: one
endAllocateToPool; reset/destruction: one releasePool): each capture of a bucket is one
begin and one end, and the set gives back one use per capture when it is destroyed. A
handle shared with torch.cuda.graph(pool=...) therefore stays valid while any graph or set
captured into it exists; once all of them are gone the allocator refuses a new capture
into that handle (INTERNAL ASSERT use_count > 0), as it does for torch's graphs: take a
fresh torch.cuda.graph_pool_handle() then.
"""
import contextlib
import sys

__all__ = ["torch_loaded", "PrivatePool", "external_stream"]


def torch_loaded():
    return sys.modules.get("torch")


def _pool_api(torch):
    c = torch._C
    if hasattr(c, "_cuda_beginAllocateCurrentThreadToPool"):  # torch >= 2.8
        return c._cuda_beginAllocateCurrentThreadToPool, c._cuda_endAllocateToPool
    if hasattr(c, "_cuda_beginAllocateToPool"):  # 2.4 .. 2.7
        return c._cuda_beginAllocateToPool, c._cuda_endAllocateCurrentStreamToPool
    if hasattr(c, "_cuda_beginAllocateCurrentStreamToPool"):  # 2.0 .. 2.3
        return c._cuda_beginAllocateCurrentStreamToPool, c._cuda_endAllocateCurrentStreamToPool
    raise RuntimeError(f"torch {torch.__version__}: no private-pool API (torch._C._cuda_beginAllocate*ToPool)")


_streams = {}


def external_stream(torch, ptr, device):
    """torch.cuda.ExternalStream for a CUstream, cached per (ptr, device)."""
    key = (ptr, device)
    s = _streams.get(key)
    if s is None:
        s = _streams[key] = torch.cuda.ExternalStream(ptr, device=device)
    return s


class PrivatePool:
    """A torch private pool for one graph set (or one passed in, e.g. shared with
    torch.cuda.graph(pool=...)); see the module docstring."""

    def __init__(self, torch, device, handle=None):
        self.torch, self.device = torch, device
        self.id = handle if handle is not None else torch.cuda.graph_pool_handle()
        self._begin, self._end = _pool_api(torch)
        self.uses = 0  # each begin adds a use that release() gives back
        self.account = False  # True: log the allocator's reserved bytes around each capture
        self.log = []  # [(reserved before, reserved after)] per capture, in capture order

    @contextlib.contextmanager
    def capture(self, stream_ptr):
        """torch's current stream is the capture stream; allocations go to the pool."""
        torch = self.torch
        with torch.cuda.stream(external_stream(torch, stream_ptr, self.device)):
            before = torch.cuda.memory_reserved(self.device) if self.account else None
            self._begin(self.device, self.id)
            self.uses += 1
            try:
                yield
            finally:
                self._end(self.device, self.id)
                if before is not None:
                    # while this thread captures, only the pool can grow (the set's worker
                    # thread allocates no torch memory): the growth is the pool's
                    self.log.append((before, torch.cuda.memory_reserved(self.device)))

    @contextlib.contextmanager
    def eager(self, stream_ptr):
        """torch's current stream is cgrt's stream (warm-up, eager fallback)."""
        with self.torch.cuda.stream(external_stream(self.torch, stream_ptr, self.device)):
            yield

    def release(self):
        """After the graphs are destroyed: hands the pool back to torch's allocator."""
        rel = self.torch._C._cuda_releasePool
        while self.uses:
            self.uses -= 1
            rel(self.device, self.id)
