#!/usr/bin/env bash
# Third H200 session (2026-11-30), last call: after the fix to the device timer's
# rate (its host reference now starts after a synchronisation), a quiet night (the
# new baselines) and a night with every host core busy, to see the device clocks
# agree between them and with NVML where the GPU is not power-capped.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
R="$OUT/r"; mkdir -p "$R"
start=$SECONDS
left() { echo $((540 - (SECONDS - start))); }
step() {
  local name=$1 limit=$2; shift 2
  if (( $(left) < limit )); then echo "skip $name ($(left) s left)"; return; fi
  local s=$SECONDS
  timeout "$limit" python3 -m perfci run "$@" --out "$R/$name.csv" --log-json "$R/$name.jsonl" --format none
  echo "[$((SECONDS - s)) s] $name"
}
{
  timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/measure/test_hold_gpu.py 2>&1 | tail -3
  step decode-q5 120 decode
  step prefill-q5 150 prefill
  for i in $(seq "$(nproc)"); do python3 -c 'while True: pass' & done
  step decode-l2 150 decode
  step prefill-l2 180 prefill
  kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
} 2>&1 | grep -v -i warning | grep -v "^\[[0-9]*/[0-9]*\]" | tee "$R/log.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
