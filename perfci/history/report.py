"""A static HTML site of a history store: an index, a page per suite, a page per case.

Pure: every function returns the text of one page; the command line writes them
beside the PNGs of :mod:`perfci.history.plot`::

    OUT/index.html                 suites, with their cases and change points counted
    OUT/suite-<suite>.html         every case of the suite: latest time, last change, its trend
    OUT/cases/<case>.html          one case: its trend, change points, triage records and every run
    OUT/triage.html                the store's triage records and the false-alarm record
    OUT/img/<case>.png

Links are relative, so the folder can be opened from disk, served as is, or
uploaded as a CI artifact. No script, no external resource. Every page says which
space each case was judged in (cycles or time, :mod:`perfci.history.clockspace`).
A case whose trend could not be drawn gets its warning where the picture would
be (``failed``: the warnings by case slug), never a missing page.
"""
from __future__ import annotations

import hashlib
import math
import re
import statistics
from html import escape
from typing import Mapping, Sequence

from perfci.history.check import CaseCheck
from perfci.history.clockspace import space_counts
from perfci.history.model import CaseSeries, History
from perfci.history.triage import TriageRecord, marks

STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}
th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums}
.warn{color:#8a5a00}.up{color:#b00020;font-weight:600}.down{color:#0a7a2f;font-weight:600}.muted{color:#777}
img.thumb{width:320px;border:1px solid #eee}img.full{max-width:100%;border:1px solid #eee}"""


def case_slug(series: CaseSeries) -> str:
    """A file name per case; the hash keeps two cases apart that differ only in punctuation."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", series.label).strip("_")[:80]
    return f"{text}-{hashlib.sha1(series.label.encode()).hexdigest()[:6]}"


def _clock(clocks: Sequence[float | None]) -> str:
    valid = [c for c in clocks if c is not None and math.isfinite(c) and c > 0]
    return f"{statistics.median(valid):.0f}" if valid else "-"


def suite_file(suite: str) -> str:
    return f"suite-{re.sub(r'[^A-Za-z0-9_.-]+', '_', suite or 'unnamed')}.html"


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _pct(ratio: float) -> str:
    cls = "up" if ratio > 1 else "down"
    return f'<span class="{cls}">{100 * (ratio - 1):+.1f}%</span>'


def _device(history: History) -> str:
    m = history.manifest
    return f"{escape(m.device_name)} ({escape(m.arch)})"


def _space(check: CaseCheck) -> str:
    return f"<span title=\"{escape(check.judged.reason)}\">{escape(check.judged.space)}</span>"


def _trend(slug: str, label: str, css: str, prefix: str, failed: Mapping[str, str]) -> str:
    if slug in failed:
        return f"<span class=warn>warning: {escape(failed[slug])}</span>"
    return f"<img class={css} src=\"{prefix}img/{slug}.png\" alt=\"trend of {escape(label)}\">"


def index_html(history: History, checks: Sequence[CaseCheck], failed: Mapping[str, str] | None = None) -> str:
    runs = history.runs
    span = (f"{escape(runs[0].info.timestamp[:10])} to {escape(runs[-1].info.timestamp[:10])}" if runs else "none")
    body = [f"<h1>perfci history: {_device(history)}</h1>",
            f"<p>{len(runs)} runs, {span}. Store: <code>{escape(history.path)}</code>.</p>",
            "<table><tr><th>suite</th><th class=num>runs</th><th class=num>cases</th>"
            "<th class=num>cases with a change</th><th>last run</th></tr>"]
    for suite in history.suites:
        mine = [c for c in checks if c.series.suite == suite]
        suite_runs = [r for r in runs if r.info.suite == suite]
        last = suite_runs[-1].info if suite_runs else None
        body.append(f"<tr><td><a href=\"{suite_file(suite)}\">{escape(suite or '(unnamed)')}</a></td>"
                    f"<td class=num>{len(suite_runs)}</td><td class=num>{len(mine)}</td>"
                    f"<td class=num>{sum(bool(c.detection.changes) for c in mine)}</td>"
                    f"<td>{escape(last.timestamp if last else '')} <span class=muted>"
                    f"{escape(last.short_sha if last else '')}</span></td></tr>")
    body.append("</table>")
    spaces = ", ".join(f"{escape(s)}: {n}" for s, n in space_counts([c.judged for c in checks]).items() if n)
    body.append(f"<p>Cases judged in {spaces}.</p>")
    if failed:
        body.append(f"<p class=warn>warning: {len(failed)} trend(s) could not be drawn; their pages say why.</p>")
    body.append("<p><a href=\"triage.html\">Triage records and the false-alarm record</a></p>")
    body.append("<p class=muted>Change points: binary segmentation of each run's level (the mean of its fastest "
                "half of repeats) with a permutation bound (<code>perfci history check</code>), each case in "
                "cycles where its clock explains its nightly spread better than time, else in time. Written by "
                "<code>perfci history report</code>.</p>")
    return _page(f"perfci history: {history.manifest.device_name}", body)


def suite_html(history: History, suite: str, checks: Sequence[CaseCheck],
               failed: Mapping[str, str] | None = None) -> str:
    mine = [c for c in checks if c.series.suite == suite]
    # Cases with a change first, the largest last shift first: what a reader came for.
    mine.sort(key=lambda c: (not c.detection.changes,
                             -abs(c.detection.changes[-1].ratio - 1) if c.detection.changes else 0.0,
                             c.series.label))
    body = ["<p><a href=\"index.html\">&larr; all suites</a></p>",
            f"<h1>{escape(suite or '(unnamed)')} on {_device(history)}</h1>",
            "<table><tr><th>case</th><th class=num>runs</th><th class=num>latest µs</th>"
            "<th>last change</th><th>space</th><th>trend</th></tr>"]
    for c in mine:
        s, slug = c.series, case_slug(c.series)
        if c.detection.changes:
            last = c.detection.changes[-1]
            change = (f"{_pct(last.ratio)} at run {last.index} "
                      f"<span class=muted>{escape((s.points[last.index].sha or '-')[:12])}</span>")
        elif c.detection.too_short:
            change = "<span class=muted>too few runs to tell</span>"
        else:
            change = "<span class=muted>none</span>"
        body.append(f"<tr><td><a href=\"cases/{slug}.html\">{escape(s.label)}</a></td>"
                    f"<td class=num>{len(s.points)}</td><td class=num>{s.points[-1].median_us:.3f}</td>"
                    f"<td>{change}</td><td>{_space(c)}</td><td><a href=\"cases/{slug}.html\">"
                    f"{_trend(slug, s.label, 'thumb', '', failed or {})}</a></td></tr>")
    body.append("</table>")
    return _page(f"{suite}: perfci history", body)


def _records_table(records: Sequence[TriageRecord], prefix: str) -> list[str]:
    out = ["<table><tr><th>when</th><th>state</th><th>case</th><th>sha</th><th>who</th><th>reason</th>"
           "<th>link</th></tr>"]
    for r in records:
        link = (f"<a href=\"{escape(r.link)}\">{escape(r.link)}</a>" if r.link.startswith(("https://", "http://"))
                else escape(r.link))
        out.append(f"<tr><td>{escape(r.when)}</td><td>{escape(r.state.value)}</td><td><code>{escape(r.case)}"
                   f"</code></td><td><code>{escape(r.sha[:12])}</code></td><td>{escape(r.who)}</td>"
                   f"<td>{escape(r.reason)}</td><td>{link}</td></tr>")
    out.append("</table>")
    return out


def triage_html(history: History, records: Sequence[TriageRecord], false_alarms: Sequence[str]) -> str:
    """The store's triage records, newest first, and the false-alarm record (lines of `history canary`)."""
    body = ["<p><a href=\"index.html\">&larr; all suites</a></p>",
            f"<h1>Triage on {_device(history)}</h1>", "<h2>False alarms</h2><ul>"]
    body += [f"<li>{escape(line)}</li>" for line in false_alarms]
    body += ["</ul>", f"<h2>Records ({len(records)})</h2>"]
    body += (_records_table(list(reversed(records)), "") if records else
             ["<p class=muted>No triage record yet (<code>perfci history triage</code>).</p>"])
    body.append("<p class=muted>expected: the cases' pooled baseline restarts at the commit; invalid: a false "
                "alarm; acknowledged: real, being worked on; fixed: repaired.</p>")
    return _page(f"triage: perfci history {history.manifest.device_name}", body)


def case_html(history: History, check: CaseCheck, warning: str = "",
              records: Sequence[TriageRecord] = ()) -> str:
    s, det, j = check.series, check.detection, check.judged
    slug = case_slug(s)
    unit = "µs" if j.reference_mhz is None else f"µs at {j.reference_mhz:.0f} MHz"
    body = [f"<p><a href=\"../{suite_file(s.suite)}\">&larr; {escape(s.suite or '(unnamed)')}</a></p>",
            f"<h1>{escape(s.label)}</h1>", f"<p>{_device(history)}, {len(s.points)} ok runs.</p>",
            f"<p>Judged in <b>{escape(j.space)}</b>: {escape(j.reason)}.</p>",
            _trend(slug, s.label, "full", "../", {slug: warning} if warning else {})]
    if det.too_short:
        body.append(f"<p class=muted>{len(s.points)} run(s): too short to search for a change.</p>")
    elif det.changes:
        body.append("<h2>Change points</h2><table><tr><th>run</th><th>sha</th><th>date</th>"
                    f"<th class=num>before {unit}</th><th class=num>after {unit}</th><th>change</th>"
                    "<th class=num>p</th></tr>")
        for c in det.changes:
            p = s.points[c.index]
            body.append(f"<tr><td class=num>{c.index}</td><td><code>{escape(p.sha or '-')}</code></td>"
                        f"<td>{escape(p.timestamp)}</td><td class=num>{c.before:.3f}</td>"
                        f"<td class=num>{c.after:.3f}</td><td>{_pct(c.ratio)}</td>"
                        f"<td class=num>{c.p_value:.3g}</td></tr>")
        body.append("</table>")
    else:
        body.append("<p class=muted>No change point.</p>")
    mine = [r for r in records if r.names(s.key, s.suite)]
    if mine:
        body += ["<h2>Triage</h2>"] + _records_table(mine, "../")
    at = {}
    for i, r in marks(mine, s.key, s.suite, [p.sha for p in s.points]):
        at.setdefault(i, []).append(r.state.value)
    body.append("<h2>Runs</h2><table><tr><th class=num>run</th><th>date</th><th>sha</th>"
                f"<th class=num>level {unit}</th><th class=num>median µs</th><th class=num>repeats min-max µs</th>"
                "<th class=num>clock MHz</th><th>driver</th><th>triage</th></tr>")
    for p, level in zip(reversed(s.points), reversed(j.levels_us)):
        reps = p.repeats_us or (p.median_us,)
        body.append(f"<tr><td class=num>{p.index}</td><td>{escape(p.timestamp)}</td>"
                    f"<td><code>{escape((p.sha or '-')[:12])}</code></td><td class=num>{level:.3f}</td>"
                    f"<td class=num>{p.median_us:.3f}</td><td class=num>{min(reps):.3f}-{max(reps):.3f}</td>"
                    f"<td class=num>{_clock(p.sclk_mhz)}</td><td>{escape(p.driver)}</td>"
                    f"<td>{escape(', '.join(at.get(p.index, [])))}</td></tr>")
    body.append("</table>")
    return _page(f"{s.label}: perfci history", body)
