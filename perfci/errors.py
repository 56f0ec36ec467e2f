"""Errors the user can act on, and the exit codes perfci uses everywhere.

Anything raised as :class:`PerfciError` is printed by the CLI as one line on
stderr, with its exit code. Anything else is a bug: the CLI prints it as one
line ``perfci: internal error: ...`` and exits :data:`EXIT_INTERNAL`, never 1
(a crash must not read as a regression); ``PERFCI_DEBUG=1`` adds the traceback.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_REGRESSION = 1  # compare found a regression; bisect found nothing to bisect is 3
EXIT_USAGE = 2  # bad input, bad arguments, or an environment perfci cannot use
EXIT_INCONCLUSIVE = 3  # compare --strict with inconclusive cases; bisect: no real difference
EXIT_INTERNAL = 4  # a bug (an unexpected exception): never 1, so a crash never reads as a regression
EXIT_INTERRUPTED = 130


class PerfciError(Exception):
    """A problem with the user's input or environment, reported in one line."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def internal_error_line(err: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, shortened: what an unexpected exception says to a user."""
    text = " ".join(str(err).split())
    line = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
