"""Apache Otava's CSV (formerly DataStax Hunter) from a history store, and the config that reads it.

Pure: runs in, text out.

Otava's CSV importer (``otava/importer.py``, ``CsvImporter``) reads a header,
then one row per run: a time column (parsed by ``dateparser``), attribute
columns copied as text, and metric columns converted with ``float()``, every
row, every metric: an empty cell stops the import. A test in ``otava.yaml``
names the file, ``time_column``, ``attributes`` and ``metrics`` (a metric's
``direction: -1`` says lower is better, as Otava's own latency metrics do).

So one CSV per suite (Otava analyzes one test per file), a row per run of that
suite in time order, and a metric column per case, for the cases that were ok
in every one of those runs; the others are left out and named, never filled in.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Sequence

from perfci.escape import yaml_scalar
from perfci.history.model import Run

TIME_COLUMN = "time"
ATTRIBUTES = ("commit", "run", "driver", "runtime", "torch", "triton")


@dataclass(frozen=True)
class OtavaTable:
    suite: str
    csv_text: str
    metrics: tuple[str, ...]  # column names, one per case
    left_out: tuple[tuple[str, str, str], ...]  # cases not ok in every run of the suite
    n_runs: int


def metric_name(kernel: str, shape: str, dtype: str) -> str:
    """A column and YAML key that needs no quoting: ``splitk_decode_m_fast_1__64x1024x6144__bf16``."""
    clean = [re.sub(r"[^A-Za-z0-9_-]+", "_", part).strip("_") or "x" for part in (kernel, shape, dtype)]
    return "__".join(clean)  # no dots: Otava reads a dot in a metric name as a path separator


def otava_table(runs: Sequence[Run], suite: str) -> OtavaTable:
    chosen = sorted((r for r in runs if r.info.suite == suite), key=lambda r: (r.info.when, r.info.run_id))
    keys: list[tuple[str, str, str]] = []
    for run in chosen:
        for row in run.table.rows:
            if row.key not in keys:
                keys.append(row.key)
    values = [{row.key: row.median_us for row in run.table.rows if row.status == "ok" and row.median_us}
              for run in chosen]
    kept = [k for k in keys if all(k in v for v in values)]
    names: dict[tuple[str, str, str], str] = {}
    used: set[str] = set()
    for key in kept:
        name = base = metric_name(*key)
        i = 2
        while name in used:  # two keys that differ only in punctuation
            name, i = f"{base}_{i}", i + 1
        used.add(name)
        names[key] = name
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([TIME_COLUMN, *ATTRIBUTES, *(names[k] for k in kept)])
    for run, vals in zip(chosen, values):
        info = run.info
        writer.writerow([info.when.strftime("%Y-%m-%d %H:%M:%S +0000"), info.git_sha or "-", info.run_id,
                         info.driver, info.runtime, info.torch, info.triton,
                         *(f"{vals[k]:.4f}" for k in kept)])
    return OtavaTable(suite, buf.getvalue(), tuple(names[k] for k in kept),
                      tuple(k for k in keys if k not in names), len(chosen))


def _slug(suite: str) -> str:
    """A suite name (free text in its TOML) as a word of letters, digits and ``_ -``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", suite).strip("_-") or "suite"


def test_name(suite: str) -> str:
    return "perfci." + _slug(suite)


@dataclass(frozen=True)
class OtavaTest:
    """One test of ``otava.yaml``: its table, its name, and its CSV's file name (a plain name, no folder)."""

    table: OtavaTable
    name: str
    file: str


def otava_tests(tables: Sequence[OtavaTable]) -> tuple[OtavaTest, ...]:
    """A test name and a file name per table, each unique, made of ``[A-Za-z0-9_.-]``.

    A suite's name is free text (``../../x``, ``/abs/x``, a newline): the file is its slug
    with ``.csv``, so it stays in the folder it is written to, and two suites whose names
    differ only in punctuation get ``_2``, ``_3``.
    """
    used: set[str] = set()
    out = []
    for table in tables:
        slug = base = _slug(table.suite)
        i = 2
        while slug.lower() in used:  # a case-insensitive file system holds one of X.csv and x.csv
            slug, i = f"{base}_{i}", i + 1
        used.add(slug.lower())
        out.append(OtavaTest(table, f"perfci.{slug}", f"{slug}.csv"))
    return tuple(out)


def otava_yaml(tests: Sequence[OtavaTest]) -> str:
    """``otava.yaml`` with one csv test per table; every name and file is a YAML scalar quoted where needed."""
    lines = ["# Written by `perfci history export --otava`. Otava opens `file` relative to the",
             "# directory it runs in, so run it here:",
             f"#   otava analyze --config-file otava.yaml {' '.join(t.name for t in tests)}",
             "tests:"]
    for test in tests:
        table = test.table
        lines += [f"  {yaml_scalar(test.name)}:", "    type: csv", f"    file: {yaml_scalar(test.file)}",
                  f"    time_column: {TIME_COLUMN}", f"    attributes: [{', '.join(ATTRIBUTES)}]",
                  "    csv_options:", "      delimiter: \",\"", "      quote_char: '\"'", "    metrics:"]
        for name in table.metrics:
            lines += [f"      {yaml_scalar(name)}:", f"        column: {yaml_scalar(name)}",
                      "        direction: -1  # a time: lower is better"]
        if not table.metrics:
            lines[-1] = "    metrics: {}"
    return "\n".join(lines) + "\n"
