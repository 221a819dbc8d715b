#!/usr/bin/env bash
# fetch_sources.sh PEERS_DIR [FLASHMLA_GIT [CUTLASS_GIT]]: makes the workstation half of
# PEERS_DIR (normally .peers in the repository root), the part the GPU run starts from:
#
#   PEERS_DIR/flashmla-src/   git archive of the FlashMLA subset that the sm90 dense decode
#                             needs, FLASHMLA_COMMIT, CUTLASS_COMMIT and
#                             cutlass-<short>-include.tar.xz (include/ + tools/util/include/)
#   PEERS_DIR/whl/            flashinfer_python-0.7.2-pruned.tar.xz (the wheel's files, unused
#                             CUDA sources dropped) and apache_tvm_ffi-0.1.15.post2-cp312-*.whl
#
# FLASHMLA_GIT and CUTLASS_GIT are git directories (bare is fine) that hold the pinned
# commits; they default to $FLASHMLA_GIT / $CUTLASS_GIT, then to the workplace mirrors
# /work/.mirror/deepseek-ai+FlashMLA/repo and /work/.mirror/NVIDIA+cutlass/repo. The CUTLASS
# commit is FlashMLA's submodule pin (git ls-tree FLASHMLA_COMMIT csrc/cutlass).
# The wheels come from PyPI through `pip download` (CPython 3.12, manylinux x86-64: the GPU
# machine's), or from $WHEEL_DIR if it already holds them. Needs git, python3 with pip,
# tar and xz. Then run bench/peers/gpu_prepare.sh on the GPU machine (README.md).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: $0 PEERS_DIR [FLASHMLA_GIT [CUTLASS_GIT]]" >&2
  exit 2
fi
FLASHMLA_COMMIT=${FLASHMLA_COMMIT:-9241ae3ef9bac614dd25e45e507e089f888280e0}
FLASHINFER_VERSION=0.7.2
TVM_FFI_VERSION=0.1.15.post2
mkdir -p "$1"
P=$(realpath "$1")
FM=${2:-${FLASHMLA_GIT:-/work/.mirror/deepseek-ai+FlashMLA/repo}}
CU=${3:-${CUTLASS_GIT:-/work/.mirror/NVIDIA+cutlass/repo}}
HERE=$(dirname "$(realpath "$0")")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# --- FlashMLA subset + CUTLASS headers
git -C "$FM" cat-file -e "$FLASHMLA_COMMIT^{commit}" ||
  { echo "FlashMLA commit $FLASHMLA_COMMIT not in $FM" >&2; exit 1; }
CUTLASS_COMMIT=$(git -C "$FM" ls-tree "$FLASHMLA_COMMIT" csrc/cutlass | awk '$2 == "commit" {print $3}')
[ -n "$CUTLASS_COMMIT" ] || { echo "no csrc/cutlass gitlink at $FLASHMLA_COMMIT" >&2; exit 1; }
git -C "$CU" cat-file -e "$CUTLASS_COMMIT^{commit}" ||
  { echo "CUTLASS commit $CUTLASS_COMMIT (FlashMLA's pin) not in $CU" >&2; exit 1; }
S=$P/flashmla-src
rm -rf "$S"
mkdir -p "$S"
git -C "$FM" archive --format=tar "$FLASHMLA_COMMIT" \
  LICENSE README.md setup.py flash_mla \
  csrc/api csrc/params.h csrc/defines.h csrc/utils.h csrc/kerutils \
  csrc/sm90/helpers.h csrc/sm90/decode/dense csrc/smxx | tar xf - -C "$S"
echo "$FLASHMLA_COMMIT" > "$S/FLASHMLA_COMMIT"
echo "$CUTLASS_COMMIT" > "$S/CUTLASS_COMMIT"
# (a mirror without its large blobs makes git archive print "invalid object" for files
# outside these paths and still exit 0; the file count below is what is checked)
CT=$S/cutlass-${CUTLASS_COMMIT:0:8}-include.tar.xz
git -C "$CU" archive --format=tar "$CUTLASS_COMMIT" include tools/util/include | xz -9 -T0 > "$CT"
want=$(git -C "$CU" ls-tree -r "$CUTLASS_COMMIT" include tools/util/include | wc -l)
got=$(xz -dc "$CT" | tar tf - | grep -vc '/$')
[ "$want" = "$got" ] || { echo "CUTLASS archive has $got files, the tree $want" >&2; exit 1; }
echo "flashmla-src: FlashMLA $FLASHMLA_COMMIT, CUTLASS $CUTLASS_COMMIT, $(du -sh "$S" | cut -f1)"

# --- FlashInfer wheel (pruned) + apache-tvm-ffi wheel
W=${WHEEL_DIR:-$TMP/dl}
mkdir -p "$W"
have() { ls "$W"/$1 >/dev/null 2>&1; }
if ! have "flashinfer_python-$FLASHINFER_VERSION-py3-none-any.whl" ||
   ! have "apache_tvm_ffi-$TVM_FFI_VERSION-cp312-*manylinux*x86_64*.whl"; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$W" "flashinfer-python==$FLASHINFER_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION"
fi
mkdir -p "$P/whl"
rm -f "$P"/whl/apache_tvm_ffi-*.whl "$P/whl/flashinfer_python-$FLASHINFER_VERSION-pruned.tar.xz"
cp "$W"/apache_tvm_ffi-"$TVM_FFI_VERSION"-cp312-*manylinux*x86_64*.whl "$P/whl/"
python3 - "$W/flashinfer_python-$FLASHINFER_VERSION-py3-none-any.whl" \
  "$P/whl/flashinfer_python-$FLASHINFER_VERSION-pruned.tar.xz" <<'EOF'
# Prunes the FlashInfer wheel into a tar.xz that mla_peers.py unpacks as a site folder:
# keeps every file except (a) under flashinfer/data/csrc/ all but the top-level headers,
# jinja templates and batch_mla*.cu (the fa3 MLA module's sources), and (b) the cuDNN-frost
# MoE kernel-selection artifacts (JSON, 17 MB). Python files, headers, the vendored CUTLASS,
# CCCL and spdlog and the dist-info stay.
import io, sys, tarfile, zipfile
whl, out = sys.argv[1], sys.argv[2]
CSRC = "flashinfer/data/csrc/"

def keep(n: str) -> bool:
    if n.startswith(CSRC):
        rest = n[len(CSRC):]
        if "/" in rest:
            return False
        return rest.endswith((".h", ".cuh", ".hpp", ".jinja")) or (rest.startswith("batch_mla") and rest.endswith(".cu"))
    return not n.startswith("flashinfer/fused_moe/backends/cudnn_frost/artifacts/")

kept = dropped = size = 0
with zipfile.ZipFile(whl) as z, tarfile.open(out, "w:xz", preset=6) as t:
    for i in sorted(z.infolist(), key=lambda i: i.filename):
        if i.is_dir():
            continue
        if not keep(i.filename):
            dropped += i.file_size
            continue
        data = z.read(i)
        ti = tarfile.TarInfo(i.filename)
        ti.size = len(data)
        ti.mode = 0o644
        ti.mtime = 0
        t.addfile(ti, io.BytesIO(data))
        kept += 1
        size += len(data)
print(f"pruned wheel: {kept} files, {size / 2**20:.1f} MiB kept, {dropped / 2**20:.1f} MiB dropped")
EOF
ls -la "$P/whl"
echo "$P: $(du -sh --exclude=flashmla --exclude=flashinfer-aot "$P" | cut -f1) (sources)"
echo "next: on the GPU machine, bash bench/peers/gpu_prepare.sh $1 \$OUT 175 (README.md)"
