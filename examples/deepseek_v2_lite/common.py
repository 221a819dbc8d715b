"""Pieces the example's scripts share: backend and configuration choice, the stream they
run on, progress output, the run's metadata, the request pool."""
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import time

import torch

import backend as cg
from config import FULL, REDUCED, with_layers

T0 = time.perf_counter()


def say(*a):
    print(f"[{time.perf_counter() - T0:7.1f}s]", *a, flush=True)


def add_common_args(p):
    p.add_argument("--config", choices=["full", "reduced"], default=None,
                   help="model size (default: full on a GPU, reduced on cgrt's CPU emulation)")
    p.add_argument("--layers", type=int, default=None, help="override the number of layers")
    p.add_argument("--driver", choices=["auto", "cuda", "emulated"], default=None,
                   help="cgrt driver (default: $CGRT_DRIVER or auto)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", default=None, help="write the summary here")
    p.add_argument("--time-limit", type=float, default=540.0, help="stop serving after this many seconds")


def open_backend(args):
    be = cg.Backend(driver=args.driver)
    cfg = {"full": FULL, "reduced": REDUCED, None: (REDUCED if be.emulated else FULL)}[args.config]
    if args.layers:
        cfg = with_layers(cfg, args.layers)
    i = be.info
    say(f"cgrt on {i['device_name']} ({i['driver']} driver {i['driver_version']}, {i['sm_count']} SMs); "
        f"torch {torch.__version__}; model: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads, "
        f"vocab {cfg.vocab}, page {cfg.page_size}")
    if be.emulated:
        say("no usable GPU: cgrt runs on its CPU emulation (C reference kernels, torch on the CPU)")
    return be, cfg


def run_stream(be):
    """The stream everything runs on (GPU): the graph sets replay there and PyTorch's work
    (input copies, eager references) is queued there, so ordering needs no events."""
    if be.emulated:
        return None, cg.Null()
    s = torch.cuda.Stream(device=be.device)
    return s, torch.cuda.stream(s)


def git_commit():
    env = os.environ.get("CGRT_BENCH_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=cg.repo_root(), capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def run_meta(be):
    i = be.info
    return {"device": i["device_name"], "cgrt_driver": i["driver"], "driver_version": i["driver_version"],
            "sm_count": i["sm_count"], "torch": torch.__version__, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(), "command": " ".join([os.path.basename(sys.executable)] + sys.argv)}


def write_json(path, obj):
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    say(f"wrote {path}")


def finish(be, args, summary, failures):
    """Writes the summary (with the failures), closes the backend; the exit status."""
    summary["failures"] = failures
    write_json(args.json, summary)
    be.close()
    if failures:
        say(f"FAILED: {len(failures)} check(s)")
        return 1
    say("OK")
    return 0


class Pages:
    """A free list of KV-cache pages, handed out in a shuffled order (scattered pages)."""

    def __init__(self, num_pages, seed):
        self.free = list(range(num_pages))
        random.Random(seed).shuffle(self.free)

    def take(self, n):
        if n > len(self.free):
            return None
        out, self.free = self.free[-n:], self.free[:-n]
        return out

    def give(self, pages):
        self.free.extend(pages)
