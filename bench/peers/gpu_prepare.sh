#!/usr/bin/env bash
# gpu_prepare.sh PEERS_DIR OUTDIR [SECONDS]: the one GPU-machine run that makes the peers
# loadable without building: builds FlashMLA's sm90 dense-decode extension and JIT-builds
# FlashInfer's fa3 MLA module side by side, puts them into PEERS_DIR (flashmla/,
# flashinfer-aot/, tvm-ffi-cache/), packs them into OUTDIR/*.tar.gz (to be unpacked into
# PEERS_DIR on the workstation), then runs mla_peers.py check and a short
# bench/mla_decode/peers.py timing, each cut off at the deadline SECONDS (default 170)
# after the start. Logs: OUTDIR/build.log, OUTDIR/check.json, OUTDIR/peers_timing.json.
set -uo pipefail
P=$(realpath "$1")
mkdir -p "$2"
O=$(realpath "$2")
LIMIT=${3:-170}
HERE=$(dirname "$(realpath "$0")")
T0=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
export PYTHONUNBUFFERED=1 MAX_JOBS=16
export FLASHINFER_WORKSPACE_BASE=/tmp/peers-flashinfer-ws TVM_FFI_CACHE_DIR=/tmp/peers-tvm-ffi-cache
B=/tmp/peers-built
rm -rf "$B"
mkdir -p "$B"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__, torch.version.cuda)'
nvcc --version | tail -1
bash "$HERE/build_flashmla.sh" "$P/flashmla-src" "$B/flashmla" > "$O/build_flashmla.log" 2>&1 &
FM=$!
python3 "$HERE/mla_peers.py" build-flashinfer --peers-dir "$P" --out "$B/flashinfer-aot" > "$O/build_flashinfer.log" 2>&1
FIRC=$?
echo "flashinfer JIT rc $FIRC at $(( $(date +%s) - T0 )) s"
wait $FM
FMRC=$?
echo "flashmla build rc $FMRC at $(( $(date +%s) - T0 )) s"
tail -3 "$O/build_flashmla.log"
tail -3 "$O/build_flashinfer.log"
ls -laR "$B" | grep -E '\.so|json' || true
cp -r "$B"/. "$P"/
for d in flashmla flashinfer-aot tvm-ffi-cache; do
  if [ -d "$B/$d" ]; then
    tar czf "$O/$d.tar.gz" -C "$B" "$d"
    sz=$(stat -c %s "$O/$d.tar.gz")
    echo "$d.tar.gz $sz bytes"
    if [ "$sz" -gt 16000000 ]; then split -b 15000000 -d "$O/$d.tar.gz" "$O/$d.tar.gz.part"; rm "$O/$d.tar.gz"; fi
  fi
done
echo "=== check ($(left) s left)"
timeout $(( $(left) - 50 > 20 ? $(left) - 50 : 20 )) python3 "$HERE/mla_peers.py" check --peers-dir "$P" --json "$O/check.json"
echo "=== timing ($(left) s left)"
R=$(dirname "$HERE")
timeout $(( $(left) > 10 ? $(left) : 10 )) python3 "$R/mla_decode/peers.py" --peers-dir "$P" --reps 30 \
  --shape 1,16,8192 --shape 64,16,8192 --shape 32,128,8192 --shape 32,16,8192,4,1 --shape 128,16,32768 \
  --out "$O/peers_timing.json"
echo "done at $(( $(date +%s) - T0 )) s"
