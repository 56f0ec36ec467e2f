#!/usr/bin/env bash
# Fifth H200 session, one call: issue 12's planted causes, issue 13's plugin against perfci run,
# and the sm_90 split-K warps question.
#
# 1. compare --explain on three planted causes (benchmarks/h200_explain_cases.toml: matmul_tiled
#    64x8192x8192 on the M<=64 row of the sm_90 16-bit table, 4096^3 and 8192^3 on the large row),
#    each a copy of this tree with one edit of kernels/_configs.py, measured in the order
#    base, spill, stages, group, base2 (base2: the A/A):
#      spill  : large row 8 -> 4 warps (Triton 3.9 here: 1800 B of spill stores, 752 B stack)
#      stages : M<=64 row 4 -> 6 stages (shared memory 96 -> 144 KiB, 8 -> 4 warps per SM)
#      group  : large row GROUP_M 8 -> 1 (launch order undone; registers and shared memory unchanged)
# 2. benchmarks/h200_plugin_vs_run.sh (issue 13), its outputs under $OUT/plugin.
# 3. split-K on sm_90: 4 warps (measured on Triton 3.6, spills 8 B under Triton 3.9's ptxas) against
#    8 warps (spill-free), `perfci confirm --suite decode` on four cases of the non-wide config.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
DEVICE=${DEVICE:-cuda}; [[ $DEVICE == cpu ]] && export TRITON_INTERPRET=1
R="$OUT/r"; mkdir -p "$R"; HERE=$PWD; T0=$SECONDS
plant() {  # plant NAME: one edit of ./kernels/_configs.py; prints how many lines it marked
  case $1 in
    spill)  sed -i 's/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3)),/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=4, num_stages=3)),  # plant/' kernels/_configs.py ;;
    stages) sed -i 's/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=4)),/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=6)),  # plant/' kernels/_configs.py ;;
    group)  sed -i 's/(_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3)),/(_BIG, KernelConfig(128, 256, 64, GROUP_M=1, num_warps=8, num_stages=3)),  # plant/' kernels/_configs.py ;;
    warps8) sed -i 's/return KernelConfig(BLOCK_M=16, BLOCK_N=64, BLOCK_K=block_k, num_warps=4, num_stages=4)/return KernelConfig(BLOCK_M=16, BLOCK_N=64, BLOCK_K=block_k, num_warps=8, num_stages=4)  # plant/' kernels/_configs.py ;;
  esac
  grep -c "# plant" kernels/_configs.py
}
{
  echo "== 1. planted causes through compare --explain"
  SUITE=$HERE/benchmarks/h200_explain_cases.toml
  for v in base spill stages group; do
    rm -rf "/tmp/ex-$v" && mkdir -p "/tmp/ex-$v" && cp -r perfci kernels suites pyproject.toml "/tmp/ex-$v/"
    [[ $v == base ]] || (cd "/tmp/ex-$v" && echo "plant $v: $(plant $v) line(s)")
  done
  for v in base spill stages group base2; do
    d=/tmp/ex-${v%2}; s=$SECONDS
    (cd "$d" && PYTHONPATH=/tmp/site:$d PERFCI_GIT_SHA=$v timeout 120 python3 -m perfci run "$SUITE" \
       --device "$DEVICE" --out "$R/ex-$v.csv" --format none > "$R/ex-$v.log" 2>&1)
    echo "run $v: exit $? [$((SECONDS - s)) s]"
  done
  for v in base2 spill stages group; do
    python3 -m perfci compare "$R/ex-base.csv" "$R/ex-$v.csv" --explain > "$R/explain-$v.txt" 2>&1
    echo "compare base $v --explain: exit $?"; cat "$R/explain-$v.txt"
    python3 -m perfci compare "$R/ex-base.csv" "$R/ex-$v.csv" --explain --format json > "$R/explain-$v.json" 2>/dev/null
  done
  echo "== 2. plugin vs perfci run [at $((SECONDS - T0)) s]"
  OUT=$OUT/plugin DEVICE=$DEVICE bash benchmarks/h200_plugin_vs_run.sh > "$R/plugin.log" 2>&1
  echo "plugin script: exit $?"; tail -n 25 "$OUT/plugin/r/summary.md" 2>/dev/null; cat "$OUT/plugin/r/times.txt" 2>/dev/null
  echo "== 3. split-K sm_90: 4 warps vs 8 [at $((SECONDS - T0)) s]"
  DEMO=/tmp/warps-demo; rm -rf "$DEMO" && mkdir -p "$DEMO" && cp -r perfci kernels suites pyproject.toml "$DEMO/"
  export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
         GIT_COMMITTER_EMAIL=perfci@example.invalid
  printf 'splitk_decode,1x4096x14336,bf16\nsplitk_decode,16x4096x4096,bf16\nsplitk_decode,1x7168x8192,bf16\nsplitk_decode[m_fast=0],64x1024x6144,bf16\n' > /tmp/warps-cases.txt
  (cd "$DEMO" && printf '__pycache__/\n' > .gitignore && git init -q -b main && git add -A && git commit -qm "split-K 4 warps" \
     && echo "plant warps8: $(plant warps8)" && git commit -qam "split-K 8 warps" \
     && PYTHONPATH=/tmp/site:$DEMO timeout $((540 - (SECONDS - T0))) python3 -m perfci confirm HEAD~1 HEAD --suite decode \
        --cases /tmp/warps-cases.txt --device "$DEVICE" --min-rounds 4 --max-rounds 10 --budget $((500 - (SECONDS - T0))) \
        --format json > "$R/warps.json" 2> "$R/warps.err"; echo "confirm 4 vs 8 warps: exit $?")
  grep -v -i warning "$R/warps.err" | tail -8
  python3 -m perfci compile decode --arch sm_90 --filter 'kernel~splitk*' > "$R/compile-sm90-device-triton.txt" 2>&1
  echo "compile on the device's Triton: exit $?"; tail -3 "$R/compile-sm90-device-triton.txt"
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | grep --line-buffered -v -i "warning" | tee "$R/log.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r plugin
