#!/usr/bin/env bash
# The pytest plugin's numbers against `perfci run`'s: same cases, same inputs, same seed.
#
# The decode-* rows of suites/decode.toml (52 cases: splitk_decode[m_fast=0|1] x M 1,4,16,64 x
# four N x K, torch_matmul over the same shapes, gemv at M=1), measured four times in the order
# run1, plugin1, plugin2, run2 (ABBA, so a drift over the session does not read as a difference
# between the two paths). Then `perfci compare` of
# run1/run2 and plugin1/plugin2 (each path's own run-to-run noise), run1/plugin1 and
# run2/plugin2 (the two paths against each other), each as markdown and JSON, and summary.md:
# per case the plugin/run ratio beside the run/run and plugin/plugin ratios.
# The plugin side is benchmarks/gpu/bench_decode_rows.py, which reads the cases from the suite
# file with perfci's loader and --filter, and builds each call with the suite backend's prepare.
#
# usage on the device:  bash benchmarks/gpu/plugin_vs_run.sh          (about 2 minutes)
# dry run on the CPU:   DEVICE=cpu OUT=/tmp/plugin-dry bash benchmarks/gpu/plugin_vs_run.sh
#   (the smoke suite's decode and vendor rows, fp32 through the Triton interpreter: the
#   plumbing only, exit codes, CSVs, pairing; the decode suite is bf16 and cuda-only)
source benchmarks/gpu/setup.sh
DEVICE=${DEVICE:-cuda}; SEED=${SEED:-2}; STEP_TIMEOUT=${STEP_TIMEOUT:-150}
if [[ $DEVICE == cpu ]]; then
  export TRITON_INTERPRET=1
  SUITE=${SUITE:-smoke}; FILTER=${FILTER:-'group~[dv]*'}  # smoke's decode + vendor rows: 6 cases
else
  export TRITON_INTERPRET=0
  SUITE=${SUITE:-decode}; FILTER=${FILTER:-'group~decode-*'}
fi
export PERFCI_BENCH_SUITE=$SUITE PERFCI_BENCH_FILTER=$FILTER PERFCI_BENCH_SEED=$SEED
R="$OUT/r"; rm -rf "$R"; mkdir -p "$R"
T0=$SECONDS
t() {  # t NAME CMD...: run, keep its exit code and wall time
  local name=$1 s=$SECONDS rc; shift
  "$@"; rc=$?
  echo "[$((SECONDS - s)) s] rc=$rc $name" | tee -a "$R/times.txt"
}
run() {  # run N
  timeout "$STEP_TIMEOUT" python3 -m perfci run "$SUITE" --filter "$FILTER" --device "$DEVICE" --seed "$SEED" \
    --out "$R/run$1.csv" --log-json "$R/run$1.jsonl" --format none > "$R/run$1.log" 2>&1
}
plugin() {  # plugin N; the plugin loaded by name, whether or not perfci is pip-installed here
  PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout "$STEP_TIMEOUT" python3 -m pytest -p perfci.plugin.pytest_plugin \
    benchmarks/gpu/bench_decode_rows.py -q -p no:cacheprovider --perfci-device "$DEVICE" \
    --perfci-out "$R/plugin$1.csv" > "$R/plugin$1.log" 2>&1
}
{
  echo "suite=$SUITE filter=$FILTER device=$DEVICE seed=$SEED git=$(git rev-parse --short HEAD 2>/dev/null)"
  t run1 run 1
  t plugin1 plugin 1
  t plugin2 plugin 2
  t run2 run 2
  for pair in "run1 run2" "plugin1 plugin2" "run1 plugin1" "run2 plugin2"; do
    set -- $pair
    python3 -m perfci compare "$R/$1.csv" "$R/$2.csv" --format json > "$R/cmp-$1-$2.json" 2> "$R/cmp-$1-$2.err"
    python3 -m perfci compare "$R/$1.csv" "$R/$2.csv" --format markdown > "$R/cmp-$1-$2.md" 2>> "$R/cmp-$1-$2.err"
    echo "compare $1 $2: rc=$? $(tail -n 1 "$R/cmp-$1-$2.err")" | tee -a "$R/times.txt"
  done
  python3 - "$R" <<'EOF'
import csv, json, os, statistics as st, sys
r = sys.argv[1]
def load(name):
    path = os.path.join(r, name + ".csv")
    if not os.path.exists(path):
        return {}
    return {(x["kernel"], x["shape"], x["dtype"]): x for x in csv.DictReader(open(path))}
runs = {n: load(n) for n in ("run1", "run2", "plugin1", "plugin2")}
us = lambda n, k: float(runs[n][k]["median_us"]) if k in runs[n] and runs[n][k]["status"] == "ok" else None
keys = list(runs["run1"]) + [k for n in ("run2", "plugin1", "plugin2") for k in runs[n] if k not in runs["run1"]]
keys = list(dict.fromkeys(keys))
pairs = {"plugin1/run1": ("plugin1", "run1"), "plugin2/run2": ("plugin2", "run2"),
         "run2/run1": ("run2", "run1"), "plugin2/plugin1": ("plugin2", "plugin1")}
out = ["# plugin vs perfci run", "", f"{len(keys)} case keys; rows: " +
       ", ".join(f"{n} {len(v)} ({sum(x['status'] == 'ok' for x in v.values())} ok)" for n, v in runs.items()), "",
       "| kernel | shape | run1 us | run2 us | plugin1 us | plugin2 us | plugin/run | run2/run1 | plugin2/plugin1 |",
       "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
ratios = {p: [] for p in pairs}
for k in keys:
    v = {n: us(n, k) for n in runs}
    for p, (a, b) in pairs.items():
        if v[a] and v[b]:
            ratios[p].append((v[a] / v[b], k))
    both = [v[a] / v[b] for a, b in (("plugin1", "run1"), ("plugin2", "run2")) if v[a] and v[b]]
    f = lambda x: f"{x:.3f}" if x else "-"
    out.append(f"| {k[0]} | {k[1]} | {f(v['run1'])} | {f(v['run2'])} | {f(v['plugin1'])} | {f(v['plugin2'])} | "
               f"{f(st.median(both)) if both else '-'} | {f(v['run2'] / v['run1'] if v['run2'] and v['run1'] else None)} | "
               f"{f(v['plugin2'] / v['plugin1'] if v['plugin2'] and v['plugin1'] else None)} |")
out += ["", "| ratio | cases | median | geomean | max abs % (case) |", "|---|---:|---:|---:|---|"]
for p, xs in ratios.items():
    if not xs:
        out.append(f"| {p} | 0 | - | - | - |"); continue
    vals = [x for x, _ in xs]
    worst = max(xs, key=lambda t: abs(t[0] - 1))
    geo = st.geometric_mean(vals)
    out.append(f"| {p} | {len(vals)} | {st.median(vals):.4f} | {geo:.4f} | "
               f"{abs(worst[0] - 1) * 100:.2f} ({worst[1][0]} {worst[1][1]}) |")
out += ["", "| compare | verdicts |", "|---|---|"]
for name in sorted(f for f in os.listdir(r) if f.startswith("cmp-") and f.endswith(".json")):
    try:
        data = json.load(open(os.path.join(r, name)))
        counts = {}
        for c in data.get("cases", []):
            counts[c.get("verdict")] = counts.get(c.get("verdict"), 0) + 1
        out.append(f"| {name[4:-5]} | {', '.join(f'{n} {v}' for v, n in sorted(counts.items()))} |")
    except (OSError, ValueError) as err:
        out.append(f"| {name[4:-5]} | unreadable: {err} |")
open(os.path.join(r, "summary.md"), "w").write("\n".join(out) + "\n")
print("\n".join(out[-(len(pairs) + len([1 for f in os.listdir(r) if f.startswith('cmp-') and f.endswith('.json')]) + 6):]))
EOF
  echo "[$((SECONDS - T0)) s] total"
} 2>&1 | tee "$OUT/log.txt"
cp "$OUT/log.txt" "$R/log.txt"
tar -czf "$OUT/results.tgz" -C "$OUT" r
