#!/usr/bin/env bash
# A team's repository of eight cases on a GPU, nights and a bisect with warm workers, each timed.
# perfci is the installed tool (the wheel carried in .whl/; nothing of perfci's checkout on the path).
#
# The repository (gemmlab, from examples/kernel-repo): its tiled Triton GEMM at three shapes, an
# autotuned Triton GEMM (@triton.autotune over four close configs) at three shapes, and
# torch.matmul at two; fp16. A plant makes the tiled GEMM walk part of K again with a zero
# multiplier (slower, still correct).
#
#   MODE=bisect     two `perfci run gemm` (each case's phases in run-*.jsonl), then eight commits, the
#                   third a +20% plant (K // 5); `perfci bisect HEAD~8 HEAD --suite gemm --case ...`
#                   timed: the warm-worker bisect alone
#   MODE=nights     night 1 (recorded), then NIGHTS-1 docs-only commits (NIGHTS default 3), each
#                   followed by a night (unchanged nights: each night's stages and seconds)
#   MODE=red        night 1, then eight commits whose third is a plant (PLANT, default K // 10: 7 more
#                   of the 1024-K GEMMs' 64 K-steps; K // 32: 2 more, ~+3%), night 2: red, confirm,
#                   bisect, the culprit; the team's repository checked as before
#   NIGHT_ARGS     more `perfci nightly` options (default: none, the workflow's defaults)
#   BUDGET_S       the whole script's seconds (default 560)
#
# Needs the perfci wheel and gitpython's in .whl/ (python3 -m pip wheel --no-deps --no-build-isolation
# -w .whl .; pip download GitPython gitdb smmap). Usage, from perfci's repository root:
#   MODE=bisect bash benchmarks/gpu/warm_night.sh
# Outputs in $OUT/r: log.txt, each night's nN/ (verdict.json, summary.md) and nN.err, bisect.json/.err.
source benchmarks/gpu/setup.sh
MODE=${MODE:-bisect}; NIGHT_ARGS=${NIGHT_ARGS:-}
TEAM=/tmp/gemmlab
rm -rf "$TEAM" /tmp/gemmlab-perf-history "$R"/n[0-9]*
cp -r examples/kernel-repo "$TEAM"
export PYTHONPATH=/tmp/site  # the installed tool only: the team's `kernels` must be the one imported
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} TRITON_INTERPRET=0
read -r -a EXTRA <<< "$NIGHT_ARGS"
demo_git
cd "$TEAM" || exit 2
cat > kernels/tuned.py <<'PY'
"""gemmlab's autotuned GEMM: @triton.autotune picks one of four close configs at first call."""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
             triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4, num_stages=3),
             triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
             triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3)],
    key=["M", "N", "K"])
@triton.jit
def _tuned_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b, out):
    m, k = a.shape
    n = b.shape[1]
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
    _tuned_kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        out.stride(0), out.stride(1))
    return out
PY
cat >> kernels/perf.py <<'PY'


@backend("gemmlab_tuned", description="gemmlab's autotuned Triton GEMM", dtypes=("fp16",))
def gemmlab_tuned(spec, device, seed):
    import torch

    from kernels.tuned import matmul

    a, w, _, out_dtype = gemm_inputs(spec, device, seed)
    b = w.t().contiguous()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    return Prepared(run=lambda: matmul(a, b, out), output=out, reference=reference(a, w),
                    tolerance=TOLERANCE[spec.dtype], poison=poisoner(out))


BACKENDS = [gemmlab_matmul, gemmlab_tuned]
PY
{
  printf 'name = "gemm"\ndescription = "gemmlab: tiled, autotuned and torch GEMMs, fp16"\ndevices = ["cuda", "cpu"]\ndtype = "fp16"\n'
  for t in "gemmlab_matmul 1024 1024 1024" "gemmlab_matmul 2048 2048 1024" "gemmlab_matmul 64 4096 4096" \
           "gemmlab_tuned 1024 1024 1024" "gemmlab_tuned 2048 2048 2048" "gemmlab_tuned 64 4096 4096" \
           "torch_matmul 2048 2048 2048" "torch_matmul 64 4096 4096"; do
    read -r kern m n k <<< "$t"
    printf '\n[[cases]]\nkernel = "%s"\nM = %s\nN = %s\nK = %s\n' "$kern" "$m" "$n" "$k"
  done
} > bench/suites/gemm.toml
printf '__pycache__/\n' > .gitignore
git init -q -b main && git add -A && git commit -qm "gemmlab: tiled, autotuned and torch GEMMs and their nightly suite"

night() {  # night N: perfci nightly gemm in the team's repository, as the workflow runs it
  local n=$1 s=$SECONDS rc=0
  echo "== night $n at $(git rev-parse --short HEAD)"
  timeout "$(left)" python3 -m perfci nightly gemm --out "$R/n$n" --device cuda "${EXTRA[@]}" \
    > "$R/n$n.out" 2> "$R/n$n.err" || rc=$?
  echo "night $n: exit $rc [$((SECONDS - s)) s, at $((SECONDS - T0)) s]"
  [[ -f $R/n$n/verdict.json ]] && python3 - "$R/n$n" <<'PY'
import json, sys
v = json.load(open(sys.argv[1] + "/verdict.json"))
print(f"  exit {v['exit_code']}: {v['verdict']}")
for c in v.get("confirmed") or []:
    print(f"  confirmed: {c['kernel']} {c.get('shape', '')} {c['verdict']} {c.get('ratio', '')} ({c.get('rounds', '')} rounds)")
if v.get("culprit"):
    print(f"  culprit: {v['culprit']['sha'][:12]} {v['culprit']['subject']}")
for st in v["stages"]:
    print(f"  stage {st['name']}: {st.get('seconds', '')} s: {st.get('detail', '')[:200]}")
for note in v.get("notes", []):
    print(f"  note: {note[:200]}")
PY
}

plant() {  # plant EXPR: the tiled GEMM walks EXPR more of K, multiplied by zero
  python3 - "$1" <<'PY'
import sys
path = "kernels/gemm.py"
src = open(path).read()
end = "    c = acc.to(c_ptr.dtype.element_ty)\n"
plant = f"""\
    for k0 in range(0, {sys.argv[1]}, BLOCK_K):  # walk K again, multiplied by zero
        k = (k0 % K) + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += 0.0 * tl.dot(a, b)
"""
assert end in src
open(path, "w").write(src.replace(end, plant + end))
PY
  git add -A && git commit -qm "gemm: walk K again" && echo "planted: $(git rev-parse --short HEAD) ($1)"
}

eight_commits() {  # eight commits, the third the plant
  local i
  for i in 1 2; do printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"; done
  plant "$1"
  for i in 4 5 6 7 8; do printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"; done
}

state() {
  git rev-parse HEAD; git branch --show-current; git status --porcelain --untracked-files=all
  git diff --cached --stat; git stash list; git worktree list
}

{
  python3 -c "import perfci, torch, triton; print('perfci', perfci.__file__, 'torch', torch.__version__, 'triton', triton.__version__)"
  case $MODE in
    bisect)
      # where a fresh process's time goes, per case (phases in the JSON log), cold then warm caches
      measure run-cold 120 gemm --device cuda
      measure run-warm 120 gemm --device cuda
      eight_commits "K // 5"
      state > "$R/state-before.txt"
      s=$SECONDS; rc=0
      timeout "$(left)" python3 -m perfci bisect HEAD~8 HEAD --suite gemm --case 'gemmlab_matmul,1024x1024x1024,fp16' \
        --device cuda --format json > "$R/bisect.json" 2> "$R/bisect.err" || rc=$?
      echo "bisect: exit $rc [$((SECONDS - s)) s]"
      tail -n 25 "$R/bisect.err"
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['status'], (r.get('culprit') or {}).get('sha','')[:12], (r.get('culprit') or {}).get('subject',''))" "$R/bisect.json"
      state > "$R/state-after.txt"; diff "$R/state-before.txt" "$R/state-after.txt" && echo "repository as before"
      ;;
    nights)
      night 1
      for ((i = 2; i <= ${NIGHTS:-3}; i++)); do
        printf 'note %s\n' "$i" >> USAGE.md; git add -A; git commit -qm "docs: note $i"; night "$i"
      done
      ;;
    red)
      night 1
      eight_commits "${PLANT:-K // 10}"
      echo "work in progress" > USAGE.md && git stash push -q -m "team: an idea for later"
      echo "notes" > scratch.txt
      state > "$R/state-before.txt"
      night 2
      state > "$R/state-after.txt"; diff "$R/state-before.txt" "$R/state-after.txt" && echo "repository as before"
      ;;
  esac
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | tee "$R/log.txt"
cd / && pack
