"""Renderers for a :class:`perfci.compare.comparison.Comparison`: each returns text, none prints.

``table`` (terminal), ``markdown`` (GitHub step summary / PR comment), ``json``
and ``csv``; :func:`plot` writes a forest plot PNG with matplotlib's Agg backend.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict

from perfci.compare.comparison import CaseComparison, Comparison
from perfci.compare.explain import explain_json, explain_lines
from perfci.compare.identity import identity_lines
from perfci.escape import csv_cell, md_code, md_text, term_text
from perfci.verdict import CASE_VERDICTS, Verdict

MARK = {Verdict.REGRESSED: "!!", Verdict.BROKEN: "XX", Verdict.IMPROVED: "++", Verdict.INCONCLUSIVE: "??",
        Verdict.UNCHANGED: "~", Verdict.FIXED: "ok", Verdict.SKIPPED: "-", Verdict.ADDED: "+", Verdict.REMOVED: "-",
        Verdict.CONFIG_FLIP: "<>"}
# ratio is the estimate [ci_low, ci_high] is the interval of; raw_ratio the medians' cur/base, labelled raw.
CSV_FIELDS = ("kernel", "shape", "dtype", "verdict", "ratio", "ci_low", "ci_high", "raw_ratio",
              "p_value", "q_value", "floor_pct", "base_us", "cur_us", "n_base", "n_cur",
              "clock_exponent", "clock_normalized", "weight", "base_status", "cur_status", "reason",
              "spread_base_pct", "spread_cur_pct", "disturbed", "clock_space")
# What the JSON shows of the suite shift (perfci.verdict.SuiteShift), in this order.
SUITE_FIELDS = ("memory_pct", "compute_pct", "overall_pct", "method", "clock_normalized", "verdict", "floor_pct",
                "time_pct")


def _pct(r: float | None) -> str:
    return "" if r is None else f"{100.0 * (r - 1.0):+.1f}%"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "" if x is None else format(x, fmt)


def _us(x: float | None) -> str:
    """A time as people write it: 1834, 248.3, 14.75, 0.912 (never 1.83e+03)."""
    if x is None:
        return ""
    return f"{x:.0f}" if x >= 1000 else f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def _throughput(c: CaseComparison) -> tuple[str, str]:
    tflops = "" if c.tflops is None else f"{c.tflops:.1f}" if c.tflops >= 1 else f"{c.tflops:.3f}"
    return tflops, "" if c.roofline_pct is None else f"{c.roofline_pct:.0f}%"


def _ci(c: CaseComparison) -> str:
    if c.ci_low is None or c.ci_high is None:
        return ""
    if c.ci_low == c.ci_high:
        return "(point)"
    return f"[{_pct(c.ci_low)}, {_pct(c.ci_high)}]"


def _headline(cmp: Comparison) -> str:
    s = cmp.summary.counts
    parts = [f"{s[v]} {v}" for v in CASE_VERDICTS if s[v]]
    return ", ".join(parts) or "no cases"


def _summary_lines(cmp: Comparison) -> list[str]:
    sm = cmp.summary
    lines = [f"verdicts: {_headline(cmp)}", *identity_lines(cmp)]
    if sm.geomean_raw_ratio is not None:
        raw = f"geomean cur/base, raw: {sm.geomean_raw_ratio:.4f} ({_pct(sm.geomean_raw_ratio)})"
        lines.append(f"{raw}; judged (after clock and common mode): {sm.geomean_ratio:.4f} "
                     f"({_pct(sm.geomean_ratio)})" if sm.geomean_ratio is not None else raw)
    if sm.weighted_speedup is not None:
        lines.append(f"time-weighted speedup: {sm.weighted_speedup:.4f}x (>1 is faster)")
    su = cmp.suite
    if su.verdict not in (Verdict.NOT_JUDGED, Verdict.UNCHANGED):
        lines.append(f"suite-wide shift: {su.verdict} (floor {su.floor_pct:g}%)")
    return lines


def render_table(cmp: Comparison) -> str:
    """Fixed-width text for a terminal; worst cases first."""
    header = ("", "kernel", "shape", "dtype", "base us", "cur us", "TFLOP/s", "roof", "raw", "judged",
              "95% CI", "q", "floor", "verdict")
    rows = [header]
    for c in cmp.cases:
        rows.append((MARK[c.verdict], term_text(c.kernel), term_text(c.shape), term_text(c.dtype), _us(c.base_us),
                     _us(c.cur_us),
                     *_throughput(c), _pct(c.raw_ratio), _pct(c.ratio), _ci(c), _num(c.q_value, ".2g"),
                     "" if c.floor_pct is None else f"{c.floor_pct:.1f}%", c.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    out = [f"perfci compare: {cmp.base_path} -> {cmp.cur_path} ({cmp.arch or 'arch unknown'})"]
    for i, r in enumerate(rows):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    out.append("")
    out.extend(_summary_lines(cmp))
    out.extend(f"note: {n}" for n in cmp.notes)
    for c in cmp.cases:
        out.extend(([""] + explain_lines(c)) if c.explain else [])
    # Names, paths, notes and explanations come from the files compared: no escape sequence of theirs
    # reaches the terminal (the cells were rewritten before their widths were taken).
    return "\n".join(term_text(line) for line in out) + "\n"


def render_markdown(cmp: Comparison, max_rows: int = 50) -> str:
    """GitHub-flavoured markdown: headline, the cases that matter, then the rest folded."""
    icon = (":x:" if cmp.regressed else ":warning:" if cmp.inconclusive else ":white_check_mark:")
    out = [f"### {icon} perfci compare: {_headline(cmp)}", ""]
    out.extend(f"- {md_text(line)}" for line in _summary_lines(cmp)[1:])
    out.extend(f"- {md_text(n)}" for n in cmp.notes)
    out.append("")

    def table(cases) -> list[str]:
        lines = ["| verdict | kernel | shape | dtype | base µs | cur µs | TFLOP/s | % roof | raw | judged | "
                 "95% CI | q | floor |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
        for c in cases[:max_rows]:
            lines.append("| " + " | ".join((
                f"**{c.verdict}**" if c.verdict in (Verdict.REGRESSED, Verdict.BROKEN) else c.verdict,
                md_code(c.kernel, table=True), md_text(c.shape), md_text(c.dtype), _us(c.base_us), _us(c.cur_us),
                *_throughput(c),
                _pct(c.raw_ratio), _pct(c.ratio), _ci(c), _num(c.q_value, ".2g"),
                "" if c.floor_pct is None else f"{c.floor_pct:.1f}%")) + " |")
        if len(cases) > max_rows:
            lines.append(f"| … | {len(cases) - max_rows} more |" + " |" * 11)
        return lines

    notable = [c for c in cmp.cases if c.verdict != Verdict.UNCHANGED]
    quiet = [c for c in cmp.cases if c.verdict == Verdict.UNCHANGED]
    if notable:
        out.extend(table(notable))
        out.append("")
    if quiet:
        out.append(f"<details><summary>{len(quiet)} unchanged</summary>\n")
        out.extend(table(quiet))
        out.append("\n</details>")
    out.extend(_md_explain(cmp))
    return "\n".join(out) + "\n"


def _md_explain(cmp: Comparison) -> list[str]:
    """Per explained case: its reading, and base vs cur folded under it."""
    out = []
    for c in cmp.cases:
        if c.explain is None:
            continue
        out += ["", f"**why {md_code(c.kernel)} {md_text(c.shape)} {md_text(c.dtype)} {c.verdict}:** "
                    f"{md_text(c.explain.reading)}",
                "", "<details><summary>base vs cur</summary>", "", "| | base | cur |", "|---|---|---|"]
        out += [f"| {'**' + md_text(w) + '**' if b != v else md_text(w)} | {md_text(b)} | {md_text(v)} |"
                for w, b, v in c.explain.sides]
        out += ["", "</details>"]
    return out


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def to_dict(cmp: Comparison) -> dict:
    cases = [{**{k: _clean(v) for k, v in asdict(c).items()}, "explain": explain_json(c.explain)}
             for c in cmp.cases]
    return {
        "base": cmp.base_path, "cur": cmp.cur_path, "arch": cmp.arch,
        Verdict.REGRESSED: cmp.regressed, Verdict.INCONCLUSIVE: cmp.inconclusive,
        "threshold_only": cmp.threshold_only,
        "summary": {**asdict(cmp.summary), "worst": [list(k) for k in cmp.summary.worst]},
        "suite_shift": cmp.suite.to_dict(SUITE_FIELDS),
        "profile": asdict(cmp.profile),
        "options": asdict(cmp.options),
        "notes": list(cmp.notes),
        "identity": {f: {"base": b, "cur": c} for f, b, c in cmp.identity},
        "cases": cases,
    }


def render_json(cmp: Comparison) -> str:
    return json.dumps(to_dict(cmp), indent=2) + "\n"


def render_csv(cmp: Comparison) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for c in cmp.cases:
        d = asdict(c)
        # A name such as =HYPERLINK(...) is text to a spreadsheet, not a formula (perfci.escape.csv_cell).
        w.writerow({k: ("" if d[k] is None else csv_cell(d[k])) for k in CSV_FIELDS})
    return buf.getvalue()


RENDERERS = {"table": render_table, "markdown": render_markdown, "json": render_json, "csv": render_csv}


PLOT_ROWS = 40  # beyond this many timed cases, the plot shows the changed ones only


def plot(cmp: Comparison, out_path: str) -> None:
    """Forest plot: judged change and interval per timed case, the noise floor shaded.

    Worst first; with more than PLOT_ROWS timed cases only those not `unchanged`
    (an 84-case suite stays readable). The x axis is clipped to the floors and the
    bulk of the intervals; a point or interval beyond it ends in an arrow with its value.
    """
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib
    from matplotlib.lines import Line2D  # lazy: matplotlib
    from matplotlib.patches import Patch  # lazy: matplotlib

    timed = [c for c in cmp.cases if c.ratio is not None]
    changed = [c for c in timed if c.verdict != Verdict.UNCHANGED]
    cases = changed if len(timed) > PLOT_ROWS and changed else timed
    hidden = len(timed) - len(cases)
    colors = {Verdict.REGRESSED: "tab:red", Verdict.IMPROVED: "tab:green", Verdict.INCONCLUSIVE: "tab:orange",
              Verdict.UNCHANGED: "tab:gray"}
    floors = [c.floor_pct for c in cases if c.floor_pct]
    limit = max([3.0 * max(floors, default=1.0), 5.0]
                + [abs(100.0 * (c.ratio - 1.0)) * 1.15 for c in cases if abs(c.ratio - 1.0) < 0.25])
    limit = min(limit, 30.0)
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.22 * len(cases) + 1.6)))
    for y, c in enumerate(reversed(cases)):
        pct = 100.0 * (c.ratio - 1.0)
        lo, hi = 100.0 * (c.ci_low - 1.0), 100.0 * (c.ci_high - 1.0)
        col = colors.get(c.verdict, "black")
        if c.floor_pct:
            ax.fill_between([-c.floor_pct, c.floor_pct], y - 0.45, y + 0.45, color="0.9", lw=0)
        ax.plot([max(lo, -limit), min(hi, limit)], [y, y], color=col, lw=1.5)
        if -limit <= pct <= limit:
            ax.plot([pct], [y], "o", color=col, ms=4)
        for edge, beyond, marker in ((limit, max(pct, hi) > limit, ">"), (-limit, min(pct, lo) < -limit, "<")):
            if beyond:  # clipped: an arrow at the edge, and the point's value beside it
                ax.plot([edge], [y], marker, color=col, ms=6)
                ax.annotate(f"{pct:+.0f}%", (edge, y), xytext=(-4 if edge > 0 else 4, 4),
                            textcoords="offset points", fontsize=6, ha="right" if edge > 0 else "left")
    ax.axvline(0.0, color="black", lw=0.6)
    ax.set_xlim(-limit * 1.05, limit * 1.05)
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels([f"{c.kernel} {c.shape} {c.dtype}  ({_us(c.cur_us)} µs)" for c in reversed(cases)],
                       fontsize=7)
    ax.set_xlabel("cur vs base, % (clock-normalized, common mode removed)")
    shown = [v for v in (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.INCONCLUSIVE, Verdict.UNCHANGED)
             if any(c.verdict == v for c in cases)]
    ax.legend(handles=[Line2D([], [], color=colors[v], marker="o", lw=1.5, label=v) for v in shown]
              + [Patch(color="0.9", label="noise floor")], fontsize=7, loc="lower right")
    device = next((b or c for f, b, c in cmp.identity if f == "device" and (b or c)), "") or cmp.arch
    title = f"perfci compare{' on ' + device if device else ''}: {_headline(cmp)}"
    if hidden:
        title += f" ({hidden} unchanged not shown)"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
