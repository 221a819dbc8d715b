#!/bin/bash
# tools/plot_results.py and bench/results/: each current result file is named in the
# index (README.md) and records gpu, driver, date, commit and command in "meta"; the
# plot script's figures agree with the targets torch_replay.py computed in the same file;
# with matplotlib it writes the PNGs, without it says so and exits 0.
set -euo pipefail
T=${TEST_TMPDIR:-/tmp}
python3 - "$T" <<'PY'
import glob, json, os, subprocess, sys
sys.path.insert(0, "tools")
import plot_results as pr

tmp = sys.argv[1]
index = open("bench/results/README.md").read()
files = sorted(f for f in glob.glob("bench/results/*") if not f.endswith(("README.md", "BUILD")))
assert any(f.endswith("mla_decode_h200.json") for f in files), files
assert any(f.endswith("replay_latency_h200.json") for f in files), files
for f in files:
    assert os.path.basename(f) in index, "bench/results/README.md does not name " + f
jsons = [f for f in files if f.endswith(".json")]
for f in jsons:
    meta = json.load(open(f)).get("meta") or {}
    for k in ("gpu", "driver", "date", "commit", "command"):
        assert meta.get(k) and meta[k] != "unknown", (f, k, meta)

mla = json.load(open("bench/results/mla_decode_h200.json"))
assert pr.kind_of(mla) == "mla_decode"
shapes, table = pr.mla_table(mla)
assert (32, 16, 8192) in shapes and set(table) == {"auto", "workspace", "counters"}, (shapes, table.keys())
for combine in table:
    assert set(table[combine]) == set(shapes), combine
row = table["auto"][(32, 16, 8192)]
assert pr.mla_value(row, "kv_tbps") == row["kv_tbps_in_graph"], row

fp8 = json.load(open("bench/results/mla_decode_fp8_h200.json"))
shapes8, table8 = pr.mla_table(fp8)
assert "fp8" in table8 and set(table8["fp8"]) == set(shapes8) == set(table8["auto"]), (shapes8, table8.keys())
for shape, row in table8["fp8"].items():
    assert row["variant"] == "fp8" and row["split_kernel"].endswith("_fp8"), row
    assert table8["auto"][shape]["variant"] == "default", shape

rep = json.load(open("bench/results/replay_latency_h200.json"))
assert pr.kind_of(rep) == "replay_latency"
series = pr.replay_rebind_series(rep)
checked = 0
for t in rep["targets"]:  # the same quantity, computed by torch_replay.py in that run
    label = {"cgrt_rebind_8": "host patching, 8 nodes moved", "cgrt_rebind_all": "host patching, every node moved",
             "cgrt_dpatch_rebind_all": "device patching, every node moved"}.get(t.get("case"))
    if label:
        got = dict(series[label])[t["nodes"]]
        assert abs(got - t["value"]) < 1e-9, (label, t, got)
        checked += 1
assert checked >= 6, checked
assert [n for n, _ in pr.replay_series(rep, "raw_graph_launch", "gpu_us_per_node_p50")] == [32, 128, 512]

out = subprocess.run([sys.executable, "tools/plot_results.py", "--out-dir", tmp] + jsons,
                     capture_output=True, text=True)
assert out.returncode == 0, out
try:
    import matplotlib  # noqa: F401
    have = True
except ImportError:
    have = False
if have:
    for name in ("mla_decode_h200_tbps", "mla_decode_h200_tflops", "replay_latency_h200_per_node",
                 "replay_latency_h200_rebind"):
        with open(os.path.join(tmp, name + ".png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
    print("ok: plots written")
else:
    assert "matplotlib is not installed" in out.stdout, out
    print("ok: no matplotlib here, the script skipped the plots")
PY
