"""Renderers for a :class:`~perfci.bisect.core.BisectResult`: they return text, never print.

``plot`` is the one exception that writes, since a PNG is the point of it.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from perfci.bisect.core import BisectResult, StepRecord, Verdict


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.5g}"


def _rows(result: BisectResult) -> list[StepRecord]:
    """GOOD, every measured commit and BAD, in history order."""
    return sorted([result.good, *result.steps, result.bad], key=lambda r: r.order)


def _verdict_label(record: StepRecord, result: BisectResult) -> str:
    if record is result.good:
        return "GOOD (endpoint)"
    if record is result.bad:
        return "BAD (endpoint)"
    label = record.classification.verdict.value
    if result.culprit and record.sha == result.culprit["sha"]:
        label += "  <- first bad"
    return label


def _interval(iv) -> str:
    return f"{iv.estimate:+.2f}% (95% CI {iv.low:+.2f}% .. {iv.high:+.2f}%)"


def _summary_lines(result: BisectResult) -> list[str]:
    lines = []
    if result.status == "culprit":
        c = result.culprit
        lines += [f"first bad commit: {c['sha']}", f"  subject: {c['subject']}", f"  author:  {c['author']}",
                  f"  date:    {c['date']}"]
        if result.culprit_interval:
            lines.append(f"  step at this commit: {_interval(result.culprit_interval)}")
    else:
        lines.append(result.message)
    if result.step_interval:
        lines.append(f"GOOD -> BAD change: {_interval(result.step_interval)}")
    if result.confidence is not None and result.status == "culprit":
        lines.append(f"confidence that every verdict was right: {result.confidence:.1%}")
    direction = "higher is better" if result.higher_is_better else "lower is better"
    lines.append(f"metric: {result.metric} ({direction}); {result.bench_runs} bench runs this session")
    return lines


def render_text(result: BisectResult) -> str:
    lines = _summary_lines(result)
    if result.culprit_diffstat:
        lines += ["", result.culprit_diffstat]
    lines += ["", f"{'#':>4}  {'commit':12}  {'n':>3}  {'fail':>4}  {'median':>10}  {'pos':>5}  verdict / subject"]
    for r in _rows(result):
        pos = r.classification.position
        lines.append(f"{r.order:>4}  {r.sha[:12]}  {len(r.samples.values):>3}  {r.samples.failures:>4}  "
                     f"{_fmt(r.samples.median):>10}  {'' if pos is None else f'{pos:.2f}':>5}  "
                     f"{_verdict_label(r, result)}  {r.subject[:50]}")
        if r.reason and r.classification.verdict == Verdict.SKIP:
            lines.append(f"{'':>4}  skipped: {r.reason}")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"


def render_markdown(result: BisectResult) -> str:
    out = ["## perfci bisect", ""]
    out += [f"- {line.strip()}" for line in _summary_lines(result)]
    if result.culprit_diffstat:
        out += ["", "```", result.culprit_diffstat, "```"]
    out += ["", "| # | commit | n | failed | median | position | verdict | subject |",
            "|---:|---|---:|---:|---:|---:|---|---|"]
    for r in _rows(result):
        pos = r.classification.position
        subject = r.subject.replace("|", "\\|")[:60]
        out.append(f"| {r.order} | `{r.sha[:12]}` | {len(r.samples.values)} | {r.samples.failures} | "
                   f"{_fmt(r.samples.median)} | {'' if pos is None else f'{pos:.2f}'} | "
                   f"{_verdict_label(r, result)} | {subject} |")
    return "\n".join(out) + "\n"


def _step_json(r: StepRecord) -> dict:
    c = r.classification
    return {"sha": r.sha, "order": r.order, "subject": r.subject, "samples": list(r.samples.values),
            "failures": r.samples.failures, "median": r.samples.median, "verdict": c.verdict.value,
            "position": c.position, "p_value": c.p_value, "reason": r.reason}


def render_json(result: BisectResult) -> str:
    def iv(i):
        return None if i is None else {"estimate_pct": i.estimate, "low_pct": i.low, "high_pct": i.high}

    doc = {
        "status": result.status,
        "message": result.message,
        "culprit": None if result.culprit is None else {**result.culprit, "diffstat": result.culprit_diffstat},
        "candidates": list(result.candidates),
        "good": _step_json(result.good),
        "bad": _step_json(result.bad),
        "steps": [_step_json(s) for s in result.steps],
        "commits_total": result.commits_total,
        "baseline": None if result.baseline is None else {
            "p_value": result.baseline.p_value, "effect_pct": result.baseline.effect_pct,
            "message": result.baseline.message},
        "step_interval": iv(result.step_interval),
        "culprit_interval": iv(result.culprit_interval),
        "confidence": result.confidence,
        "metric": result.metric,
        "higher_is_better": result.higher_is_better,
        "bench_runs": result.bench_runs,
        "bisect_log": result.bisect_log,
        "warnings": list(result.warnings),
        "exit_code": result.exit_code,
    }
    return json.dumps(doc, indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


def plot(result: BisectResult, path: Path) -> None:
    """Commit order vs metric: every sample, each commit's median, the GOOD and BAD bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for record, colour in ((result.good, "tab:green"), (result.bad, "tab:red")):
        values = np.asarray(record.samples.values)
        if values.size:
            low, high = np.percentile(values, [25, 75])
            ax.axhspan(low, high, color=colour, alpha=0.15,
                       label=f"{'GOOD' if record is result.good else 'BAD'} IQR")
            ax.axhline(float(np.median(values)), color=colour, lw=0.8, ls="--")
    colours = {Verdict.GOOD: "tab:green", Verdict.BAD: "tab:red", Verdict.SKIP: "tab:gray",
               Verdict.UNSURE: "tab:orange"}
    for r in _rows(result):
        colour = colours[r.classification.verdict]
        if r.samples.values:
            ax.scatter([r.order] * len(r.samples.values), r.samples.values, s=10, color=colour, alpha=0.5)
            ax.scatter([r.order], [r.samples.median], s=40, color=colour, edgecolor="black", zorder=3)
    if result.culprit:
        culprit_order = next(r.order for r in _rows(result) if r.sha == result.culprit["sha"])
        ax.axvline(culprit_order - 0.5, color="black", lw=1, ls=":",
                   label=f"first bad {result.culprit['sha'][:10]}")
    ax.set_xlabel(f"commit order (0 = GOOD, {result.commits_total} = BAD)")
    # The metric's description can be long (column, case and file): it goes in
    # the title, where there is room, and the axis says only the direction.
    ax.set_ylabel("higher is better" if result.higher_is_better else "lower is better")
    ax.set_title(textwrap.fill(f"perfci bisect: {result.metric}", 90), fontsize=10)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
