"""PyTorch's CUDA-graph replay of N equivalent tiny kernels, measured in the same device
call as bench/replay_latency, then merged with its JSON into one results file with the
targets checked (design and figures: docs/replay.md).

  python3 torch_replay.py --cgrt cgrt.json --out replay_latency_h200.json \
      --command "<the command line that produced both>"

The run's "meta" object (bench/common/bench_meta.h) comes from replay_latency's JSON;
this script adds the torch version and, given --command, the command of the pair.
"""
import argparse
import datetime
import json
import os
import time

import torch


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def bench(n, iters=400, batch=25):
    acc = torch.zeros(32, device="cuda")
    ins = [torch.full((32,), 0.001 * (i + 1), device="cuda") for i in range(n)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the graph
        for _ in range(3):
            for t in ins:
                acc.add_(t)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for t in ins:
            acc.add_(t)  # one tiny kernel per node, dependent through acc
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    host, gpu = [], []
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(batch)]
    done = 0
    while done < iters:
        m = min(batch, iters - done)
        for j in range(m):
            ev[j][0].record()
            t0 = time.perf_counter()
            g.replay()
            t1 = time.perf_counter()
            ev[j][1].record()
            host.append((t1 - t0) * 1e6)
        torch.cuda.synchronize()
        gpu += [ev[j][0].elapsed_time(ev[j][1]) * 1e3 for j in range(m)]
        done += m
    rt = []
    for _ in range(500):
        t0 = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        rt.append((time.perf_counter() - t0) * 1e6)
    return {
        "case": "torch_cudagraph_replay", "nodes": n,
        "host_us_p50": pct(host, 0.5), "host_us_p99": pct(host, 0.99),
        "gpu_us_p50": pct(gpu, 0.5), "gpu_us_p99": pct(gpu, 0.99),
        "gpu_us_per_node_p50": pct(gpu, 0.5) / n,
        "round_trip_us_p50": pct(rt, 0.5),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cgrt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    with open(a.cgrt) as f:
        res = json.load(f)
    sizes = sorted({c["nodes"] for c in res["cases"]})
    torch_cases = [bench(n) for n in sizes]
    res["cases"] += torch_cases
    meta = res.setdefault("meta", {})
    if not meta:  # a replay_latency binary older than the "meta" object
        meta.update({"gpu": torch.cuda.get_device_name(0), "driver": "unknown",
                     "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "commit": os.environ.get("CGRT_BENCH_COMMIT") or "unknown", "command": ""})
    meta["torch"] = torch.__version__
    if a.command:
        meta["command"] = a.command

    def get(case, n):
        for c in res["cases"]:
            if c["case"] == case and c["nodes"] == n:
                return c
        return None

    checks = []
    for n in sizes:
        raw, step = get("raw_graph_launch", n), get("cgrt_step", n)
        checks.append({"target": "cgrt step host <= 1.3 x raw cuGraphLaunch", "nodes": n,
                       "value": step["host_us_p50"] / raw["host_us_p50"], "limit": 1.3,
                       "pass": step["host_us_p50"] <= 1.3 * raw["host_us_p50"]})
        r = step["gpu_us_per_node_p50"] / raw["gpu_us_per_node_p50"]
        checks.append({"target": "GPU time per node within 5% of raw graph", "nodes": n,
                       "value": r, "limit": 1.05, "pass": r <= 1.05})
        pdl = get("cgrt_step+pdl", n)
        if pdl:
            checks.append({"target": "with PDL <= 0.7 us per node", "nodes": n,
                           "value": pdl["gpu_us_per_node_p50"], "limit": 0.7,
                           "pass": pdl["gpu_us_per_node_p50"] <= 0.7})
        floor = get("raw_set_params_8", n)
        if floor:
            per = (floor["host_us_p50"] - raw["host_us_p50"]) / floor.get("patched_nodes", 8)
            checks.append({"target": "reference: driver floor, cuGraphExecKernelNodeSetParams per node "
                           "(raw graph, 8 nodes)", "nodes": n, "value": per, "limit": 0.35, "pass": per <= 0.35})
        for k, case in ((8, "cgrt_rebind_8"), (n, "cgrt_rebind_all")):
            c = get(case, n)
            if c:
                per = (c["host_us_p50"] - step["host_us_p50"]) / c.get("patched_nodes", k)
                checks.append({"target": "rebinding <= 0.35 us per patched node", "nodes": n, "case": case,
                               "value": per, "limit": 0.35, "pass": per <= 0.35})
        dstep = get("cgrt_dpatch_step", n)
        draw = get("raw_graph_launch_vs_dpatch", n)
        for k, case in ((1, "cgrt_dpatch_rebind_1"), (8, "cgrt_dpatch_rebind_8"), (n, "cgrt_dpatch_rebind_all")):
            c = get(case, n)
            if c and dstep:
                per = (c["host_us_p50"] - dstep["host_us_p50"]) / c.get("patched_nodes", k)
                checks.append({"target": "rebinding <= 0.35 us per patched node (device_patch)", "nodes": n,
                               "case": case, "value": per, "limit": 0.35, "pass": per <= 0.35})
        if dstep and draw:
            checks.append({"target": "reference: device_patch step GPU time / raw graph (one extra node)",
                           "nodes": n, "value": dstep["gpu_us_p50"] / draw["gpu_us_p50"], "limit": 1.05,
                           "pass": dstep["gpu_us_p50"] <= 1.05 * draw["gpu_us_p50"]})
    t32 = get("torch_cudagraph_replay", 32)
    if t32 and res.get("round_trip_32_us_p50"):
        sp = t32["round_trip_us_p50"] / res["round_trip_32_us_p50"]["cgrt_step"]
        checks.append({"target": "32-node launch+sync round trip >= 1.3 x faster than torch replay",
                       "value": sp, "limit": 1.3, "pass": sp >= 1.3,
                       "torch_us": t32["round_trip_us_p50"],
                       "cgrt_us": res["round_trip_32_us_p50"]["cgrt_step"]})
        pdl = res["round_trip_32_us_p50"].get("cgrt_step_pdl")
        if pdl:
            sp = t32["round_trip_us_p50"] / pdl
            checks.append({"target": "32-node launch+sync round trip >= 1.3 x faster than torch replay "
                           "(cgrt step with PDL kernels)", "value": sp, "limit": 1.3, "pass": sp >= 1.3,
                           "torch_us": t32["round_trip_us_p50"], "cgrt_us": pdl})
    cap = res.get("capture_default_buckets_32_nodes")
    if cap:
        checks.append({"target": "capture+instantiate of default bucket set (32 nodes) < 0.5 s",
                       "value": cap["capture_instantiate_s"], "limit": 0.5,
                       "pass": cap["capture_instantiate_s"] < 0.5})
    res["targets"] = checks
    text = json.dumps(res, indent=2)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    print(text)
    for c in checks:
        print("%-4s %-70s N=%-4s %.3f (limit %.2f)" % ("PASS" if c["pass"] else "MISS", c["target"],
              c.get("nodes", ""), c["value"], c["limit"]))


if __name__ == "__main__":
    main()
