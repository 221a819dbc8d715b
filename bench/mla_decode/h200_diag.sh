#!/bin/bash
# The sixth pass's diagnostics in one H200 call (run from the repo root on the GPU
# machine; binaries of `bazel build --config=gpu //bench/mla_decode:mla_decode_bench
# //tests/mla:mla_test` in the folder $B, default .gpu_final):
#  1. the per-CTA timeline of the 16-head split kernel (--prof) at batch 1 and 32;
#  2. interleaved A/B of the short shapes, per call inside a graph (--ab, --layers 8);
#  3. ncu at batch 1 (split and combine kernels; --clock-control none, caches kept),
#     with warp-state and source counters;
#  4. racecheck on the 16-head tests (after a kernel change).
# Logs land in $OUT (default /tmp/mla_diag) and a short summary goes to stdout.
set -u
B=${B:-.gpu_final}
O=${OUT:-/tmp/mla_diag}
mkdir -p "$O"
export CGRT_DRIVER=cuda
timeout 100 "$B/mla_decode_bench" --prof --reps 20 --shape 1,16,8192 --shape 32,16,8192 \
  --out "$O/prof.json" > "$O/prof.log" 2>&1
grep -E "^(prof|  [a-z])" "$O/prof.log"
timeout 150 "$B/mla_decode_bench" --ab --shape 1,16,8192 --shape 4,16,8192 --shape 32,16,8192 \
  --out "$O/ab.json" > "$O/ab.log" 2>&1
grep -E "^A/B" "$O/ab.log" | grep -E " (default|noop|nocomb|counters|pdl|mt2) "
timeout 150 ncu --clock-control none --cache-control none -k regex:cgrt_mla --launch-skip 60 --launch-count 2 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SourceCounters \
  "$B/mla_decode_bench" --shape 1,16,8192 --reps 20 --out "$O/ncu_bench.json" > "$O/ncu.log" 2>&1
grep -E "^  cgrt_mla|Duration|SM Active Cycles|Elapsed Cycles|Warp Cycles Per Issued" "$O/ncu.log"
timeout 200 compute-sanitizer --tool racecheck "$B/mla_test" \
  --gtest_filter=Mla.HeadCountsBothStrategies:Mla.PaddingRows:Mla.NonCausalBlockRows:Mla.PageSizes \
  > "$O/racecheck.log" 2>&1
echo "racecheck: $(grep -h 'RACECHECK SUMMARY' "$O/racecheck.log") $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/racecheck.log" | tr '\n' ' ')"
