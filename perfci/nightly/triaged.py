"""What the team's triage records say about tonight's cases (pure: records and verdicts in, plain data out).

* Each case of tonight that a record names carries its newest record's state
  (verdict.json, summary.md, issue.md).
* ``acknowledged`` cases are reported under their own heading; a night whose
  every confirmed regression is of acknowledged cases says so
  (``triage_acknowledged_only``), so the workflow comments on the open issue
  rather than treating it as news.
* ``acknowledged`` cases are judged again against their nights since the
  acknowledgement (:mod:`perfci.nightly.acked`); those that moved from that level
  are ``acknowledged_moved``, the only news an acknowledged-only night carries.
* ``fixed`` cases green tonight (unchanged, improved, or fixed; confirm's word
  where confirm measured them) make ``issue_can_close`` true, with the comment
  the workflow closes the issue with (``issue_close_comment``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

from perfci.escape import md_code
from perfci.history.triage import TriageRecord, TriageState, state_of
from perfci.verdict import Verdict

GREEN = (Verdict.UNCHANGED, Verdict.IMPROVED, Verdict.FIXED)
Key = tuple[str, str, str]


@dataclass(frozen=True)
class CaseTriage:
    kernel: str
    shape: str
    dtype: str
    state: str
    sha: str
    who: str
    when: str
    reason: str
    link: str = ""
    record: str = ""  # the record's case pattern: a key, a glob, or suite:NAME
    # acknowledged cases: tonight's word against the nights since the acknowledgement (perfci.nightly.acked)
    since_ack: str = ""  # "": not judged that way (another state, or no store)
    since_ack_ratio: float | None = None
    since_ack_why: str = ""

    @property
    def key(self) -> Key:
        return (self.kernel, self.shape, self.dtype)


def case_triage(records: Sequence[TriageRecord], keys: Iterable[Key], suite: str) -> tuple[CaseTriage, ...]:
    """Tonight's cases that a record names, each with its newest record."""
    out = []
    for key in keys:
        r = state_of(records, key, suite)
        if r is not None:
            out.append(CaseTriage(*key, state=r.state.value, sha=r.sha, who=r.who, when=r.when, reason=r.reason,
                                  link=r.link, record=r.case))
    return tuple(out)


def keys_in(triage: Sequence[CaseTriage], state: TriageState) -> frozenset:
    return frozenset(t.key for t in triage if t.state == state.value)


def tonight_verdicts(cases, confirmed) -> dict[Key, str]:
    """Each case's word tonight: confirm's where it measured the case again, else compare's."""
    words = {c.key: c.verdict for c in cases or ()}
    words.update({c.key: c.verdict for c in confirmed or ()})
    return words


def issue_can_close(triage: Sequence[CaseTriage], cases, confirmed) -> bool:
    """Cases marked fixed, and every one of them green tonight."""
    fixed = keys_in(triage, TriageState.FIXED)
    words = tonight_verdicts(cases, confirmed)
    return bool(fixed) and all(words.get(k) in GREEN for k in fixed)


def acknowledged_only(triage: Sequence[CaseTriage], confirmed, confirmed_regression: bool) -> bool:
    """A confirmed regression, and only of cases the team acknowledged."""
    acked = keys_in(triage, TriageState.ACKNOWLEDGED)
    regressed = {c.key for c in confirmed or () if c.verdict == Verdict.REGRESSED}
    return confirmed_regression and bool(regressed) and regressed <= acked


NOT_JUDGED = "not judged"  # the judgement since the acknowledgement failed: counted as moved, never silenced
MOVED_WORDS = (Verdict.REGRESSED.value, Verdict.IMPROVED.value, NOT_JUDGED)  # perfci.nightly.acked


def acknowledged_moved(triage: Sequence[CaseTriage]) -> list[Key]:
    """Acknowledged cases that moved from their level since the acknowledgement (or could not be judged so)."""
    return [t.key for t in triage if t.state == TriageState.ACKNOWLEDGED.value and t.since_ack in MOVED_WORDS]


def close_comment(triage: Sequence[CaseTriage], cases, confirmed) -> str | None:
    """The issue's closing comment (markdown, every case escaped), or None when the issue cannot close."""
    if not issue_can_close(triage, cases, confirmed):
        return None
    words = tonight_verdicts(cases, confirmed)
    fixed = [t for t in triage if t.state == TriageState.FIXED.value]
    lines = [f"- {md_code(' '.join(t.key))}: {words.get(t.key)} tonight (fixed at {md_code(t.sha[:12])})"
             for t in fixed[:60]]
    if len(fixed) > 60:
        lines.append(f"- and {len(fixed) - 60} more")
    return "\n".join(["Every case marked `fixed` was green tonight, so perfci nightly closes this issue:", "",
                      *lines])


def verdict_fields(triage: Sequence[CaseTriage], cases, confirmed, confirmed_regression: bool) -> dict:
    """verdict.json's triage keys."""
    words = tonight_verdicts(cases, confirmed)
    return {"triage": [{**asdict(t), "case": list(t.key), "tonight": words.get(t.key)} for t in triage],
            "triage_acknowledged_only": acknowledged_only(triage, confirmed, confirmed_regression),
            "acknowledged_moved": [list(k) for k in acknowledged_moved(triage)],
            "issue_can_close": issue_can_close(triage, cases, confirmed),
            "issue_close_comment": close_comment(triage, cases, confirmed)}


MARKER = "perfci-triage"  # issue.md's hidden line the triage workflow reads (perfci-triage.yml)


def issue_marker(suite: str, sha: str, cases, confirmed) -> str:
    """An HTML comment with what a `/perfci expected|invalid|ack` comment on the issue is about.

    The suite, tonight's commit and the cases the night found regressed
    (confirm's word where it ran, else compare's), as JSON. ``--`` cannot end
    the comment early: it is written as ``-\\u002d``, which JSON reads back.
    """
    words = tonight_verdicts(cases, confirmed)
    found = sorted(" ".join(k) for k, v in words.items() if v in (Verdict.REGRESSED, Verdict.BROKEN))
    text = json.dumps({"suite": suite, "sha": sha, "cases": found}, sort_keys=True)
    return f"<!-- {MARKER} {text.replace('--', '-' + chr(92) + 'u002d')} -->"
