#!/usr/bin/env python3
"""Plots of a benchmark's JSON, written as PNGs next to it (bench/results/README.md).

  python3 tools/plot_results.py [--out-dir DIR] FILE.json [FILE.json ...]

- replay_latency (bench/replay_latency + torch_replay.py):
  <stem>_per_node.png: GPU time per node and host time per step against the graph size,
    with the raw driver's cuGraphLaunch of the same graph as the reference line;
  <stem>_rebind.png: host cost per moved node of a step that rebinds buffers (host and
    device patching) against the driver's own cuGraphExecKernelNodeSetParams.
- mla_decode (bench/mla_decode):
  <stem>_tbps.png: KV bandwidth per shape and combine strategy, with the device-to-device
    copy rate measured in the same run;
  <stem>_tflops.png: TFLOP/s per shape, with the bf16 GEMM ceiling (the JSON's
    "gemm_tflops" where the run measured it, else the reference figure below).

Without matplotlib the script says so and exits 0 without plotting.
"""
import argparse
import json
import os
import sys

# bf16 dense matmul, 8192^3, torch, on an NVIDIA H200 (driver 580.159, CUDA 13.0): the
# measured ceiling in the project's reference facts. The benchmarks do not measure it.
GEMM_REFERENCE_TFLOPS = 790.0
GEMM_REFERENCE_SOURCE = "bf16 GEMM 8192³ (torch) on an H200, reference facts; not this run"


# Benchmarks whose plots their own script draws next to the JSON (bench.py of
# bench/model_decode, bench/dcp_decode/plot.py); step_overhead has none. Given one of
# these, plot_results says so and moves on.
PLOTTED_ELSEWHERE = ("model_decode", "dcp_decode", "step_overhead")


def kind_of(data):
    """'replay_latency', 'mla_decode' or None."""
    if data.get("benchmark") in ("replay_latency", "mla_decode"):
        return data["benchmark"]
    if "cases" in data:
        return "replay_latency"  # files written before the "benchmark" field
    return None


def meta_of(data):
    """The run's metadata: the "meta" object, or the top-level fields of older files."""
    meta = dict(data.get("meta") or {})
    for k in ("gpu", "date", "command", "commit"):
        if k not in meta and k in data:
            meta[k] = data[k]
    if "gpu" not in meta and "device" in data:
        meta["gpu"] = data["device"]
    return meta


def subtitle(meta):
    parts = [meta.get("gpu", "unknown GPU")]
    if meta.get("driver"):
        parts.append("driver " + meta["driver"])
    if meta.get("date"):
        parts.append(meta["date"][:16].replace("T", " ") + " UTC")
    parts.append("commit " + str(meta.get("commit", "unknown"))[:12])
    return ", ".join(parts)


# replay_latency ------------------------------------------------------------------------

def replay_series(data, case, field):
    """[(nodes, value)] of one case, sorted by graph size."""
    return sorted((c["nodes"], c[field]) for c in data["cases"] if c["case"] == case and field in c)


def replay_rebind_series(data):
    """Host cost per moved node of each rebinding case: (its host p50 - the step's without
    moves) / nodes patched, as torch_replay.py's targets count it."""
    def per_node(case, base, default_k):
        base_by_n = dict(replay_series(data, base, "host_us_p50"))
        out = []
        for c in data["cases"]:
            if c["case"] == case and c["nodes"] in base_by_n:
                k = c.get("patched_nodes", default_k if default_k else c["nodes"])
                out.append((c["nodes"], (c["host_us_p50"] - base_by_n[c["nodes"]]) / k))
        return sorted(out)

    return {
        "host patching, 8 nodes moved": per_node("cgrt_rebind_8", "cgrt_step", 8),
        "host patching, every node moved": per_node("cgrt_rebind_all", "cgrt_step", 0),
        "device patching, 1 node moved": per_node("cgrt_dpatch_rebind_1", "cgrt_dpatch_step", 1),
        "device patching, 8 nodes moved": per_node("cgrt_dpatch_rebind_8", "cgrt_dpatch_step", 8),
        "device patching, every node moved": per_node("cgrt_dpatch_rebind_all", "cgrt_dpatch_step", 0),
        "raw driver: cuGraphExecKernelNodeSetParams (8 nodes, raw graph)": per_node("raw_set_params_8", "raw_graph_launch", 8),
    }


# (case, label, style): the raw driver's lines are black or grey, dashed, and drawn on top.
RAW = dict(color="black", ls="--", marker="s", lw=2, zorder=5, markerfacecolor="none")
REPLAY_GPU_LINES = [
    ("raw_graph_launch", "raw driver: cuGraphLaunch", RAW),
    ("cgrt_step", "cgrt step", dict(color="tab:blue", marker="o")),
    ("cgrt_dpatch_step", "cgrt step, device patching", dict(color="tab:cyan", marker="o")),
    ("raw_graph_launch+pdl", "raw driver: cuGraphLaunch, PDL kernels", dict(RAW, color="grey")),
    ("cgrt_step+pdl", "cgrt step, PDL kernels", dict(color="tab:green", marker="o")),
    ("torch_cudagraph_replay", "torch CUDAGraph.replay()", dict(color="tab:red", marker="^")),
]
REPLAY_HOST_LINES = [
    ("raw_graph_launch", "raw driver: cuGraphLaunch", RAW),
    ("cgrt_step", "cgrt step", dict(color="tab:blue", marker="o")),
    ("cgrt_dpatch_step", "cgrt step, device patching", dict(color="tab:cyan", marker="o")),
    ("cgrt_rebind_8", "cgrt step, 8 buffers moved (host patching)", dict(color="tab:purple", marker="o")),
    ("cgrt_dpatch_rebind_8", "cgrt step, 8 buffers moved (device patching)", dict(color="tab:olive", marker="o")),
    ("torch_cudagraph_replay", "torch CUDAGraph.replay()", dict(color="tab:red", marker="^")),
]


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(n) for n in sizes])
    ax.set_xlabel("graph size (dependent kernel nodes)")
    ax.grid(True, which="major", alpha=0.3)


def plot_replay(plt, data, stem):
    meta = meta_of(data)
    sizes = sorted({c["nodes"] for c in data["cases"]})
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5.2))
    for case, label, style in REPLAY_GPU_LINES:
        s = replay_series(data, case, "gpu_us_per_node_p50")
        if s:
            a1.plot(*zip(*s), label=label, **style)
    a1.set_ylabel("GPU time per node, p50 (µs)")
    eager = replay_series(data, "eager", "gpu_us_per_node_p50")
    if eager:
        lo, hi = "%.1f" % min(v for _, v in eager), "%.1f" % max(v for _, v in eager)
        a1.set_title("GPU time per node (eager launches: %s µs, off the scale)" % (lo if lo == hi else lo + "-" + hi),
                     fontsize=10)
    else:
        a1.set_title("GPU time per node", fontsize=10)
    a1.set_ylim(0, max(l.get_ydata().max() for l in a1.get_lines()) * 1.35)
    size_axis(a1, sizes)
    a1.legend(fontsize=8)
    for case, label, style in REPLAY_HOST_LINES:
        s = replay_series(data, case, "host_us_p50")
        if s:
            a2.plot(*zip(*s), label=label, **style)
    a2.set_ylim(bottom=0)
    a2.set_ylabel("host time of the launching call, p50 (µs)")
    a2.set_title("host time per step")
    size_axis(a2, sizes)
    a2.legend(fontsize=8)
    fig.suptitle("replay latency of a step of N dependent tiny kernels\n" + subtitle(meta), fontsize=11)
    fig.tight_layout()
    out = [stem + "_per_node.png"]
    fig.savefig(out[0], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(11, 5.2))
    styles = {"raw driver: cuGraphExecKernelNodeSetParams (8 nodes, raw graph)": RAW}
    for label, s in replay_rebind_series(data).items():
        if s:
            ax.plot(*zip(*s), label=label, **styles.get(label, dict(marker="o")))
    ax.axhline(0.35, color="tab:red", ls=":", label="target: 0.35 µs per moved node")
    ax.set_ylabel("host time per moved node, p50 (µs)")
    ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
    size_axis(ax, sizes)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("host cost of rebinding buffers: (step with k moved - step without) / k\n" + subtitle(meta),
                 fontsize=10)
    fig.tight_layout()
    out.append(stem + "_rebind.png")
    fig.savefig(out[1], dpi=110)
    plt.close(fig)
    return out


# mla_decode ----------------------------------------------------------------------------

MLA_COMBINES = [("auto", "default (auto)", "tab:blue"), ("workspace", "workspace", "tab:orange"),
                ("counters", "counters", "tab:green"), ("fp8", "FP8 e4m3 KV, auto (TB/s: its e4m3 bytes)", "tab:red")]


def mla_table(data):
    """(shapes in file order, {combine: {shape: row}}) of the "default" rows; auto:ws and
    auto:cnt both count as "auto". The FP8 rows (`mla_decode_bench --fp8`: variant "fp8",
    AUTO's combine) form a series "fp8" of their own."""
    shapes, table = [], {}
    for r in data.get("results", []):
        variant = r.get("variant", "default")
        if variant not in ("default", "fp8"):
            continue
        # Block shapes (bench/mla_decode block_len / causal columns) are shapes of their own:
        # (batch, heads, context, block_len, causal); single-token ones stay triples.
        shape = (r["batch"], r["heads"], r["context"])
        if r.get("block_len", 1) > 1 or r.get("causal", 0):
            shape += (r.get("block_len", 1), r.get("causal", 0))
        if shape not in shapes:
            shapes.append(shape)
        combine = "fp8" if variant == "fp8" else r.get("combine", "workspace").split(":")[0]
        table.setdefault(combine, {})[shape] = r
    return shapes, table


def mla_value(row, quantity):
    """The per-call-in-graph figure (the one quoted against the targets), or the one-launch
    figure of files written before the in-graph measurement."""
    return row.get(quantity + "_in_graph", row.get(quantity))


def plot_mla_quantity(plt, data, shapes, table, quantity, ylabel, ceiling, ceiling_label, path):
    meta = meta_of(data)
    combines = [c for c in MLA_COMBINES if c[0] in table]
    width = 0.8 / max(1, len(combines))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.05 * len(shapes) + 2), 5.4))
    for i, (key, label, color) in enumerate(combines):
        xs, ys = [], []
        for j, shape in enumerate(shapes):
            row = table[key].get(shape)
            if row is not None and mla_value(row, quantity) is not None:
                xs.append(j + (i - (len(combines) - 1) / 2) * width)
                ys.append(mla_value(row, quantity))
        bars = ax.bar(xs, ys, width, label=label, color=color)
        if key == "auto":
            ax.bar_label(bars, fmt="%.2f" if quantity == "kv_tbps" else "%.0f", fontsize=7, padding=2)
    ax.axhline(ceiling, color="black", ls="--", label=ceiling_label)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(["%d,%d,%d" % s[:3] + (" k=%d%s" % (s[3], " causal" if s[4] else "") if len(s) > 3 else "")
                        for s in shapes], rotation=30, ha="right")
    ax.set_xlabel("shape: batch (requests), heads, context tokens[, block_len k, causal]")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, ceiling * 1.12)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("MLA decode, per call in a graph of %s calls\n%s"
                 % (next((r.get("layers") for r in data.get("results", []) if r.get("layers")), "?"),
                    subtitle(meta)), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_mla(plt, data, stem):
    shapes, table = mla_table(data)
    copy = data["copy_tbps"]
    out = [plot_mla_quantity(plt, data, shapes, table, "kv_tbps", "KV bytes read / time (TB/s)", copy,
                             "device-to-device copy, this run: %.2f TB/s" % copy, stem + "_tbps.png")]
    if "gemm_tflops" in data:
        gemm, label = data["gemm_tflops"], "bf16 GEMM, this run: %.0f TFLOP/s" % data["gemm_tflops"]
    else:
        gemm, label = GEMM_REFERENCE_TFLOPS, "~%.0f TFLOP/s: %s" % (GEMM_REFERENCE_TFLOPS, GEMM_REFERENCE_SOURCE)
    out.append(plot_mla_quantity(plt, data, shapes, table, "tflops", "TFLOP/s", gemm, label, stem + "_tflops.png"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="benchmark JSON files")
    ap.add_argument("--out-dir", help="write the PNGs here instead of next to each JSON")
    a = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_results: matplotlib is not installed here; skipping the plots of %d file(s)" % len(a.files))
        return 0
    rc = 0
    for path in a.files:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print("plot_results: %s: %s" % (path, e), file=sys.stderr)
            rc = 1
            continue
        base = os.path.splitext(os.path.basename(path))[0]
        stem = os.path.join(a.out_dir or os.path.dirname(path), base)
        kind = kind_of(data)
        if kind == "replay_latency":
            written = plot_replay(plt, data, stem)
        elif kind == "mla_decode":
            written = plot_mla(plt, data, stem)
        elif data.get("benchmark") in PLOTTED_ELSEWHERE:
            print("plot_results: %s: a %s result; its own benchmark script draws its plots"
                  % (path, data["benchmark"]))
            continue
        else:
            print("plot_results: %s: not a replay_latency or mla_decode result" % path, file=sys.stderr)
            rc = 1
            continue
        for w in written:
            print("plot_results: wrote " + w)
    return rc


if __name__ == "__main__":
    sys.exit(main())
