"""Record rounds of several revisions measured alternately by warm workers (perfci confirm --suite's method).

    python benchmarks/gpu/confirm_record.py REPO --revs base,aa,p3,p5 --suite CASES.toml \
        --budget 300 --out rounds.jsonl

Each revision gets a git worktree of REPO and its own warm worker
(perfci.measure.runner.CaseRunner rooted there, as perfci.measure.sides does);
every round visits the revisions forward then backward (base aa p3 p5 p5 p3 aa
base), so for every pair (base, X) a round holds two runs of each, placed
symmetrically as confirm's ABBA places them. One JSON line per run: round,
position, revision, seconds, and per case the median and the repeats. The
analysis (true plant sizes, confirmation rates over resampled rounds, wall time)
is benchmarks/evidence/confirm_on_h200.py; this script only measures (on a GPU, or with
--device cpu through the Triton interpreter). benchmarks/gpu/confirm_rounds.sh builds the
revisions and calls it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("--revs", required=True, help="comma-separated refs; the first is the base")
    ap.add_argument("--suite", required=True)
    ap.add_argument("--budget", type=float, default=300.0, help="stop starting rounds after S seconds")
    ap.add_argument("--max-rounds", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--isolation", default="fork", choices=("fork", "run", "shared"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    # After parsing, so --help works on a machine without the GPU stack.
    from perfci.measure.runner import CaseRunner, RunOptions, gpu_lock
    from perfci.suites import load_suite

    repo = Path(args.repo).resolve()
    revs = args.revs.split(",")
    suite = load_suite(args.suite, repo)
    tmp = Path(tempfile.mkdtemp(prefix="confirm-record-"))
    trees = {}
    for rev in revs:
        trees[rev] = tmp / rev
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(trees[rev]), rev], check=True)
    options = RunOptions(repeats=args.repeats, isolation=args.isolation)
    runners = {}
    started = time.monotonic()
    try:
        for rev in revs:
            runner = CaseRunner(options, trees[rev]).__enter__()
            device = runner.resolve_device(args.device)
            fast = device == "cuda"
            runner.options = replace(options, device=device, warmup_min_s=0.1 if fast else 0.05,
                                     warmup_max_s=1.5 if fast else 0.5)
            runners[rev] = runner
        print(f"{len(revs)} workers up in {time.monotonic() - started:.1f} s; device {device}", flush=True)
        lock = gpu_lock(3600, print) if device == "cuda" else None
        order = revs + revs[::-1]
        t0 = time.monotonic()
        with open(args.out, "w", encoding="utf-8") as out:
            for rnd in range(args.max_rounds):
                if time.monotonic() - t0 > args.budget:
                    break
                for pos, rev in enumerate(order):
                    results = []
                    s = time.monotonic()
                    runners[rev].run(suite.cases, lambda i, r, raw: results.append((r, raw)))
                    line = {"round": rnd, "pos": pos, "rev": rev, "seconds": round(time.monotonic() - s, 3),
                            "cases": [{"key": list(r.spec.key), "status": r.status, "median_us": r.median_us,
                                       "repeats_us": [x.median_us for x in r.repeats],
                                       "sclk_mhz": [x.sclk_mhz for x in r.repeats]} for r, raw in results]}
                    out.write(json.dumps(line) + "\n")
                    out.flush()
                print(f"round {rnd + 1}: {time.monotonic() - t0:.0f} s", flush=True)
        if lock is not None:
            lock.release()
    finally:
        for runner in runners.values():
            runner.__exit__(None, None, None)
        for rev in revs:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(trees[rev])], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
