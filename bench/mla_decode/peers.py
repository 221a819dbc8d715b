"""Times the peer MLA decode kernels (FlashMLA, FlashInfer fa3) the way mla_decode_bench
times cgrt's "per call in a graph of 8": per shape, eight back-to-back calls captured in
one torch.cuda.graph, each on its own KV copy (>= 400 MB of KV copies in all, so that
replays do not read from the 60 MB L2), the graph replayed many times, each replay timed
with CUDA events; us per call = replay time / 8; median and p99 over all replays. The
device-to-device copy bandwidth is measured in the same run (meta.copy_tbps).

Data: random bf16 q and KV (never zeros), block tables of shuffled pages (each copy its
own pages), every request of length `context` (the last row's length with causal).
Softmax scale 0.0721 (as mla_decode_bench). The plan (FlashMLA's metadata kernel,
FlashInfer's wrapper.plan) runs before capture, once per KV copy; --plan-in-graph adds a
FlashMLA row with its metadata kernel captured before every call (as cgrt's step counts
its schedule kernel).

    python3 bench/mla_decode/peers.py [--shape b,h,ctx[,k[,causal]]]... [--out FILE]
                                      [--merge CGRT_JSON] [--peers-dir .peers]

JSON: {"peers": [{"name","batch","heads","context","block_len","causal","us_in_graph",
"us_in_graph_p99","tbps","plan_in_graph","reps"}], "missing": [{"name","reason"}],
"meta": {...}}; --merge FILE adds "peers", "peers_missing" and "peers_meta" to an
existing cgrt mla_decode JSON in place.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "peers"))
import mla_peers  # noqa: E402

PAGE = 64
PER_GRAPH = 8
POOL_TARGET = 400e6
SCALE = 0.0721

DEFAULT_SHAPES = [
    (1, 16, 8192, 1, 0), (32, 16, 8192, 1, 0), (64, 16, 8192, 1, 0), (128, 16, 8192, 1, 0),
    (64, 16, 32768, 1, 0), (128, 16, 32768, 1, 0), (64, 32, 16384, 1, 0), (32, 64, 8192, 1, 0),
    (32, 128, 8192, 1, 0), (128, 128, 4096, 1, 0),
    (32, 16, 8192, 2, 0), (32, 16, 8192, 2, 1), (32, 16, 8192, 4, 0), (32, 16, 8192, 4, 1),
    (32, 16, 8192, 8, 0), (32, 16, 8192, 8, 1),
]


def parse_shape(s: str):
    v = [int(x) for x in s.split(",")]
    if len(v) < 3 or len(v) > 5:
        raise argparse.ArgumentTypeError(f"--shape wants batch,heads,context[,block_len[,causal]], got {s!r}")
    v += [1, 0][len(v) - 3:]
    return tuple(v)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(p / 100.0 * len(xs))) - 1)]


def copy_tbps(torch, reps=20):
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for i in range(reps + 2):
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        if i >= 2:
            ts.append(e0.elapsed_time(e1))
    del a, b
    return 2.0 * n / (sorted(ts)[len(ts) // 2] * 1e-3) / 1e12


def meta_info(torch, argv, peers):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:  # noqa: BLE001
            return ""

    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    commit = sh(["git", "-C", str(HERE), "rev-parse", "HEAD"]) or "unknown"
    return {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "driver": smi.split(",")[-1].strip() if smi else "unknown",
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 0,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "command": " ".join(["python3", "bench/mla_decode/peers.py"] + list(argv)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "versions": {n: (p.version if isinstance(p, mla_peers.Peer) else None) for n, p in peers.items()},
        "method": "per call in a graph of 8 (torch.cuda.graph), each call its own KV copy, median/p99 of replays",
        "page_size": PAGE,
        "softmax_scale": SCALE,
    }


def time_shape(torch, peers, shape, reps, plan_in_graph, rows_out, errors):
    batch, heads, ctx, blk, causal = shape
    mbps = (ctx + PAGE - 1) // PAGE
    pages = batch * mbps
    page_bytes = PAGE * 576 * 2
    copies = max(1, int(math.ceil(POOL_TARGET / (pages * page_bytes))))
    total = pages * copies
    kv = torch.empty((total, PAGE, 576), dtype=torch.bfloat16, device="cuda")
    kv.uniform_(-1.0, 1.0)
    q = torch.empty((batch, blk, heads, 576), dtype=torch.bfloat16, device="cuda").uniform_(-1.0, 1.0)
    perm = torch.randperm(total, device="cuda").to(torch.int32)
    bts = [perm[c * pages:(c + 1) * pages].view(batch, mbps).contiguous() for c in range(copies)]
    lens = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
    kv_bytes = batch * ctx * 576 * 2
    n_graphs = max(1, copies // PER_GRAPH)
    for name, peer in peers.items():
        if isinstance(peer, str):
            continue
        variants = [False] + ([True] if plan_in_graph and peer.plan_is_device_work else [])
        for pig in variants:
            try:
                for c in range(copies):
                    peer.plan(bts[c], lens, heads, blk, bool(causal), softmax_scale=SCALE)
                out = torch.empty((batch, blk, heads, 512), dtype=torch.bfloat16, device="cuda")
                use_out = name != "flashmla"  # FlashMLA allocates its output; out= would add a copy
                for c in range(min(3, copies)):
                    peer.run(q, kv, bts[c], lens, SCALE, bool(causal), out=out if use_out else None)
                torch.cuda.synchronize()
                graphs = []
                for gi in range(n_graphs):
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        for l in range(PER_GRAPH):
                            c = (gi * PER_GRAPH + l) % copies
                            if pig:
                                peer.plan(bts[c], lens, heads, blk, bool(causal), softmax_scale=SCALE)
                            peer.run(q, kv, bts[c], lens, SCALE, bool(causal), out=out if use_out else None)
                    graphs.append(g)
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                ts = []
                for i in range(reps + 2):
                    g = graphs[i % len(graphs)]
                    e0.record()
                    g.replay()
                    e1.record()
                    e1.synchronize()
                    if i >= 2:
                        ts.append(e0.elapsed_time(e1) * 1e3 / PER_GRAPH)
                med = pct(ts, 50)
                row = {"name": name, "batch": batch, "heads": heads, "context": ctx, "block_len": blk,
                       "causal": int(causal), "us_in_graph": round(med, 3), "us_in_graph_p99": round(pct(ts, 99), 3),
                       "tbps": round(kv_bytes / (med * 1e-6) / 1e12, 3), "plan_in_graph": pig, "reps": len(ts),
                       "kv_copies": copies}
                rows_out.append(row)
                print(f"{name:15s}{' +plan' if pig else '      '} batch {batch:3d} heads {heads:3d} ctx {ctx:5d} "
                      f"k {blk}{' causal' if causal else '       '} per call in graph {med:9.2f} us "
                      f"(p99 {row['us_in_graph_p99']:9.2f})  {row['tbps']:.3f} TB/s", flush=True)
                del graphs
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {e}"
                errors.append({"name": name, "reason": f"shape {list(shape)}: {msg}"[:2000]})
                print(f"{name:15s} batch {batch} heads {heads} ctx {ctx} k {blk} causal {causal}: FAILED {msg}",
                      flush=True)
            torch.cuda.synchronize()
        peer.reset()
    del kv, q, perm, bts
    torch.cuda.empty_cache()


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", type=parse_shape, default=[],
                    help="batch,heads,context[,block_len[,causal]] (repeatable; default: the standard list)")
    ap.add_argument("--reps", type=int, default=50, help="timed graph replays per shape and peer")
    ap.add_argument("--peers-dir", default=".peers")
    ap.add_argument("--only", default="", help="comma-separated peer names")
    ap.add_argument("--plan-in-graph", action="store_true", help="also time FlashMLA with its metadata kernel captured")
    ap.add_argument("--out", default="bench/results/mla_peers_h200.json")
    ap.add_argument("--merge", default="", help="cgrt mla_decode JSON to add peers/peers_missing/peers_meta to")
    a = ap.parse_args(argv)

    import torch

    t0 = time.time()
    peers = mla_peers.load(a.peers_dir)
    if a.only:
        keep = set(a.only.split(","))
        peers = {n: p for n, p in peers.items() if n in keep}
    missing = [{"name": n, "reason": p} for n, p in peers.items() if isinstance(p, str)]
    for m in missing:
        print(f"{m['name']:15s} MISSING: {m['reason']}", flush=True)
    meta = meta_info(torch, argv, peers)
    rows: list = []
    if torch.cuda.is_available():
        meta["copy_tbps"] = round(copy_tbps(torch), 3)
        print(f"d2d copy {meta['copy_tbps']:.3f} TB/s on {meta['gpu']}", flush=True)
        for shape in a.shape or DEFAULT_SHAPES:
            time_shape(torch, peers, shape, a.reps, a.plan_in_graph, rows, missing)
    meta["wall_seconds"] = round(time.time() - t0, 1)
    doc = {"benchmark": "mla_decode_peers", "meta": meta, "peers": rows, "missing": missing}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {a.out}")
    if a.merge:
        m = json.loads(Path(a.merge).read_text())
        m["peers"], m["peers_missing"], m["peers_meta"] = rows, missing, meta
        Path(a.merge).write_text(json.dumps(m, indent=2) + "\n")
        print(f"merged into {a.merge}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
