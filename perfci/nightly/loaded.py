"""The history store of a night, loaded once: every stage that reads it (compare, canary, triage,
trends) takes these values, and stage history adds tonight's run to them as it adds it to the store."""
from __future__ import annotations

from dataclasses import replace

from perfci.history.model import History, Run
from perfci.history.store import load, load_triage
from perfci.history.triage import TriageRecord
from perfci.nightly.state import Night


def loaded_store(n: Night) -> History:
    """The history store in force, loaded on first use."""
    if n.history is None:
        n.history = load(n.store or "")
    return n.history


def store_triage(n: Night) -> tuple[TriageRecord, ...]:
    """The store's triage records, read on first use (a corrupt one is bad input)."""
    if n.triage_records is None:
        n.triage_records = tuple(load_triage(n.store or ""))
    return n.triage_records


def with_run(history: History, run: Run) -> History:
    """``history`` with ``run`` added, in the store's order (oldest first), as loading it again would give."""
    return replace(history, runs=tuple(sorted((*history.runs, run), key=lambda r: (r.info.when, r.info.run_id))))
