"""Stages 2-7 of a night: judge, gate, confirm, bisect, record, plot.

A stage takes what the earlier stages produced as arguments (tonight's results
as read once, the history store as loaded once, compare's
:class:`~perfci.nightly.state.Judgement`) and returns its own typed result in a
:class:`~perfci.nightly.state.StageOutcome`; :mod:`perfci.nightly.night` runs
them in order, keeps their results, and turns what they raise into a failed
stage (``PerfciError``: bad input; anything else: an internal error; an
:class:`~perfci.nightly.state.Unfinished` keeps the part of the result it
carries). What the results mean is decided in :mod:`perfci.nightly.core`.
"""
from __future__ import annotations

import argparse
import json
import shlex
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import ContextManager, Sequence

from perfci import git
from perfci.benchcmd import run_command
# explain, render and check are called through their modules, so a function replaced where it is
# defined (as the report-step tests replace each) is replaced here too.
from perfci.compare import explain, render
from perfci.compare.comparison import CompareOptions
from perfci.compare.identity import with_identity
from perfci.compare.inputs import check_same_device, read_any_cells, read_profile
from perfci.compare.store import pooled_compare
from perfci.compare.verdicts import compare
from perfci.confirm import DEFAULT_BUDGET_S
from perfci.errors import PerfciError, internal_error_line
from perfci.files import atomic_write_text
from perfci.history import check
from perfci.history.model import Run
from perfci.history.store import MANIFEST, add_canary, add_read_runs, add_runs, run_files
from perfci.history.trends import write_trends
from perfci.model import ResultTable, column_mode
from perfci.nightly import acked, core, toolchain, triaged
from perfci.nightly.bench import argv
from perfci.nightly.children import ChildCrash, expect, parse_json, perfci_argv, run_perfci
from perfci.nightly.lastgood import last_good
from perfci.nightly.loaded import Store
from perfci.nightly.state import (CanaryResult, Confirmation, Judgement, Log, NightConfig, Project, Sources,
                                  StageOutcome, TonightResult, Unfinished)
from perfci.verdict import FLAGGED_SUITE_WIDE, Verdict, no_common_case

BISECT_CSV = "perfci-nightly-bisect.csv"  # the bench's results file, relative to each commit's tree
CONFIRM_CSV = "perfci-nightly-confirm.csv"  # --bench: a confirm run's results, relative to each worktree
CHECKOUT_LOCK = "perfci-nightly.lock"  # in the repository's common git dir, shared by its worktrees


def checkout_lock(repo_root: Path | None) -> ContextManager[None]:
    """Hold the checkout for confirm or bisect: one of them at a time per repository.

    Each keeps a journal of one session in the repository (to put it back after a
    kill), and a second session finding it refuses, so two nights sharing a
    checkout (two suites side by side, a Slurm verdict job per suite) would fail
    one confirm or bisect as bad input. They wait for each other instead.
    """
    return git.common_dir_lock(repo_root, CHECKOUT_LOCK,
                               f"perfci nightly: waiting for another perfci nightly's confirm or bisect "
                               f"in {repo_root}")


# --------------------------------------------------------------------------- 2. baseline (compare)


def baseline(cfg: NightConfig, p: Project, t: TonightResult, sources: Sources, store: Store,
             log: Log) -> StageOutcome[Judgement]:
    """Stage baseline: compare's verdicts on tonight against the store's nights or the baseline CSV."""
    profile = read_profile(sources.profile) if sources.profile else None
    nights = _store_nights(p.suite, t, store)
    plan = core.baseline_plan(len(nights), sources.baseline is not None)
    if plan == "first":
        return StageOutcome(core.OK, f"first night on {t.device}: no history night of suite {p.suite} and no "
                                     f"--baseline", Judgement("nothing (first night)", first_night=True))
    if plan == "pooled":
        history = store.history()
        result = pooled_compare(history, t.table, t.cells, store.triage(), profile, CompareOptions(), cfg.nights)
        result = with_identity(result, None, t.table)
        words = f"history {store.path}: last {min(cfg.nights, len(nights))} of {len(nights)} nights"
        good, note = last_good([(r.info.run_id, r.info.git_sha) for r in nights], store.verdicts(),
                                    (r.sha for r in store.triage()))
        log.notes += [note] if note else []
        good_sha = core.strip_dirty(nights[good].info.git_sha)
        newest, newest_env = nights[-1].table, toolchain.of_run(nights[-1].info)
    else:
        if plan == "csv":
            path = sources.baseline or ""
            newest, cells = read_any_cells(path)  # cells None: pytest-benchmark JSON, no commit nor toolchain
            good_sha = column_mode(cells or (), "git_sha", skip_empty=True)
            newest_env = toolchain.environment(cells) if cells is not None else None
        else:
            path = str(Path(store.path or "") / "runs" / f"{nights[-1].info.run_id}.csv")
            newest, good_sha, newest_env = nights[-1].table, nights[-1].info.git_sha, toolchain.of_run(nights[-1].info)
        check_same_device(newest, t.table)
        # Against the store's one night, as the pooled compare from two on: `unchanged` only within
        # ±1%, the rest inside the floor goes to confirm (docs/compare.md, Which rule each command uses).
        options = CompareOptions(unchanged_within_pct=core.ONE_NIGHT_UNCHANGED_WITHIN_PCT) if plan == "night" \
            else None
        result = with_identity(compare(newest, t.table, profile, options), newest, t.table)
        words = (f"--baseline {path}" if plan == "csv" else
                 f"history {store.path}: its one night {nights[-1].info.run_id}")
        good_sha = core.strip_dirty(good_sha)
    # a report line only: a baseline whose columns cannot be read says nothing here
    moved = () if newest_env is None else toolchain.moved(newest_env, toolchain.environment(t.cells))
    result = _explained(log, result, newest, t)
    known = Judgement(words, good_sha=good_sha, toolchain=moved)  # what the reports say when nothing matched
    try:
        return _judged_against(cfg, p, t, store, log, profile, bool(nights), known, result)
    except (Exception, KeyboardInterrupt) as err:
        raise Unfinished(err, known) from err


def _judged_against(cfg: NightConfig, p: Project, t: TonightResult, store: Store, log: Log, profile,
                    from_store: bool, known: Judgement, result) -> StageOutcome[Judgement]:
    """The baseline stage once its comparison is made: the cases, their triage, compare.json."""
    if no_common_case(result.cases):
        raise PerfciError(f"{known.baseline} and tonight's run have no case in common (key: kernel, shape, "
                          f"dtype): nothing was compared; wrong baseline, or were the kernels renamed?")
    cases = tuple(_judged(c) for c in result.cases)
    # a store in use: tonight's cases carry its triage records (a corrupt one is bad input)
    case_triage = triaged.case_triage(store.triage(), [c.key for c in cases], p.suite) if from_store else ()
    if from_store:  # acknowledged cases judged again, against their nights since the acknowledgement
        case_triage, said = acked.judged_or_said(store.history, t.table, t.cells, case_triage, profile,
                                                 cfg.nights)
        log.warnings.extend(said)
    judged = replace(known, comparison=result, cases=cases, triage=tuple(case_triage))
    _write_compare(cfg, log, result)
    counts = Counter(c.verdict for c in cases)
    told = ", ".join(f"{k} {v}" for v, k in sorted(counts.items()))
    return StageOutcome(core.OK, f"against {known.baseline}: {told}", judged)


def _explained(log: Log, result, newest: ResultTable, t: TonightResult):
    """compare --explain's side-by-side of every regressed / improved case (a pooled baseline read from its
    newest night). A report step: when it cannot be made, the verdicts stand without it and say so."""
    try:
        return explain.with_explain(result, newest, t.table)
    except Exception as err:  # noqa: BLE001 - an explanation is never worth the night's verdict
        log.warnings.append(f"compare --explain not added to the reports: {_why(err)}")
        return result


def _why(err: BaseException) -> str:
    return err.message if isinstance(err, PerfciError) else internal_error_line(err)


def _store_nights(suite: str, t: TonightResult, store: Store) -> list[Run]:
    """This suite's runs in the store, oldest first, tonight's own left out."""
    if store.path is None:
        return []
    root = Path(store.path)
    if not root.exists() or (root.is_dir() and not (root / MANIFEST).exists()
                             and not any(not p.name.startswith(".") for p in root.iterdir())):
        return []
    history = store.history()
    m = history.manifest
    if (m.device_name, m.arch) != (t.device_name, t.arch):
        raise PerfciError(f"tonight's run is of {t.device} but {store.path} holds runs of {m.device_name} "
                          f"({m.arch}): a different device is not a regression; keep one store per device")
    mine = t.run_id
    return [r for r in history.runs if r.info.suite == suite and r.info.run_id != mine]


def _judged(c) -> core.Judged:
    ex = c.explain
    flip = c.flip
    return core.Judged(c.kernel, c.shape, c.dtype, c.verdict, c.reason, c.base_us, c.cur_us,
                       c.ratio, c.ci_low, c.ci_high,
                       ex.reading if ex is not None else "", tuple(ex.sides) if ex is not None else (),
                       tuple((f.config, f.seen_in, f.median_us) for f in flip.configs) if flip is not None else (),
                       flip.pin if flip is not None else "")


def _write_compare(cfg: NightConfig, log: Log, result) -> None:
    """compare.json and the forest plot: report steps, so whatever they meet is a warning."""
    try:
        atomic_write_text(cfg.out / "compare.json", render.render_json(result))
        log.files.append("compare.json")
    except Exception as err:  # noqa: BLE001 - the verdicts are in verdict.json whatever this meets
        log.warnings.append(f"compare.json not written: {_why(err)}")
    if any(c.verdict != Verdict.UNCHANGED and c.ratio is not None for c in result.cases):
        try:
            render.plot(result, str(cfg.out / "forest.png"))
            log.files.append("forest.png")
        except Exception as err:  # noqa: BLE001 - a picture is never worth the night's verdict
            log.warnings.append(f"forest plot not drawn: {_why(err)}")


# --------------------------------------------------------------------------- 3. gate


def gate(cfg: NightConfig, t: TonightResult, judged: Judgement | None) -> StageOutcome[core.Gate]:
    g = core.gate(t.statuses, judged.cases if judged else None, cfg.allow_missing, t.incomplete)
    return StageOutcome(core.OK, ("red: " + "; ".join(g.reasons())) if g.red
                        else "no broken, missing or unmeasured case", g)


# --------------------------------------------------------------------------- 4. confirm


def confirm(cfg: NightConfig, p: Project, t: TonightResult, j: Judgement | None, started: float,
            log: Log) -> StageOutcome[Confirmation]:
    """Stage confirm: compare's flagged cases measured again, good commit against tonight's, by perfci confirm."""
    if j is None or j.first_night or j.comparison is None or j.cases is None:
        return StageOutcome(core.SKIPPED, "nothing was judged")
    flagged = core.flagged(j.cases, j.comparison.suite.verdict)
    if not flagged:
        return StageOutcome(core.SKIPPED, "nothing to confirm: compare called no case regressed or inconclusive",
                            Confirmation(flagged))
    try:
        return _confirmed(cfg, p, t, j, started, log, flagged)
    except Unfinished:
        raise
    except (Exception, KeyboardInterrupt) as err:
        raise Unfinished(err, Confirmation(flagged)) from err


def _confirmed(cfg: NightConfig, p: Project, t: TonightResult, j: Judgement, started: float, log: Log,
               flagged: tuple[core.Key, ...]) -> StageOutcome[Confirmation]:
    assert j.comparison is not None
    if p.repo_root is None:
        return StageOutcome(core.SKIPPED, f"--repo {cfg.repo} is not a git repository", Confirmation(flagged))
    problem = core.good_sha_problem(j.good_sha, t.sha, git.commit_known(p.repo_root, j.good_sha),
                                    git.commit_known(p.repo_root, t.sha))
    if problem:
        return StageOutcome(core.SKIPPED, problem, Confirmation(flagged))
    data = render.to_dict(j.comparison)
    wanted = set(flagged)
    data["cases"] = [dict(c, verdict=c["verdict"] if c["verdict"] != Verdict.UNCHANGED else FLAGGED_SUITE_WIDE)
                     for c in data["cases"] if (c["kernel"], c["shape"], c["dtype"]) in wanted]
    flagged_path = cfg.out / "flagged.json"
    atomic_write_text(flagged_path, json.dumps(data, indent=2) + "\n")
    log.files.append("flagged.json")
    # --no-common-mode: these cases were chosen because they moved, so what they share is the
    # regression itself; judged relative to each other (confirm's default) it would cancel out.
    # On a 2-GPU H200, a change that slowed most cases of a confirm session by ~20% read as
    # unchanged for those and regressed for the rest (benchmarks/results/h200-2026-12-01/group-prefill-and-stages).
    budget = _budget(cfg, started, log, "confirm", DEFAULT_BUDGET_S)
    # The night's share first: a --budget in --confirm-args comes later and wins.
    words = ["confirm", j.good_sha, t.sha, *_confirm_source(cfg, p, flagged_path.resolve()), "--no-common-mode",
             "--format", "json", "-C", str(p.where), *(_build_words(p) or ["--build", ""]),
             "--budget", f"{budget:.0f}", *_timeout_words(cfg), *cfg.confirm_args]
    if cfg.bench is not None:  # the bench command goes last, after '--'
        words += ["--", *argv(cfg.bench, CONFIRM_CSV, p.suite, cases=flagged_path.resolve(),
                              device=cfg.device, subdir=p.subdir)]
    try:
        with checkout_lock(p.repo_root):
            child = run_perfci(words, p.where)
    finally:
        _rebuild_checkout(p, log)
    expect(child, (0, 1, 3))
    report = parse_json(child)
    atomic_write_text(cfg.out / "confirm.json", child.stdout)
    log.files.append("confirm.json")
    try:
        confirmed = tuple(core.Confirmed(c["kernel"], c["shape"], c["dtype"], c["verdict"], c.get("reason", ""),
                                         c.get("ratio"), c.get("ci_low"), c.get("ci_high"), c.get("rounds", 0))
                          for c in report["cases"])
    except (KeyError, TypeError) as err:
        raise ChildCrash(f"perfci confirm's JSON report lacks {err}") from None
    try:
        suite = report["summary"]["suite"]["verdict"]
    except (KeyError, TypeError) as err:  # the cases' verdicts kept when the suite's is what is missing
        raise Unfinished(ChildCrash(f"perfci confirm's JSON report lacks {err}"),
                         Confirmation(flagged, confirmed)) from None
    counts = Counter(c.verdict for c in confirmed)
    told = ", ".join(f"{k} {v}" for v, k in sorted(counts.items()))
    return StageOutcome(core.OK, f"{j.good_sha[:12]} -> {t.sha[:12]}: {told} "
                                 f"({report['summary'].get('rounds', '?')} rounds)",
                        Confirmation(flagged, confirmed, suite, core.confirm_floor(report)))


def _budget(cfg: NightConfig, started: float, log: Log, stage: str, default_s: float) -> float:
    """The stage's seconds out of the night's ``--budget`` (:func:`core.stage_budget`), said in the summary."""
    elapsed = time.monotonic() - started
    seconds = core.stage_budget(stage, cfg.budget_s, elapsed, cfg.bisect, default_s)
    log.notes.append(f"{stage} given {seconds:.0f} s of the night's {cfg.budget_s:.0f} s budget, "
                     f"{elapsed:.0f} s in")
    return seconds


def _confirm_source(cfg: NightConfig, p: Project, flagged: Path) -> list[str]:
    """What confirm measures: the suite's flagged cases in warm workers, or the night's --bench
    command narrowed to them (its results CSV, CONFIRM_CSV, in each worktree)."""
    if cfg.bench is None:
        return ["--suite", p.suite_word, "--cases", str(flagged), "--device", cfg.device]
    return ["--results", CONFIRM_CSV]


def _timeout_words(cfg: NightConfig) -> list[str]:
    """``--timeout S`` for confirm's runs of the night's --bench (before --confirm-args, which may
    override it). Without --bench, confirm measures in warm workers whose cases keep their own limit,
    cut at the end of the --budget it is given."""
    return [] if cfg.bench is None else ["--timeout", f"{cfg.bench_timeout_s:g}"]


def _build_words(p: Project) -> list[str]:
    """``--build CMD --build-timeout S`` for confirm and bisect, run in the project root of each worktree."""
    if p.build is None:
        return []
    return ["--build", f"cd {shlex.quote(p.subdir)} && {p.build}" if p.subdir else p.build,
            "--build-timeout", f"{p.build_timeout:g}"]


def _rebuild_checkout(p: Project, log: Log) -> None:
    """Build tonight's checkout again after confirm or bisect built other revisions.

    bisect (``--jobs 1``) builds each commit in the checkout itself, and a build
    that installs (``pip install -e .``) points the environment at the worktree it
    ran in, which confirm then removes: either way the environment would be left
    with another revision's build. A failure here is a note, not the night's verdict.
    """
    if p.build is None or p.where is None:
        return
    try:
        built = run_command(p.build, p.where, timeout=p.build_timeout)
    except OSError as err:
        log.notes.append(f"could not build tonight's checkout again after confirm/bisect: {err}")
        return
    if not built.ok:
        log.notes.append(f"building tonight's checkout again after confirm/bisect failed: "
                       f"{built.failure_reason('build', '[tool.perfci] build_timeout')}")


# --------------------------------------------------------------------------- 5. bisect


def bisect(cfg: NightConfig, p: Project, t: TonightResult, j: Judgement | None, confirmation: Confirmation,
           started: float, log: Log) -> StageOutcome[core.Culprit | str]:
    """Stage bisect: the first bad commit of the worst confirmed case, by perfci bisect (no result: none found;
    its own GOOD -> BAD rounds found no step past confirm's floor, or a faster BAD: its words)."""
    confirmed = confirmation.confirmed or ()
    regressed = any(c.verdict == Verdict.REGRESSED for c in confirmed) or confirmation.suite == Verdict.REGRESSED
    if not regressed:
        return StageOutcome(core.SKIPPED, "no confirmed regression")
    if not cfg.bisect:
        return StageOutcome(core.SKIPPED, "--no-bisect")
    target = core.worst(confirmed) or max(confirmed, key=lambda c: (c.ratio or 0.0, c.key), default=None)
    if target is None:
        return StageOutcome(core.SKIPPED, "no case to bisect")
    kernel, shape, dtype = target.key
    case_json = json.dumps({"cases": [{"kernel": kernel, "shape": shape, "dtype": dtype,
                                       "verdict": Verdict.REGRESSED}]}) + "\n"
    atomic_write_text(cfg.out / "bisect-case.json", case_json)
    case = f"{kernel},{shape},{dtype}" if "," not in kernel else f"{kernel} {shape} {dtype}"
    budget = _budget(cfg, started, log, "bisect", 0.0)
    good_sha = j.good_sha if j is not None else ""
    common = ["bisect", good_sha, t.sha, "--jobs", str(cfg.jobs), "--format", "json", "--case", case,
              "--total-budget", f"{budget:.0f}",
              "--plot", str((cfg.out / "bisect.png").resolve()), *_build_words(p),
              "--timeout", f"{cfg.bench_timeout_s:g}",  # one floor a night: confirm's (--bisect-args may override)
              *(["--min-effect", f"{confirmation.min_effect_pct:g}"] if confirmation.min_effect_pct else []),
              *cfg.bisect_args]
    warm = _warm_bench_args(cfg.bench_args)
    if cfg.bench is None and warm is not None:
        # The suite's case from a warm worker per commit (perfci.measure.sides): no interpreter,
        # torch import or autotuning per run. Run in the project root, where the suite is found.
        words = [*common, "-C", str(p.where), "--suite", p.suite_word, "--device", cfg.device, *warm]
        try:
            with checkout_lock(p.repo_root):
                child = run_perfci(words, p.where)
        finally:
            _rebuild_checkout(p, log)
    else:
        with tempfile.TemporaryDirectory(prefix="perfci-nightly-") as tmp:
            case_file = Path(tmp) / "case.json"  # outside the repository: bisect stashes untracked files
            case_file.write_text(case_json, encoding="utf-8")
            bench, results = _bisect_bench(cfg, p, case_file)
            words = [*common, "-C", str(p.repo_root), "--csv-column", "median_us", "--csv-file", results,
                     "--", *bench]
            leftover = p.repo_root / results
            there = leftover.exists()
            try:
                with checkout_lock(p.repo_root):
                    child = run_perfci(words, p.repo_root)
            finally:
                if not there:  # the bench's results file at the last commit measured in this tree
                    leftover.unlink(missing_ok=True)
                _rebuild_checkout(p, log)
    code = expect(child, (0, 2, 3))
    try:
        report = parse_json(child)
    except ChildCrash:
        if code == 2:  # a refusal, not a report
            raise PerfciError(f"perfci bisect: {child.error_line() or 'refused its input'}") from None
        raise
    atomic_write_text(cfg.out / "bisect.json", child.stdout)
    log.files.append("bisect.json")
    if (cfg.out / "bisect.png").is_file():
        log.files.append("bisect.png")
    label = " ".join(target.key)
    if report.get("status") in ("no-difference", "swapped"):
        denied = f"found {report['status']}: {report.get('message', '')}".strip()
        return StageOutcome(core.OK, f"{label}: no culprit ({denied})", denied)
    if report.get("status") != "culprit" or not isinstance(report.get("culprit"), dict):
        return StageOutcome(core.OK, f"{label}: no culprit ({report.get('status', '?')}: "
                                     f"{report.get('message', '')})")
    c = report["culprit"]
    sha = str(c.get("sha", ""))
    diffstat = (str(c.get("diffstat") or "")
                or (git.query(p.repo_root, "show", "--stat", "--format=", sha) or ""))
    culprit = core.Culprit(sha, str(c.get("subject", "")), diffstat)
    return StageOutcome(core.OK, f"{label}: first bad commit {sha[:12]} {culprit.subject!r}", culprit)


def _warm_bench_args(words: Sequence[str]) -> list[str] | None:
    """``--bench-args`` as options of ``bisect --suite`` (``--repeats``, ``--iters``), or None when they hold
    any other option of ``perfci run``: then bisect measures with a ``perfci run`` per run, as they ask."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--repeats")
    parser.add_argument("--iters")
    try:
        known, rest = parser.parse_known_args(list(words))
    except SystemExit:  # argparse's way to say a value is missing: a perfci run per run says it properly
        return None
    if rest:
        return None
    return [w for flag, value in (("--repeats", known.repeats), ("--iters", known.iters)) if value is not None
            for w in (flag, value)]


def _bisect_bench(cfg: NightConfig, p: Project, case_file: Path) -> tuple[list[str], str]:
    """The command bisect measures each commit with, and its results file relative to the tree's top.

    bisect runs it at the top of each commit's tree; perfci runs in the project
    root (``p.subdir`` below the top), so that every commit is measured with
    its own [tool.perfci], suites and kernels.
    """
    if cfg.bench is not None:
        return argv(cfg.bench, BISECT_CSV, p.suite, cases=case_file, device=cfg.device,
                    subdir=p.subdir), BISECT_CSV
    run = perfci_argv(["run", p.suite_word, "--cases", str(case_file), "--out", BISECT_CSV,
                       "--device", cfg.device, "--format", "none", *cfg.bench_args])
    if not p.subdir:
        return run, BISECT_CSV
    # One word with spaces is a shell line to bisect (perfci.benchcmd.BenchSpec.argv).
    return [f"cd {shlex.quote(p.subdir)} && exec {shlex.join(run)}"], f"{p.subdir}/{BISECT_CSV}"


# --------------------------------------------------------------------------- 6. history


def history(t: TonightResult, store: Store, canary: CanaryResult | None, log: Log) -> StageOutcome[bool]:
    """Stage history: tonight's run (and its canary) added to the store, and to ``store`` as loaded.
    Its result: whether tonight's run was added."""
    if store.path is None:
        if canary is not None:
            log.warnings.append("canary not recorded: no history store (its rates need one)")
        return StageOutcome(core.SKIPPED, "no --history store given (nor [tool.perfci] history)", False)
    path = store.path
    run_id = t.run_id
    if (Path(path) / "runs" / f"{run_id}.csv").exists():
        return StageOutcome(core.SKIPPED, f"tonight's run is already in {path} as runs/{run_id}.csv"
                            + _record_canary(path, canary, log), False)
    info = add_read_runs(path, [(str(t.path), t.text, t.info)])[0]
    # the store as loaded, and tonight's run as it now holds it
    store.added(Run(info, replace(t.table, path=str(Path(path) / "runs" / f"{run_id}.csv"))))
    return StageOutcome(core.OK, f"appended to {path} as runs/{run_id}.csv ({len(run_files(path))} runs)"
                        + _record_canary(path, canary, log), True)


def _record_canary(path: str, canary: CanaryResult | None, log: Log) -> str:
    """Tonight's canary run and its record into the store, beside the night's run; never the stage's outcome."""
    if canary is None:
        return ""
    try:
        add_runs(path, [str(canary.csv)])
        add_canary(path, canary.night)
    except Exception as err:  # noqa: BLE001 - the canary informs; it never fails the night's record
        log.warnings.append(f"canary not recorded in {path}: {_why(err)}")
        return ""
    return f"; the canary as runs/{canary.night.run_id}.csv and canary/{canary.night.run_id}.json"


# --------------------------------------------------------------------------- 7. report (the plots)


def trends(cfg: NightConfig, store: Store, flagged: Sequence[core.Key], log: Log) -> StageOutcome[tuple[str, ...]]:
    """Trend PNGs of the flagged cases from the store (tonight included), for the issue; its result: their names.

    A report step: a case whose trend cannot be drawn is a warning (and this stage,
    failing as a whole, is one too: :data:`perfci.nightly.core.INFORMING_STAGES`).
    """
    wanted = set(flagged)
    if not wanted or store.path is None or not (Path(store.path) / MANIFEST).is_file():
        return StageOutcome(core.OK, "no trend to draw", ())
    hist = store.history()
    cases = [c for c in check.check(hist).cases if c.series.key in wanted and len(c.series.points) >= 2]
    drawn = write_trends(hist, cases, cfg.out / "trends", store.triage())
    log.files.extend(f"trends/{name}" for name in drawn.written)
    log.warnings.extend(drawn.warnings.values())
    missed = f", {len(drawn.warnings)} not drawn (see the warnings)" if drawn.warnings else ""
    return StageOutcome(core.OK, f"{len(drawn.written)} trend plot(s){missed}", tuple(drawn.written))
