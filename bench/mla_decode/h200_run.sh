#!/bin/bash
# The one H200 call of the third tuning pass (run from the repo root on the GPU machine,
# binaries from `bazel --output_base=/tmp/bazel_mla3 build --config=gpu //tests/mla:mla_test
# //bench/mla_decode:mla_decode_bench` copied to .gpu_mla/). Benchmark first on the idle
# GPU (sequential + interleaved A/B), then mla_test under every variant that may become
# the default (in parallel: correctness only), and compute-sanitizer memcheck on the
# likeliest defaults. Everything lands in $OUT.
set -u
B=.gpu_mla
O=${OUT:-/tmp/mla_out}
mkdir -p "$O"
export CGRT_DRIVER=cuda
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$O/gpu.txt" 2>&1
timeout 90 $B/mla_decode_bench --ab --out "$O/mla_decode_h200.json" > "$O/bench.log" 2>&1
echo "bench rc=$?" >> "$O/bench.log"
left=$(( 188 - ($(date +%s) - T0) ))
[ $left -lt 20 ] && left=20
echo "tests: ${left}s left"
i=0
for v in "" "CGRT_MLA_COMB=wide" "CGRT_MLA_SPLIT=auto" "CGRT_MLA_SPLIT=auto CGRT_MLA_COMB=wide" \
         "CGRT_MLA_SPLIT=auto CGRT_MLA_COMB=wide CGRT_MLA_ALT_MAX=0" "CGRT_MLA_SPLIT=s3" \
         "CGRT_MLA_SPLIT=s3 CGRT_MLA_COMB=wide" "CGRT_MLA_SPLIT=ts32 CGRT_MLA_COMB=wide" \
         "CGRT_MLA_SPLIT=auto CGRT_MLA_COMB=wide CGRT_MLA_MIN_TILES=1" \
         "CGRT_MLA_SPLIT=auto CGRT_MLA_COMB=wide CGRT_MLA_MIN_TILES=2" \
         "CGRT_MLA_SPLIT=s3 CGRT_MLA_COMB=wide CGRT_MLA_MIN_TILES=2" \
         "CGRT_MLA_SPLIT=auto CGRT_MLA_COMB=wide CGRT_MLA_PARTS=528" \
         "CGRT_MLA_COMB=wide CGRT_MLA_MIN_TILES=1" "CGRT_MLA_COMB=wide CGRT_MLA_MIN_TILES=2"; do
  ( env $v timeout $left $B/mla_test > "$O/test_$i.log" 2>&1; echo "rc=$? env=[$v]" >> "$O/test_$i.log" ) &
  i=$((i + 1))
done
( env CGRT_MLA_SPLIT=auto CGRT_MLA_COMB=wide timeout $left compute-sanitizer --tool memcheck \
    --report-api-errors no $B/mla_test > "$O/memcheck_auto_wide.log" 2>&1; echo "rc=$?" >> "$O/memcheck_auto_wide.log" ) &
( env CGRT_MLA_SPLIT=s3 CGRT_MLA_COMB=wide CGRT_MLA_MIN_TILES=2 timeout $left compute-sanitizer --tool memcheck \
    --report-api-errors no $B/mla_test > "$O/memcheck_s3_wide_mt2.log" 2>&1; echo "rc=$?" >> "$O/memcheck_s3_wide_mt2.log" ) &
wait
echo "== total $(( $(date +%s) - T0 ))s"
cat "$O/gpu.txt"
grep -h "^A/B\|^d2d\|bench rc" "$O/bench.log"
for f in "$O"/test_*.log; do echo "$(basename $f): $(grep -c '^\[       OK' $f) ok, $(grep -c '^\[  FAILED' $f) failed, $(tail -1 $f)"; done
for f in "$O"/memcheck_*.log; do echo "$(basename $f): $(grep -h 'ERROR SUMMARY' $f) $(tail -1 $f)"; done
