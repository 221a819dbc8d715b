"""In-tree PEP 517/660 build backend of the cgrt Python package (standard library only).

`pip install ./python` and `pip wheel ./python` build a self-contained wheel: the backend
runs the Bazel build of the shared library (`bazel build //:libcgrt_soname`, in the
repository that holds this python/ folder) and bundles `libcgrt.so.1` next to the
package's Python files. The installed package then needs nothing from the checkout: it
works from any directory, in any virtual environment, after the checkout is moved or
deleted. The library has no link-time CUDA dependency (it opens libcuda.so.1 at run time,
or runs on its CPU emulation), so one wheel serves every driver; the wheel is tagged for
the platform it was built on (linux_x86_64) because it carries machine code.

Config settings (`pip install ./python -C NAME=VALUE`):
  library=PATH   bundle this prebuilt libcgrt.so.1 instead of running Bazel (a machine
                 without Bazel, or a library built with other flags).

The editable install (`pip install -e python`) also runs the Bazel build, then adds
python/ to sys.path: the package loads the tree's bazel-bin/libcgrt.so.1, so a rebuild is
picked up without reinstalling.

Progress goes to standard error (pip shows it with -v, and always on failure).
"""
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

NAME, VERSION = "cgrt", "1.0.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(HERE)
DIST = f"{NAME}-{VERSION}.dist-info"
LIBRARY = "libcgrt.so.1"
TARGET = "//:libcgrt_soname"


def _platform_tag():
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _tag(pure):
    return "py3-none-any" if pure else f"py3-none-{_platform_tag()}"


def _log(msg):
    print(f"cgrt_build: {msg}", file=sys.stderr, flush=True)


def _metadata():
    with open(os.path.join(HERE, "README.md")) as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: Python bindings (ctypes) of cgrt, the CUDA-graph decode runtime\n"
            "Requires-Python: >=3.8\nProvides-Extra: test\nRequires-Dist: pytest; extra == \"test\"\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _wheel_file(pure):
    return (f"Wheel-Version: 1.0\nGenerator: cgrt_build\nRoot-Is-Purelib: {'true' if pure else 'false'}\n"
            f"Tag: {_tag(pure)}\n")


class _Wheel:
    def __init__(self, path, pure):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []
        self.pure = pure

    def add(self, arcname, data, mode=0o644):
        if isinstance(data, str):
            data = data.encode()
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self):
        self.add(f"{DIST}/METADATA", _metadata())
        self.add(f"{DIST}/WHEEL", _wheel_file(self.pure))
        self.add(f"{DIST}/top_level.txt", NAME + "\n")
        self.records.append(f"{DIST}/RECORD,,")
        self.zip.writestr(f"{DIST}/RECORD", "\n".join(self.records) + "\n")
        self.zip.close()


def _bazel_build():
    """Runs the Bazel build of the shared library; returns the path of libcgrt.so.1."""
    bazel = shutil.which("bazel")
    if bazel is None:
        raise RuntimeError("cgrt_build: Bazel is needed to build libcgrt.so.1 and is not on PATH "
                           "(./tools/setup.sh installs it), or pass a prebuilt library with "
                           "`-C library=/path/to/libcgrt.so.1`")
    _log(f"building {LIBRARY} with `bazel build {TARGET}` in {REPO} (a first build takes minutes)")
    r = subprocess.run([bazel, "build", TARGET], cwd=REPO, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"cgrt_build: `bazel build {TARGET}` failed with status {r.returncode} "
                           "(its output is above)")
    info = subprocess.run([bazel, "info", "bazel-bin"], cwd=REPO, capture_output=True, text=True)
    if info.returncode != 0:
        raise RuntimeError(f"cgrt_build: `bazel info bazel-bin` failed: {info.stderr.strip()}")
    lib = os.path.join(info.stdout.strip(), LIBRARY)
    if not os.path.isfile(lib):
        raise RuntimeError(f"cgrt_build: the build succeeded but {lib} is missing")
    _log(f"built {lib}")
    return lib


def _library(config_settings):
    given = (config_settings or {}).get("library")
    if given:
        if not os.path.isfile(given):
            raise RuntimeError(f"cgrt_build: -C library={given}: no such file")
        _log(f"bundling the prebuilt {given}")
        return given
    return _bazel_build()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    lib = _library(config_settings)
    name = f"{NAME}-{VERSION}-{_tag(False)}.whl"
    w = _Wheel(os.path.join(wheel_directory, name), pure=False)
    pkg = os.path.join(HERE, NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            with open(os.path.join(pkg, fn), "rb") as f:
                w.add(f"{NAME}/{fn}", f.read())
    with open(lib, "rb") as f:
        w.add(f"{NAME}/{LIBRARY}", f.read(), mode=0o755)
    w.close()
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _library(config_settings)  # the tree's bazel-bin must hold the library the package loads
    name = f"{NAME}-{VERSION}-{_tag(True)}.whl"
    w = _Wheel(os.path.join(wheel_directory, name), pure=True)
    w.add(f"_{NAME}_editable.pth", HERE + "\n")
    w.close()
    return name


def _prepare(metadata_directory, pure):
    os.makedirs(os.path.join(metadata_directory, DIST), exist_ok=True)
    for fn, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file(pure))):
        with open(os.path.join(metadata_directory, DIST, fn), "w") as f:
            f.write(text)
    return DIST


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _prepare(metadata_directory, pure=False)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _prepare(metadata_directory, pure=True)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
