#!/usr/bin/env bash
# A kernel team's repository through two nights on a GPU: examples/kernel-repo (gemmlab, its
# own Triton GEMM in a package named `kernels`) as a git repository of its own, perfci the
# installed tool (the wheel carried in .whl/; nothing of perfci's checkout on the path).
#
#   night 1   the first commit: recorded into the team's history store
#   commits   five, of which the third makes the GEMM walk part of K again (PLANT_RANGE) with a
#             zero multiplier (slower, still correct)
#   night 2   red: compare flags, confirm's paired rounds decide, bisect names the commit;
#             then the team's HEAD, index, stash and worktrees are checked against before
#
#   PLANT_RANGE    the plant's extra walk over K, a Triton expression (default "K // 8": about
#                  +12% on a GPU; the CPU dry run takes "8 * K", past its drift)
#   SHAPES         "M N K" triples of the GPU suite, fp16 (default "1024 1024 1024;2048 2048 1024")
#   NIGHT_ARGS     more `perfci nightly` options (default "--no-canary")
#   BUDGET_S       the whole script's seconds (default 560)
#   DEVICE         auto (default) or cpu (a dry run through the Triton interpreter, tiny shapes)
#
# Needs the perfci wheel in .whl/ (python3 -m pip wheel --no-deps --no-build-isolation -w .whl .).
# Usage, from perfci's repository root:  bash benchmarks/gpu/user_repo_nightly.sh
# Outputs in $OUT/r: n1/ and n2/ (each night's verdict.json, summary.md, issue.md, run.csv),
# nN.out/.err, state-before.txt / state-after.txt (the team's repository around night 2), log.txt; results.tgz.
source benchmarks/gpu/setup.sh
PLANT_RANGE=${PLANT_RANGE:-"K // 8"}; DEVICE=${DEVICE:-auto}; NIGHT_ARGS=${NIGHT_ARGS:-"--no-canary"}
SHAPES=${SHAPES:-"1024 1024 1024;2048 2048 1024"}
HERE=$PWD; TEAM=/tmp/gemmlab
rm -rf "$TEAM" /tmp/gemmlab-perf-history "$R"/n[0-9]*
cp -r examples/kernel-repo "$TEAM"
export PYTHONPATH=/tmp/site  # the installed tool only: the team's `kernels` must be the one imported
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
if [[ $DEVICE == cpu ]]; then
  export TRITON_INTERPRET=1
  DTYPE=fp32; SHAPES="16 16 32"
  NIGHT=(--device cpu --confirm-args "--min-rounds 3 --max-rounds 3 --repeats 1 --min-effect 25"
         --bisect-args "--min-rounds 2 --min-effect 50 --budget 400" --bench-args "--repeats 1 --iters 60")
  PLANT_RANGE="8 * K"
else
  export TRITON_INTERPRET=0
  DTYPE=fp16; NIGHT=(--device cuda)
fi
read -r -a EXTRA <<< "$NIGHT_ARGS"
demo_git
cd "$TEAM" || exit 2
{
  printf 'name = "gemm"\ndescription = "gemmlab_matmul, %s"\ndevices = ["cuda", "cpu"]\ndtype = "%s"\n' "$DTYPE" "$DTYPE"
  IFS=';' read -r -a triples <<< "$SHAPES"
  for t in "${triples[@]}"; do
    read -r m n k <<< "$t"
    printf '\n[[cases]]\nkernel = "gemmlab_matmul"\nM = %s\nN = %s\nK = %s\n' "$m" "$n" "$k"
  done
} > bench/suites/gemm.toml
printf '__pycache__/\n' > .gitignore
git init -q -b main && git add -A && git commit -qm "gemmlab: a tiled Triton GEMM and its nightly suite"

night() {  # night N: perfci nightly gemm in the team's repository
  local n=$1 s=$SECONDS rc=0
  echo "== night $n at $(git rev-parse --short HEAD)"
  timeout "$(left)" python3 -m perfci nightly gemm --out "$R/n$n" "${NIGHT[@]}" "${EXTRA[@]}" \
    > "$R/n$n.out" 2> "$R/n$n.err" || rc=$?
  echo "night $n: exit $rc [$((SECONDS - s)) s, at $((SECONDS - T0)) s]"
  grep -E "^perfci nightly: " "$R/n$n.err" | cut -c1-240
  [[ -f $R/n$n/verdict.json ]] && python3 - "$R/n$n" <<'PY'
import json, sys
v = json.load(open(sys.argv[1] + "/verdict.json"))
print(f"  exit {v['exit_code']}: {v['verdict']}")
for c in v.get("confirmed") or []:
    print(f"  confirmed: {c['kernel']} {c.get('shape', '')} {c['verdict']} {c.get('ratio', '')}")
if v.get("culprit"):
    print(f"  culprit: {v['culprit']['sha'][:12]} {v['culprit']['subject']}")
for st in v["stages"]:
    print(f"  stage {st['name']}: {st.get('seconds', '')} s: {st.get('detail', '')[:160]}")
PY
}

state() {  # what night 2 must leave as it found it
  git rev-parse HEAD; git branch --show-current; git status --porcelain --untracked-files=all
  git diff --cached --stat; git stash list; git worktree list
}

{
  python3 -c "import perfci, torch, triton; print('perfci', perfci.__file__, 'torch', torch.__version__, 'triton', triton.__version__)"
  python3 -m perfci config | head -20
  night 1
  gemm=$(cat kernels/gemm.py)
  c() { printf '%s\n' "$3" > "$2" && git add -A && git commit -qm "$1"; }
  c "docs: usage" USAGE.md "perfci run gemm"
  c "docs: shapes" USAGE.md "perfci run gemm; GPU shapes"
  python3 - "$PLANT_RANGE" <<'PY'
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
  git add -A && git commit -qm "gemm: walk K again"; echo "planted: $(git rev-parse --short HEAD) gemm: walk K again"
  c "docs: the nightly" USAGE.md "perfci nightly gemm"
  c "docs: baselines" USAGE.md "perfci nightly gemm; baselines"
  echo "work in progress" > USAGE.md && git stash push -q -m "team: an idea for later"
  echo "staged" >> README.md && git add README.md && echo "notes" > scratch.txt
  state > "$R/state-before.txt"
  night 2
  state > "$R/state-after.txt"
  if diff "$R/state-before.txt" "$R/state-after.txt" > "$R/state-diff.txt"; then
    echo "the team's repository after night 2: as before (HEAD, branch, status, index, stash, worktrees)"
  else
    echo "the team's repository changed:"; cat "$R/state-diff.txt"
  fi
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | tee "$R/log.txt"
cd "$HERE" && pack
