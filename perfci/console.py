"""Progress and notes on stderr: a live rich display on a terminal, plain lines in CI logs.

Every command reports progress through one :class:`Console`, so a terminal gets
a bar that redraws and a CI log gets one line per event, never escape codes.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, TextIO


class Console:
    """Lines on stderr, and an optional progress bar over ``total`` steps.

    Args:
        prefix: put before every :meth:`note` (e.g. ``"perfci bisect: "``).
        total: the number of steps; with a terminal this draws a live bar.
        stream: where to write (default: stderr); a bar is drawn only on a TTY.
    """

    def __init__(self, prefix: str = "", total: int | None = None, stream: TextIO | None = None):
        self.prefix = prefix
        self.stream = stream or sys.stderr
        self._rich = None
        self._bar = None
        self._task = None
        if self.stream.isatty():
            from rich.console import Console as RichConsole  # lazy: rich

            self._rich = RichConsole(file=self.stream, highlight=False)
            if total is not None:
                from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,  # lazy: rich
                                           TimeElapsedColumn, TimeRemainingColumn)

                self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(),
                                     console=self._rich, transient=True)
                self._task = self._bar.add_task("starting", total=total)
                self._bar.start()

    def line(self, text: str, style: str | None = None) -> None:
        """A line that stays (above the bar, when there is one)."""
        if self._rich is not None:
            self._rich.print(text, style=style)
        else:
            print(text, file=self.stream, flush=True)

    def note(self, text: str) -> None:
        self.line(f"{self.prefix}{text}", "dim")

    def describe(self, text: str) -> None:
        """What the bar is working on now (nothing in a plain log)."""
        if self._bar is not None:
            self._bar.update(self._task, description=text)

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class ReaderGoneTolerant:
    """A text stream that stops writing, quietly, once its reader has closed the pipe.

    ``perfci compare ... | head`` (or ``| grep -q``) closes perfci's stdout
    early. The verdict is still decided by the command and its exit code must
    reach the caller: a write that meets a closed pipe is dropped, and so is
    everything after it, instead of unwinding the command with BrokenPipeError.
    """

    def __init__(self, inner: TextIO):
        self._inner = inner
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._inner.write(text)
            except BrokenPipeError:
                self._drop_the_rest()
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._inner.flush()
            except BrokenPipeError:
                self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        self.reader_gone = True
        # Point the descriptor at /dev/null: what the stream still buffers, and the
        # interpreter's own flush at exit, then go nowhere instead of failing again
        # (which would print "Exception ignored" and change the exit code to 120).
        try:
            fd = self._inner.fileno()
        except (OSError, ValueError, AttributeError):
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError, ValueError):
            self._inner.flush()

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


@contextlib.contextmanager
def tolerate_closed_pipes() -> Iterator[None]:
    """stdout and stderr that survive a reader that has gone, for the length of one command."""
    saved = sys.stdout, sys.stderr
    out, err = ReaderGoneTolerant(saved[0]), ReaderGoneTolerant(saved[1])
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        yield
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved
