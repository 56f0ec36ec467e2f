"""Validate `perfci confirm`'s defaults against the rule before them: shared changes, A/A, a real CPU bench, H200 data.

The defaults: each case judged on its own change (a run-drift reference only where
the user declares untouched cases, ``--reference``); never ``unchanged`` while a
case's raw paired interval reaches past ±min-effect; a session that stops when
every case is decided or when its time (``--budget``, 600 s) cannot decide more,
with looks at rounds 5, 8, 12, 18, 27, 41, ... up to the rounds the budget affords,
look k of K spending (1/k) / (1 + 1/2 + ... + 1/K) of alpha. The rule before
them (perfci/confirm/analysis.py at commit 647c58a, loaded from git): every case's run factor from the whole suite (six or more cases), four
fixed looks at rounds 5/10/15/20 at alpha/4 each, stop at 20.

Four parts (``--part``, default all):

* ``shared``: 9 cases, 6 of them slowed by one change, 3 untouched (the vendor
  BLAS), ABBA rounds under two noise models: ``drifting`` (the model of
  benchmarks/confirm_validation.py: per-run factors shared by all cases, sd 1-3%,
  5% outlier runs +10-30%, a walk, a trend and a level per round) and ``h200``
  (fitted to the H200 `run`-isolation rounds: per-case run noise 0.3-1.2%, shared
  run factor sd 0.2-0.5%). Changes: +3% on all six, and the H200 config change of
  +1.3/+1.6/+1.8/+2.0/+2.2/+2.4%. Verdicts under the old rule, the new default, and
  the new default with the three untouched cases as ``--reference``. A round of
  9 cases costs ``--round-seconds`` (16.6 s: the H200's 3.7 s per run of 8 cases),
  so the 600 s budget is 36 rounds; the old rule runs up to 20.
* ``aa``: the same 9 cases, nothing changed, ``--aa-trials`` sessions per model
  and rule: false regressed / improved per case.
* ``cpu``: a real bench of ~0.1 s (a Python loop that prints its time) in a
  throwaway git repository, the second commit 3% more iterations: ``perfci
  confirm HEAD~1 HEAD -- python3 bench.py`` with its defaults, ``--cpu-trials``
  times; rounds, seconds and verdicts; then the same with ``--max-rounds 20`` (a
  fixed count, as before), and ``--cpu-aa`` A/A sessions (a README-only commit).
* ``h200``: pseudo-sessions resampled from the real H200 rounds
  (benchmarks/evidence/confirm_on_h200.py's residual runs, fork and run
  isolation): A/A, +3% on one case, and +2% / +3% shared by the five non-vendor
  cases, under the old rule, the new default, and ``--reference
  kernel=torch_matmul``; the budget in rounds from each recording's seconds per run.

    python benchmarks/confirm_defaults.py                       # everything, ~25 min on 2 cores
    python benchmarks/confirm_defaults.py --part shared --part aa --trials 100 --aa-trials 500
    python benchmarks/confirm_defaults.py --part cpu --cpu-trials 10 --cpu-aa 2

Time (2-core CPU): shared 3 min at --trials 200, aa 4 min at --aa-trials 500, cpu 5-15 min
(a confirm of the +3% step takes 15-60 s; an A/A one can use its whole budget), h200 3 min at
--h200-trials 200.
Pass: in ``shared``, +3% on 6 of 9 cases `unchanged` on none under any model and rule but the
old one, and regressed on >= 95% of the six by the new default under the ``h200`` model and with
``--reference`` under the ``drifting`` one (alone, a case cannot see +3% through 1-3% run drift
and outlier runs); in ``aa``, false verdicts <= 1% of cases; in ``cpu``, the +3% step
`regressed` within the default budget where the machine lets a round resolve it (the load column
says how busy it was: at a load of 5 on 2 cores a round of this bench scatters by 15-20%).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "evidence"))

from confirm_validation import Noise, simulate  # noqa: E402

from perfci.confirm import DEFAULT_BUDGET_S  # noqa: E402
from perfci.confirm.stopping import StoppingRule, look  # noqa: E402

OLD_COMMIT = "647c58a"  # the last analysis.py with the suite-wide common mode and four fixed looks
H200_NOISE = Noise(meas=(0.003, 0.012), run_sd=(0.002, 0.005), outlier_p=0.01, outlier=(0.02, 0.05), walk=0.0005,
                   trend=0.0, round_sd=0.005)
MODELS = {"drifting": Noise(), "h200": H200_NOISE}
H200_CHANGE = (1.3, 1.6, 1.8, 2.0, 2.2, 2.4)  # percent, the six slowed cases of the H200 config change


# --------------------------------------------------------------------------- the rules


_OLD = None


def old_analysis():
    """perfci/confirm/analysis.py as it was at OLD_COMMIT, as a module (loaded once per process)."""
    global _OLD
    if _OLD is None:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:perfci/confirm/analysis.py"],
                             capture_output=True, text=True, check=True).stdout
        mod = types.ModuleType("confirm_analysis_before_reference")
        sys.modules[mod.__name__] = mod  # dataclasses look their module up
        exec(compile(src, f"{OLD_COMMIT}:perfci/confirm/analysis.py", "exec"), mod.__dict__)
        _OLD = mod
    return _OLD


def judge(full: dict, rule: str, budget_rounds: int, reference: list | None = None):
    """Run one session over pre-drawn rounds ``full`` to its stop: (confirmation, rounds used).

    ``rule``: ``old`` (the suite-wide common mode, looks 5/10/15/20) or ``new`` (the defaults,
    ``reference`` the declared untouched cases or None) with ``budget_rounds`` rounds of time."""
    if rule == "old":
        old = old_analysis()
        full = {k: [(r.base, r.cur) if hasattr(r, "base") else r for r in v] for k, v in full.items()}
        r = old.StoppingRule()
        for n in range(1, r.max_rounds + 1):
            seen = old.look({k: v[:n] for k, v in full.items()}, r)
            if seen.stop:
                return seen.confirmation, n
    r = StoppingRule().planned(StoppingRule().min_rounds, budget_rounds - StoppingRule().min_rounds)  # as the session
    for n in range(1, budget_rounds + 1):
        seen = look({k: v[:n] for k, v in full.items()}, r, rounds_left=budget_rounds - n, force=n == budget_rounds,
                    reference=reference)
        if seen.stop:
            return seen.confirmation, n
    raise AssertionError("the session never stopped")


RULES = {"old rule (suite common mode, 20 rounds)": ("old", False),
         "new default": ("new", False),
         "new, --reference on the untouched cases": ("new", True)}


# --------------------------------------------------------------------------- (a) shared change, (b) A/A


@dataclass(frozen=True)
class Shared:
    name: str
    changes: tuple[float, ...]  # percent on cases 0..5; cases 6..8 untouched


SHARED = (Shared("+3% on 6 of 9 cases", (3.0,) * 6), Shared("H200 config change (+1.3..+2.4%) on 6 of 9", H200_CHANGE),
          Shared("A/A (nothing changed)", (0.0,) * 6))


def shared_cell(args: tuple) -> dict:
    model, sc, rule_name, trials, seed, budget_rounds = args
    kind, with_ref = RULES[rule_name]
    noise = MODELS[model]
    rng = np.random.default_rng(seed)
    out = {"regressed": 0, "unchanged": 0, "inconclusive": 0, "other_false": 0, "n_changed": 0, "n_other": 0,
           "rounds": [], "ref_used": 0}
    changed = [i for i, c in enumerate(sc.changes) if c]
    for _ in range(trials):
        full = simulate(rng, noise, 9, max(budget_rounds, 20), {i: math.log1p(c / 100) for i, c in enumerate(sc.changes)
                                                                 if c})
        keys = list(full)
        conf, n = judge(full, kind, budget_rounds, keys[6:] if with_ref else None)
        out["rounds"].append(n)
        out["ref_used"] += bool(getattr(conf, "reference_used", False))
        for i, case in enumerate(conf.cases):
            if i in changed:
                out["n_changed"] += 1
                out[str(case.verdict) if str(case.verdict) in ("regressed", "unchanged") else "inconclusive"] += 1
            else:
                out["n_other"] += 1
                out["other_false"] += str(case.verdict) in ("regressed", "improved")
    return out


def pct(x: float, n: int, digits: int = 1) -> str:
    return "–" if n == 0 else f"{100 * x / n:.{digits}f}%"


def shared_table(args, parts: list[str]) -> list[str]:
    budget = int(DEFAULT_BUDGET_S // args.round_seconds)
    jobs, labels = [], []
    for model in MODELS:
        for j, sc in enumerate(SHARED):
            if ("aa" if sc.changes[0] == 0 else "shared") not in parts:
                continue
            trials = args.aa_trials if sc.changes[0] == 0 else args.trials
            for i, rule in enumerate(RULES):
                jobs.append((model, sc, rule, trials, args.seed + 1000 * j + 17 * i + (0 if model == "h200" else 7),
                             budget))
                labels.append((model, sc.name, rule, trials))
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(shared_cell, jobs))
    lines = [f"## (a, b) 9 simulated cases, 6 changed by one change, 3 untouched (budget {budget} rounds = "
             f"{DEFAULT_BUDGET_S:g} s at {args.round_seconds:g} s a round; the old rule: up to 20)", "",
             "| noise model | change | rule | sessions | changed cases regressed | changed cases unchanged | "
             "changed cases inconclusive (or improved) | untouched cases false regressed/improved | rounds median / p90 | "
             "reference used |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (model, name, rule, trials), r in zip(labels, results):
        aa = name.startswith("A/A")
        false = r["other_false"] + (r["regressed"] if aa else 0)
        n_false = r["n_other"] + (r["n_changed"] if aa else 0)
        lines.append(f"| {model} | {name} | {rule} | {trials} | "
                     f"{'–' if aa else pct(r['regressed'], r['n_changed'])} | "
                     f"{'–' if aa else pct(r['unchanged'], r['n_changed'])} | "
                     f"{'–' if aa else pct(r['inconclusive'], r['n_changed'])} | {pct(false, n_false, 2)} | "
                     f"{np.median(r['rounds']):.0f} / {np.percentile(r['rounds'], 90):.0f} | "
                     f"{'–' if 'reference' not in rule else pct(r['ref_used'], trials, 0)} |")
    return lines + [""]


# --------------------------------------------------------------------------- (c) a real CPU bench


BENCH = """import time
N = {n}
t = time.perf_counter()
x = 0
for i in range(N):
    x += i
print(time.perf_counter() - t)
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def cpu_repo(where: Path, seconds: float) -> tuple[Path, int]:
    """A repository of three commits: a loop of ~``seconds``, the same loop 3% longer, a README."""
    n = 1_000_000
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    n = int(n * seconds / (time.perf_counter() - t))
    repo = where / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "user.name", "bench")
    for message, count in (("base", n), ("three percent more iterations", round(n * 1.03))):
        (repo / "bench.py").write_text(BENCH.format(n=count))
        _git(repo, "add", "bench.py")
        _git(repo, "commit", "-qm", message)
    (repo / "README").write_text("a change that touches no code\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "readme")
    return repo, n


def cpu_session(repo: Path, base: str, cur: str, extra: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = os.getloadavg()[0]
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "perfci", "confirm", base, cur, "--format", "json", *extra, "--",
                           sys.executable, "bench.py"], cwd=repo, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t
    if proc.returncode not in (0, 1, 3):
        raise RuntimeError(f"perfci confirm exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    report = json.loads(proc.stdout)
    (case,) = report["cases"]
    return {"verdict": case["verdict"], "ratio": case["ratio"], "ci": (case["ci_low"], case["ci_high"]),
            "rounds": report["summary"]["rounds"], "seconds": report["summary"]["seconds"], "wall": wall,
            "exit": proc.returncode, "load": (load + os.getloadavg()[0]) / 2}


def cpu_part(args) -> list[str]:
    lines = [f"## (c) a real CPU bench of ~{args.cpu_seconds:g} s, +3% (a Python loop, 3% more iterations)", ""]
    with tempfile.TemporaryDirectory(prefix="perfci-confirm-defaults-") as tmp:
        repo, n = cpu_repo(Path(tmp), args.cpu_seconds)
        lines += [f"{n} iterations at base; `perfci confirm HEAD~2 HEAD~1 -- python3 bench.py` (the +3% step) and "
                  f"`HEAD~1 HEAD` (A/A: a README-only commit); each row one session, run one after another on "
                  f"this machine.", "",
                  "| session | options | verdict | cur/base [interval] | rounds | seconds of rounds | wall s | exit | "
                  "load (1 min, 2 cores) |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
        plan = ([("+3%", "HEAD~2", "HEAD~1", [])] * args.cpu_trials
                + [("+3%", "HEAD~2", "HEAD~1", ["--max-rounds", "20"])] * args.cpu_fixed
                + [("A/A", "HEAD~1", "HEAD", [])] * args.cpu_aa)
        summary: dict[tuple, list] = {}
        for what, base, cur, extra in plan:
            r = cpu_session(repo, base, cur, extra)
            summary.setdefault((what, " ".join(extra) or "defaults"), []).append(r)
            ci = "" if r["ratio"] is None else (f"{100 * (r['ratio'] - 1):+.2f}% [{100 * (r['ci'][0] - 1):+.2f}%, "
                                                f"{100 * (r['ci'][1] - 1):+.2f}%]")
            lines.append(f"| {what} | {' '.join(extra) or 'defaults'} | {r['verdict']} | {ci} | {r['rounds']} | "
                         f"{r['seconds']:.0f} | {r['wall']:.0f} | {r['exit']} | {r['load']:.1f} |")
            print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", "| session | options | sessions | regressed | unchanged | rounds median (max) | "
                  "seconds median (max) |", "|---|---|---:|---:|---:|---:|---:|"]
    for (what, opts), rs in summary.items():
        lines.append(f"| {what} | {opts} | {len(rs)} | {sum(r['verdict'] == 'regressed' for r in rs)} | "
                     f"{sum(r['verdict'] == 'unchanged' for r in rs)} | "
                     f"{np.median([r['rounds'] for r in rs]):.0f} ({max(r['rounds'] for r in rs)}) | "
                     f"{np.median([r['seconds'] for r in rs]):.0f} ({max(r['seconds'] for r in rs):.0f}) |")
    return lines + [""]


# --------------------------------------------------------------------------- (d) the H200 recordings


def h200_cell(args: tuple) -> dict:
    name, scenario, rule_name, trials, seed = args
    import confirm_on_h200 as E

    rounds, keys = E.load(E.RECORDINGS[name])
    per_run = float(np.mean([run["seconds"] for r in rounds for run in r.values()]))
    budget = int(DEFAULT_BUDGET_S // (4 * per_run))
    resid = E.residual_runs(rounds, keys)
    vendor = [i for i, k in enumerate(keys) if k[0] == "torch_matmul"]
    label, effect, planted = scenario
    kind, with_ref = RULES[rule_name]
    rng = np.random.default_rng(seed)
    out = {"regressed": 0, "unchanged": 0, "n_changed": 0, "false": 0, "n_other": 0, "rounds": [], "budget": budget,
           "per_round": 4 * per_run}
    for t in range(trials):
        plant = planted if planted != "one" else [t % len(keys)]
        shift = np.zeros(len(keys))
        shift[list(plant)] = math.log1p(effect)
        full = {k: [] for k in keys}
        for _ in range(max(budget, 20)):
            b1, c1, c2, b2 = resid[rng.integers(0, len(resid), 4)]
            for i, key in enumerate(keys):
                full[key].append(((math.exp(b1[i]), math.exp(b2[i])),
                                  (math.exp(c1[i] + shift[i]), math.exp(c2[i] + shift[i]))))
        conf, n = judge(full, kind, budget, [keys[i] for i in vendor] if with_ref else None)
        out["rounds"].append(n)
        for i, case in enumerate(conf.cases):
            if i in plant and effect:
                out["n_changed"] += 1
                out["regressed"] += case.verdict == "regressed"
                out["unchanged"] += case.verdict == "unchanged"
            else:
                out["n_other"] += 1
                out["false"] += case.verdict in ("regressed", "improved")
    return out


def h200_part(args) -> list[str]:
    import confirm_on_h200 as E

    _, keys = E.load(E.RECORDINGS["run (2026-12-01)"])
    non_vendor = tuple(i for i, k in enumerate(keys) if k[0] != "torch_matmul")
    scenarios = (("A/A", 0.0, ()), ("+3% on one case (each in turn)", 0.03, "one"),
                 ("+2% shared by the 5 non-vendor cases", 0.02, non_vendor),
                 ("+3% shared by the 5 non-vendor cases", 0.03, non_vendor))
    jobs, labels = [], []
    for name in ("fork (2026-11-30)", "run (2026-12-01)"):
        for j, sc in enumerate(scenarios):
            for i, rule in enumerate(RULES):
                jobs.append((name, sc, rule, args.h200_trials, args.seed + 100 * j + i))
                labels.append((name, sc[0], rule))
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(h200_cell, jobs))
    lines = ["## (d) pseudo-sessions from the H200 rounds (8 cases: 5 Triton kernels, 3 torch.matmul)", "",
             "Each pseudo-round is four real runs drawn at random from a recording (benchmarks/evidence/"
             "confirm_on_h200.py); the budget is 600 s at the recording's cost of a round.", "",
             "| recording | change | rule | changed cases regressed | changed cases unchanged | other cases false "
             "regressed/improved | rounds median / p90 | seconds median |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for (name, sc, rule), r in zip(labels, results):
        med = float(np.median(r["rounds"]))
        lines.append(f"| {name} ({r['budget']} rounds) | {sc} | {rule} | {pct(r['regressed'], r['n_changed'])} | "
                     f"{pct(r['unchanged'], r['n_changed'])} | {pct(r['false'], r['n_other'], 2)} | "
                     f"{med:.0f} / {np.percentile(r['rounds'], 90):.0f} | {med * r['per_round']:.0f} |")
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", action="append", choices=("shared", "aa", "cpu", "h200"),
                    help="which parts (repeatable; default all)")
    ap.add_argument("--trials", type=int, default=200, help="sessions per cell of (a) (default 200)")
    ap.add_argument("--aa-trials", type=int, default=500, help="A/A sessions per model and rule, (b) (default 500)")
    ap.add_argument("--round-seconds", type=float, default=16.6,
                    help="cost of a simulated round of 9 cases (default 16.6: the H200's 3.7 s per run of 8)")
    ap.add_argument("--cpu-trials", type=int, default=10, help="+3%% sessions with the defaults, (c) (default 10)")
    ap.add_argument("--cpu-fixed", type=int, default=3, help="+3%% sessions with --max-rounds 20 (default 3)")
    ap.add_argument("--cpu-aa", type=int, default=2, help="A/A sessions with the defaults (default 2)")
    ap.add_argument("--cpu-seconds", type=float, default=0.1, help="the bench's time (default 0.1 s)")
    ap.add_argument("--h200-trials", type=int, default=200, help="pseudo-sessions per cell of (d) (default 200)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes (default 2)")
    ap.add_argument("--out", help="also write the report here")
    args = ap.parse_args(argv)
    parts = args.part or ["shared", "aa", "cpu", "h200"]
    t0 = time.time()
    lines = [f"# perfci confirm's defaults (benchmarks/confirm_defaults.py, seed {args.seed})", ""]
    if "shared" in parts or "aa" in parts:
        lines += shared_table(args, parts)
    if "h200" in parts:
        lines += h200_part(args)
    if "cpu" in parts:
        lines += cpu_part(args)
    lines.append(f"{time.time() - t0:.0f} s with {args.jobs} processes")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
