#!/bin/bash
# DCP on a machine with 2 H200s linked by NVLink, in one call from the repo root: the DCP
# tests with the real NCCL (2 ranks, one GPU each), compute-sanitizer memcheck of the
# step (both ranks: they are threads of one process), the benchmark (1 GPU vs 2 GPUs)
# and its plots (bench/dcp_decode/plot.py, needs matplotlib). Binaries of
#   bazel build --config=gpu //tests/dcp:all //bench/dcp_decode:dcp_decode_bench
# copied to $B (default .gpu_dcp). Logs and the JSON land in $OUT (default /tmp/dcp_h200x2);
# a summary goes to stdout. Each part has its own limit (tests 60 s each, memcheck 150 s,
# benchmark 240 s) so that the whole call fits one 10-minute command even if a part hangs. NCCL: $B/libnccl.so.2 when carried with the binaries, else the
# NVIDIA NCCL pip package of python3 (either added to LD_LIBRARY_PATH here), else
# libnccl.so.2 on the loader's path or in the usual places; $NCCL_LIB (a path) is passed
# to the benchmark's --nccl.
set -u
# NVLink multicast (NVLS) must stay off on these shared machines: every process started
# here inherits it.
export NCCL_NVLS_ENABLE=0
export CGRT_DRIVER=cuda
B=${B:-.gpu_dcp}
O=${OUT:-/tmp/dcp_h200x2}
mkdir -p "$O"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$O/gpus.csv" 2>&1
nvidia-smi topo -m > "$O/topo.txt" 2>&1
echo "gpus: $(tail -n +2 "$O/gpus.csv" | tr '\n' ';')"
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
[ -f "$B/libnccl.so.2" ] && NCCL_DIR="$(cd "$B" && pwd)"  # a copy carried with the binaries wins
[ -n "$NCCL_DIR" ] && export LD_LIBRARY_PATH="$NCCL_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NCCL_ARG=()
[ -n "${NCCL_LIB:-}" ] && NCCL_ARG=(--nccl "$NCCL_LIB")
echo "nccl: pip lib dir '${NCCL_DIR:-none}', NCCL_LIB '${NCCL_LIB:-unset}'"
for t in nccl_test nccl_abi_test dcp_kernels_test dcp_test dcp_graphs_test dcp_fault_test; do
  timeout 60 "$B/$t" > "$O/$t.log" 2>&1
  echo "$t rc=$? $(grep -h '^\[  PASSED\|^\[  FAILED\|^\[  SKIPPED' "$O/$t.log" | tr '\n' ' ')"
done
timeout 150 compute-sanitizer --tool memcheck --report-api-errors no "$B/dcp_test" \
  --gtest_filter='Dcp.MatchesSingleRank*:Dcp.ReduceScatter*' > "$O/memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -h 'ERROR SUMMARY' "$O/memcheck.log") $(grep -h '^\[  PASSED\|^\[  FAILED' "$O/memcheck.log" | tr '\n' ' ')"
timeout 240 "$B/dcp_decode_bench" --world 2 "${NCCL_ARG[@]}" --out "$O/dcp_decode_h200x2.json" \
  > "$O/bench.json.stdout" 2> "$O/bench.log"
echo "bench rc=$?"
cat "$O/bench.log"
python3 bench/dcp_decode/plot.py "$O/dcp_decode_h200x2.json"
