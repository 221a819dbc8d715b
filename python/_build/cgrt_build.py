"""In-tree PEP 517/660 build backend of the cgrt Python package (standard library only).

The wheel holds python/cgrt/*.py and cgrt/_build_info.py, which records the repository
the package was built from, so that the installed package finds the libcgrt.so that
Bazel builds there (bazel-bin). With the config setting bundle=1
(`pip install ./python -C bundle=1`) bazel-bin/libcgrt.so.1 is copied into the package
as well (a self-contained install; rebuild and reinstall to update it). The editable
wheel adds python/ to sys.path instead.
"""
import base64
import hashlib
import os
import zipfile

NAME, VERSION = "cgrt", "1.0.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(HERE)
TAG = "py3-none-any"
DIST = f"{NAME}-{VERSION}.dist-info"


def _metadata():
    with open(os.path.join(HERE, "README.md")) as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: Python bindings (ctypes) of cgrt, the CUDA-graph decode runtime\n"
            "Requires-Python: >=3.8\nProvides-Extra: test\nRequires-Dist: pytest; extra == \"test\"\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _wheel_file():
    return f"Wheel-Version: 1.0\nGenerator: cgrt_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"


class _Wheel:
    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname, data):
        if isinstance(data, str):
            data = data.encode()
        self.zip.writestr(zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self):
        self.add(f"{DIST}/METADATA", _metadata())
        self.add(f"{DIST}/WHEEL", _wheel_file())
        self.add(f"{DIST}/top_level.txt", NAME + "\n")
        self.records.append(f"{DIST}/RECORD,,")
        self.zip.writestr(f"{DIST}/RECORD", "\n".join(self.records) + "\n")
        self.zip.close()


def _bundle(config_settings):
    return str((config_settings or {}).get("bundle", "0")).lower() in ("1", "true", "yes")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-{TAG}.whl"
    w = _Wheel(os.path.join(wheel_directory, name))
    pkg = os.path.join(HERE, NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py") and fn != "_build_info.py":
            with open(os.path.join(pkg, fn), "rb") as f:
                w.add(f"{NAME}/{fn}", f.read())
    w.add(f"{NAME}/_build_info.py", f'"""Written by the build backend."""\nREPO_ROOT = {REPO!r}\n')
    if _bundle(config_settings):
        lib = os.path.join(REPO, "bazel-bin", "libcgrt.so.1")
        if not os.path.exists(lib):
            raise RuntimeError(f"bundle=1: {lib} is missing; run `bazel build //:libcgrt_soname` first")
        with open(lib, "rb") as f:
            w.add(f"{NAME}/libcgrt.so.1", f.read())
    w.close()
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-{TAG}.whl"
    w = _Wheel(os.path.join(wheel_directory, name))
    w.add(f"_{NAME}_editable.pth", HERE + "\n")
    w.close()
    return name


def _prepare(metadata_directory):
    os.makedirs(os.path.join(metadata_directory, DIST), exist_ok=True)
    for fn, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file())):
        with open(os.path.join(metadata_directory, DIST, fn), "w") as f:
            f.write(text)
    return DIST


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _prepare(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _prepare(metadata_directory)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
