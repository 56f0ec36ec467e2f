"""The base of a night's confirm and bisect is the last good night, not simply the newest."""
from __future__ import annotations

import pytest

from perfci.errors import PerfciError
from perfci.history.store import add_verdict, load_verdicts
from perfci.nightly.lastgood import last_good

NIGHTS = [("n1", "a" * 40), ("n2", "b" * 40), ("n3", "c" * 40)]


def test_the_newest_night_when_it_was_green_or_recorded_nothing():
    assert last_good(NIGHTS, {"n1": 0, "n2": 0, "n3": 0}, ()) == (2, "")
    assert last_good(NIGHTS, {}, ()) == (2, "")  # a store from before verdicts were kept


def test_a_red_newest_night_is_passed_over_and_the_summary_says_so():
    index, note = last_good(NIGHTS, {"n1": 0, "n2": 0, "n3": 1}, ())
    assert index == 1
    assert note == ("confirm and bisect compare with the last good night n2 (bbbbbbbbbbbb): the 1 newer "
                    "night(s) were red")
    assert last_good(NIGHTS, {"n1": 0, "n2": 3, "n3": 1}, ())[0] == 0  # undecided is not good either


def test_a_red_night_the_team_triaged_counts_as_good():
    assert last_good(NIGHTS, {"n1": 0, "n2": 1, "n3": 1}, ["b" * 12])[0] == 1


def test_with_no_good_night_the_oldest():
    assert last_good(NIGHTS, {"n1": 1, "n2": 1, "n3": 1}, ())[0] == 0


def test_a_night_s_verdict_is_recorded_once_and_read_back(tmp_path):
    assert add_verdict(tmp_path, "n3", 1, "regression confirmed: gemv +5%") is True
    assert add_verdict(tmp_path, "n3", 0, "again") is False  # a re-run of the night keeps the first
    assert load_verdicts(tmp_path) == {"n3": 1}
    (tmp_path / "verdicts" / "bad.json").write_text("{")
    with pytest.raises(PerfciError, match="corrupt night verdict"):
        load_verdicts(tmp_path)
