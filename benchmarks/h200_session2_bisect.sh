#!/usr/bin/env bash
# Second H200 session (2026-11-29), second call: issue 4's demo, sized to fit one
# call (the first try, 12 commits, ran out of time one step short: ~15 s a bench
# run, 5 runs a commit). 8 commits; commit 5 undoes grouped launch order
# (GROUP_M 8 -> 1) in the sm_90 bf16 config of the tiled GEMM. Then, in the time
# left, the large subset rows with --timer profiler (events vs profiler there).
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
start=$SECONDS
{
  echo "== bisect demo"; date
  DEMO_DIR=/tmp/demo DEMO_COMMITS=8 DEMO_CULPRIT=5 timeout 540 bash benchmarks/bisect_h200_demo.sh \
    kernels/_configs.py 's/KernelConfig(128, 256, 64, GROUP_M=8,/KernelConfig(128, 256, 64, GROUP_M=1,/' \
    'matmul_tiled,4096x28672x4096,bf16' --timeout 90 -- \
    python3 -m perfci run prefill --filter 'kernel=matmul_tiled,M=4096,N=28672,dtype=bf16' --out r.csv --format none
  echo "demo exit $?"; date
  cp /tmp/demo/bisect.json /tmp/demo/bisect.png /tmp/demo/bisect.md "$OUT/" || true
  # the user's side of the promise: nothing left behind in the demo repository
  (cd /tmp/demo && git status --porcelain --ignored && git stash list && git branch --show-current && git log --oneline | head -3)
  left=$((585 - (SECONDS - start)))
  if (( left > 40 )); then
    echo "== large subset rows, profiler ($left s)"
    timeout $left python3 -m perfci run benchmarks/h200_subset.toml --filter 'M>=4096' --timer profiler \
      --out "$OUT/subset-large-profiler.csv"
  fi
  date
} 2>&1 | tee "$OUT/log.txt"
