"""Does ``perfci bisect`` name the right commit, and never a wrong one with exit 0, on a drifting machine?

What it validates: ``perfci bisect GOOD BAD -- python3 bench.py`` on real
48-commit git histories whose bench is a real CPU-bound Python loop of about
30 ms, with no synthetic noise at all: the machine's own drift is the noise
(on the project's 2-core CI machines, speed jumps by +-20% between states that
last seconds, and other jobs come and go). One random commit makes the loop
do STEP% more work; the commits around it change only docs. The user's tree
is dirty (an uncommitted edit to a tracked file, an untracked file), and after
every trial the script checks that the tree, index, HEAD, stash and worktree
list are exactly as before.

The same histories go through seed 000's rule (the bisect-perf-regression
skill): ``git bisect run`` with a script that runs the bench 3 times, takes the
median and calls a commit bad past 30% of the GOOD -> BAD gap (medians of 3
runs at each end), in a clean clone (``git bisect`` needs a clean tree).

Per row (step), per strategy: right with exit 0, wrong with exit 0, exit 3
(and whether the reported range holds the culprit), other outcomes, mean
bench runs and wall seconds per trial.

    python benchmarks/bisect_drift.py --trials 10                     # tune: ~1 h on 2 cores
    python benchmarks/bisect_drift.py --trials 100 --out benchmarks/results/bisect-drift/run.jsonl

Time on a 2-core machine: 8% trials take 0.5-3 minutes of perfci each, 3%
trials 3-10 minutes (they end at the per-decision --budget); the seed-000 rule
adds ~5 s a trial. 100 trials a row: several hours; run it in the background
(nohup) and read the table from --out (one JSON line per trial) as it grows:
``--table FILE`` prints the table of a results file.

Pass: at 8%, perfci right >= 95% and wrong with exit 0 = 0; at 3%, wrong with
exit 0 <= 1% and the rest exit 3 with a range that holds the culprit.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bisect.synth import GIT_ENV, git, snapshot  # noqa: E402

N_COMMITS = 48
WORK = 300_000  # loop iterations for ~30 ms on the 2-core CI machine

BENCH = '''"""The bench: a CPU-bound loop whose length is in work.txt; prints its time in ms."""
import time
from pathlib import Path

work = int(Path(__file__).with_name("work.txt").read_text())
t0 = time.perf_counter()
s = 0
for i in range(work):
    s += i * i % 7
print(f"{(time.perf_counter() - t0) * 1e3:.4f}")
'''

# git bisect run's script for seed 000's rule: 3 runs, median, bad past the threshold.
SEED_RULE = '''import statistics, subprocess, sys
threshold, counter = float(sys.argv[1]), sys.argv[2]
values = []
for _ in range(3):
    out = subprocess.run([sys.executable, "bench.py"], capture_output=True, text=True)
    with open(counter, "a") as fh:
        fh.write("run\\n")
    if out.returncode:
        sys.exit(125)
    values.append(float(out.stdout.split()[-1]))
sys.exit(1 if statistics.median(values) > threshold else 0)
'''


def make_history(path: Path, culprit: int, step: float, rng: random.Random) -> dict:
    """48 commits after GOOD; commit ``culprit`` (1-based) raises the loop's work by ``step``; the rest touch docs."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "commit.gpgsign", "false")
    (path / "bench.py").write_text(BENCH)
    (path / "work.txt").write_text(f"{WORK}\n")
    (path / "docs").mkdir()
    (path / "docs" / "notes.md").write_text("# notes\n")
    (path / "README.md").write_text("a bench\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "GOOD: the loop")
    good = git(path, "rev-parse", "HEAD")
    commits = []
    for i in range(1, N_COMMITS + 1):
        if i == culprit:
            (path / "work.txt").write_text(f"{round(WORK * (1.0 + step))}\n")
            subject = f"tune the loop (step {i})"
        else:
            target = path / ("docs/notes.md" if rng.random() < 0.7 else "README.md")
            with open(target, "a") as fh:
                fh.write(f"docs edit {i}\n")
            subject = f"docs: edit {i}"
        git(path, "add", "-A")
        git(path, "commit", "-qm", subject)
        commits.append(git(path, "rev-parse", "HEAD"))
    return {"good": good, "bad": commits[-1], "culprit": commits[culprit - 1], "commits": commits}


def dirty(path: Path) -> None:
    """An uncommitted edit to a tracked file and an untracked file: bisect must leave both."""
    with open(path / "docs" / "notes.md", "a") as fh:
        fh.write("my uncommitted edit\n")
    (path / "scratch.txt").write_text("my untracked notes\n")


def run_perfci(path: Path, h: dict, jobs: int, extra: list[str], timeout: float) -> dict:
    argv = [sys.executable, "-m", "perfci", "bisect", "--format", "json", "--jobs", str(jobs), *extra,
            h["good"], h["bad"], "--", "python3", "bench.py"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=path, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"exit": "timeout", "seconds": time.monotonic() - t0}
    seconds = time.monotonic() - t0
    out = {"exit": proc.returncode, "seconds": seconds}
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        out["stderr"] = proc.stderr[-500:]
        return out
    named = (report.get("culprit") or {}).get("sha")
    out.update(named=named, status=report.get("status"), runs=report.get("bench_runs"),
               candidates=report.get("candidates", []), best_guess=report.get("best_guess"),
               step=report.get("step_interval"), culprit_check=report.get("culprit_check"),
               message=report.get("message", "")[:300])
    return out


def run_seed_rule(path: Path, h: dict, scratch: Path) -> dict:
    """Seed 000's rule through ``git bisect run``, in a clean clone of the same history."""
    clone = scratch / "seed-clone"
    subprocess.run(["git", "clone", "-q", str(path), str(clone)], check=True, capture_output=True)
    counter = scratch / "seed-runs.txt"
    counter.write_text("")
    t0 = time.monotonic()

    def medians(sha: str) -> float:
        git(clone, "checkout", "-q", sha)
        values = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "bench.py"], cwd=clone, capture_output=True, text=True)
            with open(counter, "a") as fh:
                fh.write("run\n")
            values.append(float(out.stdout.split()[-1]))
        return sorted(values)[1]

    g, b = medians(h["good"]), medians(h["bad"])
    result = {"good_median": g, "bad_median": b}
    if b <= g:
        result.update(exit="no-gap", named=None)
    else:
        script = scratch / "seed_rule.py"
        script.write_text(SEED_RULE)
        threshold = g + 0.3 * (b - g)
        git(clone, "checkout", "-q", "main")
        git(clone, "bisect", "start", h["bad"], h["good"])
        proc = subprocess.run(["git", "bisect", "run", sys.executable, str(script), f"{threshold}", str(counter)],
                              cwd=clone, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
        found = re.search(r"^([0-9a-f]{40}) is the first bad commit", proc.stdout, re.MULTILINE)
        result.update(exit=0 if found else proc.returncode, named=found.group(1) if found else None)
        git(clone, "bisect", "reset")
    result.update(runs=len(counter.read_text().splitlines()), seconds=time.monotonic() - t0)
    shutil.rmtree(clone, ignore_errors=True)
    return result


def leftovers(repo: Path) -> list[str]:
    """Worktrees git still knows of besides the main one (``git worktree list`` is in the snapshot too)."""
    admin = repo / ".git" / "worktrees"
    return sorted(p.name for p in admin.iterdir()) if admin.is_dir() else []


def trial(index: int, step: float, seed: int, jobs: int, extra: list[str], timeout: float) -> dict:
    rng = random.Random(f"{seed}:{step}:{index}")
    culprit = rng.randrange(2, N_COMMITS + 1)
    with tempfile.TemporaryDirectory(prefix="bisect-drift-") as tmp:
        scratch = Path(tmp)
        repo = scratch / "repo"
        h = make_history(repo, culprit, step, rng)
        dirty(repo)
        before = snapshot(repo)
        perfci = run_perfci(repo, h, jobs, extra, timeout)
        perfci["tree_intact"] = snapshot(repo) == before
        perfci["worktrees_left"] = leftovers(repo)
        seed_rule = run_seed_rule(repo, h, scratch)
    number = {sha: i for i, sha in enumerate(h["commits"], start=1)}
    for r in (perfci, seed_rule):
        r["named_number"] = number.get(r.get("named"))
    perfci["candidate_numbers"] = [number[c] for c in perfci.get("candidates", []) if c in number]
    return {"index": index, "step": step, "seed": seed, "jobs": jobs, "culprit": culprit,
            "perfci": perfci, "seed000": seed_rule, "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "load": os.getloadavg()[0],  # other jobs on the machine: the noise this trial ran in
            "perfci_commit": _code_version()}


def _code_version() -> str:
    """The commit of the perfci that ran, ``+dirty`` when perfci/bisect or perfci/stats differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "perfci/bisect", "perfci/stats"], cwd=ROOT,
                           capture_output=True, text=True)
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def outcome(r: dict, culprit: int, who: str) -> str:
    if r.get("exit") == 0 and r.get("named_number") is not None:
        return "right" if r["named_number"] == culprit else "wrong"
    if who == "perfci" and r.get("exit") == 3:
        return "exit3-holds" if culprit in r.get("candidate_numbers", []) else "exit3-misses"
    return "other"


def table(rows: list[dict]) -> str:
    lines = ["| step | strategy | trials | right, exit 0 | wrong, exit 0 | exit 3, range holds culprit "
             "(mean width) | exit 3, range misses | other | bench runs / trial | wall s / trial | load | tree intact |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for step in sorted({r["step"] for r in rows}, reverse=True):
        mine = [r for r in rows if r["step"] == step]
        for who in ("perfci", "seed000"):
            counts = {k: 0 for k in ("right", "wrong", "exit3-holds", "exit3-misses", "other")}
            runs = secs = 0.0
            intact = 0
            for r in mine:
                counts[outcome(r[who], r["culprit"], who)] += 1
                runs += r[who].get("runs") or 0
                secs += r[who].get("seconds") or 0
                intact += bool(r[who].get("tree_intact", True)) and not r[who].get("worktrees_left")
            n = len(mine)
            name = "perfci bisect" if who == "perfci" else "seed 000 (3 runs, median, 30% of gap)"
            tree = f"{intact}/{n}" if who == "perfci" else "n/a (clone)"
            widths = [len(r[who]["candidate_numbers"]) for r in mine
                      if outcome(r[who], r["culprit"], who) == "exit3-holds"]
            holds = f"{counts['exit3-holds']} ({sum(widths) / len(widths):.1f})" if widths else "0"
            three = (lambda k: str(counts[k])) if who == "perfci" else (lambda k: "n/a")
            load = sum(r.get("load", 0.0) for r in mine) / n
            lines.append(f"| {step * 100:g}% | {name} | {n} | {counts['right']} | {counts['wrong']} | "
                         f"{holds if who == 'perfci' else 'n/a'} | {three('exit3-misses')} | {counts['other']} | "
                         f"{runs / n:.0f} | {secs / n:.0f} | {load:.1f} | {tree} |")
    return "\n".join(lines)


def _interval_rule(ts: list[tuple[float, float]], rule) -> str | None:
    """The rule the ratio test replaced: the sequential interval of the mean t leaving 0."""
    from perfci.bisect import rules

    lk = rules.look([t for t, _ in ts], rule)
    if lk is None:
        return None
    return "good" if lk.high < 0 else "bad" if lk.low > 0 else None


def probe_rules(path: Path, trials: int, seed: int) -> str:
    """Rounds and wrong calls a probe needs under each rule, on real rounds resampled and on the simulated machine.

    ``path`` holds rounds of ``lo m m hi`` with m at lo's level and hi 8% more
    work, measured on this machine (``[[role, ms], ...]`` per round). Their
    deviations from the mean t are resampled with replacement around -s (m like
    lo) and 0 (m in the middle). The simulated machine is tests/bisect/simulate.py's.
    """
    import math

    from perfci.bisect import rules
    from tests.bisect import simulate

    raw = json.loads(path.read_text())
    real = [rules.probe_contrast(tuple(map(tuple, r)))[0] for r in raw]
    mean = sum(real) / len(real)
    deviations = [t - mean for t in real]
    s_true = -mean
    rule = rules.SequentialRule()
    floor = math.log(1.02)
    lines = [f"probe rules on {path.name}: {len(real)} rounds, mean t {mean:+.4f} (step {s_true:.4f}), "
             f"sd {(sum(d * d for d in deviations) / (len(real) - 1)) ** 0.5:.3f}",
             "| rounds from | m at | rule | trials | wrong | undecided at 400 rounds | mean rounds |",
             "|---|---|---|---:|---:|---:|---:|"]

    def run(draw, decide, cap=400):
        ts: list[tuple[float, float]] = []
        while len(ts) < cap:
            ts.append(draw(len(ts)))
            verdict = decide(ts)
            if verdict is not None:
                return verdict, len(ts)
        return None, len(ts)

    rng = random.Random(seed)
    for source in ("real, resampled", "simulated machine"):
        for where, offset in (("lo", -1.0), ("middle", 0.0)):
            decisions = {
                "interval of mean t leaves 0": lambda ts: _interval_rule(ts, rule),
                "ratio test, s = 3/4 true": lambda ts: _ratio(ts, rule, 0.75 * s_true, floor),
                "ratio test, s = true": lambda ts: _ratio(ts, rule, s_true, floor),
            }
            for name, decide in decisions.items():
                wrong = undecided = total = 0
                n = trials if "ratio" in name else max(1, trials // 3)
                for k in range(n):
                    if source.startswith("real"):
                        def draw(i, o=offset):
                            return (o * s_true + rng.choice(deviations), s_true)
                    else:
                        machine = simulate.Machine(random.Random(f"{seed}:{k}"))
                        levels = {"lo": 30.0, "m": 30.0 * math.exp(s_true * (offset + 1) / 2), "hi": 30.0 *
                                  math.exp(s_true)}

                        def draw(i, m=machine, lv=levels):
                            rnd = tuple((r, m.value(lv[r])) for r in rules.probe_order(i))
                            return rules.probe_contrast(rnd)
                    verdict, count = run(draw, decide)
                    total += count
                    undecided += verdict is None
                    wrong += where == "lo" and verdict == "bad"
                shown = "n/a (either is right)" if where == "middle" else str(wrong)
                lines.append(f"| {source} | {where} | {name} | {n} | {shown} | {undecided} | {total / n:.0f} |")
    return "\n".join(lines)


SIM_MACHINES = {
    "quiet (one state, 0.5% scatter, no outliers: a GPU's large GEMM)":
        {"noise": 0.005, "outlier_rate": 0.0, "states": (1.0,)},
    "drifting (states x0.85/x1/x1.2 ~2 s, 1.5% scatter, 3% of runs +30-100%)": {},
    "loaded (states x0.8/x1/x1.25 ~1 s, 5% scatter, 10% of runs +30-100%)":
        {"noise": 0.05, "outlier_rate": 0.1, "states": (0.8, 1.0, 1.25), "dwell_s": 1.0},
}


def simulated(trials: int, steps: list[float], seed: int) -> str:
    """Whole bisects in-process on tests/bisect/simulate.py's machines: the same table, in seconds of CPU."""
    from tests.bisect import simulate

    lines = ["| machine | step | jobs | trials | right, exit 0 | wrong, exit 0 | exit 3, range holds culprit | "
             "exit 3, range misses | bench runs / trial | simulated s / trial |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, machine in SIM_MACHINES.items():
        for step_pct in steps:
            for jobs in (1, 2):
                counts = {"right": 0, "wrong": 0, "holds": 0, "misses": 0}
                runs = secs = 0.0
                for t in range(trials):
                    rng = random.Random(f"{seed}:{step_pct}:{t}")
                    culprit = rng.randrange(2, N_COMMITS + 1)
                    trial = simulate.bisect(N_COMMITS, culprit, step_pct / 100.0, rng, machine=machine, jobs=jobs)
                    key = "right" if trial.right else "wrong" if trial.wrong else \
                        "holds" if trial.range_holds_culprit else "misses"
                    counts[key] += 1
                    runs += trial.bench_runs
                    secs += trial.seconds
                lines.append(f"| {name} | {step_pct:g}% | {jobs} | {trials} | {counts['right']} | {counts['wrong']} | "
                             f"{counts['holds']} | {counts['misses']} | {runs / trials:.0f} | {secs / trials:.0f} |")
    return "\n".join(lines)


def _ratio(ts, rule, step, floor):
    from perfci.bisect import probes

    d = probes.decide_probe(ts, rule, step, floor)
    return {"good": "good", "bad": "bad"}.get(d.status.value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the module docstring (head of this file) for what passes.")
    p.add_argument("--trials", type=int, default=10, help="trials per step (default 10; the validation: 100)")
    p.add_argument("--step", type=float, nargs="+", default=[8.0, 3.0], metavar="PCT",
                   help="the planted steps in percent, one row each (default 8 3)")
    p.add_argument("--seed", type=int, default=2027, help="seeds the histories (culprit, docs edits)")
    p.add_argument("--jobs", type=int, default=1, help="perfci bisect --jobs (default 1)")
    p.add_argument("--perfci-args", default="", help="more options for perfci bisect, e.g. '--budget 60'")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before a perfci trial is killed")
    p.add_argument("--out", type=Path, help="append one JSON line per trial here (and resume from it)")
    p.add_argument("--table", type=Path, metavar="FILE", help="print the table of a results file and exit")
    p.add_argument("--probe-rules", type=Path, metavar="ROUNDS",
                   help="compare the probe's ratio test with the interval rule on recorded rounds (e.g. "
                        "benchmarks/results/bisect-drift/probe-rounds-loaded.json) and the simulated machine, "
                        "--trials of each (1-3 minutes at 300), and exit")
    p.add_argument("--sim", action="store_true",
                   help="whole bisects in-process on the simulated machines instead, --trials per cell "
                        "(~10 minutes at 200), and exit")
    args = p.parse_args(argv)
    if args.sim:
        print(simulated(args.trials, args.step, args.seed))
        return 0
    if args.probe_rules:
        print(probe_rules(args.probe_rules, args.trials, args.seed))
        return 0
    if args.table:
        rows = [json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]
        print(table(rows))
        return 0
    rows: list[dict] = []
    done: set[tuple[float, int]] = set()
    if args.out and args.out.exists():
        rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
        done = {(r["step"], r["index"]) for r in rows}
    extra = args.perfci_args.split()
    for index in range(args.trials):
        for step_pct in args.step:
            step = step_pct / 100.0
            if (step, index) in done:
                continue
            r = trial(index, step, args.seed, args.jobs, extra, args.timeout)
            rows.append(r)
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(r) + "\n")
            pf, sd = r["perfci"], r["seed000"]
            print(f"[{time.strftime('%H:%M:%S')}] step {step_pct:g}% trial {index}: culprit #{r['culprit']}; "
                  f"perfci {outcome(pf, r['culprit'], 'perfci')} (exit {pf.get('exit')}, named "
                  f"#{pf.get('named_number')}, range {pf.get('candidate_numbers', [])[:1]}..."
                  f"{pf.get('candidate_numbers', [])[-1:]}, {pf.get('runs')} runs, {pf.get('seconds', 0):.0f} s, "
                  f"tree {'ok' if pf['tree_intact'] and not pf['worktrees_left'] else 'CHANGED'}); "
                  f"seed000 {outcome(sd, r['culprit'], 'seed000')} (#{sd.get('named_number')})", flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
