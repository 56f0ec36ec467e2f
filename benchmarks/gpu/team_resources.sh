#!/usr/bin/env bash
# Kernels perfci did not write, on the GPU and cross-compiled: do the resources `perfci run`
# records on the device (the kernel's launches observed over one run after the gate) agree with
# what `perfci compile` plans on the CPU (the launches captured from the kernel's own host code,
# nothing run)? examples/kernel-repo's GEMM (a team's Backend), an autotuned kernel behind a
# plain callable (tests/data/compile/team_tuned.py, by import path) and FlagGems' mm_out (an
# installed library, by import path), in a copy of the team's repository, perfci the installed tool.
#
#   BUDGET_S   the whole script's seconds (default 400)
#
# Needs the perfci wheel in .whl/ (and FlagGems' wheels, as library_kernel.sh).
# Usage, from perfci's repository root:  bash benchmarks/gpu/team_resources.sh
# Outputs in $OUT/r: run.csv and run.jsonl (perfci run on the GPU), run.txt (its table),
# compile.json (perfci compile --arch sm_90 there), agree.md (per case and kernel: the device's
# registers, spills, shared memory and occupancy beside the compile's), log.txt; results.tgz.
source benchmarks/gpu/setup.sh
BUDGET_S=${BUDGET_S:-400}
TEAM=/tmp/gemmlab
rm -rf "$TEAM"
cp -r examples/kernel-repo "$TEAM"
cp tests/data/compile/team_tuned.py "$TEAM/kernels/tuned.py"
export PYTHONPATH=/tmp/site TRITON_INTERPRET=0  # the installed tool only: the team's `kernels` is imported
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
cd "$TEAM" || exit 2
cat > bench/suites/gpu.toml <<'EOF'
name = "gpu"
description = "kernels perfci did not write: a team's GEMM, an autotuned kernel, a library's mm"
devices = ["cuda"]

[[cases]]
kernel = "gemmlab_matmul"
dtype = "fp16"
M = [1024, 4096]
N = 4096
K = 1024

[[cases]]
kernel = "kernels.tuned:tuned_mm"
dtype = "fp32"
M = 16
N = [4096, 8192]
K = 1024

[[cases]]
kernel = "flag_gems.ops.mm:mm_out"
dtype = "bf16"
M = [16, 4096]
N = 4096
K = 4096
EOF
{
  python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
  s=$SECONDS
  timeout "$(left)" python3 -m perfci run gpu --out "$R/run.csv" --log-json "$R/run.jsonl" --format table \
    > "$R/run.txt"; echo "perfci run gpu: exit $? [$((SECONDS - s)) s]"
  cat "$R/run.txt"
  s=$SECONDS
  timeout "$(left)" python3 -m perfci compile gpu --arch sm_90 --format json > "$R/compile.json"
  echo "perfci compile gpu --arch sm_90: exit $? [$((SECONDS - s)) s]"
  python3 - "$R" <<'PY'
import json, sys
from perfci.results import read_results

r = sys.argv[1]
compiled = {(c["kernel"], c["shape"]): c for c in json.load(open(f"{r}/compile.json"))["cases"]}
lines = ["| case | kernel | config on the device | device: regs / spills / shared B / occupancy | "
         "compile (sm_90): regs / spills / shared B / occupancy | agree |", "|---|---|---|---|---|---|"]
for row in read_results(f"{r}/run.csv").rows:
    c = compiled.get((row.kernel, row.shape), {})
    planned = c.get("kernels") or []
    if not row.kernels:
        lines.append(f"| {row.kernel} {row.shape} | | | none recorded ({row.status}) | "
                     f"{c.get('status', '?')} {c.get('note') or '; '.join(c.get('problems') or [])} | |")
    for k in row.kernels:
        # the compile's kernel of the same name and config (an autotuned kernel lists every config)
        config = {key: k.value(key) for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps") if k.value(key)}
        match = next((p for p in planned if p["kernel"] == k.name and all(
            str(p["config"].get(key)) == v for key, v in config.items())), None)
        dev = (k.value("regs"), k.value("spills"), k.value("shared"), k.value("occupancy"))
        if match is None:
            lines.append(f"| {row.kernel} {row.shape} | {k.name} | {config} | {' / '.join(dev)} | "
                         f"no compiled kernel of that config ({c.get('status', '?')}: "
                         f"{'; '.join(c.get('problems') or []) or c.get('note', '')}) | no |")
            continue
        plan = (str(match["registers"]), str(match["spills"]), str(match["shared_bytes"]),
                str((match["occupancy"] or {}).get("value")))
        lines.append(f"| {row.kernel} {row.shape} | {k.name} | {config} | {' / '.join(dev)} | "
                     f"{' / '.join(plan)} | {'yes' if dev == plan else 'no'} |")
text = "\n".join(lines) + "\n"
open(f"{r}/agree.md", "w").write(text)
print(text)
PY
} 2>&1 | tee "$R/log.txt"
pack
