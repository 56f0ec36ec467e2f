"""The files ``perfci compare`` and ``perfci calibrate`` read: results and noise profiles.

Results: perfci CSV, FlyDSL CSV, pytest-benchmark JSON. Dispatch is by suffix
(``.json``) or, for other names, by the first character (``{`` means JSON).
CSVs go to :func:`perfci.results.read_results`; JSON is read here with the same
standard: every problem is one :class:`PerfciError` naming the file and the
place (``benchmarks[3].stats.data[2]``), never a traceback.

Noise profiles: :func:`read_profile` takes a built-in name or a JSON file from
``perfci calibrate``; :mod:`perfci.compare.noise` stays pure.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Mapping

from perfci.compare.calibration import check_profile
from perfci.compare.noise import BUILTIN_PROFILES, NoiseProfile, profile_from_dict
from perfci.errors import PerfciError
from perfci.files import read_input_text
from perfci.model import ResultRow, ResultTable
from perfci.results import MAX_DIM, TIME_RANGE_US, read_results, read_results_cells

_BRACKET = re.compile(r"\[.*\]$")


def read_any(path: str | os.PathLike) -> ResultTable:
    path = str(path)
    return read_pytest_benchmark(path) if _is_benchmark_json(path) else read_results(path)


def read_any_cells(path: str | os.PathLike) -> tuple[ResultTable, tuple[Mapping[str, str], ...] | None]:
    """:func:`read_any`, and a results CSV's cells as :func:`perfci.results.read_results_cells` gives them
    (None for pytest-benchmark JSON, which has no such columns)."""
    path = str(path)
    if _is_benchmark_json(path):
        return read_pytest_benchmark(path), None
    return read_results_cells(path)


def _is_benchmark_json(path: str) -> bool:
    p = Path(path)
    if p.suffix.lower() == ".json":
        return True
    if p.is_file():
        try:
            with open(p, "rb") as fh:
                head = fh.read(64).lstrip()
        except OSError:
            head = b""
        return head.startswith(b"{")
    return False


def read_pytest_benchmark(path: str) -> ResultTable:
    """pytest-benchmark ``--benchmark-json`` output -> a ResultTable.

    ``stats.data`` (per-round times in seconds, present when pytest ran with
    ``--benchmark-save-data``) becomes ``repeats_us``; without it, ``stats.median`` is the single value and the
    comparison is threshold-only. The kernel is ``fullname`` (or ``name``) without
    its ``[param]`` suffix when ``params`` say the same thing; ``params`` with
    m/n/k give the shape ``MxNxK``, other params the shape text.
    """
    text = read_input_text(str(path), "JSON")
    data = _parse_json(path, text, parse_constant=_reject_constant)
    if not isinstance(data, dict) or "benchmarks" not in data:
        raise PerfciError(f"{path}: not a pytest-benchmark JSON file (no top-level 'benchmarks' list)")
    benches = data["benchmarks"]
    if not isinstance(benches, list):
        raise PerfciError(f"{path}: 'benchmarks' must be a list, got {type(benches).__name__}")
    if not benches:
        raise PerfciError(f"{path}: 'benchmarks' is empty")
    rows = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, b in enumerate(benches):
        row = _bench_row(path, i, b)
        if row.key in seen:
            raise PerfciError(f"{path}: benchmarks[{i}]: duplicate case {','.join(row.key)} "
                              f"(first at benchmarks[{seen[row.key]}])")
        seen[row.key] = i
        rows.append(row)
    return ResultTable(path=path, format="pytest-benchmark", rows=tuple(rows))


def _parse_json(path: object, text: str, **options):
    """``json.loads``, with a syntax error as one line naming the file and the place.

    A key given twice in one object is an error (``json`` keeps the last one
    silently), and so are an integer of more digits than Python converts and a
    document nested deeper than the parser recurses.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, **options)
    except json.JSONDecodeError as err:
        raise PerfciError(f"{path}: line {err.lineno}, column {err.colno}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise PerfciError(f"{path}: not valid input (JSON nested too deeply)") from None
    except ValueError as err:  # an integer beyond Python's digit limit, NaN/Infinity, a key given twice
        raise PerfciError(f"{path}: {str(err).splitlines()[0]}") from None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    data: dict = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"key '{key[:40]}' appears twice in one JSON object")
        data[key] = value
    return data


def _reject_constant(name: str):
    raise ValueError(f"'{name}' is not a finite number (JSON has no NaN or Infinity)")


def _bench_row(path: str, i: int, b: object) -> ResultRow:
    where = f"{path}: benchmarks[{i}]"
    if not isinstance(b, dict):
        raise PerfciError(f"{where}: must be an object, got {type(b).__name__}")
    name = b.get("fullname", b.get("name"))
    if not isinstance(name, str) or not name.strip():
        raise PerfciError(f"{where}: 'name' (or 'fullname') must be a non-empty string")
    params = b.get("params")
    if params is not None and not isinstance(params, dict):
        raise PerfciError(f"{where}.params: must be an object or null, got {type(params).__name__}")
    stats = b.get("stats")
    if not isinstance(stats, dict):
        raise PerfciError(f"{where}.stats: missing or not an object")
    data = stats.get("data")
    if data is not None:
        if not isinstance(data, list) or not data:
            raise PerfciError(f"{where}.stats.data: must be a non-empty list of seconds")
        values = [_seconds(f"{where}.stats.data[{j}]", v) for j, v in enumerate(data)]
    else:
        if "median" not in stats:
            raise PerfciError(f"{where}.stats: has neither 'data' nor 'median'")
        values = [_seconds(f"{where}.stats.median", stats["median"])]
    kernel = name.strip()
    shape, dtype = "-", "-"
    m = n = k = None
    if params:
        kernel = _BRACKET.sub("", kernel) or kernel
        lower = {str(key).lower(): v for key, v in params.items()}
        dims = [lower.get(d) for d in ("m", "n", "k")]
        if all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= MAX_DIM for d in dims):
            m, n, k = dims  # type: ignore[misc]
            shape = f"{m}x{n}x{k}"
        else:
            shape = ",".join(f"{key}={params[key]}" for key in sorted(params, key=str)
                             if str(key).lower() != "dtype") or "-"
        if lower.get("dtype") is not None:
            dtype = str(lower["dtype"]).replace("torch.", "").replace("bfloat16", "bf16") \
                .replace("float16", "fp16").replace("float32", "fp32")
    return ResultRow(kernel=kernel, shape=shape, dtype=dtype, status="ok", m=m, n=n, k=k,
                     median_us=statistics.median(v * 1e6 for v in values), repeats_us=tuple(v * 1e6 for v in values), line=i)


def _seconds(where: str, v: object) -> float:
    """A time in seconds that is a time in microseconds perfci can compute with."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PerfciError(f"{where}: {_short(v)} is not a number")
    try:
        seconds = float(v)
    except OverflowError:  # an integer of hundreds of digits
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise PerfciError(f"{where}: {_short(v)} must be a finite time greater than zero")
    low, high = TIME_RANGE_US
    if not low <= seconds * 1e6 <= high:
        raise PerfciError(f"{where}: {_short(v)} s is outside {low:g}..{high:g} us")
    return seconds


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def read_profile(name_or_path: str) -> NoiseProfile:
    """A built-in noise profile by name, or a JSON file written by ``perfci calibrate``."""
    if name_or_path in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[name_or_path]
    path = Path(name_or_path)
    if not path.exists():
        raise PerfciError(f"--noise-profile {name_or_path}: neither a built-in profile "
                          f"({', '.join(BUILTIN_PROFILES)}) nor an existing file")
    text = read_input_text(str(path), "noise profile")
    data = _parse_json(path, text, parse_constant=_reject_constant)
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, int) and not isinstance(value, bool):
                try:
                    float(value)
                except OverflowError:
                    raise PerfciError(f"{path}: key '{key}' must be a number >= 0, got "
                                      f"{_short(value)}") from None
    return check_profile(profile_from_dict(data, str(path)), str(path))


def run_device(table: ResultTable) -> tuple[str, str]:
    """(arch, device name) of the run a table holds; ("", "") when it does not say.

    On the CPU the name is the host's processor, which differs from runner to
    runner while the interpreter's numbers do not depend on it: only the arch counts.

    Raises:
        PerfciError: the rows name more than one device.
    """
    archs = sorted({r.arch for r in table.rows if r.arch})
    names = sorted({r.device_name for r in table.rows if r.device_name and r.arch != "cpu"})
    if len(archs) > 1 or len(names) > 1:
        raise PerfciError(f"{table.path}: rows from more than one device "
                          f"({', '.join(archs + names)}); one run is one device")
    return (archs[0] if archs else "", names[0] if names else "")


def check_same_device(base: ResultTable, cur: ResultTable) -> None:
    """Refuse to judge runs of two devices against each other (one line, exit 2).

    A field either file leaves empty (FlyDSL and pytest-benchmark files say
    nothing) cannot differ.
    """
    (arch_b, name_b), (arch_c, name_c) = run_device(base), run_device(cur)
    if (arch_b and arch_c and arch_b != arch_c) or (name_b and name_c and name_b != name_c):
        def said(arch: str, name: str) -> str:
            return " ".join(filter(None, (name, f"({arch})" if arch else "")))
        raise PerfciError(f"{base.path} ran on {said(arch_b, name_b)} and {cur.path} on "
                          f"{said(arch_c, name_c)}: a different device is not a regression; compare "
                          f"runs of one device (--allow-device-mismatch to compare them anyway)")
