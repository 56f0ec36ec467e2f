"""Renderers for ``perfci run``: flattened result rows in, text out."""
from __future__ import annotations

import io
import json
import statistics
from typing import Sequence

HEADERS = ("kernel", "shape", "dtype", "µs", "spread", "TFLOP/s", "TB/s", "% roof", "MHz", "status")


def _spread(row: dict[str, str]) -> str:
    """(max - min) / median of the repeat medians: how much the repeats agree."""
    reps = [float(v) for v in row.get("repeats_us", "").split(";") if v]
    if len(reps) < 2 or not row.get("median_us"):
        return ""
    return f"±{50.0 * (max(reps) - min(reps)) / float(row['median_us']):.1f}%"


def _clock(row: dict[str, str]) -> str:
    clocks = [float(v) for v in row.get("sclk_mhz", "").split(";") if v]
    return f"{statistics.median(clocks):.0f}" if clocks else ""


def table_cells(row: dict[str, str]) -> tuple[str, ...]:
    status = row["status"]
    if status != "ok" and row.get("message"):
        status = f"{status}: {row['message'][:70]}"
    return (row["kernel"], row["shape"], row["dtype"], row.get("median_us", ""), _spread(row),
            row.get("tflops", ""), row.get("tbps", ""), row.get("roofline_pct", ""), _clock(row), status)


def render_table(rows: Sequence[dict[str, str]], title: str = "", width: int = 160) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None, show_edge=False, pad_edge=False)
    for header in HEADERS:
        numeric = header in ("µs", "spread", "TFLOP/s", "TB/s", "% roof", "MHz")
        table.add_column(header, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        table.add_row(*table_cells(row))
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False).print(table)
    return buf.getvalue()


def render_markdown(rows: Sequence[dict[str, str]], title: str = "") -> str:
    lines = [f"### {title}", ""] if title else []
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "|".join("---:" if h not in ("kernel", "shape", "dtype", "status") else "---"
                                for h in HEADERS) + "|")
    for row in rows:
        cells = [c.replace("|", "\\|") for c in table_cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_json(rows: Sequence[dict[str, str]], summary: dict) -> str:
    return json.dumps({"summary": summary, "cases": list(rows)}, indent=2) + "\n"


def summarize(rows: Sequence[dict[str, str]]) -> dict:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {"cases": len(rows), "status": counts}
