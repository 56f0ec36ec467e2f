"""The bad-input corpus as a user meets it: a markdown table of input, command, exit code, first line of stderr.

Validates that every bad input perfci can be given ends as one clear line and exit 2, never a
traceback. Every file in tests/data/bad_inputs/ (corpus.toml says what each is and which
command reads it) goes through ``perfci.cli.main`` as ``perfci ...`` would run it, in this
process, with its inputs copied to a scratch directory first.
tests/compare/test_bad_input_corpus.py asserts the same runs: exit 2, exactly one
line on stderr, no traceback, no output file, no input written over.

Time: about 1 s on a 2-core CPU machine.
Pass: exit 0, and stderr ends "N of N inputs: exit 2 with one line." (exit 1 when one is not).

    python benchmarks/bad_input_corpus.py            # the table, on stdout
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.compare.corpus import entries, run_entry  # noqa: E402


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="perfci-corpus-") as scratch:
        for number, entry in enumerate(entries(), start=1):
            outcome = run_entry(entry, Path(scratch) / str(number))
            lines = outcome.stderr.splitlines()
            first = lines[0] if lines else ""
            if len(lines) > 1:
                first += f" (+{len(lines) - 1} more lines)"
            rows.append((entry["what"], outcome.shown, outcome.code, first))
    print("| input | command | exit | first line of stderr |")
    print("|---|---|---:|---|")
    for what, shown, code, first in rows:
        print(f"| {cell(what)} | `{cell(shown)}` | {code} | {cell(first)} |")
    ok = sum(code == 2 for _, _, code, _ in rows)
    print(f"\n{ok} of {len(rows)} inputs: exit 2 with one line.", file=sys.stderr)
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
