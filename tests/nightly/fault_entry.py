"""``perfci nightly`` with one stage raising an unexpected exception, for the internal-error tests.

    python tests/nightly/fault_entry.py STAGE -- <perfci nightly arguments>

The seam is ``perfci.cli.main(argv, fault=...)``: ``fault`` is called with each
stage's name as the stage starts, and this one raises RuntimeError in STAGE.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's perfci

from perfci import cli  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit("usage: fault_entry.py STAGE -- <perfci nightly arguments>")
    target = argv[0]

    def fault(stage: str) -> None:
        if stage == target:
            raise RuntimeError(f"injected fault in {stage}")

    return cli.main(["nightly", *argv[2:]], fault=fault)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
