"""Does ``perfci bisect`` survive outliers at its endpoints?

Seeded trials of a synthetic history (``tests/bisect/synth.py``): ``--commits``
commits after GOOD, the step planted at a random one, a bench that prints
``10 * (1 + N(0, noise))`` (``* (1 + step)`` from the culprit on), and outliers:

  --endpoint-outliers N   N runs at each endpoint (--at good|bad: one of them),
                          at random runs among its first
                          --repeats, --outlier-size off; ``toward`` (default):
                          GOOD's slower and BAD's faster, the direction that hides
                          the step from the rank test (one a side: p = 0.27 at 5 runs)
  --outlier-rate PCT      besides, any run is an outlier with this probability
                          (--outlier-sign +1 slower, -1 faster, 0 either)

Two ways to run the trials (``--mode``):

  real  ``python -m perfci bisect --format json GOOD BAD -- ./bench.py`` in a fresh
        git repository per trial with a dirty tree (``dirty_the_tree``), as a user
        runs it; also checks the tree came back as it was. 2.5-4.5 s a trial on
        two cores.
  sim   the same decisions in-process (:func:`perfci.bisect.search.search` over a
        simulated bench, ``tests/bisect/simulate.py``): no git, no processes, a
        thousand trials in seconds. The bench model is the same; the random draws
        are not the same ones, so the two agree in distribution, not trial by trial.

Reported per mode: false "no difference" (exit 3 although the step is there;
the goal is 0), wrong culprit (exit 0 naming another commit; of those, BAD
itself), right culprit, every candidate skipped (exit 2), and bench runs per
trial (all of them, and at the endpoints).

    python benchmarks/bisect_outliers.py                      # 100 real + 2000 simulated trials
    python benchmarks/bisect_outliers.py --mode sim --trials 2000 --endpoint-outliers 0 \\
        --outlier-rate 10                                      # every run 10% likely 30% slow

Real mode seeds each trial's bench noise (``BENCH_SEED_BASE``), so a rerun of the
same code gives the same table.

Time on a 2-core CPU machine: 4-7 minutes for the default (100 real trials at 2.5-4.5 s, then
2000 simulated ones in seconds); --mode sim alone takes seconds.
Pass: 0 false "no difference" and 0 wrong culprits with one outlier at each endpoint (the
default), right culprit in every trial; docs/bisect.md has the other scenarios' figures.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bisect.synth import GIT_ENV, SIM_GOOD, dirty_the_tree, endpoint_outliers, make_history, snapshot  # noqa: E402

OUTCOMES = ("no-difference", "swapped", "wrong", "wrong: BAD itself", "right", "all-skipped", "error",
            "tree not restored")


def _scenario(rng: random.Random, args) -> tuple[int, dict[str, dict[int, float]]]:
    """The trial's culprit (1-based) and planted outliers, keyed c00 (GOOD) and cNN (BAD)."""
    culprit = rng.randrange(2, args.commits + 1)
    planted = endpoint_outliers(rng, args.commits, args.endpoint_outliers, args.outlier_size / 100.0,
                                args.direction, args.repeats, args.at) if args.endpoint_outliers else {}
    return culprit, planted


def _perfci_options(args) -> list[str]:
    # --repeats only says where the outliers are planted now: bisect sizes its rounds by --budget.
    return ["--min-effect", str(args.min_effect)]


def real_trial(trial: int, args) -> tuple[str, int, int]:
    """One ``python -m perfci bisect`` on a fresh repository: (outcome, bench runs, endpoint runs)."""
    rng = random.Random(args.seed * 1000 + trial)
    culprit, planted = _scenario(rng, args)
    with tempfile.TemporaryDirectory(prefix="bisect-outliers-") as tmp:
        h = make_history(Path(tmp) / "repo", args.commits, culprit, args.step / 100.0)
        dirty_the_tree(h.path)
        before = snapshot(h.path)
        sha = {SIM_GOOD: h.good, f"c{args.commits:02d}": h.bad}
        counter = Path(tmp) / "runs.txt"
        env = dict(os.environ, **GIT_ENV, BENCH_COUNTER=str(counter), BENCH_NOISE=str(args.noise / 100.0),
                   BENCH_SEED_FILE=str(Path(tmp) / "seed.txt"), BENCH_SEED_BASE=f"{args.seed}-{trial}",
                   BENCH_OUTLIER_AT=",".join(f"{sha[name]}:{k}:{factor!r}" for name, runs in planted.items()
                                             for k, factor in runs.items()),
                   BENCH_OUTLIER_RATE=str(args.outlier_rate / 100.0), BENCH_OUTLIER_SIZE=str(args.outlier_size / 100.0),
                   BENCH_OUTLIER_SIGN=str(args.outlier_sign))
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        out = subprocess.run([sys.executable, "-m", "perfci", "bisect", "--format", "json", *_perfci_options(args),
                              h.good, h.bad, "--", "./bench.py"], cwd=h.path, env=env, capture_output=True, text=True)
        lines = counter.read_text().splitlines() if counter.exists() else []
        runs, endpoint_runs = len(lines), sum(line in (h.good, h.bad) for line in lines)
        if snapshot(h.path) != before:
            return "tree not restored", runs, endpoint_runs
        try:
            report = json.loads(out.stdout)
        except json.JSONDecodeError:
            print(f"  trial {trial}: exit {out.returncode}: {out.stderr.strip()[-300:]}", file=sys.stderr)
            return "error", runs, endpoint_runs
        if out.returncode == 0:
            found = report["culprit"]["sha"]
            outcome = "right" if found == h.culprit else ("wrong: BAD itself" if found == h.bad else "wrong")
        elif out.returncode == 3:
            outcome = "swapped" if report.get("status") == "swapped" else "no-difference"
        elif out.returncode == 2 and report.get("status") == "all-skipped":
            outcome = "all-skipped"
        else:
            outcome = "error"
        return outcome, runs, endpoint_runs


def sim_trial(trial: int, args) -> tuple[str, int, int]:
    from tests.bisect.simulate import bisect as sim_bisect  # perfci's session, imported only for sim

    rng = random.Random(args.seed * 1000 + trial)
    culprit, planted = _scenario(rng, args)
    t = sim_bisect(args.commits, culprit, args.step / 100.0, rng, noise=args.noise / 100.0, planted=planted,
                   outlier_rate=args.outlier_rate / 100.0, outlier_size=args.outlier_size / 100.0,
                   outlier_sign=args.outlier_sign, repeats=args.repeats, max_repeats=args.max_repeats,
                   min_effect_pct=args.min_effect)
    if t.status == "culprit":
        outcome = "right" if t.right else ("wrong: BAD itself" if t.found == args.commits else "wrong")
    else:
        outcome = t.status
    return outcome, t.bench_runs, t.endpoint_runs


def run(mode: str, trials: int, args) -> dict:
    tally: Counter = Counter()
    runs: list[int] = []
    endpoint_runs: list[int] = []
    started = time.monotonic()
    trial_fn = real_trial if mode == "real" else sim_trial
    for trial in range(trials):
        outcome, n, e = trial_fn(trial, args)
        tally[outcome] += 1
        runs.append(n)
        endpoint_runs.append(e)
        if mode == "real" and ((trial + 1) % 10 == 0 or outcome not in ("right",)):
            print(f"  {mode} trial {trial + 1}/{trials}: {outcome}, {n} runs ({time.monotonic() - started:.0f}s)",
                  file=sys.stderr, flush=True)
    return {"mode": mode, "trials": trials, "tally": tally, "runs": runs, "endpoint_runs": endpoint_runs,
            "seconds": time.monotonic() - started}


def table(results: list[dict]) -> str:
    lines = ["| mode | trials | false no difference | wrong culprit (BAD itself) | right culprit | all skipped "
             "| other | bench runs / trial (max) | at the endpoints | wall |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        t, n = r["tally"], r["trials"]
        wrong = t["wrong"] + t["wrong: BAD itself"]
        other = t["swapped"] + t["error"] + t["tree not restored"]
        lines.append(f"| {r['mode']} | {n} | {t['no-difference']} | {wrong} ({t['wrong: BAD itself']}) | "
                     f"{100.0 * t['right'] / n:.1f}% | {t['all-skipped']} | {other} | "
                     f"{sum(r['runs']) / n:.1f} ({max(r['runs'])}) | {sum(r['endpoint_runs']) / n:.1f} | "
                     f"{r['seconds']:.0f}s |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("real", "sim", "both"), default="both")
    parser.add_argument("--trials", type=int, default=100, help="real trials (default 100)")
    parser.add_argument("--sim-trials", type=int, default=2000, help="simulated trials with --mode both (default 2000)")
    parser.add_argument("--commits", type=int, default=48, help="commits after GOOD (default 48)")
    parser.add_argument("--step", type=float, default=8.0, help="planted step, percent (default 8)")
    parser.add_argument("--noise", type=float, default=1.0, help="gaussian noise per run, percent (default 1)")
    parser.add_argument("--endpoint-outliers", type=int, default=1, help="outliers at each endpoint (default 1)")
    parser.add_argument("--at", choices=("both", "good", "bad"), default="both",
                        help="which endpoints get --endpoint-outliers (default both)")
    parser.add_argument("--outlier-size", type=float, default=30.0, help="how far off, percent (default 30)")
    parser.add_argument("--direction", choices=("toward", "away", "random"), default="toward",
                        help="endpoint outliers: towards the other endpoint (default), away, or either")
    parser.add_argument("--outlier-rate", type=float, default=0.0, help="any run is an outlier, percent (default 0)")
    parser.add_argument("--outlier-sign", type=int, choices=(-1, 0, 1), default=1,
                        help="--outlier-rate's: +1 slower (default), -1 faster, 0 either")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-repeats", type=int, default=20)
    parser.add_argument("--min-effect", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    if args.endpoint_outliers > args.repeats:
        parser.error("--endpoint-outliers cannot exceed --repeats")

    results = []
    if args.mode in ("sim", "both"):
        results.append(run("sim", args.sim_trials if args.mode == "both" else args.trials, args))
    if args.mode in ("real", "both"):
        results.append(run("real", args.trials, args))
    print(f"{args.commits} commits, {args.step:g}% step, {args.noise:g}% gaussian noise, "
          f"{args.endpoint_outliers} outlier(s) {args.outlier_size:g}% off at "
          f"{'each endpoint' if args.at == 'both' else args.at.upper()} ({args.direction}), "
          f"outlier rate {args.outlier_rate:g}% (sign {args.outlier_sign:+d}), --repeats {args.repeats} "
          f"--max-repeats {args.max_repeats} --min-effect {args.min_effect:g}, seed {args.seed}")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
