#!/usr/bin/env bash
# The adversarial suite's full run (tests/adversarial, issue 14): every fault point in
# both modes, the 10^5-step soak and the longer thread runs, in the default, ASan (with
# LeakSanitizer) and TSan builds. Each build ends with "tried N, clean N, misbehaved N";
# the script exits non-zero if any build misbehaved.
#   tools/adversarial.sh                 all three builds
#   tools/adversarial.sh asan            one build (default, asan or tsan)
#   tools/adversarial.sh tsan --only=threads --seed=7   extra flags go to the suite
# On a GPU machine: bazel build --config=gpu //tests/adversarial:adversarial, copy
# bazel-bin/tests/adversarial/adversarial there and run CGRT_DRIVER=cuda ./adversarial --full.
set -uo pipefail
cd "$(dirname "$0")/.."
configs=(default asan tsan)
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then
  configs=("$1")
  shift
fi
rc=0
summary=()
for config in "${configs[@]}"; do
  flags=()
  [ "$config" != default ] && flags=(--config="$config")
  echo "== adversarial suite, full run ($config)" >&2
  log=$(mktemp)
  bazel run "${flags[@]}" //tests/adversarial:adversarial -- --full "$@" | tee "$log"
  [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
  summary+=("$config: $(tail -n 1 "$log")")
  rm -f "$log"
done
printf '%s\n' "${summary[@]}"
exit $rc
