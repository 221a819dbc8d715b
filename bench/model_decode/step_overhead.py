"""Host time of GraphSet.step with bindings: the Python package against one raw ctypes call.

    python3 bench/model_decode/step_overhead.py                  # GPU (torch on CUDA), or the emulation
    CGRT_DRIVER=emulated python3 bench/model_decode/step_overhead.py --json /tmp/so.json

A graph set whose step launches --nodes kernel nodes (a no-op kernel, PTX on a GPU, a
no-op Python reference on the emulation), each reading the 4 bindable buffers of the
model example's decode set: token_ids int64 [S], req_seq_lens int32 [S], req_positions
int64 [S], block_table int32 [S, MB]. Every step binds the 4 buffers to the next set of a
ring of 4 (new addresses each step: every node is re-patched, about 28 per step as in
the model example). Measured per step with time.perf_counter around the call, the
replay stream synchronized between steps (outside the timed part), methods interleaved
in blocks:
  package    gs.step(n, bind={name: tensor x 4})   (torch tensors; numpy/DeviceArray
             without torch)
  raw        lib.cgrt_graphs_step(handle, 0, n, prebuilt binding array, 4): the same C call
             through ctypes without the package (what the C call costs plus ctypes)
  ctypes     lib.cgrt_graphs_bucket_rows(handle, 0, n): a ctypes call of this set that does
             almost nothing in C (the ctypes floor); raw - ctypes estimates the C call
  prepared   gs.prepare(bind)(n): the package's PreparedStep (bindings checked once at
             prepare, one untyped foreign call per step)
  nobind     cgrt_graphs_step with no bindings, untyped call (cgrt's path, nothing moved)
  ctypes_untyped  cgrt_graphs_bucket_rows as an untyped call (the floor of "prepared")
  launch     GPU: a bare cuGraphLaunch of the same bucket's executable on the set's stream,
             untyped call into libcuda (the driver's floor for this graph; floor.py:
             cgrt_graphs_bucket_exec prepares 32 direct launches at a time, untimed)
On a GPU the set replays on torch's current stream (a side stream made current, as an
engine does; --cross-stream: on the set's own stream, so the package orders the streams
and calls record_stream). The summary line gives package - raw (what the package adds;
issue 15's target: host time per step <= 10 us, package included) and the ratio.
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
try:
    import cgrt
except ImportError:  # not installed: the repository's copy
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import cgrt

sys.path.insert(0, HERE)
from floor import Floors  # noqa: E402
from timing import gc_off  # noqa: E402

KERNEL = "bench_noop"
PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry bench_noop(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3, .param .u32 n)
{
  ret;
}
"""
NAMES = ("token_ids", "req_seq_lens", "req_positions", "block_table")
RING = 4



def _nvidia_driver():
    """The NVIDIA driver's version (nvidia-smi), or None without one."""
    try:
        import subprocess
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None

def _summary(us):
    s = sorted(us)
    pick = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "mean": statistics.fmean(s), "min": s[0],
            "n": len(s)}


class Arrays:
    """Tensors of the 4 buffers: torch when importable (CPU tensors on the emulation), else
    cgrt.DeviceArray."""

    def __init__(self, rt, S, MB, use_torch):
        self.rt, self.S, self.MB = rt, S, MB
        self.torch = None
        if use_torch:
            import torch
            self.torch = torch
            self.device = torch.device("cpu") if rt.emulated else torch.device("cuda", rt.device_ordinal)

    def one_set(self):
        shapes = {"token_ids": ((self.S,), "int64"), "req_seq_lens": ((self.S,), "int32"),
                  "req_positions": ((self.S,), "int64"), "block_table": ((self.S, self.MB), "int32")}
        if self.torch is not None:
            t = self.torch
            return {k: t.zeros(shape, dtype=getattr(t, dt), device=self.device) for k, (shape, dt) in shapes.items()}
        return {k: self.rt.empty(shape, dt) for k, (shape, dt) in shapes.items()}


def ptr_of(x):
    return x.data_ptr() if hasattr(x, "data_ptr") else cgrt.as_tensor(x).ptr


def build(rt, args, arrays):
    if rt.emulated:
        cgrt.register_emulated_kernel(KERNEL, [8, 8, 8, 8, 4], lambda call: None)
    fn = rt.load_module(PTX).function(KERNEL)
    bufs = arrays.one_set()
    out = arrays.one_set()["token_ids"]  # an output buffer no node moves

    def step(stream, b):
        args_ = [b[k] for k in NAMES] + [ctypes.c_uint32(b.padded_rows)]
        for _ in range(args.nodes):
            fn.launch(1, 32, args_, stream=stream)

    stream = None
    if not rt.emulated and arrays.torch is not None and not args.cross_stream:
        stream = arrays.torch.cuda.current_stream(rt.device_ordinal).cuda_stream
    gs = rt.graphs(step, max_num_seqs=args.S, max_model_len=args.MB * 16, capture_sizes=[1, 2, 4, 8, args.S],
                   buffers=[(k, v, "in") for k, v in bufs.items()] + [("out", out, "out")], stream=stream,
                   warmup_runs=1, device_patch=int(not args.host_patch))
    gs.capture()
    ring = [arrays.one_set() for _ in range(RING)]
    return gs, bufs, out, ring


def time_calls(fn, iters, sync, pre=None):
    """Host us per call; the garbage collector is off while they run (timing.gc_off)."""
    with gc_off():
        return _time_calls(fn, iters, sync, pre)


def _time_calls(fn, iters, sync, pre):
    us = []
    pc = time.perf_counter
    for i in range(iters):
        if pre is not None:
            pre()
        t0 = pc()
        fn(i)
        t1 = pc()
        us.append((t1 - t0) * 1e6)
        sync()
    return us


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--driver", default=os.environ.get("CGRT_DRIVER", "auto"), choices=["auto", "cuda", "emulated"])
    p.add_argument("--nodes", type=int, default=28, help="kernel nodes per graph, each reading the 4 buffers")
    p.add_argument("--S", type=int, default=64, help="max_num_seqs (rows of the buffers)")
    p.add_argument("--MB", type=int, default=512, help="block-table columns")
    p.add_argument("--n", type=int, default=5, help="requests per step")
    p.add_argument("--iters", type=int, default=2000, help="timed calls per method")
    p.add_argument("--blocks", type=int, default=10, help="interleaved blocks per method")
    p.add_argument("--host-patch", action="store_true",
                   help="patch moved kernel nodes from the host (one driver call each) instead of on the device")
    p.add_argument("--no-torch", action="store_true", help="bind cgrt.DeviceArray instead of torch tensors")
    p.add_argument("--cross-stream", action="store_true",
                   help="GPU: the set replays on its own stream, not torch's current one")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    use_torch = not args.no_torch
    if use_torch:
        try:
            import torch
            if args.driver != "emulated" and torch.cuda.is_available():
                torch.cuda.init()  # torch's primary context first; cgrt shares it
        except ImportError:
            use_torch = False
    rt = cgrt.Runtime(driver=args.driver)
    arrays = Arrays(rt, args.S, args.MB, use_torch)
    side = None
    if use_torch and not rt.emulated:
        side = arrays.torch.cuda.Stream(device=rt.device_ordinal)
        arrays.torch.cuda.set_stream(side)  # an engine's run stream; the set replays there
    gs, bufs, out, ring = build(rt, args, arrays)
    h, n = gs.handle, args.n
    raw_step, bucket_rows = cgrt.lib.cgrt_graphs_step, cgrt.lib.cgrt_graphs_bucket_rows
    ids = [gs.buffer_id(k) for k in NAMES]
    arrs = []
    for inp in ring:
        a = (cgrt._lib.Binding * len(NAMES))()
        for j, (i, k) in enumerate(zip(ids, NAMES)):
            a[j] = cgrt._lib.Binding(i, ptr_of(inp[k]), 0)
        arrs.append(a)
    binds = [{k: inp[k] for k in NAMES} for inp in ring]
    stream = gs.stream

    def sync():
        rt.stream_synchronize(stream)

    preps = [gs.prepare(b) for b in binds]
    fl = Floors(gs, gs.bucket_rows(n))
    methods = {
        "package": lambda i: gs.step(n, bind=binds[i % RING]),
        "prepared": lambda i: preps[i % RING](n),
        "raw": lambda i: raw_step(h, 0, n, arrs[i % RING], 4),
        "nobind": lambda i: fl.nobind(n),
        "ctypes": lambda i: bucket_rows(h, 0, n),
        "ctypes_untyped": lambda i: fl.ctypes_call(n),
    }
    for fn in methods.values():  # warm-up
        time_calls(fn, 20, sync)
    res = {m: [] for m in methods}
    per = max(1, args.iters // args.blocks)
    for _ in range(args.blocks):
        for m, fn in methods.items():
            res[m] += time_calls(fn, per, sync)
            if m == "raw":  # the package's record of the bindings in line again
                gs.step(n, bind=binds[(per - 1) % RING])
                sync()
    if fl.launch_fn is not None:
        time_calls(fl.launch, 20, sync, fl.before)
        res["launch"] = time_calls(fl.launch, args.iters, sync, fl.before)
        fl.finish()
        gs.step(n, bind=binds[0])  # a step after the direct launches: its checks below
        sync()
    st = gs.stats()
    summ = {m: _summary(v) for m, v in res.items()}
    pk, raw, ct = summ["package"]["p50"], summ["raw"]["p50"], summ["ctypes"]["p50"]
    info = rt.info()
    out_json = {
        "benchmark": "step_overhead", "what": __doc__,
        "meta": {"device": info.device_name, "gpu": info.device_name, "cgrt_driver": info.driver,
                 "driver": _nvidia_driver(), "python": platform.python_version(),
                 "torch": getattr(arrays.torch, "__version__", None), "library": cgrt.lib.path,
                 "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": " ".join([sys.executable] + sys.argv),
                 "commit": os.environ.get("CGRT_BENCH_COMMIT")},
        "config": vars(args) | {"bindings": "torch" if use_torch else "cgrt.DeviceArray",
                                "stream": "own (cross-stream)" if args.cross_stream or side is None
                                else "torch's current"},
        "host_us": summ, "package_minus_raw_us_p50": pk - raw, "package_over_raw_p50": pk / raw if raw else None,
        "c_call_estimate_us_p50": raw - ct, "target_us": 10.0,
        "prepared_us_p50": summ["prepared"]["p50"],
        "launch_floor_us_p50": summ["launch"]["p50"] if "launch" in summ else None,
        "prepared_minus_launch_floor_us_p50": summ["prepared"]["p50"] - summ["launch"]["p50"] if "launch" in summ
        else None,
        "stats": {k: st[k] for k in ("steps", "replays", "rebinds", "nodes_patched", "eager_fallbacks",
                                     "device_patches", "device_nodes_patched")},
        "device_patch_buckets": [b["rows"] for b in gs.buckets() if b["device_patch"]],
    }
    print(f"step_overhead on {info.device_name} ({info.driver}), {args.nodes} nodes x 4 bindings, "
          f"{'torch' if use_torch else 'DeviceArray'} bindings, {summ['package']['n']} calls each:")
    for m in summ:
        s = summ[m]
        print(f"  {m:8s} p50 {s['p50']:8.2f} us  p90 {s['p90']:8.2f}  mean {s['mean']:8.2f}  min {s['min']:8.2f}")
    print(f"  package - raw = {pk - raw:.2f} us (x{pk / raw:.2f}); C call (raw - ctypes floor) ~ {raw - ct:.2f} us; "
          f"issue 15 target: host time per step <= 10 us (package p50 {pk:.2f} us: "
          f"{'MET' if pk <= 10 else 'NOT MET'}); prepared p50 {summ['prepared']['p50']:.2f} us "
          f"({'MET' if summ['prepared']['p50'] <= 10 else 'NOT MET'})"
          + (f", bare cuGraphLaunch {summ['launch']['p50']:.2f} us" if "launch" in summ else ""))
    print(f"  stats: {out_json['stats']}")
    print(f"  patching: {'host (--host-patch)' if args.host_patch else 'device_patch'}; buckets patched on the "
          f"device: {out_json['device_patch_buckets'] or 'none (the host patches)'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out_json, f, indent=1, default=str)
        print(f"wrote {args.json}")
    gs.close()
    rt.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
