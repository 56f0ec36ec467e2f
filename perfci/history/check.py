"""``perfci history check``: every case's change points, and their text and JSON renderings.

Pure: a loaded :class:`perfci.history.model.History` in, frozen results and text out.
Each case is searched in the space :mod:`perfci.history.clockspace` judges it
in (cycles where its clock explains its nightly spread, time otherwise), and
says which.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from perfci.escape import term_text
from perfci.history.changepoints import ChangeOptions, Detection, detect_levels
from perfci.history.clockspace import JudgedSeries, judge, space_counts
from perfci.history.model import CaseSeries, History, case_series


@dataclass(frozen=True)
class CaseCheck:
    series: CaseSeries
    detection: Detection
    judged: JudgedSeries  # the nightly levels the detection ran on, and their space


@dataclass(frozen=True)
class CheckResult:
    store: str
    device: str
    n_runs: int
    options: ChangeOptions
    cases: tuple[CaseCheck, ...]
    rule: str = "auto"  # perfci.history.clockspace.RULES

    @property
    def changed(self) -> tuple[CaseCheck, ...]:
        return tuple(c for c in self.cases if c.detection.changes)

    @property
    def too_short(self) -> tuple[CaseCheck, ...]:
        return tuple(c for c in self.cases if c.detection.too_short)


def check_case(series: CaseSeries, options: ChangeOptions | None = None, rule: str = "auto") -> CaseCheck:
    """One case's change points, searched in the space it is judged in."""
    judged = judge(series, rule)
    return CaseCheck(series, detect_levels(judged.levels, options), judged)


def check(history: History, options: ChangeOptions | None = None, rule: str = "auto") -> CheckResult:
    opts = options or ChangeOptions()
    cases = tuple(check_case(s, opts, rule) for s in case_series(history.runs))
    m = history.manifest
    return CheckResult(history.path, f"{m.device_name} ({m.arch})", len(history.runs), opts, cases, rule)


def recent_slowdowns(result: CheckResult, last: int) -> list[dict]:
    """The change points that made a case slower and whose first slower run is among its last ``last`` runs:
    what ``history check --fail-recent`` fails on (an older step is history, already seen)."""
    return [row for row in change_rows(result) if row["ratio"] > 1.0 and row["runs"] - row["run_index"] <= last]


def change_rows(result: CheckResult) -> list[dict]:
    """One dict per change point, the fields the JSON and the table share."""
    rows = []
    for case in result.changed:
        s = case.series
        for c in case.detection.changes:
            point = s.points[c.index]
            rows.append({"kernel": s.kernel, "shape": s.shape, "dtype": s.dtype, "suite": s.suite,
                         "run_index": c.index, "runs": len(s.points), "run_id": point.run_id,
                         "sha": point.sha, "timestamp": point.timestamp, "before_us": round(c.before, 4),
                         "after_us": round(c.after, 4), "ratio": round(c.ratio, 5),
                         "change_pct": round(100.0 * (c.ratio - 1.0), 2), "p_value": c.p_value,
                         **_space_fields(case.judged)})
    return rows


def _space_fields(j: JudgedSeries) -> dict:
    """Which space a case was judged in, and why (before/after_us are µs at reference_mhz in cycles)."""
    return {"space": j.space, "clock_exponent": None if j.exponent is None else round(j.exponent, 3),
            "roofline_exponent": None if j.roofline_exponent is None else round(j.roofline_exponent, 3),
            "reference_mhz": None if j.reference_mhz is None else round(j.reference_mhz, 1),
            "spread_time_pct": round(100.0 * j.spread_time, 3),
            "spread_cycles_pct": None if j.spread_cycles is None else round(100.0 * j.spread_cycles, 3),
            "space_reason": j.reason}


def render_json(result: CheckResult) -> str:
    return json.dumps({
        "store": result.store, "device": result.device, "runs": result.n_runs,
        "cases": len(result.cases), "options": {**asdict(result.options), "space": result.rule},
        "spaces": space_counts([c.judged for c in result.cases]),
        "changes": change_rows(result),
        "case_spaces": [{"kernel": c.series.kernel, "shape": c.series.shape, "dtype": c.series.dtype,
                         **_space_fields(c.judged)} for c in result.cases],
        "too_short": [{"kernel": c.series.kernel, "shape": c.series.shape, "dtype": c.series.dtype,
                       "runs": c.detection.n} for c in result.too_short],
    }, indent=2) + "\n"


def _space_cell(row: dict) -> str:
    if row["reference_mhz"] is None:
        return row["space"]
    return f"{row['space']} (us at {row['reference_mhz']:.0f} MHz)"


def render_table(result: CheckResult) -> str:
    opts = result.options
    out = [f"perfci history check: {result.store} ({result.n_runs} runs of {result.device}, "
           f"{len(result.cases)} cases)"]
    rows = change_rows(result)
    if rows:
        header = ("kernel", "shape", "dtype", "run", "sha", "date", "before us", "after us", "change", "p",
                  "space")
        table = [header] + [(r["kernel"], r["shape"], r["dtype"], f"{r['run_index']}/{r['runs']}",
                             (r["sha"] or "-")[:12], r["timestamp"][:10], f"{r['before_us']:.3f}",
                             f"{r['after_us']:.3f}", f"{r['change_pct']:+.1f}%", f"{r['p_value']:.3g}",
                             _space_cell(r)) for r in rows]
        widths = [max(len(t[i]) for t in table) for i in range(len(header))]
        for i, t in enumerate(table):
            out.append("  ".join(cell.ljust(w) for cell, w in zip(t, widths)).rstrip())
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
        out.append("")
        out.append(f"{len(rows)} change point(s) in {len(result.changed)} case(s); 'run' is the first run "
                   f"at the new level (0 = the case's oldest run)")
    counts = space_counts([c.judged for c in result.cases])
    out.append("judged in: " + ", ".join(f"{space} {n}" for space, n in counts.items() if n)
               + (" (cycles where a case's clock explains its nightly spread better than time; "
                  "`--format json` gives each case's space and why)" if result.rule == "auto" else " (--space time)"))
    searched = len(result.cases) - len(result.too_short)
    out.append(f"no change point in {searched - len(result.changed)} of {searched} case(s) with enough runs")
    if result.too_short:
        n = sorted({c.detection.n for c in result.too_short})
        out.append(f"too short to search: {len(result.too_short)} case(s) with {n[0]}"
                   + (f"-{n[-1]}" if len(n) > 1 else "") + f" run(s); a change needs {opts.min_segment} runs "
                   f"on each side ({2 * opts.min_segment} in all), so none is claimed")
    out.append(f"method: binary segmentation of each run's level (the mean of its fastest half of repeats; "
               f"before/after: the median level of the runs on either side), standardized difference of "
               f"means, permutation p <= {opts.alpha:g} ({opts.permutations} shuffles), at least "
               f"{opts.min_segment} runs a segment, a run over {opts.clip_sd:g} sd from its neighbours pulled "
               f"in, shifts under {opts.min_change_pct:g}% not reported")
    return "\n".join(term_text(line) for line in out) + "\n"
