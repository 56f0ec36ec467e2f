"""One floor for one night: bisect judges the step with the floor confirm called it by, and a bisect
whose own GOOD -> BAD rounds deny the step is said, not dropped."""
from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from types import SimpleNamespace

from perfci.nightly import core, stages
from perfci.nightly.children import Child
from perfci.nightly.state import Confirmation, Log

CASE = ("gemv", "1x8x16", "fp32")


def _bisect_stage(tmp_path: Path, monkeypatch, report: dict, floor: float | None, bisect_args=()):
    asked = []

    def fake(words, cwd, env=None, echo=None):
        asked.append(list(words))
        return Child("perfci bisect", 0 if report["status"] == "culprit" else 3, json.dumps(report), ())

    monkeypatch.setattr(stages, "run_perfci", fake)
    monkeypatch.setattr(stages, "checkout_lock", lambda root: contextlib.nullcontext())
    cfg = SimpleNamespace(bisect=True, out=tmp_path, jobs=1, bench_timeout_s=600.0, bisect_args=list(bisect_args),
                          bench_args=["--repeats", "1"], bench=None, device="cpu", budget_s=900.0)
    p = SimpleNamespace(where=tmp_path, repo_root=tmp_path, suite_word="tiny", build=None, subdir="")
    monkeypatch.setattr(stages, "_build_words", lambda p: [])
    monkeypatch.setattr(stages, "_rebuild_checkout", lambda p, log: None)
    confirmation = Confirmation((CASE,), (core.Confirmed(*CASE, "regressed", ratio=1.019, rounds=5),), "n/a", floor)
    outcome = stages.bisect(cfg, p, SimpleNamespace(sha="b" * 40), SimpleNamespace(good_sha="a" * 40),
                            confirmation, time.monotonic(), Log())
    return asked[0], outcome


def test_bisect_is_given_confirm_s_floor_and_an_explicit_one_still_wins(tmp_path, monkeypatch):
    report = {"status": "culprit", "culprit": {"sha": "c" * 40, "subject": "gemv: walk K", "diffstat": "x"}}
    words, outcome = _bisect_stage(tmp_path, monkeypatch, report, 1.0)
    assert words[words.index("--min-effect") + 1] == "1"
    assert outcome.result.sha == "c" * 40
    words, _ = _bisect_stage(tmp_path, monkeypatch, report, 1.0, ["--min-effect", "5"])
    assert words[len(words) - 1 - words[::-1].index("--min-effect") + 1] == "5"  # the last one, the user's


def test_a_bisect_that_finds_no_step_hands_the_night_its_words(tmp_path, monkeypatch):
    report = {"status": "no-difference", "message": "GOOD -> BAD +0.41% [-0.30%, +1.12%]: no slowdown past 1%"}
    _, outcome = _bisect_stage(tmp_path, monkeypatch, report, 1.0)
    assert outcome.result == f"found no-difference: {report['message']}"
