"""The package as a user installs it: `pip wheel` builds libcgrt.so.1 with Bazel and bundles
it, and the installed wheel works on its own.

The wheel is built from a copy of this source tree (its tracked and untracked files, no
build outputs), and the copy, with its Bazel output base, is deleted before the wheel is
installed into a fresh virtual environment; tools/wheel_smoke.py then runs from a
directory outside any checkout, without CGRT_LIBRARY or PYTHONPATH: the package and its
bundled library load from the venv's site-packages and one MLA decode step equals a
pure-Python reference (on the emulation here, on the GPU where there is one)."""
import os
import shutil
import subprocess
import sys
import venv

import pytest

from conftest import REPO

SKIP_DIRS = {".git", ".venv", ".peers", ".whl"}


def _copy_tree(dst):
    """The source tree as a fresh clone would hold it, plus uncommitted files; no outputs."""
    def ignore(folder, names):
        top = os.path.realpath(folder) == os.path.realpath(REPO)
        return [n for n in names
                if (top and (n in SKIP_DIRS or n.startswith(("bazel-", ".gpu")))) or n == "__pycache__"]
    shutil.copytree(REPO, dst, ignore=ignore, symlinks=True)


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@pytest.mark.skipif(shutil.which("bazel") is None,
                    reason="Bazel is not on PATH: the wheel's build backend runs the Bazel build "
                           "(./tools/setup.sh installs Bazel)")
def test_wheel_is_self_contained(tmp_path):
    src, wheels, env_dir, outside = (tmp_path / n for n in ("src", "wheels", "venv", "outside"))
    _copy_tree(src)
    try:
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "-w", str(wheels),
              str(src / "python")], cwd=str(tmp_path))
    finally:
        subprocess.run(["bazel", "clean", "--expunge"], cwd=str(src), capture_output=True)
        subprocess.run(["bazel", "shutdown"], cwd=str(src), capture_output=True)
        shutil.rmtree(src)
    built = sorted(wheels.glob("cgrt-*.whl"))
    assert len(built) == 1 and built[0].name.endswith("-py3-none-linux_x86_64.whl"), built
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--no-index", str(built[0])])
    outside.mkdir()
    smoke = outside / "wheel_smoke.py"
    shutil.copy(os.path.join(REPO, "tools", "wheel_smoke.py"), smoke)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CGRT_LIBRARY")}
    r = _run([str(py), str(smoke)], cwd=str(outside), env=env)
    assert r.stdout.rstrip().splitlines()[-1].startswith("wheel_smoke: OK"), r.stdout
