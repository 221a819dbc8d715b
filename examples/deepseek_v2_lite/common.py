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
import traceback

import torch

import backend as cg
from config import FULL, REDUCED, with_layers

T0 = time.perf_counter()


def say(*a):
    print(f"[{time.perf_counter() - T0:7.1f}s]", *a, flush=True)


STAGE = ["start"]  # what the script is doing (named in a failure report)


def stage(what):
    STAGE[0] = what


def _is_frame(line):
    s = line.strip()
    return s.startswith("frame #") or s.startswith("Exception raised from ")


def exception_head(e, lines=8):
    """The first lines of an exception's text and of its causes', without the C++ stack
    that PyTorch's errors append ("Exception raised from ...", "frame #N: ...")."""
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = [ln for ln in str(e).splitlines() if ln.strip()]
        head = [ln for ln in text if not _is_frame(ln)][:lines]
        dropped = sum(1 for ln in text if _is_frame(ln))
        mod, cls = type(e).__module__, type(e).__qualname__
        prefix = "caused by " if out else ""
        out.append(f"{prefix}{cls if mod == 'builtins' else mod + '.' + cls}: {head[0] if head else ''}")
        out += ["    " + ln for ln in head[1:]]
        if dropped:
            out.append(f"    ({dropped} C++ stack lines; the full text is above)")
        e = e.__cause__ or e.__context__
    return out


def report_exception(name, e):
    """Prints the full traceback (the exception's whole text), then its first lines again
    and a last line naming the stage, so that the tail of a log says what failed."""
    print(f"==== {name}: exception during {STAGE[0]}; full text:", flush=True)
    print("".join(traceback.format_exception(type(e), e, e.__traceback__)), end="", flush=True)
    print(f"==== {name}: the exception's first lines:", flush=True)
    for ln in exception_head(e):
        print("  " + ln, flush=True)
    first = exception_head(e)[0]
    print(f"{name}: FAILED during {STAGE[0]}: {first[:400]}", flush=True)


def guarded_main(name, main, argv=None):
    """main(argv)'s exit status. An exception is reported (report_exception) and the
    process exits with status 2 at once (os._exit): after a device fault, finalizers and
    PyTorch's exit handlers may fail again and bury the report under their own output."""
    try:
        return main(argv)
    except Exception as e:  # noqa: BLE001 - reported in full, then a non-zero exit
        report_exception(name, e)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2)


def add_common_args(p):
    p.add_argument("--config", choices=["full", "reduced"], default=None,
                   help="model size (default: full on a GPU, reduced on cgrt's CPU emulation)")
    p.add_argument("--layers", type=int, default=None, help="override the number of layers")
    p.add_argument("--driver", choices=["auto", "cuda", "emulated"], default=None,
                   help="cgrt driver (default: $CGRT_DRIVER or auto)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", default=None, help="write the summary here")
    p.add_argument("--time-limit", type=float, default=540.0, help="stop serving after this many seconds")
    add_patch_arg(p)
    add_vproj_arg(p)


def add_patch_arg(p):
    p.add_argument("--host-patch", action="store_true",
                   help="patch moved kernel nodes from the host (one driver call per node) instead of "
                        "cgrt's device patching (device_patch, the default)")


def add_vproj_arg(p):
    p.add_argument("--vproj", type=int, choices=(0, 1), default=VPROJ_DEFAULT,
                   help="1: cgrt's MLA applies W_UV after its merge (cgrt_mla_options.v_head_dim, "
                        "the value projection) instead of a W_UV bmm after the attention "
                        f"(default {VPROJ_DEFAULT})")


# Engine(vproj=...) of the scripts' --vproj (the engine's own default is the same)
VPROJ_DEFAULT = 1


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
