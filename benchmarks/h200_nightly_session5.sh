#!/usr/bin/env bash
# Issue 11 on real GPUs: two whole `perfci nightly` nights (decode + prefill) in a throwaway
# repository, the second with a planted regression on a branch of five commits.
#
#   night 1 (base commit): each suite judged against the committed baseline
#           baselines/h200/SUITE.csv (recorded by an earlier session, on another commit),
#           then appended to a new history store;
#   commits: four harmless ones and, third of five, "tune: gemv tile 4K elements"
#           (kernels/_configs.py: GEMV keeps 4096 instead of 8192 elements per program;
#           an earlier H200 measurement, 8x512 vs 8x1024 tiles, suggests a few tens of percent);
#   night 2 (HEAD): each suite judged against the store's one night, confirm at night 1's
#           commit, bisect with --jobs $JOBS, the issue body.
# On the 2-GPU kind the suites of a night run side by side, decode on GPU 0 and prefill on
# GPU 1 (as the workflow's per-GPU jobs do); decode's bisect then takes both GPUs, waiting
# on the per-GPU lock while prefill still measures. Afterwards the demo tree must be as it
# was: no stash, no worktree, nothing modified.
#
# usage on the device:  bash benchmarks/h200_nightly_session5.sh
# dry run on the CPU:   SUITES=smoke DEVICE=cpu BASELINE_DIR=baselines/cpu JOBS=1 OUT=/tmp/o \
#                         bash benchmarks/h200_nightly_session5.sh
source benchmarks/device_setup.sh
SUITES=${SUITES:-"decode prefill"}; DEVICE=${DEVICE:-auto}; JOBS=${JOBS:-2}
BASELINE_DIR=${BASELINE_DIR:-baselines/h200}; N1_TIMEOUT=${N1_TIMEOUT:-200}; N2_TIMEOUT=${N2_TIMEOUT:-370}
[[ $DEVICE == cpu ]] && export TRITON_INTERPRET=1 || export TRITON_INTERPRET=0
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
R="$OUT/r"; mkdir -p "$R"
HERE=$PWD; T0=$SECONDS
DEMO=/tmp/nightly-demo; STORE="$R/store"
rm -rf "$DEMO" "$STORE" && mkdir -p "$DEMO"
cp -r perfci kernels suites pyproject.toml "$DEMO/"
mkdir -p "$DEMO/baselines" && cp -r "$BASELINE_DIR" "$DEMO/baselines/"
export PYTHONPATH=/tmp/site:$DEMO
export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
       GIT_COMMITTER_EMAIL=perfci@example.invalid
cd "$DEMO" || exit 2
printf '__pycache__/\n' > .gitignore
git init -q -b main && git add -A && git commit -qm "base: perfci $(cd "$HERE" && git rev-parse --short HEAD 2>/dev/null || echo tree)"

night() {  # night N SUITE [nightly option ...]: one suite's night, GPU per suite when there are two
  local n=$1 suite=$2; shift 2
  local gpu=0; [[ $GPUS -ge 2 && $suite == prefill ]] && gpu=1
  local s=$SECONDS NIGHT_TIMEOUT=$N1_TIMEOUT; [[ $n == 2 ]] && NIGHT_TIMEOUT=$N2_TIMEOUT
  if [[ $DEVICE == cpu ]]; then
    timeout "$NIGHT_TIMEOUT" python3 -m perfci nightly "$suite" --out "$R/n$n/$suite" --history "$STORE" \
      --device "$DEVICE" --jobs "$JOBS" "$@" > "$R/n$n-$suite.out" 2> "$R/n$n-$suite.err"
  elif [[ $suite == prefill ]]; then
    CUDA_VISIBLE_DEVICES=$gpu timeout "$NIGHT_TIMEOUT" python3 -m perfci nightly "$suite" --out "$R/n$n/$suite" \
      --history "$STORE" --device "$DEVICE" --jobs 1 "$@" > "$R/n$n-$suite.out" 2> "$R/n$n-$suite.err"
  else
    timeout "$NIGHT_TIMEOUT" python3 -m perfci nightly "$suite" --out "$R/n$n/$suite" --history "$STORE" \
      --device "$DEVICE" --jobs "$JOBS" "$@" > "$R/n$n-$suite.out" 2> "$R/n$n-$suite.err"
  fi
  echo "night $n $suite: exit $? [$((SECONDS - s)) s, at $((SECONDS - T0)) s]"
  cat "$R/n$n-$suite.out"
}

{
  echo "== night 1 at $(git rev-parse --short HEAD), against the committed baselines"
  for suite in $SUITES; do
    night 1 "$suite" --baseline "baselines/$(basename "$BASELINE_DIR")/$suite.csv" &
  done
  wait
  for i in 1 2 3 4 5; do
    if [[ $i -eq 3 ]]; then
      sed -i 's/elems = 4096 if dtype_key == "fp32" else 8192/elems = 4096/' kernels/_configs.py
      git diff --stat
      git commit -qam "tune: gemv tile 4K elements"
    else
      echo "note $i" >> NOTES.md && git add NOTES.md && git commit -qm "docs: note $i"
    fi
  done
  git log --oneline | head -7
  echo "== night 2 at $(git rev-parse --short HEAD), against the store's night"
  CONFIRM="--budget 100 --max-rounds 12"
  for suite in $SUITES; do
    night 2 "$suite" --confirm-args "$CONFIRM" --bisect-args "--repeats 5 --max-repeats 5" &
  done
  wait
  echo "== the demo tree afterwards"
  echo "status: [$(git status --porcelain)]"; echo "stash: [$(git stash list)]"
  echo "worktrees:"; git worktree list; echo "HEAD $(git rev-parse --short HEAD) on $(git branch --show-current)"
  python3 -m perfci history check "$STORE" --format table > "$R/history-check.md" 2>&1
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | grep --line-buffered -v -i "warning" | tee "$R/log.txt"
git -C "$DEMO" log --stat > "$R/demo-log.txt"
cd "$HERE" && tar czf "$OUT/results.tgz" -C "$OUT" r
