#!/usr/bin/env bash
# Fifth H200 session, last call: call 3's 4-vs-6-stages session again, judged case by case
# (`perfci confirm --no-common-mode`, as perfci nightly now confirms its flags) with the
# default isolation. Call 3 judged the same change relative to the suite: the four cases that
# ran ~20% faster read unchanged and the two 2-3% slower ones read +27%.
source benchmarks/device_setup.sh
export TRITON_INTERPRET=0
R="$OUT/r"; mkdir -p "$R"; T0=$SECONDS
export GIT_AUTHOR_NAME=perfci GIT_AUTHOR_EMAIL=perfci@example.invalid GIT_COMMITTER_NAME=perfci \
       GIT_COMMITTER_EMAIL=perfci@example.invalid
DEMO=/tmp/stages-demo; rm -rf "$DEMO" && mkdir -p "$DEMO" && cp -r perfci kernels suites pyproject.toml "$DEMO/"
cp benchmarks/h200_small_m_cases.toml "$DEMO/small-m.toml"
{
  cd "$DEMO" && printf '__pycache__/\n' > .gitignore && git init -q -b main && git add -A && git commit -qm "4 stages" \
    && sed -i 's/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=4)),/(64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=6)),  # plant/' kernels/_configs.py \
    && git commit -qam "6 stages" && git show --stat HEAD | tail -2
  PYTHONPATH=/tmp/site:$DEMO timeout ${CONFIRM_TIMEOUT:-200} python3 -m perfci confirm HEAD~1 HEAD --suite small-m.toml \
    --no-common-mode --min-rounds 5 --max-rounds 5 --format json > "$R/stages-nocm.json" 2> "$R/stages-nocm.err"
  echo "confirm --no-common-mode: exit $? at $((SECONDS - T0)) s"
  grep -v -i warning "$R/stages-nocm.err" | tail -7
  python3 - "$R/stages-nocm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    print(f"{c['kernel']} {c['shape']}: {c['verdict']} {100 * (c['ratio'] - 1):+.2f}% "
          f"[{100 * (c['ci_low'] - 1):+.2f}, {100 * (c['ci_high'] - 1):+.2f}]")
print("suite:", d["summary"]["suite"]["verdict"], d["summary"]["suite"]["reason"])
PY
} 2>&1 | grep --line-buffered -v -i "warning" | tee "$R/log.txt"
cd / && tar czf "$OUT/results.tgz" -C "$OUT" r
