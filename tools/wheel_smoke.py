"""Smoke test of an installed cgrt wheel, run from outside the checkout (standard library
only): the package and its bundled libcgrt.so.1 load from the environment's site-packages,
a runtime starts on whatever driver this machine has (the GPU, or the CPU emulation), and
one MLA decode step on cgrt device arrays equals a pure-Python reference.

    python -m venv /tmp/v && /tmp/v/bin/pip install --no-index cgrt-*.whl
    cd /tmp && /tmp/v/bin/python /path/to/wheel_smoke.py [--expect-driver cuda|emulated]

Prints one line per check and ends with `wheel_smoke: OK (<driver>)`; exit status 1 on a
failed check."""
import argparse
import math
import os
import random
import struct
import sys
import sysconfig

HEADS, PAGE, LEN, D, DV = 16, 64, 50, 576, 512


def bf16_bits(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bits_f32(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-driver", choices=("cuda", "emulated"))
    args = ap.parse_args()
    check("CGRT_LIBRARY" not in os.environ, "CGRT_LIBRARY is not set")
    import cgrt
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    pkg = os.path.realpath(os.path.dirname(cgrt.__file__))
    check(pkg.startswith(site + os.sep), f"cgrt imported from site-packages ({pkg})")
    rt = cgrt.Runtime()
    check(os.path.realpath(cgrt.lib.path) == os.path.join(pkg, "libcgrt.so.1"),
          f"the bundled library is loaded ({cgrt.lib.path})")
    driver = "emulated" if rt.emulated else "cuda"
    if args.expect_driver:
        check(driver == args.expect_driver, f"driver is {driver}")
    rng = random.Random(7)
    q = [bf16_bits(rng.gauss(0, 1)) for _ in range(HEADS * D)]
    kv = [bf16_bits(rng.gauss(0, 1)) for _ in range(PAGE * D)]
    with rt:
        plan = rt.mla_plan(max_num_seqs=1, heads=HEADS, max_model_len=PAGE, page_size=PAGE)
        rt.workspace_lock()  # sized once, locked: the decode below must not grow it
        arrays = {}
        for name, shape, dtype in (("q", (1, HEADS, D), "bfloat16"), ("kv", (1, PAGE, D), "bfloat16"),
                                   ("bt", (1, 1), "int32"), ("sl", (1,), "int32"),
                                   ("out", (1, HEADS, DV), "bfloat16"), ("lse", (1, HEADS), "float32")):
            arrays[name] = cgrt.DeviceArray(rt, shape, dtype)
        a = arrays
        a["q"].copy_from(struct.pack(f"<{len(q)}H", *q))
        a["kv"].copy_from(struct.pack(f"<{len(kv)}H", *kv))
        a["bt"].copy_from(struct.pack("<i", 0))
        a["sl"].copy_from(struct.pack("<i", LEN))
        scale = 1.0 / math.sqrt(D)
        cgrt.mla_decode(plan, a["q"], a["kv"], a["bt"], a["sl"], a["out"], a["lse"], scale)
        rt.synchronize()
        out = struct.unpack(f"<{HEADS * DV}H", a["out"].to_bytes())
        lse = struct.unpack(f"<{HEADS}f", a["lse"].to_bytes())
        worst = 0.0
        for h in range(HEADS):
            qh = [bits_f32(v) for v in q[h * D:(h + 1) * D]]
            s = [scale * sum(qh[i] * bits_f32(kv[t * D + i]) for i in range(D)) for t in range(LEN)]
            m = max(s)
            p = [math.exp(x - m) for x in s]
            z = sum(p)
            worst = max(worst, abs(lse[h] - (m + math.log(z))))
            for i in range(0, DV, 37):
                ref = sum(p[t] * bits_f32(kv[t * D + i]) for t in range(LEN)) / z
                worst = max(worst, abs(bits_f32(out[h * DV + i]) - ref) / (0.02 + abs(ref)))
        check(worst < 0.05, f"MLA decode equals the reference (worst scaled error {worst:.4f})")
        for x in arrays.values():
            x.close()
        plan.close()
    print(f"wheel_smoke: OK ({driver})", flush=True)


if __name__ == "__main__":
    main()
