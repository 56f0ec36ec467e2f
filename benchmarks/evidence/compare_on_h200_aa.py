"""perfci compare on real H200 noise: false alarms on A/A runs, and power on planted shifts.

Inputs (all measured on an H200, none simulated):
  decode: baselines/h200/2026-11-29/decode.csv and two later runs of the same code
          (benchmarks/results/h200-2026-11-29b/aa-nights/decode-aa{1,2}.csv): 3 pairs;
  prefill: baselines/h200/2026-11-29/prefill.csv and .../aa-nights/prefill-aa1.csv: 1 pair.
1. A/A: every regressed/improved verdict between runs of unchanged code is a
   false alarm; counted with the disturbed-run guard on and off.
2. Held out: the runs grouped as nights (night 0 = both baselines, night 1 =
   decode-aa1 + prefill-aa1, night 2 = decode-aa2); for night 1 and night 2,
   `perfci calibrate` on the other nights, then the false alarms of the pairs
   that involve the held-out night (data the profile never saw).
3. Power: for every pair and every case, that one case's cur repeats are made
   X% slower (the real noise of both runs kept), and we count how often it comes
   out `regressed`, by the case's duration.

Time: about 50 s on a 2-core CPU machine.
Pass: "0/315 case verdicts were false alarms with the guard" (section 1), and the output equals
benchmarks/results/h200-2026-11-29b/aa_validation.md for the committed sm_90 profile.

    python benchmarks/evidence/compare_on_h200_aa.py [--profile sm_90|FILE] [--out report.md]
"""
from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfci.compare import CompareOptions, calibrate, compare, read_profile  # noqa: E402
from perfci.model import ResultTable  # noqa: E402
from perfci.results import read_results  # noqa: E402

AA = ROOT / "benchmarks" / "results" / "h200-2026-11-29b" / "aa-nights"
SUITES = {
    "decode": [ROOT / "baselines/h200/2026-11-29/decode.csv", AA / "decode-aa1.csv", AA / "decode-aa2.csv"],
    "prefill": [ROOT / "baselines/h200/2026-11-29/prefill.csv", AA / "prefill-aa1.csv"],
}
CLASSES = ((0, 15, "< 15 us"), (15, 100, "15-100 us"), (100, float("inf"), ">= 100 us"))
STEPS = (3.0, 5.0, 10.0)


def pairs():
    for suite, paths in SUITES.items():
        tables = [read_results(str(p)) for p in paths]
        for a, b in itertools.combinations(tables, 2):
            yield suite, a, b


def slowed(table: ResultTable, key, pct: float) -> ResultTable:
    f = 1.0 + pct / 100.0
    rows = tuple(replace(r, repeats_us=tuple(v * f for v in r.repeats_us), median_us=r.median_us * f)
                 if r.key == key else r for r in table.rows)
    return replace(table, rows=rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="sm_90", help="noise profile: a built-in name or a JSON file (default sm_90)")
    ap.add_argument("--out", help="also write the report here")
    args = ap.parse_args()
    profile = read_profile(args.profile)
    on, off = CompareOptions(), CompareOptions(disturbed_spread_pct=None)
    lines = [f"# perfci compare on real H200 A/A runs (profile {profile.name}: {profile.source})", ""]

    lines += ["## A/A: verdicts between runs of unchanged code", "",
              "| suite | pair | cases | false alarms, guard on | false alarms, guard off | inconclusive (on) |",
              "|---|---|---:|---:|---:|---:|"]
    total = alarms_on = alarms_off = 0
    for suite, a, b in pairs():
        r_on, r_off = compare(a, b, profile, on), compare(a, b, profile, off)
        f_on = [c for c in r_on.cases if c.verdict in ("regressed", "improved")]
        f_off = [c for c in r_off.cases if c.verdict in ("regressed", "improved")]
        inc = sum(c.verdict == "inconclusive" for c in r_on.cases)
        total += len(r_on.cases); alarms_on += len(f_on); alarms_off += len(f_off)
        lines.append(f"| {suite} | {Path(a.path).name} vs {Path(b.path).name} | {len(r_on.cases)} "
                     f"| {len(f_on)} | {len(f_off)} | {inc} |")
        for c in f_on:
            lines.append(f"|  | still flagged: {c.kernel} {c.shape} {c.verdict} {100 * (c.ratio - 1):+.1f}% "
                         f"[{100 * (c.ci_low - 1):+.1f}, {100 * (c.ci_high - 1):+.1f}] "
                         f"spread ±{c.spread_base_pct:.1f}/±{c.spread_cur_pct:.1f}% | | | | |")
    lines += ["", f"All pairs: {alarms_on}/{total} case verdicts were false alarms with the guard, "
              f"{alarms_off}/{total} without.", ""]

    lines += ["## Held out: calibrate on the other nights, count false alarms on this one", "",
              "| held-out night | profile from the other nights | pairs | cases | false alarms |",
              "|---|---|---:|---:|---:|"]
    dec = [read_results(str(p)) for p in SUITES["decode"]]
    pre = [read_results(str(p)) for p in SUITES["prefill"]]
    nights = [[dec[0], pre[0]], [dec[1], pre[1]], [dec[2]]]
    merged = [replace(n[0], rows=tuple(r for t in n for r in t.rows)) for n in nights]
    for held in (1, 2):
        trained = calibrate([m for i, m in enumerate(merged) if i != held], arch="sm_90").profile
        n_cases = n_alarms = n_pairs = 0
        for i, night in enumerate(nights):
            if i == held:
                continue
            for a in night:
                for b in nights[held]:
                    if {r.key for r in a.rows} & {r.key for r in b.rows}:
                        res = compare(a, b, trained, on)
                        n_pairs += 1
                        n_cases += len(res.cases)
                        n_alarms += sum(c.verdict in ("regressed", "improved") for c in res.cases)
        lines.append(f"| {held} | {trained.floor_pct}% + {trained.floor_us:g} us | {n_pairs} | {n_cases} "
                     f"| {n_alarms} |")
    lines.append("")

    lines += ["## Power: one case made X% slower in the later run, real noise on both sides", "",
              "| duration | cases x pairs | " + " | ".join(f"found at +{s:g}%" for s in STEPS) + " |",
              "|---|---:|" + "---:|" * len(STEPS)]
    found = {(lo, s): 0 for lo, _, _ in CLASSES for s in STEPS}
    count = {lo: 0 for lo, _, _ in CLASSES}
    for suite, a, b in pairs():
        for row in a.rows:
            other = b.by_key().get(row.key)
            if row.status != "ok" or other is None or other.status != "ok":
                continue
            lo = next(lo for lo, hi, _ in CLASSES if lo <= row.median_us < hi)
            count[lo] += 1
            for s in STEPS:
                res = compare(a, slowed(b, row.key, s), profile, on)
                found[(lo, s)] += next(c for c in res.cases if c.key == row.key).verdict == "regressed"
    for lo, _, label in CLASSES:
        n = count[lo]
        lines.append(f"| {label} | {n} | " + " | ".join(
            f"{100 * found[(lo, s)] / n:.0f}%" if n else "-" for s in STEPS) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
