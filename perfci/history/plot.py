"""Trend pictures: one PNG per case, its nightly levels with their intervals, segments, noise band, change points.

Returns PNG bytes (matplotlib's Agg backend, no display needed); the command
line writes them. Everything is drawn in the space ``history check`` judged the
case in (:mod:`perfci.history.clockspace`: cycles quoted as µs at the case's
reference clock, or time), and the axis says which. What is drawn:

* each night's **level** (dot: the mean of its fastest half of repeats, the value
  change points are searched on) with **that level's own interval** (bar: ±2 sd
  of a seeded bootstrap of the fastest-half mean,
  :func:`perfci.history.nights.level_var`), which holds the dot by construction;
  the repeats themselves as faint ticks in the same space; a night without a
  clock in a case judged in cycles as a hollow dot (its level is placed, not read);
* each level between change points (the median of its nights, a line);
* the noise band around each level: +-2 robust standard deviations of the
  nightly levels around their own level, pooled over the levels: where a
  quiet night lands;
* each change point: a dashed line before its first run, with the shift.

A plot that cannot be drawn is a warning, never a failed command:
:func:`trend_png_or_warning` returns the reason instead of raising.
"""
from __future__ import annotations

import io
import math
from typing import Sequence

import numpy as np

from perfci import stats
from perfci.history.changepoints import Detection, segments
from perfci.history.clockspace import JudgedSeries, judge
from perfci.history.model import CaseSeries
from perfci.history.nights import level_var


def night_values(series: CaseSeries, judged: JudgedSeries | None = None) -> np.ndarray:
    """Each night's level as ``history check`` judges it, in µs (at the reference clock in cycles)."""
    return (judged or judge(series)).levels_us


def level_intervals(judged: JudgedSeries, width_sd: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) µs of each night's level: ±WIDTH_SD bootstrap sd of it, so low <= level <= high.

    A night of one repeat, or of identical ones, has an empty interval (low = level = high).
    """
    levels = np.asarray(judged.levels, dtype=float)
    sd = np.asarray([math.sqrt(max(0.0, level_var(v))) if len(v) else 0.0 for v in judged.values])
    sd = np.where(np.isfinite(sd), sd, 0.0)
    return np.exp(levels - width_sd * sd), np.exp(levels + width_sd * sd)


def noise_sd(series: CaseSeries, detection: Detection, judged: JudgedSeries | None = None) -> float:
    """Robust spread of the nightly log levels around their segment's level (0 with fewer than 3 nights)."""
    logs = np.log(night_values(series, judged))
    resid = [logs[i] - np.median(logs[a:b]) for a, b in segments(len(logs), detection.changes)
             for i in range(a, b)]
    return stats.robust_spread(resid) if len(resid) >= 3 else 0.0


def axis_label(judged: JudgedSeries) -> str:
    if judged.reference_mhz is None:
        return "µs"
    return f"µs at {judged.reference_mhz:.0f} MHz (cycles)"


MARK_COLORS = {"expected": "tab:green", "invalid": "tab:gray", "acknowledged": "tab:orange", "fixed": "tab:purple"}


def trend_png(series: CaseSeries, detection: Detection, subtitle: str = "", dpi: int = 90,
              judged: JudgedSeries | None = None, marks: Sequence[tuple[int, str]] = ()) -> bytes:
    """The trend PNG of one case. JUDGED: the nights ``detection`` was found on (default: ``judge(series)``).

    MARKS: (night index, triage state) of the nights a triage record is about: a dotted line and the state.
    """
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    judged = judged or judge(series)
    pts = series.points
    x = np.arange(len(pts))
    level = judged.levels_us
    low, high = level_intervals(judged)
    # Never negative, even where exp/log rounding puts the level an ulp outside its own bounds.
    yerr = np.vstack([np.maximum(level - low, 0.0), np.maximum(high - level, 0.0)])
    sd = noise_sd(series, detection, judged)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    try:
        for a, b in segments(len(pts), detection.changes):
            seg = float(np.median(level[a:b]))
            xs = [a - 0.4, b - 0.6]
            if sd:
                ax.fill_between(xs, seg * np.exp(-2 * sd), seg * np.exp(2 * sd), color="tab:blue", alpha=0.12,
                                lw=0, label="noise band (±2 sd of nightly levels)" if a == 0 else None)
            ax.plot(xs, [seg, seg], color="tab:blue", lw=1.2, alpha=0.8)
        rx = [i for i, v in enumerate(judged.values) for _ in v]
        ry = np.exp([r for v in judged.values for r in v])
        ax.plot(rx, ry, "_", ms=5, color="0.7", label="repeats", zorder=1)
        ax.errorbar(x, level, yerr=yerr, fmt="o", ms=3.5, color="black", ecolor="0.35", elinewidth=0.9,
                    capsize=2, zorder=3, label="night: mean of fastest half (bar: its ±2 sd interval)")
        if judged.placed:
            ax.plot(list(judged.placed), level[list(judged.placed)], "o", ms=5.5, mfc="white", mec="tab:orange",
                    zorder=4, label="no clock: placed within its time's range, nearest its neighbours")
        stacked: dict[int, int] = {}
        for i, state in marks:
            color = MARK_COLORS.get(state, "tab:gray")
            ax.axvline(i, color=color, ls=":", lw=1.2, zorder=2)
            k = stacked[i] = stacked.get(i, -1) + 1  # several records at one night: one label above the other
            ax.annotate(state, (i, 0.0), xycoords=("data", "axes fraction"), textcoords="offset points",
                        xytext=(3, 3 + 9 * k), color=color, fontsize=7)
        for c in detection.changes:
            ax.axvline(c.index - 0.5, color="tab:red", ls="--", lw=1.0)
            ax.annotate(f"{100 * (c.ratio - 1):+.1f}%", (c.index - 0.5, 1.0), xycoords=("data", "axes fraction"),
                        textcoords="offset points", xytext=(3, -12), color="tab:red", fontsize=8)
        step = max(1, -(-len(pts) // 8))  # at most 8 labels, so dates never overlap
        ticks = list(range(0, len(pts), step))
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{pts[i].timestamp[:10]}\n{(pts[i].sha or '-')[:7]}" for i in ticks], fontsize=7)
        ax.set_xlim(-0.7, len(pts) - 0.3)
        ax.set_ylabel(axis_label(judged))
        title = series.label + (f"  ({subtitle})" if subtitle else "") + f"  [{judged.space}]"
        if detection.too_short:
            title += f"  -- {len(pts)} run(s): too short to search for changes"
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", color="0.9")
        # Fixed margins and corner: tight_layout and loc="best" each measure every artist again,
        # which was half of a plot's time and made a 1,000-case report take minutes.
        # Below the axes, so it never hides a night.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
        fig.subplots_adjust(left=0.09, right=0.985, top=0.92, bottom=0.3)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        return buf.getvalue()
    finally:
        plt.close(fig)


def trend_png_or_warning(series: CaseSeries, detection: Detection, subtitle: str = "",
                         judged: JudgedSeries | None = None,
                         marks: Sequence[tuple[int, str]] = ()) -> tuple[bytes | None, str]:
    """(PNG, "") or (None, one line saying why this case's trend could not be drawn).

    A picture is never worth a night's exit code: whatever matplotlib raises on
    odd data is reported beside the case, and the rest of the report is written.
    """
    try:
        return trend_png(series, detection, subtitle, judged=judged, marks=marks), ""
    except Exception as err:  # noqa: BLE001 -- any rendering failure becomes this case's warning
        why = str(err).splitlines()[0] if str(err) else ""
        return None, f"trend of {series.label} not drawn: {type(err).__name__}" + (f": {why}" if why else "")
