"""Progress and notes on stderr: a live rich display on a terminal, plain lines in CI logs.

Every command reports progress through one :class:`Console`, so a terminal gets
a bar that redraws and a CI log gets one line per event, never escape codes.
"""
from __future__ import annotations

import sys
from typing import TextIO


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
            from rich.console import Console as RichConsole

            self._rich = RichConsole(file=self.stream, highlight=False)
            if total is not None:
                from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
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
