"""Trend pictures: one PNG per case, its nightly values, levels, noise band and change points.

Returns PNG bytes (matplotlib's Agg backend, no display needed); the command
line writes them. What is drawn:

* each run's value as the checks judge it (dot: the mean of its fastest half of
  repeats, in log time; the median for a run without repeats) and the range of
  its repeats (bar);
* each level between change points (the median of its nights, a line);
* the noise band around each level: +-2 robust standard deviations of the
  nightly values around their own level, pooled over the levels: where a
  quiet night lands;
* each change point: a dashed line before its first run, with the shift.
"""
from __future__ import annotations

import io

import numpy as np

from perfci import stats
from perfci.history.changepoints import Detection, levels, segments
from perfci.history.model import CaseSeries


def night_values(series: CaseSeries) -> np.ndarray:
    """Each night's value as ``history check`` judges it (:func:`perfci.history.changepoints.levels`), in µs."""
    return np.exp(levels(series.medians, [p.repeats_us for p in series.points]))


def noise_sd(series: CaseSeries, detection: Detection) -> float:
    """Robust spread of the nightly log values around their level (0 with fewer than 3 nights)."""
    logs = np.log(night_values(series))
    resid = [logs[i] - np.median(logs[a:b]) for a, b in segments(len(logs), detection.changes)
             for i in range(a, b)]
    return stats.robust_spread(resid) if len(resid) >= 3 else 0.0


def trend_png(series: CaseSeries, detection: Detection, subtitle: str = "", dpi: int = 90) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = series.points
    x = np.arange(len(pts))
    med = night_values(series)
    lo = np.asarray([min(p.repeats_us) for p in pts])
    hi = np.asarray([max(p.repeats_us) for p in pts])
    sd = noise_sd(series, detection)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for a, b in segments(len(pts), detection.changes):
        level = float(np.median(med[a:b]))
        xs = [a - 0.4, b - 0.6]
        if sd:
            ax.fill_between(xs, level * np.exp(-2 * sd), level * np.exp(2 * sd), color="tab:blue", alpha=0.12,
                            lw=0, label="noise band (±2 sd of nightly values)" if a == 0 else None)
        ax.plot(xs, [level, level], color="tab:blue", lw=1.2, alpha=0.8)
    ax.errorbar(x, med, yerr=[med - lo, hi - med], fmt="o", ms=3.5, color="black", ecolor="0.55",
                elinewidth=0.8, capsize=0, label="night: mean of fastest half (bar: repeats' range)")
    for c in detection.changes:
        ax.axvline(c.index - 0.5, color="tab:red", ls="--", lw=1.0)
        ax.annotate(f"{100 * (c.ratio - 1):+.1f}%", (c.index - 0.5, 1.0), xycoords=("data", "axes fraction"),
                    textcoords="offset points", xytext=(3, -12), color="tab:red", fontsize=8)
    step = max(1, -(-len(pts) // 8))  # at most 8 labels, so dates never overlap
    ticks = list(range(0, len(pts), step))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{pts[i].timestamp[:10]}\n{(pts[i].sha or '-')[:7]}" for i in ticks], fontsize=7)
    ax.set_xlim(-0.7, len(pts) - 0.3)
    ax.set_ylabel("µs")
    title = series.label + (f"  ({subtitle})" if subtitle else "")
    if detection.too_short:
        title += f"  -- {len(pts)} run(s): too short to search for changes"
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", color="0.9")
    ax.legend(fontsize=7, loc="best", frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
