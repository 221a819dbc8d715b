#!/usr/bin/env python3
"""A/B of two builds from mla_decode_bench JSON files of one GPU run.

    ab_summary.py --out FILE [--note TEXT] [--peers PEERS.json] A.json... -- B.json...

Each side is one or more JSON files of mla_decode_bench (the same shapes, interleaved in
one run, e.g. A B B A). For every result row (variant, shape, block_len, causal, combine)
(and every interleaved --ab variant, as variant "ab:NAME") it writes the in-graph times
of every file, the median per side and B / A, plus the
inputs' meta (GPU, driver, date, commit, command), so that every field comes from the
run. --peers adds the rows of bench/mla_decode/peers.py's JSON of the same run (FlashMLA,
FlashInfer fa3; "peers", "peers_meta") and, per row, the best peer's time. Prints one
line per row."""
import json
import statistics
import sys


def key(r):
    # AUTO rows pair whichever merge each side's plan picked ("auto:ws" / "auto:cnt"):
    # the row is the default options; each side's pick is kept in combine_a / combine_b.
    comb = "auto" if r["combine"].startswith("auto") else r["combine"]
    return (r["variant"], r["batch"], r["heads"], r["context"], r["block_len"], r["causal"], comb)


def main(argv):
    out, note, peers, sides, cur = None, "", None, [[], []], 0
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--out":
            out = argv[i + 1]
            i += 2
            continue
        if a == "--peers":
            peers = json.load(open(argv[i + 1]))
            i += 2
            continue
        if a == "--note":
            note = argv[i + 1]
            i += 2
            continue
        if a == "--":
            cur = 1
        else:
            sides[cur].append(a)
        i += 1
    if not out or not sides[0] or not sides[1]:
        sys.exit(__doc__)
    docs = [[json.load(open(f)) for f in s] for s in sides]
    rows = {}
    for side, ds in enumerate(docs):
        for d in ds:
            for r in d["results"]:
                e = rows.setdefault(key(r), {"split_kernel": [None, None], "combine": [None, None], "us_in_graph": [[], []]})
                e["split_kernel"][side] = r["split_kernel"]
                e["combine"][side] = r["combine"]
                e["us_in_graph"][side].append(r["us_in_graph"])
            # the interleaved variants of --ab (their median per call in a graph), as
            # rows of variant "ab:NAME"
            for r in d.get("ab_interleaved", []):
                e = rows.setdefault(("ab:" + r["variant"],) + key(r)[1:],
                                    {"split_kernel": [None, None], "combine": [None, None], "us_in_graph": [[], []]})
                e["us_in_graph"][side].append(r["us_per_call_median"])
    res = []
    for k, e in rows.items():
        a, b = e["us_in_graph"]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        best = None
        for pr in (peers or {}).get("peers", []):
            if (pr["batch"], pr["heads"], pr["context"], pr["block_len"], pr["causal"]) == k[1:6]:
                if best is None or pr["us_in_graph"] < best["us_in_graph"]:
                    best = pr
        res.append({"best_peer": best and best["name"], "best_peer_us": best and best["us_in_graph"],
                    "variant": k[0], "batch": k[1], "heads": k[2], "context": k[3], "block_len": k[4],
                    "causal": k[5], "combine": k[6], "split_kernel_a": e["split_kernel"][0],
                    "split_kernel_b": e["split_kernel"][1], "combine_a": e["combine"][0],
                    "combine_b": e["combine"][1], "us_in_graph_a": a, "us_in_graph_b": b,
                    "median_a": ma, "median_b": mb, "b_over_a": round(mb / ma, 4)})
        print("%-8s %4d %4d %6d k%d c%d %-9s a %8.2f b %8.2f  b/a %.4f%s" % (
            k[0], k[1], k[2], k[3], k[4], k[5], k[6], ma, mb, mb / ma,
            "  best peer %s %.2f" % (best["name"], best["us_in_graph"]) if best else ""))
    ma, mb = docs[0][0]["meta"], docs[1][0]["meta"]
    # The run's metadata (every field from the input files): GPU, driver and date of the
    # first file, both commits, the benchmark commands and this script's command line.
    meta = {"gpu": ma["gpu"], "driver": ma["driver"], "date": min(d["meta"]["date"] for ds in docs for d in ds),
            "commit": "a %s, b %s" % (ma["commit"], mb["commit"]),
            "command": " ; ".join([ma["command"], mb["command"], "ab_summary.py " + " ".join(argv)])}
    doc = {"benchmark": "mla_decode_ab", "meta": meta, "note": note,
           "a": {"files": sides[0], "meta": [d["meta"] for d in docs[0]], "copy_tbps": [d["copy_tbps"] for d in docs[0]]},
           "b": {"files": sides[1], "meta": [d["meta"] for d in docs[1]], "copy_tbps": [d["copy_tbps"] for d in docs[1]]},
           "results": res}
    if peers is not None:
        doc["peers"] = peers.get("peers", [])
        doc["peers_missing"] = peers.get("missing", [])
        doc["peers_meta"] = peers.get("meta", {})
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
