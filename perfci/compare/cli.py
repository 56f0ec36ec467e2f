"""``perfci compare`` and ``perfci calibrate``: arguments in, exit code out.

Thin on purpose: read the files (:mod:`perfci.compare.inputs`), judge
(:mod:`perfci.compare.verdicts`, :mod:`perfci.compare.calibration`), render
(:mod:`perfci.compare.render`). Those modules pull in numpy, scipy and
matplotlib, so they are imported inside the handlers: ``perfci --help`` and the
other commands do not pay for them.
"""
from __future__ import annotations

import argparse
import os
import sys

from perfci import builtin
from perfci.args import at_least, percentage, probability
from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, PerfciError
from perfci.verdict import Verdict, no_common_case

COMPARE_HELP = """\
Judge CUR against BASE case by case (key: kernel, shape, dtype).

verdicts:
  regressed     significant after Benjamini-Hochberg across the suite AND the
                whole confidence interval of the judged ratio is above +floor
  improved      the mirror image
  unchanged     the interval lies inside +-floor
  inconclusive  the data cannot decide: significant but the interval straddles
                the floor, a wide interval, or too few repeats to test;
                never counted as unchanged
  broken        ok in BASE, fail/error/timeout in CUR (worse than slow)
  fixed / skipped / added / removed   status changes and one-sided cases

noise the repeats cannot see (the 7 repeats share one run's clock):
  clock         where both files carry per-repeat core clocks, compute-bound
                cases are compared in cycles (time x clock), memory-bound ones
                in time, cases near the roofline ridge partly. Power-limited
                cases (throttled column) move only by the clock shift of the
                suite's other power-limited cases: a kernel that draws more
                power and so runs at a lower clock is really slower
  common mode   the suite-wide shift (medians, split compute/memory-bound) is
                printed on its own line and removed; cases are judged on their
                residual. With clocks on both sides a suite-wide shift beyond
                the profile's suite floor fails the gate; without clocks it is
                inconclusive (a clock swing looks the same)
  floor         per-arch effect floor from a noise profile (built-ins: gfx950,
                gfx942, sm_90, cpu, generic; or a JSON file from `perfci calibrate`),
                wider without clocks and near the ridge point

inputs: perfci CSV, FlyDSL CSV (one value per case: threshold-only verdicts),
pytest-benchmark JSON (stats.data as repeats).

a history store as BASE (a directory from `perfci history add`): each case is
judged against its own last K ok nights (--nights, default 5), with its
night-to-night spread measured from them (a prediction interval, in time)
instead of the fixed floor one run against one run needs; see docs/history.md.

exit codes:
  0  no regression
  1  at least one case regressed or broke (or a clocked suite-wide regression),
     or a case measured in BASE is missing or skipped in CUR (--allow-missing)
  2  bad input or usage: one line naming the file, row and column
  3  with --strict: something inconclusive and nothing regressed

examples:
  perfci compare base.csv cur.csv
  perfci compare base.csv cur.csv --format markdown >> $GITHUB_STEP_SUMMARY
  perfci compare base.csv cur.csv --noise-profile gfx942 --plot forest.png --strict
  perfci compare history/ cur.csv --nights 5     # against the last 5 nights of a history store

GitHub Actions step:
  - run: perfci compare baselines/mi355x.csv cur.csv --format markdown >> $GITHUB_STEP_SUMMARY
"""

CALIBRATE_HELP = """\
Derive a noise profile from A/A runs: two or more runs of the SAME code and
suite (5+ advised, on the runner kind CI uses). Every pair of runs is compared
exactly as `perfci compare` would; each floor is 1.25 x the 99th percentile of
the |residual| log ratios of its class (with / without clock normalization;
pure vs near-ridge cases). Use the result with --noise-profile FILE, or copy
its numbers into perfci/compare/noise.py's BUILTIN_PROFILES.

example:
  perfci calibrate aa1.csv aa2.csv aa3.csv aa4.csv aa5.csv --arch sm_90 --out sm_90.json
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="judge a run against a baseline (noise-aware, exit 1 on regression)",
        description=COMPARE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", metavar="BASE",
                   help="baseline results (CSV or pytest-benchmark JSON), or a history store directory "
                        "(`perfci history add`): then CUR is judged against its last --nights runs; "
                        "builtin:DEVICE/SUITE (builtin:cpu/smoke) is a baseline that ships with perfci")
    p.add_argument("cur", metavar="CUR", help="current results")
    p.add_argument("--format", choices=("table", "markdown", "json", "csv"), default="table")
    p.add_argument("--plot", metavar="OUT.png", help="also write a forest plot")
    p.add_argument("--noise-profile", metavar="NAME|FILE",
                   help="built-in profile name or calibrate's JSON (default: by the files' arch)")
    p.add_argument("--arch", help="device arch, when the files do not say (sm_90, gfx942, gfx950)")
    p.add_argument("--alpha", type=probability, default=0.05,
                   help="false discovery rate across the suite (default 0.05)")
    p.add_argument("--min-effect", type=percentage, metavar="PCT",
                   help="use PCT%% as every case's floor instead of the profile's")
    p.add_argument("--strict", action="store_true", help="exit 3 when anything is inconclusive")
    p.add_argument("--allow-missing", action="store_true",
                   help="a case measured in BASE but missing (or skipped) in CUR is not a failure "
                        "(default: exit 1, since a half-missing suite must not pass the gate)")
    p.add_argument("--explain", action="store_true",
                   help="under the table, why each regressed / improved case moved: base vs cur config, "
                        "resources, occupancy, grid, clocks, versions, and a one-line reading "
                        "(always in markdown and json)")
    p.add_argument("--compile-diff", metavar="FILE",
                   help="with --explain: the json of `perfci compile SUITE --arch ARCH --baseline DIR --format json`; "
                        "a regressed / improved case's resource change (spills, registers, occupancy, LDS) is "
                        "added to its reading (the results' arch only, when the diff has it)")
    p.add_argument("--only-changed", action="store_true",
                   help="show only the cases that are not unchanged (the summary still counts all)")
    p.add_argument("--sort", choices=("worst", "ratio", "name"), default="worst",
                   help="row order: worst verdict first, largest judged slowdown first, or by "
                        "kernel/shape/dtype (default: worst)")
    p.add_argument("--allow-device-mismatch", action="store_true",
                   help="judge runs of two devices against each other (refused by default, exit 2: "
                        "the arch or device name of BASE and CUR differ)")
    p.add_argument("--nights", type=at_least(2, "pooling needs at least 2 nights"), metavar="K",
                   help="BASE a history store: pool each case's last K ok runs (default 5)")
    p.add_argument("--no-clock-normalization", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-common-mode", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(handler=main)

    c = subparsers.add_parser(
        "calibrate", help="derive a noise profile from A/A runs",
        description=CALIBRATE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("runs", nargs="+", metavar="RUN", help="A/A result files (2 or more)")
    c.add_argument("--out", metavar="profile.json", help="write the profile here (default: stdout)")
    c.add_argument("--arch", help="device arch (default: read from the files)")
    c.add_argument("--name", help="profile name (default: the arch)")
    c.set_defaults(handler=calibrate_main)


def main(args) -> int:
    from perfci.compare.comparison import CompareOptions, missing_cases
    from perfci.compare.explain import with_explain
    from perfci.compare.identity import with_identity
    from perfci.compare.inputs import check_same_device, read_any, read_profile
    from perfci.compare.render import RENDERERS, plot
    from perfci.compare.verdicts import compare

    profile = read_profile(args.noise_profile) if args.noise_profile else None
    compile_diff = None
    if args.compile_diff:  # read first: a bad file is bad input before any judging
        from perfci.compile.ratchet import read_diff

        compile_diff = read_diff(args.compile_diff)
    opts = CompareOptions(alpha=args.alpha, min_effect_pct=args.min_effect, arch=args.arch,
                          clock_normalize=not args.no_clock_normalization,
                          common_mode=not args.no_common_mode)
    args.base = builtin.resolve_baseline(args.base)
    if os.path.isdir(args.base):
        # A history store: tonight against the last K nights (perfci/compare/pooled.py).
        from perfci.compare.store import pooled_comparison

        result = pooled_comparison(args.base, args.cur, profile, opts, args.nights)
        base, cur = None, read_any(args.cur)
        result = with_identity(result, None, cur)
    else:
        if args.nights is not None:
            raise PerfciError(f"--nights: {args.base} is a file; --nights pools the runs of a history "
                              f"store (a directory made by `perfci history add`)")
        base, cur = read_any(args.base), read_any(args.cur)
        if not args.allow_device_mismatch:
            check_same_device(base, cur)
        result = with_identity(compare(base, cur, profile, opts), base, cur)
    if no_common_case(result.cases):
        raise PerfciError(f"{args.base} and {args.cur} have no case in common (key: kernel, shape, "
                          f"dtype): nothing was compared; wrong file, or were the kernels renamed?")
    if args.explain or args.format in ("markdown", "json"):
        result = with_explain(result, base, cur)
        if compile_diff is not None:
            from perfci.compare.explain import with_compile_diff
            from perfci.compare.inputs import run_device
            from perfci.compile.ratchet import changes_by_case

            arch = run_device(cur)[0]  # that arch's change; a CPU run (no such file) gets every arch's
            if arch not in {d.get("arch") for d in compile_diff["diffs"]}:
                arch = None
            result = with_compile_diff(result, changes_by_case(compile_diff, arch))
    sys.stdout.write(RENDERERS[args.format](_shown(result, args.only_changed, args.sort)))
    if args.plot:
        try:
            plot(result, args.plot)
        except (OSError, ValueError) as err:  # ValueError: a format matplotlib cannot write
            raise PerfciError(f"--plot {args.plot}: cannot write ({getattr(err, 'strerror', None) or err})") from None
    missing = missing_cases(result)
    if missing and not args.allow_missing:
        shown = ", ".join(" ".join(k) for k in missing[:3]) + (" ..." if len(missing) > 3 else "")
        print(f"perfci compare: {len(missing)} case(s) of BASE were not measured in CUR ({shown}): exit 1 "
              f"(--allow-missing permits it)", file=sys.stderr)
    if result.regressed or (missing and not args.allow_missing):
        return EXIT_REGRESSION
    if args.strict and result.inconclusive:
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _shown(result, only_changed: bool, order: str):
    """The rows to render: filtered and ordered; the summary keeps counting every case."""
    from dataclasses import replace

    cases = [c for c in result.cases if not (only_changed and c.verdict == Verdict.UNCHANGED)]
    if order == "ratio":
        cases.sort(key=lambda c: -(c.ratio or c.raw_ratio or 0.0))
    elif order == "name":
        cases.sort(key=lambda c: (c.kernel, c.shape, c.dtype))
    return replace(result, cases=tuple(cases))


def calibrate_main(args) -> int:
    from perfci.compare.calibration import calibrate
    from perfci.compare.inputs import check_same_device, read_any
    from perfci.compare.noise import profile_to_json
    from perfci.files import atomic_write_text

    if len(set(map(os.path.realpath, args.runs))) != len(args.runs):
        raise PerfciError("calibrate: the same file is given twice; A/A needs separate runs")
    if len(args.runs) < 2:
        raise PerfciError("calibrate: give two or more A/A runs")
    if args.out and os.path.realpath(args.out) in set(map(os.path.realpath, args.runs)):
        raise PerfciError(f"calibrate: --out {args.out} is one of the runs it reads; "
                          f"write the profile to another file")
    tables = [read_any(p) for p in args.runs]
    for table in tables[1:]:
        check_same_device(tables[0], table)  # A/A runs are runs of one device
    cal = calibrate(tables, arch=args.arch, name=args.name)
    text = profile_to_json(cal.profile, {"runs": list(args.runs), "pairs": cal.n_pairs,
                                         "residuals": cal.n_residuals, "q99_pct": cal.q99_pct,
                                         "disturbed_left_out": cal.n_disturbed,
                                         "max_suite_shift_pct": cal.max_suite_shift_pct})
    if args.out:
        atomic_write_text(args.out, text)
        pr = cal.profile
        print(f"wrote {args.out}: floor {pr.floor_pct}% with clocks, {pr.unclocked_floor_pct}% without; "
              f"near-ridge {pr.band_floor_pct}% / {pr.unclocked_band_floor_pct}%"
              + (f"; plus {pr.floor_us:g} us / base time" if pr.floor_us else "")
              + f"; suite {pr.suite_floor_pct}% ({cal.n_runs} runs, {cal.n_pairs} pairs"
              + (f", {cal.n_disturbed} disturbed case pairs left out)" if cal.n_disturbed else ")"))
    else:
        sys.stdout.write(text)
    return EXIT_OK
