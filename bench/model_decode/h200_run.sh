#!/usr/bin/env bash
# The model example and benchmark on a GPU machine, in two parts that each fit in a
# 10-minute command. Run from the repository root, with libcgrt.so.1 built beforehand
# (`bazel build //:libcgrt.so //:libcgrt_soname`, then copy bazel-bin/libcgrt.so.1 into
# LIBDIR: the GPU machine needs no Bazel):
#
#   bash bench/model_decode/h200_run.sh bench    LIBDIR   # benchmark (about 3 min; < 8 min)
#   bash bench/model_decode/h200_run.sh validate LIBDIR   # checked replay, serve, spec, py GPU tests
#   bash bench/model_decode/h200_run.sh overhead LIBDIR   # host time of GraphSet.step vs raw call (~1 min)
#   bash bench/model_decode/h200_run.sh final LIBDIR      # the whole model_decode.json with the spec
#                                                         # part and the plots (~5 min); $OUT/final.tgz
#   bash bench/model_decode/h200_run.sh dev LIBDIR ARGS   # bench.py ARGS (a quick subset)
#   bash bench/model_decode/h200_run.sh ab LIBDIR LIBDIR_B ARGS  # dev runs of two libraries,
#                                                         # a b b a, then ab_summary.py; $OUT/ab.tgz
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
export CGRT_BENCH_COMMAND=${CGRT_BENCH_COMMAND:-"bash bench/model_decode/h200_run.sh $*"}
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
    # the issue 25 figures in one command: bench.py (decode points with cgrt, torch graph
    # and torch_graph_peer, nodes per step, capture at equal policies, spec decoding with
    # k = 1..4) writes $OUT/final/model_decode.json and the plots, host_wake.py host_wake.json
    # (a bare graph launch's host time after steps of 2.5-33 ms under four waits); all packed into
    # $OUT/final.tgz (the device tool returns at most 8 files). About 5 minutes on an H200.
    F=$OUT/final
    mkdir -p "$F"
    part bench 420 python3 bench/model_decode/bench.py --out "$F" --deadline 330 --spec-seconds 60 \
      --rounds 6 --iters 300 --eager-iters 3 --profile-kernels
    part host_wake 120 python3 bench/model_decode/host_wake.py --json "$F/host_wake.json" --iters 150 \
      --steps-ms 2.5,10,33
    mv "$OUT"/*.log "$F/" 2>/dev/null
    cp "$OUT/summary.txt" "$F/"
    tar -C "$OUT" -czf "$OUT/final.tgz" final && rm -rf "$F"
    ;;
  dev)
    # a quick subset (arguments after LIBDIR go to bench.py), e.g.
    #   bash bench/model_decode/h200_run.sh dev LIBDIR --batches 1,8 --contexts 1024 --iters 60
    shift 2
    part bench 300 python3 bench/model_decode/bench.py --out "$OUT/dev" "$@"
    ;;
  ab)
    # an A/B of two libraries in the model (e.g. main against a kernel branch), both with
    # the same bench.py ARGS, e.g.
    #   bash bench/model_decode/h200_run.sh ab LIBDIR_A LIBDIR_B --batches 8 \
    #     --contexts 1024,32768 --iters 200 --rounds 4 --no-spec --profile-kernels
    # writes $OUT/ab.tgz (the runs' JSON and logs, ab.json from ab_summary.py: the step
    # per side and point, the ratio to the peer, the merge after the MLA split); the
    # device tool returns only a few files, so everything is packed. CGRT_BENCH_COMMIT_B
    # names side b's commit (default: side a's). AB_ARGS_A / AB_ARGS_B: more bench.py
    # arguments for one side only (an A/B of an option on one library, e.g. AB_ARGS_A="--vproj
    # 0" AB_ARGS_B="--vproj 1" with LIBDIR twice).
    libb=${3:?usage: h200_run.sh ab LIBDIR_A LIBDIR_B [bench.py args]}
    shift 3
    A=$OUT/ab
    mkdir -p "$A"
    i=0
    for side in a b b a; do
      i=$((i + 1))
      if [ $side = a ]; then lib=$libdir; c=$CGRT_BENCH_COMMIT; x=${AB_ARGS_A:-}
      else lib=$libb; c=${CGRT_BENCH_COMMIT_B:-$CGRT_BENCH_COMMIT}; x=${AB_ARGS_B:-}; fi
      # shellcheck disable=SC2086  # x: words of extra arguments
      CGRT_LIBRARY="$(cd "$lib" && pwd)/libcgrt.so.1" CGRT_BENCH_COMMIT=$c \
        part "ab${i}_$side" 300 python3 bench/model_decode/bench.py --out "$A/${i}_$side" "$@" $x
    done
    python3 bench/model_decode/ab_summary.py --out "$A/ab.json" \
      --note "h200_run.sh ab $* (a: ${AB_ARGS_A:-}; b: ${AB_ARGS_B:-})" \
      a="$A/1_a/model_decode.json,$A/4_a/model_decode.json" b="$A/2_b/model_decode.json,$A/3_b/model_decode.json" \
      | tee -a "$OUT/summary.txt"
    rm -f "$A"/*/*.png
    mv "$OUT"/*.log "$A/" 2>/dev/null
    cp "$OUT/summary.txt" "$A/"
    tar -C "$OUT" -czf "$OUT/ab.tgz" ab && rm -rf "$A"
    ;;
  *)
    echo "unknown part $what (bench, validate, overhead, final, dev or ab)"
    exit 2
    ;;
esac
! grep -q "exit [1-9]" "$OUT/summary.txt"
