"""The bad-input corpus (tests/data/bad_inputs/corpus.toml), run as a user runs perfci.

Each entry runs ``perfci.cli.main(argv)`` in this process, with stdout and stderr
captured; an exception that escapes main (a traceback for the user) is caught and
reported as exit ``"traceback"``. Used by tests/compare/test_bad_input_corpus.py
and benchmarks/bad_input_corpus.py.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import traceback
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "bad_inputs"


@dataclass(frozen=True)
class Outcome:
    code: int | str  # the exit code, or "traceback"
    stdout: str
    stderr: str
    shown: str  # the command as a user would type it
    inputs: dict  # corpus name -> its copy, to check nothing was written over


def entries() -> list[dict]:
    return tomllib.loads((CORPUS / "corpus.toml").read_text(encoding="utf-8"))["input"]


def run_entry(entry: dict, scratch: Path) -> Outcome:
    """Run one corpus entry with its inputs copied into ``scratch``."""
    from perfci.cli import main

    scratch.mkdir(parents=True, exist_ok=True)
    argv, shown, inputs = [], [], {}
    for token in entry["argv"]:
        if token.startswith("@"):
            name = token[1:]
            copy = scratch / name
            if name not in inputs:
                shutil.copyfile(CORPUS / name, copy)
            inputs[name] = copy
            argv.append(str(copy))
            shown.append(name)
        elif token.startswith("data:"):
            argv.append(str(ROOT / "tests" / "data" / token[5:]))
            shown.append(f"tests/data/{token[5:]}")
        else:
            argv.append(token.replace("{out}", str(scratch / "out.csv")).replace("{tmp}", str(scratch)))
            shown.append(token.replace("{out}", "out.csv").replace("{tmp}", "/tmp"))
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)  # built-in suites are found from the checkout
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: int | str = main(argv)
            except SystemExit as exit_:  # argparse's usage errors
                code = exit_.code if isinstance(exit_.code, int) else 1
            except BaseException:  # noqa: BLE001 - what a user would see as a traceback
                code = "traceback"
                err.write(traceback.format_exc())
    finally:
        os.chdir(here)
    stderr = err.getvalue().replace(str(scratch) + os.sep, "").replace(str(scratch), "/tmp")
    stderr = stderr.replace(str(ROOT) + os.sep, "")
    return Outcome(code, out.getvalue(), stderr, "perfci " + " ".join(shown), inputs)
