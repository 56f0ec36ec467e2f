#!/bin/bash
# Golden outputs: CLI commands over tests/data and the stored results, into OUTDIR, to diff a refactor by.
# Usage: bash benchmarks/golden_outputs.sh OUTDIR [TREE]   (TREE: the checkout to run, default this one;
# run it on a clean copy of the commit before a change and of the one after, then diff -r the two OUTDIRs)
set -u
OUT=${1:?outdir}
WT=$(cd "${2:-$(dirname "$0")/..}" && pwd)  # the tree to run
rm -rf "$OUT"; mkdir -p "$OUT"
cd "$WT"
export PYTHONPATH=$WT PERFCI_NO_COLOR=1 COLUMNS=100
P="timeout 900 python -m perfci"
D=tests/data/compare
n=0
norm() {  # paths and wall-clock seconds vary between runs; nothing else may
  sed -i -E "s#$OUT#OUT#g; s#$WT#WT#g; s#/tmp/[^ /]*#TMP#g; s#\[[0-9.]+ s\]#[N s]#g; s#\"seconds\": [0-9.e-]+#\"seconds\": N#g; s#^(\| [a-z]+ \| [^|]+ \| )[0-9.]+ \|#\1N |#" "$@"
}
run() {  # run NAME CMD...: stdout, stderr and exit code into OUT/NAME.*
  local name=$1; shift
  "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; echo $? >"$OUT/$name.rc"
  norm "$OUT/$name.out" "$OUT/$name.err"
  n=$((n+1))
}
pairs="aa_base.csv:aa_cur.csv base.csv:cur_regressed.csv flydsl_base.csv:flydsl_cur.csv
h200_3case_base.csv:h200_3case_group_m1.csv h200_3case_base.csv:h200_3case_spill_w4.csv
h200_aa_decode_base.csv:h200_aa_decode_cur.csv h200_explain_base.csv:h200_explain_cur.csv
h200_gated_prefill_q1.csv:h200_gated_prefill_q4.csv h200_planted_base.csv:h200_planted_cur.csv
pb_base.json:pb_cur.json"
for p in $pairs; do
  b=${p%%:*}; c=${p##*:}
  for f in table markdown json csv; do
    run "compare-${b%.*}-${c%.*}-$f" $P compare --format $f $D/$b $D/$c
  done
done
run compare-explain-md $P compare --explain --format markdown $D/h200_explain_base.csv $D/h200_explain_cur.csv
run compare-explain-json $P compare --explain --format json $D/h200_explain_base.csv $D/h200_explain_cur.csv
run compare-planted-onlychanged $P compare --only-changed --sort ratio $D/h200_planted_base.csv $D/h200_planted_cur.csv
# stored history stores: check, canary, export, pooled compare (prior + shift regression)
i=0
for s in benchmarks/results/h200-2026-12-01-canary-nights/store benchmarks/results/h200-2026-12-01-library-canary/canary/r/store benchmarks/results/h200-2026-12-01/nightly-two-nights/r/store; do
  i=$((i+1))
  run history-check-$i $P history check $s
  run history-check-json-$i $P history check --format json $s 2>/dev/null
  run history-canary-$i $P history canary $s
  run history-canary-json-$i $P history canary --format json $s
  mkdir -p "$OUT/otava-$i"; run history-export-$i $P history export --otava --out "$OUT/otava-$i" $s
  for cur in $(ls $s/runs/*.csv | tail -2); do
    for f in table json; do
      run "pooled-$i-$(basename $cur .csv)-$f" $P compare --format $f $s $cur --nights 5
    done
  done
  mkdir -p "$OUT/report-$i"; run history-report-$i $P history report $s --out "$OUT/report-$i"
done
# nightly from a measured run (compare, gate, report render); confirm/bisect have no baseline commit here
for p in benchmarks/gpu/cases/subset.toml:h200_planted_base.csv:h200_planted_cur.csv decode:h200_aa_decode_base.csv:h200_aa_decode_cur.csv benchmarks/gpu/cases/subset.toml:h200_explain_base.csv:h200_explain_cur.csv; do
  suite=${p%%:*}; p=${p#*:}; b=${p%%:*}; c=${p##*:}
  o=$(mktemp -d)
  run "nightly-${c%.*}" $P nightly --run $D/$c --baseline $D/$b --no-bisect --no-canary --out $o $suite
  for f in summary.md issue.md verdict.json compare.json flagged.json; do
    [ -f $o/$f ] && sed "s#$o#OUT#g" $o/$f > "$OUT/nightly-${c%.*}-$f" && norm "$OUT/nightly-${c%.*}-$f"
  done
  rm -rf $o
done
# compile diff between stored baselines (compile's own vocabulary)
for f in table markdown json; do
  run compile-diff-sm90-$f $P compile decode --current tests/data/compile/decode-sample-sm_90.json --baseline baselines/compile/decode-sm_90.json --format $f
  run compile-diff-gfx950-$f $P compile decode --current tests/data/compile/decode-sample-gfx950.json --baseline baselines/compile/decode-gfx950.json --format $f
done
cp "$OUT/compile-diff-sm90-json.out" "$OUT/cdiff.json"
run compare-compile-diff $P compare --explain --format markdown --compile-diff "$OUT/cdiff.json" $D/h200_explain_base.csv $D/h200_explain_cur.csv
echo "$n commands into $OUT"
