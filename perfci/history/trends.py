"""Trend PNGs of checked cases written into a folder: what ``perfci history plot`` / ``report`` and the
nightly's report stage share.

A case whose trend cannot be drawn (:func:`perfci.history.plot.trend_png_or_warning`)
is a warning returned by its slug, never a failed command or night.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from perfci.history.check import CaseCheck
from perfci.history.model import History
from perfci.history.plot import trend_png_or_warning
from perfci.history.report import case_slug
from perfci.history.store import write_bytes_atomic


@dataclass(frozen=True)
class Drawn:
    written: tuple[str, ...] = ()  # file names written into the folder (<slug>.png)
    warnings: dict[str, str] = field(default_factory=dict)  # slug -> why its trend was not drawn


def write_trends(history: History, cases: Sequence[CaseCheck], folder: str | Path) -> Drawn:
    """Each case's trend as ``FOLDER/<slug>.png``, drawn in the space it was checked in.

    Raises:
        PerfciError: a PNG could not be written (the folder is not writable).
    """
    written, warnings = [], {}
    for case in cases:
        slug = case_slug(case.series)
        png, warning = trend_png_or_warning(case.series, case.detection,
                                            f"{history.manifest.device_name}, {case.series.suite}", case.judged)
        if png is None:
            warnings[slug] = warning
            continue
        write_bytes_atomic(Path(folder) / f"{slug}.png", png)
        written.append(f"{slug}.png")
    return Drawn(tuple(written), warnings)
