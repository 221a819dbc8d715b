"""Binding round trips: every public C function typed, struct layouts equal the C
compiler's, statuses, defaults, versions, library search order."""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import cgrt
from cgrt import _lib
from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "tools"))
import public_api  # noqa: E402

HEADERS = sorted(os.path.join(REPO, "include", "cgrt", f) for f in os.listdir(os.path.join(REPO, "include", "cgrt")))


def test_every_public_function_has_a_typed_signature_with_its_parameter_count():
    declared = public_api.declarations(HEADERS)
    assert len(declared) >= 60
    # functions of another branch's header may be listed before the header has them
    assert set(declared) == set(cgrt.SIGNATURES) - (cgrt.PENDING - set(declared))
    for name, n in declared.items():
        assert len(cgrt.SIGNATURES[name][1]) == n, name


def test_every_function_resolves_in_the_loaded_library():
    cdll = cgrt.load()
    for name in cgrt.SIGNATURES:
        if name in cgrt.PENDING and not hasattr(cdll, name):
            continue
        fn = getattr(cgrt.lib, name)
        assert fn.argtypes is not None, name


def test_pending_functions_raise_a_clear_error_when_missing():
    cdll = cgrt.load()
    missing = [n for n in cgrt.PENDING if not hasattr(cdll, n)]
    if not missing:
        pytest.skip("every pending function is exported: nothing missing to report")
    with pytest.raises(cgrt.NotSupportedError, match=missing[0]):
        getattr(cgrt.lib, missing[0])


def test_struct_layouts_equal_the_c_compilers(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to compare the struct layouts with")
    lines = []
    for cname, cls in cgrt.STRUCTS.items():
        lines.append(f'printf("SIZEOF {cname} - %zu\\n", sizeof({cname}));')
        for f, _ in cls._fields_:
            lines.append(f'printf("OFFSET {cname} {f} %zu\\n", offsetof({cname}, {f}));')
    src = "#include <stdio.h>\n#include <stddef.h>\n" + "".join(
        f'#include "cgrt/{os.path.basename(h)}"\n' for h in HEADERS) + \
        "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n"
    (tmp_path / "layout.c").write_text(src)
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(tmp_path / "layout.c"), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    checked = 0
    for line in out.splitlines():
        kind, cname, field, value = line.split()
        cls = cgrt.STRUCTS[cname]
        got = ctypes.sizeof(cls) if kind == "SIZEOF" else getattr(cls, field).offset
        assert got == int(value), f"{kind} {cname}.{field}: ctypes {got}, C {value}"
        checked += 1
    assert checked == sum(len(c._fields_) + 1 for c in cgrt.STRUCTS.values())


def test_options_init_sizes_equal_ctypes_sizes():
    for struct, init in ((_lib.RuntimeOptions, "cgrt_runtime_options_init"),
                         (_lib.GraphsOptions, "cgrt_graphs_options_init"),
                         (_lib.MlaOptions, "cgrt_mla_options_init")):
        o = struct()
        getattr(cgrt.lib, init)(o)
        assert o.size == ctypes.sizeof(struct), init


def test_statuses_map_to_exception_classes_named_by_the_library():
    for value, name in cgrt._errors.STATUS_NAMES.items():
        assert cgrt.status_name(value) == name
        if value:
            cls = cgrt.error_class(value)
            assert cls.status == value and issubclass(cls, cgrt.Error)
            assert cls.__name__.replace("Error", "").lower() == \
                name[len("CGRT_ERROR_"):].replace("_", "").lower()
    assert cgrt.status_name(12345) == "CGRT_STATUS_UNKNOWN"
    assert cgrt.error_class(12345) is cgrt.Error
    assert issubclass(cgrt.InvalidArgumentError, ValueError)
    assert issubclass(cgrt.OutOfMemoryError, MemoryError)


def test_a_failure_carries_status_name_and_last_error():
    with pytest.raises(cgrt.InvalidArgumentError) as e:
        cgrt.Runtime(driver="emulated", device_ordinal=-1)
    assert e.value.status == 1 and e.value.status_name == "CGRT_ERROR_INVALID_ARGUMENT"
    assert "device_ordinal -1" in e.value.message
    assert e.value.message == cgrt.last_error()
    assert str(e.value).startswith("CGRT_ERROR_INVALID_ARGUMENT: ")


def test_defaults_come_from_the_c_init_functions():
    r = cgrt.runtime_defaults()
    assert r == {"device_ordinal": 0, "driver": 0, "driver_library": None, "fault_injection": 0,
                 "emulated_compute_capability": 0}
    m = cgrt.mla_defaults()
    assert (m["block_len"], m["dcp_world_size"], m["page_size"], m["combine"], m["lane"]) == (1, 1, 64, 2, 0)
    g = cgrt.graphs_defaults()
    assert (g["dcp_world_size"], g["enable_decode"], g["warmup_runs"], g["replay_mode"]) == (1, 1, 1, 0)
    assert g["meta"]["req_seq_lens"] == -1 and g["meta"]["draft_remaining"] == -1


def test_keyword_options_reach_the_struct():
    from cgrt._options import make_options
    o = make_options(_lib.MlaOptions, "cgrt_mla_options_init", {"heads": 16, "page_size": 32})
    assert (o.heads, o.page_size, o.block_len) == (16, 32, 1)
    with pytest.raises(TypeError, match="unknown option 'hedas'"):
        make_options(_lib.MlaOptions, "cgrt_mla_options_init", {"hedas": 16})


def test_version_matches_the_header():
    text = open(os.path.join(REPO, "include", "cgrt", "cgrt_version.h")).read()
    major, minor, patch = (int(re.search(rf"#define CGRT_VERSION_{k} (\d+)", text).group(1))
                           for k in ("MAJOR", "MINOR", "PATCH"))
    assert cgrt.version() == major * 10000 + minor * 100 + patch


def test_runtime_info_on_the_emulation(rt):
    info = rt.info()
    assert info.driver == "emulated" and rt.emulated
    assert info.compute_capability_major == 9 and info.sm_count > 0
    assert info.total_memory >= info.free_memory > 0


def test_log_callback_round_trip():
    lines = []
    cgrt.set_log_callback(lambda level, msg: lines.append((level, msg)), "debug")
    try:
        with pytest.raises(cgrt.InvalidArgumentError):
            cgrt.Runtime(driver="emulated", device_ordinal=-2)
    finally:
        cgrt.set_log_callback(None)
    assert any(level == "debug" and "CGRT_ERROR_INVALID_ARGUMENT" in msg for level, msg in lines), lines
    n = len(lines)
    with pytest.raises(cgrt.InvalidArgumentError):
        cgrt.Runtime(driver="emulated", device_ordinal=-2)
    assert len(lines) == n  # silent again


def test_fault_injection_round_trip(rt):
    plan = _lib.FaultPlan(size=ctypes.sizeof(_lib.FaultPlan), fail_at=1, symbol=b"cuEventCreate", result=2)
    with cgrt.Runtime(driver="emulated", fault_injection=True) as frt:
        cgrt.lib.cgrt_fault_set(ctypes.byref(plan))
        try:
            with pytest.raises(cgrt.OutOfMemoryError, match="cuEventCreate"):
                frt.event()
            assert cgrt.lib.cgrt_fault_injected() == 1
            assert cgrt.lib.cgrt_fault_last_symbol() == b"cuEventCreate"
        finally:
            cgrt.lib.cgrt_fault_set(None)
        frt.event().close()  # passes again


def _run(code, env):
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def _default_library():
    """The library the search finds without $CGRT_LIBRARY (the package directory, then the
    repository's bazel-bin), or None: e.g. on a machine without Bazel, where the library
    comes from $CGRT_LIBRARY only."""
    saved = os.environ.pop("CGRT_LIBRARY", None)
    try:
        paths = _lib.candidates()
    finally:
        if saved is not None:
            os.environ["CGRT_LIBRARY"] = saved
    return next((p for p in paths if os.path.exists(p)), None)


needs_default_library = pytest.mark.skipif(
    _default_library() is None,
    reason="no libcgrt.so on the default search path (package directory, <repo>/bazel-bin): "
           "the library comes from $CGRT_LIBRARY only here; run `bazel build //:libcgrt.so "
           "//:libcgrt_soname` to test the search order and the pip install")


@needs_default_library
def test_library_search_order(tmp_path):
    code = "import cgrt, sys; sys.stdout.write(cgrt.lib.path)"
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    env.pop("CGRT_LIBRARY", None)
    default = _run(code, env)
    assert default.returncode == 0, default.stderr
    assert default.stdout.endswith(("libcgrt.so.1", "libcgrt.so"))
    copy = tmp_path / "libcgrt-copy.so"
    shutil.copy(default.stdout, copy)
    got = _run(code, dict(env, CGRT_LIBRARY=str(copy)))
    assert got.stdout == str(copy), got.stderr
    gone = _run(code, dict(env, CGRT_LIBRARY=str(tmp_path / "nope.so")))
    assert gone.returncode != 0 and "LibraryNotFoundError" in gone.stderr and "nope.so" in gone.stderr
