"""perfci history on real H200 nights: pooled baselines and change points, from committed files only.

    python benchmarks/history_validation.py [--out report.md] [--series 10] [--nights 30] [--quick]
                                            [--only pooled|changepoints] [--cp-alpha 0.01]
                                            [--pooled default|absolute-floor|2026-11-30]

1. Pooled baseline (`perfci compare STORE CUR`): power to find +3 / +5 / +10% on one case, and
   false alarms without a plant, against K = 1..4 earlier nights. The five quiet nights of
   2026-11-30 (benchmarks/results/h200-2026-11-30/{aa,load,final}/{decode,prefill}-q*.csv, the
   same kernels) are used leave-one-out: each in turn is "tonight", every subset of K of the
   other four is its history, and each case of tonight in turn gets its repeats scaled by the
   effect. K = 1 is today's `perfci compare` of one run against one run (each other night in
   turn). All in time: nights q1-q4 carry a per-process device-clock error of up to 12% (their
   times are right), and the pooled method never uses clocks. The older measurement
   (baselines/h200/2026-11-29/ and benchmarks/results/h200-2026-11-29b/aa-nights/: three decode
   nights, two prefill) is reported apart.
2. Change points (`perfci history check`): per case, nightly series of --nights nights built by
   resampling that case's real quiet nights (a night: one of the five, drawn at random, and its
   7 repeats drawn with replacement, kept as that night's repeats). With a +3% step planted at a
   random night (at least 3 from either end): is a change found within +-1 night? Without: is any
   change reported? Also reported: the same detector given only each night's median, and where
   a detector told that there is exactly one step would put it (the bound on localisation).

Time: about 9 minutes on a 2-core CPU machine (--quick: one history subset per K).
Pass: the change-point goals, a +3% step found within +-1 night in >= 90% of step series and
>= 95% of flat series without a change. The committed run:
benchmarks/results/history-2026-11-30b/report.md.
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfci.compare import CompareOptions, compare  # noqa: E402
from perfci.compare.noise import profile_for_arch  # noqa: E402
from perfci.history.changepoints import ChangeOptions, detect, levels, split_scores  # noqa: E402
from perfci.compare.pooled import PooledOptions, build_baseline, judge  # noqa: E402
from perfci.model import ResultTable  # noqa: E402
from perfci.results import read_results  # noqa: E402

H30 = ROOT / "benchmarks" / "results" / "h200-2026-11-30"
QUIET = {1: "aa", 2: "aa", 3: "aa", 4: "load", 5: "final"}
OLD = {"decode": [ROOT / "baselines/h200/2026-11-29/decode.csv",
                  ROOT / "benchmarks/results/h200-2026-11-29b/aa-nights/decode-aa1.csv",
                  ROOT / "benchmarks/results/h200-2026-11-29b/aa-nights/decode-aa2.csv"],
       "prefill": [ROOT / "baselines/h200/2026-11-29/prefill.csv",
                   ROOT / "benchmarks/results/h200-2026-11-29b/aa-nights/prefill-aa1.csv"]}
EFFECTS = (3.0, 5.0, 10.0)
PRESETS = {"default": PooledOptions(),
           "absolute-floor": PooledOptions(absolute_floor=True),
           "2026-11-30": PooledOptions(level="median", mode="median", within_floor=False, absolute_floor=True)}
CLASSES = (("< 15 us", 0, 15), ("15-100 us", 15, 100), (">= 100 us", 100, math.inf))
PROFILE = profile_for_arch("sm_90")


def quiet_nights(suite: str) -> list[ResultTable]:
    return [read_results(H30 / QUIET[i] / f"{suite}-q{i}.csv") for i in QUIET]


def planted(table: ResultTable, key, factor: float) -> ResultTable:
    rows = tuple(replace(r, median_us=r.median_us * factor, repeats_us=tuple(x * factor for x in r.repeats_us))
                 if r.key == key else r for r in table.rows)
    return replace(table, rows=rows)


def _class(us: float) -> str:
    return next(name for name, lo, hi in CLASSES if lo <= us < hi)


class Tally:
    """Found / tried per (K, effect, duration class), and A/A verdicts per K."""

    def __init__(self):
        self.found: dict = {}
        self.aa: dict = {}

    def add(self, k, effect, cls, hit):
        f, n = self.found.get((k, effect, cls), (0, 0))
        self.found[(k, effect, cls)] = (f + hit, n + 1)

    def add_aa(self, k, cases):
        alarms = sum(c.verdict in ("regressed", "improved") for c in cases)
        held = sum(c.verdict == "inconclusive" for c in cases)
        a, h, n = self.aa.get(k, (0, 0, 0))
        self.aa[k] = (a + alarms, h + held, n + len(cases))


def pooled_runs(nights: list[ResultTable], suite: str, ks, tally: Tally, popts: PooledOptions,
                quick: bool) -> None:
    for h, tonight in enumerate(nights):
        others = [t for i, t in enumerate(nights) if i != h]
        keys = [r.key for r in tonight.rows if r.status == "ok"]
        base_us = {r.key: r.median_us for r in tonight.rows}
        for k in ks:
            subsets = [list(s) for s in itertools.combinations(others, k)]
            if quick:
                subsets = subsets[:1]
            for subset in subsets:
                if k == 1:
                    judge_fn = (lambda cur, base=subset[0]: compare(base, cur, PROFILE, CompareOptions()))
                else:
                    baseline = build_baseline([(suite, t) for t in subset], PROFILE,
                                              replace(popts, nights=k), "sm_90")
                    judge_fn = (lambda cur, b=baseline: judge(b, cur, suite, "sm_90", PROFILE, CompareOptions(),
                                                              replace(popts, nights=k), "sm_90"))
                tally.add_aa(k, judge_fn(tonight).cases)
                for key in keys:
                    for effect in EFFECTS:
                        result = judge_fn(planted(tonight, key, 1.0 + effect / 100.0))
                        verdict = next(c.verdict for c in result.cases if c.key == key)
                        tally.add(k, effect, _class(base_us[key]), verdict == "regressed")


def power_table(tally: Tally, ks) -> list[str]:
    out = ["| K nights | method | A/A false regressed/improved | A/A inconclusive | duration | cases tried | "
           "found +3% | +5% | +10% |", "|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    for k in ks:
        a, h, n = tally.aa.get(k, (0, 0, 0))
        method = "compare, one run vs one" if k == 1 else "pooled"
        for i, (cls, _, _) in enumerate(CLASSES):
            cells = []
            tried = 0
            for effect in EFFECTS:
                f, m = tally.found.get((k, effect, cls), (0, 0))
                tried = m
                cells.append(f"{100 * f / m:.0f}%" if m else "-")
            lead = (f"| {k} | {method} | {a}/{n} ({100 * a / max(n, 1):.2f}%) | {100 * h / max(n, 1):.1f}% |"
                    if i == 0 else "| | | | |")
            out.append(f"{lead} {cls} | {tried} | " + " | ".join(cells) + " |")
    return out


def synthetic_series(rng, nights_real, n, step_at, factor):
    """One case's resampled nights: (their medians, their repeats); nights from step_at on scaled by factor."""
    meds, reps = [], []
    for i in range(n):
        real = nights_real[rng.integers(len(nights_real))]
        sample = rng.choice(real, size=len(real), replace=True)
        scale = factor if step_at is not None and i >= step_at else 1.0
        meds.append(float(np.median(sample)) * scale)
        reps.append(sample * scale)
    return meds, reps


def best_single_split(y: np.ndarray, min_segment: int) -> int:
    """Where a detector told that there is exactly one step would put it: the least-squares split, no test."""
    ks, z = split_scores(y, min_segment)
    return int(ks[np.argmax(z)])


# What is tallied per series: (found within +-1, at the exact night, a change elsewhere too) for the
# step series, and (any change) for the flat ones.
METHODS = ("check", "medians", "told")


NOISE = (("level sd < 1% (3% is > 3 sd)", 0.0, 0.01), ("1-1.5% (2-3 sd)", 0.01, 0.015),
         ("≥ 1.5% (< 2 sd)", 0.015, math.inf))


def changepoint_runs(series_per_case: int, n: int, seed: int, opts: ChangeOptions):
    """Tallies [series, within +-1, exact, elsewhere too, A/A with a change] per (method, duration class)
    and per (method, noise class): a case's noise is the sd of its nightly levels in its flat series."""
    rng = np.random.default_rng(seed)
    stats = {}
    for suite in ("decode", "prefill"):
        nights = quiet_nights(suite)
        for row in nights[0].rows:
            if row.status != "ok":
                continue
            reals = [np.asarray(t.by_key()[row.key].repeats_us) for t in nights]
            mine: dict = {}
            flat_levels = []
            for _ in range(series_per_case):
                at = int(rng.integers(opts.min_segment, n - opts.min_segment + 1))
                step_meds, step_reps = synthetic_series(rng, reals, n, at, 1.03)
                flat_meds, flat_reps = synthetic_series(rng, reals, n, None, 1.0)
                flat_levels.extend(levels(flat_meds, flat_reps))
                found = {"check": (detect(step_meds, opts, step_reps), detect(flat_meds, opts, flat_reps)),
                         "medians": (detect(step_meds, opts), detect(flat_meds, opts))}
                for method, (step, flat) in found.items():
                    idx = [c.index for c in step.changes]
                    s = mine.setdefault(method, [0, 0, 0, 0, 0])
                    s[0] += 1
                    s[1] += any(abs(i - at) <= 1 for i in idx)
                    s[2] += at in idx
                    s[3] += any(abs(i - at) > 1 for i in idx)
                    s[4] += bool(flat.changes)
                told = best_single_split(levels(step_meds, step_reps), opts.min_segment)
                s = mine.setdefault("told", [0, 0, 0, 0, 0])
                s[0] += 1
                s[1] += abs(told - at) <= 1
                s[2] += told == at
            sd = float(np.std(flat_levels))
            noise = next(name for name, lo, hi in NOISE if lo <= sd < hi)
            for method, s in mine.items():
                for group in (_class(row.median_us), noise):
                    t = stats.setdefault((method, group), [0, 0, 0, 0, 0, 0])
                    stats[(method, group)] = [a + b for a, b in zip(t, s + [1])]
    return stats


def changepoint_table(stats, method: str, groups=CLASSES, total: bool = True) -> list[str]:
    out = [f"| {'duration' if groups is CLASSES else 'noise of the nightly level'} | cases | series | +3% step "
           "found within ±1 night | at the exact night | step series with a change elsewhere too | "
           "A/A series with any change |", "|---|---:|---:|---:|---:|---:|---:|"]
    rows = [(name, stats[(method, name)]) for name, _, _ in groups if (method, name) in stats]
    if total:
        rows.append(("all", [sum(col) for col in zip(*(s for _, s in rows))]))
    for name, s in rows:
        tail = (f"{100 * s[3] / s[0]:.1f}% | {100 * s[4] / s[0]:.1f}% |" if method != "told" else "- | - |")
        out.append(f"| {name} | {s[5]} | {s[0]} | {100 * s[1] / s[0]:.1f}% | {100 * s[2] / s[0]:.1f}% | " + tail)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="also write the report here (markdown)")
    parser.add_argument("--series", type=int, default=10, help="synthetic series per case and kind (default 10)")
    parser.add_argument("--nights", type=int, default=30, help="nights per synthetic series (default 30)")
    parser.add_argument("--quick", action="store_true", help="one history subset per K (a smoke run)")
    parser.add_argument("--cp-alpha", type=float, default=ChangeOptions().alpha,
                        help="change points: alpha per series (default: perfci history check's)")
    parser.add_argument("--only", choices=("pooled", "changepoints"), help="run one part only")
    parser.add_argument("--pooled", choices=sorted(PRESETS), default="default",
                        help="pooled options: default, default plus the absolute floor, or the method of "
                             "2026-11-30 (nightly medians, median common mode, absolute floor)")
    args = parser.parse_args()
    started = time.time()
    popts = PRESETS[args.pooled]

    text = ["# History: pooled baselines and change points on real H200 nights", "",
            "Built by `python benchmarks/history_validation.py` from committed files only "
            f"({'quick: one subset per K' if args.quick else 'every history subset'}).", "",
            "## 1. Pooled baseline: power and false alarms against K earlier nights", "",
            "Five quiet nights of 2026-11-30 (gated measurement), leave-one-out; K = 1 is `perfci compare` "
            "of one night against one (each other night in turn, clocks as compare uses them); K >= 2 is "
            f"`perfci compare STORE CUR` (pooled, in time; options `{args.pooled}`: night value "
            f"{popts.level}, suite shift {popts.mode}, between-night variance at least the nights' own: "
            f"{popts.within_floor}, floor {popts.floor_pct:g}%{' + floor_us / base' if popts.absolute_floor else ''}; "
            "compare's alpha 0.05). A case counts as found when it is `regressed`.", ""]
    if args.only == "changepoints":
        text = text[:4]
    for suite in (("decode", "prefill") if args.only != "changepoints" else ()):
        tally = Tally()
        pooled_runs(quiet_nights(suite), suite, (1, 2, 3, 4), tally, popts, args.quick)
        text += [f"### {suite}", "", *power_table(tally, (1, 2, 3, 4)), ""]
    if args.only != "changepoints":
        text += ["### Older measurement (2026-11-29, ungated, NVML clocks)", "",
                 "decode: three nights (the 2026-11-29 baseline and two A/A nights), leave-one-out, K = 1 and 2; "
                 "prefill: two nights, K = 1 only.", ""]
    for suite, ks in ((("decode", (1, 2)), ("prefill", (1,))) if args.only != "changepoints" else ()):
        tally = Tally()
        pooled_runs([read_results(p) for p in OLD[suite]], suite, ks, tally, popts, args.quick)
        text += [f"#### {suite}", "", *power_table(tally, ks), ""]

    copts = ChangeOptions(alpha=args.cp_alpha)
    cp = changepoint_runs(args.series, args.nights, 10, copts) if args.only != "pooled" else {}
    text += [] if args.only == "pooled" else ["## 2. Change points on resampled real nights", "",
             f"Per case of decode and prefill, {args.series} series of {args.nights} nights with a +3% step at "
             f"a random night (3 to {args.nights - 3}) and {args.series} without; `perfci history check` "
             f"defaults (alpha {copts.alpha:g} per series, {copts.permutations} permutations, segments of "
             f"{copts.min_segment} nights or more, shifts under {copts.min_change_pct:g}% not reported).", "",
             "### `perfci history check` (each night's level from its repeats)", "", *changepoint_table(cp, "check"),
             "", "### The same detector given only the nightly medians", "", *changepoint_table(cp, "medians"),
             "", "### Reference: told there is exactly one step, the best split of the nightly levels (no test)",
             "", "Where a detector that knows a step is there would put it (the likelihood-ratio split of a "
             "Gaussian series): it cannot miss one, nor find one in a flat series, so it bounds what a test "
             "on these levels can localise.", "", *changepoint_table(cp, "told"), "",
             "### By the noise of each case's nightly level (its sd over the flat series)", "",
             "`perfci history check`:", "", *changepoint_table(cp, "check", NOISE, False), "",
             "Told there is one step:", "", *changepoint_table(cp, "told", NOISE, False), ""]
    text += [f"Run time: {time.time() - started:.0f} s.", ""]
    if args.out:
        Path(args.out).write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
