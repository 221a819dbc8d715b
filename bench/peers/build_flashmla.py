"""Builds FlashMLA's sm90 dense-decode extension (bf16) with torch.utils.cpp_extension.

Usage (on the GPU machine, called by build_flashmla.sh):
    python3 build_flashmla.py --src SRC --cutlass CUTLASS_DIR --build BUILD_DIR --out OUTDIR

SRC is the git-archived FlashMLA subset (.peers/flashmla-src), CUTLASS_DIR the unpacked
CUTLASS headers (include/, tools/util/include/). Compiles bench/peers/flashmla_dense_api.cpp
(the binding of dense decode only) with FlashMLA's scheduler, combine and sm90 bf16
dense-decode kernels, for sm_90a, with FlashMLA's own nvcc flags (setup.py of the pinned
commit) minus the fp16 instantiation. Writes OUTDIR/flashmla_dense_sm90.so,
OUTDIR/flash_mla_interface.py (FlashMLA's Python interface, for reference) and
OUTDIR/BUILD_INFO.json (commit, torch, python, nvcc, wall time).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

NAME = "flashmla_dense_sm90"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--cutlass", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    src, cut, build, out = (Path(p).resolve() for p in (a.src, a.cutlass, a.build, a.out))
    here = Path(__file__).resolve().parent
    build.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    os.environ.setdefault("MAX_JOBS", "16")

    import torch
    from torch.utils import cpp_extension

    common = ["-O3", "-std=c++20", "-DNDEBUG", "-Wno-deprecated-declarations", "-DFLASH_MLA_DISABLE_FP16"]
    nvcc = common + [
        "-D_USE_MATH_DEFINES",
        "-U__CUDA_NO_HALF_OPERATORS__",
        "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_HALF2_OPERATORS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "--expt-relaxed-constexpr",
        "--expt-extended-lambda",
        "--use_fast_math",
        "--ptxas-options=--register-usage-level=10",
        "-lineinfo",
    ]
    sources = [
        here / "flashmla_dense_api.cpp",
        src / "csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu",
        src / "csrc/smxx/decode/combine/combine.cu",
        src / "csrc/sm90/decode/dense/instantiations/bf16.cu",
    ]
    includes = [
        src / "csrc",
        src / "csrc/api",
        src / "csrc/kerutils/include",
        src / "csrc/sm90",
        cut / "include",
        cut / "tools/util/include",
    ]
    cccl = Path(cpp_extension.CUDA_HOME or "/usr/local/cuda") / "include" / "cccl"
    if cccl.is_dir():  # CUDA 13 keeps cuda/std here; g++ (the .cpp) needs it too
        includes.append(cccl)
    t0 = time.time()
    cpp_extension.load(
        name=NAME,
        sources=[str(s) for s in sources],
        extra_include_paths=[str(i) for i in includes],
        extra_cflags=common,
        extra_cuda_cflags=nvcc,
        build_directory=str(build),
        verbose=True,
        with_cuda=True,
        is_python_module=True,
    )
    wall = time.time() - t0
    so = build / f"{NAME}.so"
    shutil.copy2(so, out / so.name)
    shutil.copy2(src / "flash_mla/flash_mla_interface.py", out / "flash_mla_interface.py")
    try:
        nv = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    except Exception as e:  # noqa: BLE001
        nv = f"unknown ({e})"
    info = {
        "module": NAME,
        "flashmla_commit": (src / "FLASHMLA_COMMIT").read_text().strip(),
        "cutlass_commit": (src / "CUTLASS_COMMIT").read_text().strip(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "nvcc": nv,
        "arch": os.environ["TORCH_CUDA_ARCH_LIST"],
        "build_seconds": round(wall, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (out / "BUILD_INFO.json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
