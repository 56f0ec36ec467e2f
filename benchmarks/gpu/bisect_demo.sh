#!/usr/bin/env bash
# Plant a kernel slowdown in a throwaway git history, then let perfci bisect find it: does
# `perfci bisect` name the planted commit when every bench run is a real `perfci run`?
#
# usage:
#   bash benchmarks/gpu/bisect_demo.sh KERNEL_FILE SED_EXPR CASE [BISECT_OPTION ...] -- PERFCI_RUN_CMD ...
#
# On the CPU (Triton interpreter; the culprit halves the GEMV's BLOCK_K; 25 one-case perfci runs):
#   DEMO_COMMITS=12 DEMO_CULPRIT=7 bash benchmarks/gpu/bisect_demo.sh kernels/_configs.py \
#     's/return KernelConfig(BLOCK_M=1, BLOCK_N=8, BLOCK_K=16, num_warps=1, num_stages=1)/return KernelConfig(BLOCK_M=1, BLOCK_N=8, BLOCK_K=8, num_warps=1, num_stages=1)/' \
#     'gemv,1x16x64,fp32' -- python -m perfci run smoke --device cpu --filter kernel=gemv --out r.csv --format none
# On an H200 (GROUP_M 8 -> 1 in the tiled GEMM's large-M row; about 6 minutes): docs/bisect.md.
#
# What it does:
#   1. copies perfci/, kernels/, suites/ and pyproject.toml of this checkout into
#      a new repository under $DEMO_DIR (default: a fresh temp dir) as commit GOOD;
#   2. adds $DEMO_COMMITS harmless commits (default 15); commit $DEMO_CULPRIT
#      (default 11) applies SED_EXPR to KERNEL_FILE; the script stops if the
#      expression changed nothing, since a demo without a slowdown proves nothing;
#   3. runs `perfci bisect GOOD HEAD --csv-column median_us --case CASE
#      --plot bisect.png [BISECT_OPTION ...] -- PERFCI_RUN_CMD` in that repository
#      and checks the culprit it names is the planted commit.
# Pass: exit 0 and "named X, planted X" with the same sha; exit 1 when another commit was named.
# The bench command runs at each commit's root with PYTHONPATH=. so it measures
# that commit's kernels, not an installed perfci.
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,25p' "$0"
    exit 0
fi
if [[ $# -lt 5 ]]; then
    sed -n '2,25p' "$0" >&2
    exit 2
fi
kernel_file=$1; sed_expr=$2; case_key=$3; shift 3
bisect_options=()
while [[ $# -gt 0 && $1 != "--" ]]; do bisect_options+=("$1"); shift; done
[[ ${1:-} == "--" ]] || { echo "bisect_demo: missing '--' before the perfci run command" >&2; exit 2; }
shift
run_cmd=("$@")

source_root=$(cd "$(dirname "$0")/../.." && pwd)
demo=${DEMO_DIR:-$(mktemp -d /tmp/perfci-bisect-demo-XXXXXX)}
commits=${DEMO_COMMITS:-15}
culprit_at=${DEMO_CULPRIT:-11}
[[ -f $source_root/$kernel_file ]] || { echo "bisect_demo: no $kernel_file in $source_root" >&2; exit 2; }

export GIT_AUTHOR_NAME="perfci demo" GIT_AUTHOR_EMAIL="demo@perfci.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"

mkdir -p "$demo"
cd "$demo"
git init -q -b main
git config commit.gpgsign false
cp -r "$source_root/perfci" "$source_root/kernels" "$source_root/suites" "$source_root/pyproject.toml" .
printf '__pycache__/\n*.csv\n*.png\nbisect.json\nbisect.md\n' > .gitignore
echo "demo history for perfci bisect" > DEMO.md
git add -A
git commit -qm "GOOD: kernels as in $(git -C "$source_root" rev-parse --short HEAD)"
good=$(git rev-parse HEAD)

planted=""
for i in $(seq 1 "$commits"); do
    if [[ $i -eq $culprit_at ]]; then
        before=$(sha1sum "$kernel_file")
        sed -i -e "$sed_expr" "$kernel_file"
        if [[ $(sha1sum "$kernel_file") == "$before" ]]; then
            echo "bisect_demo: '$sed_expr' changed nothing in $kernel_file" >&2
            exit 2
        fi
        git commit -qam "tune: $sed_expr in $(basename "$kernel_file")"
        planted=$(git rev-parse HEAD)
    else
        echo "note $i" >> DEMO.md
        git commit -qam "docs: demo note $i"
    fi
done
echo "bisect_demo: repo $demo, GOOD $good, planted $planted (commit $culprit_at of $commits)" >&2

# '.' first: each commit's own perfci and kernels; the rest keeps what the
# caller put there (on the device, the carried gitpython).
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
status=0
"${PYTHON:-python3}" -m perfci bisect "$good" HEAD --csv-column median_us --case "$case_key" --plot bisect.png \
    --format json "${bisect_options[@]}" -- "${run_cmd[@]}" > bisect.json || status=$?
found=0
("${PYTHON:-python3}" - "$planted" <<'EOF'
import json, sys
report = json.load(open("bisect.json"))
culprit = (report.get("culprit") or {}).get("sha")
print(f"status {report['status']}: named {culprit}, planted {sys.argv[1]}, "
      f"{report['bench_runs']} bench runs, change {report.get('culprit_interval')}")
sys.exit(0 if culprit == sys.argv[1] else 1)
EOF
) || found=$?
# The same bisect again, for a human-readable report: every run is cached by
# (commit, bench command, build command, metric), so this measures nothing.
"${PYTHON:-python3}" -m perfci bisect "$good" HEAD --csv-column median_us --case "$case_key" \
    --format markdown "${bisect_options[@]}" -- "${run_cmd[@]}" > bisect.md || true
echo "bisect_demo: report $demo/bisect.json, plot $demo/bisect.png, markdown $demo/bisect.md (perfci exit $status)" >&2
exit $found
