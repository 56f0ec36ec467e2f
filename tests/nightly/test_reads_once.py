"""A night reads tonight's results once and loads its history store once, whichever stages use them."""
from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

from perfci import results
from perfci.history import store
from perfci.nightly import core, loaded, stages
from perfci.nightly.night import run_night
from perfci.nightly.state import Confirmation, NightConfig, StageOutcome
from tests.nightly.conftest import make_repo
from tests.nightly.test_report_steps import SLOW_CASE, results as write_results


def confirmed_regressed(cfg, p, t, j, started, log):
    """confirm's answer on the flagged case (the real confirm measures two worktrees: test_nights.py)."""
    return StageOutcome(core.OK, "1.9x", Confirmation(core.flagged(j.cases, j.comparison.suite.verdict),
                        (core.Confirmed(*SLOW_CASE, "regressed", "", 1.9, 1.85, 1.95, 5),)))


def test_a_pooled_night_parses_tonight_once_and_loads_the_store_once(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    st = tmp_path / "store"
    store.add_runs(st, [str(write_results(tmp_path / f"n{i}.csv", f"2026-11-2{i}T02:00:00+00:00"))
                        for i in range(3)])
    tonight = write_results(tmp_path / "tonight.csv", "2026-12-01T02:00:00+00:00", slow=1.9)
    parsed, loads = Counter(), Counter()
    real_read, real_load, real_triage = results._read, store.load, store.load_triage

    def counted_read(path, *args, **kwargs):
        parsed[Path(path).name] += 1
        return real_read(path, *args, **kwargs)

    def counted(name, real):
        def call(*args, **kwargs):
            loads[name] += 1
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(results, "_read", counted_read)
    monkeypatch.setattr(loaded, "load", counted("store", real_load))
    monkeypatch.setattr(loaded, "load_triage", counted("triage", real_triage))
    monkeypatch.setattr(stages, "confirm", confirmed_regressed)
    out = tmp_path / "out"
    outcome, decision = run_night(NightConfig(suite=str(repo / "suites" / "tiny.toml"), out=out, run=str(tonight),
                                              history=str(st), repo=repo, device="cpu", bisect=False,
                                              canary_off=True), echo=io.StringIO())
    assert outcome.stage("tonight").status == core.OK, outcome.stage("tonight").detail
    assert outcome.baseline.endswith("last 3 of 3 nights") and decision.exit_code == 1
    # The flagged case's trend, from the store as loaded, tonight added (the other case, as quiet as its
    # three nights, is unchanged: the suite's own bound, not the profile's floor, holds it).
    assert outcome.stage("report").detail == "1 trend plot(s)"
    assert outcome.history_appended
    assert parsed["tonight.csv"] == 1  # --run: read once, and copied as DIR/run.csv, which is read never
    assert parsed["run.csv"] == 0 and len(store.run_files(st)) == 4  # though it is added to the store
    assert loads == {"store": 1, "triage": 1}
