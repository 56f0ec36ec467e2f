"""``perfci run SUITE``: measure a suite into a results CSV."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from perfci.args import seconds
from perfci.console import Console
from perfci.errors import EXIT_OK, EXIT_REGRESSION, PerfciError
from perfci.files import check_writable
from perfci.model import CaseSpec

DESCRIPTION = """\
Measure every case of SUITE in a worker process (a case that crashes, hangs or
errors costs only its worker; see --isolation) and write one CSV row per case
(the columns: docs/run.md, 'The results CSV').

Per case: fresh random-normal inputs are checked against an fp32 torch reference
(a wrong kernel is recorded as status=fail, never timed); then the kernel warms
up until the core clock settles, and runs REPEATS x ITERS timed launches, each
between device events, with the last-level cache flushed before every launch.
On a GPU each repeat is enqueued while a gate kernel holds the device, so host
time never lands inside a measurement (the stalls column says if it did), and
the repeat's core clock is read from the device's own counters.
A repeat's value is the median of its launches; the case's value is the median
of the repeat values, and all repeat values are kept for 'perfci compare'.

The CSV is rewritten atomically after every case, so an interrupted run keeps
everything measured so far.

exit codes: 0 every case ok or skipped (a skip: the device declares the case
unsupported, e.g. fp8 without fp8 units); 1 some case failed, errored or timed
out, or no case was measured at all; 2 bad input or usage; 130 interrupted.
"""
EXAMPLES = """\
examples:
  perfci run smoke --out smoke.csv                  # anywhere; CPU via the Triton interpreter
  perfci run decode --out decode.csv                # the visible GPU
  perfci run decode --filter 'M<=16,kernel~splitk*' --out part.csv
  perfci run prefill --shard 2/4 --out prefill-2.csv   # a CI matrix of 4 jobs
  CUDA_VISIBLE_DEVICES=3 perfci run decode --out gpu3.csv
"""


# Timed launches per repeat on the CPU unless --iters says otherwise. 60-80 launches per
# repeat is what perfci's GPU numbers are validated for; on the CPU every launch goes through
# the Triton interpreter (8-14 ms for the smoke suite's one- or two-program launches, on the
# host clock), so 20 launches per repeat time the same thing, and 7 x 70 of them made up
# about 50 s of the README's 95 s CPU job. The CPU's timings serve the pipeline, not kernels.
CPU_ITERS = 20
GPU_ITERS = 70


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="measure a suite into a results CSV", description=DESCRIPTION,
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", metavar="SUITE", help="a suite name (your [tool.perfci] suites folder first, then "
                                                  "perfci's built-ins: smoke, decode, prefill) or a .toml path")
    p.add_argument("--out", "-o", metavar="CSV", help="results CSV to write (required unless --list)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda means the first visible GPU (NVIDIA or ROCm); auto picks it when present "
                        "(default: auto)")
    p.add_argument("--filter", metavar="EXPR", help="keep matching cases: 'M<=16', 'kernel~splitk*,dtype=bf16', "
                   "'group=decode-qkv', or a glob over 'kernel shape dtype group'")
    p.add_argument("--shard", metavar="I/N",
                   help="run shard I of N (1-based) of the selected cases: sorted by FLOPs and dealt "
                        "1..N, N..1, ... so shards get similar work; each row records its shard, "
                        "and `perfci merge` joins the N CSVs into one run")
    p.add_argument("--cases", metavar="FILE",
                   help="run only the cases FILE names: a 'perfci compare --format json' output (its cases "
                        "that are not unchanged) or lines of kernel,shape,dtype")
    p.add_argument("--iters", type=int, metavar="N",
                   help=f"timed launches per repeat, 60..80 (default: 70; on the CPU {CPU_ITERS}, where a "
                        f"launch through the Triton interpreter takes 8-14 ms)")
    p.add_argument("--repeats", type=int, default=7, metavar="R",
                   help="repeats per case; the reported value is their median (default: 7)")
    p.add_argument("--timeout", type=seconds, default=600.0, metavar="S",
                   help="seconds before a case is killed and recorded as timeout (default: 600)")
    p.add_argument("--launch", choices=("eager", "graph"), default="eager",
                   help="eager: launch the kernel(s) behind the cache flush, which hides host launch "
                        "cost; graph: replay a captured device graph; on an H200 it read no "
                        "closer to the kernel time than eager (median 1.56x vs 1.52x on decode) (default: eager)")
    p.add_argument("--timer", choices=("events", "profiler"), default="events",
                   help="GPU only. events: device events around each launch; on an H200 they read "
                        "3.4-4.9 us above the kernels' own time on decode-size cases (dispatch and the "
                        "gap between split-K's two kernels), and agree within 4%% in cycles on large "
                        "GEMMs. profiler: the sum of the launch's kernel durations from the device "
                        "profiler (CUPTI / roctracer); about 4x slower to run, and under a power cap "
                        "its sparser launches raise the clock. Compare runs of the same timer "
                        "(default: events)")
    p.add_argument("--isolation", choices=("shared", "fork", "run", "spawn"), default="shared",
                   help="shared: one worker process imports torch and opens the device once, then "
                        "measures the cases in turn; a case that crashes, hangs or errors costs only "
                        "that worker, and the next case gets a fresh one. fork: a fresh process per "
                        "case, forked from a server that imported torch once. run: one such forked "
                        "process for the whole run. spawn: a new "
                        "interpreter per case (default: shared)")
    p.add_argument("--gate", choices=("spin", "none"), default="spin",
                   help="GPU only. spin: hold the GPU with a gate kernel while each repeat's launches "
                        "are enqueued, so host time never enters a measurement; none: launch as they "
                        "are enqueued (the stalls column then says when the host fell behind) "
                        "(default: spin)")
    p.add_argument("--poll-ms", type=float, default=10.0, metavar="MS",
                   help="telemetry polling interval (power, temperature, throttling; the clock where "
                        "the device's counters cannot give it); 0 reads once per repeat (default: 10)")
    p.add_argument("--seed", type=int, help="input seed (default: a fresh one per case)")
    p.add_argument("--format", choices=("table", "markdown", "json", "none"), default="table",
                   help="what to print on stdout at the end (default: table)")
    p.add_argument("--log-json", metavar="PATH",
                   help="also write per-case details as JSON lines: every launch's time, warm-up, "
                        "time spent per phase, launch mode, flush size")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    # worker: the command that starts a case's process (a seam for the fault tests, no option)
    p.set_defaults(handler=main, worker=None)


def main(args: argparse.Namespace) -> int:
    from perfci.suites import (load_case_keys, load_suite, parse_shard, placements, project_root,
                                       select_cases, shard_cases)

    if args.iters is not None and not 60 <= args.iters <= 80:
        raise PerfciError(f"--iters {args.iters}: use 60..80 launches per repeat (median of 7 repeats "
                          f"of 60-80 launches is the method perfci's numbers are validated for)")
    if not 1 <= args.repeats <= 50:
        raise PerfciError(f"--repeats {args.repeats}: use 1..50 (default 7)")
    if args.seed is not None and not 0 <= args.seed < 2**63:
        raise PerfciError(f"--seed {args.seed}: use a whole number from 0 to 2**63-1")
    if args.out is None and not args.list:
        raise PerfciError("--out CSV is required (where the results go)")
    if args.out is not None:
        check_writable(args.out)
    root = project_root()
    # The suite's kernels are checked where they are measured: importing the project's kernel
    # modules here would cost this process what the worker pays anyway (torch, for a kernel named
    # by import path). --list measures nothing, so it checks here.
    suite = load_suite(args.suite, root, None if args.list else _checked_by_the_worker)
    shard = parse_shard(args.shard) if args.shard else None
    keys = load_case_keys(args.cases) if args.cases else None
    selected = select_cases(suite.cases, args.filter, None, keys)
    if keys is not None and not keys:
        print(f"--cases {args.cases}: no case to run (every case was unchanged)", file=sys.stderr)
        return EXIT_OK
    if not selected:
        raise PerfciError(f"no case of suite '{suite.name}' matches the filter")
    cases = shard_cases(selected, shard) if shard else selected
    placed = placements(selected, shard)
    if args.log_json and not args.list:
        _check_log_path(args.log_json)
    if args.list:
        for case in cases:
            print(f"{case.label}\t{case.shape}\t{case.dtype}\t{case.group}")
        return EXIT_OK

    from perfci.measure.recording import record_cases
    from perfci.measure.runner import CaseRunner, RunOptions

    if not (args.poll_ms >= 0 and args.poll_ms < 10_000):
        raise PerfciError(f"--poll-ms {args.poll_ms}: use 0 (once per repeat) up to a few hundred ms")
    isolation = args.isolation if hasattr(os, "fork") or args.isolation not in ("fork", "run") else "spawn"
    options = RunOptions(iters=args.iters or GPU_ITERS, repeats=args.repeats, timeout_s=args.timeout,
                         launch=args.launch, seed=args.seed, timer=args.timer, gate=args.gate,
                         poll_s=args.poll_ms / 1000.0, isolation=isolation, **({"worker": tuple(args.worker)} if args.worker else {}))
    with CaseRunner(options, root) as runner:
        device = runner.resolve_device(args.device)
        runner.check_suite(suite.path)
        if device not in suite.devices:
            raise PerfciError(f"suite '{suite.name}' is sized for {', '.join(suite.devices)}, and no GPU "
                              f"is in use here; run 'perfci run smoke' on the CPU, or use a GPU")
        runner.options = replace(options, device=device, iters=args.iters or _default_iters(device),
                                 warmup_min_s=0.1 if device == "cuda" else 0.05,
                                 warmup_max_s=1.5 if device == "cuda" else 0.5)
        console = Console(total=len(cases))
        try:
            results, env = record_cases(runner, suite.name, cases, args.out, console, args.log_json, placed)
        finally:
            console.close()
    _print_summary(results, env, suite.name, args.format, args.out)
    broken = [r for r in results if r.status in ("fail", "error", "timeout")]
    if not any(r.status == "ok" for r in results):
        # Never green: a run that timed nothing cannot vouch for anything.
        print(f"perfci run: nothing was measured ({len(results)} case(s), none ok); exit 1", file=sys.stderr)
        return EXIT_REGRESSION
    return EXIT_REGRESSION if broken else EXIT_OK


def _checked_by_the_worker(spec: CaseSpec) -> str | None:
    """The suite loader's kernel check in this process: none (see :meth:`CaseRunner.check_suite`)."""
    return None


def _default_iters(device: str) -> int:
    return CPU_ITERS if device == "cpu" else GPU_ITERS


def _check_log_path(path: str) -> None:
    """Fail before measuring if --log-json could not be written."""
    if os.path.isdir(path):
        raise PerfciError(f"--log-json {path}: is a directory; give a file name")
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # as --out makes its directory
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise PerfciError(f"--log-json {path}: cannot write ({err.strerror})") from None


def _print_summary(results, env, suite_name, fmt, out_path) -> None:
    from perfci.measure.render import RENDERERS, status_counts

    if fmt != "none":
        sys.stdout.write(RENDERERS[fmt](results, env, suite_name))
    counts = ", ".join(f"{n} {s}" for s, n in sorted(status_counts(results).items()))
    print(f"{len(results)} cases: {counts}; wrote {out_path}", file=sys.stderr)
