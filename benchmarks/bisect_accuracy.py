"""How often does each bisect strategy name the planted culprit, and at what cost?

On the same seeded synthetic histories (``tests/bisect/synth.py``: a bench that
prints ``base * (1 + N(0, noise))`` and one commit that raises ``base`` by the
step), three strategies are compared:

  perfci     ``perfci bisect GOOD BAD -- ./bench.py`` with its defaults
  git-run    ``git bisect run`` with a script that runs the bench once and
             calls it bad above a fixed threshold halfway between one run at
             GOOD and one at BAD
  seed-000   the bisect-perf-regression skill's rule: 3 runs per commit, the
             median, bad past 30% of the GOOD->BAD gap (medians of 3 runs each)

Accuracy is the share of trials whose answer is exactly the planted commit;
runs is the mean number of bench invocations per trial.

    python benchmarks/bisect_accuracy.py --trials 30 --steps 5 3

Each bench run draws its noise afresh, so two runs differ by a trial or two.
``BENCH_SEED_FILE=$(mktemp -u) python benchmarks/bisect_accuracy.py ...``
seeds the n-th bench run of the whole benchmark with n (see synth.py): a
rerun of the same code gives the same table, and two versions of perfci draw
the same noise until one of them makes a run the other does not.

Time: about 5 minutes on a 2-core CPU machine for --trials 30 --steps 5 3.
Pass: perfci names the planted commit in every trial at a 5% step and in 83-90% at 3%
(docs/bisect.md, Accuracy), above both other strategies at each step.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "bisect"))

from synth import GIT_ENV, make_history  # noqa: E402

# git bisect run's script: exit 0 good, 1 bad, 125 skip. It runs inside the repo.
THRESHOLD_SCRIPT = """#!{python}
import re, statistics, subprocess, sys
runs, threshold = int(sys.argv[1]), float(sys.argv[2])
values = []
for _ in range(runs):
    out = subprocess.run(["./bench.py"], capture_output=True, text=True)
    found = re.findall(r"[-+]?\\d+\\.\\d+", out.stdout)
    if out.returncode or not found:
        sys.exit(125)
    values.append(float(found[-1]))
sys.exit(1 if statistics.median(values) > threshold else 0)
"""


def _env(counter: Path, noise: float) -> dict:
    env = dict(os.environ, **GIT_ENV, BENCH_COUNTER=str(counter), BENCH_NOISE=str(noise))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _count(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _bench_at(repo: Path, sha: str, env: dict, runs: int) -> list[float]:
    subprocess.run(["git", "checkout", "-q", "--detach", sha], cwd=repo, env=env, check=True)
    values = []
    for _ in range(runs):
        out = subprocess.run(["./bench.py"], cwd=repo, env=env, capture_output=True, text=True, check=True)
        values.append(float(out.stdout.split()[-2]))
    return values


def run_perfci(repo: Path, good: str, bad: str, env: dict) -> str | None:
    out = subprocess.run([sys.executable, "-m", "perfci", "bisect", "--format", "json", good, bad, "--", "./bench.py"],
                         cwd=repo, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["culprit"]["sha"]


def run_git_bisect(repo: Path, good: str, bad: str, env: dict, runs: int, gap_fraction: float) -> str | None:
    good_value = statistics.median(_bench_at(repo, good, env, runs))
    bad_value = statistics.median(_bench_at(repo, bad, env, runs))
    threshold = good_value + gap_fraction * (bad_value - good_value)
    script = repo.parent / "threshold.py"
    script.write_text(THRESHOLD_SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "bisect", "start", bad, good], cwd=repo, env=env, check=True, capture_output=True)
    out = subprocess.run(["git", "bisect", "run", str(script), str(runs), repr(threshold)], cwd=repo, env=env,
                         capture_output=True, text=True)
    first_bad = subprocess.run(["git", "rev-parse", "--verify", "-q", "refs/bisect/bad"], cwd=repo, env=env,
                               capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "bisect", "reset"], cwd=repo, env=env, capture_output=True)
    return first_bad if "is the first bad commit" in out.stdout else None


STRATEGIES = {
    "perfci": lambda repo, good, bad, env: run_perfci(repo, good, bad, env),
    "git-run (1 run, halfway)": lambda repo, good, bad, env: run_git_bisect(repo, good, bad, env, 1, 0.5),
    "seed-000 (3 runs, 30%)": lambda repo, good, bad, env: run_git_bisect(repo, good, bad, env, 3, 0.3),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=30, help="seeded histories per step size (default 30)")
    parser.add_argument("--steps", type=float, nargs="+", default=[5.0, 3.0], help="planted steps in percent")
    parser.add_argument("--commits", type=int, default=40, help="commits per history (default 40)")
    parser.add_argument("--noise", type=float, default=1.0, help="gaussian noise per run, percent (default 1)")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)

    rows = []
    started = time.monotonic()
    for step in args.steps:
        tally = {name: {"hits": 0, "runs": 0} for name in STRATEGIES}
        for trial in range(args.trials):
            rng = random.Random(args.seed * 1000 + trial)
            culprit_index = rng.randrange(2, args.commits + 1)
            with tempfile.TemporaryDirectory(prefix="bisect-accuracy-") as tmp:
                history = make_history(Path(tmp) / "repo", args.commits, culprit_index, step / 100.0)
                for name, strategy in STRATEGIES.items():
                    counter = Path(tmp) / f"runs-{name[:6]}.txt"
                    found = strategy(history.path, history.good, history.bad, _env(counter, args.noise / 100.0))
                    tally[name]["hits"] += found == history.culprit
                    tally[name]["runs"] += _count(counter)
            print(f"  step {step:g}% trial {trial + 1}/{args.trials} "
                  f"({time.monotonic() - started:.0f}s)", file=sys.stderr, flush=True)
        for name, t in tally.items():
            rows.append((f"{step:g}%", name, 100.0 * t["hits"] / args.trials, t["runs"] / args.trials))

    print(f"{args.trials} trials per step, {args.commits} commits, {args.noise:g}% gaussian noise per run, "
          f"seed {args.seed}")
    print("| step | strategy | culprit found | bench runs / trial |")
    print("|---:|---|---:|---:|")
    for step, name, accuracy, runs in rows:
        print(f"| {step} | {name} | {accuracy:.0f}% | {runs:.1f} |")
    print(f"(wall time {time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
