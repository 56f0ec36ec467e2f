#!/usr/bin/env bash
# Whole `perfci nightly` nights on real GPUs, in a throwaway repository built from this tree:
# clean nights, then a night after a planted regression that the nightly must confirm, bisect
# to its commit and write up as an issue body.
#
#   night 1          each suite judged against the committed baseline BASELINE_DIR/SUITE.csv
#                    (recorded on another commit, so confirm is skipped), then appended to a new
#                    history store $OUT/r/store;
#   nights 2..N-1    one harmless commit each, judged against the store (pooled from 2 nights on);
#   night N          after COMMITS commits, the CULPRIT-th of which plants PLANT
#                    (benchmarks/gpu/plants.sh): judged against the store, confirmed at the last
#                    good night's commit, bisected with --jobs JOBS, the issue body written.
# On a 2-GPU machine the suites of a night run side by side, decode on GPU 0 and prefill on GPU 1
# (as the workflow's per-GPU jobs do); decode's bisect then takes both GPUs, waiting on the
# per-GPU lock while prefill still measures. Afterwards the demo tree must be as it was: no
# stash, no worktree, nothing modified (printed at the end).
#
#   SUITES        (default "decode prefill")      NIGHTS   2 or more (default 2)
#   PLANT         a plant name (default gemv-tile) COMMITS  commits before night N (default 5)
#   CULPRIT       which of them plants (default 3) JOBS     bisect --jobs (default 2)
#   BASELINE_DIR  (default baselines/h200)         DEVICE   auto (default) or cpu
#   N1_TIMEOUT, N2_TIMEOUT  seconds for a clean night and for night N (default 200, 370)
#   CONFIRM_ARGS, BISECT_ARGS  the nightly's --confirm-args / --bisect-args from night 2 on
#                 (default "--budget 100 --max-rounds 12", "--budget 90 --total-budget 400")
#
# Usage, from the repository root:  bash benchmarks/gpu/nightly_demo.sh
# Outputs in $OUT/r: nN/SUITE/ (the nightly's files: verdict.json, summary.md, issue.md, ...),
# nN-SUITE.out/.err, store/, history-check.md, demo-log.txt (the demo repository's log), log.txt;
# $OUT/results.tgz.
# Dry run on the CPU (4-10 minutes a night on two busy cores; gemv-tile changes nothing there, so night N
# stays green):
#   SUITES=smoke DEVICE=cpu BASELINE_DIR=baselines/cpu JOBS=1 N1_TIMEOUT=900 N2_TIMEOUT=900 BUDGET_S=3000 \
#     CONFIRM_ARGS="--min-rounds 3 --max-rounds 3 --budget 60" OUT=/tmp/o bash benchmarks/gpu/nightly_demo.sh
source benchmarks/gpu/setup.sh
source benchmarks/gpu/plants.sh
SUITES=${SUITES:-"decode prefill"}; DEVICE=${DEVICE:-auto}; JOBS=${JOBS:-2}; NIGHTS=${NIGHTS:-2}
PLANT=${PLANT:-gemv-tile}; COMMITS=${COMMITS:-5}; CULPRIT=${CULPRIT:-3}
BASELINE_DIR=${BASELINE_DIR:-baselines/h200}; N1_TIMEOUT=${N1_TIMEOUT:-200}; N2_TIMEOUT=${N2_TIMEOUT:-370}
CONFIRM_ARGS=${CONFIRM_ARGS:-"--budget 100 --max-rounds 12"}; BISECT_ARGS=${BISECT_ARGS:-"--budget 90 --total-budget 400"}
(( NIGHTS >= 2 )) || { echo "nightly_demo: NIGHTS must be 2 or more" >&2; exit 2; }
[[ $DEVICE == cpu ]] && export TRITON_INTERPRET=1 || export TRITON_INTERPRET=0
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
HERE=$PWD
DEMO=/tmp/nightly-demo; STORE="$R/store"
rm -rf "$STORE"
copy_tree "$DEMO"
mkdir -p "$DEMO/baselines" && cp -r "$BASELINE_DIR" "$DEMO/baselines/"
export PYTHONPATH=/tmp/site:$DEMO
demo_git
cd "$DEMO" || exit 2
printf '__pycache__/\n' > .gitignore
git init -q -b main && git add -A && git commit -qm "base: perfci $(cd "$HERE" && git rev-parse --short HEAD 2>/dev/null || echo tree)"

night() {  # night N SUITE [nightly option ...]: one suite's night, a GPU per suite when there are two
  local n=$1 suite=$2; shift 2
  local s=$SECONDS limit=$N1_TIMEOUT rc=0 jobs=$JOBS pin=()
  [[ $n == "$NIGHTS" ]] && limit=$N2_TIMEOUT
  if [[ $DEVICE != cpu && $GPUS -ge 2 && $suite == prefill ]]; then
    pin=(env CUDA_VISIBLE_DEVICES=1); jobs=1
  fi
  "${pin[@]}" timeout "$limit" python3 -m perfci nightly "$suite" --out "$R/n$n/$suite" --history "$STORE" \
    --device "$DEVICE" --jobs "$jobs" "$@" > "$R/n$n-$suite.out" 2> "$R/n$n-$suite.err" || rc=$?
  echo "night $n $suite: exit $rc [$((SECONDS - s)) s, at $((SECONDS - T0)) s]"
  cat "$R/n$n-$suite.out"
}

{
  echo "== night 1 at $(git rev-parse --short HEAD), against the committed baselines"
  for suite in $SUITES; do
    night 1 "$suite" --baseline "baselines/$(basename "$BASELINE_DIR")/$suite.csv" &
  done
  wait
  for n in $(seq 2 $((NIGHTS - 1))); do
    echo "night $n" >> NOTES.md && git add NOTES.md && git commit -qm "docs: before night $n"
    echo "== night $n at $(git rev-parse --short HEAD), against the store"
    for suite in $SUITES; do
      night "$n" "$suite" --confirm-args "$CONFIRM_ARGS" --bisect-args "$BISECT_ARGS" &
    done
    wait
  done
  for i in $(seq "$COMMITS"); do
    if [[ $i -eq $CULPRIT ]]; then
      plant "$PLANT" && git diff --stat && git commit -qam "tune: $PLANT"
    else
      echo "note $i" >> NOTES.md && git add NOTES.md && git commit -qm "docs: note $i"
    fi
  done
  git log --oneline | head -$((COMMITS + 2))
  echo "== night $NIGHTS at $(git rev-parse --short HEAD), against the store"
  for suite in $SUITES; do
    night "$NIGHTS" "$suite" --confirm-args "$CONFIRM_ARGS" --bisect-args "$BISECT_ARGS" &
  done
  wait
  echo "== the demo tree afterwards"
  echo "status: [$(git status --porcelain)]"; echo "stash: [$(git stash list)]"
  echo "worktrees:"; git worktree list; echo "HEAD $(git rev-parse --short HEAD) on $(git branch --show-current)"
  python3 -m perfci history check "$STORE" --format table > "$R/history-check.md" 2>&1
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | grep --line-buffered -v -i "warning" | tee "$R/log.txt"
git -C "$DEMO" log --stat > "$R/demo-log.txt"
cd "$HERE" && pack
