"""Shard CSVs cut from a real results file, as `perfci run --shard I/N` would have written them."""
from __future__ import annotations

import csv
from pathlib import Path

from perfci.suites import load_suite, placements, shard_cases
from perfci.results import COLUMNS

DATA = Path(__file__).resolve().parents[1] / "data"
BASE = DATA / "compare" / "h200_aa_decode_base.csv"
CUR = DATA / "compare" / "h200_aa_decode_cur.csv"  # 84 decode cases on an H200


def read_rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def write_rows(path, rows, columns=COLUMNS) -> Path:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows({c: row.get(c, "") for c in columns} for row in rows)
    return Path(path)


def cut(src, count: int, out_dir: Path, suite: str = "decode") -> tuple[Path, list[Path]]:
    """(the unsharded run, its ``count`` shards), each row placed as perfci run places it."""
    rows = {(r["kernel"], r["shape"], r["dtype"]): r for r in read_rows(src)}
    cases = [c for c in load_suite(suite).cases if c.key in rows]
    whole = placements(cases, None)
    unsharded = write_rows(out_dir / "unsharded.csv",
                           [{**rows[c.key], **whole[c.key], "schema": "3"} for c in cases])
    shards = []
    for index in range(1, count + 1):
        placed = placements(cases, (index, count))
        mine = shard_cases(cases, (index, count))
        shards.append(write_rows(out_dir / f"shard{index}.csv",
                                 [{**rows[c.key], **placed[c.key], "schema": "3"} for c in mine]))
    return unsharded, shards
