#!/usr/bin/env bash
# Third H200 session (2026-11-30), second call: issue 9's A/A nights with the gated
# measurement. Three quiet runs of decode and prefill (night 1 becomes the new
# baseline), then five fresh runs of the run-to-run subset, as time allows within
# one call. Everything lands in one archive (the call brings back at most 8 files).
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
R="$OUT/r"; mkdir -p "$R"
start=$SECONDS
left() { echo $((560 - (SECONDS - start))); }
step() {  # step NAME TIMEOUT ARGS...: run perfci run ARGS if the time left allows
  local name=$1 limit=$2; shift 2
  if (( $(left) < limit )); then echo "skip $name ($(left) s left)"; return; fi
  local s=$SECONDS
  timeout "$limit" python3 -m perfci run "$@" --out "$R/$name.csv" --log-json "$R/$name.jsonl" --format none
  echo "[$((SECONDS - s)) s] $name"
}
{
  step decode-q1 150 decode
  step prefill-q1 200 prefill
  for i in 1 2 3 4 5; do step rtr$i 40 benchmarks/h200_decode_rtr.toml; done
  step decode-q2 150 decode
  step prefill-q2 200 prefill
  step decode-q3 150 decode
  step prefill-q3 200 prefill
} 2>&1 | grep -v -i warning | grep -v "^\[[0-9]*/[0-9]*\]" | tee "$R/log.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
