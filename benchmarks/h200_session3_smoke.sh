#!/usr/bin/env bash
# Third H200 session (2026-11-30), first call with the gate in perfci: does it work,
# and what does the harness cost? GPU tests of the hold, the backends' GPU tests,
# the run-to-run subset with each isolation, a one-case run twice, and the subset
# with gating off and on while every host core spins (a busy CI host).
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
SUB=benchmarks/h200_decode_rtr.toml
ONE=(decode --filter 'kernel=splitk_decode[m_fast=1],M=16,N=1024')
t() { local s=$SECONDS; "$@"; echo "[$((SECONDS - s)) s] $*"; }
{
  t timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/measure/test_hold_gpu.py \
      tests/measure/test_backends.py 2>&1 | tail -15
  t timeout 120 python3 -m perfci run $SUB --out "$OUT/sub-shared.csv" --log-json "$OUT/sub-shared.jsonl" --format none
  t timeout 120 python3 -m perfci run $SUB --isolation fork --out "$OUT/sub-fork.csv" --format none
  t timeout 60 python3 -m perfci run "${ONE[@]}" --out "$OUT/one1.csv" --format none
  t timeout 60 python3 -m perfci run "${ONE[@]}" --out "$OUT/one2.csv" --log-json "$OUT/one2.jsonl" --format none
  for i in $(seq "$(nproc)"); do python3 -c 'while True: pass' & done
  t timeout 120 python3 -m perfci run $SUB --gate none --out "$OUT/sub-loaded-ungated.csv" --format none
  t timeout 120 python3 -m perfci run $SUB --out "$OUT/sub-loaded.csv" --log-json "$OUT/sub-loaded.jsonl" --format none
  kill $(jobs -p) 2>/dev/null
  python3 -m perfci compare "$OUT/sub-shared.csv" "$OUT/sub-loaded.csv" --format table 2>&1 | tail -30
  python3 -m perfci compare "$OUT/sub-shared.csv" "$OUT/sub-loaded-ungated.csv" --format table 2>&1 | tail -30
  cut -d, -f1-3,7,14,18-20 "$OUT/sub-loaded.csv" | head -30
} 2>&1 | grep -v -i "warning" | tee "$OUT/log.txt"
