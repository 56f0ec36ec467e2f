"""perfci's two timers against Nsight Compute on the H200 (2026-11-29): device events, --timer profiler, ncu.

Reads benchmarks/results/h200-2026-11-29b/: timers-subset/subset-events.csv (device
events), timers-subset/subset-profiler.csv + bisect-demo/subset-large-profiler.csv
(--timer profiler) and timers-subset/truth-ncu.csv (ncu on the seed002 rows), and prints
one markdown table: each case's times, the ratio profiler/events in time and in
cycles (times the ratio of the runs' median clocks), and the gap in us.

Time: about 1 s on a 2-core CPU machine (pandas only).
Pass: the output equals benchmarks/results/h200-2026-11-29b/timers.md; what it says is read in that
folder's README (decode rows: events - profiler 3.4-4.9 us; large rows: 0.98-1.04 in cycles).

    python benchmarks/evidence/timers_vs_ncu.py [--out FILE]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import pandas as pd

RUNS = Path(__file__).resolve().parents[1] / "results" / "h200-2026-11-29b"
KEY = ["kernel", "shape", "dtype"]


def median_clock(cell) -> float:
    return statistics.median(float(x) for x in str(cell).split(";"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args()
    events = pd.read_csv(RUNS / "timers-subset" / "subset-events.csv").set_index(KEY)
    profiler = pd.concat([pd.read_csv(RUNS / "timers-subset" / "subset-profiler.csv"),
                          pd.read_csv(RUNS / "bisect-demo" / "subset-large-profiler.csv")]).set_index(KEY)
    ncu = pd.read_csv(RUNS / "timers-subset" / "truth-ncu.csv").set_index(KEY)
    lines = ["| kernel | shape | events µs | profiler µs | ncu µs | profiler/events | in cycles | events − profiler µs |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key in events.index.intersection(profiler.index):
        e, p = events.loc[key], profiler.loc[key]
        ratio = p.median_us / e.median_us
        cycles = ratio * median_clock(p.sclk_mhz) / median_clock(e.sclk_mhz)
        n = f"{ncu.loc[key].ncu_us:.1f}" if key in ncu.index else ""
        lines.append(f"| {key[0]} | {key[1]} | {e.median_us:.1f} | {p.median_us:.1f} | {n} | {ratio:.3f} "
                     f"| {cycles:.3f} | {e.median_us - p.median_us:.2f} |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
