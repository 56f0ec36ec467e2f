"""A night's reports as text: summary.md (the job summary), issue.md (the issue body), verdict.json.

Pure: an :class:`~perfci.nightly.core.Outcome` and its
:class:`~perfci.nightly.core.NightVerdict` in, text out. Numbers are written for
people: microseconds without scientific notation, changes in percent.
"""
from __future__ import annotations

import json
import math
import re
from typing import Sequence

from perfci.escape import md_block, md_code, md_text
from perfci.history.canary import tonight_line
from perfci.history.triage import TriageState
from perfci.nightly import core, toolchain, triaged
from perfci.verdict import Verdict

ICON = {0: ":white_check_mark:", 1: ":x:", 2: ":no_entry:", 3: ":warning:", 4: ":boom:", 130: ":stop_sign:"}
MAX_ROWS = 60
MAX_EXPLAINED = 10  # cases with a side-by-side in the reports; compare.json has every one


def us(value: float | None) -> str:
    """1834 us, 18.3 us, 2.52 us: never 1.83e+03."""
    if value is None or not math.isfinite(value):
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def pct(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return ""
    return f"{100.0 * (ratio - 1.0):+.1f}%"


def interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ""
    return f"{pct(low)} .. {pct(high)}"


def _cell(text: object, limit: int | None = None) -> str:
    """Text from a run, an error or a commit, as markdown that shows it and nothing more (perfci.escape)."""
    return md_text(" ".join(str(text).split())[:limit])


def _case(key: Sequence[str], table: bool = True) -> str:
    return md_code(" ".join(key), table=table)


def title(o: core.Outcome) -> str:
    """The marker an issue is found by: ``perfci-nightly ARCH SUITE``."""
    return f"perfci-nightly {o.arch or 'unknown'} {o.suite or 'unknown'}"


def _stages(o: core.Outcome) -> list[str]:
    out = ["| stage | status | seconds | detail |", "|---|---|---:|---|"]
    for s in o.stages:
        status = f"**{_cell(s.status)}** ({_cell(s.error)})" if s.status == core.FAILED else _cell(s.status)
        out.append(f"| {_cell(s.name)} | {status} | {s.seconds:.1f} | {_cell(s.detail)} |")
    return out


def _compare_table(o: core.Outcome) -> list[str]:
    acked = triaged.keys_in(o.triage, TriageState.ACKNOWLEDGED)  # under their own heading (_triaged)
    cases = [c for c in o.cases or () if c.key not in acked]
    changed = [c for c in cases if c.verdict != Verdict.UNCHANGED]
    quiet = len(cases) - len(changed)
    if not changed:
        other = " other than the acknowledged" if acked else ""
        return [f"Every case{other} unchanged ({quiet})."] if cases else []
    out = ["| verdict | case | base µs | tonight µs | change | 95% CI | why |", "|---|---|---:|---:|---:|---|---|"]
    for c in changed[:MAX_ROWS]:
        verdict = f"**{c.verdict}**" if c.verdict in (Verdict.REGRESSED, Verdict.BROKEN, Verdict.REMOVED) else c.verdict
        out.append(f"| {verdict} | {_case(c.key)} | {us(c.base_us)} | {us(c.cur_us)} | {pct(c.ratio)} | "
                   f"{interval(c.ci_low, c.ci_high)} | {_cell(c.reason, 120)} |")
    if len(changed) > MAX_ROWS:
        out.append(f"| … | {len(changed) - MAX_ROWS} more | | | | | |")
    if quiet:
        out += ["", f"{quiet} case(s) unchanged."]
    return out


def _confirm_table(o: core.Outcome) -> list[str]:
    out = ["| verdict | case | tonight vs good | 95% CI | rounds |", "|---|---|---:|---|---:|"]
    for c in o.confirmed or ():
        verdict = f"**{c.verdict}**" if c.verdict in (Verdict.REGRESSED, Verdict.BROKEN) else c.verdict
        out.append(f"| {verdict} | {_case(c.key)} | {pct(c.ratio)} | {interval(c.ci_low, c.ci_high)} | "
                   f"{c.rounds} |")
    # a broken case's reason (the side, the signal, the check, the timeout): what the team acts on
    out += [f"\n- **broken** {_case(c.key, table=False)}: {_cell(c.reason)}" for c in o.confirmed or ()
            if c.verdict == Verdict.BROKEN]
    return out


def _explained(o: core.Outcome) -> list[str]:
    """compare --explain for the regressed / improved cases: the reading, then what differs."""
    cases = [c for c in o.cases or () if c.explain]
    out: list[str] = []
    for c in cases[:MAX_EXPLAINED]:
        out.append(f"- {_case(c.key, table=False)} ({_cell(c.verdict)} {pct(c.ratio)}): {_cell(c.explain)}")
        differs = [(w, b, t) for w, b, t in c.explain_sides if b != t]
        if differs:
            out += ["", "  | what | base | tonight |", "  |---|---|---|"]
            out += [f"  | {_cell(w)} | {_cell(b) or '-'} | {_cell(t) or '-'} |" for w, b, t in differs]
            out.append("")
    if len(cases) > MAX_EXPLAINED:
        out.append(f"- … {len(cases) - MAX_EXPLAINED} more in compare.json")
    return out


def _flips(o: core.Outcome) -> list[str]:
    """Each config flip: the configs launched, where and how fast, and how to pin it."""
    out: list[str] = []
    for c in [c for c in o.cases or () if c.flip]:
        out += [f"- {_cell(' '.join(c.key))}: kernel source unchanged, another config launched (not a regression, "
                f"not confirmed)", "", "  | config | ran in | µs |", "  |---|---|---:|"]
        out += [f"  | {_cell(config)} | {_cell(where)} | {us(t)} |" for config, where, t in c.flip]
        out += ["", f"  To pin it: {_cell(c.flip_pin)}", ""]
    return out


def _culprit(o: core.Outcome) -> list[str]:
    c = o.culprit
    if c is None:
        return []
    out = [f"First bad commit: {md_code(c.sha)} {_cell(c.subject)}"]
    if c.diffstat:
        out += ["", md_block(c.diffstat)]
    return out


def _identity(o: core.Outcome) -> list[str]:
    out = [f"- suite {md_code(o.suite)} on {_cell(o.device)}, commit {md_code(o.sha[:12] or 'unknown')}"]
    if o.baseline:
        out.append(f"- judged against {_cell(o.baseline)}")
    if o.good_sha and o.confirmed is not None:
        out.append(f"- confirmed against {md_code(o.good_sha[:12])}, interleaved rounds on this machine")
    return out


def _canary(o: core.Outcome) -> list[str]:
    """Tonight's canary and the detector's running rates on this device (docs/nightly.md#the-canary)."""
    if o.canary is None:
        stage = o.stage("canary")
        return [f"Not measured: {_cell(stage.detail)}"] if stage is not None and stage.detail else []
    out = [_cell(tonight_line(o.canary))]
    if o.canary_rates is not None:
        out += ["", "On this device so far (95% Wilson intervals):", ""]
        out += [f"- {_cell(line)}" for line in o.canary_rates.lines()]
    return out


def _toolchain(o: core.Outcome) -> list[str]:
    said = toolchain.line(o.toolchain)
    return [f":warning: **{_cell(said)}**", ""] if said else []


def _triaged(o: core.Outcome, level: str) -> list[str]:
    """Tonight's cases the team triaged: the acknowledged under their own heading, then the rest."""
    if not o.triage:
        return []
    words = triaged.tonight_verdicts(o.cases, o.confirmed)
    ratios = {c.key: c.ratio for c in o.cases or ()}
    out: list[str] = []
    for state, heading in ((TriageState.ACKNOWLEDGED, "Acknowledged (real, being worked on)"),
                           (None, "Triaged (perfci history triage)")):
        rows = [t for t in o.triage if (t.state == state.value if state else t.state != TriageState.ACKNOWLEDGED.value)]
        if not rows:
            continue
        out += ["", f"{level} {heading}", "", "| state | case | tonight | change | at | who | reason |",
                "|---|---|---|---:|---|---|---|"]
        for t in rows[:MAX_ROWS]:
            link = f" {md_code(t.link, table=True)}" if t.link else ""  # shown, never a live link
            out.append(f"| {t.state} | {_case(t.key)} | {words.get(t.key, '-')} | {pct(ratios.get(t.key))} | "
                       f"{md_code(t.sha[:12], table=True)} | {_cell(t.who)} | {_cell(t.reason[:200])}{link} |")
        if len(rows) > MAX_ROWS:
            out.append(f"| … | {len(rows) - MAX_ROWS} more | | | | | |")
    moved = [t for t in o.triage if t.key in set(triaged.acknowledged_moved(o.triage))]
    if moved:
        out += ["", "Acknowledged cases that moved again since they were acknowledged (against those nights alone):",
                ""]
        out += [f"- {_case(t.key, table=False)}: {_cell(t.since_ack)} {pct(t.since_ack_ratio)} "
                f"({_cell(t.since_ack_why, 200)})" for t in moved[:MAX_ROWS]]
    if triaged.issue_can_close(o.triage, o.cases, o.confirmed):
        out += ["", "Every case marked `fixed` was green tonight: the issue can close."]
    return out


def summary_md(o: core.Outcome, d: core.NightVerdict, sections: Sequence[str] = ()) -> str:
    out = [f"### {ICON.get(d.exit_code, ':grey_question:')} perfci nightly {_cell(o.suite)} on {_cell(o.device)}: "
           f"exit {d.exit_code}", "", f"**{_cell(d.headline)}**", ""]
    out += _toolchain(o)
    out += _identity(o)
    out += [f"- :warning: {_cell(w)}" for w in d.warnings]
    out += [f"- note: {_cell(n)}" for n in (*o.notes, *o.compare_notes)]
    out += ["", "#### Stages", ""] + _stages(o)
    table = _compare_table(o)
    if table:
        out += ["", "#### Compare", ""] + table
    out += _triaged(o, "####")
    if o.confirmed is not None:
        out += ["", f"#### Confirm ({md_code(o.good_sha[:12])} -> {md_code(o.sha[:12])})", ""] + _confirm_table(o)
    why = _explained(o)
    if why:
        out += ["", "#### Why (compare --explain)", ""] + why
    flips = _flips(o)
    if flips:
        out += ["", "#### Config flips (the autotuner's choice, not the code)", ""] + flips
    culprit = _culprit(o)
    if culprit:
        out += ["", "#### Culprit", ""] + culprit
    canary = _canary(o)
    if canary:
        out += ["", "#### Canary (the detector's own check; never the verdict)", ""] + canary
    if o.files:
        out += ["", "Files: " + ", ".join(md_code(f) for f in o.files)]
    return _with(out, sections)


def _with(lines: list[str], sections: Sequence[str]) -> str:
    """The report, then each extra section (the compile diff), as the nightly adds them."""
    return "\n".join(lines) + "\n" + "".join("\n" + section for section in sections)


def issue_md(o: core.Outcome, d: core.NightVerdict, sections: Sequence[str] = ()) -> str:
    # The hidden facts the triage workflow reads, near the top: the workflow keeps only an issue's first 60 kB.
    out = [f"## {_cell(title(o))}: {_cell(d.headline)}", triaged.issue_marker(o.suite, o.sha, o.cases, o.confirmed), ""]
    out += _toolchain(o)
    out += _identity(o)
    out += [f"- exit {d.exit_code}; confirmed regression: {'yes' if d.confirmed_regression else 'no'}"]
    if d.warnings:
        out += ["", "### Warnings", ""] + [f"- {_cell(w)}" for w in d.warnings]
    culprit = _culprit(o)
    out += ["", "### Culprit", ""] + (culprit or ["Not bisected: " + _bisect_detail(o)])
    if o.confirmed is not None:
        out += ["", "### Confirmed against the last good night", ""] + _confirm_table(o)
    table = _compare_table(o)
    if table:
        out += ["", "### Tonight's verdicts", ""] + table
    out += _triaged(o, "###")
    why = _explained(o)
    if why:
        out += ["", "### Why (compare --explain: base against tonight)", ""] + why
    flips = _flips(o)
    if flips:
        out += ["", "### Config flips (the autotuner's choice, not the code)", ""] + flips
    plots = [f for f in o.files if f.endswith(".png")]
    if plots:
        out += ["", "### Plots (in this night's artifact)", ""]
        out += [_file_link(f) for f in plots]
    canary = _canary(o)
    if canary:
        out += ["", "### Canary (what this device's detector resolves)", ""] + canary
    return _with(out, sections)


def _file_link(name: str) -> str:
    """A list item linking a file of the night's artifact; a name a link cannot hold as it is, as code."""
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./-]*", name) and ".." not in name:
        return f"- [{_cell(name)}]({name})"
    return f"- {md_code(name)}"


def _bisect_detail(o: core.Outcome) -> str:
    s = o.stage("bisect")
    return _cell(s.detail) if s is not None and s.detail else "bisect did not run"


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def verdict_json(o: core.Outcome, d: core.NightVerdict, more: dict | None = None) -> str:
    data = core.verdict_dict(o, d)
    data["issue_title"] = title(o)
    data.update(more or {})
    return json.dumps(_finite(data), indent=2, allow_nan=False) + "\n"


def brief(name: str, o: core.Outcome, d: core.NightVerdict) -> str:
    """A report reduced to what the workflow acts on, for when the full one could not be rendered:
    the exit code, confirmed_regression, the verdict line and the warnings (strings and numbers only)."""
    warnings = [str(w) for w in d.warnings]
    if name == "verdict.json":
        return json.dumps({"format": "perfci-nightly-verdict", "schema": 1, "brief": True,
                           "exit_code": int(d.exit_code), "confirmed_regression": bool(d.confirmed_regression),
                           "verdict": str(d.headline), "warnings": warnings, "suite": str(o.suite),
                           "device": str(o.device), "arch": str(o.arch), "sha": str(o.sha),
                           "issue_title": f"perfci-nightly {o.arch or 'unknown'} {o.suite or 'unknown'}"},
                          indent=2) + "\n"
    head = (f"### perfci nightly {md_text(o.suite)} on {md_text(o.device)}: exit {d.exit_code}"
            if name == "summary.md"
            else f"## perfci-nightly {md_text(o.arch or 'unknown')} {md_text(o.suite or 'unknown')}: "
                 f"{md_text(d.headline)}")
    return "\n".join([head, "", f"**{md_text(d.headline)}**", "",
                      f"- exit {d.exit_code}; confirmed regression: {'yes' if d.confirmed_regression else 'no'}",
                      *(f"- :warning: {md_text(w)}" for w in warnings)]) + "\n"
