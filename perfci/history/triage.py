"""What a team decided a finding was: triage records, as plain data, and what they do to a night.

A record names cases (one ``kernel shape dtype`` key, a glob over that text, or
``suite:NAME`` for a whole suite), the commit the finding is about, a state, who
said so, when and why:

* ``expected``: an intended change. For the cases it names the pooled baseline
  restarts at that commit: nights before it are no longer pooled, so the next
  nights are judged against the new level alone (:func:`restarts`).
* ``invalid``: a false alarm; counted in the detector's own record of real
  nights beside the canary (:func:`false_alarms`).
* ``acknowledged``: real, being worked on; the night still reports the case,
  under its own heading.
* ``fixed``: a later commit repaired it; the next green night of those cases
  says the issue can close.

Pure: no files. :mod:`perfci.history.store` reads and writes them, one small
JSON file each (``STORE/triage/<id>.json``), so two writers never touch one file.
"""
from __future__ import annotations

import fnmatch
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Callable, Iterable, Mapping, Sequence

FORMAT = "perfci-triage"
SCHEMA = 1
SUITE_PREFIX = "suite:"
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_MAX_TEXT = 2000


class TriageState(str, Enum):
    EXPECTED = "expected"
    INVALID = "invalid"
    ACKNOWLEDGED = "acknowledged"
    FIXED = "fixed"

    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__


STATES = tuple(s.value for s in TriageState)


@dataclass(frozen=True)
class TriageRecord:
    case: str  # a "kernel shape dtype" key, a glob over it, or suite:NAME
    sha: str
    state: TriageState
    who: str
    when: str  # ISO 8601, UTC
    reason: str
    link: str = ""
    record_id: str = ""  # the file's stem

    def to_dict(self) -> dict:
        return {"format": FORMAT, "schema": SCHEMA, "case": self.case, "sha": self.sha, "state": self.state.value,
                "who": self.who, "when": self.when, "reason": self.reason, "link": self.link}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @property
    def suite(self) -> str | None:
        return self.case[len(SUITE_PREFIX):] if self.case.startswith(SUITE_PREFIX) else None

    def names(self, key: Sequence[str], suite: str = "") -> bool:
        """Whether this record is about the case KEY (kernel, shape, dtype) of SUITE."""
        if self.suite is not None:
            return bool(suite) and self.suite == suite
        label = " ".join(key)
        return self.case == label or fnmatch.fnmatchcase(label, self.case)


def _one_line(value: object, field: str, required: bool) -> str:
    if value is None or value == "":
        if required:
            raise ValueError(f"'{field}' is required")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"'{field}' must be a string")
    text = value.strip()
    if required and not text:
        raise ValueError(f"'{field}' is required")
    if "\n" in text or "\r" in text:
        raise ValueError(f"'{field}' must be one line")
    if len(text) > _MAX_TEXT:
        raise ValueError(f"'{field}' is longer than {_MAX_TEXT} characters")
    return text


def make_record(case: str, sha: str, state: str, reason: str, who: str, link: str = "",
                now: datetime | None = None) -> TriageRecord:
    """A new record from what a person typed; ValueError naming the field that cannot be used."""
    case = _one_line(case, "case", True)
    if case.startswith(SUITE_PREFIX) and not case[len(SUITE_PREFIX):].strip():
        raise ValueError("'case' suite: needs a suite name (suite:NAME)")
    sha = _one_line(sha, "sha", True)
    if not _SHA.match(sha):
        raise ValueError(f"'sha' {sha!r} is not a commit (7 to 40 hex digits)")
    if state not in STATES:
        raise ValueError(f"'state' {state!r} is not one of {', '.join(STATES)}")
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    record = TriageRecord(case=case, sha=sha.lower(), state=TriageState(state), who=_one_line(who, "who", False) or "?",
                          when=stamp.isoformat(timespec="seconds"), reason=_one_line(reason, "reason", True),
                          link=_one_line(link, "link", False))
    return record


def file_stem(record: TriageRecord) -> str:
    """A name no other record takes: its time, commit, state and a random part."""
    stamp = record.when.replace("-", "").replace(":", "").replace("+0000", "Z")
    stamp = re.sub(r"[^0-9TZ]", "", stamp)
    return f"{stamp}_{record.sha[:12]}_{record.state.value}_{uuid.uuid4().hex[:8]}"


def from_dict(data: object, where: str, record_id: str = "") -> TriageRecord:
    """A stored record, validated; ValueError with one line naming WHERE otherwise."""
    def bad(why: str) -> ValueError:
        return ValueError(f"{where}: corrupt triage record ({why})")

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise bad(f"its 'format' is not '{FORMAT}'")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise bad("'schema' must be a positive integer")
    if schema > SCHEMA:
        raise ValueError(f"{where}: triage record schema {schema} was written by a newer perfci; "
                         f"this one reads schema {SCHEMA}: upgrade perfci")
    try:
        when = data.get("when")
        if not isinstance(when, str):
            raise ValueError("'when' must be a string")
        datetime.fromisoformat(when.replace("Z", "+00:00"))
        record = make_record(data.get("case"), data.get("sha"), data.get("state"), data.get("reason"),
                             data.get("who") or "?", data.get("link") or "")
    except ValueError as err:
        raise bad(str(err)) from None
    return TriageRecord(record.case, record.sha, record.state, record.who, when, record.reason, record.link,
                        record_id)


# --------------------------------------------------------------------------- what records do


def state_of(records: Iterable[TriageRecord], key: Sequence[str], suite: str = "") -> TriageRecord | None:
    """The newest record about the case KEY of SUITE (records are read oldest first), or None."""
    found = None
    for r in records:
        if r.names(key, suite) and (found is None or (r.when, r.record_id) >= (found.when, found.record_id)):
            found = r
    return found


def sha_matches(record_sha: str, run_sha: str) -> bool:
    """A run's sha (maybe with -dirty) is the record's commit: one is a prefix of the other, 7+ digits."""
    run = run_sha.removesuffix("-dirty").lower()
    return len(run) >= 7 and (run.startswith(record_sha) or record_sha.startswith(run))


def restart_index(record: TriageRecord, run_shas: Sequence[str], cur_sha: str = "",
                  after: Callable[[str, str], bool] | None = None) -> int | None:
    """The first of RUN_SHAS (oldest first) from which nights pool again after an ``expected`` at its commit.

    The first run at the record's commit; else, when tonight (CUR_SHA) is at it,
    none of them (``len(run_shas)``); else, with AFTER (``after(S, sha)``: S is
    an ancestor of sha, from git), the first run that contains the commit. None
    when the commit cannot be placed among the nights: the record then changes nothing.
    """
    for i, sha in enumerate(run_shas):
        if sha_matches(record.sha, sha):
            return i
    if cur_sha and sha_matches(record.sha, cur_sha):
        return len(run_shas)
    if after is not None:
        for i, sha in enumerate(run_shas):
            if sha and after(record.sha, sha.removesuffix("-dirty")):
                return i
    return None


def restarts(records: Iterable[TriageRecord], keys: Iterable[tuple[tuple[str, str, str], str]],
             run_shas: Sequence[str], cur_sha: str = "",
             after: Callable[[str, str], bool] | None = None) -> dict[tuple[str, str, str], tuple[int, TriageRecord]]:
    """For each case (KEY, suite) that an ``expected`` record names: the run its pooled nights restart at.

    The latest restart wins when several records name one case.
    """
    expected = [r for r in records if r.state is TriageState.EXPECTED]
    placed = [(r, restart_index(r, run_shas, cur_sha, after)) for r in expected]
    out: dict[tuple[str, str, str], tuple[int, TriageRecord]] = {}
    for key, suite in keys:
        for r, at in placed:
            if at is not None and r.names(key, suite) and (key not in out or at >= out[key][0]):
                out[key] = (at, r)
    return out


def states_by_case(records: Sequence[TriageRecord], keys: Iterable[tuple[str, str, str]],
                   suite: str) -> Mapping[tuple[str, str, str], TriageRecord]:
    """Each case's newest record (cases no record names are left out)."""
    out = {}
    for key in keys:
        found = state_of(records, key, suite)
        if found is not None:
            out[key] = found
    return out


def judged_false_alarms(records: Sequence[TriageRecord], nights: Sequence[tuple[str, str, str, frozenset]],
                        skip_runs: Iterable[str] = ()) -> tuple[int, int]:
    """(nights the team marked a false alarm, real nights judged) over NIGHTS (run id, suite, sha, case keys).

    NIGHTS oldest first. A real night is a run other than SKIP_RUNS (the
    canary's) after its suite's first (which has nothing to be judged
    against). It is a false alarm when an ``invalid`` record at its commit
    names its suite or one of its cases.
    """
    invalid = [r for r in records if r.state is TriageState.INVALID]
    skip = set(skip_runs)
    seen: set[str] = set()
    hits = n = 0
    for run_id, suite, sha, keys in nights:
        if run_id in skip:
            continue
        if suite not in seen:
            seen.add(suite)
            continue
        n += 1
        if any(sha_matches(r.sha, sha) and (r.suite == suite if r.suite is not None
                                             else any(r.names(k, suite) for k in keys)) for r in invalid):
            hits += 1
    return hits, n


def marks(records: Sequence[TriageRecord], key: Sequence[str], suite: str,
          shas: Sequence[str]) -> list[tuple[int, TriageRecord]]:
    """(the index among SHAS of the first night at each record's commit, the record) for the records naming the case."""
    out = []
    for r in records:
        if not r.names(key, suite):
            continue
        at = next((i for i, sha in enumerate(shas) if sha_matches(r.sha, sha)), None)
        if at is not None:
            out.append((at, r))
    return out
