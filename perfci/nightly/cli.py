"""``perfci nightly SUITE --out DIR``: the whole night as one command; arguments in, exit code out."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from perfci.args import at_least, percentage, seconds
from perfci.benchcmd import DEFAULT_TIMEOUT_S
from perfci.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, PerfciError
from perfci.nightly import NIGHT_BUDGET_S

DESCRIPTION = """\
One night of CI in one command, each stage's outcome in DIR/verdict.json:

  1 tonight   --shards GLOB: merge the shard CSVs (perfci merge); --run CSV: take
              it; --bench CMD: run your own bench, which writes its results at
              {out}; none of them: build (--build / [tool.perfci] build), then
              measure SUITE (perfci run). Written to DIR/run.csv.
  2 baseline  judge tonight (perfci compare) against the --history store's last
              --nights nights of this suite (2+ nights: pooled); else against
              --baseline; else against the store's one night; else this is the
              first night: recorded, nothing judged. Without the options:
              [tool.perfci] history/LABEL, baselines/LABEL/SUITE.csv and
              noise_profiles[LABEL] (LABEL: --device-label, else the arch).
  3 gate      red: a case failed, errored or timed out; a baseline case is
              missing tonight (unless --allow-missing); nothing measured.
    canary    the detector's own check, never the verdict: a GEMM measured in
              two builds, one with a --canary PCT% slowdown planted (3 on a
              GPU; off on a CPU night), in interleaved rounds here; did compare
              and confirm's statistic find the plant, did its twin stay quiet?
              Kept in the store; `perfci history canary STORE` has the rates.
  4 confirm   the cases compare called regressed or inconclusive, measured again
              (perfci confirm --suite, interleaved rounds; with --bench, your
              command again, narrowed to them) at the baseline's commit and
              tonight's, in worktrees of --repo, each built and measured with its
              own kernels and suites. Skipped, saying why, when the baseline
              names no usable commit: a compare `regressed` then stays red.
  5 bisect    a confirmed regression's worst case, between those commits
              (perfci bisect --jobs N; a commit whose build fails is skipped);
              the culprit's sha, subject and diffstat.
  6 history   tonight appended to --history (created on the first night).
  7 report    DIR/summary.md (for $GITHUB_STEP_SUMMARY), DIR/issue.md (an issue
              body), DIR/verdict.json, forest.png and trends/*.png. What the
              reports meet (a plot, the compile diff, rendering) is a warning in
              them, never the exit code.

exit codes:
  0  clean (compare's flag shown to be noise by confirm counts as clean)
  1  a regression (confirmed where confirm ran), a broken or missing case, or nothing measured
  2  bad input: tonight's results or the baseline cannot be used (one line)
  3  undecided: compare's regressed case left inconclusive by confirm (--strict: any undecided case)
  4  internal error: a stage crashed (never 1); the reports are still written
  130 interrupted
"""
EXAMPLES = """\
examples:
  perfci nightly decode --out nightly/ --history perf-history/h200 --baseline baselines/h200/decode.csv
  perfci nightly decode --shards 'shards/decode/shard-*.csv' --history perf-history/gfx942 --out n/ --jobs 2
  perfci nightly smoke --device cpu --out n/ --confirm-args '--min-rounds 3 --max-rounds 5'
  perfci nightly gemm --bench 'pytest bench/ --perfci-out {out}' --out n/    # history etc. from [tool.perfci]
  perfci history canary perf-history/h200    # what the nightly's canary says this device resolves
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "nightly", help="the whole night: run or merge, judge, confirm, bisect, report, record",
        description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", metavar="SUITE", help="a suite name (your [tool.perfci] suites folder, then perfci's "
                                                  "built-ins: smoke, decode, prefill) or a .toml path; with "
                                                  "--bench, the name tonight's results are recorded under")
    p.add_argument("--out", "-o", metavar="DIR", required=True, help="where the night's files go")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--shards", metavar="GLOB", help="tonight's results: the shard CSVs of `perfci run "
                                                       "--shard I/N`, merged (quote the glob)")
    src.add_argument("--run", metavar="RUN.csv", help="tonight's results: a results CSV already measured")
    src.add_argument("--bench", metavar="CMD",
                     help="tonight's results: run CMD (a shell line) in the project root; it writes a perfci "
                          "results CSV, a FlyDSL CSV or pytest-benchmark JSON at {out}. confirm and bisect run "
                          "it again for the flagged cases, listed in the file {cases} and $PERFCI_CASES "
                          "(the pytest plugin honours it), e.g. 'pytest bench/ --perfci-out {out}'")
    p.add_argument("--bench-timeout", type=seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help="stop a bench run that takes longer than S seconds, with every process it started: "
                        "tonight's --bench, each confirm round's run of it, each bisect run; a failed run, "
                        "never a measurement (default %(default)g; recorded in verdict.json)")
    p.add_argument("--history", metavar="STORE", help="a perfci history store of this device (created on "
                                                      "the first night): judged against, then appended to "
                                                      "(default: [tool.perfci] history/LABEL)")
    p.add_argument("--baseline", metavar="BASE.csv", help="a committed baseline, used while the store has "
                                                          "fewer than 2 nights of the suite (default: "
                                                          "[tool.perfci] baselines/LABEL/SUITE.csv, if committed)")
    p.add_argument("--device-label", metavar="LABEL",
                   help="this device's folder under [tool.perfci] baselines and history, and its key in "
                        "noise_profiles (default: the arch tonight's run records: sm_90, gfx942, cpu)")
    p.add_argument("--build", metavar="CMD",
                   help="shell command that builds the kernels, run in the project root before tonight's "
                        "measurement and in every worktree confirm and bisect measure (default: "
                        "[tool.perfci] build; '' for none)")
    p.add_argument("--nights", type=at_least(2, "pooling needs at least 2 nights"), default=5, metavar="K",
                   help="pool the store's last K nights (default 5)")
    p.add_argument("--jobs", type=at_least(1, "give at least 1"), default=1, metavar="N",
                   help="bisect N commits at a time, one GPU each (default 1)")
    p.add_argument("--repo", default=".", metavar="PATH",
                   help="the git checkout confirm and bisect measure commits of, and where [tool.perfci] is "
                        "looked for (default: the current one)")
    p.add_argument("--allow-missing", action="store_true",
                   help="a baseline case missing tonight is a warning, not red")
    p.add_argument("--strict", action="store_true", help="exit 3 when any case stays undecided (without it, only a compare regression confirm left undecided)")
    p.add_argument("--no-bisect", action="store_true", help="stop after confirm")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="for perfci run, confirm and bisect's bench (default auto)")
    p.add_argument("--noise-profile", metavar="FILE",
                   help="this device's noise profile (perfci calibrate's JSON, from its own A/A nights) for "
                        "the one-run comparison; default: [tool.perfci] noise_profiles, else the built-in "
                        "profile of the arch")
    p.add_argument("--confirm-args", metavar="ARGS",
                   help="more options for perfci confirm, e.g. '--min-rounds 3 --max-rounds 10 --repeats 5'")
    p.add_argument("--bisect-args", metavar="ARGS",
                   help="more options for perfci bisect, e.g. '--budget 120 --total-budget 900'")
    p.add_argument("--bench-args", metavar="ARGS",
                   help="more options for the perfci run that bisect measures each commit with, e.g. '--repeats 3'")
    p.add_argument("--compile-baseline", metavar="DIR",
                   help="also diff tonight's compiled resources against DIR (e.g. baselines/compile/: "
                        "perfci compile --baseline, every arch DIR has a file of the suite for) and add the "
                        "table, and the change behind each regressed case, to the reports; informational, "
                        "it never changes the exit code")
    c = p.add_mutually_exclusive_group()
    c.add_argument("--canary", type=_plant, metavar="PCT",
                   help="plant a PCT%% slowdown in the canary (default 3 on a GPU night; a CPU night has no "
                        "canary unless given, e.g. --canary 100)")
    c.add_argument("--no-canary", action="store_true", help="measure no canary tonight")
    p.add_argument("--budget", type=seconds, default=NIGHT_BUDGET_S, metavar="S",
                   help=f"the whole night's seconds (default {NIGHT_BUDGET_S:.0f}): confirm gets half of what is "
                        f"left when it starts (at most its own 600 s), bisect the rest less 30 s for the reports; "
                        f"each at least 60 s. A --budget in --confirm-args or --total-budget in --bisect-args wins")
    p.add_argument("--canary-budget", type=seconds, default=60.0, metavar="S",
                   help="the canary's interleaved rounds stop after S seconds at most (default 60); their "
                        "looks and minimum effect are confirm's, with --confirm-args")
    # fault: called with each stage's name as it starts (the tests' seam, no option)
    p.set_defaults(handler=main, fault=None)


def _plant(text: str) -> float:
    value = percentage(text)
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"{text}: plant a slowdown from just above 0 to 1000%")
    return value


def main(args: argparse.Namespace) -> int:
    from perfci.nightly.night import run_night
    from perfci.nightly.state import NightConfig

    if args.bench is not None:
        from perfci.nightly.bench import check_command

        check_command(args.bench)
        if args.bench_args:
            raise PerfciError("--bench-args are options of the perfci run bisect measures with; with --bench, "
                              "bisect runs your command: put its options in it")
    if args.history is not None and Path(args.history).exists() and not Path(args.history).is_dir():
        raise PerfciError(f"--history {args.history}: not a directory (a history store is one)")
    cfg = NightConfig(
        suite=args.suite, out=Path(args.out), shards=args.shards, run=args.run, history=args.history,
        baseline=args.baseline, nights=args.nights, jobs=args.jobs, repo=Path(args.repo),
        allow_missing=args.allow_missing, strict=args.strict, bisect=not args.no_bisect, device=args.device,
        noise_profile=args.noise_profile,
        confirm_args=split_args(args.confirm_args, "--confirm-args"),
        bisect_args=split_args(args.bisect_args, "--bisect-args"),
        bench_args=split_args(args.bench_args, "--bench-args"), bench=args.bench, build=args.build,
        device_label=args.device_label, canary=args.canary, canary_off=args.no_canary,
        canary_budget_s=args.canary_budget, budget_s=args.budget, bench_timeout_s=args.bench_timeout)
    if cfg.out.exists() and not cfg.out.is_dir():
        raise PerfciError(f"--out {cfg.out}: not a directory")
    if cfg.noise_profile:  # before any stage runs: a bad profile is bad input, said in one line
        from perfci.compare.inputs import read_profile

        read_profile(cfg.noise_profile)
    if args.compile_baseline is not None and not Path(args.compile_baseline).is_dir():
        raise PerfciError(f"--compile-baseline {args.compile_baseline}: not a directory (baselines/compile/ is one)")
    outcome, decision = run_night(cfg, args.fault, compile_baseline=args.compile_baseline)
    if decision.exit_code == EXIT_USAGE:
        raise PerfciError(f"{decision.headline} (see {cfg.out / 'summary.md'})")
    if decision.exit_code == EXIT_INTERNAL:
        print(f"perfci: internal error: {decision.headline} (see {cfg.out / 'verdict.json'})", file=sys.stderr)
        return EXIT_INTERNAL
    if decision.exit_code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    print(f"perfci nightly {outcome.suite} on {outcome.device}: exit {decision.exit_code}: {decision.headline}")
    for warning in decision.warnings:
        print(f"  warning: {warning}")
    return decision.exit_code


def split_args(text: str | None, option: str) -> tuple[str, ...]:
    """``--confirm-args '--min-rounds 3'`` -> the words, or one line when they do not parse."""
    if not text:
        return ()
    try:
        return tuple(shlex.split(text))
    except ValueError as err:
        raise PerfciError(f"{option} {text!r}: {err}") from None
