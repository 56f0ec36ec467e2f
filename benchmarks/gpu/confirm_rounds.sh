#!/usr/bin/env bash
# perfci confirm on real kernels: how large are planted changes really, how far apart are runs
# of unchanged code, and how often does confirm's rule decide right? Records rounds of four
# revisions for benchmarks/evidence/confirm_on_h200.py to resample.
#
# In a throwaway repository built from this tree, four revisions (benchmarks/gpu/plants.sh):
#   base; aa = base + an unrelated change (A/A); p3 = aa + masked-k:3:10; p5 = aa + masked-k:5:20
#   (extra fully masked K iterations in matmul_tiled and the GEMV: same result, more work).
# The plants' true sizes are whatever the recorded rounds say.
#
#   MODE       full: first two end-to-end `perfci confirm base aa|p3 --suite` sessions, then record;
#              record: record only (default full)
#   ISOLATION  the warm workers' isolation: shared, fork, or run (default run, confirm's default)
#   CASES      suite file (default benchmarks/gpu/cases/confirm.toml: eight cases, since the
#              common mode needs six)
#   BUDGET_S   the whole script's seconds (default 520); recording fills what is left
#
# Usage, from the repository root:  MODE=record ISOLATION=run bash benchmarks/gpu/confirm_rounds.sh
# Outputs in $OUT/r: rounds-MODE-ISOLATION.jsonl (one line per run: round, position, revision,
# seconds, per case the median and repeats), e2e-aa|p3.json and .err (MODE=full), log.txt;
# $OUT/results.tgz. The recorder is benchmarks/gpu/confirm_record.py.
source benchmarks/gpu/setup.sh
source benchmarks/gpu/plants.sh
export TRITON_INTERPRET=0
MODE=${MODE:-full}; ISOLATION=${ISOLATION:-run}; BUDGET_S=${BUDGET_S:-520}
CASES=${CASES:-benchmarks/gpu/cases/confirm.toml}
HERE=$PWD
DEMO=/tmp/confirm-demo
copy_tree "$DEMO"
cp "$CASES" "$DEMO/cases.toml"
cd "$DEMO" || exit 2
demo_git
git init -q -b main && git add -A && git commit -qm base && git tag base
echo "# an unrelated change" >> suites/smoke.toml && git commit -qam "A/A: no kernel changed" && git tag aa
git checkout -q -b p3 aa && plant masked-k:3:10 && git commit -qam "plant +3% tiled, +10% gemv iterations" && git tag p3
git checkout -q -b p5 aa && plant masked-k:5:20 && git commit -qam "plant +5% tiled, +20% gemv iterations" && git tag p5
git checkout -q main
{
  if [[ $MODE == full ]]; then
    for rev in aa p3; do
      s=$SECONDS; rc=0
      timeout 170 python3 -m perfci confirm base "$rev" --suite cases.toml --max-rounds 10 --format json \
        --isolation "$ISOLATION" > "$R/e2e-$rev.json" 2> "$R/e2e-$rev.err" || rc=$?
      echo "confirm base $rev: exit $rc [$((SECONDS - s)) s]"; tail -3 "$R/e2e-$rev.err"
    done
    git status --porcelain; git worktree list
  fi
  echo "recording for $(( $(left) - 40 )) s"
  python3 "$HERE/benchmarks/gpu/confirm_record.py" "$DEMO" --revs base,aa,p3,p5 --suite "$DEMO/cases.toml" \
    --budget "$(( $(left) - 40 ))" --isolation "$ISOLATION" --out "$R/rounds-$MODE-$ISOLATION.jsonl"
  echo "record exit $? at $((SECONDS - T0)) s"
} 2>&1 | grep --line-buffered -v -i warning | tee "$R/log.txt"
cd "$HERE" && pack
