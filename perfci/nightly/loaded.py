"""The history store of a night, loaded once: every stage that reads it (compare, canary, triage,
trends) takes this :class:`Store`, and stage history adds tonight's run to it as it adds it to the store."""
from __future__ import annotations

from dataclasses import replace

from perfci.history.model import History, Run
from perfci.history.store import load, load_triage, load_verdicts
from perfci.history.triage import TriageRecord


class Store:
    """The history store in force (``path``; None: no store), its runs and triage records read on first use."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._history: History | None = None
        self._triage: tuple[TriageRecord, ...] | None = None

    def history(self) -> History:
        """The store as loaded, on first use."""
        if self._history is None:
            self._history = load(self.path or "")
        return self._history

    def verdicts(self) -> dict[str, int]:
        """run id -> the exit code its night recorded (:func:`perfci.history.store.load_verdicts`)."""
        return load_verdicts(self.path) if self.path else {}

    def triage(self) -> tuple[TriageRecord, ...]:
        """The store's triage records, read on first use (a corrupt one is bad input)."""
        if self._triage is None:
            self._triage = tuple(load_triage(self.path or ""))
        return self._triage

    def added(self, run: Run) -> None:
        """``run``, just added to the store, added to it as loaded too (when it was loaded)."""
        if self._history is not None:
            self._history = with_run(self._history, run)


def with_run(history: History, run: Run) -> History:
    """``history`` with ``run`` added, in the store's order (oldest first), as loading it again would give."""
    return replace(history, runs=tuple(sorted((*history.runs, run), key=lambda r: (r.info.when, r.info.run_id))))
