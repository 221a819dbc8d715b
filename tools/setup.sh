#!/usr/bin/env bash
# Installs what cgrt's build needs on a fresh Debian machine (idempotent; apt only).
# Needs: the CUDA toolkit at /usr/local/cuda (nvcc, headers, bin2c) — part of the base
# image — plus Bazel 4.2.3 from Debian, its java/platforms rules, and GoogleTest sources.
set -euo pipefail
need=()
command -v bazel >/dev/null 2>&1 || need+=(bazel-bootstrap)
[ -f /usr/share/bazel/rules/java/WORKSPACE ] || need+=(bazel-rules-java)
[ -f /usr/share/bazel/platforms/WORKSPACE ] || need+=(bazel-platforms)
[ -f /usr/src/googletest/googletest/src/gtest.cc ] || need+=(googletest)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "setup: the CUDA toolkit is missing at ${CUDA_PATH:-/usr/local/cuda} (nvcc is needed to build the kernels)" >&2
  exit 1
fi
echo "setup: ok (bazel, rules_java, platforms, googletest, nvcc present)" >&2
