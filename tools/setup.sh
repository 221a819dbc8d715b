#!/usr/bin/env bash
# Installs everything cgrt's build and tests need on a fresh Debian machine (idempotent).
# Needs the CUDA toolkit at /usr/local/cuda (nvcc, headers, bin2c), part of the base image.
#   apt:  Bazel 4.2.3 (bazel-bootstrap) with its java/platforms rules, GoogleTest sources,
#         g++, python3 and its venv module.
#   pip:  a virtual environment at .venv (it sees the system's site-packages) with pytest,
#         numpy and torch (the PyPI wheel; on a machine without a GPU it runs on the CPU),
#         which tools/test.sh uses for the Python package's and the example model's tests.
# Progress goes to standard error; the last line says what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v bazel >/dev/null 2>&1 || need+=(bazel-bootstrap)
[ -f /usr/share/bazel/rules/java/WORKSPACE ] || need+=(bazel-rules-java)
[ -f /usr/share/bazel/platforms/WORKSPACE ] || need+=(bazel-platforms)
[ -f /usr/src/googletest/googletest/src/gtest.cc ] || need+=(googletest)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]} (apt)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "setup: the CUDA toolkit is missing at ${CUDA_PATH:-/usr/local/cuda} (nvcc is needed to build the kernels)" >&2
  exit 1
fi

# The Python test environment.
if ! .venv/bin/python -c "" >/dev/null 2>&1; then
  rm -rf .venv
  if ! python3 -m venv --system-site-packages .venv >/dev/null 2>&1; then
    echo "setup: installing python3-venv (apt)" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    rm -rf .venv
    python3 -m venv --system-site-packages .venv
  fi
fi
missing=()
for mod in pytest numpy torch; do
  .venv/bin/python -c "import $mod" >/dev/null 2>&1 || missing+=("$mod")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} into .venv (pip; torch is a large download, minutes)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check "${missing[@]}" >&2
fi
echo "setup: ok (bazel, rules_java, platforms, googletest, nvcc; .venv with pytest, numpy, torch)" >&2
