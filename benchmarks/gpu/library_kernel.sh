#!/usr/bin/env bash
# A library's Triton GEMM measured by import path only: FlagGems' mm and mm_out beside
# torch.matmul on Llama-3 8B decode and prefill shapes (benchmarks/gpu/cases/library.toml),
# through perfci's wrapper for plain callables (its inputs, correctness gate and poison).
#
#   RUNS          perfci runs of the suite, one after another            (default 1)
#   STEP_TIMEOUT  seconds per perfci run                                  (default 300)
#   BUDGET_S      the whole script's seconds (default 560)
#
# Needs flag_gems and its pure-Python needs (sqlalchemy, greenlet) as wheels in .whl/ (setup.sh
# installs them); FlagGems imports only where it finds a GPU.
# Usage, from the repository root:  bash benchmarks/gpu/library_kernel.sh
# Outputs: $OUT/r/library-N.csv and .jsonl, a table of median us and TFLOP/s per kernel and shape
# in $OUT/r/library.md, $OUT/results.tgz.
source benchmarks/gpu/setup.sh
RUNS=${RUNS:-1}; STEP_TIMEOUT=${STEP_TIMEOUT:-300}
{
  python3 -c "import flag_gems, triton, torch; print('flag_gems', flag_gems.__version__, 'triton', triton.__version__, 'torch', torch.__version__)"
  for i in $(seq "$RUNS"); do
    measure "library-$i" "$STEP_TIMEOUT" benchmarks/gpu/cases/library.toml
  done
  python3 - "$R" <<'PY'
import glob, sys
from perfci.results import read_results
rows = {}
for path in sorted(glob.glob(f"{sys.argv[1]}/library-*.csv")):
    for r in read_results(path).rows:
        rows.setdefault((r.shape, r.kernel), []).append(r)
lines = ["| shape | kernel | status | median us | TFLOP/s | rel. error |", "|---|---|---|---:|---:|---:|"]
for (shape, kernel), rs in sorted(rows.items(), key=lambda kv: (int(kv[0][0].split("x")[0]), kv[0])):
    for r in rs:
        us = f"{r.median_us:.2f}" if r.median_us else ""
        tf = f"{r.tflops:.1f}" if r.tflops else ""
        err = r.message if r.status != "ok" else ""
        lines.append(f"| {shape} | {kernel} | {r.status} | {us} | {tf} | {err} |")
text = "\n".join(lines)
open(f"{sys.argv[1]}/library.md", "w").write(text + "\n")
print(text)
PY
} 2>&1 | tee "$R/log.txt"
pack
