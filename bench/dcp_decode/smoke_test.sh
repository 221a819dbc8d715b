#!/bin/bash
# The DCP benchmark's flow on the CPU emulation: two tiny shapes, 2 ranks, both merges;
# checks that the JSON has every (shape, merge) with positive times and consistent
# derived figures, and the NCCL fields.
set -euo pipefail
BIN=$1
OUT_JSON="${TEST_TMPDIR:-/tmp}/dcp_smoke.json"
"$BIN" --smoke --world 2 --out "$OUT_JSON" > "${TEST_TMPDIR:-/tmp}/dcp_smoke.log"
python3 - "$OUT_JSON" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["benchmark"] == "dcp_decode" and d["nccl"] == "emulated" and d["nccl_version"] > 0, d
assert d["meta"]["driver_kind"] == "emulated", d["meta"]
rows = d["results"]
assert len(rows) == 4, rows
assert sorted(r["merge"] for r in rows) == ["all_to_all", "all_to_all", "reduce_scatter", "reduce_scatter"], rows
for r in rows:
    for k in ("us_1gpu_graph", "us_step_graph", "us_step_eager", "us_mla_shard_graph"):
        assert r[k] > 0, (k, r)
    assert abs(r["speedup"] - r["us_1gpu_graph"] / r["us_step_graph"]) <= 1e-3 * r["speedup"] + 1e-3, r
    assert abs(r["efficiency"] - r["speedup"] / r["world"]) <= 1e-3, r
    assert 0 <= r["not_attention_share"] <= 1, r
print("ok:", len(rows), "results")
PY
