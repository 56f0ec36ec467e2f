"""Renderers for a :class:`~perfci.bisect.core.BisectResult`: they return text, never print.

``plot`` is the one exception that writes, since a PNG is the point of it.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np

from perfci.bisect.core import BisectResult, CommitVerdict, Interval, PairCheck, StepRecord
from perfci.escape import md_block, md_code, md_text, term_text
from perfci.verdict import confidence_text


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.5g}"


def _rows(result: BisectResult) -> list[StepRecord]:
    """GOOD, every probed commit and BAD, in history order."""
    return sorted([result.good, *result.steps, result.bad], key=lambda r: r.order)


def _verdict_label(record: StepRecord, result: BisectResult) -> str:
    if record is result.good:
        return "GOOD (endpoint)"
    if record is result.bad:
        return "BAD (endpoint)"
    label = record.verdict.value
    if result.culprit and record.sha == result.culprit["sha"]:
        label += "  <- first bad"
    elif result.status != "culprit" and result.best_guess == record.sha:
        label += "  <- best guess"
    return label


def _interval(iv: Interval) -> str:
    return f"{iv.estimate:+.2f}% ({confidence_text(iv.confidence)} interval {iv.low:+.2f}% .. {iv.high:+.2f}%)"


def _pair_line(check: PairCheck) -> str:
    if check.interval is None:
        return f"{check.message} ({check.rounds} paired rounds)"
    failed = f", {check.failed_rounds} with a failed run left out" if check.failed_rounds else ""
    return f"{_interval(check.interval)}, {check.rounds} paired rounds{failed}, {check.seconds:.0f} s"


def _summary_lines(result: BisectResult) -> list[str]:
    lines = []
    if result.status == "culprit":
        c = result.culprit
        lines += [f"first bad commit: {c['sha']}", f"  subject: {c['subject']}", f"  author:  {c['author']}",
                  f"  date:    {c['date']}"]
        if result.culprit_check:
            lines.append(f"  step at this commit, paired against its parent: {_pair_line(result.culprit_check)}")
    else:
        lines.append(result.message)
        if result.candidates:
            lines.append(f"candidates ({len(result.candidates)}): {' '.join(c[:12] for c in result.candidates)}")
        if result.best_guess and result.status != "all-skipped":
            lines.append(f"best guess: {result.best_guess}")
        if result.culprit_check:
            lines.append(f"step at the best guess, paired against its parent: {_pair_line(result.culprit_check)}")
    if result.baseline:
        lines.append(f"GOOD -> BAD change, paired: {_pair_line(result.baseline)}")
    if result.advice:
        lines.append("what would decide it:")
        lines += [f"  - {a}" for a in result.advice]
    direction = "higher is better" if result.higher_is_better else "lower is better"
    lines.append(f"metric: {result.metric} ({direction}); {result.bench_runs} bench runs, {result.seconds:.0f} s "
                 f"this session")
    lines += [f"note: {n}" for n in result.notes]
    return lines


def _position(r: StepRecord) -> str:
    return "" if r.position is None else f"{r.position:.2f}"


def render_text(result: BisectResult) -> str:
    lines = _summary_lines(result)
    if result.culprit_diffstat:
        lines += ["", *result.culprit_diffstat.split("\n")]
    lines += ["", f"{'#':>4}  {'commit':12}  {'rounds':>6}  {'runs':>4}  {'fail':>4}  {'median':>10}  {'pos':>5}  "
                  f"verdict / subject"]
    for r in _rows(result):
        lines.append(f"{r.order:>4}  {r.sha[:12]}  {r.rounds or '':>6}  {len(r.samples.values):>4}  "
                     f"{r.samples.failures:>4}  {_fmt(r.samples.median):>10}  {_position(r):>5}  "
                     f"{_verdict_label(r, result)}  {r.subject[:50]}")
        if r.reason and r.verdict in (CommitVerdict.SKIP, CommitVerdict.UNSURE):
            lines.append(f"{'':>4}  {r.verdict.value}: {r.reason}")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    # Commit subjects, authors and messages are other people's text: no control character of theirs is printed.
    return "\n".join(term_text(line) for line in lines) + "\n"


def render_markdown(result: BisectResult) -> str:
    out = ["## perfci bisect", ""]
    out += [_md_item(line) for line in _summary_lines(result)]
    if result.culprit_diffstat:
        out += ["", md_block(result.culprit_diffstat)]
    out += ["", "| # | commit | rounds | runs | failed | median | position | verdict | subject |",
            "|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for r in _rows(result):
        subject = md_text(" ".join(r.subject.split())[:60])
        out.append(f"| {r.order} | {md_code(r.sha[:12], table=True)} | {r.rounds or ''} | {len(r.samples.values)} | "
                   f"{r.samples.failures} | {_fmt(r.samples.median)} | {_position(r)} | "
                   f"{_verdict_label(r, result)} | {subject} |")
    for w in result.warnings:
        out.append(f"\nwarning: {md_text(w)}")
    return "\n".join(out) + "\n"


def _md_item(line: str) -> str:
    """A summary line as a list item; its own "  - " items (the advice) nested, as the text shows them."""
    text = line.strip()
    return f"- - {md_text(text[2:])}" if text.startswith("- ") else f"- {md_text(text)}"


def _iv(i: Interval | None):
    return None if i is None else {"estimate_pct": i.estimate, "low_pct": i.low, "high_pct": i.high,
                                   "confidence": i.confidence}


def _pair_json(check: PairCheck | None):
    if check is None:
        return None
    return {"status": check.status, "message": check.message, "interval": _iv(check.interval),
            "rounds": check.rounds, "failed_rounds": check.failed_rounds, "seconds": check.seconds,
            "rounds_needed": check.rounds_needed}


def _step_json(r: StepRecord) -> dict:
    return {"sha": r.sha, "order": r.order, "subject": r.subject, "samples": list(r.samples.values),
            "failures": r.samples.failures, "median": r.samples.median, "verdict": r.verdict.value,
            "position": r.position, "interval": _iv(r.interval), "rounds": r.rounds,
            "against": None if r.against is None else list(r.against), "seconds": r.seconds, "reason": r.reason}


def render_json(result: BisectResult) -> str:
    doc = {
        "status": result.status,
        "message": result.message,
        "culprit": None if result.culprit is None else {**result.culprit, "diffstat": result.culprit_diffstat},
        "candidates": list(result.candidates),
        "best_guess": result.best_guess,
        "good": _step_json(result.good),
        "bad": _step_json(result.bad),
        "steps": [_step_json(s) for s in result.steps],
        "commits_total": result.commits_total,
        "baseline": _pair_json(result.baseline),
        "culprit_check": _pair_json(result.culprit_check),
        "step_interval": _iv(result.step_interval),
        "culprit_interval": _iv(result.culprit_interval),
        "advice": list(result.advice),
        "metric": result.metric,
        "higher_is_better": result.higher_is_better,
        "min_effect_pct": result.min_effect_pct,
        "bench_runs": result.bench_runs,
        "seconds": result.seconds,
        "bisect_log": result.bisect_log,
        "notes": list(result.notes),
        "warnings": list(result.warnings),
        "exit_code": result.exit_code,
    }
    return json.dumps(doc, indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


def plot(result: BisectResult, path: Path) -> None:
    """Commit order vs metric: every run, each commit's median, the GOOD and BAD bands.

    Runs of different commits were paired in time, which a plot of values
    cannot show: the spread here is the machine's, the verdicts are the pairs'.
    """
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for record, colour in ((result.good, "tab:green"), (result.bad, "tab:red")):
        values = np.asarray(record.samples.values)
        if values.size:
            low, high = np.percentile(values, [25, 75])
            ax.axhspan(low, high, color=colour, alpha=0.15,
                       label=f"{'GOOD' if record is result.good else 'BAD'} IQR")
            ax.axhline(float(np.median(values)), color=colour, lw=0.8, ls="--")
    colours = {CommitVerdict.GOOD: "tab:green", CommitVerdict.BAD: "tab:red", CommitVerdict.SKIP: "tab:gray",
               CommitVerdict.UNSURE: "tab:orange"}
    for r in _rows(result):
        colour = colours[r.verdict]
        if r.samples.values:
            ax.scatter([r.order] * len(r.samples.values), r.samples.values, s=8, color=colour, alpha=0.35)
            ax.scatter([r.order], [r.samples.median], s=40, color=colour, edgecolor="black", zorder=3)
    marked = result.culprit["sha"] if result.culprit else result.best_guess
    if marked:
        order = next((r.order for r in _rows(result) if r.sha == marked), None)
        if order is not None:
            label = "first bad" if result.culprit else "best guess"
            ax.axvline(order - 0.5, color="black", lw=1, ls=":", label=f"{label} {marked[:10]}")
    ax.set_xlabel(f"commit order (0 = GOOD, {result.commits_total} = BAD)")
    # The metric's description can be long (column, case and file): it goes in
    # the title, where there is room, and the axis says only the direction.
    ax.set_ylabel("higher is better" if result.higher_is_better else "lower is better")
    ax.set_title(textwrap.fill(f"perfci bisect: {result.metric}", 90), fontsize=10)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
