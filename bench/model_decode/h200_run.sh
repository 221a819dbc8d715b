#!/usr/bin/env bash
# The model example and benchmark on a GPU machine, in two parts that each fit in a
# 10-minute command. Run from the repository root, with libcgrt.so.1 built beforehand
# (`bazel build //:libcgrt.so //:libcgrt_soname`, then copy bazel-bin/libcgrt.so.1 into
# LIBDIR: the GPU machine needs no Bazel):
#
#   bash bench/model_decode/h200_run.sh bench    LIBDIR   # benchmark (about 3 min; < 8 min)
#   bash bench/model_decode/h200_run.sh validate LIBDIR   # checked replay, serve, spec, py GPU tests
#   bash bench/model_decode/h200_run.sh overhead LIBDIR   # host time of GraphSet.step vs raw call (~1 min)
#   bash bench/model_decode/h200_run.sh final LIBDIR      # step_overhead, bench, check_stale, serve
#                                                         # (~6 min, < 8); all in $OUT/final.tgz
#
# Logs, JSON and plots go to $OUT (default /tmp/model_decode_out); summary.txt there says
# each part's exit status. Every part has its own timeout, so a hang cannot eat the rest.
set -u
what=${1:?usage: h200_run.sh bench|validate|overhead LIBDIR}
libdir=${2:?usage: h200_run.sh bench|validate|overhead LIBDIR}
OUT=${OUT:-/tmp/model_decode_out}
mkdir -p "$OUT"
export CGRT_LIBRARY="$(cd "$libdir" && pwd)/libcgrt.so.1"
export CGRT_DRIVER=cuda PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export CGRT_BENCH_COMMIT=${CGRT_BENCH_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
[ -f "$CGRT_LIBRARY" ] || { echo "no $CGRT_LIBRARY" | tee "$OUT/summary.txt"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/summary.txt"

part() {  # part NAME TIMEOUT_S COMMAND...
  local name=$1 t=$2
  shift 2
  echo "== $name ($*)" | tee -a "$OUT/summary.txt"
  local t0=$SECONDS
  timeout -k 10 "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  tail -n 12 "$OUT/$name.log"
}

case "$what" in
  bench)
    part bench 500 python3 bench/model_decode/bench.py --out "$OUT" --deadline 420
    ;;
  validate)
    part stale 120 python3 examples/deepseek_v2_lite/check_stale.py --json "$OUT/stale.json"
    part serve 260 python3 examples/deepseek_v2_lite/serve.py --steps 1000 --time-limit 200 --json "$OUT/serve.json"
    part spec 120 python3 examples/deepseek_v2_lite/spec.py --time-limit 90 --json "$OUT/spec.json"
    part pytest_gpu 60 python3 -m pytest -q -p no:cacheprovider python/tests/test_torch_gpu.py
    ;;
  overhead)
    part step_overhead 120 python3 bench/model_decode/step_overhead.py --json "$OUT/step_overhead.json"
    part step_overhead_cross 120 python3 bench/model_decode/step_overhead.py --cross-stream \
      --json "$OUT/step_overhead_cross.json"
    ;;
  final)
    # one command for the issue 15 figures; the device tool returns at most 8 files, so
    # the parts write under $OUT/final and everything is packed into $OUT/final.tgz
    F=$OUT/final
    mkdir -p "$F"
    part step_overhead 40 python3 bench/model_decode/step_overhead.py --iters 2000 --json "$F/step_overhead.json"
    # 300 timed steps per graph method and point (bench.py's default) in 10 interleaved
    # rounds of 30 (each round's host p50 is kept: the quietest one is the figure against
    # host noise): about 250 s of steps on the H200 (the sum of the 12 points' step times x
    # 300 x 8 graph methods), plus model set-up, capture and the draft loop
    part bench 330 python3 bench/model_decode/bench.py --out "$F/bench" --deadline 300 --rounds 10
    part stale 40 python3 examples/deepseek_v2_lite/check_stale.py --json "$F/stale.json"
    part serve 45 python3 examples/deepseek_v2_lite/serve.py --steps 1000 --time-limit 30 --json "$F/serve.json"
    mv "$OUT"/*.log "$F/" 2>/dev/null
    cp "$OUT/summary.txt" "$F/"
    tar -C "$OUT" -czf "$OUT/final.tgz" final && rm -rf "$F"
    ;;
  *)
    echo "unknown part $what (bench, validate, overhead or final)"
    exit 2
    ;;
esac
! grep -q "exit [1-9]" "$OUT/summary.txt"
