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
assert all(r["split_kernel"] == "cgrt_mla_split_m64_ws_causal" for r in blk), blk
print("ok:", len(rows), "results")
PY
