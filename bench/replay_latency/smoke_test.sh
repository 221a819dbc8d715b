#!/bin/bash
# replay_latency's flow on the CPU emulation (two tiny graph sizes; no timing is
# checked): every case at both sizes, and the "meta" object with the commit the
# validation script passes in CGRT_BENCH_COMMIT and the command line as given.
set -euo pipefail
BIN=$1
T=${TEST_TMPDIR:-/tmp}
CGRT_DRIVER=emulated CGRT_BENCH_COMMIT=0123abc "$BIN" --sizes 4,8 --iters 20 > "$T/replay.json" 2> "$T/replay.log"
python3 - "$T/replay.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["benchmark"] == "replay_latency", d.keys()
m = d["meta"]
assert m["driver_kind"] == "emulated" and m["driver"] == "emulated", m
assert m["commit"] == "0123abc", m
assert m["command"].endswith("replay_latency --sizes 4,8 --iters 20"), m  # taken before strtok
assert m["gpu"] and m["cuda_driver_version"] > 0 and m["date"].endswith("Z"), m
cases = {(c["case"], c["nodes"]) for c in d["cases"]}
for n in (4, 8):
    for case in ("eager", "raw_graph_launch", "cgrt_step", "cgrt_step+pdl", "raw_set_params_8", "cgrt_rebind_1",
                 "cgrt_rebind_all", "cgrt_dpatch_step", "cgrt_dpatch_rebind_all", "cgrt_copy_in_8",
                 "cgrt_exec_update", "cgrt_recapture_instantiate"):
        assert (case, n) in cases, (case, n)
print("ok:", len(d["cases"]), "cases")
PY
