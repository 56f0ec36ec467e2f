"""The history tables printed to a terminal (and to CI logs) carry no control sequence of a store's text.

Device names, store paths, triage reasons and who: whatever their authors wrote. An ESC could clear the
screen or retitle the window, a carriage return hide what came before on the line (perfci.escape.term_text).
"""
from __future__ import annotations

from perfci.history.render_triage import render_records_table
from perfci.history.stale import SuiteAge, render_table
from perfci.history.triage import TriageRecord, TriageState

HOSTILE = "gpu\x1b]0;pwned\x07\x1b[2J\rok\u202e"


def _has_control(text: str) -> bool:
    return any((ord(ch) < 32 and ch != "\n") or 0x7F <= ord(ch) <= 0x9F or ch == "\u202e" for ch in text)


def test_triage_list_shows_a_hostile_reason_and_who_as_visible_escapes():
    rec = TriageRecord(case="k 1x1x1 fp32", sha="0123456789abcdef", state=TriageState("expected"), who=HOSTILE,
                       when="2026-12-02T01:00:00+00:00", reason=f"why {HOSTILE}", link="")
    out = render_records_table([rec])
    assert not _has_control(out), repr(out)
    assert "\\x1b]0;pwned\\x07" in out and len(out.splitlines()) == 2


def test_stale_table_shows_a_hostile_device_and_store_as_visible_escapes():
    age = SuiteAge(store=f"/stores/{HOSTILE}", device=HOSTILE, suite="gemm", last="2026-12-01T01:00:00+00:00",
                   last_sha="abc", age_days=1.0, stale=False)
    out = render_table([age], days=3)
    assert not _has_control(out), repr(out)
    assert "\\x1b[2J" in out and len(out.splitlines()) == 2


def test_an_ordinary_row_is_unchanged():
    age = SuiteAge(store="/stores/h200", device="NVIDIA H200", suite="gemm", last="2026-12-01T01:00:00+00:00",
                   last_sha="abc", age_days=1.0, stale=False)
    assert "NVIDIA H200" in render_table([age], days=3) and "(/stores/h200)" in render_table([age], days=3)


def test_canary_table_without_nights_shows_a_hostile_device_as_visible_escapes():
    from perfci.history.canary import render_table as canary_table

    out = canary_table(HOSTILE, "/tmp/s", [])
    assert not _has_control(out), repr(out)
