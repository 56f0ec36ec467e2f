"""Triage records as text: ``perfci history triage --list`` (a table or JSON)."""
from __future__ import annotations

import json
from typing import Sequence

from perfci.escape import term_text
from perfci.history.triage import TriageRecord


def render_records_json(records: Sequence[TriageRecord]) -> str:
    """A JSON list, oldest first: case, sha, state, reason, link, who, when and the record's id."""
    return json.dumps([{"case": r.case, "sha": r.sha, "state": r.state.value, "reason": r.reason, "link": r.link,
                        "who": r.who, "when": r.when, "id": r.record_id} for r in records], indent=2) + "\n"


def render_records_table(records: Sequence[TriageRecord]) -> str:
    if not records:
        return "no triage records\n"
    lines = [f"{'when':<25} {'state':<12} {'sha':<12} {'who':<16} case: reason"]
    for r in records:
        lines.append(f"{r.when:<25} {r.state.value:<12} {r.sha[:12]:<12} {r.who[:16]:<16} {r.case}: {r.reason}"
                     + (f" ({r.link})" if r.link else ""))
    return "\n".join(term_text(line) for line in lines) + "\n"
