"""What a history store holds, as plain data, and the per-case series built from it.

Pure: no files, no printing. :mod:`perfci.history.store` reads and writes the
files; everything else (change points, pooled baselines, plots, reports, the
Otava export) works on these values.
"""
from __future__ import annotations

import hashlib
import math
import re
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

from perfci.errors import PerfciError
from perfci.model import ResultRow, ResultTable
from perfci.roofline import case_clock_exponent

STORE_FORMAT = "perfci-history"
# 1: manifest + runs/<run id>.csv, each file a perfci results CSV as `perfci run` wrote it.
STORE_SCHEMA = 1
# The columns that say where and with what a run was measured; kept per run.
ENV_COLUMNS = ("git_sha", "timestamp", "device_name", "arch", "vendor", "driver", "runtime",
               "torch", "triton", "perfci", "host", "suite")


@dataclass(frozen=True)
class Manifest:
    """The store's identity: which device its runs come from, and its schema."""

    device_name: str
    arch: str
    schema: int = STORE_SCHEMA
    format: str = STORE_FORMAT
    created: str = ""

    def to_dict(self) -> dict:
        return {"format": self.format, "schema": self.schema, "device_name": self.device_name,
                "arch": self.arch, "created": self.created,
                "layout": "runs/<run id>.csv: one perfci results CSV per run, never rewritten"}


@dataclass(frozen=True)
class RunInfo:
    """Where, when and with what one run was measured (its CSV's environment columns)."""

    run_id: str
    suite: str
    git_sha: str
    timestamp: str  # ISO 8601 as the CSV has it
    when: datetime  # the same, parsed, in UTC: the store's order
    device_name: str
    arch: str
    driver: str = ""
    runtime: str = ""
    torch: str = ""
    triton: str = ""
    host: str = ""
    perfci: str = ""

    @property
    def short_sha(self) -> str:
        return self.git_sha[:12] if self.git_sha else "-"


@dataclass(frozen=True)
class Run:
    info: RunInfo
    table: ResultTable


@dataclass(frozen=True)
class History:
    """A loaded store: its manifest and its runs, oldest first."""

    path: str
    manifest: Manifest
    runs: tuple[Run, ...]

    @property
    def suites(self) -> tuple[str, ...]:
        return tuple(sorted({r.info.suite for r in self.runs}))


@dataclass(frozen=True)
class Point:
    """One ok run of one case."""

    index: int  # position in the case's series (0 = its oldest ok run)
    run_id: str
    sha: str
    timestamp: str
    median_us: float
    repeats_us: tuple[float, ...]
    driver: str = ""
    sclk_mhz: tuple[float | None, ...] = ()  # per repeat, as recorded (empty: no clock telemetry)
    throttled: tuple[bool | None, ...] = ()  # per repeat: under a power or thermal limit
    run_clock_mhz: float | None = None  # the device's clock in this run (see run_clock_mhz())


@dataclass(frozen=True)
class CaseSeries:
    kernel: str
    shape: str
    dtype: str
    suite: str
    points: tuple[Point, ...]
    exponent: float | None = None  # clock exponent (perfci.roofline.clock_exponent); None: unknown

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.shape, self.dtype)

    @property
    def label(self) -> str:
        return f"{self.kernel} {self.shape} {self.dtype}"

    @property
    def medians(self) -> tuple[float, ...]:
        return tuple(p.median_us for p in self.points)


# --------------------------------------------------------------------------- run identity


def parse_timestamp(text: str, where: str, field: str = "column 'timestamp'") -> datetime:
    """ISO 8601 -> an aware UTC datetime; a naive time is taken as UTC (perfci writes UTC)."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PerfciError(f"{where}: {field}: '{text}' is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:limit] or "x"


def run_id(when: datetime, suite: str, git_sha: str, host: str, device_name: str) -> str:
    """The run's file name in the store, without ``.csv``.

    It starts with the UTC time so a directory listing is the store's order,
    and it is derived from the run's identity (time, suite, sha, host, device),
    not its contents: the same run added twice, even re-saved, gets the same
    name and is refused, while two different runs can never collide.
    """
    ident = "\0".join((when.isoformat(), suite, git_sha, host, device_name))
    digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return f"{when.strftime('%Y%m%dT%H%M%SZ')}_{_slug(suite or 'suite')}_{_slug(git_sha[:12] or 'nosha')}_{digest}"


def run_info(path: str, table: ResultTable, cells: Sequence[Mapping[str, str]]) -> RunInfo:
    """A run's identity from its CSV's environment columns; one line when they are missing or mixed."""
    if table.format != "perfci":
        raise PerfciError(f"{path}: a {table.format} file has no device, sha or time columns; "
                          f"only perfci results CSVs go into a history")
    values: dict[str, str] = {}
    for column in ENV_COLUMNS:
        seen = {c.get(column, "") for c in cells}
        if len(seen) > 1:
            raise PerfciError(f"{path}: column '{column}' differs between rows ({', '.join(sorted(seen)[:3])}); "
                              f"a run is one `perfci run`, measured on one device at one time")
        values[column] = seen.pop() if seen else ""
    for column in ("device_name", "arch", "timestamp"):
        if not values[column]:
            raise PerfciError(f"{path}: column '{column}' is empty or missing; a history needs to know "
                              f"where and when each run was measured")
    when = parse_timestamp(values["timestamp"], path)
    return RunInfo(
        run_id=run_id(when, values["suite"], values["git_sha"], values["host"], values["device_name"]),
        suite=values["suite"], git_sha=values["git_sha"], timestamp=values["timestamp"], when=when,
        device_name=values["device_name"], arch=values["arch"], driver=values["driver"],
        runtime=values["runtime"], torch=values["torch"], triton=values["triton"], host=values["host"],
        perfci=values["perfci"])


# --------------------------------------------------------------------------- series


def _valid_clocks(clocks: Sequence[float | None]) -> list[float]:
    return [float(c) for c in clocks if c is not None and math.isfinite(c) and c > 0]


def power_limited(throttled: Sequence[bool | None]) -> bool:
    """Most repeats ran under a power or thermal limit (compare's rule, per night)."""
    flags = [t for t in throttled if t is not None]
    return bool(flags) and sum(flags) * 2 > len(flags)


def run_clock_mhz(rows: Sequence[ResultRow]) -> float | None:
    """The device's core clock in one run: the median of its cases' median clocks.

    Over the power-limited cases when at least three ran so (under a power cap
    the device, not each kernel, sets the clock they share), else over every
    clocked case; ``None`` with fewer than three. A power-limited case's night is
    moved by this clock rather than its own: its own clock falls *because* the
    kernel draws more power, and dividing that out would hide its regression.
    """
    clocked, limited = [], []
    for row in rows:
        valid = _valid_clocks(row.sclk_mhz) if row.status == "ok" else []
        if valid:
            clocked.append(statistics.median(valid))
            if power_limited(row.throttled):
                limited.append(clocked[-1])
    reference = limited if len(limited) >= 3 else clocked
    return float(statistics.median(reference)) if len(reference) >= 3 else None


def case_series(runs: Iterable[Run]) -> tuple[CaseSeries, ...]:
    """Every case's ok runs in store order, the cases in the order they first appear.

    Failed, skipped or timed-out runs of a case are not points: a change point
    is about speed, and compare reports a broken case on its own.
    """
    points: dict[tuple[str, str, str], list[Point]] = {}
    suites: dict[tuple[str, str, str], str] = {}
    exponents: dict[tuple[str, str, str], float | None] = {}
    for run in runs:
        device_clock = run_clock_mhz(run.table.rows)
        for row in run.table.rows:
            if row.status != "ok" or not row.median_us:
                continue
            series = points.setdefault(row.key, [])
            suites.setdefault(row.key, run.info.suite)
            if exponents.get(row.key) is None:
                exponents[row.key] = case_clock_exponent(run.info.arch, row.dtype, row.m, row.n, row.k)
            series.append(Point(index=len(series), run_id=run.info.run_id, sha=run.info.git_sha,
                                timestamp=run.info.timestamp, median_us=float(row.median_us),
                                repeats_us=tuple(row.repeats_us) or (float(row.median_us),),
                                driver=run.info.driver, sclk_mhz=tuple(row.sclk_mhz),
                                throttled=tuple(row.throttled), run_clock_mhz=device_clock))
    return tuple(CaseSeries(k[0], k[1], k[2], suites[k], tuple(p), exponents.get(k)) for k, p in points.items())


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))
