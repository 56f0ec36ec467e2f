"""``perfci compare STORE CUR``: tonight's run against a history store's last nights.

:func:`pooled_compare` takes the loaded store and tonight's parsed results: it
refuses a run of another device, leaves tonight out of its own baseline, and
hands plain tables to the pure judgement (:mod:`perfci.compare.pooled`).
:func:`pooled_comparison`, the CLI's form, reads them from their paths first.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from perfci.compare.comparison import Comparison
from perfci.compare.flips import with_flips
from perfci.compare.noise import profile_for_arch
from perfci.compare.pooled import DEFAULT_NIGHTS, PooledOptions, build_baseline, judge
from perfci import git
from perfci.errors import PerfciError
from perfci.history.model import History, Run, run_info
from perfci.history.store import load, load_triage
from perfci.history.triage import TriageRecord
from perfci.history.triage import restarts as triage_restarts
from perfci.model import ResultTable, column_mode
from perfci.results import read_results_cells


def pooled_comparison(store: str, cur_path: str, profile, opts, nights: int | None) -> Comparison:
    """Judge ``cur_path`` against the last nights of the history store ``store``: the CLI's form of
    :func:`pooled_compare`, reading both first."""
    history = load(store)
    table, cells = read_results_cells(cur_path)
    check_tonight(history, table, cells)  # a CUR the store cannot judge is said before any triage record is read
    return pooled_compare(history, table, cells, load_triage(store), profile, opts, nights)


def check_tonight(history: History, table: ResultTable, cells: Sequence[Mapping[str, str]]) -> None:
    """Refuse a results table the store cannot judge: not perfci's, of another device, or a store with no runs."""
    store, cur_path = history.path, table.path
    if table.format != "perfci":
        raise PerfciError(f"{cur_path}: a {table.format} file; a history store is compared with perfci "
                          f"results CSVs only")
    device, arch_cur = column_mode(cells, "device_name"), column_mode(cells, "arch")
    m = history.manifest
    if not device or not arch_cur:
        raise PerfciError(f"{cur_path}: no device_name/arch columns, so it cannot be checked against "
                          f"{store}'s device ({m.device_name}, {m.arch})")
    if (device, arch_cur) != (m.device_name, m.arch):
        raise PerfciError(f"{cur_path}: ran on {device} ({arch_cur}) but {store} holds runs of "
                          f"{m.device_name} ({m.arch})")
    if not history.runs:
        raise PerfciError(f"{store}: the store has no runs yet; add some with `perfci history add`")


def others_than_tonight(history: History, table: ResultTable, cells: Sequence[Mapping[str, str]]) -> list[Run]:
    """The store's runs less tonight's own, when it is in the store already (by its run id)."""
    try:
        cur_id = run_info(table.path, table, cells).run_id
    except PerfciError:
        cur_id = None  # no timestamp: it cannot be in the store either
    return [r for r in history.runs if r.info.run_id != cur_id]


def pooled_compare(history: History, table: ResultTable, cells: Sequence[Mapping[str, str]],
                   triage_records: Sequence[TriageRecord], profile, opts, nights: int | None) -> Comparison:
    """Judge tonight's results (``table`` and its ``cells``, as :func:`perfci.results.read_results_cells`
    reads them) against the last nights of the loaded store ``history`` (:mod:`perfci.compare.pooled`),
    its ``triage_records`` restarting the cases an ``expected`` record names."""
    check_tonight(history, table, cells)
    store, m = history.path, history.manifest
    suite = column_mode(cells, "suite")
    kept = others_than_tonight(history, table, cells)
    runs = [(r.info.suite, r.table) for r in kept]
    arch = opts.arch or m.arch
    profile = profile or profile_for_arch(arch)
    popts = PooledOptions(nights=nights or DEFAULT_NIGHTS)
    cur_sha = column_mode(cells, "git_sha")
    restarts = expected_restarts(triage_records, kept, table, suite, cur_sha)
    result = judge(build_baseline(runs, profile, popts, arch, restarts), table, suite, arch, profile, opts, popts,
                   base_label=f"{store} (last {popts.nights} nights)")
    result = with_flips(result, _last_nights(runs, popts.nights), {r.key: (r,) for r in table.rows})
    if len(runs) < len(history.runs):
        result = replace(result, notes=result.notes + (
            "CUR is itself in the store; it was left out of its own baseline",))
    return result


def expected_restarts(records: Sequence[TriageRecord], runs, cur, cur_suite: str, cur_sha: str) -> dict:
    """Each case an ``expected`` triage record (of the store's ``records``) names: (the run its pooled
    nights restart at, why).

    The restart is the first stored night at the record's commit (or tonight,
    when tonight is at it); a commit no night was measured at is placed by git
    ancestry in the repository perfci runs in, where there is one.
    """
    if not records:
        return {}
    keys = {(row.key, suite) for suite, table in [(r.info.suite, r.table) for r in runs] + [(cur_suite, cur)]
            for row in table.rows}
    top = git.toplevel(Path.cwd())

    def after(sha: str, run_sha: str) -> bool:
        return top is not None and git.query(top, "merge-base", "--is-ancestor", sha, run_sha) is not None

    found = triage_restarts(records, sorted(keys), [r.info.git_sha for r in runs], cur_sha, after)
    return {key: (at, f"expected at {rec.sha[:12]} by {rec.who}: {rec.reason}") for key, (at, rec) in found.items()}


def _last_nights(runs, nights: int) -> dict:
    """Each case's ok rows of its last NIGHTS runs, oldest first: the nights the pooled baseline uses."""
    rows: dict = {}
    for _, table in runs:
        for row in table.rows:
            if row.status == "ok" and row.median_us:
                rows.setdefault(row.key, []).append(row)
    return {key: tuple(found[-nights:]) for key, found in rows.items()}
