#!/bin/bash
# One H200 call of the fourth tuning pass (run from the repo root on the GPU machine,
# binaries from `bazel --output_base=/tmp/bazel_b1 build --config=gpu //tests/mla:mla_test
# //bench/mla_decode:mla_decode_bench` copied to .gpu_b1/). Benchmark first on the idle GPU
# (sequential + interleaved A/B), then mla_test under the variants that may become the
# default (in parallel: correctness only), and compute-sanitizer memcheck. Everything
# lands in $OUT; the whole call stays under LIMIT seconds (default 110).
set -u
B=${B:-.gpu_b1}
O=${OUT:-/tmp/mla_out}
LIMIT=${LIMIT:-110}
MC=${MC:-"CGRT_MLA_ALIGN=1;CGRT_MLA_FINISH=1000000"}  # memcheck runs, ';'-separated: env assignments, then mla_test arguments
mkdir -p "$O"
export CGRT_DRIVER=cuda
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$O/gpu.txt" 2>&1
timeout ${BENCH_S:-60} $B/mla_decode_bench --ab --out "$O/mla_decode_h200.json" > "$O/bench.log" 2>&1
echo "bench rc=$?" >> "$O/bench.log"
left=$(( LIMIT - ($(date +%s) - T0) ))
[ $left -lt 15 ] && left=15
echo "tests: ${left}s left"
i=0
F=CGRT_MLA_FINISH=1000000
for v in "" "$F" "$F CGRT_MLA_ALIGN=0" "$F CGRT_MLA_MIN_TILES=1" "$F CGRT_MLA_FUSE=0" "$F CGRT_MLA_ALT_MAX=0" \
         "CGRT_MLA_ALIGN=0" "CGRT_MLA_FINISH=4"; do
  ( env $v timeout $left $B/mla_test > "$O/test_$i.log" 2>&1; echo "rc=$? env=[$v]" >> "$O/test_$i.log" ) &
  i=$((i + 1))
done
IFS=';' read -ra mcs <<< "$MC"
j=0
for v in "${mcs[@]}"; do
  envs=$(echo "$v" | tr ' ' '\n' | grep '=' | grep -v '^--' | tr '\n' ' ')
  args=$(echo "$v" | tr ' ' '\n' | grep '^--' | tr '\n' ' ')
  ( env $envs timeout $left compute-sanitizer --tool memcheck --report-api-errors no $B/mla_test $args \
      > "$O/memcheck_$j.log" 2>&1; echo "rc=$? env=[$v]" >> "$O/memcheck_$j.log" ) &
  j=$((j + 1))
done
wait
echo "== total $(( $(date +%s) - T0 ))s"
cat "$O/gpu.txt"
grep -h "^A/B\|^d2d\|bench rc" "$O/bench.log"
for f in "$O"/test_*.log; do echo "$(basename $f): $(grep -c '^\[       OK' $f) ok, $(grep -c '^\[  FAILED' $f) failed, $(tail -1 $f)"; grep -h "Failure\|error" $f | head -3; done
for f in "$O"/memcheck_*.log; do echo "$(basename $f): $(grep -c '^\[       OK' $f) ok $(grep -h 'ERROR SUMMARY' $f) $(tail -1 $f)"; done
tar czf "$O/logs.tgz" -C "$O" $(cd "$O" && ls *.log gpu.txt) 2>/dev/null
