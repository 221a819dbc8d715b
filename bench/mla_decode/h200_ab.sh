#!/bin/bash
# An A/B run of a kernel knob in one H200 call (run from the repo root on the GPU
# machine; binaries of `bazel build --config=gpu //bench/mla_decode:mla_decode_bench
# //tests/mla:mla_test` in the folder $B, default .gpu_final):
#  1. the interleaved A/B of mla_decode_bench (--ab: every variant per call inside a
#     graph of 8 calls) at the shapes in $SHAPES;
#  2. mla_test with the knob settings in $KNOB set (e.g. "CGRT_MLA_COMB=onepass"), then
#     compute-sanitizer memcheck on the tests in $MEMCHECK_FILTER with the same knob.
# Logs land in $OUT (default /tmp/mla_ab); a short summary goes to stdout.
# Example: SHAPES="1,16,8192 32,16,8192" KNOB=CGRT_MLA_COMB=onepass bash bench/mla_decode/h200_ab.sh
set -u
B=${B:-.gpu_final}
O=${OUT:-/tmp/mla_ab}
SHAPES=${SHAPES:-1,16,8192 4,16,8192 32,16,8192}
KNOB=${KNOB:-}
MEMCHECK_FILTER=${MEMCHECK_FILTER:-Mla.HeadCountsBothStrategies:Mla.SingleRowSteps:Mla.PaddingRows}
mkdir -p "$O"
export CGRT_DRIVER=cuda
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
args=()
for s in $SHAPES; do args+=(--shape "$s"); done
T0=$(date +%s)
timeout 240 "$B/mla_decode_bench" --ab "${args[@]}" --out "$O/ab.json" > "$O/ab.log" 2>&1
echo "bench rc=$? $(( $(date +%s) - T0 ))s"
grep -E "^d2d|^A/B" "$O/ab.log"
env $KNOB timeout 200 "$B/mla_test" > "$O/mla_test.log" 2>&1
echo "mla_test ${KNOB:-default} rc=$? $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/mla_test.log" | tr '\n' ' ')"
grep -h "Failure" -A3 "$O/mla_test.log" | head -8
env $KNOB timeout 200 compute-sanitizer --tool memcheck --report-api-errors no "$B/mla_test" \
  --gtest_filter="$MEMCHECK_FILTER" > "$O/memcheck.log" 2>&1
echo "memcheck ${KNOB:-default} rc=$? $(grep -h 'ERROR SUMMARY' "$O/memcheck.log") $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/memcheck.log" | tr '\n' ' ')"
