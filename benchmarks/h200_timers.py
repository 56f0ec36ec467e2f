"""Events against the profiler timer and Nsight Compute, from the second H200 session.

Reads benchmarks/results/h200-2026-11-29b/: timers-subset/subset-events.csv (device
events), timers-subset/subset-profiler.csv + bisect-demo/subset-large-profiler.csv
(--timer profiler) and timers-subset/truth-ncu.csv (ncu on the seed002 rows), and prints
one markdown table: each case's times, the ratio profiler/events in time and in
cycles (times the ratio of the runs' median clocks), and the gap in us.

    python benchmarks/h200_timers.py
"""
from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd

RUNS = Path(__file__).resolve().parent / "results" / "h200-2026-11-29b"
KEY = ["kernel", "shape", "dtype"]


def median_clock(cell) -> float:
    return statistics.median(float(x) for x in str(cell).split(";"))


def main() -> None:
    events = pd.read_csv(RUNS / "timers-subset" / "subset-events.csv").set_index(KEY)
    profiler = pd.concat([pd.read_csv(RUNS / "timers-subset" / "subset-profiler.csv"),
                          pd.read_csv(RUNS / "bisect-demo" / "subset-large-profiler.csv")]).set_index(KEY)
    ncu = pd.read_csv(RUNS / "timers-subset" / "truth-ncu.csv").set_index(KEY)
    print("| kernel | shape | events µs | profiler µs | ncu µs | profiler/events | in cycles | events − profiler µs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for key in events.index.intersection(profiler.index):
        e, p = events.loc[key], profiler.loc[key]
        ratio = p.median_us / e.median_us
        cycles = ratio * median_clock(p.sclk_mhz) / median_clock(e.sclk_mhz)
        n = f"{ncu.loc[key].ncu_us:.1f}" if key in ncu.index else ""
        print(f"| {key[0]} | {key[1]} | {e.median_us:.1f} | {p.median_us:.1f} | {n} | {ratio:.3f} "
              f"| {cycles:.3f} | {e.median_us - p.median_us:.2f} |")


if __name__ == "__main__":
    main()
