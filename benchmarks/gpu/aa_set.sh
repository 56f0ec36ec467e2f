#!/usr/bin/env bash
# An A/A set: the same code measured again and again, so that every difference between the
# runs is noise. Feeds `perfci compare` (any two: every regressed/improved verdict is a false
# alarm), `perfci calibrate` (a device's noise profile) and `perfci history` (a store of nights).
#
#   SUITES        suites or suite files measured in turn each round  (default "decode prefill")
#   RUNS          rounds                                              (default 3)
#   NAME          run name: $OUT/r/SUITE-NAMEi.csv                    (default aa)
#   LOAD          1: every host core spins meanwhile, a busy CI host  (default 0)
#   PERFCI_ARGS   more `perfci run` options for every run, e.g. "--gate none", "--isolation fork",
#                 "--poll-ms 0", "--filter M>=4096" (split on spaces)
#   GPU_TESTS     1: first the GPU tests of the device hold (tests/measure/test_hold_gpu.py)
#   STEP_TIMEOUT  seconds per perfci run (default 220)
#   BUDGET_S      the whole script's seconds (default 560): a run that would not fit is skipped
#   DEVICE        auto (default), cuda, or cpu (a dry run through the Triton interpreter)
#
# Usage, from the repository root:  bash benchmarks/gpu/aa_set.sh
# Outputs: $OUT/r/SUITE-NAMEi.csv and .jsonl per run, $OUT/r/log.txt, $OUT/results.tgz.
# A SUITE given as a file is named by its file name without .toml.
# Dry run on the CPU (about 20 s a run):
#   DEVICE=cpu SUITES=smoke RUNS=2 PERFCI_ARGS="--filter kernel=gemv" OUT=/tmp/aa bash benchmarks/gpu/aa_set.sh
source benchmarks/gpu/setup.sh
SUITES=${SUITES:-"decode prefill"}; RUNS=${RUNS:-3}; NAME=${NAME:-aa}; LOAD=${LOAD:-0}
STEP_TIMEOUT=${STEP_TIMEOUT:-220}; DEVICE=${DEVICE:-auto}
[[ $DEVICE == cpu ]] && export TRITON_INTERPRET=1 || export TRITON_INTERPRET=0
read -r -a EXTRA <<< "${PERFCI_ARGS:-}"
spinners=()
stop_load() { (( ${#spinners[@]} )) && kill "${spinners[@]}" 2>/dev/null; wait "${spinners[@]}" 2>/dev/null; spinners=(); }
{
  trap stop_load EXIT
  echo "suites=[$SUITES] runs=$RUNS name=$NAME load=$LOAD args=[${PERFCI_ARGS:-}] device=$DEVICE" \
       "git=$(git rev-parse --short HEAD 2>/dev/null)"
  if [[ ${GPU_TESTS:-0} == 1 ]]; then
    timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/measure/test_hold_gpu.py 2>&1 | tail -3
  fi
  if [[ $LOAD == 1 ]]; then
    for _ in $(seq "$(nproc)"); do python3 -c 'while True: pass' & spinners+=($!); done
    echo "load: ${#spinners[@]} host cores spinning"
  fi
  for i in $(seq "$RUNS"); do
    for suite in $SUITES; do
      label=$(basename "$suite" .toml)
      measure "$label-$NAME$i" "$STEP_TIMEOUT" "$suite" --device "$DEVICE" "${EXTRA[@]}"
    done
  done
  stop_load
} 2>&1 | grep --line-buffered -v -i warning | grep --line-buffered -v "^\[[0-9]*/[0-9]*\]" | tee "$R/log.txt"
pack
