"""``perfci compare STORE CUR``: tonight's run against a history store's last nights.

The IO edge of :mod:`perfci.compare.pooled`: it reads the store and tonight's
results CSV, refuses a run of another device, leaves tonight out of its own
baseline, and hands plain tables to the pure judgement.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from perfci.compare.flips import with_flips
from perfci.compare.noise import profile_for_arch
from perfci.compare.pooled import DEFAULT_NIGHTS, PooledOptions, build_baseline, judge
from perfci.errors import PerfciError
from perfci.history.model import run_info
from perfci.history.store import load
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
    runs = [(r.info.suite, r.table) for r in history.runs if r.info.run_id != cur_id]
    arch = opts.arch or m.arch
    profile = profile or profile_for_arch(arch)
    popts = PooledOptions(nights=nights or DEFAULT_NIGHTS)
    result = judge(build_baseline(runs, profile, popts, arch), table, suite, arch, profile, opts, popts,
                   base_label=f"{store} (last {popts.nights} nights)")
    result = with_flips(result, _last_nights(runs, popts.nights), {r.key: (r,) for r in table.rows})
    if len(runs) < len(history.runs):
        result = replace(result, notes=result.notes + (
            "CUR is itself in the store; it was left out of its own baseline",))
    return result


def _last_nights(runs, nights: int) -> dict:
    """Each case's ok rows of its last NIGHTS runs, oldest first: the nights the pooled baseline uses."""
    rows: dict = {}
    for _, table in runs:
        for row in table.rows:
            if row.status == "ok" and row.median_us:
                rows.setdefault(row.key, []).append(row)
    return {key: tuple(found[-nights:]) for key, found in rows.items()}
