"""``perfci merge SHARD.csv... --out RUN.csv``: arguments in, exit code out."""
from __future__ import annotations

import argparse
import os
import sys

from perfci.errors import EXIT_OK, PerfciError

DESCRIPTION = """\
Join the results CSVs of `perfci run SUITE --shard I/N` (one per shard, from N
CI jobs or a Slurm array) into one results CSV that `perfci compare` reads as
if one `perfci run` had measured every case.

Refused, one line and exit 2, writing nothing:
  - a case (kernel, shape, dtype) in two files: the shards overlap
  - files of different devices, commits, suites, schemas, timers or software
    (driver, runtime, torch, triton)
  - a shard missing, given twice, or of another split (2/4 beside 1/3)
  - shards that hold fewer cases than their run selected (an interrupted shard)
  - --out naming one of the inputs

The shards are checked against the `shard`, `case_index` and `selection`
columns every `perfci run` writes; files without them (older runs) are
checked for overlap, device, commit and schema only.

exit codes: 0 merged; 2 bad input or usage.
"""
EXAMPLES = """\
examples:
  perfci run decode --shard 1/2 --out s1.csv     # job 1 (CUDA_VISIBLE_DEVICES=0)
  perfci run decode --shard 2/2 --out s2.csv     # job 2 (CUDA_VISIBLE_DEVICES=1)
  perfci merge s1.csv s2.csv --out cur.csv && perfci compare baselines/h200/decode.csv cur.csv
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "merge", help="join the shard CSVs of one run (perfci run --shard I/N) into one",
        description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shards", nargs="+", metavar="SHARD.csv", help="the shards' results CSVs")
    p.add_argument("--out", "-o", metavar="RUN.csv", required=True, help="the merged results CSV to write")
    p.set_defaults(handler=main)


def merge_files(paths: list[str], out: str) -> str:
    """Merge the shard CSVs at ``paths`` into ``out`` (atomically); returns a one-line summary."""
    from perfci.files import atomic_write_text
    from perfci.merge.core import ShardFile, merge_shards, render_merged
    from perfci.results import read_results_cells

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


def main(args: argparse.Namespace) -> int:
    print(merge_files(list(args.shards), args.out), file=sys.stderr)
    return EXIT_OK
