#!/usr/bin/env python3
"""libcgrt.so exports exactly the public API: every function declared in
include/cgrt/*.h and no other symbol (only cgrt_ names, no cgrt__ internals); its soname
carries CGRT_VERSION_MAJOR; the kernels' fatbin is embedded.

  exports_test.py LIBCGRT_SO PUBLIC_API_PY HEADER...
"""
import importlib.util
import os
import re
import subprocess
import sys


def main():
    lib, api_py, headers = sys.argv[1], sys.argv[2], sys.argv[3:]
    spec = importlib.util.spec_from_file_location("public_api", api_py)
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)
    declared = set(api.declarations(headers))
    failures = []
    if len(declared) < 50:
        failures.append(f"only {len(declared)} functions parsed from {len(headers)} headers")

    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    exported = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        kind, name = parts[1], parts[2].split("@")[0]
        if kind == "A" and name == "CGRT_1":  # the version node of libcgrt.lds
            continue
        exported[name] = kind
    bad = sorted(n for n in exported if not re.match(r"cgrt_[a-z0-9]", n))
    if bad:
        failures.append(f"{len(bad)} exported symbols outside the public API: {bad[:10]}")
    not_fn = sorted(n for n, k in exported.items() if k != "T")
    if not_fn:
        failures.append(f"exported symbols that are not functions: {not_fn}")
    missing = sorted(declared - set(exported))
    if missing:
        failures.append(f"declared in include/cgrt but not exported: {missing}")
    undeclared = sorted(set(exported) - declared)
    if undeclared:
        failures.append(f"exported but declared in no public header: {undeclared}")

    version_h = next(h for h in headers if os.path.basename(h) == "cgrt_version.h")
    major = re.search(r"#define CGRT_VERSION_MAJOR (\d+)", open(version_h).read()).group(1)
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    if not soname or soname.group(1) != f"libcgrt.so.{major}":
        failures.append(f"soname {soname.group(1) if soname else None}, expected libcgrt.so.{major}")

    syms = subprocess.run(["nm", lib], check=True, capture_output=True, text=True).stdout
    if not re.search(r"\s[rRdD] cgrt__kernels_fatbin$", syms, flags=re.M):
        failures.append("the kernels' fatbin table (cgrt__kernels_fatbin) is not in the library")

    print(f"{len(declared)} declared, {len(exported)} exported, soname libcgrt.so.{major}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
