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

MARK = {"regressed": "!!", "broken": "XX", "improved": "++", "inconclusive": "??",
        "unchanged": "~", "fixed": "ok", "skipped": "-", "added": "+", "removed": "-"}
CSV_FIELDS = ("kernel", "shape", "dtype", "verdict", "ratio", "adj_ratio", "ci_low", "ci_high",
              "p_value", "q_value", "floor_pct", "base_us", "cur_us", "n_base", "n_cur",
              "clock_exponent", "clock_normalized", "weight", "base_status", "cur_status", "reason", "spread_base_pct", "spread_cur_pct", "disturbed",
              "clock_space")


def _pct(r: float | None) -> str:
    return "" if r is None else f"{100.0 * (r - 1.0):+.1f}%"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "" if x is None else format(x, fmt)


def _ci(c: CaseComparison) -> str:
    if c.ci_low is None or c.ci_high is None:
        return ""
    if c.ci_low == c.ci_high:
        return "(point)"
    return f"[{_pct(c.ci_low)}, {_pct(c.ci_high)}]"


def _headline(cmp: Comparison) -> str:
    s = cmp.summary.counts
    parts = [f"{s[v]} {v}" for v in ("broken", "regressed", "inconclusive", "improved",
                                        "unchanged", "fixed", "skipped", "added", "removed") if s[v]]
    return ", ".join(parts) or "no cases"


def _summary_lines(cmp: Comparison) -> list[str]:
    sm = cmp.summary
    lines = [f"verdicts: {_headline(cmp)}"]
    if sm.geomean_ratio is not None:
        lines.append(f"geomean cur/base: {sm.geomean_ratio:.4f} ({_pct(sm.geomean_ratio)}); "
                     f"after clock and common mode: {sm.geomean_adj_ratio:.4f}"
                     if sm.geomean_adj_ratio is not None else
                     f"geomean cur/base: {sm.geomean_ratio:.4f}")
    if sm.weighted_speedup is not None:
        lines.append(f"time-weighted speedup: {sm.weighted_speedup:.4f}x (>1 is faster)")
    su = cmp.suite
    if su.verdict not in ("n/a", "unchanged"):
        lines.append(f"suite-wide shift: {su.verdict} (floor {su.floor_pct:g}%)")
    return lines


def render_table(cmp: Comparison) -> str:
    """Fixed-width text for a terminal; worst cases first."""
    header = ("", "kernel", "shape", "dtype", "base us", "cur us", "raw", "judged", "95% CI",
              "q", "floor", "verdict")
    rows = [header]
    for c in cmp.cases:
        rows.append((MARK[c.verdict], c.kernel, c.shape, c.dtype, _num(c.base_us), _num(c.cur_us),
                     _pct(c.ratio), _pct(c.adj_ratio), _ci(c), _num(c.q_value, ".2g"),
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
    return "\n".join(out) + "\n"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(cmp: Comparison, max_rows: int = 50) -> str:
    """GitHub-flavoured markdown: headline, the cases that matter, then the rest folded."""
    icon = (":x:" if cmp.regressed else ":warning:" if cmp.inconclusive else ":white_check_mark:")
    out = [f"### {icon} perfci compare: {_headline(cmp)}", ""]
    out.extend(f"- {_md_escape(line)}" for line in _summary_lines(cmp)[1:])
    out.extend(f"- {_md_escape(n)}" for n in cmp.notes)
    out.append("")

    def table(cases) -> list[str]:
        lines = ["| verdict | kernel | shape | dtype | base µs | cur µs | raw | judged | 95% CI | q | floor |",
                 "|---|---|---|---|---:|---:|---:|---:|---|---:|---:|"]
        for c in cases[:max_rows]:
            lines.append("| " + " | ".join(_md_escape(x) for x in (
                f"**{c.verdict}**" if c.verdict in ("regressed", "broken") else c.verdict,
                f"`{c.kernel}`", c.shape, c.dtype, _num(c.base_us), _num(c.cur_us),
                _pct(c.ratio), _pct(c.adj_ratio), _ci(c), _num(c.q_value, ".2g"),
                "" if c.floor_pct is None else f"{c.floor_pct:.1f}%")) + " |")
        if len(cases) > max_rows:
            lines.append(f"| … | {len(cases) - max_rows} more | | | | | | | | | |")
        return lines

    notable = [c for c in cmp.cases if c.verdict not in ("unchanged",)]
    quiet = [c for c in cmp.cases if c.verdict == "unchanged"]
    if notable:
        out.extend(table(notable))
        out.append("")
    if quiet:
        out.append(f"<details><summary>{len(quiet)} unchanged</summary>\n")
        out.extend(table(quiet))
        out.append("\n</details>")
    return "\n".join(out) + "\n"


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def to_dict(cmp: Comparison) -> dict:
    cases = [{k: _clean(v) for k, v in asdict(c).items()} for c in cmp.cases]
    return {
        "base": cmp.base_path, "cur": cmp.cur_path, "arch": cmp.arch,
        "regressed": cmp.regressed, "inconclusive": cmp.inconclusive,
        "threshold_only": cmp.threshold_only,
        "summary": {**asdict(cmp.summary), "worst": [list(k) for k in cmp.summary.worst]},
        "suite_shift": asdict(cmp.suite),
        "profile": asdict(cmp.profile),
        "options": asdict(cmp.options),
        "notes": list(cmp.notes),
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
        w.writerow({k: ("" if d[k] is None else d[k]) for k in CSV_FIELDS})
    return buf.getvalue()


RENDERERS = {"table": render_table, "markdown": render_markdown, "json": render_json, "csv": render_csv}


def plot(cmp: Comparison, out_path: str) -> None:
    """Forest plot: judged ratio and interval per timed case, the floor band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [c for c in cmp.cases if c.adj_ratio is not None]
    colors = {"regressed": "tab:red", "improved": "tab:green", "inconclusive": "tab:orange",
              "unchanged": "tab:gray"}
    height = max(2.5, 0.22 * len(cases) + 1.2)
    fig, ax = plt.subplots(figsize=(9, height))
    for y, c in enumerate(reversed(cases)):
        pct = 100.0 * (c.adj_ratio - 1.0)
        lo, hi = 100.0 * (c.ci_low - 1.0), 100.0 * (c.ci_high - 1.0)
        col = colors.get(c.verdict, "black")
        if c.floor_pct:
            ax.fill_between([-c.floor_pct, c.floor_pct], y - 0.45, y + 0.45, color="0.9", lw=0)
        ax.plot([lo, hi], [y, y], color=col, lw=1.5)
        ax.plot([pct], [y], "o", color=col, ms=4)
    ax.axvline(0.0, color="black", lw=0.6)
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels([f"{c.kernel} {c.shape} {c.dtype}" for c in reversed(cases)], fontsize=7)
    ax.set_xlabel("cur vs base, % (clock-normalized, common mode removed); grey = noise floor")
    ax.set_title(f"perfci compare: {_headline(cmp)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
