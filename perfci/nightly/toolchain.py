"""Whether tonight's toolchain moved from the baseline's: driver, ROCm/CUDA runtime, torch, Triton.

A compiler or driver upgrade is the first suspect for a step on a GPU (on AMD
above all), so the night's reports say it at the top, beside any regression.
Pure: two environments (column -> value) in, the differences out.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from perfci.history.model import RunInfo
from perfci.model import column_mode


COLUMNS = (("driver", "driver"), ("runtime", "runtime"), ("torch", "torch"), ("triton", "Triton"))


def environment(cells: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The run's value of each toolchain column: the most common non-empty one among its rows."""
    rows = list(cells)
    values = {column: column_mode(rows, column, skip_empty=True) for column, _ in COLUMNS}
    return {column: value for column, value in values.items() if value}


def of_run(info: RunInfo) -> dict[str, str]:
    """:func:`environment` of a stored run, from its identity (its RunInfo), which holds
    each column's one value."""
    return {column: getattr(info, column) for column, _ in COLUMNS if getattr(info, column)}


def moved(base: Mapping[str, str], tonight: Mapping[str, str]) -> tuple[tuple[str, str, str], ...]:
    """(what, baseline's, tonight's) for each column both sides recorded and that differs."""
    return tuple((name, base[col], tonight[col]) for col, name in COLUMNS
                 if base.get(col) and tonight.get(col) and base[col] != tonight[col])


def line(changes: Iterable[tuple[str, str, str]]) -> str:
    """``toolchain moved since the baseline: torch 2.11.0 -> 2.12.0, Triton 3.6.0 -> 3.7.0`` ('' when none)."""
    parts = [f"{what} {base} -> {tonight}" for what, base, tonight in changes]
    return ("toolchain moved since the baseline: " + ", ".join(parts)
            + " (a compiler or driver upgrade is the first suspect for any step tonight)") if parts else ""
