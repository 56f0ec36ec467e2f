"""Join the shards of one run into one results table, or say in one line why they are not one run.

A shard file is a results CSV written by ``perfci run --shard I/N``: every row
records its ``shard`` (I/N), its ``case_index`` (its place among the cases the
run selected, before sharding) and the run's ``selection`` (``COUNT:HASH`` of
those cases; :func:`perfci.results.selection_id`). Merging checks that

* every file is a perfci results CSV of the same columns and schema;
* every file ran on one device, at one commit, with one software stack and
  timer: the non-empty values of :data:`SAME_COLUMNS` agree across all rows
  (a row measured before the device answered may leave them empty);
* no case (kernel, shape, dtype) is in two files;
* when the files carry shard metadata: each is exactly one shard of the same
  N and the same selection, all N are there once, and together they hold
  exactly the selected cases (every case_index from 1 to COUNT).

Files without shard metadata (schema 2, or runs without ``--shard``) merge
with only the first three checks. The merged rows are in ``case_index``
order, which is the order the unsharded run writes, and their ``shard`` cell
is empty: the result reads as if one ``perfci run`` had measured everything.

Pure: tables and cells in (from :func:`perfci.results.read_results_cells`),
a :class:`Merged` and its CSV text out.
"""
from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from perfci.errors import PerfciError
from perfci.files import atomic_write_text
from perfci.model import ResultTable
from perfci.results import read_results_cells, selection_id

# Columns whose non-empty values must agree in every row of every shard, and
# what a disagreement means.
SAME_COLUMNS = {
    "schema": "schemas", "arch": "devices", "device_name": "devices", "vendor": "devices",
    "git_sha": "commits", "suite": "suites", "timer": "timers", "gate": "gates",
    "driver": "drivers", "runtime": "runtimes", "torch": "torch versions", "triton": "triton versions",
}
_SHARD = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")
_SELECTION = re.compile(r"([0-9]{1,9}):([0-9a-f]{12})")


@dataclass(frozen=True)
class ShardFile:
    """One input: its table and each row's cells (every column of its header)."""
    table: ResultTable
    header: tuple[str, ...]
    cells: tuple[Mapping[str, str], ...]

    @property
    def path(self) -> str:
        return self.table.path


@dataclass(frozen=True)
class Merged:
    header: tuple[str, ...]
    rows: tuple[Mapping[str, str], ...]
    shards: int  # N from the shard metadata; 0 when the files carry none
    values: Mapping[str, str]  # the agreed value of each SAME_COLUMNS column ("" where none)


def merge_shards(files: Sequence[ShardFile]) -> Merged:
    """The merged run of ``files``; raises :class:`PerfciError` naming the first problem."""
    if not files:
        raise PerfciError("merge: give the shard CSVs to merge")
    first = files[0]
    for f in files:
        if not f.table.rows:
            raise PerfciError(f"{f.path}: has no rows")
        if f.table.format != "perfci":
            raise PerfciError(f"{f.path}: a {f.table.format} file; perfci merge joins the perfci results "
                              f"CSVs of `perfci run --shard I/N`")
        if set(f.header) != set(first.header):
            missing = sorted(set(first.header) - set(f.header))
            extra = sorted(set(f.header) - set(first.header))
            raise PerfciError(f"{f.path}: mixed schemas: its columns differ from {first.path}'s "
                              f"(missing: {', '.join(missing) or '-'}; extra: {', '.join(extra) or '-'})")
    values = _agreed_values(files)
    _check_overlap(files)
    shards = _check_shards(files)
    rows = [row for f in files for row in f.cells]
    if all(row.get("case_index", "").isdigit() for row in rows):
        rows.sort(key=lambda row: int(row["case_index"]))
    if shards:
        rows = [{**row, "shard": ""} for row in rows]
    return Merged(header=first.header, rows=tuple(rows), shards=shards, values=values)


def render_merged(merged: Merged) -> str:
    """The merged run as a results CSV (the first file's column order)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=merged.header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(merged.rows)
    return buf.getvalue()


def _agreed_values(files: Sequence[ShardFile]) -> dict[str, str]:
    seen: dict[str, tuple[str, str, int]] = {}  # column -> (value, path, line)
    for f in files:
        for row, cells in zip(f.table.rows, f.cells):
            for column, what in SAME_COLUMNS.items():
                value = cells.get(column, "")
                if not value:
                    continue
                if column not in seen:
                    seen[column] = (value, f.path, row.line)
                elif seen[column][0] != value:
                    v0, p0, l0 = seen[column]
                    raise PerfciError(f"{f.path}: line {row.line}, column '{column}': mixed {what}: "
                                      f"{value[:60]!r} here, {v0[:60]!r} in {p0} line {l0}; the shards of one run "
                                      f"share one device, commit and setup")
    return {column: seen[column][0] if column in seen else "" for column in SAME_COLUMNS}


def _check_overlap(files: Sequence[ShardFile]) -> None:
    owner: dict[tuple[str, str, str], tuple[str, int]] = {}
    for f in files:
        for row in f.table.rows:
            if row.key in owner:
                path, line = owner[row.key]
                raise PerfciError(f"{f.path}: line {row.line}: case {','.join(row.key)} is also in "
                                  f"{path} line {line}: the shards overlap (one case measured twice)")
            owner[row.key] = (f.path, row.line)


def _check_shards(files: Sequence[ShardFile]) -> int:
    """N, after checking the shard metadata is complete and consistent; 0 without metadata."""
    labels = {f.path: _shard_of(f) for f in files}
    sharded = [p for p, label in labels.items() if label]
    if not sharded:
        return 0
    plain = [p for p, label in labels.items() if not label]
    if plain:
        raise PerfciError(f"{plain[0]}: not a shard (no shard column value), but {sharded[0]} is shard "
                          f"{'/'.join(map(str, labels[sharded[0]]))}; merge the shards of one run")
    count = labels[files[0].path][1]
    by_index: dict[int, str] = {}
    for f in files:
        index, n = labels[f.path]
        if n != count:
            raise PerfciError(f"{f.path}: shard {index}/{n}, but {files[0].path} is one of {count} shards; "
                              f"merge the shards of one split")
        if index in by_index:
            raise PerfciError(f"{f.path}: shard {index}/{n} is given twice (also {by_index[index]})")
        by_index[index] = f.path
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise PerfciError(f"merge: shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing; "
                          f"a run split {count} ways needs all {count} shard CSVs")
    _check_selection(files)
    return count


def _shard_of(f: ShardFile) -> tuple[int, int] | None:
    """(I, N) of a shard file, or None when its rows carry no shard."""
    found: dict[str, int] = {}
    for row, cells in zip(f.table.rows, f.cells):
        found.setdefault(cells.get("shard", ""), row.line)
    if len(found) > 1:
        shown = " and ".join(f"{v[:40] or 'none'} (line {line})" for v, line in list(found.items())[:2])
        raise PerfciError(f"{f.path}: column 'shard': rows of more than one shard, {shown}; "
                          f"a shard CSV is one `perfci run --shard I/N`")
    (label, line), = found.items()
    if not label:
        return None
    match = _SHARD.fullmatch(label)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise PerfciError(f"{f.path}: line {line}, column 'shard': {label[:40]!r} is not I/N with 1 <= I <= N")
    return int(match.group(1)), int(match.group(2))


def _check_selection(files: Sequence[ShardFile]) -> None:
    """All shards came from one selection, and together they hold every selected case once."""
    selection = ""
    indices: dict[int, str] = {}
    for f in files:
        for row, cells in zip(f.table.rows, f.cells):
            where = f"{f.path}: line {row.line}"
            value = cells.get("selection", "")
            match = _SELECTION.fullmatch(value)
            if not match:
                raise PerfciError(f"{where}, column 'selection': {value[:40]!r} is not COUNT:HASH "
                                  f"(what `perfci run --shard` writes)")
            if selection and value != selection:
                raise PerfciError(f"{where}, column 'selection': {value}, but {files[0].path} says "
                                  f"{selection}: shards of runs that selected different cases")
            selection = value
            index = cells.get("case_index", "")
            total = int(match.group(1))
            if not (index.isdigit() and 1 <= int(index) <= total):
                raise PerfciError(f"{where}, column 'case_index': {index[:40]!r} is not a number from 1 to {total}")
            indices[int(index)] = where
    total = int(selection.split(":")[0])
    missing = [i for i in range(1, total + 1) if i not in indices]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        raise PerfciError(f"merge: the shards hold {total - len(missing)} of the {total} cases their run "
                          f"selected (case_index {shown} missing): was a shard run interrupted?")
    keys = [row.key for f in files for row in f.table.rows]
    if selection_id(keys) != selection:
        raise PerfciError(f"merge: the shards' cases are not the ones their run selected "
                          f"(selection {selection}, the rows make {selection_id(keys)})")


def merge_files(paths: list[str], out: str) -> str:
    """Merge the shard CSVs at ``paths`` into ``out`` (atomically); returns a one-line summary."""
    real = [os.path.realpath(p) for p in paths]
    if len(set(real)) != len(real):
        twice = next(p for p, r in zip(paths, real) if real.count(r) > 1)
        raise PerfciError(f"merge: {twice} is given twice")
    if os.path.realpath(out) in real:
        raise PerfciError(f"merge: --out {out} is one of the shards it reads; write the merged run "
                          f"to another file")
    files = []
    for path in paths:
        table, cells = read_results_cells(path)
        files.append(ShardFile(table=table, header=tuple(cells[0]), cells=cells))
    merged = merge_shards(files)
    atomic_write_text(out, render_merged(merged))
    v = merged.values
    what = ", ".join(filter(None, (v["suite"], v["device_name"] or v["arch"], v["git_sha"][:8])))
    parts = f"{merged.shards} shards" if merged.shards else f"{len(files)} files"
    return f"perfci merge: {parts}, {len(merged.rows)} cases{f' ({what})' if what else ''}: wrote {out}"
