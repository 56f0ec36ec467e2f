"""An acknowledged case is news only when it moves again: judged against its nights since the acknowledgement."""
from __future__ import annotations

import json
from pathlib import Path

from perfci.compare.comparison import CompareOptions
from perfci.compare.store import pooled_comparison
from perfci.history import store, triage
from perfci.history.store import load_triage
from perfci.nightly import acked, core, render, stages, triaged
from perfci.nightly.loaded import Store
from perfci.nightly.state import Night, NightConfig, Project, Sources, TonightResult
from perfci.results import read_results_cells, read_results_text
from perfci.verdict import Verdict
from tests.history.synth import cases, write_night

STEP_NIGHT = 6  # matmul_tiled +10% from this night on, acknowledged at its commit
STEPPED = {(k, f"{m}x{n}x{kk}", "bf16"): 1.10 for k, m, n, kk in cases() if k == "matmul_tiled"}
S = f"{STEP_NIGHT:02d}" * 20


AGAIN = sorted(STEPPED)[:3]  # the acknowledged cases that move again; the other nine stay at the new level


def scaled(factor: float) -> dict:
    return {k: v * factor if k in AGAIN else v for k, v in STEPPED.items()}


def night(tmp: Path, i: int, slow: dict | None = None) -> Path:
    return write_night(tmp / f"n{i}.csv", i, seed=3, slow=slow if slow is not None else
                       (STEPPED if i >= STEP_NIGHT else None))


def acked_store(tmp: Path, upto: int, sha: str = S, when: str | None = None) -> Path:
    """Nights 0..UPTO-1, and an acknowledged record of the step's cases at SHA."""
    st = tmp / "st"
    store.add_runs(st, [str(night(tmp, i)) for i in range(upto)])
    record = triage.make_record("matmul_tiled * bf16", sha, "acknowledged", "bigger tile, fix under way", "ana")
    if when is not None:
        record = triage.TriageRecord(record.case, record.sha, record.state, record.who, when, record.reason)
    store.add_triage(st, record)
    return st


def since_ack(st: Path, cur: Path) -> dict:
    found = triaged.case_triage(load_triage(st), STEPPED, "decode")
    table, cells = read_results_cells(str(cur))
    return {t.key: t for t in acked.judge_acknowledged(store.load(str(st)), table, cells, found, None, 5)}


def moved(judged: dict) -> set:
    return set(triaged.acknowledged_moved(tuple(judged.values())))


def test_an_acked_case_staying_at_its_new_level_through_two_nights_has_not_moved(tmp_path):
    for upto in (STEP_NIGHT + 2, STEP_NIGHT + 3):  # two, then three stored nights at the new level
        folder = tmp_path / str(upto)
        folder.mkdir()
        st = acked_store(folder, upto)
        cur = night(folder, upto)
        judged = since_ack(st, cur)
        assert set(judged) == set(STEPPED) and moved(judged) == set()
        for t in judged.values():
            assert t.since_ack in (Verdict.UNCHANGED, Verdict.INCONCLUSIVE) and abs(t.since_ack_ratio - 1) < 0.02
        # against the old pooled baseline the very same night is still off its level: that is what is not news
        old = {c.key: c for c in pooled_comparison(str(st), str(cur), None, CompareOptions(), 5).cases}
        assert min(old[k].ratio for k in STEPPED) > 1.02 and all(old[k].verdict != Verdict.UNCHANGED for k in STEPPED)


def test_an_acked_case_that_moves_again_by_a_clear_step_has_moved(tmp_path):
    st = acked_store(tmp_path, STEP_NIGHT + 2)
    worse = since_ack(st, night(tmp_path, STEP_NIGHT + 2, slow=scaled(1.06)))
    assert moved(worse) == set(AGAIN)
    assert all(worse[k].since_ack == Verdict.REGRESSED and 1.04 < worse[k].since_ack_ratio < 1.08 for k in AGAIN)
    better = since_ack(st, night(tmp_path, STEP_NIGHT + 2, slow=scaled(1 / 1.08)))  # most of the way back
    assert moved(better) == set(AGAIN) and all(better[k].since_ack == Verdict.IMPROVED for k in AGAIN)


def test_with_one_night_since_only_a_far_move_counts_and_with_none_nothing_does(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    st = acked_store(one, STEP_NIGHT + 1)
    assert moved(since_ack(st, night(one, STEP_NIGHT + 1))) == set()
    # +3% against one night: within the one-run floor, inconclusive, not moved
    near = since_ack(st, night(one, STEP_NIGHT + 1, slow=scaled(1.03)))
    assert moved(near) == set() and all("one night since" in t.since_ack_why for t in near.values())
    assert moved(since_ack(st, night(one, STEP_NIGHT + 1, slow=scaled(1.15)))) == set(AGAIN)
    none = tmp_path / "none"
    none.mkdir()
    st = acked_store(none, STEP_NIGHT)  # tonight is at the acknowledged commit: the new level's first night
    first = since_ack(st, night(none, STEP_NIGHT, slow=scaled(1.15)))
    assert moved(first) == set() and all(t.since_ack == Verdict.ADDED for t in first.values())


def test_a_commit_no_night_was_measured_at_restarts_at_the_acknowledgements_time(tmp_path):
    # the record's commit is none of the store's; it was written the morning of the step's night
    for when in (f"2026-12-{1 + STEP_NIGHT:02d}T01:00:00+00:00", f"2026-12-{1 + STEP_NIGHT:02d}T01:00:00"):
        folder = tmp_path / when.replace(":", "")
        folder.mkdir()
        st = acked_store(folder, STEP_NIGHT + 2, sha="ff" * 20, when=when)
        level = since_ack(st, night(folder, STEP_NIGHT + 2))
        assert moved(level) == set() and all(abs(t.since_ack_ratio - 1) < 0.02 for t in level.values())
        judged = since_ack(st, night(folder, STEP_NIGHT + 2, slow=scaled(1.06)))
        assert moved(judged) == set(AGAIN) and judged[AGAIN[0]].since_ack == "regressed"


def test_the_baseline_stage_writes_acknowledged_moved_and_a_failure_reads_as_moved(tmp_path, monkeypatch):
    st = acked_store(tmp_path, STEP_NIGHT + 2)
    cur = night(tmp_path, STEP_NIGHT + 2, slow=scaled(1.06))
    (tmp_path / "out").mkdir()

    def baseline_night() -> Night:
        n = Night(NightConfig(suite="decode", out=tmp_path / "out", history=str(st)), project=Project(suite="decode"),
                  sources=Sources(store=str(st)), tonight=TonightResult(cur, *read_results_text(cur), sha=""),
                  store=Store(str(st)))
        done = stages.baseline(n.cfg, n.project, n.tonight, n.sources, n.store, n.log)
        assert done.status == core.OK
        n.judged = done.result
        return n

    n = baseline_night()
    o = n.outcome([])
    v = json.loads(render.verdict_json(o, core.judge_night(o)))
    assert sorted(map(tuple, v["acknowledged_moved"])) == AGAIN
    assert {tuple(t["case"]) for t in v["triage"] if t["since_ack"] == "regressed"} == set(AGAIN)
    assert "moved again since they were acknowledged" in render.summary_md(o, core.judge_night(o))

    def boom(*_a, **_k):
        raise RuntimeError("no")

    monkeypatch.setattr(acked, "moved_since_ack", boom)
    n = baseline_night()
    assert {t.since_ack for t in n.judged.triage} == {triaged.NOT_JUDGED} and len(n.log.warnings) == 1
    assert "not judged against their nights since" in n.log.warnings[0]
    assert set(triaged.acknowledged_moved(n.judged.triage)) == set(STEPPED)
