#!/usr/bin/env bash
# Third H200 session (2026-11-30): perfci confirm on real kernels, in a throwaway
# repository built from this tree. A/A first (a commit that changes no kernel),
# then the known GROUP_M 8 -> 1 plant in the sm_90 bf16 config of the tiled GEMM
# (+22-24% on matmul_tiled 4096x28672x4096 in the earlier sessions). Five rounds
# each, four cases measured together by `perfci run` in each worktree.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
R="$OUT/r"; mkdir -p "$R"
DEMO=/tmp/confirm-demo
rm -rf "$DEMO" && mkdir -p "$DEMO"
cp -r perfci kernels suites pyproject.toml benchmarks/h200_confirm_cases.toml "$DEMO/"
cd "$DEMO" || exit 2
export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
       GIT_COMMITTER_EMAIL=perfci@example.invalid
git init -q -b main && echo "r.csv" > .gitignore && git add -A && git commit -qm "base"
echo "# an unrelated change" >> suites/smoke.toml && git commit -qam "A/A: no kernel changed"
sed -i 's/KernelConfig(128, 256, 64, GROUP_M=8,/KernelConfig(128, 256, 64, GROUP_M=1,/' kernels/_configs.py
git commit -qam "plant: GROUP_M 8 -> 1 in the sm_90 bf16 tiled config"
BENCH=(python3 -m perfci run h200_confirm_cases.toml --out r.csv --format none)
{
  s=$SECONDS
  timeout 240 python3 -m perfci confirm HEAD~2 HEAD~1 --results r.csv --min-rounds 5 --max-rounds 5 \
    --format json -- "${BENCH[@]}" > "$R/confirm-aa.json"
  echo "A/A exit $? [$((SECONDS - s)) s]"
  s=$SECONDS
  timeout 240 python3 -m perfci confirm HEAD~1 HEAD --results r.csv --min-rounds 5 --max-rounds 5 \
    --format json -- "${BENCH[@]}" > "$R/confirm-plant.json"
  echo "plant exit $? [$((SECONDS - s)) s]"
  git status --porcelain --ignored; git worktree list
} 2>&1 | grep -v -i warning | tee "$R/log.txt"
cd - >/dev/null && tar czf "$OUT/results.tgz" -C "$OUT" r
