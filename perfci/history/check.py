"""``perfci history check``: every case's change points, and their text and JSON renderings.

Pure: a loaded :class:`perfci.history.model.History` in, frozen results and text out.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from perfci.history.changepoints import ChangeOptions, Detection, detect
from perfci.history.model import CaseSeries, History, case_series


@dataclass(frozen=True)
class CaseCheck:
    series: CaseSeries
    detection: Detection


@dataclass(frozen=True)
class CheckResult:
    store: str
    device: str
    n_runs: int
    options: ChangeOptions
    cases: tuple[CaseCheck, ...]

    @property
    def changed(self) -> tuple[CaseCheck, ...]:
        return tuple(c for c in self.cases if c.detection.changes)

    @property
    def too_short(self) -> tuple[CaseCheck, ...]:
        return tuple(c for c in self.cases if c.detection.too_short)


def check(history: History, options: ChangeOptions | None = None) -> CheckResult:
    opts = options or ChangeOptions()
    cases = tuple(CaseCheck(s, detect(s.medians, opts, [p.repeats_us for p in s.points]))
                  for s in case_series(history.runs))
    m = history.manifest
    return CheckResult(history.path, f"{m.device_name} ({m.arch})", len(history.runs), opts, cases)


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
                         "change_pct": round(100.0 * (c.ratio - 1.0), 2), "p_value": c.p_value})
    return rows


def render_json(result: CheckResult) -> str:
    return json.dumps({
        "store": result.store, "device": result.device, "runs": result.n_runs,
        "cases": len(result.cases), "options": asdict(result.options),
        "changes": change_rows(result),
        "too_short": [{"kernel": c.series.kernel, "shape": c.series.shape, "dtype": c.series.dtype,
                       "runs": c.detection.n} for c in result.too_short],
    }, indent=2) + "\n"


def render_table(result: CheckResult) -> str:
    opts = result.options
    out = [f"perfci history check: {result.store} ({result.n_runs} runs of {result.device}, "
           f"{len(result.cases)} cases)"]
    rows = change_rows(result)
    if rows:
        header = ("kernel", "shape", "dtype", "run", "sha", "date", "before us", "after us", "change", "p")
        table = [header] + [(r["kernel"], r["shape"], r["dtype"], f"{r['run_index']}/{r['runs']}",
                             (r["sha"] or "-")[:12], r["timestamp"][:10], f"{r['before_us']:.3f}",
                             f"{r['after_us']:.3f}", f"{r['change_pct']:+.1f}%", f"{r['p_value']:.3g}")
                            for r in rows]
        widths = [max(len(t[i]) for t in table) for i in range(len(header))]
        for i, t in enumerate(table):
            out.append("  ".join(cell.ljust(w) for cell, w in zip(t, widths)).rstrip())
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
        out.append("")
        out.append(f"{len(rows)} change point(s) in {len(result.changed)} case(s); 'run' is the first run "
                   f"at the new level (0 = the case's oldest run)")
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
    return "\n".join(out) + "\n"
