"""The perfci commands a night starts as processes (run, confirm, bisect), and what their exits mean.

Each runs as ``python -m perfci ...`` with this process's interpreter, so the
night's perfci is the one that measures, confirms and bisects (``-P`` keeps a
checkout's own ``perfci/`` off the path when the command runs inside a
worktree of an older revision). The child's stderr (its progress) is passed
through line by line and its last lines kept; its stdout (JSON) is captured.

Exit codes are read with the same vocabulary everywhere: 2 is the child
refusing its input (a :class:`PerfciError` with the child's own line), 130 an
interrupt, and anything the caller did not expect (a traceback's 1, 4, a
signal) is a :class:`ChildCrash`: an internal error of the night, never a verdict.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, TextIO

from perfci.errors import EXIT_INTERRUPTED, EXIT_USAGE, PerfciError

TAIL_LINES = 40


class ChildCrash(RuntimeError):
    """A perfci child ended in a way its command never ends on purpose."""


@dataclass(frozen=True)
class Child:
    command: str  # "perfci confirm", for messages
    code: int
    stdout: str
    tail: tuple[str, ...]  # its last stderr lines

    def error_line(self) -> str:
        """The child's own one-line reason (its ``perfci: error:`` line), or its last line."""
        for line in reversed(self.tail):
            for prefix in ("perfci: error: ", "perfci: internal error: "):
                if line.startswith(prefix):
                    return line[len(prefix):]
        return self.tail[-1] if self.tail else ""


def perfci_argv(words: Iterable[str]) -> list[str]:
    """``python [-P] -m perfci WORDS``: this interpreter, this perfci."""
    isolate = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *isolate, "-m", "perfci", *words]


def run_perfci(words: list[str], cwd: Path, env: Mapping[str, str] | None = None,
               echo: TextIO | None = None) -> Child:
    """Run ``perfci WORDS`` in ``cwd`` to its end; stderr passes through to ``echo``."""
    echo = echo or sys.stderr
    command = f"perfci {words[0]}" if words else "perfci"
    try:
        proc = subprocess.Popen(perfci_argv(words), cwd=cwd, env=dict(env or os.environ),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, encoding="utf-8", errors="replace", bufsize=1)
    except OSError as err:
        raise ChildCrash(f"{command} could not start: {err.strerror or err}") from None
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    out: list[str] = []

    def relay() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            tail.append(line.rstrip("\n"))
            echo.write(line)
            echo.flush()

    def collect() -> None:
        out.append(proc.stdout.read())  # type: ignore[union-attr]

    threads = [threading.Thread(target=relay, daemon=True), threading.Thread(target=collect, daemon=True)]
    for t in threads:
        t.start()
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise
    for t in threads:
        t.join(timeout=10)
    return Child(command, code, "".join(out), tuple(tail))


def _stop(proc: subprocess.Popen) -> None:
    """Let an interrupted child clean up (confirm removes its worktrees, bisect restores the tree)."""
    try:
        proc.terminate()  # perfci turns SIGTERM into its own interrupt handling
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except OSError:
        pass


def expect(child: Child, codes: Iterable[int]) -> int:
    """The child's exit code when it is one of ``codes``; otherwise what that exit means.

    Raises:
        PerfciError: exit 2, the child refused its input (its line, exit 2).
        KeyboardInterrupt: exit 130.
        ChildCrash: any other exit (a traceback, an internal error, a signal).
    """
    if child.code in tuple(codes):
        return child.code
    if child.code == EXIT_USAGE:
        raise PerfciError(f"{child.command}: {child.error_line() or 'refused its input (exit 2)'}")
    if child.code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    how = f"killed by signal {-child.code}" if child.code < 0 else f"exit {child.code}"
    last = child.error_line()
    raise ChildCrash(f"{child.command} ended unexpectedly ({how})" + (f": {last}" if last else ""))


def parse_json(child: Child):
    """The child's stdout as JSON; a child that exited 'normally' without it crashed."""
    try:
        return json.loads(child.stdout)
    except ValueError:
        first = child.stdout.strip().splitlines()[:1]
        raise ChildCrash(f"{child.command} (exit {child.code}) printed no JSON report"
                         + (f" (stdout began {first[0][:80]!r})" if first else " (stdout empty)")) from None
