"""Placeholder: the `perfci compare` command is being built in its own module."""
from __future__ import annotations

from perfci.errors import PerfciError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compare", help="(not built yet)")
    p.set_defaults(handler=main)


def main(args) -> int:
    raise PerfciError("perfci compare is not built yet")
