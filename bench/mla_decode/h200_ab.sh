#!/bin/bash
# An interleaved A/B of two builds of the MLA kernels, with the B build's checks, in one
# GPU call (run from the repository root on the GPU machine; the GPU machine has no Bazel).
#
#   bash bench/mla_decode/h200_ab.sh ADIR BDIR [--shape B,H,CTX[,K[,CAUSAL]]]...
#
# ADIR, BDIR: one folder per build, staged on the CPU machine from a checkout of its commit:
#   bazel build --config=gpu //bench/mla_decode:mla_decode_bench //tests/mla:all
#   mkdir -p DIR && cp bazel-bin/bench/mla_decode/mla_decode_bench \
#     bazel-bin/tests/mla/{mla_t64_test,mla_digest_test} DIR && git rev-parse --short HEAD > DIR/COMMIT
# (an experimental build adds its --define=... to the bazel
# line), then `run` with DIR in carry. Without --shape, the 16-head shapes whose CTAs cross row
# bounds (8 x 1K, 32 / 64 / 128 x 8K, 128 x 32K).
#
# What it does, each part under its own timeout so that a hang cannot eat the call:
#  1. mla_decode_bench of A, B, B, A (per call in a graph of 8, --reps $REPS, default 20),
#     each JSON stamped with its build's commit (CGRT_BENCH_COMMIT);
#  2. bench/mla_decode/ab_summary.py: $OUT/ab.json (per row the four times, the medians per
#     side, B / A) and one line per row on stdout;
#  3. B's mla_t64_test, then mla_digest_test of both builds: whether the outputs' bits are
#     equal (a difference is printed, not judged: a change of the merge order may be meant);
#  4. with STAMPS_DIR (a build with --define=cgrt_mla_stamps=1, see kernels/mla/stamps.cuh):
#     its per-CTA phase stamps at the same shapes and stamps_summary.py.
# Everything else lands packed in $OUT/logs.tgz (the device tool returns only a few files).
# $OUT defaults to /tmp/mla_ab. NOTE is written into ab.json.
set -u
A=${1:?usage: h200_ab.sh ADIR BDIR [--shape ...]}
B=${2:?usage: h200_ab.sh ADIR BDIR [--shape ...]}
shift 2
SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(--shape 8,16,1024 --shape 32,16,8192 --shape 64,16,8192 --shape 128,16,8192
                                   --shape 128,16,32768)
O=${OUT:-/tmp/mla_ab}
L=$O/logs
mkdir -p "$L"
export CGRT_DRIVER=cuda
T0=$SECONDS
for d in "$A" "$B"; do
  [ -x "$d/mla_decode_bench" ] && [ -f "$d/COMMIT" ] || { echo "$d: no mla_decode_bench or COMMIT (see the header)"; exit 2; }
done
CA=$(cat "$A/COMMIT") CB=$(cat "$B/COMMIT")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for s in a1:"$A":$CA b1:"$B":$CB b2:"$B":$CB a2:"$A":$CA; do
  IFS=: read -r n d c <<< "$s"
  CGRT_BENCH_COMMIT=$c timeout 90 "$d/mla_decode_bench" --layers 8 --reps "${REPS:-20}" "${SHAPES[@]}" \
    --out "$L/ab_$n.json" > "$L/ab_$n.log" 2>&1
  echo "$n ($c) exit $? at $((SECONDS - T0)) s"
done
python3 bench/mla_decode/ab_summary.py --out "$O/ab.json" --note "${NOTE:-a $CA, b $CB, a b b a}" \
  "$L/ab_a1.json" "$L/ab_a2.json" -- "$L/ab_b1.json" "$L/ab_b2.json" > "$L/ab_summary.txt" 2>&1
echo "ab_summary exit $?"
grep -v -E " (workspace|counters) " "$L/ab_summary.txt"
if [ -x "$B/mla_t64_test" ]; then
  timeout 90 "$B/mla_t64_test" > "$L/mla_t64_test.log" 2>&1
  echo "b mla_t64_test exit $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$L/mla_t64_test.log" | tr '\n' ' ')"
fi
if [ -x "$A/mla_digest_test" ] && [ -x "$B/mla_digest_test" ]; then
  for n in a b; do
    d=$A
    [ $n = b ] && d=$B
    timeout 60 "$d/mla_digest_test" > "$L/digest_$n.log" 2>&1
    echo "$n mla_digest_test exit $?"
  done
  if diff <(grep '^digest' "$L/digest_a.log") <(grep '^digest' "$L/digest_b.log") > "$L/digest_diff.txt"; then
    echo "digests equal: $(grep -c '^digest' "$L/digest_a.log")"
  else
    echo "digests differ: $(grep -c '^<' "$L/digest_diff.txt") of $(grep -c '^digest' "$L/digest_a.log")"
  fi
fi
if [ -n "${STAMPS_DIR:-}" ]; then
  CGRT_BENCH_COMMIT=$(cat "$STAMPS_DIR/COMMIT" 2>/dev/null || echo unknown) timeout 90 \
    "$STAMPS_DIR/mla_decode_bench" --layers 8 "${SHAPES[@]}" --stamps "$O/stamps.json" \
    --out "$L/stamps_bench.json" > "$L/stamps.log" 2>&1
  echo "stamps exit $?"
  python3 bench/mla_decode/stamps_summary.py "$O/stamps.json" --json "$O/stamps_summary.json"
fi
echo "end at $((SECONDS - T0)) s"
tar -C "$O" -czf "$O/logs.tgz" logs && rm -r "$L"
