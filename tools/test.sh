#!/usr/bin/env bash
# Runs every test twice: a normal build and an AddressSanitizer (+LeakSanitizer) build,
# then prints one line "N passed, N failed, N skipped" counted from the test cases of
# the JUnit XML that each test writes. Extra arguments go to `bazel test`.
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
python3 tools/count_tests.py --total "${summaries[@]}"
exit $rc
