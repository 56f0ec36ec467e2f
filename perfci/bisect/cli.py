"""``perfci bisect``: find the commit that made a benchmark slower.

The command line only: parse, check the options, hand a
:class:`~perfci.bisect.search.BisectConfig` to the session, print the report.
Heavy modules (git, pandas, scipy, matplotlib) are imported when a bisect runs,
so ``perfci --help`` stays fast.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from perfci.args import percentage, seconds
from perfci.console import Console
from perfci.errors import EXIT_OK, EXIT_USAGE, PerfciError
from perfci.gitsession import Pause, no_pause

PREFIX = "perfci bisect: "

DESCRIPTION = """\
Find the first commit between GOOD and BAD that made BENCH_CMD slower.

Every commit runs in a temporary git worktree, built once (--build), so runs
of different commits can alternate within a second: each decision is taken on
paired rounds, and a machine whose speed swings by 20% between states that
last seconds moves both sides of every pair alike. Your tree, index, stash,
branch and HEAD are never touched; uncommitted changes stay where they are
(the bench measures committed code).

  1. GOOD against BAD in rounds GOOD BAD BAD GOOD (then BAD GOOD GOOD BAD),
     until the interval of the per-round log ratio excludes 0 with its
     estimate past --min-effect (or lies below it: exit 3), or --budget runs
     out.
  2. A probe m inside the bracket (lo, hi) runs in rounds lo m m hi (then
     hi m m lo) until a sequential likelihood ratio between "m like lo"
     (good) and "m like hi" (bad) passes 1000:1; unsure when --budget runs
     out first, and the search stops there.
  3. Once lo and hi are adjacent, lo against hi in paired rounds: the culprit
     is named (exit 0) only when its own step's 99% interval lies wholly past
     --min-effect. Anything less is exit 3, with the candidate range, the best
     guess, the step measured and what would decide it.

The intervals of 1 and 3 are looked at after a few pre-set round counts, each
look at a share of alpha = 0.01, so stopping early or at the budget keeps each
decision's error within 1%. A commit whose build or bench fails is skipped.
Ctrl-C, SIGTERM and errors remove the worktrees; after a hard kill run
`perfci bisect --abort`. docs/bisect.md has the why and the figures.

Every round is cached in .git/perfci-bisect/cache.json by decision (commits,
bench command, build command, metric), so a rerun or --resume replays the
decisions and measures only what was still open. With --jobs N, N probes run
at once, one slot (and one GPU) each; a pair never spans two slots.

The metric is the last number BENCH_CMD prints, lower is better, unless you say
otherwise with --metric, --json-path or --csv-column/--case. It must be
positive (a time or a throughput): decisions are taken on log ratios."""

EPILOG = """\
examples:
  # a script that prints a time in ms
  perfci bisect v1.2 HEAD -- ./bench.sh --size 4096

  # perfci's own suite as the bench: read median_us of one case from r.csv
  perfci bisect v1.2 HEAD --build 'pip install -e . -q' \\
      --csv-column median_us --case 'matmul_tiled,4096x4096x4096,fp16' \\
      -- perfci run decode --out r.csv

  # a noisy machine: up to 5 minutes a decision, at most an hour in all
  perfci bisect v1.2 HEAD --budget 300 --total-budget 3600 -- ./bench.sh

  # throughput from JSON output, 4 probes at a time on GPUs 0-3
  perfci bisect main~40 main --json-path results.tflops --higher-is-better \\
      --jobs 4 --gpus 0,1,2,3 --plot bisect.png -- python bench.py --json

  perfci bisect --abort     # after a kill -9: restore tree, branch and stash
  perfci bisect --resume    # restore, then bisect again reusing cached runs

exit codes:
  0  a first bad commit was found, its own step confirmed past --min-effect
  2  bad input (unknown ref, GOOD not an ancestor of BAD, no bench command,
     no metric in its output, ...), or every candidate commit was skipped
     (the report names the candidate set)
  3  undecided: GOOD and BAD do not differ past --min-effect (or look
     swapped), or the search could not confirm one commit within its budget
     (the report names the candidate range, the best guess and what would
     decide it: more runs with --budget, or a quieter machine)
  4  internal error
  130 interrupted (your repository was restored)
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bisect", help="find the commit that made a benchmark slower",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="perfci bisect [options] GOOD BAD -- BENCH_CMD [ARG ...]\n"
              "       perfci bisect [options] GOOD BAD --suite NAME --case KEY\n"
              "       perfci bisect --abort | --resume",
    )
    p.add_argument("good", nargs="?", metavar="GOOD", help="a commit where the bench is fast")
    p.add_argument("bad", nargs="?", metavar="BAD", help="a later commit where it is slow (e.g. HEAD)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- BENCH_CMD",
                   help="the benchmark command, after '--'; it runs in the repository root of each commit")

    m = p.add_argument_group("metric (default: the last number on stdout, lower is better)")
    m.add_argument("--metric", metavar="REGEX", help="take the first group of the last match of REGEX on stdout")
    m.add_argument("--json-path", metavar="PATH", help="stdout is JSON; take this dotted path (a.b.0.c)")
    m.add_argument("--csv-column", metavar="COL", help="read column COL of a results CSV (with --case)")
    m.add_argument("--case", metavar="KEY",
                   help="the CSV row: 'kernel,shape,dtype' exactly, or a substring unique in 'kernel shape dtype'")
    m.add_argument("--csv-file", metavar="PATH",
                   help="the CSV the bench writes, relative to the repository (default: the path after --out "
                        "in BENCH_CMD)")
    m.add_argument("--higher-is-better", action="store_true", help="the metric is a throughput, not a time")

    s = p.add_argument_group("statistics")
    s.add_argument("--budget", type=seconds, default=300.0, metavar="S",
                   help="seconds of runs a decision may take (GOOD/BAD, each probe, the culprit check) before it "
                        "ends undecided (default 300); --min-rounds rounds are always run")
    s.add_argument("--total-budget", type=seconds, metavar="S",
                   help="seconds the whole bisect may measure; past it, exit 3 with the range so far "
                        "(default: no limit)")
    s.add_argument("--min-rounds", type=int, default=3, metavar="N",
                   help="rounds every decision takes before it may stop (default 3; at least 2)")
    s.add_argument("--min-effect", type=percentage, default=2.0, metavar="PCT",
                   help="the smallest slowdown worth a culprit, in percent (default 2): GOOD -> BAD must be past "
                        "it, and the culprit's own step wholly past it")
    # Gone with the unpaired samples: a clear line, not argparse's "unrecognized".
    s.add_argument("--repeats", type=int, help=argparse.SUPPRESS)
    s.add_argument("--max-repeats", type=int, help=argparse.SUPPRESS)

    r = p.add_argument_group("running")
    r.add_argument("--build", metavar="CMD", help="shell command that rebuilds each commit before benching")
    r.add_argument("--build-timeout", type=seconds, metavar="S",
                   help="stop a build, with its whole process group, after S seconds: the commit is skipped as "
                        "one whose build failed (default: [tool.perfci] build_timeout, else 1800; a build still "
                        "going when --total-budget ends is stopped too)")
    r.add_argument("--timeout", type=seconds, metavar="S",
                   help="kill a bench run (and its whole process group) after S seconds; counts as a failed run "
                        "(default 1800; a run still going when --total-budget ends is stopped too)")
    r.add_argument("--first-parent", action="store_true", help="follow only the first parent of merges")
    w = p.add_argument_group("a suite's case, measured by warm workers (instead of BENCH_CMD)")
    w.add_argument("--suite", metavar="NAME",
                   help="measure --case of this suite (as perfci run does) from a warm worker per commit: no "
                        "interpreter, torch import or autotuning per run (docs/bisect.md); no BENCH_CMD")
    w.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="with --suite: where the case runs (default auto)")
    w.add_argument("--iters", type=int, default=70, metavar="N",
                   help="with --suite: timed launches per repeat (default 70); --repeats N: repeats per run "
                        "(default 7), the run's value their median")
    w.add_argument("--isolation", choices=("run", "fork", "shared"), default="run",
                   help="with --suite: a fresh process (device context) per run (default), per case and run, "
                        "or one per commit")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="probe N commits at once, each in its own slot of worktrees and GPU (default 1)")
    r.add_argument("--gpus", metavar="LIST",
                   help="GPU ids for --jobs, e.g. 0,1,2,3 (default: CUDA_/HIP_VISIBLE_DEVICES, then nvidia-smi)")
    r.add_argument("-C", "--repo", default=".", metavar="PATH", help="the repository (default: the current one)")

    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "json", "markdown"), default="text", help="report format")
    o.add_argument("--plot", metavar="PNG", help="write commit order vs metric, with GOOD/BAD bands, to PNG")

    a = p.add_argument_group("recovery")
    a.add_argument("--abort", action="store_true",
                   help="restore tree, index, branch and stash after a bisect that was killed")
    a.add_argument("--resume", action="store_true",
                   help="restore as --abort does, then run the killed bisect again (cached runs are reused)")
    # ``pause`` has no option: only the fault tests set it, through perfci.cli.main's
    # seams (tests/bisect/fault_entry.py), to signal the process inside a phase.
    p.set_defaults(handler=main, _bisect_parser=p, pause=no_pause)


def _split_command(args) -> None:
    """Separate our options given after GOOD BAD from BENCH_CMD at the '--'."""
    words = list(args.command or [])
    if "--" in words or words[:1] and words[0].startswith("-"):  # no '--': every word is ours (--suite)
        cut = words.index("--") if "--" in words else len(words)
        ours, words = words[:cut], words[cut + 1:]
        if ours:
            # Re-parsing resets the positionals to their defaults; keep the ones already read.
            good, bad = args.good, args.bad
            args._bisect_parser.parse_args(ours, namespace=args)
            args.good, args.bad = good, bad
    args.command = words


RESUMED = ("good", "bad", "command", "metric", "json_path", "csv_column", "case", "csv_file", "higher_is_better",
           "budget", "total_budget", "min_rounds", "min_effect", "build", "build_timeout", "timeout", "first_parent",
           "jobs", "gpus", "repo", "format", "plot", "suite", "device", "isolation", "repeats", "iters")


def _arguments_for_resume(args) -> dict:
    return {k: getattr(args, k) for k in RESUMED}


def _suite_bench(args):
    """``--suite``: the case it names, and the BenchSpec that keys its rounds in the cache (no command runs)."""
    from perfci.benchcmd import BenchSpec
    from perfci.benchmetric import MetricSpec
    from perfci.measure.sides import suite_spec

    if args.command:
        raise PerfciError("--suite measures the suite's case itself: drop the bench command after '--'")
    if args.metric or args.json_path or args.csv_column or args.csv_file or args.higher_is_better:
        raise PerfciError("--suite reads the case's median_us itself: drop --metric, --json-path, --csv-column, "
                          "--csv-file and --higher-is-better")
    if not args.case:
        raise PerfciError("--suite needs --case: the one case to bisect ('kernel,shape,dtype' or a unique part)")
    if args.max_repeats is not None:
        raise PerfciError("--max-repeats is gone: bound each decision with --budget SECONDS")
    if not 1 <= args.iters <= 100_000:
        raise PerfciError(f"--iters {args.iters}: use 1..100000")
    # the suite and its case as the repository's checkout declares them
    spec = suite_spec(args.suite, None, None, args.device, 7 if args.repeats is None else args.repeats,
                      args.timeout, args.isolation, case=args.case, start=args.repo)
    spec = replace(spec, iters=args.iters)
    case = ",".join(spec.cases[0].key)
    metric = MetricSpec(csv_column="median_us", case=case, csv_file=f"suite {spec.suite}")
    command = ("perfci-suite", spec.suite, case, args.device, args.isolation, str(spec.repeats), str(spec.iters))
    return spec, BenchSpec(command, args.build, metric, args.timeout, _build_timeout(args))


def _build_timeout(args) -> float:
    """--build-timeout, else the project's [tool.perfci] build_timeout (read only when there is a build)."""
    from perfci.config import BUILD_TIMEOUT_S, load_config

    if args.build_timeout is not None:
        return args.build_timeout
    return load_config(Path(args.repo)).build_timeout if args.build else BUILD_TIMEOUT_S


def _config(args, pause: Pause):
    from perfci.benchcmd import DEFAULT_TIMEOUT_S, BenchSpec
    from perfci.benchmetric import metric_spec
    from perfci.bisect.search import BisectConfig

    if not args.good or not args.bad:
        raise PerfciError("give GOOD and BAD commits, then '--' and the bench command (see --help)")
    suite = None
    if args.suite:
        suite, bench = _suite_bench(args)
    elif not args.command:
        raise PerfciError("no bench command: put it after '--', e.g. perfci bisect v1 HEAD -- ./bench.sh "
                          "(or measure a suite's case with --suite NAME --case KEY)")
    else:
        metric = metric_spec(args.metric, args.json_path, args.csv_column, args.case, args.csv_file, args.command)
        timeout = DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout
        bench = BenchSpec(tuple(args.command), args.build, metric, timeout, _build_timeout(args))
    if not args.suite and (args.repeats is not None or args.max_repeats is not None):
        raise PerfciError("--repeats and --max-repeats are gone: each decision now runs paired rounds until it is "
                          "resolved; bound it with --budget SECONDS (and --min-rounds N)")
    if args.min_rounds < 2:
        raise PerfciError("--min-rounds must be at least 2: an interval needs two rounds")
    if args.jobs < 1:
        raise PerfciError("--jobs must be at least 1")
    gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip()) if args.gpus else None
    return BisectConfig(Path(args.repo), args.good, args.bad, bench, args.higher_is_better,
                        min_effect_pct=args.min_effect, budget_s=args.budget, total_budget_s=args.total_budget,
                        min_rounds=args.min_rounds, first_parent=args.first_parent, jobs=args.jobs, gpus=gpus,
                        suite=suite, arguments=_arguments_for_resume(args), pause=pause)


class _Progress(Console):
    """perfci's console, plus the line each measured commit gets."""

    def step(self, record, state, commits_total, eta_s) -> None:
        lo, hi = state.bounds
        left = len(state.candidates)
        estimate = f"first bad in #{lo + 2}..#{hi + 1} ({left} left)" if left > 1 else \
            f"first bad likely {state.commits[hi][:12]} (its step is checked next)"
        eta = "" if eta_s is None or not state.open_commits else \
            f", ETA {time.strftime('%M:%S', time.gmtime(eta_s))}"
        against = f" vs #{record.against[0]}/#{record.against[1]}" if record.against else ""
        position = "" if record.position is None else f" at {record.position:.2f} of the step"
        style = {"good": "green", "bad": "red"}.get(record.verdict.value, "yellow")
        rounds = f"{record.rounds} round{'' if record.rounds == 1 else 's'}, {record.seconds:.0f} s"
        self.line(f"#{record.order}/{commits_total} {record.sha[:12]}{against}: {rounds}"
                  f"{position} -> {record.verdict.value}; {estimate}{eta}", style)


def _recover(args, pause: Pause) -> int:
    from perfci.bisect import session

    progress = _Progress(prefix=PREFIX)
    journal, warnings = session.abort(Path(args.repo), pause)
    for warning in warnings:
        progress.note(f"warning: {warning}")
    where = journal.original_branch or journal.original_head[:12]
    progress.note(f"restored {where} and your changes from session {journal.session_id}")
    if args.abort:
        # A restore that left something for the user to do by hand is not a success.
        return EXIT_OK if not warnings else EXIT_USAGE
    saved = journal.arguments or {}
    if not saved:
        raise PerfciError("the journal holds no arguments to resume with; start the bisect again")
    for key, value in saved.items():
        if key in RESUMED:  # a journal from an older perfci may hold options that are gone
            setattr(args, key, value)
    args.abort = args.resume = False
    return _bisect(args, pause)


def _bisect(args, pause: Pause) -> int:
    from perfci.bisect import report, session

    cfg = _config(args, pause)
    progress = _Progress(prefix=PREFIX)
    result = session.run(cfg, progress)
    sys.stdout.write(report.RENDERERS[args.format](result))
    sys.stdout.flush()
    if args.plot:
        try:
            report.plot(result, Path(args.plot))
        except (OSError, ValueError) as err:  # ValueError: a format matplotlib cannot write
            progress.note(f"could not write the plot {args.plot}: {getattr(err, 'strerror', None) or err}")
        else:
            progress.note(f"plot written to {args.plot}")
    return result.exit_code


def main(args) -> int:
    """``perfci bisect``; ``args.pause`` is called at each of :data:`perfci.bisect.search.PHASES`."""
    _split_command(args)
    if args.abort and args.resume:
        raise PerfciError("--abort and --resume exclude each other")
    if args.abort or args.resume:
        return _recover(args, args.pause)
    return _bisect(args, args.pause)
