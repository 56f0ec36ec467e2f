"""perfci confirm on real H200 rounds (2026-11-30 and 12-01): true plant sizes, confirmation rates, wall time.

    python benchmarks/evidence/confirm_on_h200.py [--trials 200] [--no-common-mode] [--out report.md]

Inputs, recorded by benchmarks/gpu/confirm_rounds.sh: four recordings of four revisions (base; aa:
no kernel changed; p3 / p5: extra fully masked K iterations in matmul_tiled and the GEMV) measured
by warm workers, each round base aa p3 p5 p5 p3 aa base: benchmarks/results/h200-2026-11-30c/
shared-e2e-and-rounds and shared-rounds with ``shared`` workers (one process per revision),
fork-rounds with ``fork`` (a fresh process per case and run), and
h200-2026-12-01/run-isolation-rounds with ``run`` (a fresh process per run, confirm's default);
and two end-to-end ``perfci confirm --suite`` sessions (shared-e2e-and-rounds/e2e-*.json).

1. **What each revision really changed**, per case and recording: the mean of the
   per-round log differences (X's two runs minus base's two), with a 95% interval.
   The plants' true sizes come from here; so does the per-process offset of
   ``shared`` workers (A/A pairs far from 0 on decode kernels, different per recording).
2. **Confirmation rates** (fork and run recordings): pseudo-sessions built from the
   recording's real runs. Each run's vector of per-case log times, minus that
   revision's mean for the case, is a residual vector (whole runs are kept, so the
   cases' shared drift stays in); a pseudo-round is four of them drawn at random, a
   planted effect of +3% or +5% is added to one case's CUR runs, and the session is
   judged exactly as ``perfci confirm`` does (common mode unless --no-common-mode, looks at
   rounds 5/10/15/20, alpha split across looks, floor 1%). A/A: no plant. Drawing runs
   independently drops the within-round drift that ABBA cancels, so this is if anything
   pessimistic. The resampled rates say what these real noise levels allow; they are not
   independent sessions.
3. **Wall time**: the recorded seconds per run (8 cases) give the cost of a round of
   four runs, and so of a session stopping at the rounds the pseudo-sessions needed.

Time: about 9 minutes on a 2-core CPU machine at the default 200 trials (--trials 20 for a
quick look; the rates then move by a few points).
Pass: the plants read +2.9% / +4.3-4.4% on matmul_tiled 4096^3 in every recording, the A/A rows
have no false verdict. The committed benchmarks/results/h200-2026-12-01/confirm.md
(confirm-no-common-mode.md with --no-common-mode) came from commit 647c58a; since then a case is
never `unchanged` while its raw paired interval reaches past the floor, and the reference's own
move is checked, so the session lengths may differ. Today's defaults on the same recordings:
benchmarks/confirm_defaults.py --h200.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfci.confirm.analysis import Round  # noqa: E402
from perfci.confirm.stopping import StoppingRule, look  # noqa: E402

DATA = ROOT / "benchmarks" / "results" / "h200-2026-11-30c"
RECORDINGS = {"shared A (2026-11-30)": DATA / "shared-e2e-and-rounds" / "rounds-full.jsonl",
              "shared B (2026-11-30)": DATA / "shared-rounds" / "rounds-record.jsonl",
              "fork (2026-11-30)": DATA / "fork-rounds" / "rounds-record-fork.jsonl",
              # 2026-12-01, another H200 host (benchmarks/gpu/confirm_rounds.sh MODE=record ISOLATION=run)
              "run (2026-12-01)": ROOT / "benchmarks" / "results" / "h200-2026-12-01" / "run-isolation-rounds" / "r"
                             / "rounds-record-run.jsonl"}
REVS = ("base", "aa", "p3", "p5")
PAIR_POSITIONS = {"aa": (1, 6), "p3": (2, 5), "p5": (3, 4)}  # base is at (0, 7)


def load(path: Path) -> tuple[list[dict], list[tuple[str, ...]]]:
    runs = [json.loads(line) for line in path.open(encoding="utf-8")]
    rounds: dict[int, dict[int, dict]] = {}
    for run in runs:
        rounds.setdefault(run["round"], {})[run["pos"]] = run
    complete = [rounds[k] for k in sorted(rounds) if len(rounds[k]) == 2 * len(REVS)]
    keys = [tuple(c["key"]) for c in complete[0][0]["cases"]]
    return complete, keys


def value(run: dict, k: int) -> float:
    case = run["cases"][k]
    return math.log(case["median_us"]) if case["status"] == "ok" and case["median_us"] else math.nan


def true_sizes(rounds: list[dict], keys) -> dict[str, list[tuple[float, float]]]:
    out = {}
    for rev, (i, j) in PAIR_POSITIONS.items():
        rows = []
        for k in range(len(keys)):
            d = np.array([(value(r[i], k) + value(r[j], k) - value(r[0], k) - value(r[7], k)) / 2 for r in rounds])
            d = d[~np.isnan(d)]
            rows.append((100 * float(np.expm1(d.mean())), 196 * float(d.std(ddof=1)) / math.sqrt(d.size)))
        out[rev] = rows
    return out


def residual_runs(rounds: list[dict], keys) -> np.ndarray:
    """(runs, cases): each run's log times minus its revision's mean per case."""
    by_rev: dict[str, list[np.ndarray]] = {rev: [] for rev in REVS}
    for r in rounds:
        for run in r.values():
            by_rev[run["rev"]].append(np.array([value(run, k) for k in range(len(keys))]))
    return np.vstack([np.array(v) - np.nanmean(np.array(v), axis=0) for v in by_rev.values()])


def pseudo_session(resid: np.ndarray, keys, plant: int | None, effect: float, rule: StoppingRule,
                   rng: np.random.Generator, common_mode: bool = True):
    cases: dict[tuple[str, ...], list[Round]] = {k: [] for k in keys}
    shift = np.zeros(len(keys))
    if plant is not None:
        shift[plant] = math.log1p(effect)
    decided_at = None  # the first look at which the planted case was called regressed
    while True:
        b1, c1, c2, b2 = resid[rng.integers(0, len(resid), 4)]
        for k, key in enumerate(keys):
            cases[key].append(Round(base=(math.exp(b1[k]), math.exp(b2[k])),
                                    cur=(math.exp(c1[k] + shift[k]), math.exp(c2[k] + shift[k]))))
        # common mode: every case as the reference, run factors from six or more (confirm's rule of
        # 2026-12-01, before a reference had to be declared)
        seen = look(cases, rule, reference=keys if common_mode else None, min_cases=6)
        if plant is not None and decided_at is None and seen.confirmation is not None:
            if any(c.key == keys[plant] and c.verdict == "regressed" for c in seen.confirmation.cases):
                decided_at = seen.rounds
        if seen.stop:
            return seen.confirmation, seen.rounds, decided_at


def rates(resid, keys, trials: int, seed: int, common_mode: bool = True
          ) -> list[tuple[str, str, float, float, float, float]]:
    rule = StoppingRule.spaced(5, 20, min_effect_pct=1.0)
    rng = np.random.default_rng(seed)
    rows = []
    for label, effect in (("A/A", 0.0), ("+3%", 0.03), ("+5%", 0.05)):
        for plant, key in enumerate(keys) if effect else [(None, None)]:
            found = false = 0
            used, first = [], []
            for _ in range(trials):
                conf, n, at = pseudo_session(resid, keys, plant, effect, rule, rng, common_mode)
                used.append(n)
                first.append(at if at is not None else math.nan)
                for case in conf.cases:
                    mine = plant is not None and case.key == keys[plant]
                    if mine:
                        found += case.verdict == "regressed"
                    else:
                        false += case.verdict in ("regressed", "improved")
            others = trials * (len(keys) - (plant is not None))
            rows.append((label, " ".join(key) if key else "every case", 100 * found / trials if key else math.nan,
                         100 * false / others, float(np.median(used)), float(np.percentile(used, 90)),
                         float(np.nanmedian(first)) if key and not np.isnan(first).all() else math.nan))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200, help="pseudo-sessions per row (default 200)")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("--no-common-mode", dest="common_mode", action="store_false",
                    help="judge each case on its own (perfci confirm --no-common-mode, as perfci nightly does)")
    args = ap.parse_args()
    lines = ["# perfci confirm on the H200, 2026-11-30 and 12-01 (benchmarks/evidence/confirm_on_h200.py)", ""]
    seconds = {}
    for name, path in RECORDINGS.items():
        rounds, keys = load(path)
        seconds[name] = float(np.mean([run["seconds"] for r in rounds for run in r.values()]))
        lines += [f"## {name}: {len(rounds)} rounds, {seconds[name]:.1f} s per run of {len(keys)} cases", "",
                  "| case | aa - base | p3 - base | p5 - base |", "|---|---:|---:|---:|"]
        sizes = true_sizes(rounds, keys)
        for k, key in enumerate(keys):
            cells = [f"{sizes[rev][k][0]:+.2f}% ±{sizes[rev][k][1]:.2f}" for rev in ("aa", "p3", "p5")]
            lines.append(f"| {' '.join(key)} | " + " | ".join(cells) + " |")
        lines.append("")
    for name in ("fork (2026-11-30)", "run (2026-12-01)"):
        rounds, keys = load(RECORDINGS[name])
        resid = residual_runs(rounds, keys)
        per_round = 4 * seconds[name]
        lines += [f"## Pseudo-sessions from the {name} recording ({len(resid)} real runs, {args.trials} sessions "
                  f"per row, seed {args.seed}{'' if args.common_mode else ', --no-common-mode'})", "",
                  "A session stops when every case is decided; the A/A cases need ~20 rounds to be "
                  "`unchanged` within +-1%, so every session runs long. 'plant decided at' is the first look "
                  "that called the planted case regressed: what a session judging only that case "
                  "(`--cases`, the others measured for the common mode) would cost.", "",
                  "| plant | on case | found (regressed) | false verdicts, other cases | rounds median | p90 | "
                  "s per case, whole session | plant decided at (median round) | s per case then |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label, case, found, false, med, p90, first in rates(resid, keys, args.trials, args.seed, args.common_mode):
            found_s = "" if math.isnan(found) else f"{found:.1f}%"
            first_s = "" if math.isnan(first) else f"{first:.0f} | {first * per_round / len(keys):.0f}"
            lines.append(f"| {label} | {case} | {found_s} | {false:.2f}% | {med:.0f} | {p90:.0f} | "
                         f"{med * per_round / len(keys):.0f} | {first_s or ' | '} |")
        lines.append("")
    for name in ("aa", "p3"):
        path = DATA / "shared-e2e-and-rounds" / f"e2e-{name}.json"
        report = json.loads(path.read_text())
        s = report["summary"]
        verdicts = ", ".join(f"{c['kernel']} {c['shape']} {c['verdict']} {100 * (c['ratio'] - 1):+.2f}%"
                             for c in report["cases"] if c["verdict"] != "unchanged")
        lines += ["", f"End to end (shared workers), base vs {name}: {s['rounds']} rounds, {s['seconds']} s of rounds "
                      f"for {len(report['cases'])} cases; not unchanged: {verdicts or 'none'}"]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
