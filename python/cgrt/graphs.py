"""Graph sets (cgrt_graphs.h) whose step is a Python callable.

The callable launches one decode step, PyTorch and cgrt work alike, on the stream cgrt
hands it; cgrt runs it eagerly (warm-up), captures it once per bucket and replays the
graphs, patching the nodes whose buffers were rebound. See docs/python.md.
"""
import contextlib
import ctypes
import functools
import sys
import weakref
from ctypes import byref, c_int, c_void_p

from . import _lib
from ._errors import EmulatedKernelError, Error, InvalidHandleError
from ._handle import Handle
from ._lib import lib
from ._options import enum_value, make_options
from ._streams import stream_ptr
from ._torch import PrivatePool, external_stream, torch_loaded
from .runtime import DeviceArray

__all__ = ["GraphSet", "Batch", "PreparedStep", "MODES", "REPLAY_MODES", "DIRECTIONS"]

MODES = {"decode": 0, "block": 1, "verify": 2}
REPLAY_MODES = {"pointer_update": 0, "copy_in": 1, "exec_update": 2}
DIRECTIONS = {"in": 1, "out": 2, "inout": 3}
_MODE_NAMES = {v: k for k, v in MODES.items()}
_META_BUFFERS = ("req_seq_lens", "req_positions", "block_table", "seq_lens", "positions",
                 "slot_mapping", "draft_remaining")
_MODE_FAST = {"decode": 0, "block": 1, "verify": 2}
_CALLBACK_FAILED = 15
_COPY_IN = REPLAY_MODES["copy_in"]
# cgrt_binding as 64-bit words (int buffer + padding, ptr, bytes): the per-step path writes
# addresses and sizes into a prebuilt array through this view.
_WORDS = ctypes.sizeof(_lib.Binding) // 8
_PTR, _BYTES = _lib.Binding.ptr.offset // 8, _lib.Binding.bytes.offset // 8
assert ctypes.sizeof(_lib.Binding) % 8 == 0 and _lib.Binding.ptr.offset % 8 == 0 and _lib.Binding.bytes.offset % 8 == 0


class Batch:
    """What the step is asked to launch (cgrt_batch_desc): ``mode`` ("decode", "block" or
    "verify": causal blocks), ``block_len``, ``num_reqs``, ``rows``, ``padded_reqs``, ``padded_rows`` (the
    rows the launched work must cover), ``capturing`` (True under stream capture: no
    synchronization, no reading results back), ``warmup`` (True for a warm-up run before a
    bucket's capture: eager, results discarded; see cgrt.repeat), ``draft_step``, ``while_body``,
    ``stream`` (the CUstream as an int), ``addresses`` (current address per buffer id).
    ``batch[name]`` (or ``batch[id]``) is the array bound to that buffer now: the step
    takes its tensors from there, so that what it captures points into the buffers cgrt
    rebinds."""

    __slots__ = ("mode", "block_len", "num_reqs", "rows", "padded_reqs", "padded_rows", "capturing",
                 "warmup", "draft_step", "while_body", "stream", "addresses", "_set")

    def __init__(self, gs, stream, d):
        self.mode = _MODE_NAMES.get(d.mode, d.mode)
        self.block_len, self.num_reqs, self.rows = d.block_len, d.num_reqs, d.rows
        self.padded_reqs, self.padded_rows = d.padded_reqs, d.padded_rows
        self.capturing, self.draft_step, self.while_body = bool(d.capturing), d.draft_step, bool(d.while_body)
        self.warmup = bool(d.warmup)
        self.stream = stream or 0
        self.addresses = tuple(d.buffers[i] for i in range(d.num_buffers))
        self._set = gs

    def __getitem__(self, key):
        gs = self._set
        i = gs.buffer_id(key)
        for j, obj, ptr in reversed(gs._pending):  # bound by the call running the step
            if j == i and ptr == self.addresses[i]:
                return obj  # (exec-update re-capture, eager fallback)
        if gs._prep is not None:
            gs._sync_bound()
        obj = gs._bound[i]
        if gs._bound_ptr[i] != self.addresses[i]:
            raise RuntimeError(f"buffer {gs.names[i]!r}: cgrt reports 0x{self.addresses[i]:x}, the set "
                               f"holds 0x{gs._bound_ptr[i]:x}")
        return obj

    def torch_stream(self):
        """torch.cuda.ExternalStream of ``stream`` (already torch's current stream in the step)."""
        torch = torch_loaded()
        return external_stream(torch, self.stream, self._set.runtime.device_ordinal)

    def __repr__(self):
        return (f"Batch({self.mode}, reqs {self.num_reqs}, rows {self.rows}/{self.padded_rows}, "
                f"capturing={self.capturing})")


def _enqueue(ref, user, stream, desc):
    gs = ref()
    if gs is None:
        return _CALLBACK_FAILED
    return gs._run_step(gs._step, stream, desc.contents, ())


def _rebuild(ref, user, stream, next_step, desc):
    gs = ref()
    if gs is None:
        return _CALLBACK_FAILED
    return gs._run_step(gs._draft_rebuild, stream, desc.contents, (next_step,))


def _destroy_set(ptr, pool):
    try:
        lib.cgrt_graphs_destroy(ptr)
    finally:
        if pool is not None:
            pool.release()


class GraphSet(Handle):
    """A graph set whose step is ``step(stream: int, batch: Batch)``.

    ``buffers``: the bindable buffers, a list of ``(name, array)`` or
    ``(name, array, direction)`` ("in", "out", "inout"; default "inout"); a buffer's id
    is its index. ``meta``: a dict of cgrt_graph_meta (buffer names or ids for
    req_seq_lens, req_positions, block_table, seq_lens, positions, slot_mapping,
    draft_remaining; block_size, max_blocks_per_seq); enabled when given.
    ``capture_sizes``: list of rows. ``replay_mode``: "pointer_update", "copy_in",
    "exec_update". ``stream``: replay stream (None: the set's own). ``draft_rebuild``: a
    callable(stream, next_step, batch) for draft loops under DCP. ``torch_pool``: the
    torch private pool for allocations made during capture (None: a new one when torch
    is loaded and the runtime is on a GPU; a handle from torch.cuda.graph_pool_handle()
    to share one; False: none). Other keywords are cgrt_graphs_options fields with the C
    defaults (max_num_seqs and max_model_len are required).

    The step must launch on ``stream`` only (with torch loaded it is torch's current
    stream during the call), take its arrays from ``batch[name]``, and must not call
    back into this set. An exception it raises fails the C call, and the cgrt.Error
    raised from that call has it as ``__cause__``.

    ``step(n, bind=...)`` with torch on a GPU: when the replay stream is torch's current
    stream, the replay is ordinary work on that stream (no event, no record_stream, like
    a torch op); otherwise the package orders the two streams and record_streams the
    bound tensors (see the comment above ``_init_fast_path``). Without ``stream`` the
    replay stream is then one of torch's pooled streams (they are never destroyed, so a
    tensor recorded on it may outlive the set); a ``stream`` passed in must outlive every
    tensor bound to a step of the set. A set's methods must not
    be called from several threads at once (they share per-set state, e.g. the prebuilt
    binding arrays).
    """

    _kind = "graph set"

    def __init__(self, runtime, step, *, buffers=(), meta=None, capture_sizes=None,
                 replay_mode="pointer_update", stream=None, draft_rebuild=None, torch_pool=None, **options):
        if not callable(step):
            raise TypeError(f"step: expected a callable, got {type(step).__name__}")
        if draft_rebuild is not None and not callable(draft_rebuild):
            raise TypeError("draft_rebuild: expected a callable")
        self.runtime, self._step, self._draft_rebuild = runtime, step, draft_rebuild
        self._step_error = None
        self._in_step = False
        self._pending = ()
        self._parse_buffers(runtime, buffers)
        for bad in ("enqueue", "user", "buffers", "num_buffers", "capture_sizes", "num_capture_sizes",
                    "meta", "draft_rebuild"):
            if bad in options:
                raise TypeError(f"option {bad!r} is set by the package")
        opts = make_options(_lib.GraphsOptions, "cgrt_graphs_options_init", options)
        opts.replay_mode = enum_value(replay_mode, REPLAY_MODES, "replay_mode")
        self.replay_mode = opts.replay_mode
        torch = torch_loaded()
        self._torch = torch if torch is not None and not runtime.emulated else None
        self._torch_stream = None
        if stream is None and self._torch is not None:
            # The replay stream is one of torch's pooled streams, which live as long as the
            # process: a tensor record_stream-ed on it (see _order_before) makes the caching
            # allocator record an event on it when the tensor dies, which may be after this
            # set (and a stream of its own) is destroyed.
            self._torch_stream = self._torch.cuda.Stream(device=runtime.device_ordinal)
            stream = self._torch_stream.cuda_stream
        opts.stream = stream_ptr(stream) or None
        self._descs = (_lib.BufferDesc * max(len(self.names), 1))()
        for i, (name, t, d) in enumerate(zip(self.names, self._views, self._dirs)):
            self._descs[i] = _lib.BufferDesc(name.encode(), t.ptr, t.nbytes, d)
        opts.buffers, opts.num_buffers = self._descs, len(self.names)
        if capture_sizes is not None:
            sizes = [int(s) for s in capture_sizes]
            self._sizes = (c_int * max(len(sizes), 1))(*sizes)
            opts.capture_sizes, opts.num_capture_sizes = self._sizes, len(sizes)
        if meta is not None:
            self._set_meta(opts.meta, dict(meta))
        self._pool = None
        self._pool_rows = []  # rows of each capture logged by the pool (account_pool)
        if self._torch is not None and torch_pool is not False:
            handle = torch_pool if torch_pool not in (None, True) else None
            self._pool = PrivatePool(self._torch, runtime.device_ordinal, handle)
        me = weakref.ref(self)
        self._enqueue_cb = _lib.ENQUEUE_FN(lambda u, s, d: _enqueue(me, u, s, d))
        opts.enqueue = self._enqueue_cb
        self._rebuild_cb = _lib.DRAFT_REBUILD_FN(lambda u, s, n, d: _rebuild(me, u, s, n, d))
        if draft_rebuild is not None:
            opts.draft_rebuild = self._rebuild_cb
        out = c_void_p()
        lib.cgrt_graphs_create(runtime.handle, byref(opts), byref(out))
        pool = self._pool
        super().__init__(out.value, lambda p: _destroy_set(p, pool), parent=runtime,
                         keep=(self._enqueue_cb, self._rebuild_cb))
        self._last_refs = ()
        self._stream = lib.cgrt_graphs_stream(out.value) or 0  # fixed for the set's life
        self._init_fast_path(torch)

    # ---- setup -------------------------------------------------------------------------
    def _parse_buffers(self, runtime, buffers):
        self.names, self._views, self._dirs, self._bound, self._bound_ptr = [], [], [], [], []
        for k, b in enumerate(buffers):
            if not isinstance(b, (tuple, list)) or len(b) not in (2, 3) or not isinstance(b[0], str):
                raise TypeError(f"buffers[{k}]: expected (name, array) or (name, array, direction)")
            name, obj = b[0], b[1]
            if name in self.names:
                raise ValueError(f"buffers[{k}]: the name {name!r} is used twice")
            t = runtime.check_tensor(obj, f"buffer {name!r}")
            if t.nbytes == 0:
                raise ValueError(f"buffer {name!r}: empty")
            self.names.append(name)
            self._views.append(t)
            self._dirs.append(enum_value(b[2] if len(b) == 3 else "inout", DIRECTIONS, f"buffer {name!r} direction"))
            self._bound.append(obj)
            self._bound_ptr.append(t.ptr)

    def _set_meta(self, m, meta):
        m.enabled = 1
        for key in ("block_size", "max_blocks_per_seq"):
            if key not in meta:
                raise ValueError(f"meta: {key!r} is required")
            setattr(m, key, int(meta.pop(key)))
        for key in _META_BUFFERS:
            if key in meta:
                setattr(m, key, self.buffer_id(meta.pop(key)))
        if meta:
            raise TypeError(f"meta: unknown keys {sorted(meta)}; expected {', '.join(_META_BUFFERS)}, "
                            f"block_size, max_blocks_per_seq")

    def buffer_id(self, key):
        """The id of a buffer given by name or id."""
        if isinstance(key, str):
            try:
                return self.names.index(key)
            except ValueError:
                raise KeyError(f"no buffer named {key!r} (buffers: {', '.join(self.names)})") from None
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(self.names):
            return key
        raise KeyError(f"no buffer {key!r} ({len(self.names)} buffers)")

    # ---- the step callback ---------------------------------------------------------------
    def _run_step(self, fn, stream, d, extra):
        try:
            self._in_step = True
            batch = Batch(self, stream, d)
            ctx = contextlib.nullcontext()
            if self._pool is not None:
                ctx = self._pool.capture(batch.stream) if batch.capturing else self._pool.eager(batch.stream)
                if batch.capturing and self._pool.account:
                    self._pool_rows.append(batch.padded_rows)
            with ctx:
                fn(batch.stream, *extra, batch)
            return 0
        except BaseException as e:  # reported through the C call that ran the step
            self._step_error = e
            return _CALLBACK_FAILED
        finally:
            self._in_step = False

    def _call(self, name, *args):
        if self._in_step:
            raise RuntimeError(f"{name}: called from inside this graph set's step")
        return self._invoke(getattr(lib, name), self.handle, *args)

    def _invoke(self, fn, *args):
        """fn(*args); a cgrt.Error it raises gets the step's exception as __cause__."""
        self._step_error = None
        try:
            return fn(*args)
        except Error as e:
            cause, self._step_error = self._step_error, None
            if cause is not None:
                raise e from cause
            raise

    # ---- capture and replay ------------------------------------------------------------
    def capture(self):
        """Warms up and captures every bucket (cgrt_graphs_capture)."""
        if self._torch is not None:
            self._torch.cuda.current_stream(self.runtime.device_ordinal).synchronize()
        self._call("cgrt_graphs_capture")

    def recapture(self, rows, mode="decode"):
        if self._torch is not None:
            self._torch.cuda.current_stream(self.runtime.device_ordinal).synchronize()
        self._call("cgrt_graphs_recapture", enum_value(mode, MODES, "mode"), int(rows))

    # ---- the per-step path ---------------------------------------------------------------
    # A step with bindings costs the package a few attribute reads per binding: for a torch
    # tensor (exact type torch.Tensor) dtype, shape, device and contiguity are compared with
    # the registered buffer's (cached per buffer; for a cgrt.DeviceArray of this runtime,
    # dtype and shape), its address goes into a ctypes binding array built once per distinct
    # set of keys, and the C function is called directly.
    # Anything else (another array type, a tensor that fails a fast check) goes through the
    # generic check_tensor, which accepts or raises exactly as before.
    #
    # Streams and PyTorch's caching allocator (GPU, torch loaded). If the replay stream is
    # torch's current stream, the step is one more piece of work queued on the stream the
    # caller's torch code runs on, exactly like a torch op: nothing to order, and no
    # record_stream (the allocator hands a freed block out again only to allocations on the
    # block's stream, whose later work runs after the replay; a tensor made on another
    # stream and used on the current one needs the caller's record_stream, as for any torch
    # op). Otherwise the replay is cross-stream work the package does on the caller's behalf:
    # the replay stream waits for torch's current stream (an event, reused), each bound
    # torch tensor is record_stream-ed on the replay stream, and torch's stream waits for
    # the replay after the launch.
    def _init_fast_path(self, torch):
        self._plans = {}  # tuple of bind keys -> see _plan
        self._fast = [None] * len(self.names)  # per buffer: (torch dtype, shape, nbytes)
        self._tensor_type = getattr(torch, "Tensor", None)
        self._want_dev = -1 if self.runtime.emulated else self.runtime.device_ordinal  # get_device()
        self._fns = {n: getattr(lib, n) for n in ("cgrt_graphs_step", "cgrt_graphs_draft")}
        self._ext = None  # torch.cuda.ExternalStream of the replay stream
        self._events = None  # (before, after) torch.cuda.Event, reused every cross-stream step
        self._cur_streams = {}  # raw current stream -> torch stream object
        self._raw_current = None
        self._prep = None  # the PreparedStep that ran last, its bindings not yet in _bound
        if self._torch is not None:
            c = self._torch._C
            self._raw_current = getattr(c, "_cuda_getCurrentRawStream", None)

    def _plan(self, keys):
        """(buffer ids, Binding array, its uint64 words, names only) for a tuple of keys."""
        plan = self._plans.get(keys)
        # True == 1 and 1.0 == 1 hash alike: a plan with int keys serves only int keys
        if plan is not None and (plan[3] or all(type(k) is str or type(k) is int for k in keys)):
            return plan
        ids = tuple(self.buffer_id(k) for k in keys)  # KeyError for unknown names or ids
        arr = (_lib.Binding * len(ids))()
        for k, i in enumerate(ids):
            arr[k].buffer = i
        plan = (ids, arr, (ctypes.c_uint64 * (len(ids) * _WORDS)).from_buffer(arr),
                all(type(k) is str for k in keys))
        if all(type(k) is str or type(k) is int for k in keys):
            if len(self._plans) >= 64:
                self._plans.clear()
            self._plans[keys] = plan
        return plan

    def _fast_entry(self, i):
        reg = self._views[i]
        f = self._fast[i] = (getattr(sys.modules["torch"], reg.dtype), reg.shape, reg.nbytes)
        return f

    def _bind_checked(self, i, obj):
        """The generic path: (address, bytes, is a torch tensor)."""
        if isinstance(obj, int) and not isinstance(obj, bool):  # a raw address: unchecked
            return obj, 0, False
        reg = self._views[i]
        t = self.runtime.check_tensor(obj, f"binding {self.names[i]!r}", dtype=reg.dtype, shape=reg.shape)
        return t.ptr, t.nbytes, t.source == "torch"

    def _bindings(self, bind):
        """(Binding array, count, moved [(id, obj, address)], torch tensors bound)."""
        if not bind:
            return None, 0, (), ()
        if self._tensor_type is None and "torch" in sys.modules:
            self._tensor_type = sys.modules["torch"].Tensor  # torch imported after the set
        ids, arr, words, _ = self._plan(tuple(bind))
        fast, tt, want = self._fast, self._tensor_type, self._want_dev
        rt, views = self.runtime, self._views
        moved, tensors = [], []
        w = 0
        for i, obj in zip(ids, bind.values()):
            if type(obj) is tt:
                f = fast[i] or self._fast_entry(i)
                if obj.dtype is f[0] and obj.shape == f[1] and obj.get_device() == want and obj.is_contiguous():
                    ptr = obj.data_ptr()
                    if ptr:
                        words[w + _PTR], words[w + _BYTES] = ptr, f[2]
                        moved.append((i, obj, ptr))
                        tensors.append(obj)
                        w += _WORDS
                        continue
            elif type(obj) is DeviceArray and obj.runtime is rt:
                reg = views[i]
                if obj.dtype == reg.dtype and obj.shape == reg.shape:
                    ptr = obj.handle  # raises once closed, as the generic path does
                    words[w + _PTR], words[w + _BYTES] = ptr, obj.nbytes
                    moved.append((i, obj, ptr))
                    w += _WORDS
                    continue
            ptr, nbytes, is_torch = self._bind_checked(i, obj)  # raises on a mismatch
            words[w + _PTR], words[w + _BYTES] = ptr, nbytes
            moved.append((i, obj, ptr))
            if is_torch:
                tensors.append(obj)
            w += _WORDS
        return arr, len(ids), moved, tensors

    def _order_before(self, tensors):
        """GPU with torch: None when the replay stream is torch's current stream; else
        orders the replay after torch's stream, records the bound tensors on the replay
        stream and returns torch's stream (see above)."""
        torch, dev = self._torch, self.runtime.device_ordinal
        cur = self._raw_current(dev) if self._raw_current is not None else \
            torch.cuda.current_stream(dev).cuda_stream
        if cur == self._stream:
            return None
        ext = self._ext
        if ext is None:
            ext = self._ext = external_stream(torch, self._stream, dev)
            self._events = (torch.cuda.Event(), torch.cuda.Event())
        for t in tensors:
            t.record_stream(ext)  # the allocator must not reuse it before the replay stream is done
        cs = self._cur_streams.get(cur)
        if cs is None:
            cs = torch.cuda.current_stream(dev)
            if len(self._cur_streams) >= 64:
                self._cur_streams.clear()
            self._cur_streams[cur] = cs
        before = self._events[0]
        before.record(cs)
        ext.wait_event(before)
        return cs

    def _order_after(self, cs):
        after = self._events[1]
        after.record(self._ext)
        cs.wait_event(after)

    def _replay(self, name, args, bind):
        if self._in_step:
            raise RuntimeError(f"{name}: called from inside this graph set's step")
        h = self.handle  # raises once closed
        arr, n, moved, tensors = self._bindings(bind)
        cs = self._order_before(tensors) if self._torch is not None else None
        self._pending = moved
        try:
            self._invoke(self._fns[name], h, *args, arr, n)
        except EmulatedKernelError as e:
            if e.call_status == 0:  # the C call succeeded: its launch and bindings stand
                self._replayed(moved, cs)
            raise
        finally:
            self._pending = ()
        self._replayed(moved, cs)

    def _sync_bound(self):
        """Records the bindings of the PreparedStep that ran last in _bound (deferred from
        its call: the per-step path only remembers which one ran)."""
        p, self._prep = self._prep, None
        if p is not None and self.replay_mode != _COPY_IN:
            bound, bound_ptr = self._bound, self._bound_ptr
            for i, obj, ptr in p.moved:
                bound[i], bound_ptr[i] = obj, ptr

    def _replayed(self, moved, cs):
        if self._prep is not None:
            self._sync_bound()
        if cs is not None:
            self._order_after(cs)
        if self.replay_mode == _COPY_IN:
            self._last_refs = moved  # one step only: alive until the next step
        else:
            bound, bound_ptr = self._bound, self._bound_ptr
            for i, obj, ptr in moved:
                bound[i], bound_ptr[i] = obj, ptr

    def step(self, num_reqs, mode="decode", bind=None):
        """One step of num_reqs requests (cgrt_graphs_step). `bind` maps buffer names (or
        ids) to new arrays of the registered dtype and shape (or raw int addresses)."""
        m = _MODE_FAST.get(mode) if type(mode) is str else None
        self._replay("cgrt_graphs_step", (enum_value(mode, MODES, "mode") if m is None else m, int(num_reqs)),
                     bind)

    def draft(self, num_reqs, bind=None):
        """A draft loop of options.draft_steps steps (cgrt_graphs_draft)."""
        self._replay("cgrt_graphs_draft", (int(num_reqs),), bind)

    def prepare(self, bind, mode="decode", draft=False):
        """A :class:`PreparedStep`: ``step(num_reqs, mode, bind)`` (or ``draft(num_reqs,
        bind)`` with ``draft=True``) with the bindings checked and laid out once, here.
        Calling it costs a few attribute reads and one foreign call."""
        if self._in_step:
            raise RuntimeError("prepare: called from inside this graph set's step")
        self.handle  # raises once closed
        if not bind:
            raise ValueError("prepare: no bindings (a step without bindings needs no preparation)")
        bind = dict(bind)
        _, arr, _, _ = self._plan(tuple(bind))
        arr, n, moved, tensors = self._bindings(bind)  # every check of step(bind=...), now
        own = (_lib.Binding * n)()
        ctypes.memmove(own, arr, ctypes.sizeof(own))
        m = None if draft else enum_value(mode, MODES, "mode")
        return PreparedStep(self, own, tuple(moved), tuple(tensors), bind, m)

    def set_ranges(self, ranges):
        """Live ranges for checked replay: a list of arrays or (address, bytes[, what])."""
        arr = (_lib.Range * max(len(ranges), 1))()
        for k, r in enumerate(ranges):
            if isinstance(r, tuple):
                arr[k] = _lib.Range(int(r[0]), int(r[1]), (r[2] if len(r) > 2 else "range").encode())
            else:
                t = self.runtime.check_tensor(r, f"ranges[{k}]", contiguous=False)
                arr[k] = _lib.Range(t.ptr, t.nbytes, b"array")
        self._call("cgrt_graphs_set_ranges", arr, len(ranges))

    @property
    def stream(self):
        """The replay stream (an int)."""
        self.handle  # raises once closed
        return self._stream

    def synchronize(self):
        """Waits until everything the set launched has completed: with ``device_launch``
        every triggered step (a poll of pinned memory, no driver call while steps run),
        then the replay stream. A device-launched step is ordered with no stream: call
        this before reading its outputs or writing inputs a later step reads."""
        self._call("cgrt_graphs_synchronize")

    def stats(self):
        s = _lib.GraphsStats(size=ctypes.sizeof(_lib.GraphsStats))
        self._call("cgrt_graphs_get_stats", byref(s))
        return {f: getattr(s, f) for f, _ in _lib.GraphsStats._fields_ if f != "size"}

    def buckets(self):
        """cgrt_bucket_info of every bucket, as dicts (mode as "decode"/"block")."""
        out = []
        for i in range(lib.cgrt_graphs_bucket_count(self.handle)):
            b = _lib.BucketInfo(size=ctypes.sizeof(_lib.BucketInfo))
            self._call("cgrt_graphs_get_bucket", i, byref(b))
            d = {f: getattr(b, f) for f, _ in _lib.BucketInfo._fields_ if f != "size"}
            d["mode"] = _MODE_NAMES.get(d["mode"], d["mode"])
            out.append(d)
        return out

    def account_pool(self, on=True):
        """GPU with torch: from now on, log torch's reserved bytes around each capture of a
        bucket (one ``torch.cuda.memory_reserved`` before and after; see pool_log)."""
        if self._pool is not None:
            self._pool.account = bool(on)

    def pool_log(self):
        """[(rows of the bucket, bytes the set's private pool grew by while capturing it)],
        one entry per run of the step under capture (a draft loop's bucket has one per
        draft step), in capture order, for the captures made while account_pool was on
        (empty without a pool). While the set captures, only its pool takes new memory on the capturing
        thread, so the growth is exactly the segments the pool added for that bucket; a
        bucket that reused segments of earlier (larger) buckets adds 0."""
        if self._pool is None:
            return []
        return [(rows, after - before) for rows, (before, after) in zip(self._pool_rows, self._pool.log)]

    def bucket_rows(self, num_reqs, mode="decode"):
        """The bucket (rows) a step of num_reqs would use; 0 if none."""
        return lib.cgrt_graphs_bucket_rows(self.handle, enum_value(mode, MODES, "mode"), int(num_reqs))


class PreparedStep:
    """``gs.prepare(bind)``: one step (or draft loop) of a graph set with a fixed set of
    bindings, for the per-step loop of an engine that cycles through a few input sets.

    Checked once, by ``prepare``: everything ``GraphSet.step(bind=...)`` checks per step
    (names, dtype, shape, device, contiguity, non-null address; raw int addresses
    unchecked as there); the addresses are read then, and the arrays are kept alive by
    this object. So an array must keep its storage while this object is used (no
    ``resize_``/``set_`` of a prepared tensor; checked replay would refuse a freed one).

    Checked per call: the set is open; not called from inside the set's step; with torch
    on a GPU, the replay stream is torch's current stream (otherwise the call takes
    ``GraphSet.step``'s path, which orders the streams and record_streams the tensors).
    The C call makes its own checks (binding ranges; with checked replay every pointer,
    refusing stale ones with nothing launched). A failed status raises as ``step`` does.

    ``ps(num_reqs)`` then costs a few attribute reads, a comparison of raw stream
    pointers, and one foreign call with arguments already in C form (no ctypes argument
    conversion, no errcheck). Not thread-safe (as the set's other methods)."""

    __slots__ = ("_gs", "_arr", "_fn", "_m", "_mode", "moved", "tensors", "bind", "_fin", "_name", "_ids")

    def __init__(self, gs, arr, moved, tensors, bind, mode):
        self._gs, self._arr, self.moved, self.tensors, self.bind = gs, arr, moved, tensors, bind
        self._ids = frozenset(i for i, _, _ in moved)
        self._name = "cgrt_graphs_step" if mode is not None else "cgrt_graphs_draft"
        fn, h = _lib.raw_function(self._name), c_void_p(gs.handle)
        self._fn = functools.partial(fn, h) if mode is None else functools.partial(fn, h, mode)
        self._m = ctypes.c_size_t(len(moved))
        self._mode = mode
        self._fin = gs._finalizer

    def __call__(self, num_reqs):
        gs = self._gs
        if gs._in_step:
            raise RuntimeError(f"{self._name}: called from inside this graph set's step")
        if not self._fin.alive:
            raise InvalidHandleError("this graph set is closed")
        rc = gs._raw_current
        if rc is not None and rc(gs._want_dev) != gs._stream:  # cross-stream: the full path
            if self._mode is None:
                return gs.draft(num_reqs, bind=self.bind)
            return gs.step(num_reqs, mode=_MODE_NAMES[self._mode], bind=self.bind)
        gs._step_error = None
        gs._pending = self.moved
        try:
            r = self._fn(int(num_reqs), self._arr, self._m)
        finally:
            gs._pending = ()
        if r or _lib._kernel_errors:
            try:
                _lib.check_status(r)
            except Error as e:
                cause, gs._step_error = gs._step_error, None
                if isinstance(e, EmulatedKernelError) and e.call_status == 0:
                    self._ran(gs)
                if cause is not None:
                    raise e from cause
                raise
        p = gs._prep
        if p is not self:
            if p is not None and not p._ids <= self._ids:
                gs._sync_bound()
            gs._prep = self

    def _ran(self, gs):
        """The set's record of what is bound (Batch, later steps) is brought up to date
        lazily (GraphSet._sync_bound): the set remembers the PreparedStep that ran last,
        which keeps its arrays alive (copy-in: for this step only, as step() does). A
        pending one whose buffers this one binds too is simply superseded."""
        p = gs._prep
        if p is not None and p is not self and not p._ids <= self._ids:
            gs._sync_bound()
        gs._prep = self
