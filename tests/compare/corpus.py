"""The bad-input corpus (tests/data/bad_inputs/corpus.toml), run as a user runs perfci.

Each entry runs ``perfci.cli.main(argv)`` in this process, with stdout and stderr
captured; an exception that escapes main (a traceback for the user) is caught and
reported as exit ``"traceback"``. Used by tests/compare/test_bad_input_corpus.py
and benchmarks/bad_input_corpus.py.

Inputs that git cannot hold are made in the scratch directory when the entry runs
(``made:KIND:NAME`` in argv, or ``KIND:NAME`` in an entry's ``made`` list for a
file perfci finds by itself; see :data:`MADE`): a FIFO, a symbolic link to
/dev/zero, a directory, a sparse file over the input size limit, a pipe.
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
HUGE_MB = 300  # over perfci's default input limit (256 MiB); sparse, so it takes no disk
# made:KIND:NAME -> what is made at NAME in the scratch directory
MADE = {
    "fifo": "a FIFO (named pipe) no one writes",
    "devzero": "a symbolic link to /dev/zero",
    "urandom": "a symbolic link to /dev/urandom",
    "dangling": "a symbolic link to nothing",
    "dir": "a directory",
    "huge": f"a sparse file of {HUGE_MB} MiB",
    "pipe": "the read end of a pipe, as /dev/fd/N",
}


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
    pipes: list[int] = []  # descriptors of made pipes, closed after the run
    for token in entry["argv"]:
        if token.startswith("@"):
            name = token[1:]
            copy = scratch / name
            if name not in inputs:
                shutil.copyfile(CORPUS / name, copy)
            inputs[name] = copy
            argv.append(str(copy))
            shown.append(name)
        elif token.startswith("made:"):
            kind, _, name = token[5:].partition(":")
            assert kind in MADE, f"unknown made input {kind!r}; known: {', '.join(MADE)}"
            argv.append(token)  # made inside the run, so a pipe's descriptor lives as long as it
            shown.append(name if kind != "pipe" else "/dev/fd/N")
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
        for spec in entry.get("made", ()):  # inputs perfci finds by itself (a pyproject.toml in {tmp})
            _made(spec, scratch, pipes)
        argv = [_made(token[5:], scratch, pipes) if token.startswith("made:") else token for token in argv]
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
        for fd in pipes:
            os.close(fd)
    stderr = err.getvalue().replace(str(scratch) + os.sep, "").replace(str(scratch), "/tmp")
    stderr = stderr.replace(str(ROOT) + os.sep, "")
    return Outcome(code, out.getvalue(), stderr, "perfci " + " ".join(shown), inputs)


def _made(spec: str, scratch: Path, pipes: list[int]) -> str:
    """Make the input ``made:KIND:NAME`` names; its path (``pipes`` gets a pipe's descriptors)."""
    kind, _, name = spec.partition(":")
    path = scratch / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind in ("devzero", "urandom"):
        path.symlink_to("/dev/zero" if kind == "devzero" else "/dev/urandom")
    elif kind == "dangling":
        path.symlink_to(scratch / f"{name}.gone")
    elif kind == "dir":
        path.mkdir()
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(HUGE_MB << 20)
    elif kind == "pipe":
        read_end, write_end = os.pipe()
        pipes.extend((read_end, write_end))
        os.write(write_end, b"kernel,shape,dtype\n")
        return f"/dev/fd/{read_end}"
    return str(path)
