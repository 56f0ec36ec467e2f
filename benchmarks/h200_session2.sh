#!/usr/bin/env bash
# Second H200 session (2026-11-29), first call. Run from the repo root with $OUT set:
#   1. issue 4's demo: a 12-commit history whose commit 8 undoes grouped launch
#      order (GROUP_M 8 -> 1, known +22% on this case), bisected by perfci with
#      `perfci run` as the bench command;
#   2. a third fresh-process run of benchmarks/h200_subset.toml with device events
#      (reproducibility; the prefill rows also check the matmul_tile refactor);
#   3. the same subset with --timer profiler, then Nsight Compute on its seed002
#      rows, set beside both (is the printed number the kernel's time?).
# Eight files come back: gpu.txt log.txt bisect.{json,png,md} subset-{events,profiler}.csv truth-ncu.csv
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
{
  echo "== bisect demo"; date
  DEMO_DIR=/tmp/demo DEMO_COMMITS=12 DEMO_CULPRIT=8 timeout 380 bash benchmarks/bisect_h200_demo.sh \
    kernels/_configs.py 's/KernelConfig(128, 256, 64, GROUP_M=8,/KernelConfig(128, 256, 64, GROUP_M=1,/' \
    'matmul_tiled,4096x28672x4096,bf16' --timeout 90 -- \
    python3 -m perfci run prefill --filter 'kernel=matmul_tiled,M=4096,N=28672,dtype=bf16' --out r.csv --format none
  echo "demo exit $?"
  cp /tmp/demo/bisect.json /tmp/demo/bisect.png /tmp/demo/bisect.md "$OUT/" || true
  echo "== subset, events"; date
  timeout 60 python3 -m perfci run benchmarks/h200_subset.toml --out "$OUT/subset-events.csv" --format none
  echo "== subset, profiler"; date
  timeout 70 python3 -m perfci run benchmarks/h200_subset.toml --timer profiler --out "$OUT/subset-profiler.csv"
  echo "== ncu"; date
  timeout 100 python3 benchmarks/truth_ncu.py --suite benchmarks/h200_subset.toml --filter group=seed002 \
    --compare "$OUT/subset-profiler.csv" "$OUT/subset-events.csv" --out "$OUT/truth-ncu.csv"
  date
} 2>&1 | tee "$OUT/log.txt"
