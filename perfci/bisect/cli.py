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
from pathlib import Path

from perfci.gitsession import Pause, no_pause
from perfci.console import Console
from perfci.args import percentage
from perfci.errors import EXIT_OK, EXIT_USAGE, PerfciError

PREFIX = "perfci bisect: "

DESCRIPTION = """\
Find the first commit between GOOD and BAD that made BENCH_CMD slower.

perfci stashes your uncommitted work (tracked, staged and untracked files;
ignored files are left alone), measures GOOD and BAD several times, checks the
slowdown is real (a change past --min-effect that is not yet significant gets
twice the runs at both ends, up to --max-repeats, before it is called no
difference), then drives `git bisect`: at each commit it checks out,
rebuilds (--build), runs BENCH_CMD --repeats times and calls the commit good,
bad or unsure against the GOOD and BAD samples (rank tests plus the position of
its median on the GOOD->BAD gap). A commit like neither endpoint sends it back
to measure GOOD and BAD more, and every verdict is judged again against them.
Unsure commits get twice the runs, up to --max-repeats, then are skipped; so
are commits that fail to build or bench.
Your branch, HEAD, index and files come back exactly as they were, also after
Ctrl-C or SIGTERM; after a hard kill run `perfci bisect --abort`.

Every measurement is cached in .git/perfci-bisect/cache.json by (commit, bench
command, build command, metric), so a rerun or --resume measures nothing twice.
With --jobs N the commits are measured N at a time in temporary git worktrees,
one GPU each, and your own tree is never touched.

The metric is the last number BENCH_CMD prints, lower is better, unless you say
otherwise with --metric, --json-path or --csv-column/--case."""

EPILOG = """\
examples:
  # a script that prints a time in ms
  perfci bisect v1.2 HEAD -- ./bench.sh --size 4096

  # perfci's own suite as the bench: read median_us of one case from r.csv
  perfci bisect v1.2 HEAD --build 'pip install -e . -q' \\
      --csv-column median_us --case 'matmul_tiled,4096x4096x4096,fp16' \\
      -- perfci run decode --out r.csv

  # throughput from JSON output, 4 commits at a time on GPUs 0-3
  perfci bisect main~40 main --json-path results.tflops --higher-is-better \\
      --jobs 4 --gpus 0,1,2,3 --plot bisect.png -- python bench.py --json

  perfci bisect --abort     # after a kill -9: restore tree, branch and stash
  perfci bisect --resume    # restore, then bisect again reusing cached runs

exit codes:
  0  a first bad commit was found
  2  bad input (unknown ref, GOOD not an ancestor of BAD, no bench command,
     no metric in its output, ...), or every candidate commit was skipped
     (the report names the candidate set)
  3  GOOD and BAD do not differ significantly or by more than --min-effect
     (or the endpoints look swapped): nothing to bisect
  130 interrupted (your tree was restored)
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bisect", help="find the commit that made a benchmark slower",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="perfci bisect [options] GOOD BAD -- BENCH_CMD [ARG ...]\n"
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
    s.add_argument("--repeats", type=int, default=5, metavar="N",
                   help="runs per commit, and at GOOD and BAD (default 5; at least 5 for the baseline test)")
    s.add_argument("--max-repeats", type=int, default=20, metavar="N",
                   help="runs double up to N: GOOD's and BAD's while their change is past --min-effect but "
                        "not yet significant, or a commit is like neither; an unsure commit's, then it is "
                        "skipped (default 20)")
    s.add_argument("--min-effect", type=percentage, default=2.0, metavar="PCT",
                   help="stop (exit 3) unless BAD is slower than GOOD by more than PCT percent (default 2)")

    r = p.add_argument_group("running")
    r.add_argument("--build", metavar="CMD", help="shell command that rebuilds each commit before benching")
    r.add_argument("--timeout", type=float, metavar="S",
                   help="kill a bench run (and its whole process group) after S seconds; counts as a failed run")
    r.add_argument("--first-parent", action="store_true", help="follow only the first parent of merges")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="measure N commits at once in temporary worktrees, one GPU each (default 1: your tree)")
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
    if "--" in words:
        cut = words.index("--")
        ours, words = words[:cut], words[cut + 1:]
        if ours:
            # Re-parsing resets the positionals to their defaults; keep the ones already read.
            good, bad = args.good, args.bad
            args._bisect_parser.parse_args(ours, namespace=args)
            args.good, args.bad = good, bad
    args.command = words


def _arguments_for_resume(args) -> dict:
    keep = ("good", "bad", "command", "metric", "json_path", "csv_column", "case", "csv_file", "higher_is_better",
            "repeats", "max_repeats", "min_effect", "build", "timeout", "first_parent", "jobs", "gpus", "repo",
            "format", "plot")
    return {k: getattr(args, k) for k in keep}


def _config(args, pause: Pause):
    from perfci.benchcmd import BenchSpec
    from perfci.benchmetric import metric_spec
    from perfci.bisect.search import BisectConfig

    if not args.good or not args.bad:
        raise PerfciError("give GOOD and BAD commits, then '--' and the bench command (see --help)")
    if not args.command:
        raise PerfciError("no bench command: put it after '--', e.g. perfci bisect v1 HEAD -- ./bench.sh")
    metric = metric_spec(args.metric, args.json_path, args.csv_column, args.case, args.csv_file, args.command)
    if args.repeats < 5:
        raise PerfciError("--repeats must be at least 5: fewer cannot show a significant GOOD/BAD difference")
    if args.max_repeats < args.repeats:
        raise PerfciError("--max-repeats must be at least --repeats")
    if args.jobs < 1:
        raise PerfciError("--jobs must be at least 1")
    if args.timeout is not None and args.timeout <= 0:
        raise PerfciError("--timeout must be positive")
    _refuse_stdout_inside_the_tree(Path(args.repo))
    gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip()) if args.gpus else None
    bench = BenchSpec(tuple(args.command), args.build, metric, args.timeout)
    return BisectConfig(Path(args.repo), args.good, args.bad, bench, args.higher_is_better, args.repeats,
                        args.max_repeats, args.min_effect, args.first_parent, args.jobs, gpus,
                        _arguments_for_resume(args), pause)


def _refuse_stdout_inside_the_tree(repo: Path) -> None:
    """``perfci bisect ... > report.json`` inside the repository would lose the report.

    Bisect stashes untracked files and brings them back at the end, so an
    untracked file that the shell opened for stdout is put back as it was
    before the bisect (empty), while the report went to the stashed-away inode.
    """
    import os

    from perfci.git import untracked_in

    try:
        target = Path(os.readlink("/proc/self/fd/1"))
    except OSError:
        return  # not Linux
    if not target.is_file():
        return  # a terminal or a pipe: nothing in the tree to lose
    relative = untracked_in(repo, target)
    if relative is not None:
        raise PerfciError(f"stdout goes to {relative}, an untracked file inside the repository: bisect "
                          f"stashes untracked files, so the report would be lost; write it outside the "
                          f"repository, or add it to .gitignore")


class _Progress(Console):
    """perfci's console, plus the line each measured commit gets."""

    def step(self, record, state, commits_total, eta_s) -> None:
        c = record.classification
        lo, hi = state.bounds
        left = len(state.candidates)
        estimate = f"first bad in #{lo + 2}..#{hi + 1} ({left} left)" if left > 1 else \
            f"first bad: {state.commits[hi][:12]}"
        median = record.samples.median
        eta = "" if eta_s is None or state.done else f", ETA {time.strftime('%M:%S', time.gmtime(eta_s))}"
        style = {"good": "green", "bad": "red"}.get(c.verdict.value, "yellow")
        self.line(f"#{record.order}/{commits_total} {record.sha[:12]} n={len(record.samples.values)}"
                  f"{f'+{record.samples.failures} failed' if record.samples.failures else ''} "
                  f"median={'-' if median is None else f'{median:.5g}'} -> {c.verdict.value}; {estimate}{eta}",
                  style)


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
