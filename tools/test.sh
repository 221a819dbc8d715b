#!/usr/bin/env bash
# Runs every test twice: a normal build and an AddressSanitizer (+LeakSanitizer) build,
# then the Python package's and the example model's tests (pytest from the .venv that
# tools/setup.sh makes, on the CPU emulation, against the default build of
# //:libcgrt.so; among them the wheel test: `pip wheel` of a copy of the tree, installed
# into a fresh venv after the copy is deleted, smoke-tested from outside), and prints one line "N passed, N failed, N skipped" counted
# from the test cases of the JUnit XML that each test and pytest write. Extra arguments
# go to `bazel test`.
# On a machine without a GPU the tests run on cgrt's CPU emulation of the driver.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
summaries=()
for config in "" "asan"; do
  label=${config:-default}
  echo "== bazel test //... (${label})" >&2
  args=(test //... --test_output=errors)
  [ -n "$config" ] && args+=(--config="$config")
  bazel "${args[@]}" "$@"
  brc=$?
  [ $brc -ne 0 ] && rc=1
  logs=$(bazel info ${config:+--config=$config} bazel-testlogs 2>/dev/null)
  summary="$(python3 tools/count_tests.py "$logs" "$label")"
  if [ $brc -ne 0 ] && [ $brc -ne 3 ]; then
    echo "[${label}] bazel exited with $brc (build failure or no tests): counted as a failure" >&2
    read -r p f s <<<"$summary"
    summary="$p $((f + 1)) $s"
  fi
  summaries+=("$summary")
done
echo "== pytest python/tests examples/deepseek_v2_lite" >&2
PY=.venv/bin/python
if ! "$PY" -c "import pytest" >/dev/null 2>&1; then
  echo "[pytest] $PY has no pytest: run ./tools/setup.sh first (it makes .venv with pytest, numpy, torch)" >&2
  PY=python3
fi
if bazel build //:libcgrt.so //:libcgrt_soname; then
  junit=$(mktemp)
  CGRT_LIBRARY="$(bazel info bazel-bin 2>/dev/null)/libcgrt.so.1" PYTHONPATH=python \
    "$PY" -m pytest -q -p no:cacheprovider python/tests examples/deepseek_v2_lite --junitxml="$junit" >&2
  prc=$?
  summary="$(python3 tools/count_tests.py --junit "$junit" pytest)"
  if [ $prc -ne 0 ]; then
    rc=1
    if [ $prc -ne 1 ]; then  # not "some tests failed": pytest missing, no tests, interrupted
      echo "[pytest] exited with $prc: counted as a failure" >&2
      read -r p f s <<<"$summary"
      summary="$p $((f + 1)) $s"
    fi
  fi
  rm -f "$junit"
else
  echo "[pytest] bazel build //:libcgrt.so failed: counted as a failure" >&2
  rc=1
  summary="0 1 0"
fi
summaries+=("$summary")
echo "== commit subjects (<= 72 characters after the rule's base commit)" >&2
summary="$(python3 tools/check_commit_subjects.py)"
[ "$summary" = "0 1 0" ] && rc=1
summaries+=("$summary")
python3 tools/count_tests.py --total "${summaries[@]}"
exit $rc
