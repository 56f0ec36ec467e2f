#!/usr/bin/env bash
# The H200 stores of 2026-12-01 with their false alarms marked `invalid`, then
# `perfci history canary` over them: the false-alarm rate of real nights as the
# team judged them, beside the canary's twin. Works on copies in $1 (default: a
# temp dir); the stored results are left as they were.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cp -r "$here/h200-2026-12-01-canary-nights/store" "$out/canary-nights"
cp -r "$here/h200-2026-12-01-library-canary/canary/r/store" "$out/library-canary"
cp -r "$here/h200-2026-12-01/nightly-two-nights/r/store" "$out/two-nights"
mark() { python -m perfci history triage "$1" --as invalid --who "triage review" --sha "$2" --case "$3" --reason "$4" >/dev/null; }
harmless="a harmless commit apart (canary_nights.sh): the cases compare sent to confirm were noise"
# canary-nights: nights 3 and 4 sent cases to confirm (inconclusive) on harmless commits
mark "$out/canary-nights" afe971734824 suite:canary-nights "$harmless"
mark "$out/canary-nights" 767a5eea2e1a suite:canary-nights "$harmless"
# library-canary: night 3 sent three cases to confirm on a harmless commit
mark "$out/library-canary" e81fbf457c78 suite:canary-nights "$harmless"
# two-nights: night 2's prefill flagged torch_matmul (cuBLAS) on a commit that changed only gemv;
# its decode regressions were the planted gemv tile (real: not marked)
mark "$out/two-nights" 7c6925018534 "torch_matmul 5120x5120x8320 bf16" \
  "the commit changed only the gemv kernel; cuBLAS cannot have moved"
python -m perfci history canary "$out/canary-nights" "$out/library-canary" "$out/two-nights"
