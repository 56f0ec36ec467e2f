#!/usr/bin/env bash
# Fifth H200 session, third call.
# 1. The grouped launch order undone (GROUP_M 8 -> 1 on the sm_90 16-bit large-M row, which the
#    tiled and persistent bf16 kernels read) on the whole prefill suite: base, group, base2, each
#    `perfci run prefill` in a copy of this tree; then compare --explain (on the CPU afterwards).
#    In the 3-case explain suite of call 2 the 8192^3 case ran +5.7% slower at a 4.5% lower clock
#    and compare, lacking three power-limited cases to say what the device's clock did, divided the
#    clock out (+1.0%: unchanged). The prefill suite has the vendor cases as the device's reference.
# 2. matmul_tiled on the M <= 64 row, 4 stages (the table) vs 6 (call 2: 64x8192x8192 ran 19% faster),
#    `perfci confirm --suite benchmarks/h200_small_m_cases.toml` (6 cases, fork isolation).
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
R="$OUT/r"; mkdir -p "$R"; HERE=$PWD; T0=$SECONDS
export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
       GIT_COMMITTER_EMAIL=perfci@example.invalid
{
  for v in base group; do
    rm -rf "/tmp/gr-$v" && mkdir -p "/tmp/gr-$v" && cp -r perfci kernels suites pyproject.toml "/tmp/gr-$v/"
  done
  sed -i 's/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3)),/(_BIG, KernelConfig(128, 256, 64, GROUP_M=1, num_warps=8, num_stages=3)),  # plant/' /tmp/gr-group/kernels/_configs.py
  echo "group plant: $(grep -c '# plant' /tmp/gr-group/kernels/_configs.py) line(s)"
  for v in base group base2; do
    d=/tmp/gr-${v%2}; s=$SECONDS
    (cd "$d" && PYTHONPATH=/tmp/site:$d PERFCI_GIT_SHA=$v timeout 150 python3 -m perfci run prefill \
       --out "$R/prefill-$v.csv" --format none > "$R/prefill-$v.log" 2>&1)
    echo "prefill $v: exit $? [$((SECONDS - s)) s]"
  done
  python3 -m perfci compare "$R/prefill-base.csv" "$R/prefill-group.csv" --explain --only-changed > "$R/group-explain.txt" 2>&1
  echo "compare base group: exit $?"; head -c 6000 "$R/group-explain.txt"
  echo "== stages on the M <= 64 row [at $((SECONDS - T0)) s]"
  DEMO=/tmp/stages-demo; rm -rf "$DEMO" && mkdir -p "$DEMO" && cp -r perfci kernels suites pyproject.toml "$DEMO/"
  cp benchmarks/h200_small_m_cases.toml "$DEMO/small-m.toml"
  (cd "$DEMO" && printf '__pycache__/\n' > .gitignore && git init -q -b main && git add -A && git commit -qm "4 stages" \
     && sed -i 's/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=4)),/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=6)),  # plant/' kernels/_configs.py \
     && git commit -qam "6 stages" && git show --stat HEAD | tail -2 \
     && PYTHONPATH=/tmp/site:$DEMO timeout $((560 - (SECONDS - T0))) python3 -m perfci confirm HEAD~1 HEAD \
        --suite small-m.toml --min-rounds 4 --max-rounds 6 --budget $((420 - (SECONDS - T0))) \
        --format json > "$R/stages.json" 2> "$R/stages.err"; echo "confirm 4 vs 6 stages: exit $?")
  grep -v -i warning "$R/stages.err" | tail -6
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | grep --line-buffered -v -i "warning" | tee "$R/log.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
