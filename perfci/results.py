"""The results CSV: perfci's one exchange format, written atomically, read strictly.

One row per case, keyed by (kernel, shape, dtype). Lists (the 7 repeat medians,
the per-repeat clocks) are ';'-separated inside one cell so the file stays a
plain table that pandas, a spreadsheet or ``grep`` can read.

FlyDSL's benchmark CSV (``op,shape,dtype,tbps,tflops,status``) is accepted
wherever a results CSV is; it carries one throughput per case and no repeats.

Every problem in an input file is reported as one :class:`PerfciError` naming
the file, the line and the column, never as a traceback.
"""
from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import sys
from typing import Iterable, Iterator, Mapping, Sequence

from perfci.errors import PerfciError
from perfci.escape import term_text
from perfci.files import atomic_write_text, read_input_text
from perfci.roofline import throughput
from perfci.model import (STATUSES, CaseResult, Environment, KernelRecord, ResultRow,  # noqa: F401 - re-exported
                          ResultTable)

# 2: clock_source, gate and stalls (2026-11-30); 3: shard, case_index and selection
# (perfci run --shard, perfci merge). Files of older schemas read as before.
# launch, resources and source (KERNEL_COLUMNS) are optional columns within schema 3:
# files without them read with no kernels recorded, and older readers skip them.
SCHEMA_VERSION = "3"

# The columns a perfci results CSV always has, in order. The ones a reader wants
# first (what, how fast) come first, so the file reads well in a terminal.
COLUMNS = (
    "kernel", "shape", "dtype", "M", "N", "K",
    "median_us", "repeats_us", "iters", "timer", "tflops", "tbps", "roofline_pct",
    "sclk_mhz", "temp_c", "power_w", "throttled", "clock_source", "gate", "stalls",
    "status", "message", "weight", "group", "rel_error",
    "arch", "device_name", "vendor", "driver", "runtime",
    "torch", "triton", "perfci", "git_sha", "host", "timestamp", "suite", "schema",
    "shard", "case_index", "selection", "launch", "resources", "source",
)
# Where a case sits in its run: `shard` is I/N (empty when the run was not
# sharded), `case_index` its 1-based place among the cases the run selected
# (suite order, after --filter/--cases, before --shard), and `selection`
# "COUNT:HASH" of that whole selection (see selection_id), so `perfci merge`
# can tell a complete set of shards from an incomplete one.
PLACEMENT_COLUMNS = ("shard", "case_index", "selection")
# The compiled kernels a case timed, one ';'-separated entry per kernel, each
# ``NAME:key=value,key=value`` (see KernelRecord): ``launch`` its grid
# (``64x8x1``) and config, ``resources`` its registers, spills, shared memory
# and occupancy (empty on the CPU interpreter), ``source`` its source's hash apart
# from the config (``NAME:HASH``, ``NAME:HASH:autotuned`` when an autotuner chose
# the config). All empty for vendor-library cases.
KERNEL_COLUMNS = ("launch", "resources", "source")
AUTOTUNED = ":autotuned"  # after a source's hash: an autotuner chose the kernel's config
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")
REQUIRED_COLUMNS = ("kernel", "shape", "dtype", "median_us", "repeats_us", "status")
FLYDSL_COLUMNS = ("op", "shape", "dtype", "tbps", "tflops", "status")
_SHAPE_RE = re.compile(r"^(\d+)x(\d+)x(\d+)")

# What a cell may hold. Beyond these a value is a corrupt file, not a measurement,
# and downstream arithmetic (ratios, logs, FLOPs as floats) would overflow.
TIME_RANGE_US = (1e-3, 1e12)  # 1 ns .. 11.6 days
CLOCK_RANGE_MHZ = (1.0, 1e5)
WEIGHT_RANGE = (1e-6, 1e6)
MAX_DIM = 2 ** 31  # M, N, K
MAX_COUNT = 10 ** 9  # iters, stalls
# Per-repeat lists compare pairs with the repeats: each has one entry per repeat
# of repeats_us, or is empty. (temp_c and power_w are read as numbers only.)
REPEAT_LISTS = ("sclk_mhz", "throttled")


# --------------------------------------------------------------------------- write


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.{digits}f}"


def _fmt_list(values: Iterable[float | None], digits: int = 4) -> str:
    values = list(values)
    if not values or all(v is None for v in values):
        return ""
    return ";".join(_fmt(v, digits) for v in values)


def result_to_row(result: CaseResult, env: Environment, suite: str = "",
                  peak_tflops: float | None = None, peak_tbps: float | None = None,
                  placement: Mapping[str, str] | None = None) -> dict[str, str]:
    """Flatten one measured case into CSV cells (strings).

    ``placement`` fills :data:`PLACEMENT_COLUMNS` (``perfci run`` passes them).
    """
    spec = result.spec
    median = result.median_us
    tflops = tbps = roofline = None
    if median:
        peaks = (peak_tflops, peak_tbps) if peak_tflops and peak_tbps else None
        tp = throughput(spec, median, peaks)
        tflops, tbps, roofline = tp.tflops, tp.tbps, tp.roofline_pct
    reps = result.repeats
    return {
        "kernel": spec.label, "shape": spec.shape, "dtype": spec.dtype,
        "M": str(spec.m), "N": str(spec.n), "K": str(spec.k),
        "median_us": _fmt(median),
        "repeats_us": _fmt_list(r.median_us for r in reps),
        "iters": str(result.iters) if result.iters else "",
        "timer": result.timer,
        "tflops": _fmt(tflops, 3), "tbps": _fmt(tbps, 4), "roofline_pct": _fmt(roofline, 1),
        "sclk_mhz": _fmt_list((r.sclk_mhz for r in reps), 0),
        "temp_c": _fmt_list((r.temp_c for r in reps), 0),
        "power_w": _fmt_list((r.power_w for r in reps), 0),
        "throttled": "" if all(r.throttled is None for r in reps) else ";".join(
            "" if r.throttled is None else str(int(r.throttled)) for r in reps),
        "clock_source": result.clock_source, "gate": result.gate,
        "stalls": str(result.stalls) if result.status == "ok" and result.timer != "host" else "",
        "status": result.status,
        "message": " ".join(result.message.split()),
        "weight": f"{spec.weight:g}", "group": spec.group,
        "rel_error": "" if result.rel_error is None else f"{result.rel_error:.2e}",
        "arch": env.arch, "device_name": env.device_name, "vendor": env.vendor,
        "driver": env.driver, "runtime": env.runtime, "torch": env.torch, "triton": env.triton,
        "perfci": env.perfci, "git_sha": env.git_sha, "host": env.host, "timestamp": env.timestamp,
        "suite": suite, "schema": SCHEMA_VERSION,
        **{column: str((placement or {}).get(column, "")) for column in PLACEMENT_COLUMNS},
        **dict(zip(KERNEL_COLUMNS, format_kernels(result.kernels))),
    }


def format_kernels(kernels: Sequence[KernelRecord]) -> tuple[str, str, str]:
    """The ``launch``, ``resources`` and ``source`` cells of a case's kernels (all "" when none)."""
    def cell(part: str) -> str:
        if not any(getattr(k, part) for k in kernels):  # none, or none read (the interpreter's resources)
            return ""
        return ";".join(f"{k.name}:" + ",".join(f"{key}={value}" for key, value in getattr(k, part))
                        for k in kernels)

    sources = ";".join(f"{k.name}:{k.source}" + (AUTOTUNED if k.autotuned else "") for k in kernels) \
        if any(k.source for k in kernels) else ""
    return cell("launch"), cell("resources"), sources


def parse_kernels(launch: str, resources: str, source: str = "") -> tuple[KernelRecord, ...]:
    """:func:`format_kernels` read back; the i-th entry of each cell is the i-th kernel.

    Raises:
        ValueError: naming the cell and what is wrong with it.
    """
    parts = {}
    for column, text in zip(KERNEL_COLUMNS, (launch, resources)):
        entries = []
        for entry in [e.strip() for e in text.split(";")] if text.strip() else []:
            name, colon, body = entry.partition(":")
            if not colon or not _WORD.match(name.strip()):
                raise ValueError(f"{column}: '{entry[:40]}' is not NAME:key=value,...")
            pairs = []
            for item in [i.strip() for i in body.split(",") if i.strip()]:
                key, eq, value = item.partition("=")
                if not eq or not _WORD.match(key) or not _VALUE.match(value):
                    raise ValueError(f"{column}: '{item[:40]}' in {name.strip()} is not key=value")
                pairs.append((key, value))
            entries.append((name.strip(), tuple(pairs)))
        parts[column] = entries
    lau, res = parts["launch"], parts["resources"]
    if lau and res and [n for n, _ in lau] != [n for n, _ in res]:
        raise ValueError("resources: names other kernels than launch")
    names = [n for n, _ in (lau or res)]
    sources = _parse_sources(source, names)
    return tuple(KernelRecord(name, lau[i][1] if lau else (), res[i][1] if res else (), *sources[i])
                 for i, name in enumerate(names))


def _parse_sources(text: str, names: Sequence[str]) -> list[tuple[str, bool]]:
    """The ``source`` cell (``NAME:HASH;...``, ``NAME:HASH:autotuned``), (hash, autotuned) per kernel
    of ``names`` (("", False) each when empty)."""
    entries = [e.strip() for e in text.split(";")] if text.strip() else []
    if not entries:
        return [("", False)] * len(names)
    out = []
    for entry in entries:
        tuned = entry.endswith(AUTOTUNED)
        name, colon, digest = (part.strip() for part in entry.removesuffix(AUTOTUNED).partition(":"))
        if not colon or not _WORD.match(name) or not _VALUE.match(digest):
            raise ValueError(f"source: '{entry[:40]}' is not NAME:HASH or NAME:HASH{AUTOTUNED}")
        out.append((name, digest, tuned))
    if [n for n, _, _ in out] != list(names):
        raise ValueError("source: names other kernels than launch")
    return [(d, t) for _, d, t in out]


def selection_id(keys: Iterable[tuple[str, str, str]]) -> str:
    """``COUNT:HASH`` of a set of case keys: the same for the same cases in any order."""
    lines = sorted("\x1f".join(key) for key in keys)
    digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:12]
    return f"{len(lines)}:{digest}"


def render_rows_csv(rows: Sequence[dict[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return buf.getvalue()


def write_results(path: str | os.PathLike, rows: Sequence[dict[str, str]]) -> None:
    """Atomically (re)write the whole results file from flattened rows."""
    atomic_write_text(path, render_rows_csv(rows))


# --------------------------------------------------------------------------- read


def parse_shape(shape: str) -> tuple[int, int, int] | None:
    """``4096x14336x4096`` (optionally followed by ``_tile...``) -> (M, N, K)."""
    match = _SHAPE_RE.match(shape.strip())
    return tuple(int(g) for g in match.groups()) if match else None  # type: ignore[return-value]


class _Cells:
    """Typed access to one CSV row that reports file, line and column on error."""

    def __init__(self, path: str, line: int, raw: dict[str, str | None]):
        self.path, self.line, self.raw = path, line, raw

    def fail(self, column: str, why: str) -> PerfciError:
        # One line whatever the cell held: a newline or an escape sequence in it is shown, not printed.
        return PerfciError(f"{self.path}: line {self.line}, column '{term_text(column)}': {term_text(why)}")

    def text(self, column: str, required: bool = True) -> str:
        value = (self.raw.get(column) or "").strip()
        if required and not value:
            raise self.fail(column, "is empty")
        return value

    def number(self, column: str, *, positive: bool = False, allow_empty: bool = True,
               missing: frozenset[str] = frozenset({""}),
               bounds: tuple[float, float] | None = None, unit: str = "") -> float | None:
        value = (self.raw.get(column) or "").strip()
        if value in missing:
            if allow_empty:
                return None
            raise self.fail(column, "is empty")
        return self._finite(column, value, positive, bounds, unit)

    def _finite(self, column: str, value: str, positive: bool,
                bounds: tuple[float, float] | None, unit: str) -> float:
        shown = value if len(value) <= 40 else f"{value[:30]}... ({len(value)} characters)"
        try:
            number = float(value)
        except ValueError:
            raise self.fail(column, f"'{shown}' is not a number") from None
        if not math.isfinite(number):
            raise self.fail(column, f"'{shown}' is not a finite number")
        if positive and number <= 0:
            raise self.fail(column, f"{shown} must be greater than zero")
        if bounds is not None and not bounds[0] <= number <= bounds[1]:
            raise self.fail(column, f"{shown} is outside {bounds[0]:g}..{bounds[1]:g}{unit}")
        return number

    def integer(self, column: str, low: int = 0, high: int = MAX_COUNT) -> int | None:
        value = (self.raw.get(column) or "").strip()
        if not value:
            return None
        try:
            number = int(value)
        except ValueError:
            raise self.fail(column, f"'{value[:40]}' is not an integer") from None
        if not low <= number <= high:
            raise self.fail(column, f"{value[:40]} is outside {low}..{high}")
        return number

    def number_list(self, column: str, *, positive: bool = False,
                    bounds: tuple[float, float] | None = None, unit: str = "") -> tuple[float | None, ...]:
        value = (self.raw.get(column) or "").strip()
        if not value:
            return ()
        out: list[float | None] = []
        for item in value.split(";"):
            item = item.strip()
            out.append(self._finite(column, item, positive, bounds, unit) if item else None)
        return tuple(out)


def _csv_rows(path: str, text: str) -> tuple[list[str], Iterator[tuple[int, dict[str, str | None]]]]:
    """The header, and the rows one at a time with their line numbers (each checked for its cell
    count), so a large file is never held as a list of dicts as well as parsed."""
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as err:
        raise PerfciError(f"{path}: not a valid CSV file ({err})") from None
    reader.fieldnames = header
    first: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        if name and name in first:
            # csv.DictReader would keep the last one silently
            raise PerfciError(f"{path}: line 1: column '{name}' appears twice "
                              f"(columns {first[name]} and {number})")
        first[name] = number

    def rows() -> Iterator[tuple[int, dict[str, str | None]]]:
        try:
            for i, raw in enumerate(reader):
                if None in raw or any(v is None for v in raw.values()):
                    cells = len(header) + len(raw.get(None) or ()) - sum(v is None for v in raw.values())
                    raise PerfciError(f"{path}: line {i + 2}: "
                                      f"{cells} cells, but the header has {len(header)} columns")
                yield i + 2, raw
        except csv.Error as err:
            raise PerfciError(f"{path}: not a valid CSV file ({err})") from None

    return header, rows()


def read_results(path: str | os.PathLike) -> ResultTable:
    """Read a perfci or FlyDSL results CSV, validating every cell."""
    return _read(str(path), keep_cells=False)[0]


def read_results_cells(path: str | os.PathLike) -> tuple[ResultTable, tuple[Mapping[str, str], ...]]:
    """:func:`read_results`, and each row's cells as text (stripped), in the same order.

    For a column :class:`ResultRow` has no field for (``roofline_pct``,
    ``power_w``, ...): the file is validated exactly as :func:`read_results`
    validates it, and :func:`cell_number` reads the one cell a caller needs.
    Every mapping has every column of the header.
    """
    return _read(str(path), keep_cells=True)


def read_results_text(path: str | os.PathLike) -> tuple[str, ResultTable, tuple[Mapping[str, str], ...]]:
    """:func:`read_results_cells`, and the text it parsed (a BOM dropped): for a caller that keeps or
    copies the file it validated, with one read."""
    text = read_input_text(str(path), "CSV")
    return (text, *_read(str(path), keep_cells=True, text=text))


def _read(path: str, keep_cells: bool, text: str | None = None) -> tuple[ResultTable, tuple[Mapping[str, str], ...]]:
    # One pass, row by row: time and memory grow with the rows, and only what is asked for is kept.
    header, rows = _csv_rows(path, read_input_text(path, "CSV") if text is None else text)
    if set(FLYDSL_COLUMNS) <= set(header) and "kernel" not in header:
        parse, fmt = _flydsl_row, "flydsl"
    else:
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise PerfciError(
                f"{path}: line 1: missing column(s) {', '.join(missing)}; "
                f"expected a perfci results CSV ({', '.join(REQUIRED_COLUMNS)}, ...) "
                f"or a FlyDSL CSV ({','.join(FLYDSL_COLUMNS)})")
        parse, fmt = _perfci_row, "perfci"
    parsed: list[ResultRow] = []
    cells: list[Mapping[str, str]] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line, raw in rows:
        row = parse(_Cells(path, line, raw))
        if row.key in seen:
            raise PerfciError(
                f"{path}: line {row.line}, column 'kernel': duplicate case {','.join(row.key)} "
                f"(first on line {seen[row.key]})")
        seen[row.key] = row.line
        parsed.append(row)
        if keep_cells:
            cells.append({column: (raw.get(column) or "").strip() for column in header})
    if not parsed:
        raise PerfciError(f"{path}: has a header but no rows")
    return ResultTable(path=path, format=fmt, rows=tuple(parsed)), tuple(cells)


def cell_number(table: ResultTable, row: ResultRow, cells: Mapping[str, str], column: str) -> float:
    """The finite number in ``column`` of ``row`` (its ``cells`` from :func:`read_results_cells`).

    Raises:
        PerfciError: naming the file, the line and the column, when the cell is
            empty or not a finite number.
    """
    value = _Cells(table.path, row.line, dict(cells)).number(column, allow_empty=False)
    assert value is not None  # allow_empty=False raises instead
    return value


def _perfci_row(cells: _Cells) -> ResultRow:
    status = cells.text("status")
    if status not in STATUSES:
        raise cells.fail("status", f"'{status[:40]}' is not one of {', '.join(STATUSES)}")
    kernel, shape, dtype = sys.intern(cells.text("kernel")), cells.text("shape"), sys.intern(cells.text("dtype"))
    status = sys.intern(status)
    ok = status == "ok"
    median = cells.number("median_us", positive=True, allow_empty=not ok, bounds=TIME_RANGE_US, unit=" us")
    repeats = cells.number_list("repeats_us", positive=True, bounds=TIME_RANGE_US, unit=" us")
    if ok and any(r is None for r in repeats):
        raise cells.fail("repeats_us", "has an empty entry")
    dims = [cells.integer(c, 1, MAX_DIM) for c in ("M", "N", "K")]
    if any(d is None for d in dims):
        dims = list(parse_shape(shape) or (None, None, None))
    for name, d in zip("MNK", dims):
        if d is not None and not 1 <= d <= MAX_DIM:
            raise cells.fail(name, f"{d} must be a positive integer up to {MAX_DIM}")
    weight = cells.number("weight", positive=True, bounds=WEIGHT_RANGE)
    clock = {"positive": True, "bounds": CLOCK_RANGE_MHZ, "unit": " MHz"}
    lists = {column: cells.number_list(column, **(clock if column == "sclk_mhz" else {}))  # type: ignore[arg-type]
             for column in REPEAT_LISTS}
    cells.number_list("temp_c")
    power = cells.number_list("power_w")
    try:
        kernels = parse_kernels(*(cells.text(column, required=False) for column in KERNEL_COLUMNS))
    except ValueError as err:
        column, _, why = str(err).partition(": ")
        raise cells.fail(column, why) from None
    for column, values in lists.items():
        if values and repeats and len(values) != len(repeats):
            # compare pairs the i-th clock with the i-th repeat; a shorter list cannot be paired
            raise cells.fail(column, f"has {len(values)} entries for {len(repeats)} repeats "
                                     f"(one per repeat of repeats_us, or none)")
    throttled = tuple(None if v is None else bool(v) for v in lists["throttled"])
    return ResultRow(
        kernel=kernel, shape=shape, dtype=dtype, status=status,
        m=dims[0], n=dims[1], k=dims[2],
        median_us=median if ok else None,
        repeats_us=tuple(r for r in repeats if r is not None) if ok else (),
        iters=cells.integer("iters") or 0,
        tflops=cells.number("tflops"), tbps=cells.number("tbps"),
        sclk_mhz=lists["sclk_mhz"],
        throttled=throttled,
        weight=1.0 if weight is None else weight,
        arch=_shared(cells, "arch"), device_name=_shared(cells, "device_name"),
        git_sha=_shared(cells, "git_sha"), message=cells.text("message", required=False),
        line=cells.line, timer=_shared(cells, "timer"),
        clock_source=_shared(cells, "clock_source"),
        stalls=cells.integer("stalls") or 0,
        roofline_pct=_shown_only(cells, "roofline_pct"), power_w=power, kernels=kernels,
        **{column: _shared(cells, column) for column in ("driver", "runtime", "torch", "triton", "timestamp")},
    )


def _shared(cells: _Cells, column: str) -> str:
    """A cell every row of a run repeats (device, commit, versions): one string for all of them,
    which keeps a table of a million rows from holding a million copies of each."""
    return sys.intern(cells.text(column, required=False))


def _shown_only(cells: _Cells, column: str) -> float | None:
    """A number that reports only display (never judged): unreadable is shown as unknown, not refused."""
    try:
        return cells.number(column)
    except PerfciError:
        return None


def _flydsl_row(cells: _Cells) -> ResultRow:
    """FlyDSL rows carry throughput only; the time is derived from it.

    With the shape's M, N, K known, time = 2MNK / TFLOP/s exactly; otherwise
    1/throughput stands in, which is enough because compare only uses ratios
    of one case against itself.
    """
    raw_status = cells.text("status")
    status = {"ok": "ok", "skip": "skip", "missing": "error"}.get(raw_status)
    if status is None:
        raise cells.fail("status", f"'{raw_status[:40]}' is not one of ok, skip, missing")
    dash = frozenset({"", "-"})
    tflops = cells.number("tflops", positive=True, missing=dash)
    tbps = cells.number("tbps", positive=True, missing=dash)
    shape = cells.text("shape")
    dims = parse_shape(shape)
    median = None
    if status == "ok":
        if tflops is None and tbps is None:
            raise cells.fail("tflops", "an ok row needs tflops or tbps")
        if tflops is not None and dims:
            m, n, k = dims
            median = 2.0 * m * n * k / (tflops * 1e12) * 1e6
        else:
            median = 1e6 / (tflops if tflops is not None else tbps)
        low, high = TIME_RANGE_US
        if not low <= median <= high:
            column = "tflops" if tflops is not None else "tbps"
            raise cells.fail(column, f"{cells.text(column)} gives a time of {median:.3g} us, "
                                     f"outside {low:g}..{high:g} us")
    return ResultRow(
        kernel=cells.text("op"), shape=shape, dtype=cells.text("dtype"), status=status,
        m=dims[0] if dims else None, n=dims[1] if dims else None, k=dims[2] if dims else None,
        median_us=median, repeats_us=(median,) if median else (), iters=0,
        tflops=tflops, tbps=tbps, line=cells.line,
    )
