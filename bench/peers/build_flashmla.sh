#!/usr/bin/env bash
# build_flashmla.sh SRC OUTDIR: builds FlashMLA's sm90 dense-decode extension (bf16) on the
# GPU machine (python3 with torch, nvcc, ninja) and copies flashmla_dense_sm90.so,
# flash_mla_interface.py and BUILD_INFO.json into OUTDIR.
# SRC: the git-archived FlashMLA subset (.peers/flashmla-src) holding the CUTLASS headers
# as cutlass-*-include.tar.xz. MAX_JOBS defaults to 16 (ninja jobs).
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 SRC OUTDIR" >&2; exit 2; fi
SRC=$(realpath "$1")
mkdir -p "$2"
OUTDIR=$(realpath "$2")
HERE=$(dirname "$(realpath "$0")")
WORK=${FLASHMLA_BUILD_DIR:-${TMPDIR:-/tmp}/flashmla-build}
mkdir -p "$WORK/cutlass"
tarball=$(ls "$SRC"/cutlass-*-include.tar.xz | head -1)
tar xJf "$tarball" -C "$WORK/cutlass"
export MAX_JOBS=${MAX_JOBS:-16}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
python3 "$HERE/build_flashmla.py" --src "$SRC" --cutlass "$WORK/cutlass" --build "$WORK/build" --out "$OUTDIR"
ls -la "$OUTDIR"
