#!/usr/bin/env bash
# Everything measured on the lent H200 in one device call (the lease is short):
#   1. truth: perfci's event times vs the profiler's kernel times (12 decode cases)
#   2. the H200 baselines: perfci run decode / prefill
#   3. a planted regression: the same tree with the sm_90 16-bit tiled config's
#      GROUP_M 8 -> 1 (grouped launch order undone), re-measured on
#      benchmarks/h200_subset.toml; its untouched decode/torch rows are an A/A.
# Run from the repo root with $OUT set; outputs land in $OUT (8 files).
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
{
  echo "== truth"; date
  timeout 60 python3 benchmarks/truth_vs_profiler.py --suite decode --filter 'group~seed002-*,M=64' \
    --out "$OUT/truth.csv" 2>&1 | grep -v Warning | tail -14
  echo "== decode"; date
  timeout 195 python3 -m perfci run decode --out "$OUT/decode.csv" --log-json "$OUT/decode.jsonl" --format none
  echo "== prefill"; date
  timeout 205 python3 -m perfci run prefill --out "$OUT/prefill.csv" --log-json "$OUT/prefill.jsonl" --format none
  echo "== planted"; date
  rm -rf /tmp/planted && mkdir -p /tmp/planted && cp -r perfci kernels suites benchmarks /tmp/planted/
  sed -i 's/KernelConfig(128, 256, 64, GROUP_M=8,/KernelConfig(128, 256, 64, GROUP_M=1,/' /tmp/planted/kernels/_configs.py
  grep -c "GROUP_M=1, num_warps=8" /tmp/planted/kernels/_configs.py
  (cd /tmp/planted && PYTHONPATH=/tmp/site:/tmp/planted timeout 70 python3 -m perfci run \
    benchmarks/h200_subset.toml --out "$OUT/planted.csv" --format none)
  date
} 2>&1 | tee "$OUT/log.txt"
