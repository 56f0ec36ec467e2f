"""Ground truth for 'is the printed number the kernel's real time?': Nsight Compute.

Each selected case runs in its own process under ``ncu`` (hardware timestamps,
clocks left alone, caches flushed before every kernel, as perfci flushes them),
launched 5 times inside an NVTX range so set-up kernels are not profiled. The
per-launch kernel time (sum of the case's kernels) is then set beside the
values of one or more perfci results CSVs for the same cases:

    python benchmarks/gpu/truth_ncu.py --suite benchmarks/gpu/cases/subset.toml --filter group=seed002 \\
        --compare profiler.csv events.csv --out truth-ncu.csv
"""
from __future__ import annotations

import argparse
import csv
import glob
import io
import os
import shutil
import statistics
import subprocess
import sys

LAUNCHES = 5


def child(suite: str, filter_expr: str | None, index: int) -> None:
    import torch

    from perfci.kernel_registry import get_backend
    from perfci.suites import load_suite, select_cases

    spec = select_cases(load_suite(suite).cases, filter_expr)[index]
    prepared = get_backend(spec.kernel).prepare(spec, torch.device("cuda", 0), 1234)
    prepared.run()
    torch.cuda.synchronize()
    for _ in range(LAUNCHES):
        torch.cuda.nvtx.range_push("timed")
        prepared.run()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


def ncu_binary() -> str:
    found = shutil.which("ncu") or sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))
    if not found:
        raise SystemExit("ncu not found")
    return found if isinstance(found, str) else found[-1]


def profile_case(suite: str, filter_expr: str | None, index: int) -> tuple[float, int]:
    cmd = [ncu_binary(), "--clock-control", "none", "--nvtx", "--nvtx-include", "timed/",
           "--metrics", "gpu__time_duration.sum,sm__cycles_elapsed.max", "--csv", "--print-units", "base",
           sys.executable, __file__, "--suite", suite, "--child", str(index)]
    if filter_expr:
        cmd += ["--filter", filter_expr]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    table = list(csv.DictReader(io.StringIO(out[out.index('"ID"'):])))

    def total(metric: str) -> tuple[float, int]:
        rows = [r for r in table if r.get("Metric Name") == metric]
        return sum(float(r["Metric Value"].replace(",", "")) for r in rows), len(rows)

    total_ns, kernels = total("gpu__time_duration.sum")
    cycles, _ = total("sm__cycles_elapsed.max")
    return total_ns / 1e3 / LAUNCHES, kernels // LAUNCHES, cycles / LAUNCHES


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--filter")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--compare", nargs="*", default=[], help="perfci results CSVs to set beside ncu")
    parser.add_argument("--out", default="truth-ncu.csv")
    args = parser.parse_args()
    if args.child is not None:
        child(args.suite, args.filter, args.child)
        return 0

    from perfci.results import read_results
    from perfci.suites import load_suite, select_cases

    cases = select_cases(load_suite(args.suite).cases, args.filter)
    tables = {os.path.basename(p): read_results(p).by_key() for p in args.compare}
    rows = []
    for index, spec in enumerate(cases):
        try:
            ncu_us, kernels, ncu_cycles = profile_case(args.suite, args.filter, index)
        except subprocess.CalledProcessError as err:
            # ncu cannot read the counters on some runtimes (gVisor): say so, keep what we have.
            tail = " | ".join((err.stdout + err.stderr).strip().splitlines()[-3:])
            print(f"ncu failed on {spec.label} {spec.shape}: {tail}", flush=True)
            break
        row = {"kernel": spec.label, "shape": spec.shape, "dtype": spec.dtype,
               "ncu_us": f"{ncu_us:.3f}", "ncu_mhz": f"{ncu_cycles / ncu_us:.0f}" if ncu_us else "",
               "kernels_per_launch": kernels}
        for name, table in tables.items():
            found = table.get(spec.key)
            if found and found.median_us:
                row[f"{name}_us"] = f"{found.median_us:.3f}"
                row[f"{name}/ncu"] = f"{found.median_us / ncu_us:.4f}"
                clocks = [c for c in found.sclk_mhz if c]
                if clocks and ncu_cycles:
                    # In cycles: ncu replays one kernel at a time and the power-capped
                    # clock is higher then than under perfci's sustained launches.
                    cycles = found.median_us * statistics.median(clocks)
                    row[f"{name}/ncu_cycles"] = f"{cycles / ncu_cycles:.4f}"
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        # Rewritten after every case so a call cut short keeps what it measured.
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    for name in tables:
        for column in (f"{name}/ncu", f"{name}/ncu_cycles"):
            ratios = [float(r[column]) for r in rows if r.get(column)]
            if ratios:
                within = sum(abs(r - 1) <= 0.03 for r in ratios)
                print(f"{column}: {within}/{len(ratios)} within 3% of ncu; median ratio "
                      f"{statistics.median(ratios):.4f} (min {min(ratios):.4f}, max {max(ratios):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
