#!/bin/bash
# The MLA benchmark's flow on the CPU emulation: tiny shapes, 3 repetitions, 2 calls per
# in-graph measurement; checks that the JSON carries every shape of the three combine
# settings (auto, the default, and the two strategies) with an in-graph time and
# bandwidth, and the causal block shape's columns.
set -euo pipefail
BIN=$1
OUT_JSON="${TEST_TMPDIR:-/tmp}/mla_smoke.json"
CGRT_DRIVER=emulated "$BIN" --smoke --reps 3 --layers 2 --out "$OUT_JSON" > "${TEST_TMPDIR:-/tmp}/mla_smoke.log"
python3 - "$OUT_JSON" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["results"]
assert len(rows) == 12, rows
for r in rows:
    assert r["layers"] == 2 and r["us_in_graph"] > 0 and r["us_graph"] > 0, r
    # Per call in the graph: KV bytes over the in-graph time.
    kv = r["batch"] * r["context"] * 576 * 2
    assert abs(r["kv_tbps_in_graph"] - kv / (r["us_in_graph"] * 1e-6) / 1e12) <= 1e-4 + 1e-3 * r["kv_tbps_in_graph"], r
kinds = [r["combine"] for r in rows]
assert kinds.count("workspace") == 4 and kinds.count("counters") == 4, kinds
assert sum(k in ("auto:ws", "auto:cnt") for k in kinds) == 4, kinds
blk = [r for r in rows if r["block_len"] == 4]
assert len(blk) == 3 and all(r["causal"] == 1 and r["kv_shared"] == 1 for r in blk), blk
assert all(r["split_kernel"] == "cgrt_mla_split_t64_n64_causal" for r in blk), blk  # one head group of 64 rows
print("ok:", len(rows), "results")
PY

# --stamps needs the diagnostic build on a GPU: here (the emulation, the library's kernels)
# it stops with a status that says so, before any measurement.
if CGRT_DRIVER=emulated "$BIN" --smoke --stamps "${TEST_TMPDIR:-/tmp}/st.json" > "${TEST_TMPDIR:-/tmp}/st.log" 2>&1; then
  echo "--stamps ran on the emulation"; exit 1
fi
grep -q "cgrt_mla_stamps=1" "${TEST_TMPDIR:-/tmp}/st.log" || { cat "${TEST_TMPDIR:-/tmp}/st.log"; exit 1; }
grep -q "cgrt_mla_t64_stamps" "${TEST_TMPDIR:-/tmp}/st.log" || { cat "${TEST_TMPDIR:-/tmp}/st.log"; exit 1; }

# stamps_summary.py on a stamped call of two CTAs written by hand (ns from the earliest
# entry): CTA 0 runs two segments (row 0 then row 1), CTA 1 one.
SUMMARY=$2
cat > "${TEST_TMPDIR:-/tmp}/st_in.json" <<'JS'
{"benchmark": "mla_decode_stamps", "meta": {}, "shapes": [{"batch": 2, "heads": 16, "context": 8192,
 "block_len": 1, "causal": 0, "split_kernel": "cgrt_mla_split_t64", "calls_per_graph": 8,
 "stamped_us_in_graph": 30.0, "ctas": [
  {"cta": 0, "entry": 0, "wait": 1000, "exit": 30000, "segments_run": 2,
   "segments": [[1100, 4000, 13000, 15000, 0, 4], [15100, 18000, 24000, 27000, 1, 3]]},
  {"cta": 1, "entry": 500, "wait": 1500, "exit": 26000, "segments_run": 1,
   "segments": [[1600, 5500, 20500, 25000, 1, 6]]}]}]}
JS
python3 "$SUMMARY" "${TEST_TMPDIR:-/tmp}/st_in.json" --json "${TEST_TMPDIR:-/tmp}/st_out.json" > /dev/null
python3 - "${TEST_TMPDIR:-/tmp}/st_out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["shapes"][0]
near = lambda a, b: abs(a - b) < 1e-9
assert r["ctas"] == 2 and near(r["span_us"], 30.0) and near(r["exit_spread_us"], 4.0), r
assert near(r["wait"]["median"], 1.0) and near(r["first"]["max"], 4.0), r        # 3.0 and 4.0 us
assert near(r["per_tile_ns"]["median"], 3000.0) and r["per_tile_ns"]["n"] == 3, r
assert near(r["finish_mid"]["median"], 2.0) and r["finish_mid"]["n"] == 1, r      # 13000 -> 15000
assert near(r["finish_last"]["max"], 4.5) and r["finish_last"]["n"] == 2, r       # 3.0 and 4.5 us
assert near(r["refill"]["median"], 3.0), r                                        # 15000 -> 18000
assert near(r["tail"]["max"], 3.0), r                                             # 27000 -> 30000
c = r["critical_cta"]
assert c["cta"] == 0 and c["segments"] == 2 and c["tiles"] == 7, c
assert near(c["loops_us"], 15.0) and near(c["finishes_us"], 5.0) and near(c["refills_us"], 3.0), c
assert near(c["wait_us"] + c["first_us"] + c["loops_us"] + c["finishes_us"] + c["refills_us"] + c["tail_us"], 30.0), c
print("ok: stamps summary")
PY

