"""Renderers for ``perfci run``: measured results in, text out.

Each renderer takes the run's :class:`~perfci.model.CaseResult` values, its
:class:`~perfci.model.Environment` and the suite name, and returns text; none
prints. JSON carries the same cells the results CSV does.
"""
from __future__ import annotations

import io
import json
import statistics
from typing import Sequence

from perfci.escape import md_text, term_text
from perfci.model import CaseResult, Environment
from perfci.results import result_to_row
from perfci.roofline import ceiling_for, throughput

HEADERS = ("kernel", "shape", "dtype", "µs", "spread", "TFLOP/s", "TB/s", "% roof", "MHz", "status")
NUMERIC = ("µs", "spread", "TFLOP/s", "TB/s", "% roof", "MHz")


def _spread(result: CaseResult) -> str:
    """(max - min) / median of the repeat medians: how much the repeats agree."""
    reps = [r.median_us for r in result.repeats]
    median = result.median_us
    if len(reps) < 2 or not median:
        return ""
    return f"±{50.0 * (max(reps) - min(reps)) / median:.1f}%"


def _clock(result: CaseResult) -> str:
    clocks = [r.sclk_mhz for r in result.repeats if r.sclk_mhz is not None]
    return f"{statistics.median(clocks):.0f}" if clocks else ""


def table_cells(result: CaseResult, arch: str) -> tuple[str, ...]:
    spec, median = result.spec, result.median_us
    status = result.status
    if status != "ok" and result.message:
        status = f"{status}: {' '.join(result.message.split())[:70]}"
    if not median:
        return (spec.label, spec.shape, spec.dtype, "", "", "", "", "", _clock(result), status)
    tp = throughput(spec, median, ceiling_for(arch, spec.dtype))
    roof = "" if tp.roofline_pct is None else f"{tp.roofline_pct:.1f}"
    return (spec.label, spec.shape, spec.dtype, f"{median:.4f}", _spread(result), f"{tp.tflops:.3f}",
            f"{tp.tbps:.4f}", roof, _clock(result), status)


def render_table(results: Sequence[CaseResult], env: Environment, suite: str, width: int = 160) -> str:
    from rich.console import Console  # lazy: rich
    from rich.markup import escape  # lazy: rich
    from rich.table import Table  # lazy: rich

    table = Table(title=f"perfci run {term_text(suite)}", show_edge=False, pad_edge=False)
    for header in HEADERS:
        table.add_column(header, justify="right" if header in NUMERIC else "left", overflow="fold")
    for result in results:
        # a label like "splitk_decode[m_fast=1]" is text, not rich markup (which would eat the brackets)
        # (and a control character in it is written out, never sent to the terminal)
        table.add_row(*(escape(term_text(cell)) for cell in table_cells(result, env.arch)))
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False).print(table)
    return buf.getvalue()


def render_markdown(results: Sequence[CaseResult], env: Environment, suite: str) -> str:
    lines = [f"### perfci run {md_text(suite)}", ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "|".join("---:" if h in NUMERIC else "---" for h in HEADERS) + "|")
    for result in results:
        cells = [md_text(c) for c in table_cells(result, env.arch)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_json(results: Sequence[CaseResult], env: Environment, suite: str) -> str:
    rows = [result_to_row(r, env, suite, *(ceiling_for(env.arch, r.spec.dtype) or (None, None)))
            for r in results]
    summary = {"cases": len(results), "status": status_counts(results)}
    return json.dumps({"summary": summary, "cases": rows}, indent=2) + "\n"


RENDERERS = {"table": render_table, "markdown": render_markdown, "json": render_json}


def status_counts(results: Sequence[CaseResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return counts


def progress_line(index: int, total: int, result: CaseResult) -> str:
    """One line per finished case, as a CI log shows it."""
    spec, median = result.spec, result.median_us
    line = f"[{index + 1}/{total}] {spec.label} {spec.shape} {spec.dtype}: "
    line += f"{median:.4f} µs" if median else result.status
    if result.status != "ok":
        line += f" ({result.status}: {' '.join(result.message.split())[:120]})"
    return term_text(line)
