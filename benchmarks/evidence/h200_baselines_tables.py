"""Tables from the first H200 baselines (2026-11-29): where the kernels stand, and how far to trust a run.

Reads committed CSVs only (baselines/h200/2026-11-29/ and benchmarks/results/h200-2026-11-29/):
  - kernels against torch.matmul (cuBLAS): time ratio per case, geomean per kernel and suite;
  - seed 002's grid-order flip: m_fast=1 against m_fast=0 per decode row;
  - reproducibility: the cases measured in two fresh-process runs of the same method
    (run-to-run spread of the reported median);
  - truth: perfci's event times against torch.profiler's kernel times.

Time: about 1 s on a 2-core CPU machine (pandas only, no GPU, no torch).
Pass: the output equals benchmarks/results/h200-2026-11-29/analysis.md
(`python benchmarks/evidence/h200_baselines_tables.py | diff - benchmarks/results/h200-2026-11-29/analysis.md`).

    python benchmarks/evidence/h200_baselines_tables.py [--out FILE]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "benchmarks" / "results" / "h200-2026-11-29"


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def base_kernel(label: str) -> str:
    return label.split("[")[0]


def vendor_ratios(table: pd.DataFrame) -> list[str]:
    ok = table[table.status == "ok"]
    vendor = ok[ok.kernel == "torch_matmul"].set_index(["shape", "dtype"]).median_us
    lines = ["| kernel | cases | geomean time / torch.matmul | best | worst |", "|---|---:|---:|---:|---:|"]
    for label, rows in ok[ok.kernel != "torch_matmul"].groupby("kernel"):
        ratios = [r.median_us / vendor[(r.shape, r.dtype)] for r in rows.itertuples()
                  if (r.shape, r.dtype) in vendor.index]
        if ratios:
            lines.append(f"| {label} | {len(ratios)} | {geomean(ratios):.3f} | {min(ratios):.3f} | {max(ratios):.3f} |")
    return lines


def grid_order(table: pd.DataFrame) -> list[str]:
    ok = table[(table.status == "ok") & table.kernel.str.startswith("splitk_decode[m_fast")]
    pivot = ok.pivot_table(index=["group", "shape"], columns="kernel", values="median_us")
    lines = ["| row | M x N x K | m_fast=0 us | m_fast=1 us | speedup of m_fast=1 |", "|---|---|---:|---:|---:|"]
    for (group, shape), r in pivot.iterrows():
        slow, fast = r["splitk_decode[m_fast=0]"], r["splitk_decode[m_fast=1]"]
        lines.append(f"| {group} | {shape} | {slow:.2f} | {fast:.2f} | {slow / fast:.3f}x |")
    return lines


def repro() -> list[str]:
    """Two fresh-process runs of the same method: the 2026-11-29 baseline and the planted run's untouched rows."""
    base = pd.concat([pd.read_csv(EVIDENCE / "eager-fork-baselines" / f) for f in ("decode.csv", "prefill.csv")])
    again = pd.read_csv(EVIDENCE / "eager-fork-baselines" / "planted.csv")
    again = again[~again.kernel.str.startswith(("matmul_tiled", "matmul_persistent"))]
    pairs = [("baseline vs planted run (eager events, fork)", base, again)]
    g1 = pd.read_csv(EVIDENCE / "graph-spawn-first-check" / "decode-qkv.csv")
    g2 = pd.read_csv(EVIDENCE / "graph-spawn-decode-truth" / "decode.csv")
    pairs.append(("first check vs whole decode run (graph replay, spawn)", g1, g2))
    lines = ["| runs | kernel | M x N x K | run 1 us | run 2 us | CV of the reported median |",
             "|---|---|---|---:|---:|---:|"]
    summary = []
    for name, a, b in pairs:
        merged = a.merge(b, on=["kernel", "shape", "dtype"], suffixes=("_a", "_b"))
        cvs = []
        for r in merged.itertuples():
            values = [r.median_us_a, r.median_us_b]
            cv = statistics.stdev(values) / statistics.mean(values)
            cvs.append((cv, r.median_us_a))
            lines.append(f"| {name} | {r.kernel} | {r.shape} | {r.median_us_a:.2f} | {r.median_us_b:.2f} | {100 * cv:.2f}% |")
        small = [c for c, us in cvs if us < 10]
        large = [c for c, us in cvs if us >= 10]
        summary.append(f"{name}: {len(cvs)} cases; cases >= 10 us: median CV {100 * statistics.median(large):.2f}%, "
                       f"{sum(c <= 0.005 for c in large)}/{len(large)} within 0.5%"
                       + (f"; cases < 10 us: median CV {100 * statistics.median(small):.2f}%, "
                          f"{sum(c <= 0.02 for c in small)}/{len(small)} within 2%" if small else ""))
    return lines + [""] + summary


def truth() -> list[str]:
    lines = []
    graph = pd.read_csv(EVIDENCE / "graph-spawn-decode-truth" / "truth.csv")
    lines.append(f"graph replay + events vs torch.profiler kernel sum, {len(graph)} decode cases: median ratio "
                 f"{graph.ratio_events_over_kernel.median():.3f} (min {graph.ratio_events_over_kernel.min():.3f}, "
                 f"max {graph.ratio_events_over_kernel.max():.3f}); median excess "
                 f"{(graph.events_us - graph.profiler_kernel_us).median():.2f} us")
    eager_run = pd.read_csv(EVIDENCE / "eager-fork-baselines" / "decode.csv").set_index(["kernel", "shape", "dtype"])
    g = graph.set_index(["kernel", "shape", "dtype"])
    joined = g.join(eager_run.median_us, how="inner")
    ratio = joined.median_us / joined.profiler_kernel_us
    excess = joined.median_us - joined.profiler_kernel_us
    lines.append(f"perfci run (eager launch behind the flush, events; the committed baseline) vs the same "
                 f"profiler kernel sums, {len(joined)} cases: median ratio {ratio.median():.3f} "
                 f"(min {ratio.min():.3f}, max {ratio.max():.3f}); median excess {excess.median():.2f} us; "
                 f"{int((abs(ratio - 1) <= 0.05).sum())}/{len(joined)} within 5%")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="also write the tables here")
    args = parser.parse_args()
    decode = pd.read_csv(ROOT / "baselines" / "h200" / "2026-11-29" / "decode.csv")
    prefill = pd.read_csv(ROOT / "baselines" / "h200" / "2026-11-29" / "prefill.csv")
    text = ["## Kernels against torch.matmul (H200, baselines/h200/2026-11-29)\n", "### decode\n",
            "\n".join(vendor_ratios(decode)), "\n### prefill\n", "\n".join(vendor_ratios(prefill)),
            "\n## Seed 002's grid-order flip on the H200 (decode baseline)\n", "\n".join(grid_order(decode)),
            "\n## Reproducibility (two fresh-process runs)\n", "\n".join(repro()),
            "\n## Truth: event times against profiler kernel times\n", "\n".join(truth())]
    report = "\n".join(text) + "\n"
    sys.stdout.write(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
