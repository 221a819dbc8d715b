#!/usr/bin/env python3
"""Where a t64 split call's time goes, from mla_decode_bench --stamps (a build with
--define=cgrt_mla_stamps=1; slots: kernels/mla/stamps.cuh).

    stamps_summary.py STAMPS.json [--json OUT.json]

Per shape, over the CTAs of the stamped call (times in us; median / max over the CTAs):
  span        the call: earliest entry to latest exit
  wait        entry to the end of the wait at the kernel's top
  first       that wait to the first segment's first tile landed (schedule, range,
              block-table entries, Q and the ring's first sub-stages)
  per_tile    the loops' time per 64-token tile after the first (ns)
  finish      a segment's last products to its finish done (staging, partial or output
              stores, the counter, the merge of the last CTA of a row), split into
              segments that end a CTA's range (last) and the others (mid)
  refill      a mid finish done to the next segment's first tile landed
  tail        the last finish done to the CTA's exit
  exit_spread latest exit minus earliest exit
and the critical CTA (the latest exit): its phases summed, which is the call's time.
Prints a table; --json writes the same figures."""
import json
import statistics
import sys


def us(ns):
    return ns / 1e3


def med_max(v):
    return (statistics.median(v), max(v)) if v else (None, None)


def shape_summary(s):
    ctas = [c for c in s["ctas"] if c["entry"] >= 0 and c["exit"] >= 0 and c["segments"]]
    r = {"batch": s["batch"], "heads": s["heads"], "context": s["context"], "block_len": s["block_len"],
         "causal": s["causal"], "split_kernel": s["split_kernel"], "stamped_us_in_graph": s["stamped_us_in_graph"],
         "ctas": len(ctas)}
    if not ctas:
        return r
    t0 = min(c["entry"] for c in ctas)
    parts = {k: [] for k in ("wait", "first", "per_tile_ns", "finish_mid", "finish_last", "refill", "tail")}
    for c in ctas:
        seg = c["segments"]
        parts["wait"].append(us(c["wait"] - c["entry"]))
        parts["first"].append(us(seg[0][1] - c["wait"]))
        for i, g in enumerate(seg):
            start, first, done, fin, _row, tiles = g
            if tiles > 1:
                parts["per_tile_ns"].append((done - first) / (tiles - 1))
            (parts["finish_last"] if i == len(seg) - 1 else parts["finish_mid"]).append(us(fin - done))
            if i + 1 < len(seg):
                parts["refill"].append(us(seg[i + 1][1] - fin))
        parts["tail"].append(us(c["exit"] - seg[-1][3]))
    for k, v in parts.items():
        m, x = med_max(v)
        r[k] = {"median": m, "max": x, "n": len(v)}
    exits = [c["exit"] for c in ctas]
    r["span_us"] = us(max(exits) - t0)
    r["exit_spread_us"] = us(max(exits) - min(exits))
    crit = max(ctas, key=lambda c: c["exit"])
    seg = crit["segments"]
    r["critical_cta"] = {
        "cta": crit["cta"], "entry_us": us(crit["entry"] - t0), "wait_us": us(crit["wait"] - crit["entry"]),
        "first_us": us(seg[0][1] - crit["wait"]),
        "loops_us": sum(us(g[2] - g[1]) for g in seg), "finishes_us": sum(us(g[3] - g[2]) for g in seg),
        "refills_us": sum(us(seg[i + 1][1] - seg[i][3]) for i in range(len(seg) - 1)),
        "tail_us": us(crit["exit"] - seg[-1][3]), "segments": len(seg), "tiles": sum(g[5] for g in seg)}
    return r


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    d = json.load(open(argv[0]))
    rows = [shape_summary(s) for s in d["shapes"]]
    fmt = lambda p: "-" if p["median"] is None else "%.2f / %.2f" % (p["median"], p["max"])  # noqa: E731
    for r in rows:
        print("batch %d heads %d ctx %d k %d%s %s: stamped call %.2f us, %d CTAs" % (
            r["batch"], r["heads"], r["context"], r["block_len"], " causal" if r["causal"] else "",
            r["split_kernel"], r["stamped_us_in_graph"], r["ctas"]))
        if not r["ctas"]:
            continue
        print("  span %.2f us, exits spread %.2f us" % (r["span_us"], r["exit_spread_us"]))
        for k in ("wait", "first", "per_tile_ns", "finish_mid", "finish_last", "refill", "tail"):
            print("  %-12s %s (n %d)" % (k, fmt(r[k]), r[k]["n"]))
        c = r["critical_cta"]
        print("  critical CTA %d: entry %.2f + wait %.2f + first %.2f + loops %.2f + finishes %.2f + refills %.2f "
              "+ tail %.2f us (%d segments, %d tiles)" % (c["cta"], c["entry_us"], c["wait_us"], c["first_us"],
                                                          c["loops_us"], c["finishes_us"], c["refills_us"],
                                                          c["tail_us"], c["segments"], c["tiles"]))
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump({"benchmark": "mla_decode_stamps_summary", "meta": d.get("meta"), "shapes": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
