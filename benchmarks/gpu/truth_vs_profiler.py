"""Is the number perfci prints the kernel's real time?

For each selected case, in one process and back to back:
  1. perfci's own measurement: the cache flush before every launch, device
     events around the launch (eager by default, as ``perfci run``), median
     of 7 repeat medians of 70 launches;
  2. the profiler's view: the same launches under torch.profiler (CUPTI /
     roctracer), summing the durations of the case's own kernels in each
     launch (the flush's fill kernel excluded), median over launches.
Prints the ratio events/profiler per case; the goal is within 5%.

    python benchmarks/gpu/truth_vs_profiler.py --suite decode --out truth.csv

GPU only (torch.profiler's device kernels); benchmarks/gpu/truth_check.sh PROFILER_SUM=1 runs it.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="decode")
    parser.add_argument("--filter", default=None)
    parser.add_argument("--iters", type=int, default=70)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default="truth.csv")
    parser.add_argument("--launch", choices=("eager", "graph"), default="eager",
                        help="the launch mode whose events are compared (the other is reported too)")
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from perfci.kernel_registry import get_backend
    from perfci.measure.envinfo import collect_environment, device_cache_bytes, flush_bytes
    from perfci.suites import load_suite, select_cases
    from perfci.measure.timing import EventMarks, median, time_iterations
    from perfci.measure.gate import capture_graph as _capture_graph
    from perfci.measure.worker import _warm_up
    from perfci.measure.telemetry import NullSource

    env = collect_environment("cuda")
    props = torch.cuda.get_device_properties(0)
    scratch = torch.empty(flush_bytes(device_cache_bytes(props, env.arch)), dtype=torch.uint8, device="cuda")
    flush = scratch.zero_
    cases = select_cases(load_suite(args.suite).cases, args.filter)
    rows = []
    for spec in cases:
        prepared = get_backend(spec.kernel).prepare(spec, torch.device("cuda", 0), 1234)
        prepared.run()
        torch.cuda.synchronize()
        graph = _capture_graph(torch, prepared.run)
        timed = graph if args.launch == "graph" else prepared.run

        def perfci_median(fn):
            _warm_up(fn, flush, torch.cuda.synchronize, NullSource(), 0.3, 0.3)
            return median([median(time_iterations(fn, EventMarks(args.iters, torch), args.iters, flush))
                           for _ in range(args.repeats)])

        events_us = perfci_median(timed)
        other_us = perfci_median(prepared.run if args.launch == "graph" else graph)

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                flush()
                timed()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
        own = [e for e in kernels if not _is_flush(e.name)]
        # Group the case's kernels into launches: each launch has the same number of kernels.
        per_launch = max(1, len(own) // args.iters)
        durations = [e.device_time for e in own]  # microseconds
        launches = [sum(durations[i:i + per_launch]) for i in range(0, per_launch * args.iters, per_launch)]
        # Span from the first kernel's start to the last kernel's end (includes gaps between a
        # split-K kernel and its reduction, which the events see too).
        starts = [e.time_range.start for e in own]
        ends = [e.time_range.end for e in own]
        spans = [ends[i + per_launch - 1] - starts[i] for i in range(0, per_launch * args.iters, per_launch)]
        profiler_us = statistics.median(launches)
        span_us = statistics.median(spans)
        row = {"kernel": spec.label, "shape": spec.shape, "dtype": spec.dtype,
               "events_us": f"{events_us:.3f}",
               f"events_{'eager' if args.launch == 'graph' else 'graph'}_us": f"{other_us:.3f}",
               "profiler_kernel_us": f"{profiler_us:.3f}",
               "profiler_span_us": f"{span_us:.3f}", "kernels_per_launch": per_launch,
               "ratio_events_over_kernel": f"{events_us / profiler_us:.4f}",
               "ratio_events_over_span": f"{events_us / span_us:.4f}"}
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    ratios = [float(r["ratio_events_over_kernel"]) for r in rows]
    within = sum(abs(r - 1) <= 0.05 for r in ratios)
    print(f"{within}/{len(ratios)} cases within 5% of the profiler's kernel time; "
          f"median ratio {statistics.median(ratios):.4f}, max {max(ratios):.4f}, min {min(ratios):.4f}")
    return 0


def _is_flush(name: str) -> bool:
    lowered = name.lower()
    return "fill" in lowered or "memset" in lowered or "zero" in lowered


if __name__ == "__main__":
    sys.exit(main())
