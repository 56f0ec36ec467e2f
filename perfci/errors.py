"""Errors the user can act on, and the exit codes perfci uses everywhere.

Anything raised as :class:`PerfciError` is printed by the CLI as one line on
stderr, with its exit code; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_REGRESSION = 1  # compare found a regression; bisect found nothing to bisect is 3
EXIT_USAGE = 2  # bad input, bad arguments, or an environment perfci cannot use
EXIT_INCONCLUSIVE = 3  # compare --strict with inconclusive cases; bisect: no real difference
EXIT_INTERRUPTED = 130


class PerfciError(Exception):
    """A problem with the user's input or environment, reported in one line."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
