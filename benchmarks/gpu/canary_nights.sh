#!/usr/bin/env bash
# Three `perfci nightly` nights of a small suite with the canary, into one history store: what
# the nightly's check on itself reports each night (did compare and confirm's paired statistic
# find a PCT% planted slowdown, did its unchanged twin stay quiet) and the running rates after.
#
#   night 1   the first night: recorded; the canary judged by confirm's paired rounds only
#   night 2   a harmless commit later: the suite, and the canary's twin and planted build,
#             against night 1 (the one-run compare)
#   night 3   again: against the store's two nights (the pooled compare)
# The suite is a few decode and prefill cases of suites/ (bf16, keys as in the baselines) on one
# GPU (CUDA_VISIBLE_DEVICES, default 0); --no-bisect; confirm runs only if compare flags a case.
#
#   PCT            the plant, percent (default 3)       NIGHTS         (default 3)
#   CANARY_BUDGET  seconds of canary rounds (default 60) NIGHT_TIMEOUT  per night (default 170)
#   CONFIRM_ARGS   the nightly's --confirm-args (default "--budget 40": confirm's rounds of flagged
#                  cases; the canary's rounds take their looks and minimum effect from them)
#   DEVICE         auto (default) or cpu                 BUDGET_S       (default 390: one command)
# A night without a flag cost ~50 s on an H200 (benchmarks/results/h200-2026-12-01-library-canary:
# the suite ~10 s, the canary's 5 rounds 33 s), one whose compare flags a case up to ~2 minutes
# (confirm's worktrees, warm workers and budget). A night starts while MIN_NIGHT seconds (default
# 100) are left, and gets at most what is left.
#
# Usage, from the repository root:  bash benchmarks/gpu/canary_nights.sh
# Outputs in $OUT/r: nN/ (a night's files: verdict.json, summary.md, canary.csv, ...), nN.out/.err,
# store/ (runs/ and canary/), canary.txt (`perfci history canary`), log.txt; $OUT/results.tgz.
# Dry run on the CPU (a tiny fp32 suite through the interpreter, a 100% plant, 1-3 minutes a night;
# 346 s for the three on two busy cores):
#   DEVICE=cpu PCT=100 BUDGET_S=900 NIGHT_TIMEOUT=280 OUT=/tmp/o bash benchmarks/gpu/canary_nights.sh
source benchmarks/gpu/setup.sh
PCT=${PCT:-3}; NIGHTS=${NIGHTS:-3}; CANARY_BUDGET=${CANARY_BUDGET:-60}; NIGHT_TIMEOUT=${NIGHT_TIMEOUT:-170}
DEVICE=${DEVICE:-auto}; BUDGET_S=${BUDGET_S:-390}; MIN_NIGHT=${MIN_NIGHT:-100}
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
if [[ $DEVICE == cpu ]]; then
  export TRITON_INTERPRET=1
  CONFIRM_ARGS=${CONFIRM_ARGS:-"--min-rounds 3 --max-rounds 3 --budget 60 --min-effect 25"}
else
  export TRITON_INTERPRET=0
  CONFIRM_ARGS=${CONFIRM_ARGS:-"--budget 40"}
fi
HERE=$PWD
DEMO=/tmp/canary-nights; STORE="$R/store"
rm -rf "$STORE" "$R"/n[0-9]*
copy_tree "$DEMO"
export PYTHONPATH=/tmp/site:$DEMO
demo_git
cd "$DEMO" || exit 2
printf '__pycache__/\n' > .gitignore
if [[ $DEVICE == cpu ]]; then  # the interpreter: a GEMV of a few programs, ~30 ms a launch
  cat > suites/canary-nights.toml <<'EOF'
name = "canary-nights"
devices = ["cpu"]
dtype = "fp32"

[[cases]]
kernel = "gemv"
M = 1
N = [8, 16]
K = 16
EOF
else  # decode (split-K, the vendor library) and prefill rows of suites/decode.toml and prefill.toml
  cat > suites/canary-nights.toml <<'EOF'
name = "canary-nights"
devices = ["cuda"]
dtype = "bf16"

[[cases]]
group = "seed002-qkv"
kernel = "splitk_decode"
variants = [{m_fast = 1}]
M = [1, 16]
N = 1024
K = 6144

[[cases]]
group = "llama3-8b"
kernel = ["matmul_tiled", "torch_matmul"]
M = 4096
N = 4096
K = 4096
EOF
fi
git init -q -b main && git add -A && git commit -qm "base: perfci $(cd "$HERE" && git rev-parse --short HEAD 2>/dev/null || echo tree)"

say() {  # say DIR: the night's verdict, its canary line and rates, its warnings
  python3 - "$1" <<'PY'
import json, sys
v = json.load(open(sys.argv[1] + "/verdict.json"))
print(f"  exit {v['exit_code']}: {v['verdict']}")
c = v.get("canary")
if c is None:
    print("  canary: " + next((s["detail"] for s in v["stages"] if s["name"] == "canary"), "?"))
else:
    print("  " + c["line"])
    print("\n".join("    " + line for line in c["rates_lines"]))
for w in v["warnings"]:
    print("  warning: " + w)
PY
}

{
  for n in $(seq "$NIGHTS"); do
    if (( $(left) < MIN_NIGHT )); then echo "skip night $n ($(left) s left)"; continue; fi
    limit=$(( $(left) < NIGHT_TIMEOUT ? $(left) : NIGHT_TIMEOUT ))
    if (( n > 1 )); then echo "night $n" >> NOTES.md && git add NOTES.md && git commit -qm "docs: before night $n"; fi
    echo "== night $n at $(git rev-parse --short HEAD)"
    s=$SECONDS rc=0
    timeout "$limit" python3 -m perfci nightly suites/canary-nights.toml --out "$R/n$n" --history "$STORE" \
      --device "$DEVICE" --canary "$PCT" --canary-budget "$CANARY_BUDGET" --confirm-args "$CONFIRM_ARGS" \
      --no-bisect > "$R/n$n.out" 2> "$R/n$n.err" || rc=$?
    echo "night $n: exit $rc [$((SECONDS - s)) s, at $((SECONDS - T0)) s]"
    grep "^perfci nightly: canary:" "$R/n$n.err" || tail -3 "$R/n$n.err"
    [[ -f $R/n$n/verdict.json ]] && say "$R/n$n"
  done
  echo "== perfci history canary"
  python3 -m perfci history canary "$STORE" | tee "$R/canary.txt"
  echo "done at $((SECONDS - T0)) s"
} 2>&1 | tee "$R/log.txt"
cd "$HERE" && pack
