"""``perfci merge SHARD.csv... --out RUN.csv``: arguments in, exit code out."""
from __future__ import annotations

import argparse
import sys

from perfci.errors import EXIT_OK

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


def main(args: argparse.Namespace) -> int:
    from perfci.merge.core import merge_files

    print(merge_files(list(args.shards), args.out), file=sys.stderr)
    return EXIT_OK
