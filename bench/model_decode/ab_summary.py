#!/usr/bin/env python3
"""A/B of model_decode runs (bench.py JSON files of one device call, e.g. libraries or
environment variants interleaved a b b a).

    ab_summary.py --out FILE [--note TEXT] LABEL=A.json[,A2.json...] LABEL2=B.json[,...] ...

For every label and point (batch, context) it writes, per input file, the step's GPU p50
of cgrt's PreparedStep and of torch_graph_peer, their ratio, and the attention section
of cgrt's kernel profile (p50 of each part, bench.py attention_sections), plus the
median over the label's files and each label's median over the first label's, the
inputs' meta (inputs_meta) and a meta of the first input's GPU, driver and date with
every label's commits and commands: every field comes from the files.
Prints one line per label and point."""
import argparse
import json
import statistics


def point_rows(d):
    for p in d.get("points", []):
        if "methods" not in p:
            continue
        m = p["methods"]
        prep = m.get("cgrt_prepared", {}).get("latency_ms", {}).get("p50")
        peer = m.get("torch_graph_peer", {}).get("latency_ms", {}).get("p50")
        att = p.get("kernel_profile", {}).get("cgrt_prepared", {}).get("attention", {})
        patt = p.get("kernel_profile", {}).get("torch_graph_peer", {}).get("attention", {})
        yield (p["batch"], p["context"]), {
            "cgrt_ms_p50": prep, "peer_ms_p50": peer,
            "cgrt_over_peer": p.get("ratios", {}).get("cgrt_over_torch_graph_peer"),
            "attention_us_p50": {k: v.get("p50") for k, v in att.items()},
            "peer_attention_us_p50": {k: v.get("p50") for k, v in patt.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("sides", nargs="+", help="LABEL=file[,file...]")
    a = ap.parse_args(argv)
    out = {"benchmark": "model_decode_ab", "note": a.note, "labels": [], "meta": {}, "points": {}}
    for side in a.sides:
        label, files = side.split("=", 1)
        out["labels"].append(label)
        out["meta"][label] = []
        for f in files.split(","):
            d = json.load(open(f))
            out["meta"][label].append({**d.get("meta", {}), "file": f.split("/")[-3] + "/" + f.split("/")[-1]})
            for key, row in point_rows(d):
                pt = out["points"].setdefault("%d,%d" % key, {})
                pt.setdefault(label, {"runs": []})["runs"].append(row)
    ins = out.pop("meta")
    m0 = ins[out["labels"][0]][0]
    out["meta"] = {"gpu": m0.get("gpu"), "driver": m0.get("driver"), "date": m0.get("date"),
                   "commit": "; ".join(f"{k}: " + ", ".join(sorted({str(m.get('commit')) for m in v}))
                                       for k, v in ins.items()),
                   "command": "; ".join(f"{k}: " + " | ".join(sorted({str(m.get('command')) for m in v}))
                                        for k, v in ins.items())}
    out["inputs_meta"] = ins
    first = out["labels"][0]
    for key, pt in out["points"].items():
        for label, v in pt.items():
            for f in ("cgrt_ms_p50", "cgrt_over_peer"):
                xs = [r[f] for r in v["runs"] if r[f] is not None]
                v[f + "_median"] = statistics.median(xs) if xs else None
            if first in pt and pt[first]["cgrt_ms_p50_median"] and v["cgrt_ms_p50_median"]:
                v["step_vs_" + first] = v["cgrt_ms_p50_median"] / pt[first]["cgrt_ms_p50_median"]
            def f4(x):
                return "-" if x is None else f"{x:.4f}"
            print(f"{key:>10} {label:>8}: cgrt {f4(v['cgrt_ms_p50_median'])} ms, /peer {f4(v['cgrt_over_peer_median'])}, "
                  f"vs {first} {f4(v.get('step_vs_' + first))}, merge tail "
                  f"{[r['attention_us_p50'].get('merge_tail_us') for r in v['runs']]}")
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
