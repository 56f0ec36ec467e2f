#!/usr/bin/env bash
# A known change, planted in a throwaway copy of this tree, judged the way a user would judge it.
# The plants are named in benchmarks/gpu/plants.sh (group, spill, stages, warps8, gemv-tile,
# masked-k:T:G); this checkout is never edited.
#
#   PLANTS        plants, each judged on its own against the unchanged code (default "group")
#   SUITE         suite or suite file                 (default benchmarks/gpu/cases/explain.toml)
#   JUDGE         compare (default): `perfci run SUITE` on the unchanged copy, on each planted copy,
#                 and on the unchanged copy again (base2: the A/A), each run's git_sha its name;
#                 then `perfci compare base X --explain` (text and json) for X in base2 and PLANTS.
#                 confirm: per plant, a two-commit repository (the code, then the plant) and
#                 `perfci confirm HEAD~1 HEAD --suite SUITE [--cases CASES] CONFIRM_ARGS` (json).
#   CASES         confirm: a --cases file, one 'kernel,shape,dtype' a line (default: every case)
#   CONFIRM_ARGS  confirm: more options, e.g. "--no-common-mode --min-rounds 5 --max-rounds 5"
#   PERFCI_ARGS   compare: more `perfci run` options, e.g. "--filter kernel=gemv" (split on spaces)
#   STEP_TIMEOUT  seconds per perfci run (default 150); BUDGET_S (default 560)
#   DEVICE        cuda (default), or cpu: a dry run through the Triton interpreter (the plants edit
#                 the NVIDIA tables, so there it tests the plumbing, not a slowdown)
#
# Usage, from the repository root:  bash benchmarks/gpu/plant_demo.sh
# Outputs in $OUT/r: compare: run-V.csv and .log per run, explain-X.txt and explain-X.json;
# confirm: confirm-X.json and .err; log.txt; and $OUT/results.tgz.
# Dry run on the CPU (about a minute on two cores):
#   DEVICE=cpu SUITE=smoke PERFCI_ARGS="--filter kernel=gemv" PLANTS=gemv-tile OUT=/tmp/plant \
#     bash benchmarks/gpu/plant_demo.sh
source benchmarks/gpu/setup.sh
source benchmarks/gpu/plants.sh
PLANTS=${PLANTS:-group}; SUITE=${SUITE:-benchmarks/gpu/cases/explain.toml}; JUDGE=${JUDGE:-compare}
STEP_TIMEOUT=${STEP_TIMEOUT:-150}; DEVICE=${DEVICE:-cuda}
[[ $DEVICE == cpu ]] && export TRITON_INTERPRET=1 || export TRITON_INTERPRET=0
read -r -a EXTRA <<< "${PERFCI_ARGS:-}"
read -r -a CONFIRM <<< "${CONFIRM_ARGS:-}"
HERE=$PWD
# A suite given as a file is read from this checkout; a suite name from the copy's suites/.
[[ -f $SUITE ]] && SUITE=$HERE/$SUITE
[[ -n ${CASES:-} && -f $CASES ]] && CASES=$HERE/$CASES
demo_git

judge_compare() {
  for v in base $PLANTS; do
    copy_tree "/tmp/plant-$v"
    [[ $v == base ]] || (cd "/tmp/plant-$v" && plant "$v") || { echo "plant $v failed"; return 2; }
  done
  for v in base $PLANTS base2; do
    local d=/tmp/plant-$v s=$SECONDS rc=0
    [[ $v == base2 ]] && d=/tmp/plant-base
    if (( $(left) < STEP_TIMEOUT )); then echo "skip run $v ($(left) s left)"; continue; fi
    (cd "$d" && PYTHONPATH=/tmp/site:$d PERFCI_GIT_SHA=$v timeout "$STEP_TIMEOUT" python3 -m perfci run "$SUITE" \
       --device "$DEVICE" "${EXTRA[@]}" --out "$R/run-$v.csv" --format none > "$R/run-$v.log" 2>&1) || rc=$?
    echo "run $v: exit $rc [$((SECONDS - s)) s]"
  done
  for v in base2 $PLANTS; do
    [[ -f $R/run-base.csv && -f $R/run-$v.csv ]] || continue
    python3 -m perfci compare "$R/run-base.csv" "$R/run-$v.csv" --explain > "$R/explain-$v.txt" 2>&1
    echo "compare base $v --explain: exit $?"; cat "$R/explain-$v.txt"
    python3 -m perfci compare "$R/run-base.csv" "$R/run-$v.csv" --explain --format json \
      > "$R/explain-$v.json" 2>/dev/null
  done
}

judge_confirm() {
  local cases=(); [[ -n ${CASES:-} ]] && cases=(--cases "$CASES")
  for v in $PLANTS; do
    local demo=/tmp/plant-confirm-$v rc=0
    copy_tree "$demo"
    (cd "$demo" && printf '__pycache__/\n' > .gitignore && git init -q -b main && git add -A \
       && git commit -qm "unchanged" && plant "$v" && git commit -qam "plant $v" && git show --stat HEAD | tail -2) \
       || { echo "plant $v failed"; continue; }
    if (( $(left) < 60 )); then echo "skip confirm $v ($(left) s left)"; continue; fi
    (cd "$demo" && PYTHONPATH=/tmp/site:$demo timeout $(( $(left) - 20 )) python3 -m perfci confirm HEAD~1 HEAD \
       --suite "$SUITE" "${cases[@]}" --device "$DEVICE" --budget $(( $(left) - 60 )) "${CONFIRM[@]}" \
       --format json > "$R/confirm-$v.json" 2> "$R/confirm-$v.err") || rc=$?
    echo "confirm unchanged vs $v: exit $rc"
    grep -v -i warning "$R/confirm-$v.err" | tail -8
    [[ -s $R/confirm-$v.json ]] || continue
    python3 - "$R/confirm-$v.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    print(f"{c['kernel']} {c['shape']}: {c['verdict']} {100 * (c['ratio'] - 1):+.2f}% "
          f"[{100 * (c['ci_low'] - 1):+.2f}, {100 * (c['ci_high'] - 1):+.2f}]")
print("suite:", d["summary"]["suite"]["verdict"], d["summary"]["suite"]["reason"])
PY
  done
}

{
  echo "plants=[$PLANTS] suite=$SUITE judge=$JUDGE device=$DEVICE git=$(git rev-parse --short HEAD 2>/dev/null)"
  case $JUDGE in
    compare) judge_compare ;;
    confirm) judge_confirm ;;
    *) echo "plant_demo: JUDGE must be compare or confirm, not '$JUDGE'" ;;
  esac
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | grep --line-buffered -v -i warning | tee "$R/log.txt"
pack
