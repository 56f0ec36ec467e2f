"""Stage 1, tonight's results: shards merged, a run taken, or the suite measured; into DIR/run.csv.

The stage is four steps, which :mod:`perfci.nightly.night` runs in order: the
checkout (:func:`checkout`), the project and suite (:func:`project`), tonight's
results (:func:`tonight`) and what they are judged by (:func:`sources`).
"""
from __future__ import annotations

import csv
import glob
import io
import os
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from perfci import git
from perfci.benchcmd import run_command
from perfci.compare.inputs import read_profile
from perfci.config import ProjectConfig, load_config
from perfci.errors import EXIT_REGRESSION, PerfciError
from perfci.files import atomic_write_text
from perfci.merge.core import ShardFile, merge_files, merge_shards, render_merged
from perfci.model import ResultTable, column_mode
from perfci.nightly import core
from perfci.nightly.bench import measure
from perfci.nightly.children import ChildCrash, expect, run_perfci
from perfci.nightly.state import Log, NightConfig, Project, Sources, StageOutcome, TonightResult
from perfci.results import read_results_cells, read_results_text
from perfci.suites import load_suite, suite_is_a_path


# --------------------------------------------------------------------------- 1. tonight


def checkout(cfg: NightConfig) -> Project:
    """The git checkout at --repo and its HEAD (what the compile diff still needs when the rest fails)."""
    if not cfg.repo.is_dir():
        raise PerfciError(f"--repo {cfg.repo}: no such directory")
    top = git.toplevel(cfg.repo)
    return Project(top, head=(git.query(top, "rev-parse", "HEAD") or "") if top else "")


def project(cfg: NightConfig, found: Project) -> tuple[Project, ProjectConfig]:
    """``found`` (:func:`checkout`) with the project root, the build and the suite; and the configuration in force.

    The root is where perfci runs, so every perfci command it starts (tonight's
    run, confirm, bisect's bench) reads the same [tool.perfci], suites and kernel
    modules, and in a worktree those of the revision it measures. A root outside
    the repository (no configuration: perfci's own checkout stands in) is
    replaced by the repository's top.
    """
    top = found.repo_root
    config = load_config(cfg.repo)
    where = config.root
    if top is not None and not where.resolve().is_relative_to(top.resolve()):
        where = top
    where = where.resolve()
    subdir = where.relative_to(top.resolve()).as_posix() if top is not None and where != top.resolve() else ""
    build = cfg.build if cfg.build is not None else config.build
    if build is not None and not build.strip():
        build = None  # --build '': no build, whatever the configuration says
    if cfg.bench is not None:
        suite = suite_word = _bench_suite_name(cfg.suite)
    else:
        suite, suite_word = load_suite(cfg.suite, where).name, _suite_word(cfg.suite, where)
    return replace(found, where=where, subdir=subdir, build=build, build_timeout=config.build_timeout, suite=suite,
                   suite_word=suite_word), config


def tonight(cfg: NightConfig, p: Project, log: Log) -> StageOutcome[TonightResult]:
    """Stage tonight: tonight's results into DIR/run.csv, read once, in the project ``p`` (:func:`project`)."""
    where = p.where
    assert where is not None
    run_path = cfg.out / "run.csv"
    incomplete, read = "", None
    if cfg.shards is not None:
        how, incomplete = _merge_shards(cfg.shards, run_path)
    elif cfg.run is not None:
        how, read = _take_run(cfg.run, run_path)
    else:
        _build(p, where, log)
        how = _run_bench(cfg, p, where, log) if cfg.bench is not None else _measure(cfg, p, where, log)
    text, table, cells = read or read_results_text(run_path)
    if table.format != "perfci":
        raise PerfciError(f"{how}: a {table.format} file; perfci nightly judges perfci results CSVs")
    suites = {c.get("suite", "") for c in cells} - {""}
    if suites and suites != {p.suite}:
        raise PerfciError(f"{how}: a run of suite {', '.join(sorted(suites))}, not of '{p.suite}'")
    log.files.append("run.csv")
    head = p.head
    if {c.get("git_sha", "") for c in cells} == {""} and head:
        text, table, cells = _fill_sha(run_path, table, cells, head)
        log.notes.append(f"tonight's run names no commit (git_sha empty); recorded as --repo's HEAD {head[:12]}")
    sha = core.strip_dirty(column_mode(cells, "git_sha")) or head
    t = TonightResult(run_path, text, table, cells, sha, incomplete)
    counts = Counter(s for _, s in t.statuses)
    told = ", ".join(f"{k} {s}" for s, k in sorted(counts.items()))
    return StageOutcome(core.OK, f"{how}: {len(t.statuses)} cases ({told}) on {t.device} at "
                                 f"{t.sha[:12] or 'unknown commit'}", t)


def _suite_word(word: str, where: Path) -> str:
    """SUITE as the children get it: a name as it is (each checkout resolves it in its own suites
    folder), a path relative to the project root when it lies inside (so a worktree reads its own
    revision's file), else absolute."""
    if not suite_is_a_path(word):
        return word
    path = Path(word).resolve()
    return path.relative_to(where).as_posix() if path.is_relative_to(where) else str(path)


def _bench_suite_name(word: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", word) or word.endswith(".toml"):
        raise PerfciError(f"SUITE {word!r}: with --bench, SUITE is the name tonight's results are recorded "
                          f"and judged under (letters, digits, _ . -), not a suite file")
    return word


def _build(p: Project, where: Path, log: Log) -> None:
    """The project's build in the checkout before tonight is measured; a failure, or a build still
    going at [tool.perfci] build_timeout, is bad input."""
    if p.build is None:
        return
    built = run_command(p.build, where, timeout=p.build_timeout)
    if built.cut_off:
        raise PerfciError(built.failure_reason(f"the build {p.build!r} in {where} at {p.head[:12] or 'HEAD'}",
                                                  "[tool.perfci] build_timeout"))
    if not built.ok:
        raise PerfciError(f"the build {p.build!r} failed in {where} at {p.head[:12] or 'HEAD'}: "
                          f"{built.failure_reason('build')}")
    log.notes.append(f"built with {p.build!r} in {where} ({built.seconds:.0f} s)")


def sources(cfg: NightConfig, config: ProjectConfig, p: Project, t: TonightResult, log: Log) -> Sources:
    """--history, --baseline and --noise-profile, else this device's entries of [tool.perfci].

    The device's label (``--device-label``, else the arch tonight's run records:
    ``sm_90``, ``gfx942``, ``cpu``) picks the store ``HISTORY/LABEL``, the
    baseline ``BASELINES/LABEL/SUITE.csv`` (when committed) and
    ``noise_profiles[LABEL]`` (or ``[ARCH]``).
    """
    arch = t.arch
    label = cfg.device_label or arch
    usable = bool(label) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", label) is not None
    store = cfg.history
    if store is None and config.history is not None and usable:
        store = str(config.history / label)
        log.notes.append(f"history store {store} ([tool.perfci] history, device {label})")
    baseline = cfg.baseline
    if baseline is None and config.baselines is not None and usable:
        committed = config.baselines / label / f"{p.suite}.csv"
        if committed.is_file():
            baseline = str(committed)
            log.notes.append(f"baseline {committed} ([tool.perfci] baselines, device {label})")
    profile = cfg.noise_profile
    if profile is None:
        chosen = config.noise_profiles.get(label) or config.noise_profiles.get(arch)
        if chosen is not None:
            read_profile(str(chosen))  # a bad profile is bad input, before anything is judged
            profile = str(chosen)
            log.notes.append(f"noise profile {chosen} ([tool.perfci] noise_profiles)")
    return Sources(store, baseline, profile)


def _merge_shards(pattern: str, out: Path) -> tuple[str, str]:
    """perfci merge; shards that lack cases (a shard missing, one cut short) are merged as they are.

    A shard job that failed must turn the night red, not void it: its cases are
    missing tonight (the gate's ``incomplete``). Everything else merge refuses
    (overlapping shards, mixed devices, commits or schemas) stays bad input.
    """
    paths = sorted(glob.glob(pattern))
    if not paths:
        # Every shard job failed, or none uploaded: nothing measured tonight, which is red (exit 1).
        raise PerfciError(f"--shards {pattern}: no file matches; no shard results arrived",
                          exit_code=EXIT_REGRESSION)
    try:
        merge_files(paths, str(out))
        return f"merged {len(paths)} shard(s) of {pattern}", ""
    except PerfciError as strict:
        files = []
        for path in paths:
            table, cells = read_results_cells(path)
            files.append(ShardFile(table=table, header=tuple(cells[0]), cells=cells))
        gap = _shard_gap(files)
        if not gap:
            raise strict
    # Without their shard labels, merge checks overlap, device, commit and schema only.
    plain = [ShardFile(table=f.table, header=f.header, cells=tuple(dict(c, shard="") for c in f.cells))
             for f in files]
    atomic_write_text(out, render_merged(merge_shards(plain)))
    return f"merged {len(paths)} shard(s) of {pattern}, incomplete: {gap}", gap


def _shard_gap(files) -> str:
    """Why complete-looking shards of one split lack cases ("" when that is not the problem)."""
    labels, selections, rows = set(), set(), 0
    for f in files:
        for cells in f.cells:
            labels.add(cells.get("shard", ""))
            selections.add(cells.get("selection", ""))
            rows += 1
    parsed = [label.split("/") for label in labels]
    if not labels or "" in labels or any(len(p) != 2 or not all(x.isdigit() for x in p) for p in parsed):
        return ""
    counts = {int(b) for _, b in parsed}
    if len(counts) != 1 or len(labels) != len(files) or len(selections) != 1:
        return ""
    count = counts.pop()
    missing = sorted(set(range(1, count + 1)) - {int(a) for a, _ in parsed})
    if missing:
        return f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} of {count} missing"
    selected = selections.pop().split(":")[0]
    if selected.isdigit() and rows < int(selected):
        return f"the shards hold {rows} of the {selected} cases their run selected (a shard cut short)"
    return ""


def _take_run(path: str, out: Path) -> tuple[str, tuple[str, ResultTable, tuple[Mapping[str, str], ...]]]:
    """--run PATH copied to DIR/run.csv; and its text, table and cells, read once, as DIR/run.csv's."""
    text, table, cells = read_results_text(path)  # refuse a bad file before anything is written
    if Path(path).resolve() != out.resolve():
        atomic_write_text(out, text)
    return f"--run {path}", (text, replace(table, path=str(out)), cells)


def _measure(cfg: NightConfig, p: Project, where: Path, log: Log) -> str:
    words = ["run", p.suite_word, "--device", cfg.device, "--out", str(cfg.out / "run.csv"),
             "--log-json", str(cfg.out / "run.jsonl"), "--format", "none"]
    env = dict(os.environ)
    if p.head:  # the worker reads no sha from its own directory; say which commit this is
        env["PERFCI_GIT_SHA"] = p.head + (git.DIRTY if git.is_dirty(where) else "")
    child = run_perfci(words, where, env)
    expect(child, (0, 1))  # 1: some case broke, which the gate reports
    if not (cfg.out / "run.csv").is_file():
        raise ChildCrash(f"perfci run exited {child.code} and wrote no {cfg.out / 'run.csv'}")
    log.files.append("run.jsonl")
    return f"measured {p.suite}"


def _run_bench(cfg: NightConfig, p: Project, where: Path, log: Log) -> str:
    """``--bench CMD`` in the project root; its results become DIR/run.csv (perfci.nightly.bench)."""
    env = dict(os.environ)
    if p.head:
        env["PERFCI_GIT_SHA"] = p.head + (git.DIRTY if git.is_dirty(where) else "")
    code = measure(cfg.bench or "", where, cfg.out / "run.csv", p.suite, device=cfg.device, env=env,
                   timeout_s=cfg.bench_timeout_s)
    if code not in (0, 1):  # 1: a benchmark failed (pytest), which the gate reports
        log.notes.append(f"the bench exited {code}; its results were judged as written")
    return f"--bench {cfg.bench!r}"


def _fill_sha(path: Path, table: ResultTable, cells: tuple[Mapping[str, str], ...], sha: str
              ) -> tuple[str, ResultTable, tuple[Mapping[str, str], ...]]:
    """DIR/run.csv rewritten with ``sha`` in every row's git_sha; its text, table and cells as they now read."""
    header = list(cells[0].keys())
    if "git_sha" not in header:
        header.append("git_sha")
    filled = tuple({**c, "git_sha": sha} for c in cells)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(filled)
    text = buf.getvalue()
    atomic_write_text(path, text)
    return text, replace(table, rows=tuple(replace(r, git_sha=sys.intern(sha)) for r in table.rows)), filled
