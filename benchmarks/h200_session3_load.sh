#!/usr/bin/env bash
# Third H200 session (2026-11-30), third call: a fourth quiet night (after the
# shared hold and the shorter warm-up batches: the harness's cost), a night with
# every host core busy, the telemetry poller on against off, and the reported
# times against Nsight Compute. One archive back.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
R="$OUT/r"; mkdir -p "$R"
start=$SECONDS
left() { echo $((570 - (SECONDS - start))); }
step() {  # step NAME TIMEOUT ARGS...: perfci run ARGS, if the time left allows
  local name=$1 limit=$2; shift 2
  if (( $(left) < limit )); then echo "skip $name ($(left) s left)"; return; fi
  local s=$SECONDS
  timeout "$limit" python3 -m perfci run "$@" --out "$R/$name.csv" --log-json "$R/$name.jsonl" --format none
  echo "[$((SECONDS - s)) s] $name"
}
{
  step decode-q4 120 decode
  step prefill-q4 150 prefill
  for i in $(seq "$(nproc)"); do python3 -c 'while True: pass' & done
  step decode-l1 150 decode
  step prefill-l1 180 prefill
  kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
  LARGE=(benchmarks/h200_subset.toml --filter 'M>=4096')
  step poll-on1 40 "${LARGE[@]}" --poll-ms 10
  step poll-off1 40 "${LARGE[@]}" --poll-ms 0
  step poll-on2 40 "${LARGE[@]}" --poll-ms 10
  step poll-off2 40 "${LARGE[@]}" --poll-ms 0
  step truth-events 40 benchmarks/h200_subset.toml
  if (( $(left) > 60 )); then
    timeout $(( $(left) - 15 )) python3 benchmarks/truth_ncu.py --suite benchmarks/h200_subset.toml \
      --compare "$R/truth-events.csv" --out "$R/truth-ncu.csv"
  fi
} 2>&1 | grep -v -i warning | grep -v "^\[[0-9]*/[0-9]*\]" | tee "$R/log.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
