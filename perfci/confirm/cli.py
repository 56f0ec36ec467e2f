"""``perfci confirm``: is CUR really slower than BASE? Interleaved runs of both, in rounds."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfci.args import percentage, probability, seconds
from perfci.confirm import DEFAULT_BUDGET_S
from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, PerfciError

DESCRIPTION = """\
Measure BASE and CUR (default HEAD) alternately on this machine until every case
is decided: two temporary git worktrees (your tree, index and branch are never
touched), --build in each, then BENCH_CMD in rounds of four runs in the order
BASE, CUR, CUR, BASE, so drift (clocks, temperature, a neighbour) hits both sides
alike. Each round is a block: the comparison pairs the two sides within a round,
and the rounds' spread, not one run's repeats, sets the interval.

A case is `regressed` when CUR is slower beyond --min-effect with the whole
confidence interval past it, after false-discovery control across the cases;
`unchanged` when the interval lies within +-min-effect; `inconclusive` when the
time ran out first. Each case is judged on its own change, unless --reference
names cases the change cannot touch (e.g. the vendor BLAS): their shared run
drift is then taken out of every case. The session stops once every case is
decided (looks from --min-rounds on), when --budget is spent, or when the time
left could not decide the cases still open; --max-rounds is an optional cap.

What is measured: the last number BENCH_CMD prints (lower is better), or
--metric / --json-path / --csv-column with --case as in perfci bisect; or, with
--results PATH, every case of the perfci results CSV that BENCH_CMD writes at
PATH (e.g. `-- perfci run decode --cases flagged.json --out r.csv` with
--results r.csv)."""

EPILOG = """\
examples:
  perfci confirm main -- ./bench.sh --size 4096
  perfci confirm main --suite decode --reference kernel=torch_matmul --budget 1200
  perfci confirm v1.4 HEAD --results r.csv -- perfci run decode --filter 'M<=16' --out r.csv
  perfci confirm --abort        # after a kill -9: remove the worktrees

exit codes:
  0  no case confirmed slower, none broken
  1  a confirmed regression, or a broken case: measured on one side and never on the other (it crashed,
     failed its check, exited or hung there; the side and the reason are in every output format)
  2  bad input: unknown or identical refs, a bench that fails on both sides, a build that failed or
     timed out, --budget over before either side was measured
  3  --strict: something stayed inconclusive
  130 interrupted (worktrees removed)
"""


def _options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("what to measure (default: the last number BENCH_CMD prints, lower is better)")
    m.add_argument("--results", metavar="PATH",
                   help="BENCH_CMD writes a perfci results CSV at PATH (relative to the repository); "
                        "confirm every case in it")
    m.add_argument("--metric", metavar="REGEX", help="the first group of the last match of REGEX on stdout")
    m.add_argument("--json-path", metavar="PATH", help="stdout is JSON; take this dotted path")
    m.add_argument("--csv-column", metavar="COL", help="column COL of a results CSV, with --case")
    m.add_argument("--case", metavar="KEY", help="'kernel,shape,dtype', or a substring unique in 'kernel shape dtype'")
    m.add_argument("--csv-file", metavar="PATH", help="the CSV for --csv-column (default: the path after --out)")
    m.add_argument("--higher-is-better", action="store_true", help="the metric is a throughput")
    s = p.add_argument_group("rounds and verdicts")
    s.add_argument("--min-rounds", type=int, default=5, metavar="N", help="rounds before any verdict (default 5)")
    s.add_argument("--budget", type=seconds, default=DEFAULT_BUDGET_S, metavar="S",
                   help="start no round that would end after S seconds of rounds (default %(default)g); the "
                        "session stops earlier once every case is decided")
    s.add_argument("--max-rounds", type=int, metavar="N", help="stop after N rounds at most (default: no cap)")
    s.add_argument("--min-effect", type=percentage, default=1.0, metavar="PCT",
                   help="the smallest change that counts, in percent (default 1)")
    s.add_argument("--alpha", type=probability, default=0.05, help="false discovery rate across cases (default 0.05)")
    s.add_argument("--strict", action="store_true", help="exit 3 when any case stays inconclusive")
    s.add_argument("--reference", metavar="EXPR",
                   help="cases the change cannot touch (a --filter expression, e.g. 'kernel=torch_matmul'): "
                        "each run's drift is estimated from them and taken out of every case; if they moved "
                        "themselves, each case is judged on its own. Default: no reference, each case on its own "
                        "change (never the other cases under test: a change most of them share would cancel)")
    s.add_argument("--no-common-mode", action="store_true",
                   help="each case judged on its own change, no reference (the default; kept for scripts)")
    w = p.add_argument_group("or measure a suite's cases in warm workers, one per revision (no bench command)")
    w.add_argument("--suite", metavar="SUITE", help="a suite name or .toml (as perfci run): its cases are "
                   "measured by a worker per revision that imports torch once; a round costs only the "
                   "measurements")
    w.add_argument("--filter", metavar="EXPR", help="with --suite: keep matching cases (as perfci run --filter)")
    w.add_argument("--cases", metavar="FILE", help="with --suite: only the cases FILE names (a perfci "
                   "compare --format json output: those not unchanged; or lines of kernel,shape,dtype)")
    w.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="with --suite (default auto)")
    w.add_argument("--repeats", type=int, default=7, metavar="R",
                   help="with --suite: repeats per case per run (default 7)")
    w.add_argument("--isolation", choices=("run", "fork", "shared"), default="run",
                   help="with --suite. run: a fresh process and device context per run, forked from the "
                        "revision's warm worker (on an H200: A/A within +-0.8%%, 3x cheaper than fork); "
                        "fork: one per case and run; shared: one process per revision for the whole "
                        "session, cheapest, but on an H200 each process gave decode kernels an offset of "
                        "its own (+1 to +4.7%%), which reads as a change (default: run)")
    r = p.add_argument_group("running")
    r.add_argument("--build", metavar="CMD", help="shell command that builds each revision first (default: "
                   "[tool.perfci] build; '' for none)")
    r.add_argument("--build-timeout", type=seconds, metavar="S",
                   help="stop a build, with its whole process group, after S seconds: confirm ends with an error "
                        "(default: [tool.perfci] build_timeout, else 1800; --budget is the rounds' and does not "
                        "bound the builds)")
    r.add_argument("--timeout", type=seconds, metavar="S",
                   help="kill a bench run, with its whole process group, after S seconds: a failed run (default "
                        "1800; a run still going when --budget ends is stopped too). With --suite: each case's "
                        "limit before any side has measured it (default: a quarter of --budget, 60 to 600), "
                        "then 10 times its longest run on either side, at least 60 s")
    r.add_argument("-C", "--repo", default=".", metavar="PATH", help="the repository (default: the current one)")
    r.add_argument("--format", choices=("table", "markdown", "json", "csv"), default="table")
    r.add_argument("--abort", action="store_true", help="remove the worktrees of a confirm that was killed")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "confirm", help="is CUR really slower than BASE? interleaved rounds of both on this machine",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="perfci confirm [options] BASE [CUR] -- BENCH_CMD [ARG ...]\n       perfci confirm --abort")
    _options(p)
    p.add_argument("words", nargs=argparse.REMAINDER, metavar="BASE [CUR] -- BENCH_CMD", help=argparse.SUPPRESS)
    p.set_defaults(handler=main)


def _split(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """BASE [CUR] and options before '--', the bench command after it."""
    words = list(args.words or [])
    cut = words.index("--") if "--" in words else len(words)
    before, command = words[:cut], words[cut + 1:]
    options = _option_words(before)
    refs = [w for w in before if w not in options]
    if options:
        # Options written after BASE: parse them as if they came first.
        option_parser = _OptionParser(prog="perfci confirm", add_help=False)
        _options(option_parser)
        option_parser.parse_args(_option_words(before), namespace=args)
    if cut == len(words) and not args.abort and not args.suite:
        raise PerfciError("put the bench command after '--' (e.g. perfci confirm main -- ./bench.sh), "
                          "or name a suite (perfci confirm main --suite decode)")
    return refs, command


def _option_words(before: list[str]) -> list[str]:
    """The option words of ``before``, each with its value when it takes one."""
    takes_value = {a for action in _option_actions() for a in action.option_strings if action.nargs != 0}
    out, i = [], 0
    while i < len(before):
        word = before[i]
        if word.startswith("-"):
            out.append(word)
            if word in takes_value and i + 1 < len(before):
                out.append(before[i + 1])
                i += 1
        i += 1
    return out


def _option_actions():
    parser = _OptionParser(add_help=False)
    _options(parser)
    return parser._actions


class _OptionParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise PerfciError(f"{message} (see perfci confirm --help)")


def _check_rounds(args: argparse.Namespace) -> None:
    from perfci.confirm.analysis import MIN_ROUNDS

    if not MIN_ROUNDS <= args.min_rounds <= (args.max_rounds if args.max_rounds is not None else args.min_rounds):
        raise PerfciError(f"need {MIN_ROUNDS} <= --min-rounds <= --max-rounds (fewer rounds give no interval)")
    if args.reference is not None and args.no_common_mode:
        raise PerfciError("--reference and --no-common-mode contradict each other: drop one")
    if args.reference is not None:
        from perfci.confirm.reference import reference_filter

        reference_filter(args.reference)  # a malformed expression fails before any worktree is made


def _config(args: argparse.Namespace, refs: list[str], command: list[str]):
    from perfci.benchcmd import DEFAULT_TIMEOUT_S, BenchSpec
    from perfci.benchmetric import metric_spec
    from perfci.confirm.session import ConfirmConfig

    if not refs or len(refs) > 2:
        raise PerfciError("give BASE, and optionally CUR (default HEAD), before '--'")
    if args.suite:
        return _suite_config(args, refs, command)
    if args.filter or args.cases:
        raise PerfciError("--filter and --cases select a --suite's cases; with a bench command, pass them to it")
    if not command:
        raise PerfciError("no bench command after '--'")
    if args.results and (args.metric or args.json_path or args.csv_column):
        raise PerfciError("--results confirms every case of a results CSV: drop --metric, --json-path and "
                          "--csv-column")
    metric = metric_spec(args.metric, args.json_path, args.csv_column, args.case, args.csv_file, command)
    if args.results and args.higher_is_better:
        raise PerfciError("--results times are microseconds, lower is better: drop --higher-is-better")
    _check_rounds(args)
    if args.reference is not None and not args.results:
        raise PerfciError("--reference names cases: use it with --results or --suite, not with one bench metric")
    bench = BenchSpec(tuple(command), _build(args), metric,
                      DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout, _build_timeout(args))
    return ConfirmConfig(Path(args.repo), refs[0], refs[1] if len(refs) > 1 else "HEAD", bench,
                         results_path=args.results, higher_is_better=args.higher_is_better,
                         min_rounds=args.min_rounds, max_rounds=args.max_rounds, budget_s=args.budget,
                         min_effect_pct=args.min_effect, alpha=args.alpha, reference=args.reference)


def _suite_config(args: argparse.Namespace, refs: list[str], command: list[str]):
    from perfci.confirm.session import ConfirmConfig
    from perfci.measure.sides import suite_spec

    if command or args.results or args.metric or args.json_path or args.csv_column or args.higher_is_better:
        raise PerfciError("--suite measures the suite's cases itself: drop the bench command and the metric "
                          "options")
    _check_rounds(args)
    from perfci.benchcmd import BenchSpec
    from perfci.benchmetric import MetricSpec

    # A case that hangs at one side must be that side's timeout, not the budget's end (which reads as
    # undecided): before its time is known, a case gets a quarter of the budget.
    timeout = args.timeout if args.timeout is not None else min(600.0, max(60.0, args.budget / 4)) if args.budget \
        else None
    spec = suite_spec(args.suite, args.filter, args.cases, args.device, args.repeats, timeout, args.isolation)
    if args.reference is not None:
        from perfci.confirm.reference import reference_keys

        reference_keys(args.reference, [c.key for c in spec.cases], {c.key: c for c in spec.cases})
    bench = BenchSpec(("perfci", "confirm", "--suite", args.suite), _build(args), MetricSpec(), args.timeout,
                      _build_timeout(args))
    return ConfirmConfig(Path(args.repo), refs[0], refs[1] if len(refs) > 1 else "HEAD", bench,
                         min_rounds=args.min_rounds, max_rounds=args.max_rounds, budget_s=args.budget,
                         min_effect_pct=args.min_effect, alpha=args.alpha, reference=args.reference,
                         suite=spec)


def _build(args: argparse.Namespace) -> str | None:
    from perfci.confirm.session import configured_build

    if args.build is not None:
        return args.build or None
    return configured_build(Path(args.repo))


def _build_timeout(args: argparse.Namespace) -> float:
    from perfci.config import load_config

    return args.build_timeout if args.build_timeout is not None else load_config(Path(args.repo)).build_timeout


def main(args: argparse.Namespace) -> int:
    from perfci.console import Console
    from perfci.confirm import render, session

    refs, command = _split(args)
    console = Console(prefix="perfci confirm: ")
    if args.abort:
        journal = session.abort(Path(args.repo))
        console.note(f"removed the worktrees of session {journal.session_id}")
        return EXIT_OK
    cfg = _config(args, refs, command)
    judgement, rounds, sides = session.run(cfg, console, session.decider(cfg))
    sys.stdout.write(render.RENDERERS[args.format](judgement, rounds, sides, cfg))
    if judgement.regressed or judgement.broken:
        return EXIT_REGRESSION
    if args.strict and judgement.inconclusive:
        return EXIT_INCONCLUSIVE
    return EXIT_OK
