#!/usr/bin/env bash
# Second H200 session (2026-11-29), third call: A/A nights. The decode and
# prefill suites again with the defaults of the committed baselines (eager,
# device events, fork isolation), nothing changed: every verdict but 'unchanged'
# against baselines/h200/ is a false alarm, and the residuals feed
# `perfci calibrate` for the sm_90 floor. The prefill run also re-checks the
# tiled/persistent kernels after the matmul_tile refactor. A second decode run
# fills the time left.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
start=$SECONDS
{
  echo "== decode"; date
  timeout 150 python3 -m perfci run decode --out "$OUT/decode-aa1.csv" --format none
  echo "== prefill"; date
  timeout 220 python3 -m perfci run prefill --out "$OUT/prefill-aa1.csv" --format none
  left=$((560 - (SECONDS - start)))
  echo "== decode again ($left s)"; date
  (( left > 30 )) && timeout $left python3 -m perfci run decode --out "$OUT/decode-aa2.csv" --format none
  date
} 2>&1 | grep -v -i warning | tee "$OUT/log.txt"
