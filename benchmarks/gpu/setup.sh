# Sourced first by every script in benchmarks/gpu/, from the repository root of the GPU machine.
#
# - Wheels in .whl/ (ignored by git, copied along with the tree) are installed into /tmp/site:
#   for an image that has torch and triton but lacks some of perfci's pure-Python dependencies
#   (the H200 image had no gitpython). Where the image has no git binary (perfci bisect and
#   confirm need one), a Debian git carried as .whl/*.deb is unpacked instead.
# - OUT (default /tmp/out) is where results go; R=$OUT/r holds the files and log, and `pack`
#   puts them in one archive, $OUT/results.tgz.
# - The GPU's clocks, power and temperature at the start go to $OUT/gpu.txt.
# Every script takes --help (its header). Helpers for the scripts: left (seconds of BUDGET_S left), measure (one budgeted perfci run),
# copy_tree (this checkout's code into a throwaway directory), demo_git (a committer for
# throwaway repositories), pack.
set -o pipefail
# `bash benchmarks/gpu/SCRIPT.sh --help`: the script's header, nothing run.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^source /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 0
fi
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
if ! command -v git >/dev/null 2>&1 && [[ -f .whl/git.deb ]]; then
  for deb in .whl/*.deb; do dpkg -x "$deb" /tmp/gitroot; done
  export PATH=/tmp/gitroot/usr/bin:$PATH GIT_EXEC_PATH=/tmp/gitroot/usr/lib/git-core \
         GIT_TEMPLATE_DIR=/tmp/gitroot/usr/share/git-core/templates \
         LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/tmp/gitroot/usr/lib/x86_64-linux-gnu
fi
git --version || echo "setup: no git here" >&2
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R="$OUT/r"
mkdir -p "$R"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv | tee "$OUT/gpu.txt"
elif command -v amd-smi >/dev/null 2>&1; then
  amd-smi list | tee "$OUT/gpu.txt"
fi

# A script's budget: a device command is cut off after 10 minutes, so steps that would not
# finish in time are skipped (and say so) rather than killed half-way.
T0=$SECONDS
BUDGET_S=${BUDGET_S:-560}
left() { echo $((BUDGET_S - (SECONDS - T0))); }

# measure NAME LIMIT ARGS...: `perfci run ARGS` into $R/NAME.csv and $R/NAME.jsonl, if LIMIT
# seconds are left of the budget.
measure() {
  local name=$1 limit=$2; shift 2
  if (( $(left) < limit )); then echo "skip $name ($(left) s left)"; return 0; fi
  local s=$SECONDS rc=0
  timeout "$limit" python3 -m perfci run "$@" --out "$R/$name.csv" --log-json "$R/$name.jsonl" --format none || rc=$?
  echo "[$((SECONDS - s)) s] $name: exit $rc"
}

# copy_tree DIR: this checkout's perfci, kernels, suites and pyproject.toml in a fresh DIR.
copy_tree() {
  rm -rf "$1" && mkdir -p "$1" && cp -r perfci kernels suites pyproject.toml "$1/"
}

# demo_git: a committer for the throwaway repositories the demos build.
demo_git() {
  export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
         GIT_COMMITTER_EMAIL=perfci@example.invalid
}

# pack: everything under $R in one archive.
pack() {
  tar czf "$OUT/results.tgz" -C "$OUT" r
}
