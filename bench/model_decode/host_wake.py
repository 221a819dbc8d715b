"""Why a graph launch costs more on the host after a long GPU step (issue 25, req. 3).

A graph of one GPU spin of D ms plus NODES tiny kernels is launched with a bare
cuGraphLaunch (ctypes, as bench/model_decode/floor.py) after the previous launch has
finished, found by one of several waits:

  poll        cudaEventQuery in a loop (bench.py's default wait)
  spin_clock  a host spin on perf_counter until D ms have passed, then one poll loop
  block       cudaEventSynchronize (the core may sleep)
  sleep_poll  time.sleep(0.8 D), then the poll loop

and, for each wait, optionally a 'prewarm' before the timed launch: the launch path's
first driver call (cuStreamQuery on the launch stream) made right before it.

Per (D, wait, prewarm): host us of the launch, p50 and p99 over ITERS launches, the
involuntary context switches during them, and the core's clock. Also records the CPU's
frequency governor and idle states (sysfs) and which core the process runs on.

    python3 bench/model_decode/host_wake.py --json OUT.json [--iters 200]
"""
import argparse
import ctypes
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def sysfs(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_state():
    cpu = os.sched_getaffinity(0)
    core = next(iter(cpu))
    d = f"/sys/devices/system/cpu/cpu{core}"
    idle = []
    i = 0
    while sysfs(f"{d}/cpuidle/state{i}/name") is not None:
        idle.append({"name": sysfs(f"{d}/cpuidle/state{i}/name"),
                     "latency_us": sysfs(f"{d}/cpuidle/state{i}/latency"),
                     "disable": sysfs(f"{d}/cpuidle/state{i}/disable")})
        i += 1
    return {"affinity": sorted(cpu), "governor": sysfs(f"{d}/cpufreq/scaling_governor"),
            "cur_khz": sysfs(f"{d}/cpufreq/scaling_cur_freq"), "idle_states": idle,
            "idle_driver": sysfs("/sys/devices/system/cpu/cpuidle/current_driver"),
            "nproc": os.cpu_count()}


def meta():
    """GPU, driver, date, commit and command of this run (the commit from CGRT_BENCH_COMMIT,
    as bench.py, else git)."""
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        drv = None
    commit = os.environ.get("CGRT_BENCH_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {"gpu": torch.cuda.get_device_name(), "driver": drv, "torch": torch.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit, "command": "python3 " + " ".join(sys.argv)}


def nonvol():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("nonvoluntary_ctxt_switches"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=330)
    ap.add_argument("--steps-ms", default="0.5,2.5,10,33")
    ap.add_argument("--pin", type=int, default=-1, help="pin to this core (-1: leave)")
    a = ap.parse_args()
    if a.pin >= 0:
        os.sched_setaffinity(0, {a.pin})
    torch.cuda.init()
    s = torch.cuda.Stream()
    x = torch.zeros(256, device="cuda")
    # cycles per ms of torch.cuda._sleep at this clock
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s):
        e0.record(); torch.cuda._sleep(10_000_000); e1.record()
    torch.cuda.synchronize()
    cyc_per_ms = 10_000_000 / e0.elapsed_time(e1)
    cuda = ctypes.CDLL("libcuda.so.1")
    launch = cuda["cuGraphLaunch"]
    launch.restype, launch.argtypes = ctypes.c_int, None
    squery = cuda["cuStreamQuery"]
    squery.restype, squery.argtypes = ctypes.c_int, None
    stream = ctypes.c_void_p(s.cuda_stream)
    out = {"benchmark": "host_wake", "meta": meta(), "cpu": cpu_state(), "cycles_per_ms": cyc_per_ms,
           "nodes": a.nodes, "iters": a.iters, "rows": []}
    evq = torch.cuda.Event()
    for D in [float(v) for v in a.steps_ms.split(",")]:
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, stream=s):
            torch.cuda._sleep(int(D * cyc_per_ms))
            for _ in range(a.nodes):
                x.add_(1.0)
        g.instantiate() if hasattr(g, "instantiate") else None
        ge = ctypes.c_void_p(g.raw_cuda_graph_exec())
        for wait in ("poll", "spin_clock", "block", "sleep_poll"):
            for prewarm in (False, True):
                host, sw0 = [], nonvol()
                for i in range(a.iters + 5):
                    t_launch = time.perf_counter()
                    if prewarm:
                        squery(stream)
                    t0 = time.perf_counter()
                    r = launch(ge, stream)
                    t1 = time.perf_counter()
                    if r:
                        raise RuntimeError(f"cuGraphLaunch {r}")
                    evq.record(s)
                    if wait == "poll":
                        while not evq.query():
                            pass
                    elif wait == "spin_clock":
                        while time.perf_counter() - t_launch < D / 1e3:
                            pass
                        while not evq.query():
                            pass
                    elif wait == "block":
                        evq.synchronize()
                    else:
                        time.sleep(0.8 * D / 1e3)
                        while not evq.query():
                            pass
                    if i >= 5:
                        host.append((t1 - t0) * 1e6)
                row = {"step_ms": D, "wait": wait, "prewarm": prewarm,
                       "host_us_p50": statistics.median(host), "host_us_p99": pct(host, 99),
                       "host_us_max": max(host), "nonvoluntary_switches": nonvol() - sw0,
                       "cur_khz": sysfs(f"/sys/devices/system/cpu/cpu{next(iter(os.sched_getaffinity(0)))}/cpufreq/scaling_cur_freq")}
                out["rows"].append(row)
                print(f"D {D:5.1f} ms {wait:10s} prewarm {int(prewarm)}: p50 {row['host_us_p50']:6.1f} "
                      f"p99 {row['host_us_p99']:6.1f} max {row['host_us_max']:7.1f} us, "
                      f"switches {row['nonvoluntary_switches']}", flush=True)
        del g
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out["cpu"]))


if __name__ == "__main__":
    main()
