#!/bin/bash
# One-row (batch 1) kernels in one H200 call (run from the repo root on the GPU machine;
# binaries of `bazel build --config=gpu //bench/mla_decode:mla_decode_bench
# //tests/mla:mla_test` in the folder $B, default .gpu_final):
#  1. interleaved A/B per call inside a graph (--ab, --layers 8) at (1,16,8192),
#     (1,32,8192) and (4,16,8192): the one-row kernel, its two-warp-group form (pair) and
#     the cluster merge (cl2/cl4/cl8), each with and without programmatic launch;
#  2. mla_test's one-row tests (Mla.ClusterMerge runs every cluster size and both
#     one-row kernels), then compute-sanitizer memcheck and racecheck on them.
# Logs land in $OUT (default /tmp/mla_onerow); a short summary goes to stdout.
set -u
B=${B:-.gpu_final}
O=${OUT:-/tmp/mla_onerow}
mkdir -p "$O"
export CGRT_DRIVER=cuda
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 200 "$B/mla_decode_bench" --ab --shape 1,16,8192 --shape 1,32,8192 --shape 4,16,8192 \
  --out "$O/ab.json" > "$O/ab.log" 2>&1
echo "bench rc=$?"
grep -E "^A/B|copy|d2d" "$O/ab.log" | head -40
timeout 150 "$B/mla_test" --gtest_filter=Mla.ClusterMerge:Mla.SingleRowSteps:Mla.ProgrammaticLaunch \
  > "$O/mla_test.log" 2>&1
echo "mla_test rc=$? $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/mla_test.log" | tr '\n' ' ')"
grep -h "Failure\|error" "$O/mla_test.log" | head -5
( timeout 240 compute-sanitizer --tool memcheck "$B/mla_test" --gtest_filter=Mla.ClusterMerge \
  > "$O/memcheck.log" 2>&1; echo "rc=$?" >> "$O/memcheck.log" ) &
( timeout 240 compute-sanitizer --tool racecheck "$B/mla_test" --gtest_filter=Mla.ClusterMerge \
  > "$O/racecheck.log" 2>&1; echo "rc=$?" >> "$O/racecheck.log" ) &
wait
echo "memcheck: $(grep -h 'ERROR SUMMARY' "$O/memcheck.log") $(tail -1 "$O/memcheck.log") $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/memcheck.log" | tr '\n' ' ')"
echo "racecheck: $(grep -h 'RACECHECK SUMMARY' "$O/racecheck.log") $(tail -1 "$O/racecheck.log") $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/racecheck.log" | tr '\n' ' ')"
