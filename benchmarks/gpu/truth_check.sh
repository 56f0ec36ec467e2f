#!/usr/bin/env bash
# Is the number perfci prints the kernel's real time? perfci run with each of its timers, then
# an independent measurement of the same cases set beside them.
#
#   SUITE         suite or suite file               (default benchmarks/gpu/cases/subset.toml)
#   FILTER        perfci run --filter for every step (default: every case)
#   TIMERS        perfci run --timer values, measured in turn (default "events profiler")
#   NCU           1: Nsight Compute on the same cases, each in its own process with clocks left
#                 alone (benchmarks/gpu/truth_ncu.py; NVIDIA with ncu only), beside every timer's
#                 CSV: $OUT/r/truth-ncu.csv (default 1)
#   PROFILER_SUM  1: also benchmarks/gpu/truth_vs_profiler.py: device events against the sum of
#                 torch.profiler's kernel durations, in one process (default 0)
#   STEP_TIMEOUT  seconds per step (default 150); BUDGET_S (default 560)
#
# Usage, from the repository root:  bash benchmarks/gpu/truth_check.sh
# Outputs: $OUT/r/TIMER.csv per timer, truth-ncu.csv, truth-profiler.csv, log.txt; $OUT/results.tgz.
# Reading: TIMER/ncu per case in truth-ncu.csv (1.00 = ncu's time) and, for clocked runs,
# TIMER/ncu_cycles (the same in cycles: ncu replays one kernel at a time, so a power-capped GPU
# runs it at a higher clock than under perfci's back-to-back launches).
source benchmarks/gpu/setup.sh
export TRITON_INTERPRET=0
SUITE=${SUITE:-benchmarks/gpu/cases/subset.toml}; TIMERS=${TIMERS:-"events profiler"}
NCU=${NCU:-1}; STEP_TIMEOUT=${STEP_TIMEOUT:-150}
sel=(); [[ -n ${FILTER:-} ]] && sel=(--filter "$FILTER")
{
  echo "suite=$SUITE filter=[${FILTER:-}] timers=[$TIMERS] git=$(git rev-parse --short HEAD 2>/dev/null)"
  csvs=()
  for timer in $TIMERS; do
    measure "$timer" "$STEP_TIMEOUT" "$SUITE" "${sel[@]}" --timer "$timer"
    [[ -f $R/$timer.csv ]] && csvs+=("$R/$timer.csv")
  done
  if [[ $NCU == 1 ]] && (( $(left) > 60 )); then
    timeout $(( $(left) - 15 )) python3 benchmarks/gpu/truth_ncu.py --suite "$SUITE" "${sel[@]}" \
      --compare "${csvs[@]}" --out "$R/truth-ncu.csv"
    echo "truth_ncu: exit $?"
  fi
  if [[ ${PROFILER_SUM:-0} == 1 ]] && (( $(left) > 40 )); then
    timeout $(( $(left) - 10 )) python3 benchmarks/gpu/truth_vs_profiler.py --suite "$SUITE" "${sel[@]}" \
      --out "$R/truth-profiler.csv" | tail -20
    echo "truth_vs_profiler: exit $?"
  fi
} 2>&1 | grep --line-buffered -v -i warning | grep --line-buffered -v "^\[[0-9]*/[0-9]*\]" | tee "$R/log.txt"
pack
