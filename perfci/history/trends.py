"""Trend PNGs of checked cases written into a folder: what ``perfci history plot`` / ``report`` and the
nightly's report stage share.

A case whose trend cannot be drawn (:func:`perfci.history.plot.trend_png_or_warning`)
is a warning returned by its slug, never a failed command or night.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from perfci.history import triage
from perfci.history.check import CaseCheck
from perfci.history.model import History
from perfci.history.plot import trend_png_or_warning
from perfci.history.report import case_slug
from perfci.history.store import write_bytes_atomic
from perfci.history.triage import TriageRecord


@dataclass(frozen=True)
class Drawn:
    written: tuple[str, ...] = ()  # file names written into the folder (<slug>.png)
    warnings: dict[str, str] = field(default_factory=dict)  # slug -> why its trend was not drawn


def write_trends(history: History, cases: Sequence[CaseCheck], folder: str | Path,
                 records: Sequence[TriageRecord] = ()) -> Drawn:
    """Each case's trend as ``FOLDER/<slug>.png``, drawn in the space it was checked in.

    RECORDS: the store's triage records; each marks the night at its commit on the trends of the cases it names.

    Raises:
        PerfciError: a PNG could not be written (the folder is not writable).
    """
    written, warnings = [], {}
    for case in cases:
        slug = case_slug(case.series)
        s = case.series
        marked = [(i, r.state.value) for i, r in triage.marks(records, s.key, s.suite, [p.sha for p in s.points])]
        png, warning = trend_png_or_warning(s, case.detection, f"{history.manifest.device_name}, {s.suite}",
                                            case.judged, marked)
        if png is None:
            warnings[slug] = warning
            continue
        write_bytes_atomic(Path(folder) / f"{slug}.png", png)
        written.append(f"{slug}.png")
    return Drawn(tuple(written), warnings)
