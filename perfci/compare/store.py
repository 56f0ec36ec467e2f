"""``perfci compare STORE CUR``: tonight's run against a history store's last nights.

The IO edge of :mod:`perfci.compare.pooled`: it reads the store and tonight's
results CSV, refuses a run of another device, leaves tonight out of its own
baseline, and hands plain tables to the pure judgement.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from perfci.compare.flips import with_flips
from perfci.compare.noise import profile_for_arch
from perfci.compare.pooled import DEFAULT_NIGHTS, PooledOptions, build_baseline, judge
from perfci import git
from perfci.errors import PerfciError
from perfci.history.model import run_info
from perfci.history.store import load, load_triage
from perfci.history.triage import restarts as triage_restarts
from perfci.results import read_results_cells


def pooled_comparison(store: str, cur_path: str, profile, opts, nights: int | None):
    """Judge ``cur_path`` against the last nights of the history store ``store`` (:mod:`perfci.compare.pooled`)."""
    history = load(store)
    table, cells = read_results_cells(cur_path)
    if table.format != "perfci":
        raise PerfciError(f"{cur_path}: a {table.format} file; a history store is compared with perfci "
                          f"results CSVs only")
    device = Counter(c.get("device_name", "") for c in cells).most_common(1)[0][0]
    arch_cur = Counter(c.get("arch", "") for c in cells).most_common(1)[0][0]
    m = history.manifest
    if not device or not arch_cur:
        raise PerfciError(f"{cur_path}: no device_name/arch columns, so it cannot be checked against "
                          f"{store}'s device ({m.device_name}, {m.arch})")
    if (device, arch_cur) != (m.device_name, m.arch):
        raise PerfciError(f"{cur_path}: ran on {device} ({arch_cur}) but {store} holds runs of "
                          f"{m.device_name} ({m.arch})")
    if not history.runs:
        raise PerfciError(f"{store}: the store has no runs yet; add some with `perfci history add`")
    suite = Counter(c.get("suite", "") for c in cells).most_common(1)[0][0]
    try:
        cur_id = run_info(cur_path, table, cells).run_id
    except PerfciError:
        cur_id = None  # no timestamp: it cannot be in the store either
    kept = [r for r in history.runs if r.info.run_id != cur_id]
    runs = [(r.info.suite, r.table) for r in kept]
    arch = opts.arch or m.arch
    profile = profile or profile_for_arch(arch)
    popts = PooledOptions(nights=nights or DEFAULT_NIGHTS)
    cur_sha = Counter(c.get("git_sha", "") for c in cells).most_common(1)[0][0]
    restarts = expected_restarts(store, kept, table, suite, cur_sha)
    result = judge(build_baseline(runs, profile, popts, arch, restarts), table, suite, arch, profile, opts, popts,
                   base_label=f"{store} (last {popts.nights} nights)")
    result = with_flips(result, _last_nights(runs, popts.nights), {r.key: (r,) for r in table.rows})
    if len(runs) < len(history.runs):
        result = replace(result, notes=result.notes + (
            "CUR is itself in the store; it was left out of its own baseline",))
    return result


def expected_restarts(store: str, runs, cur, cur_suite: str, cur_sha: str) -> dict:
    """Each case an ``expected`` triage record of STORE names: (the run its pooled nights restart at, why).

    The restart is the first stored night at the record's commit (or tonight,
    when tonight is at it); a commit no night was measured at is placed by git
    ancestry in the repository perfci runs in, where there is one.
    """
    records = load_triage(store)
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
