"""The nightly canary's records in a store, and the detector's rates they add up to (perfci history canary)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.errors import PerfciError
from perfci.history import store
from perfci.history.canary import CanaryNight, from_dict, rates, tonight_line
from tests.history.synth import write_night

ROOT = Path(__file__).resolve().parents[2]


def night(i: int, twin: str = "unchanged", plant: str = "regressed", paired: str = "regressed",
          truth: float | None = 1.031) -> CanaryNight:
    return CanaryNight(run_id=f"2026120{i}T020000Z_perfci-canary_{i:012d}_abcdef0123",
                       timestamp=f"2026-12-0{i}T02:00:00+00:00", sha=f"{i:02d}" * 20,
                       device_name="NVIDIA H200", arch="sm_90", suite="decode",
                       plant_pct=3.0, planted_pct=3.125, shape="2048x2048x4096", dtype="bf16",
                       truth_ratio=truth, truth_low=None if truth is None else truth - 0.004,
                       truth_high=None if truth is None else truth + 0.004, baseline="one night" if twin else "",
                       twin_verdict=twin, twin_ratio=1.002 if twin else None, plant_verdict=plant,
                       plant_ratio=1.03 if plant else None, confirm_verdict=paired,
                       confirm_ratio=1.031 if paired else None, confirm_rounds=5)


def test_rates_count_only_the_nights_each_detector_judged():
    nights = [night(1, twin="", plant=""),  # the first canary night: nothing for compare to judge against
              night(2), night(3, twin="inconclusive", plant="inconclusive"),
              night(4, twin="regressed", plant="unchanged", paired="inconclusive"), night(5)]
    r = rates(nights)
    assert r.nights == 5
    assert (r.false_alarm.hits, r.false_alarm.n) == (2, 4)  # inconclusive and regressed: not unchanged
    assert (r.wrong_red.hits, r.wrong_red.n) == (1, 4)
    assert (r.compare_power.hits, r.compare_power.n) == (2, 4)
    assert (r.compare_flagged.hits, r.compare_flagged.n) == (3, 4)  # the weaker reading: sent to confirm
    assert (r.confirm_power.hits, r.confirm_power.n) == (4, 5)
    assert r.truth_pct == pytest.approx(3.1)
    for rate in (r.false_alarm, r.compare_power, r.confirm_power):
        assert rate.low < rate.rate < rate.high  # Wilson: never a zero-width interval at a few nights
    assert "confirm found 4/5 = 80% [" in "\n".join(r.lines())


def test_a_record_round_trips_and_a_foreign_or_newer_one_is_one_line():
    c = night(2)
    assert from_dict(json.loads(c.to_json())) == c
    with pytest.raises(ValueError, match="not a perfci canary record"):
        from_dict({"format": "something"})
    with pytest.raises(ValueError, match="written by a newer perfci"):
        from_dict(dict(c.to_dict(), schema=99))
    with pytest.raises(ValueError, match=r"corrupt canary record \(no run_id"):
        from_dict({k: v for k, v in c.to_dict().items() if k != "run_id"})


def test_tonight_line_says_what_each_detector_did():
    line = tonight_line(night(2, twin="unchanged", plant="inconclusive", paired="regressed"))
    assert line.startswith("canary +3% (3.1% more K iterations; measured +3.1% [+2.7%, +3.5%])")
    assert "twin unchanged +0.2%, planted inconclusive +3.0%; confirm regressed +3.1% after 5 rounds" in line
    first = tonight_line(night(1, twin="", plant="", truth=None))
    assert "twin not judged (no earlier canary night)" in first and "its size not measured" in first


def test_the_store_keeps_each_record_once_beside_its_run(tmp_path):
    st = tmp_path / "st"
    store.add_runs(st, [str(write_night(tmp_path / "n0.csv", 0))])
    assert store.load_canaries(st) == []
    assert store.add_canary(st, night(3)) is True
    assert store.add_canary(st, night(2)) is True
    assert store.add_canary(st, night(3)) is False  # the night run again: recorded once
    assert [c.run_id for c in store.load_canaries(st)] == [night(2).run_id, night(3).run_id]  # oldest first
    assert len(store.load(st).runs) == 1  # the records are not runs
    (st / "canary" / "broken.json").write_text("{")
    with pytest.raises(PerfciError, match="broken.json: corrupt canary record"):
        store.load_canaries(st)


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_history_canary_prints_the_running_rates_per_device(tmp_path):
    h200, empty = tmp_path / "h200", tmp_path / "mi355x"
    store.add_runs(h200, [str(write_night(tmp_path / "a.csv", 0))])
    store.add_runs(empty, [str(write_night(tmp_path / "b.csv", 0, env={"arch": "gfx950",
                                                                       "device_name": "AMD Instinct MI355X"}))])
    for c in (night(1, twin="", plant=""), night(2), night(3, twin="inconclusive", plant="inconclusive")):
        store.add_canary(h200, c)
    r = perfci("history", "canary", h200, empty)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{h200} (NVIDIA H200 (sm_90)): 3 canary night(s)")
    rows = [line for line in lines if line.startswith("2026-12-0")]
    assert len(rows) == 3
    assert rows[1].split()[-6:] == ["0/1", "[0-79%]", "1/1", "[21-100%]", "2/2", "[34-100%]"]  # running, night 2
    assert "compare false alarms 1/2 = 50% [" in r.stdout and "compare found 1/2 = 50% [" in r.stdout
    assert f"{empty} (AMD Instinct MI355X (gfx950)): no canary night yet" in r.stdout

    j = perfci("history", "canary", h200, "--format", "json")
    data = json.loads(j.stdout)
    dev = data["devices"][0]
    assert dev["device"] == "NVIDIA H200 (sm_90)" and len(dev["nights"]) == 3
    assert dev["rates"]["confirm_power"]["hits"] == 3 and dev["running"][0]["false_alarm"]["n"] == 0

    bad = perfci("history", "canary", tmp_path / "nowhere")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
