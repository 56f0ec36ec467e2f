"""perfci history on real H200 nights: pooled baselines and change points, from committed files only.

    python benchmarks/history_validation.py [--out report.md] [--series 10] [--nights 30] [--quick]
                                            [--only pooled|changepoints|stored-nights] [--cp-alpha 0.01]
                                            [--pooled default|no-absolute-floor|suite-prior|2026-11-30]
                                            [--subsets 3] [--only team-suites --team-draws 500
                                            --team-rules both|before --team-families N
                                            --team-shift others|fit]

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

3. The pooled compare over every stored H200 night (`--only stored-nights`): the nights of decode
   and prefill that ran unchanged code on an H200 with today's gated measurement, 9 of decode and
   11 of prefill (2026-11-30: q1-q5, l1 and l2 with every host core busy; 2026-12-01, another host:
   the nightly's n1 and n2, prefill's base and base2; n2 of decode without its 4 gemv cases, which
   carry the nightly's planted gemv-tile change). Leave-one-out: each night in turn is tonight, with
   --subsets random sets (seeded) of K = 2, 4 and 8 of the others in the store. Per night: false
   `regressed` as a share of its judged cases (the goal: <= 1%); and each kernel family (a kernel
   label, variants apart) in turn made 3% slower in tonight's night (its repeats x 1.03): the share
   of its cases flagged, `regressed` or `inconclusive`, not `unchanged` (the goal: >= 90%). The rule
   before the per-family prior (the suite's prior, unchanged = inside the profile floor, tonight's
   shift over every case, no absolute floor) and today's, side by side; then the two nights with real
   changes (decode n2's gemv-tile, prefill's GROUP_M plant) judged against every night before them.

4. Team-like suites (`--only team-suites`): a small team's suite of 3-4 families of 2-3 cases, drawn
   (--team-draws per suite, seeded) from part 3's stored nights: a random tonight, a store of K = 2, 3, 4
   of the other nights, the drawn cases only in every table (so the suite prior, the family priors and
   the common-mode fits see what a real small suite gives them). Judged with today's options and
   `PriorOptions.suite_floor` None (the rule before: a small family's prior at least the profile's one-run
   spread) and 0.95 (today: lowered to the suite's own upper bound where that is lower): A/A verdict shares,
   each drawn family in turn +3% (flagged, regressed, and how much of the 3% its estimates kept), per K
   and per family (split-K included: the families that move ~3% between processes). `--team-rules before`
   runs the rule before alone; `--team-families 2` draws suites of exactly two families (a team's GEMM
   and torch's, say); `--team-shift fit` judges with tonight's shift as before 2026-12-02's change (a
   family with 3-5 other cases took the suite's fit over every case, its own change in it; today's
   `others`: their level alone, `PooledOptions.min_others_level`).

Time: about 9 minutes on a 2-core CPU machine for parts 1-2 (--quick: one history subset per K),
7 for part 3 (--subsets 3), part 4 about 2 minutes per rule (500 draws per suite, 0.14 s a draw and rule).
Pass: the change-point goals, a +3% step found within +-1 night in
>= 90% of step series and >= 95% of flat series without a change; parts 3 and 4, false regressed <= 1%
of cases per night on average and +3% on a family flagged in >= 90% of its cases, at every K.
The committed runs: benchmarks/results/history-2026-11-30b/report.md (parts 1-2),
benchmarks/results/history-2026-12-01/stored-nights.md (part 3).
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfci.compare import CompareOptions, compare  # noqa: E402
from perfci.compare.noise import profile_for_arch  # noqa: E402
from perfci.history.changepoints import ChangeOptions, detect, levels, split_scores  # noqa: E402
from perfci.compare.pooled import PooledOptions, build_baseline, judge  # noqa: E402
from perfci.compare.prior import PriorOptions  # noqa: E402
from perfci.files import atomic_write_text  # noqa: E402
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
# The rule before per-family priors: one prior for the suite, unchanged inside the profile's one-run floor,
# tonight's shift fitted over every case (a kernel's own change partly absorbed), no absolute floor.
SUITE_PRIOR = PooledOptions(prior=PriorOptions(scope="suite", max_prior_nights=1e4), margin="profile",
                            exclude_own_kernel=False, absolute_floor=False)
PRESETS = {"default": PooledOptions(),
           "no-absolute-floor": PooledOptions(absolute_floor=False),
           "suite-prior": SUITE_PRIOR,
           "absolute-floor": replace(SUITE_PRIOR, absolute_floor=True),
           "2026-11-30": replace(SUITE_PRIOR, level="median", mode="median", within_floor=False, absolute_floor=True)}
R01 = ROOT / "benchmarks" / "results" / "h200-2026-12-01"
# Every stored night of unchanged code with the gated measurement: (label, file).
STORED = {
    "decode": [*((f"11-30 q{i}", H30 / QUIET[i] / f"decode-q{i}.csv") for i in QUIET),
               ("11-30 l1 (busy host)", H30 / "load" / "decode-l1.csv"),
               ("11-30 l2 (busy host)", H30 / "final" / "decode-l2.csv"),
               ("12-01 n1", R01 / "nightly-two-nights" / "r" / "n1" / "decode" / "run.csv"),
               ("12-01 n2 (no gemv)", R01 / "nightly-two-nights" / "r" / "n2" / "decode" / "run.csv")],
    "prefill": [*((f"11-30 q{i}", H30 / QUIET[i] / f"prefill-q{i}.csv") for i in QUIET),
                ("11-30 l1 (busy host)", H30 / "load" / "prefill-l1.csv"),
                ("11-30 l2 (busy host)", H30 / "final" / "prefill-l2.csv"),
                ("12-01 base", R01 / "group-prefill-and-stages" / "r" / "prefill-base.csv"),
                ("12-01 base2", R01 / "group-prefill-and-stages" / "r" / "prefill-base2.csv"),
                ("12-01 n1", R01 / "nightly-two-nights" / "r" / "n1" / "prefill" / "run.csv"),
                ("12-01 n2", R01 / "nightly-two-nights" / "r" / "n2" / "prefill" / "run.csv")]}
# The nights with a real change, judged against every stored night before them: (suite, label, file, families).
CHANGED = [("decode", "12-01 n2, gemv-tile planted", R01 / "nightly-two-nights" / "r" / "n2" / "decode" / "run.csv",
            ("gemv",)),
           ("prefill", "12-01 group, GROUP_M planted", R01 / "group-prefill-and-stages" / "r" / "prefill-group.csv",
            ("matmul_tiled", "matmul_persistent"))]
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


def stored_nights(suite: str) -> list[tuple[str, ResultTable]]:
    """The suite's stored nights of unchanged code, labelled; decode's n2 without its planted gemv cases."""
    out = []
    for label, path in STORED[suite]:
        table = read_results(path)
        if "no gemv" in label:
            table = replace(table, rows=tuple(r for r in table.rows if r.kernel != "gemv"))
        out.append((label, table))
    return out


def family_planted(table: ResultTable, kernel: str, factor: float) -> ResultTable:
    """TABLE with every ok case of KERNEL (a label, variants apart) factor x slower."""
    rows = tuple(replace(r, median_us=r.median_us * factor, repeats_us=tuple(x * factor for x in r.repeats_us))
                 if r.kernel == kernel and r.status == "ok" else r for r in table.rows)
    return replace(table, rows=rows)


JUDGED_OUT = ("removed", "added")  # not judged against the store: a case a night lacks


class NightTally:
    """Per (rule, K): false regressed per held-out night, A/A verdict counts, and the +3% plants' verdicts."""

    def __init__(self):
        self.per_night: dict = {}  # (rule, k) -> {night: [share regressed per subset]}
        self.aa: dict = {}  # (rule, k) -> Counter of verdicts
        self.plant: dict = {}  # (rule, k, family) -> [cases, flagged, regressed]

    def add_aa(self, rule, k, night, cases):
        judged = [c for c in cases if c.verdict not in JUDGED_OUT]
        self.per_night.setdefault((rule, k), {}).setdefault(night, []).append(
            sum(c.verdict == "regressed" for c in judged) / max(len(judged), 1))
        counts = self.aa.setdefault((rule, k), {})
        for c in judged:
            counts[c.verdict] = counts.get(c.verdict, 0) + 1

    def add_plant(self, rule, k, family, cases):
        t = self.plant.setdefault((rule, k, family), [0, 0, 0])
        for c in cases:
            if c.kernel == family and c.verdict not in JUDGED_OUT:
                t[0] += 1
                t[1] += c.verdict in ("regressed", "inconclusive")
                t[2] += c.verdict == "regressed"


RULES = (("before: suite prior, profile floor", SUITE_PRIOR), ("today: family prior, own margin", PooledOptions()))


def stored_night_runs(suite: str, ks, subsets: int, tally: NightTally, seed: int = 7) -> None:
    nights = stored_nights(suite)
    families = sorted({r.kernel for _, t in nights for r in t.rows})
    rng = np.random.default_rng(seed)
    for k in ks:
        for h, (label, tonight) in enumerate(nights):
            others = [t for i, (_, t) in enumerate(nights) if i != h]
            every = list(itertools.combinations(range(len(others)), k))
            chosen = [every[i] for i in rng.choice(len(every), size=min(subsets, len(every)), replace=False)]
            for subset in chosen:
                history = [(suite, others[i]) for i in subset]
                for rule, base_opts in RULES:
                    popts = replace(base_opts, nights=k)
                    baseline = build_baseline(history, PROFILE, popts, "sm_90")
                    tally.add_aa(rule, k, label, judge(baseline, tonight, suite, "sm_90", PROFILE,
                                                       CompareOptions(), popts).cases)
                    for family in families:
                        cur = family_planted(tonight, family, 1.03)
                        tally.add_plant(rule, k, family, judge(baseline, cur, suite, "sm_90", PROFILE,
                                                               CompareOptions(), popts).cases)


def _share(n, d) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def stored_night_table(tally: NightTally, ks) -> list[str]:
    out = ["| K | rule | false regressed per night: mean (worst night) | A/A unchanged / inconclusive / improved | "
           "+3% on a family: flagged (not unchanged) | of them regressed |", "|---:|---|---|---|---:|---:|"]
    for k in ks:
        for rule, _ in RULES:
            nights = {n: 100 * float(np.mean(v)) for n, v in tally.per_night.get((rule, k), {}).items()}
            if not nights:
                continue
            worst = max(nights, key=nights.get)
            aa = tally.aa[(rule, k)]
            total = sum(aa.values())
            plants = [v for (r, kk, _), v in tally.plant.items() if r == rule and kk == k]
            cases, flagged, regressed = (sum(v[i] for v in plants) for i in range(3))
            out.append(f"| {k} | {rule} | {np.mean(list(nights.values())):.2f}% ({nights[worst]:.1f}%, {worst}) | "
                       f"{_share(aa.get('unchanged', 0), total)} / {_share(aa.get('inconclusive', 0), total)} / "
                       f"{_share(aa.get('improved', 0), total)} | {_share(flagged, cases)} | "
                       f"{_share(regressed, cases)} |")
    return out


def per_night_table(tally: NightTally, ks, rule: str) -> list[str]:
    labels = list(next(iter(v for (r, _), v in tally.per_night.items() if r == rule)).keys())
    out = ["| night | " + " | ".join(f"K = {k}" for k in ks) + " |", "|---|" + "---:|" * len(ks)]
    for label in labels:
        cells = [f"{100 * float(np.mean(tally.per_night[(rule, k)][label])):.1f}%"
                 if label in tally.per_night.get((rule, k), {}) else "-" for k in ks]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


def per_family_table(tally: NightTally, ks, rule: str) -> list[str]:
    families = sorted({f for (r, _, f) in tally.plant if r == rule})
    out = ["| family | " + " | ".join(f"K = {k}" for k in ks) + " |", "|---|" + "---:|" * len(ks)]
    for family in families:
        cells = []
        for k in ks:
            c, f, g = tally.plant.get((rule, k, family), (0, 0, 0))
            cells.append(f"{_share(f, c)} ({_share(g, c)})" if c else "-")
        out.append(f"| {family} | " + " | ".join(cells) + " |")
    return out


def changed_night_lines() -> list[str]:
    """The two nights with a real change, against every stored night before them, both rules."""
    out = ["| night | family | rule | regressed | inconclusive | unchanged | improved |",
           "|---|---|---|---:|---:|---:|---:|"]
    for suite, label, path, families in CHANGED:
        tonight = read_results(path)
        stamp = min(r.timestamp for r in tonight.rows if r.timestamp)
        history = [(suite, t) for name, t in stored_nights(suite)
                   if min(r.timestamp for r in t.rows if r.timestamp) < stamp and "no gemv" not in name]
        for rule, base_opts in RULES:
            popts = replace(base_opts, nights=len(history))
            result = judge(build_baseline(history, PROFILE, popts, "sm_90"), tonight, suite, "sm_90", PROFILE,
                           CompareOptions(), popts)
            for family in families:
                mine = [c.verdict for c in result.cases if c.kernel == family]
                out.append(f"| {label} ({len(history)} nights before it) | {family} ({len(mine)}) | {rule} | "
                           + " | ".join(str(mine.count(v)) for v in ("regressed", "inconclusive", "unchanged",
                                                                       "improved")) + " |")
    return out


def stored_night_report(subsets: int) -> list[str]:
    ks = (2, 4, 8)
    text = ["## 3. The pooled compare over every stored H200 night: the rule before per-family priors and today's",
            "", f"Leave-one-out: each stored night of unchanged code in turn is tonight, against {subsets} random "
            "stores (seeded) of K of the others; then each kernel family in turn made 3% slower in tonight's night. "
            "False regressed: the share of a night's judged cases called `regressed` with nothing planted, "
            "averaged over its stores, then over the nights (goal <= 1%). Flagged: `regressed` or "
            "`inconclusive`, not `unchanged` (goal >= 90%). decode n2's gemv cases (a planted change) are left "
            "out of that night; with 9 nights of decode a store holds at most 8.", ""]
    for suite in ("decode", "prefill"):
        tally = NightTally()
        stored_night_runs(suite, ks, subsets, tally)
        names = ", ".join(label for label, _ in STORED[suite])
        text += [f"### {suite} ({len(STORED[suite])} nights: {names})", "", *stored_night_table(tally, ks), "",
                 "False regressed per held-out night, today's rule:", "", *per_night_table(tally, ks, RULES[1][0]), "",
                 "+3% on one family: flagged (regressed) per family, today's rule:", "",
                 *per_family_table(tally, ks, RULES[1][0]), "",
                 "The same, the rule before:", "", *per_family_table(tally, ks, RULES[0][0]), ""]
    text += ["### Nights with a real change, against every stored night before them", "",
             *changed_night_lines(), ""]
    return text


# 4. Team-like suites: 8-10 cases in 3-4 families of 2-3 cases, drawn from the stored nights.
TEAM_KS = (2, 3, 4)
TEAM_DRAWS = 500  # per suite: about 5 minutes for both rules on a 2-core CPU
# (rule, lowered): the floor for small families before (at least the profile's one-run spread, worth
# profile_prior_nights) and today's (lowered to the suite's own upper bound, each kernel one series, where below).
TEAM_RULES = (("before (profile floor)", False), ("today (suite bound)", True))
FLAGGED = ("regressed", "inconclusive")  # a +3% plant is found when it is not unchanged (confirm decides it)


def team_options(suite_floor: bool) -> PooledOptions:
    """Part 3's "today" options, the small families' floor lowered to the suite's bound (True) or not (False)."""
    popts = PooledOptions()
    return replace(popts, prior=replace(popts.prior, suite_floor=0.95 if suite_floor else None))


@dataclass(frozen=True)
class TeamDraw:
    """One small suite: tonight, its store (K takes the first K), its families and the cases drawn of each."""

    suite: str
    tonight: int  # index into stored_nights(suite)
    store: tuple[int, ...]  # max(TEAM_KS) of the other nights, in random order; K = k uses store[:k]
    families: tuple[str, ...]
    keys: frozenset  # the drawn cases, ok on tonight and on every night of the store


def draw_team_suites(suite: str, nights: list[tuple[str, ResultTable]], draws: int,
                     rng: np.random.Generator, n_families: int | None = None) -> list[TeamDraw]:
    """DRAWS small suites of SUITE: a random tonight and store, then 3 or 4 families (``n_families``: that many)
    among those with >= 2 cases ok on every night of the draw (decode's gemv is not on n2), 2 or 3 of each
    family's cases."""
    out = []
    for _ in range(draws):
        tonight = int(rng.integers(len(nights)))
        others = [i for i in range(len(nights)) if i != tonight]
        store = tuple(int(i) for i in rng.permutation(others)[:max(TEAM_KS)])
        ok = None
        for i in (tonight, *store):
            mine = {r.key for r in nights[i][1].rows if r.status == "ok" and r.median_us}
            ok = mine if ok is None else ok & mine
        by_family: dict[str, list] = {}
        for key in sorted(ok):
            by_family.setdefault(key[0], []).append(key)
        eligible = sorted(f for f, v in by_family.items() if len(v) >= 2)
        n_fam = min(int(rng.integers(3, 5)) if n_families is None else n_families, len(eligible))
        families = tuple(sorted(rng.choice(eligible, size=n_fam, replace=False).tolist()))
        keys = set()
        for f in families:
            cases = by_family[f]
            take = min(int(rng.integers(2, 4)), len(cases))
            keys.update(cases[j] for j in rng.choice(len(cases), size=take, replace=False))
        out.append(TeamDraw(suite, tonight, store, families, frozenset(keys)))
    return out


def only_cases(table: ResultTable, keys: frozenset) -> ResultTable:
    return replace(table, rows=tuple(r for r in table.rows if r.key in keys))


class TeamTally:
    """Per (suite, rule, K): A/A verdict counts and per-draw outcomes; per (.., family): the plants' and A/A's."""

    def __init__(self):
        self.aa: dict = {}  # (suite, rule, k) -> {verdict: cases}
        self.nights: dict = {}  # (suite, rule, k) -> [draws, with a false regressed, needing no confirm]
        # (suite, rule, k, family) -> [cases, flagged, regressed, sum of log(estimate planted / estimate A/A)]
        self.plant: dict = {}
        self.family_aa: dict = {}  # (suite, rule, k, family) -> [cases, regressed, inconclusive]

    def add_aa(self, suite, rule, k, cases):
        judged = [c for c in cases if c.verdict not in JUDGED_OUT]
        counts = self.aa.setdefault((suite, rule, k), {})
        for c in judged:
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
            t = self.family_aa.setdefault((suite, rule, k, c.kernel), [0, 0, 0])
            t[0] += 1
            t[1] += c.verdict == "regressed"
            t[2] += c.verdict == "inconclusive"
        n = self.nights.setdefault((suite, rule, k), [0, 0, 0])
        n[0] += 1
        n[1] += any(c.verdict == "regressed" for c in judged)
        n[2] += all(c.verdict == "unchanged" for c in judged)

    def add_plant(self, suite, rule, k, family, cases, aa_cases):
        """The plant's verdicts on FAMILY's cases, and how much of the 3% their estimates kept against the A/A's
        (tonight's suite shift, fitted on few cases, can take a share of a family's change)."""
        aa = {c.key: c.ratio for c in aa_cases if c.ratio}
        t = self.plant.setdefault((suite, rule, k, family), [0, 0, 0, 0.0])
        for c in cases:
            if c.kernel == family and c.verdict not in JUDGED_OUT:
                t[0] += 1
                t[1] += c.verdict in FLAGGED
                t[2] += c.verdict == "regressed"
                t[3] += math.log(c.ratio / aa[c.key]) if c.ratio and c.key in aa else math.log(1.03)


def team_suite_runs(suite: str, draws: int, rules, tally: TeamTally, seed: int = 11,
                    n_families: int | None = None, shift: str = "others") -> list[TeamDraw]:
    """Judge each drawn small suite's tonight against its store at every K, under each rule: A/A, then each of its
    families in turn +3% (the drawn cases only: the others are not in the tables)."""
    nights = stored_nights(suite)
    team = draw_team_suites(suite, nights, draws, np.random.default_rng(seed), n_families)
    for d in team:
        tonight = only_cases(nights[d.tonight][1], d.keys)
        planted_nights = {f: family_planted(tonight, f, 1.03) for f in d.families}
        for k in TEAM_KS:
            history = [(suite, only_cases(nights[i][1], d.keys)) for i in d.store[:k]]
            for rule, suite_floor in rules:
                popts = replace(team_options(suite_floor), nights=k)
                if shift == "fit":  # the rule before: no count of other cases stands for the level alone
                    popts = replace(popts, min_others_level=sys.maxsize)
                baseline = build_baseline(history, PROFILE, popts, "sm_90")
                aa = judge(baseline, tonight, suite, "sm_90", PROFILE, CompareOptions(), popts).cases
                tally.add_aa(suite, rule, k, aa)
                for f, cur in planted_nights.items():
                    tally.add_plant(suite, rule, k, f, judge(baseline, cur, suite, "sm_90", PROFILE,
                                                             CompareOptions(), popts).cases, aa)
    return team


def team_k_table(tally: TeamTally, k: int, rules) -> list[str]:
    out = ["| suite | rule | draws | A/A unchanged / inconclusive / false regressed / improved | A/A nights with a "
           "false regressed | A/A nights all unchanged (no confirm) | +3% on a family: flagged | of them regressed | "
           "+3% seen as | worst family: flagged (regressed) |", "|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for suite in sorted({s for (s, _, _) in tally.aa}):
        for rule, _ in rules:
            aa = tally.aa.get((suite, rule, k))
            if aa is None:
                continue
            total = sum(aa.values())
            draws, alarmed, clean = tally.nights[(suite, rule, k)]
            plants = {f: v for (s, r, kk, f), v in tally.plant.items() if (s, r, kk) == (suite, rule, k)}
            cases, flagged, regressed, seen = (sum(v[i] for v in plants.values()) for i in range(4))
            worst = min(plants, key=lambda f: plants[f][1] / max(plants[f][0], 1))
            wc, wf, wr, _ = plants[worst]
            out.append(f"| {suite} | {rule} | {draws} | {_share(aa.get('unchanged', 0), total)} / "
                       f"{_share(aa.get('inconclusive', 0), total)} / {_share(aa.get('regressed', 0), total)} / "
                       f"{_share(aa.get('improved', 0), total)} | {_share(alarmed, draws)} | {_share(clean, draws)} | "
                       f"{_share(flagged, cases)} | {_share(regressed, cases)} | {_seen(seen, cases)} | "
                       f"{worst}: {_share(wf, wc)} ({_share(wr, wc)}) |")
    return out


def team_family_table(tally: TeamTally, rule: str) -> list[str]:
    out = ["| suite | family | " + " | ".join(f"K = {k}: +3% flagged (regressed), seen as; A/A regressed, "
                                             "inconclusive" for k in TEAM_KS) + " |",
           "|---|---|" + "---|" * len(TEAM_KS)]
    for suite, family in sorted({(s, f) for (s, r, _, f) in tally.plant if r == rule}):
        cells = []
        for k in TEAM_KS:
            c, f, g, seen = tally.plant.get((suite, rule, k, family), (0, 0, 0, 0.0))
            n, a, h = tally.family_aa.get((suite, rule, k, family), (0, 0, 0))
            cells.append(f"{_share(f, c)} ({_share(g, c)}), {_seen(seen, c)}; {_share(a, n)}, {_share(h, n)} of {n}"
                         if c else "-")
        out.append(f"| {suite} | {family} | " + " | ".join(cells) + " |")
    return out


def _seen(log_sum: float, n: int) -> str:
    """The mean change the planted cases' estimates moved by, from a sum of log ratios."""
    return f"{100 * math.expm1(log_sum / n):+.1f}%" if n else "-"


def team_suite_report(draws: int, rules, n_families: int | None = None, shift: str = "others") -> list[str]:
    families = "3-4" if n_families is None else str(n_families)
    text = [f"## 4. Team-like suites: {families} families of 2-3 cases, drawn from the stored H200 nights "
            f"(tonight's shift: {shift})", "",
            f"{draws} draws per suite (seeded) from part 3's stored nights of decode and prefill: a random "
            f"tonight, a random store of {max(TEAM_KS)} of the other nights (K = k uses its first k, so the K "
            "columns are paired), 3 or 4 families (kernel labels) among those with at least 2 cases ok on every "
            "night of the draw, and 2 or 3 of each family's cases, the same cases on every night. Only the drawn "
            "cases are in the tables, so the suite's prior, the common-mode fits (`min_common_mode_cases`, "
            "`min_night_mode_cases`) and the family priors work as they do for a real small suite; options: part "
            "3's today's (`PooledOptions()`), with `PriorOptions.suite_floor` None (the floor before: the profile's "
            "one-run spread) or 0.95 (today's: lowered to the suite's own upper bound where below). Both rules judge the same draws and stores. A/A: tonight as "
            "it is, shares of its judged cases; a night needs a confirm unless all its cases are `unchanged`. "
            "+3%: each drawn family in turn 3% slower in tonight's night; flagged: `regressed` or `inconclusive`;"
            " seen as: the mean move of the planted cases' estimates against the same cases' A/A estimates (3% "
            "less what tonight's suite shift took). Goals as part 3: false regressed <= 1% of cases, flagged >= "
            "90%. prefill has 3 families with 2 or more cases (matmul_tiled, matmul_persistent, torch_matmul; its"
            " epilogue variants have one case each), so its draws have 3.", ""]
    tally = TeamTally()
    for suite in ("decode", "prefill"):
        team_suite_runs(suite, draws, rules, tally, n_families=n_families, shift=shift)
    for k in TEAM_KS:
        text += [f"### K = {k} stored nights", "", *team_k_table(tally, k, rules), ""]
    for rule, _ in rules:
        text += [f"### Per family, {rule}", "", *team_family_table(tally, rule), ""]
    return text


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
    parser.add_argument("--only", choices=("pooled", "changepoints", "stored-nights", "team-suites"),
                        help="run one part only")
    parser.add_argument("--pooled", choices=sorted(PRESETS), default="default",
                        help="pooled options of part 1: today's default, without its absolute floor, the rule "
                             "before per-family priors (suite-prior; absolute-floor: it with the absolute floor), "
                             "or the method of 2026-11-30 (nightly medians, median common mode, absolute floor)")
    parser.add_argument("--subsets", type=int, default=3,
                        help="part 3: stores of K nights drawn per held-out night and K (default 3)")
    parser.add_argument("--team-draws", type=int, default=TEAM_DRAWS,
                        help=f"part 4: small suites drawn per suite (default {TEAM_DRAWS})")
    parser.add_argument("--team-rules", choices=("both", "before"), default="both",
                        help="part 4: judge with the rule before (the profile's floor) and today's, or the rule before only")
    parser.add_argument("--team-families", type=int, choices=(2, 3, 4),
                        help="part 4: families per drawn suite (default: 3 or 4, drawn)")
    parser.add_argument("--team-shift", choices=("others", "fit"), default="others",
                        help="part 4: tonight's shift of a family with 3-5 other cases: their level (today's) or "
                             "the suite's fit over every case (before 2026-12-02)")
    args = parser.parse_args()
    do_team = args.only in (None, "team-suites")
    if args.team_draws < 1:
        print(f"error: --team-draws must be at least 1, got {args.team_draws}", file=sys.stderr)
        return 2
    rules = TEAM_RULES if args.team_rules == "both" else TEAM_RULES[:1]
    started = time.time()
    popts = PRESETS[args.pooled]
    do_pooled, do_cp, do_stored = (args.only in (None, part) for part in ("pooled", "changepoints", "stored-nights"))
    scope = {"stored-nights": f"part 3 only, {args.subsets} stores per night and K",
             "team-suites": f"part 4 only, {args.team_draws} draws per suite"}.get(
        args.only, "quick: one subset per K" if args.quick else "every history subset")

    text = ["# History: pooled baselines and change points on real H200 nights", "",
            "Built by `python benchmarks/history_validation.py` from committed files only "
            f"({scope}).", "",
            "## 1. Pooled baseline: power and false alarms against K earlier nights", "",
            "Five quiet nights of 2026-11-30 (gated measurement), leave-one-out; K = 1 is `perfci compare` "
            "of one night against one (each other night in turn, clocks as compare uses them); K >= 2 is "
            f"`perfci compare STORE CUR` (pooled, in time; options `{args.pooled}`: night value "
            f"{popts.level}, suite shift {popts.mode}, between-night variance at least the nights' own: "
            f"{popts.within_floor}, floor {popts.floor_pct:g}%{' + floor_us / base' if popts.absolute_floor else ''}; "
            "compare's alpha 0.05). A case counts as found when it is `regressed`.", ""]
    if not do_pooled:
        text = text[:4]
    for suite in (("decode", "prefill") if do_pooled else ()):
        tally = Tally()
        pooled_runs(quiet_nights(suite), suite, (1, 2, 3, 4), tally, popts, args.quick)
        text += [f"### {suite}", "", *power_table(tally, (1, 2, 3, 4)), ""]
    if do_pooled:
        text += ["### Older measurement (2026-11-29, ungated, NVML clocks)", "",
                 "decode: three nights (the 2026-11-29 baseline and two A/A nights), leave-one-out, K = 1 and 2; "
                 "prefill: two nights, K = 1 only.", ""]
    for suite, ks in ((("decode", (1, 2)), ("prefill", (1,))) if do_pooled else ()):
        tally = Tally()
        pooled_runs([read_results(p) for p in OLD[suite]], suite, ks, tally, popts, args.quick)
        text += [f"#### {suite}", "", *power_table(tally, ks), ""]

    copts = ChangeOptions(alpha=args.cp_alpha)
    cp = changepoint_runs(args.series, args.nights, 10, copts) if do_cp else {}
    text += [] if not do_cp else ["## 2. Change points on resampled real nights", "",
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
    if do_stored:
        text += stored_night_report(args.subsets)
    if do_team:
        text += team_suite_report(args.team_draws, rules, args.team_families, args.team_shift)
    text += [f"Run time: {time.time() - started:.0f} s.", ""]
    if args.out:
        atomic_write_text(args.out, "\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
