#!/usr/bin/env bash
# Fourth H200 session (issue 10): perfci confirm --suite (warm workers) on real kernels.
#   MODE=full   : two end-to-end `perfci confirm` sessions (A/A, then the +3% plant), then record rounds
#   MODE=record : record rounds only; ISOLATION=shared (calls 1-2), fork (call 3), or run (next session)
# In a throwaway repository built from this tree, four revisions:
#   base; aa = base + an unrelated change; p3 / p5 = aa + extra fully masked K iterations
#   (same result, more work) in matmul_tiled (3% / 5% more iterations, rounded) and in the
#   GEMV (10% / 20% more: a masked GEMV iteration moves no data, so it costs less than a real one).
# The plants' true sizes are whatever the recorded rounds say (benchmarks/confirm_h200_analysis.py).
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
MODE=${MODE:-full}; BUDGET=${BUDGET:-520}; ISOLATION=${ISOLATION:-shared}
R="$OUT/r"; mkdir -p "$R"
HERE=$PWD; T0=$SECONDS
DEMO=/tmp/confirm-demo
rm -rf "$DEMO" && mkdir -p "$DEMO"
cp -r perfci kernels suites pyproject.toml "$DEMO/"
cp benchmarks/h200_confirm_cases.toml "$DEMO/cases.toml"
plant() {  # plant TILED_PCT GEMV_PCT
  sed -i "s|for k in range(0, tl.cdiv(K, BLOCK_K)):|for k in range(0, tl.cdiv(K, BLOCK_K) + (tl.cdiv(K, BLOCK_K) * $1 + 50) // 100):  # plant|" kernels/matmul_tiled.py
  sed -i "s|for k in range(0, tl.cdiv(K, BLOCK_K)):|for k in range(0, tl.cdiv(K, BLOCK_K) + (tl.cdiv(K, BLOCK_K) * $2 + 50) // 100):  # plant|" kernels/gemv.py
  grep -c "# plant" kernels/matmul_tiled.py kernels/gemv.py
}
cd "$DEMO" || exit 2
export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
       GIT_COMMITTER_EMAIL=perfci@example.invalid
git init -q -b main && git add -A && git commit -qm base && git tag base
echo "# an unrelated change" >> suites/smoke.toml && git commit -qam "A/A: no kernel changed" && git tag aa
git checkout -q -b p3 aa && plant 3 10 && git commit -qam "plant +3% tiled, +10% gemv iterations" && git tag p3
git checkout -q -b p5 aa && plant 5 20 && git commit -qam "plant +5% tiled, +20% gemv iterations" && git tag p5
git checkout -q main
{
  if [[ $MODE == full ]]; then
    for pair in "base aa" "base p3"; do
      set -- $pair; s=$SECONDS
      timeout 170 python3 -m perfci confirm "$1" "$2" --suite cases.toml --max-rounds 10 --format json \
        --isolation "$ISOLATION" \
        > "$R/e2e-$2.json" 2> "$R/e2e-$2.err"
      echo "confirm $1 $2: exit $? [$((SECONDS - s)) s]"; tail -3 "$R/e2e-$2.err"
    done
    git status --porcelain; git worktree list
  fi
  left=$((BUDGET - (SECONDS - T0) - 40))
  echo "recording for $left s"
  python3 "$HERE/benchmarks/confirm_record.py" "$DEMO" --revs base,aa,p3,p5 --suite "$DEMO/cases.toml" \
    --budget "$left" --isolation "$ISOLATION" --out "$R/rounds-$MODE-$ISOLATION.jsonl"
  echo "record exit $? at $((SECONDS - T0)) s"
} 2>&1 | grep -v -i warning | tee "$R/log.txt"
cd "$HERE" && tar czf "$OUT/results.tgz" -C "$OUT" r
