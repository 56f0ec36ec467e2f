"""Does a run's position in a round favour one side? ABBA alone against ABBA / BAAB drawn per pair.

A/A on a real CPU bench: the same ~0.1 s Python loop (benchmarks/confirm_defaults.py's
bench) in two folders, run as confirm runs it, a fresh process per run, in rounds of four.
Per round ``d = mean(log B) - mean(log A)``; with nothing changed its mean must hold 0.
``--rounds`` rounds with ABBA every round (the order confirm used), then as many with
ABBA / BAAB, one of each per pair, drawn at random (perfci.confirm.session.round_orders):
the mean d with its standard error, and each run position's mean against the overall.

    python benchmarks/confirm_positions.py --rounds 80      # ~4 minutes on the 2-core machine

Passes when the drawn orders' mean d lies within about two standard errors of 0; the
ABBA rows show how far a machine's rhythm can move a fixed order (on an unloaded machine,
not far: the table's load column says how busy it was).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from confirm_defaults import BENCH  # noqa: E402  (the same ~0.1 s loop as its CPU sessions)
from perfci.confirm.session import ABBA, round_orders  # noqa: E402


def calibrate(seconds: float) -> int:
    import time

    n = 1_000_000
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return int(n * seconds / (time.perf_counter() - t))


def measure(folders: dict[str, Path], orders) -> tuple[float, float, list[float], float]:
    """(mean d, its standard error, per-position mean log time minus the overall, load)."""
    load = os.getloadavg()[0]
    ds, positions = [], [[], [], [], []]
    for order in orders:
        logs: dict[str, list[float]] = {"base": [], "cur": []}
        for i, side in enumerate(order):
            out = subprocess.run([sys.executable, "bench.py"], cwd=folders[side], capture_output=True,
                                 text=True, check=True).stdout
            value = math.log(float(out.split()[-1]))
            logs[side].append(value)
            positions[i].append(value)
        ds.append(statistics.mean(logs["cur"]) - statistics.mean(logs["base"]))
    means = [statistics.mean(p) for p in positions]
    overall = statistics.mean(means)
    load = (load + os.getloadavg()[0]) / 2
    return (statistics.mean(ds), statistics.stdev(ds) / math.sqrt(len(ds)),
            [m - overall for m in means], load)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="See the module docstring (head of this file) for what passes.")
    p.add_argument("--rounds", type=int, default=80, help="rounds per order (default 80)")
    p.add_argument("--seconds", type=float, default=0.1, help="the bench's time (default 0.1 s)")
    p.add_argument("--out", help="also write the table here")
    args = p.parse_args()
    n = calibrate(args.seconds)
    with tempfile.TemporaryDirectory(prefix="perfci-positions-") as tmp:
        folders = {side: Path(tmp) / side for side in ("base", "cur")}
        for folder in folders.values():
            folder.mkdir()
            (folder / "bench.py").write_text(BENCH.format(n=n))
        rows = []
        for name, orders in (("ABBA every round", [ABBA] * args.rounds),
                             ("ABBA / BAAB drawn per pair", list(islice(round_orders("positions"), args.rounds)))):
            mean, se, pos, load = measure(folders, orders)
            rows.append(f"| {name} | {args.rounds} | {100 * mean:+.2f}% | {100 * se:.2f}% | "
                        + " | ".join(f"{100 * x:+.2f}%" for x in pos) + f" | {load:.1f} |")
            print(rows[-1], flush=True)
    text = "\n".join([f"A/A, a ~{args.seconds:g} s Python loop ({n} iterations) in two folders, a process per run.", "",
                      "| order | rounds | mean d (B vs A) | its se | position 1 | position 2 | position 3 | "
                      "position 4 | load |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|", *rows]) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
