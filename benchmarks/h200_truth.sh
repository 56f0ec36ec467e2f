#!/usr/bin/env bash
# Second H200 call: the profiler timer against Nsight Compute, and the event
# timer beside both, on seed 002's decode rows at M = 64.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
{
  timeout 30 python3 -m perfci run benchmarks/h200_subset.toml --filter group=seed002 --timer profiler --out "$OUT/profiler.csv" --format none
  timeout 30 python3 -m perfci run benchmarks/h200_subset.toml --filter group=seed002 --timer events --out "$OUT/events.csv" --format none
  timeout 80 python3 benchmarks/truth_ncu.py --suite benchmarks/h200_subset.toml --filter group=seed002 \
    --compare "$OUT/profiler.csv" "$OUT/events.csv" --out "$OUT/truth-ncu.csv"
} 2>&1 | tee "$OUT/log.txt"
