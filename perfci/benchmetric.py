"""Reading one number out of a bench run: stdout text, JSON, or a results CSV.

A :class:`MetricSpec` says where the number is; :func:`extract` applies it and
raises :class:`MetricError` with a short reason when there is none, which the
session records as a failed run rather than a crash.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from perfci.errors import PerfciError
from perfci.results import ResultRow, cell_number, read_results_cells

# A decimal or scientific number; the lookbehind keeps "v2" or "x86_64" suffixes out.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


class MetricError(Exception):
    """The run finished but its metric could not be read."""


@dataclass(frozen=True)
class MetricSpec:
    regex: str | None = None
    json_path: str | None = None
    csv_column: str | None = None
    case: str | None = None
    csv_file: str | None = None  # relative to the tree the bench ran in

    @property
    def description(self) -> str:
        if self.csv_column:
            return f"column {self.csv_column!r} of case {self.case!r} in {self.csv_file}"
        if self.json_path:
            return f"JSON path {self.json_path!r} on stdout"
        if self.regex:
            return f"first group of /{self.regex}/ on stdout"
        return "last number on stdout"

    def cache_key(self) -> str:
        return json.dumps([self.regex, self.json_path, self.csv_column, self.case, self.csv_file])


def last_number(text: str) -> float:
    found = _NUMBER.findall(text)
    if not found:
        raise MetricError("no number on stdout")
    return float(found[-1])


def from_regex(text: str, pattern: str) -> float:
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if not matches:
        raise MetricError(f"/{pattern}/ does not match stdout")
    match = matches[-1]  # the last match, like the default: benches often print progress first
    value = match.group(1) if match.re.groups else match.group(0)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise MetricError(f"/{pattern}/ matched {value!r}, which is not a number") from None


def from_json(text: str, dotted_path: str) -> float:
    document = _parse_json(text)
    node = document
    for part in dotted_path.split("."):
        if isinstance(node, list):
            try:
                node = node[int(part)]
                continue
            except (ValueError, IndexError):
                raise MetricError(f"JSON path {dotted_path!r}: no item {part!r} in a list") from None
        if not isinstance(node, dict) or part not in node:
            raise MetricError(f"JSON path {dotted_path!r}: no key {part!r}")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float, str)):
        raise MetricError(f"JSON path {dotted_path!r} is {type(node).__name__}, not a number")
    try:
        return float(node)
    except ValueError:
        raise MetricError(f"JSON path {dotted_path!r} is {node!r}, not a number") from None


def _parse_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        pass
    # Benches often log before their JSON; take the last line that parses alone.
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise MetricError("stdout is not JSON")


def from_csv(path: Path, column: str, case: str) -> float:
    """Read ``column`` of the row ``case`` names in a ``perfci run`` (or FlyDSL) results CSV.

    The file goes through :func:`perfci.results.read_results_cells`, the reader
    ``perfci compare`` uses, so a CSV means the same thing to both; what it
    rejects becomes a failed run carrying its one-line message. ``case`` is
    either ``kernel,shape,dtype`` exactly, or a substring that matches exactly
    one row's ``"kernel shape dtype"``. ``column`` is any numeric column of the
    file (``median_us``, ``tflops``, ``roofline_pct``, ...).
    """
    if not path.is_file():
        raise MetricError(f"{path.name} was not written")
    try:
        table, cells = read_results_cells(path)
    except PerfciError as err:
        raise MetricError(err.message) from None
    # Checked before the case, so a wrong column name is reported whichever row is meant.
    if column not in cells[0]:  # the reader refuses a file without rows; every row has every column
        raise MetricError(f"{path.name} has no column {column}")
    index = _row_of_case(table.rows, case, path.name)
    row = table.rows[index]
    if row.status != "ok":
        raise MetricError(f"case {case!r} has status {row.status!r}")
    try:
        return cell_number(table, row, cells[index], column)
    except PerfciError as err:
        raise MetricError(err.message) from None


def _row_of_case(rows: Sequence[ResultRow], case: str, file_name: str) -> int:
    """The index of the one row ``case`` names; a case that names none or several is a MetricError."""
    parts = [p.strip() for p in case.split(",")]
    if len(parts) == 3:
        matches = [i for i, r in enumerate(rows) if r.key == tuple(parts)]
    else:
        matches = [i for i, r in enumerate(rows) if case in _label(r)]
    if not matches:
        raise MetricError(f"no row of {file_name} matches case {case!r}")
    if len(matches) > 1:
        names = ", ".join(_label(rows[i]) for i in matches[:3])
        raise MetricError(f"case {case!r} matches {len(matches)} rows of {file_name} ({names}, ...); "
                          f"be more specific")
    return matches[0]


def _label(row: ResultRow) -> str:
    return f"{row.kernel} {row.shape} {row.dtype}"


def out_path_from_command(command: Sequence[str]) -> str | None:
    """The file after ``--out`` (or ``--out=FILE``) in a bench command, e.g. ``perfci run``."""
    for i, word in enumerate(command):
        if word == "--out" and i + 1 < len(command):
            return command[i + 1]
        if word.startswith("--out="):
            return word.split("=", 1)[1]
    return None


def extract(spec: MetricSpec, stdout: str, cwd: Path) -> float:
    if spec.csv_column:
        return from_csv(cwd / spec.csv_file, spec.csv_column, spec.case or "")
    if spec.json_path:
        return from_json(stdout, spec.json_path)
    if spec.regex:
        return from_regex(stdout, spec.regex)
    return last_number(stdout)


def metric_spec(regex: str | None, json_path: str | None, csv_column: str | None, case: str | None,
                csv_file: str | None, command: Sequence[str]) -> MetricSpec:
    """The metric options of ``perfci bisect`` and ``perfci confirm``, checked: where the number is."""
    chosen = [name for name, given in (("--metric", regex), ("--json-path", json_path),
                                       ("--csv-column", csv_column)) if given]
    if len(chosen) > 1:
        raise PerfciError(f"choose one of --metric, --json-path, --csv-column (got {', '.join(chosen)})")
    if bool(csv_column) != bool(case):
        raise PerfciError("--csv-column and --case go together")
    if csv_column:
        csv_file = csv_file or out_path_from_command(command)
        if not csv_file:
            raise PerfciError("--csv-column needs the CSV's path: --csv-file PATH, or --out PATH in the bench command")
    if regex:
        try:
            re.compile(regex)
        except re.error as err:
            raise PerfciError(f"--metric {regex!r} is not a valid regex: {err}") from None
    return MetricSpec(regex, json_path, csv_column, case, csv_file if csv_column else None)
