#!/bin/bash
# MLA 16-head diagnostics in one H200 call (run from the repo root on the GPU machine;
# binaries of `bazel build --config=gpu //bench/mla_decode:mla_decode_bench //tests/mla:all`
# in the folder $B, default .gpu_final):
#  1. interleaved A/B of the option variants at the short shapes, per call inside a
#     graph (--ab, --layers 8);
#  2. ncu of the split kernels at (1,16,8192) and (32,16,8192) (--clock-control none,
#     caches kept): raw metrics (stall reasons) and per-SASS-instruction samples exported
#     as CSV;
#  3. the MLA test binaries, and racecheck on the 16-head tests.
# Logs land in $OUT (default /tmp/mla_diag) and a short summary goes to stdout.
set -u
B=${B:-.gpu_final}
O=${OUT:-/tmp/mla_diag}
mkdir -p "$O"
export CGRT_DRIVER=cuda
timeout 200 "$B/mla_decode_bench" --ab --shape 1,16,8192 --shape 32,16,8192 --shape 64,16,8192 \
  --out "$O/ab.json" > "$O/ab.log" 2>&1
grep -E "^A/B" "$O/ab.log"
for shape in 1,16,8192 32,16,8192; do
  tag="b${shape%%,*}"
  timeout 90 ncu --clock-control none --cache-control none -k regex:cgrt_mla_split \
    --launch-skip 40 --launch-count 1 --section SpeedOfLight --section LaunchStats \
    --section WarpStateStats --section SourceCounters -f -o "$O/$tag" \
    "$B/mla_decode_bench" --shape "$shape" --reps 10 --layers 0 --out "$O/ncu_$tag.json" > "$O/ncu_$tag.log" 2>&1
  ncu -i "$O/$tag.ncu-rep" --page raw --csv > "$O/raw_$tag.csv" 2>&1
  ncu -i "$O/$tag.ncu-rep" --page source --csv --print-source sass > "$O/src_$tag.csv" 2>&1
  ncu -i "$O/$tag.ncu-rep" > "$O/details_$tag.txt" 2>&1
  echo "ncu $tag: $(grep -E 'Duration|SM Active Cycles|Warp Cycles Per Issued' "$O/details_$tag.txt" | tr -s ' ' | tr '\n' ';')"
done
for t in mla_test mla_t64_test mla_wgmma_test mla_kernel_table_test; do
  timeout 200 "$B/$t" > "$O/$t.log" 2>&1
  echo "$t rc=$? $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/$t.log" | tr '\n' ' ')"
done
timeout 200 compute-sanitizer --tool racecheck "$B/mla_test" \
  --gtest_filter=Mla.HeadCountsBothStrategies:Mla.PaddingRows:Mla.NonCausalBlockRows:Mla.PageSizes \
  > "$O/racecheck.log" 2>&1
echo "racecheck: $(grep -h 'RACECHECK SUMMARY' "$O/racecheck.log") $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/racecheck.log" | tr '\n' ' ')"
