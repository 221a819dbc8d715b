"""Markdown tables of a model_decode.json (bench.py's output), for bench/results/README.md:
every figure is read from the JSON.

    python3 bench/model_decode/report.py bench/results/model_decode_h200.json
"""
import json
import statistics
import sys


def _f(v, d=3):
    return "-" if v is None else f"{v:.{d}f}"


def decode_table(d):
    nodes = d.get("nodes_per_step", {})
    cg = nodes.get("cgrt", {})
    peer_nodes = nodes.get("torch_graph_peer", {})
    out = ["| batch | context | cgrt PreparedStep GPU p50 / p99 (ms) | torch graph, same model (ms) | "
           "torch_graph_peer (ms) | cgrt / peer | sync step p50: cgrt / peer (ms) | host us cgrt p50 / p99 "
           "(quietest round) | host us device-launched PreparedStep p50 / p99 | bare cuGraphLaunch p50 / p99 | "
           "peer host p50 / p99 | nodes per step: cgrt graph (all) / peer graph (kernels) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in d["points"]:
        if "methods" not in p:
            out.append(f"| {p['batch']} | {p['context']} | skipped: {p.get('skipped')} | | | | | | | | | |")
            continue
        m = p["methods"]

        def g(k, f="latency_ms", q="p50"):
            return (m.get(k, {}).get(f) or {}).get(q)
        r = p.get("ratios", {}).get("cgrt_over_torch_graph_peer")
        pk = peer_nodes.get(str(p["bucket"]), {})
        out.append(
            f"| {p['batch']} | {p['context']} | {_f(g('cgrt_prepared'))} / {_f(g('cgrt_prepared', q='p99'))} | "
            f"{_f(g('torch_graph'))} | {_f(g('torch_graph_peer'))} | {_f(r)} | "
            f"{_f(g('cgrt_prepared', 'sync_step_ms'))} / {_f(g('torch_graph_peer', 'sync_step_ms'))} | "
            f"{_f(g('cgrt_prepared', 'host_us'), 1)} / {_f(g('cgrt_prepared', 'host_us', 'p99'), 1)} "
            f"({_f(g('cgrt_prepared', 'host_us', 'best_round_p50'), 1)}) | "
            f"{_f(g('cgrt_device_launch', 'host_us'), 1)} / {_f(g('cgrt_device_launch', 'host_us', 'p99'), 1)} | "
            f"{_f(g('launch_floor', 'host_us'), 1)} / {_f(g('launch_floor', 'host_us', 'p99'), 1)} | "
            f"{_f(g('torch_graph_peer', 'host_us'), 1)} / {_f(g('torch_graph_peer', 'host_us', 'p99'), 1)} | "
            f"{cg.get(str(p['bucket']), '-')} / {pk.get('kernel', '-')} |")
    return out


def wait_table(d):
    out = ["| batch | context | method | host us p50 / p99 | per-round p50 |", "| --- | --- | --- | --- | --- |"]
    for p in d["points"]:
        m = p.get("methods", {})
        if "cgrt_prepared_blocking" not in m:
            continue
        for k in ("cgrt_prepared", "cgrt_prepared_fixed", "cgrt_prepared_blocking", "cgrt_prepared_sleep_poll",
                  "cgrt_device_launch", "cgrt_nobind", "launch_floor", "torch_graph", "torch_graph_peer"):
            h = m.get(k, {}).get("host_us") or {}
            if h:
                rounds = ", ".join(f"{x:.1f}" for x in h.get("round_p50", []))
                out.append(f"| {p['batch']} | {p['context']} | {k} | {_f(h['p50'], 1)} / {_f(h['p99'], 1)} | "
                           f"{rounds} |")
    return out


def round_table(d):
    """Per point and round: the host p50 of three methods beside the host's state in that
    round (round_host: cores at its start / end, the hypervisor's steal share, a near-empty
    ctypes call's p50 after it); results without round_host give no rows."""
    out = ["| batch | context | round | host us p50: cgrt_prepared / launch_floor / torch_graph_peer | cores | "
           "steal % | ctypes call us |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in d["points"]:
        m = p.get("methods", {})
        for i, r in enumerate(p.get("round_host", [])):
            def rp(k):
                v = (m.get(k, {}).get("host_us") or {}).get("round_p50", [])
                return _f(v[i], 1) if i < len(v) else "-"
            steal = r.get("steal_share")
            out.append(f"| {p['batch']} | {p['context']} | {i + 1} | {rp('cgrt_prepared')} / {rp('launch_floor')} / "
                       f"{rp('torch_graph_peer')} | {r.get('cpu_start')} / {r.get('cpu_end')} | "
                       f"{_f(None if steal is None else 100 * steal, 2)} | {_f(r.get('ctypes_call_us_p50'), 2)} |")
    return out if len(out) > 2 else []


def round_modes(d, fast_us=6.0):
    """The rounds of every point split by the bare launch's p50 in that round (fast: below
    fast_us), with the medians over those rounds of cgrt_prepared's, the bare launch's and
    torch_graph_peer's round p50: whether a slow host round is cgrt's or the host's (every
    method slow together)."""
    modes = {"fast": [], "slow": []}
    for p in d["points"]:
        m = p.get("methods", {})
        r = [(m.get(k, {}).get("host_us") or {}).get("round_p50", [])
             for k in ("cgrt_prepared", "launch_floor", "torch_graph_peer")]
        for c, f, t in zip(*r):
            modes["fast" if f < fast_us else "slow"].append((c, f, t))
    out = []
    for k, v in modes.items():
        if v:
            med = [statistics.median(x[i] for x in v) for i in range(3)]
            out.append(f"{k} rounds (bare launch p50 {'<' if k == 'fast' else '>='} {fast_us:g} us): {len(v)}; "
                       f"median round p50 cgrt_prepared {med[0]:.1f} us, bare launch {med[1]:.1f} us, "
                       f"torch_graph_peer {med[2]:.1f} us")
    return out


def spec_table(d):
    s = d.get("spec", {})
    plain = s.get("plain_decode", {})
    out = [f"context {s.get('context')}, forced acceptance alpha {s.get('forced_alpha')}; plain decode: " +
           ", ".join(f"batch {b} {v['tokens_per_s']:.0f} tok/s" for b, v in plain.items()), "",
           "| k | batch | rule | accepted / proposed | tokens/s | vs plain decode | draft ms per proposed token | "
           "tokens checked against plain greedy (mismatches) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in s.get("points", []):
        if "tokens_per_s" not in r:
            continue
        gc = r.get("greedy_check")
        out.append(f"| {r['k']} | {r['batch']} | {r['rule']} | {r['accepted']} / {r['proposed']} | "
                   f"{r['tokens_per_s']:.0f} | {_f(r.get('speedup_over_plain_decode'), 2)}x | "
                   f"{r['draft_ms_per_proposed_token']:.4f} | "
                   + ("-" if gc is None else f"{gc['compared']} ({gc['mismatches']})") + " |")
    return out


def capture_lines(d):
    c = d.get("capture", {})
    ep = c.get("equal_policies", {})
    out = []
    for k in ("warmup_each", "warmup_once"):
        if k in ep:
            e = ep[k]
            out.append(f"- {k}: cgrt {e['cgrt_seconds']:.3f} s, torch {e['torch_seconds']:.3f} s, "
                       f"cgrt / torch {e['cgrt_over_torch']:.2f}")
    b = c.get("cgrt", {}).get("breakdown", {})
    for k, v in b.items():
        out.append(f"- cgrt {k}: wall {v['seconds_wall']:.3f} s = captures {v['capture_seconds_sum']:.3f} + "
                   f"index/instantiate/upload {v['index_instantiate_upload_seconds_sum']:.3f} (worker thread) + rest "
                   f"{v['rest_seconds']:.3f}")
    return out


def main(argv):
    d = json.load(open(argv[1]))
    for lines in (decode_table(d), [""], wait_table(d), [""], round_modes(d), [""], round_table(d), [""],
                  spec_table(d), [""], capture_lines(d)):
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
