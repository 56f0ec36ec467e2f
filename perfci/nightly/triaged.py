"""What the team's triage records say about tonight's cases (pure: records and verdicts in, plain data out).

* Each case of tonight that a record names carries its newest record's state
  (verdict.json, summary.md, issue.md).
* ``acknowledged`` cases are reported under their own heading; a night whose
  every confirmed regression is of acknowledged cases says so
  (``triage_acknowledged_only``), so the workflow comments on the open issue
  rather than treating it as news.
* ``fixed`` cases green tonight (unchanged, improved, or fixed; confirm's word
  where confirm measured them) make ``issue_can_close`` true.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

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


def verdict_fields(triage: Sequence[CaseTriage], cases, confirmed, confirmed_regression: bool) -> dict:
    """verdict.json's triage keys."""
    words = tonight_verdicts(cases, confirmed)
    return {"triage": [{**asdict(t), "case": list(t.key), "tonight": words.get(t.key)} for t in triage],
            "triage_acknowledged_only": acknowledged_only(triage, confirmed, confirmed_regression),
            "issue_can_close": issue_can_close(triage, cases, confirmed)}


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
