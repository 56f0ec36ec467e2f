"""Every input of the bad-input corpus: exit 2, exactly one line on stderr, no traceback, nothing lost."""
from __future__ import annotations

import re

import pytest

from tests.compare.corpus import CORPUS, entries, run_entry

ENTRIES = entries()


def test_every_corpus_file_is_used_and_every_entry_says_what_it_is():
    used = {token[1:] for e in ENTRIES for token in e["argv"] if token.startswith("@")}
    files = {p.name for p in CORPUS.iterdir() if p.suffix in (".csv", ".json", ".toml") and p.name != "corpus.toml"}
    assert used == files
    assert all(e["what"] and e["expect"] for e in ENTRIES) and len(ENTRIES) >= 30


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["what"] for e in ENTRIES])
def test_a_bad_input_is_one_line_and_exit_2(tmp_path, entry):
    outcome = run_entry(entry, tmp_path)
    assert outcome.code == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr and outcome.stdout == ""
    (line,) = outcome.stderr.splitlines()
    # "perfci: error: ", or an option's refusal by argparse, which names the command ("perfci run: error: ")
    assert re.match(r"perfci( [a-z]+)?: error: ", line) and entry["expect"] in line and len(line) < 400
    assert not (tmp_path / "out.csv").exists()  # nothing half-written
    for name, copy in outcome.inputs.items():
        assert copy.read_bytes() == (CORPUS / name).read_bytes()  # and nothing written over
