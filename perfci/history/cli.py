"""``perfci history``: add runs to a store, find change points, export, plot, report.

Thin: files in and out here, decisions in the pure modules beside it. The
store (which reads canary records, so numpy through the statistics), scipy and
matplotlib are imported inside the handlers, so ``perfci --help`` does not pay
for them.
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from perfci.args import at_least, percentage, probability
from perfci.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, PerfciError
from perfci.escape import term_text
from perfci.files import atomic_write_text
from perfci.config import STALE_DAYS, load_config
from perfci.history import stale
from perfci.history.render_triage import render_records_json, render_records_table
from perfci.history.triage import STATES as TRIAGE_STATES
from perfci.history.triage import judged_false_alarms, make_record, sha_matches

DESCRIPTION = """\
A store of nightly runs of one device kind, and what they show over time.

STORE is a directory: a manifest (perfci-history.json: format, schema, device)
and runs/<time>_<suite>_<sha>_<id>.csv, one results CSV per run as `perfci run`
wrote it. One file per run, so a store can live in a git branch and two CI jobs
that each add a run never conflict; adds are atomic and refuse a run already
there, a run of another device, and a directory that is not a store.

actions:
  add STORE RUN.csv ...      append runs (the store is created by the first add)
  check STORE                change points per case (run, sha, before/after, p), each
                             case in cycles where its clock explains its nightly
                             spread, else in time (said per case)
  export STORE --otava       Apache Otava's CSV (stdout), or --out DIR: a CSV per
                             suite and otava.yaml
  plot STORE --out DIR       a trend PNG per case: medians, levels, noise band,
                             change points
  report STORE --out DIR     a static HTML site: index, a page per suite and case
  triage STORE --case KEY --sha SHA --as STATE --reason TEXT
                             record what a finding was: expected (restart the
                             case's pooled baseline at SHA), invalid (a false
                             alarm), acknowledged, fixed; --list shows them
  stale STORE ... [--days N] the suites whose device stopped reporting (exit 1)
  canary STORE ...           the nightly canary's record per device: how often compare
                             called its unchanged twin changed (false alarms) and how
                             often compare and confirm found its planted slowdown
                             (power), night by night, with Wilson intervals; beside
                             it, the false alarms of real nights as the team judged
                             them (triage --as invalid)

Judge tonight against the store's last K nights with
`perfci compare STORE cur.csv --nights K`.
"""

EPILOG = """\
exit codes:
  0  done (check: whether or not it found changes, unless --fail-recent; plot/report: also
     when a case's trend could not be drawn, which is a warning on stderr and on its page)
  1  check --fail-recent N: a case became slower within its last N runs; stale: some suite
     has had no night for more than N days
  2  bad input: a bad CSV, a foreign or corrupt store, another device, a run already there

examples:
  perfci history add perf-history/ decode.csv prefill.csv
  perfci history check perf-history/ --format json
  perfci compare perf-history/ cur.csv --nights 5
  perfci history report perf-history/ --out site/
  perfci history export perf-history/ --otava --out otava/
  perfci history triage perf-history/h200 --case 'matmul_tiled 16x* bf16' --sha 1a2b3c4 \
      --as expected --reason "bigger tile: prefill +9%, decode -4%" --link https://github.com/o/r/pull/7
  perfci history triage perf-history/h200 --list --format json
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("history", help="a store of nightly runs: add, change points, export, plots, report",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(handler=lambda args: _usage(p))
    actions = p.add_subparsers(dest="history_command", metavar="ACTION", parser_class=type(p))

    a = actions.add_parser("add", help="append runs to STORE (created when new)",
                           description="Append one or more results CSVs to STORE. Every file is checked "
                                       "first; nothing is written unless all of them can go in.")
    a.add_argument("store", metavar="STORE")
    a.add_argument("runs", nargs="+", metavar="RUN.csv")
    a.set_defaults(handler=add_main)

    c = actions.add_parser("check", help="change points of every case",
                           description="List each case's shifts: binary segmentation of each run's level (the mean "
                                       "of its fastest half of repeats), a permutation bound, a minimum segment "
                                       "length.")
    c.add_argument("store", metavar="STORE")
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.add_argument("--alpha", type=probability, default=0.01,
                   help="permutation p-value a change needs, per case (default 0.01)")
    c.add_argument("--min-segment", type=at_least(2, "a segment needs at least 2 runs"), default=3, metavar="N",
                   help="runs on each side of a change (default 3: a lone spike is never one)")
    c.add_argument("--min-change", type=percentage, default=1.0, metavar="PCT",
                   help="do not report shifts below PCT%% (default 1)")
    c.add_argument("--space", choices=("auto", "time"), default="auto",
                   help="auto (default): each case in cycles where its clock explains its nightly spread better "
                        "than time, else in time (compare's rule, said per case); time: every case in time")
    c.add_argument("--fail-recent", type=at_least(1, "count at least the newest run"), metavar="N",
                   help="exit 1 when a change made a case slower within its last N runs (a change needs "
                        "--min-segment runs after it to be found, so N below that never fails)")
    c.set_defaults(handler=check_main)

    e = actions.add_parser("export", help="export the store (Apache Otava's CSV)")
    e.add_argument("store", metavar="STORE")
    e.add_argument("--otava", action="store_true", required=True, help="Otava's CSV (the one format so far)")
    e.add_argument("--out", metavar="DIR", help="write DIR/<suite>.csv and DIR/otava.yaml (default: one CSV "
                                                "to stdout)")
    e.add_argument("--suite", help="only this suite (needed on stdout when the store holds several)")
    e.set_defaults(handler=export_main)

    k = actions.add_parser("canary", help="the nightly canary's false-alarm rate and power per device",
                           description="What perfci can resolve on each store's device: every night `perfci "
                                       "nightly` measured its canary (a GEMM and a twin with a planted "
                                       "slowdown), whether compare called the unchanged twin changed and "
                                       "whether compare and confirm's paired statistic found the plant; the "
                                       "running rates with Wilson intervals. Beside them, the false alarms of "
                                       "the store's real nights as the team judged them (`perfci history "
                                       "triage --as invalid`), with a Wilson interval.")
    k.add_argument("stores", nargs="+", metavar="STORE", help="history stores, one per device")
    k.add_argument("--format", choices=("table", "json"), default="table")
    k.add_argument("--confidence", type=probability, default=0.95, help="of the Wilson intervals (default 0.95)")
    k.set_defaults(handler=canary_main)

    t = actions.add_parser("triage", help="record what a finding was (expected, invalid, acknowledged, fixed)",
                           description="One record per call, a small JSON file of its own in STORE/triage/ (two "
                                       "writers never conflict, in a directory or a git branch). CASE: a "
                                       "'kernel shape dtype' key, a glob over it, or suite:NAME. expected: "
                                       "the pooled baseline of those cases restarts at SHA; invalid: a false "
                                       "alarm, counted by `perfci history canary`; acknowledged: reported "
                                       "under its own heading; fixed: the next green night says the issue "
                                       "can close.")
    t.add_argument("store", metavar="STORE")
    t.add_argument("--list", action="store_true", help="print the store's records instead of adding one")
    t.add_argument("--format", choices=("table", "json"), default="table", help="of --list")
    t.add_argument("--case", metavar="KEY", help="'kernel shape dtype', a glob over it, or suite:NAME")
    t.add_argument("--sha", metavar="SHA", help="the commit the finding is about (7-40 hex digits)")
    t.add_argument("--as", dest="state", choices=TRIAGE_STATES, metavar="STATE",
                   help=f"one of {', '.join(TRIAGE_STATES)}")
    t.add_argument("--reason", metavar="TEXT", help="why (required)")
    t.add_argument("--link", metavar="URL", default="", help="the issue or pull request")
    t.add_argument("--who", metavar="NAME", help="who decided (default: $GITHUB_ACTOR, else the user name)")
    t.set_defaults(handler=triage_main)

    w = actions.add_parser("stale", help="suites whose device stopped reporting (no night for N days)",
                           description="Per store (one device each) and suite: the newest night and its age. "
                                       "Exit 1 when some suite has had no night for more than N days: a runner "
                                       "down is noticed by nobody otherwise.")
    w.add_argument("stores", nargs="+", metavar="STORE")
    w.add_argument("--days", type=at_least(1, "a device is stale after at least one day"), metavar="N",
                   help=f"stale after N days without a night (default: [tool.perfci] stale_days, else {STALE_DAYS})")
    w.add_argument("--format", choices=("table", "markdown", "json"), default="table",
                   help="markdown: a table for a job summary, every name escaped")
    w.set_defaults(handler=stale_main)

    for name, what in (("plot", "a trend PNG per case"), ("report", "a static HTML site with the trends")):
        q = actions.add_parser(name, help=f"write {what} into DIR")
        q.add_argument("store", metavar="STORE")
        q.add_argument("--out", metavar="DIR", required=True)
        q.add_argument("--filter", metavar="TEXT", help="only cases whose 'kernel shape dtype' contains TEXT")
        q.add_argument("--space", choices=("auto", "time"), default="auto",
                       help="the space each case is drawn in, as `history check --space`")
        q.set_defaults(handler=plot_main if name == "plot" else report_main)


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def add_main(args) -> int:
    from perfci.history.store import add_runs, run_files

    infos = add_runs(args.store, args.runs)
    total = len(run_files(args.store))
    for path, info in zip(args.runs, infos):
        print(f"added {path} as runs/{info.run_id}.csv: suite {info.suite or '-'}, sha {info.short_sha}, "
              f"{info.timestamp}, {info.device_name} ({info.arch}), driver {info.driver or '?'}, "
              f"{info.runtime or '?'}, torch {info.torch or '?'}, triton {info.triton or '?'}")
    print(f"{args.store}: {total} run(s)")
    return EXIT_OK


def check_main(args) -> int:
    from perfci.history.changepoints import ChangeOptions
    from perfci.history.check import check, render_json, render_table
    from perfci.history.store import load

    opts = ChangeOptions(alpha=args.alpha, min_segment=args.min_segment, min_change_pct=args.min_change)
    result = check(load(args.store), opts, args.space)
    sys.stdout.write((render_json if args.format == "json" else render_table)(result))
    if args.fail_recent is None:
        return EXIT_OK
    from perfci.errors import EXIT_REGRESSION
    from perfci.history.check import recent_slowdowns

    slow = recent_slowdowns(result, args.fail_recent)
    if not slow:
        return EXIT_OK
    named = ", ".join(f"{r['kernel']} {r['shape']} {r['dtype']} {r['change_pct']:+.1f}% at {r['sha'][:12] or '?'}"
                      for r in slow[:3])
    print(term_text(f"perfci history check: {len(slow)} case(s) slower within their last {args.fail_recent} runs: "
                    f"{named}" + (f" and {len(slow) - 3} more" if len(slow) > 3 else "")), file=sys.stderr)
    return EXIT_REGRESSION


def export_main(args) -> int:
    from perfci.history.otava import otava_table, otava_tests, otava_yaml
    from perfci.history.store import load

    history = load(args.store)
    suites = history.suites
    if args.suite is not None:
        if args.suite not in suites:
            raise PerfciError(f"--suite {args.suite}: {args.store} has no run of it "
                              f"(suites: {', '.join(suites) or 'none'})")
        suites = (args.suite,)
    if not suites:
        raise PerfciError(f"{args.store}: the store has no runs yet; nothing to export")
    tables = [otava_table(history.runs, s) for s in suites]
    for t in tables:
        if t.left_out:
            names = ", ".join(" ".join(k) for k in t.left_out[:3]) + (" ..." if len(t.left_out) > 3 else "")
            print(f"perfci history export: {t.suite}: {len(t.left_out)} case(s) left out, not ok in every run "
                  f"(Otava needs a value in every row): {names}", file=sys.stderr)
    if args.out is None:
        if len(tables) > 1:
            raise PerfciError(f"{args.store} holds suites {', '.join(suites)}: Otava reads one test per CSV; "
                              f"give --suite NAME, or --out DIR for all of them")
        sys.stdout.write(tables[0].csv_text)
        return EXIT_OK
    out = Path(args.out)
    tests = otava_tests(tables)
    for test in tests:  # a plain file name: the CSV stays in DIR whatever the suite is called
        atomic_write_text(out / test.file, test.table.csv_text)
    atomic_write_text(out / "otava.yaml", otava_yaml(tests))
    print(f"wrote {', '.join(str(out / t.file) for t in tests)} and {out / 'otava.yaml'} "
          f"({sum(t.n_runs for t in tables)} runs); then: cd {out} && otava analyze --config-file otava.yaml "
          + " ".join(t.name for t in tests))
    return EXIT_OK


def _checks(args):
    from perfci.history.check import check
    from perfci.history.store import load

    history = load(args.store)
    result = check(history, rule=args.space)
    cases = [c for c in result.cases if not args.filter or args.filter in c.series.label]
    if not cases:
        raise PerfciError(f"{args.store}: no case to draw" + (f" matches --filter {args.filter!r}"
                                                               if args.filter else " (the store has no ok run)"))
    return history, cases


def _write_pngs(history, cases, folder: Path, records=()) -> dict[str, str]:
    """Write each case's trend (perfci.history.trends); a case whose plot fails is a warning on stderr."""
    from perfci.history.trends import write_trends

    drawn = write_trends(history, cases, folder, records)
    for warning in drawn.warnings.values():
        print(f"perfci history: warning: {warning}", file=sys.stderr)
    return drawn.warnings


def plot_main(args) -> int:
    history, cases = _checks(args)
    failed = _write_pngs(history, cases, Path(args.out))
    print(f"wrote {len(cases) - len(failed)} trend PNG(s) into {args.out}"
          + (f"; {len(failed)} could not be drawn (warnings above)" if failed else ""))
    return EXIT_OK


def report_main(args) -> int:
    from perfci.history.canary import rates as canary_rates  # numpy, through the statistics: not at --help
    from perfci.history.report import case_html, case_slug, index_html, suite_file, suite_html, triage_html
    from perfci.history.store import load_canaries, load_triage

    history, cases = _checks(args)
    records = load_triage(args.store)
    out = Path(args.out)
    failed = _write_pngs(history, cases, out / "img", records)
    for case in cases:
        slug = case_slug(case.series)
        atomic_write_text(out / "cases" / f"{slug}.html", case_html(history, case, failed.get(slug, ""), records))
    for suite in history.suites:
        atomic_write_text(out / suite_file(suite), suite_html(history, suite, cases, failed))
    atomic_write_text(out / "index.html", index_html(history, cases, failed))
    canaries = load_canaries(args.store)
    team = _team_false_alarms(history, records, canaries, 0.95)
    lines = [f"real nights, as the team judged them: {team.words()} (perfci history triage --as invalid)"]
    lines += [f"the canary's twin: {canary_rates(canaries).false_alarm.words()}" if canaries else "no canary night yet"]
    atomic_write_text(out / "triage.html", triage_html(history, records, lines))
    print(f"wrote {out / 'index.html'}: {len(history.suites)} suite page(s), {len(cases)} case page(s), triage.html"
          + (f"; {len(failed)} trend(s) could not be drawn (warnings above and on their pages)" if failed else ""))
    return EXIT_OK


def _team_false_alarms(history, records, canaries, confidence: float):
    from perfci.history.canary import counted_rate  # numpy, through the statistics: not at --help

    """The false alarms of the store's real nights as the team judged them (``invalid`` records), with a Wilson interval."""
    hits, n = judged_false_alarms(records, [(r.info.run_id, r.info.suite, r.info.git_sha,
                                             frozenset(row.key for row in r.table.rows)) for r in history.runs],
                                  {c.run_id for c in canaries})
    return counted_rate("false alarms", hits, n, confidence)


def canary_main(args) -> int:
    from perfci.history.canary import render_json as canary_json  # numpy: not at --help
    from perfci.history.canary import render_table as canary_table
    from perfci.history.store import load, load_canaries, load_triage

    stores, team = [], []
    for store in args.stores:
        history = load(store)
        m = history.manifest
        canaries = load_canaries(store)
        stores.append((store, f"{m.device_name} ({m.arch})", canaries))
        team.append(_team_false_alarms(history, load_triage(store), canaries, args.confidence))
    if args.format == "json":
        sys.stdout.write(canary_json(stores, args.confidence, team))
    else:
        sys.stdout.write("\n".join(canary_table(device, store, nights, args.confidence, rate)
                                   for (store, device, nights), rate in zip(stores, team)))
    return EXIT_OK


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container user with no name: the record says "?"
        return "?"


def triage_main(args) -> int:
    from perfci.history.store import add_triage, load, load_triage, read_manifest  # numpy: not at --help

    if args.list:
        given = [f"--{n}" for n in ("case", "sha", "reason") if getattr(args, n)] + (["--as"] if args.state else [])
        if given:
            raise PerfciError(f"perfci history triage --list: {', '.join(given)} add a record; give them without --list")
        read_manifest(args.store)
        records = load_triage(args.store)
        sys.stdout.write((render_records_json if args.format == "json" else render_records_table)(records))
        return EXIT_OK
    missing = [f"--{n}" for n in ("case", "sha", "reason") if not getattr(args, n)] + ([] if args.state else ["--as"])
    if missing:
        raise PerfciError(f"perfci history triage: give {', '.join(missing)} (or --list)")
    who = args.who or os.environ.get("GITHUB_ACTOR") or _user()
    try:
        record = make_record(args.case, args.sha, args.state, args.reason, who, args.link)
    except ValueError as err:
        raise PerfciError(f"perfci history triage: {err}") from None
    record = add_triage(args.store, record)
    print(f"recorded {record.state} for {record.case} at {record.sha[:12]} by {record.who} in "
          f"{Path(args.store) / 'triage' / (record.record_id + '.json')}: {record.reason}")
    history = load(args.store)
    named = {row.key for r in history.runs for row in r.table.rows if record.names(row.key, r.info.suite)}
    at = any(sha_matches(record.sha, r.info.git_sha) for r in history.runs)
    if not named or not at:  # kept (the case or night may come later), but a typo should not pass unseen
        print(f"perfci history triage: warning: {'no case' if not named else f'{len(named)} case(s)'} of "
              f"{args.store} named by {record.case!r}" + ("" if at else f"; no night at {record.sha[:12]} (an "
              f"`expected` is then placed by git ancestry where the nightly runs)"), file=sys.stderr)
    return EXIT_OK


def stale_main(args) -> int:
    from perfci.history.store import load, load_canaries  # numpy: not at --help

    days = args.days if args.days is not None else load_config().stale_days
    now = datetime.now(timezone.utc)
    ages = []
    for store in args.stores:
        history = load(store)
        m = history.manifest
        canaries = {c.run_id for c in load_canaries(store)}  # the canary rides with a night: not a suite of its own
        ages += stale.suite_ages(store, f"{m.device_name} ({m.arch})",
                                 [(r.info.run_id, r.info.when, r.info.suite, r.info.git_sha) for r in history.runs],
                                 now, days, canaries)
    render = {"json": stale.render_json, "markdown": stale.render_markdown}.get(args.format, stale.render_table)
    sys.stdout.write(render(ages, days))
    late = [a for a in ages if a.stale]
    if late:
        print(term_text(f"perfci history stale: {len(late)} suite(s) with no night for more than {days} day(s): "
                        + ", ".join(f"{a.device} {a.suite} (last {a.last[:10]})" for a in late[:5])), file=sys.stderr)
        return EXIT_REGRESSION
    return EXIT_OK
