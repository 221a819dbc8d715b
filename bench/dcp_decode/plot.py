#!/usr/bin/env python3
"""Plots of a dcp_decode_bench JSON, written as PNGs next to it.

  python3 bench/dcp_decode/plot.py FILE.json

- <stem>_step.png: per shape, the decode step time on 1 GPU and on the DCP group (replayed
  graph) for each merge, with the group's attention-only time (on its shard) as the
  hatched part: the rest is the collectives, packing and merge;
- <stem>_efficiency.png: scaling efficiency (1-GPU time / (world x group time)) per shape
  and merge, with the 85 % target line.

Without matplotlib the script says so and exits 0 without plotting.
"""
import json
import os
import sys


def main(path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots")
        return 0
    with open(path) as f:
        data = json.load(f)
    rows = data["results"]
    meta = data.get("meta", {})
    shapes = []
    for r in rows:
        key = (r["batch"], r["heads"], r["context"])
        if key not in shapes:
            shapes.append(key)
    merges = sorted({r["merge"] for r in rows})
    world = rows[0]["world"] if rows else 2
    title = f"{meta.get('gpu', '?')} x{world}, NCCL {data.get('nccl_version', '?')}, {meta.get('date', '')}"
    stem = os.path.splitext(path)[0]

    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / (1 + len(merges))
    for i, shape in enumerate(shapes):
        one = next(r for r in rows if (r["batch"], r["heads"], r["context"]) == shape)
        ax.bar(i, one["us_1gpu_graph"], width, color="tab:gray", label="1 GPU" if i == 0 else None)
        for k, m in enumerate(merges):
            r = next((r for r in rows if (r["batch"], r["heads"], r["context"]) == shape and r["merge"] == m), None)
            if r is None:
                continue
            x = i + (k + 1) * width
            ax.bar(x, r["us_step_graph"], width, color=f"C{k}", label=f"{world} GPUs, {m}" if i == 0 else None)
            ax.bar(x, r["us_mla_shard_graph"], width, color="none", edgecolor="black", hatch="//",
                   label="attention on the shard" if i == 0 and k == 0 else None)
    ax.set_xticks([i + width * len(merges) / 2 for i in range(len(shapes))])
    ax.set_xticklabels([f"({b},{h},{c})" for b, h, c in shapes])
    ax.set_ylabel("decode step, replayed graph (µs)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem + "_step.png", dpi=120)

    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / max(1, len(merges))
    for k, m in enumerate(merges):
        xs, ys = [], []
        for i, shape in enumerate(shapes):
            r = next((r for r in rows if (r["batch"], r["heads"], r["context"]) == shape and r["merge"] == m), None)
            if r is not None:
                xs.append(i + k * width)
                ys.append(100 * r["efficiency"])
        ax.bar(xs, ys, width, color=f"C{k}", label=m)
    ax.axhline(85, color="red", linestyle="--", label="target 85 %")
    ax.set_xticks([i + width * (len(merges) - 1) / 2 for i in range(len(shapes))])
    ax.set_xticklabels([f"({b},{h},{c})" for b, h, c in shapes])
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem + "_efficiency.png", dpi=120)
    print(f"wrote {stem}_step.png, {stem}_efficiency.png")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
