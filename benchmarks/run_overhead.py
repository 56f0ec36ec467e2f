"""What ``perfci run`` costs beyond measuring: a one-case run against ``import torch``, and the
README's main job in a fresh clone.

For each revision given (default HEAD), in a fresh ``git clone`` of this repository (no
``__pycache__``, as a new user or a CI job has it), interleaved round by round so that the
machine's load falls on every revision alike:

* ``python -c "import torch"``: the floor, the one import every run must pay;
* a one-case ``perfci run smoke --device cpu --filter CASE`` with ``--log-json``: its wall
  time, and the case's own measuring (the worker's prepare, check, warm-up and timed
  phases); the overhead is the rest, as a multiple of ``import torch``'s time;
* with ``--main-job``, the README's main job: ``perfci run smoke --device cpu --out
  results.csv && perfci compare baselines/cpu/smoke.csv results.csv``.

    python benchmarks/run_overhead.py                        # 3 rounds of the one-case run
    python benchmarks/run_overhead.py --revs BEFORE HEAD --main-job --rounds 2

Targets (docs/run.md, 'Where the time goes'): overhead <= 1.5 x ``import torch``; the main
job <= 60 s on a 2-core machine. Times on a shared machine follow its load: the load
average is printed with every row, and CPU seconds (user + system, children included)
beside wall seconds, which load disturbs less.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = "kernel=matmul_persistent"  # one Triton kernel: the run imports triton and the kernels too


def timed(cmd: list[str] | str, cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the command and its children, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        print(f"  {cmd if isinstance(cmd, str) else ' '.join(cmd)}: exit {proc.returncode}: "
              f"{proc.stderr.strip()[-300:]}", file=sys.stderr)
    return wall, cpu, proc.returncode


def fresh_clone(rev: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", rev], check=True)
    return into


def clone_env(clone: Path) -> dict[str, str]:
    # perfci may be installed from another checkout: the clone's own code comes first.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(clone), os.environ.get("PYTHONPATH", "")]))
    return env


def measuring_s(log: Path) -> float:
    """The case's own measuring: the worker's phases after its start-up."""
    phases = json.loads(log.read_text().splitlines()[0])["phases"]
    return sum(v for k, v in phases.items() if k != "import")


def load() -> str:
    return "{:.1f}".format(os.getloadavg()[0])


def one_round(revs: list[str], work: Path, number: int, main_job: bool, rows: list[dict]) -> None:
    py = sys.executable
    for index, rev in enumerate(revs):
        clone = fresh_clone(rev, work / f"r{number}-{index}")
        env = clone_env(clone)
        if main_job:  # first, while the clone is fresh
            job = (f"{py} -m perfci run smoke --device cpu --out results.csv && "
                   f"{py} -m perfci compare baselines/cpu/smoke.csv results.csv")
            wall, cpu, code = timed(job, clone, env)
            rows.append({"rev": rev, "what": "main job", "wall": wall, "cpu": cpu, "load": load(), "exit": code})
        # The one-case run as a second run in a checkout has it: its modules compiled.
        subprocess.run([py, "-m", "compileall", "-q", "perfci", "kernels"], cwd=clone, env=env,
                       stdout=subprocess.DEVNULL, check=True)
        wall, cpu, _ = timed([py, "-c", "import torch"], clone, env)
        rows.append({"rev": rev, "what": "import torch", "wall": wall, "cpu": cpu, "load": load()})
        log = clone / "case.jsonl"
        wall, cpu, code = timed([py, "-m", "perfci", "run", "smoke", "--device", "cpu", "--filter", CASE,
                                 "--out", "one.csv", "--log-json", str(log), "--format", "none"], clone, env)
        rows.append({"rev": rev, "what": "one-case run", "wall": wall, "cpu": cpu, "load": load(),
                     "measuring": measuring_s(log) if code == 0 else float("nan"), "exit": code})


def report(rows: list[dict], revs: list[str]) -> str:
    lines = ["| revision | what | runs | wall s (median) | CPU s (median) | case measuring s | "
             "overhead / import torch | load avg |", "|---|---|---|---|---|---|---|---|"]
    for rev in revs:
        torch_walls = [r["wall"] for r in rows if r["rev"] == rev and r["what"] == "import torch"]
        for what in ("import torch", "one-case run", "main job"):
            mine = [r for r in rows if r["rev"] == rev and r["what"] == what]
            if not mine:
                continue
            wall = statistics.median(r["wall"] for r in mine)
            cpu = statistics.median(r["cpu"] for r in mine)
            measuring = ratio = ""
            if what == "one-case run":
                # Per round: (run - its case's measuring) / that round's import torch.
                ratios = [(r["wall"] - r["measuring"]) / t for r, t in zip(mine, torch_walls)]
                measuring = f"{statistics.median(r['measuring'] for r in mine):.2f}"
                ratio = f"{statistics.median(ratios):.2f}x"
            if what == "main job":
                ratio = "exit " + ",".join(str(r["exit"]) for r in mine)
            loads = ",".join(r["load"] for r in mine)
            lines.append(f"| {rev} | {what} | {len(mine)} | {wall:.1f} | {cpu:.1f} | {measuring} | {ratio} | {loads} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revs", nargs="+", default=["HEAD"], metavar="REV",
                        help="revisions to measure, each in fresh clones, interleaved (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--main-job", action="store_true", help="also time the README's main job each round")
    parser.add_argument("--out", metavar="MD", help="also write the table here")
    args = parser.parse_args()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="run-overhead-") as tmp:
        for number in range(args.rounds):
            one_round(args.revs, Path(tmp), number, args.main_job, rows)
            print(f"round {number + 1}/{args.rounds} done (load {load()})", file=sys.stderr)
    table = report(rows, args.revs)
    sys.stdout.write(table)
    if args.out:
        Path(args.out).write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
