"""perfci history stale: a device that stopped reporting a suite is said, and exits 1."""
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from perfci.history import stale, store
from tests.history.synth import write_night
from tests.markdown_live import _MD, live

ROOT = Path(__file__).resolve().parents[2]


def perfci(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_each_suites_newest_night_and_its_age():
    now = datetime(2026, 12, 10, tzinfo=timezone.utc)
    nights = [("a", now - timedelta(days=5), "decode", "s1"), ("b", now - timedelta(days=1), "decode", "s2"),
              ("c", now - timedelta(days=3), "prefill", "s3"), ("k", now, "perfci-canary", "s3")]
    ages = stale.suite_ages("st", "H200", nights, now, 2, skip_runs={"k"})
    assert [(a.suite, a.last_sha, a.age_days, a.stale) for a in ages] == [("decode", "s2", 1.0, False),
                                                                          ("prefill", "s3", 3.0, True)]


def test_the_cli_exits_1_naming_the_stale_suite_and_reads_stale_days_from_the_project(tmp_path):
    now = datetime.now(timezone.utc)
    fresh = write_night(tmp_path / "fresh.csv", 0, suite="decode", env={"timestamp": now.isoformat()})
    old = write_night(tmp_path / "old.csv", 1, suite="prefill",
                      env={"timestamp": (now - timedelta(days=3)).isoformat()})
    store.add_runs(tmp_path / "st", [str(fresh), str(old)])
    r = perfci("history", "stale", tmp_path / "st", "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["stale_days"] == 2 and [a["suite"] for a in out["stale"]] == ["prefill"]
    assert r.stderr.count("\n") == 1 and "NVIDIA H200 (sm_90) prefill" in r.stderr
    assert perfci("history", "stale", tmp_path / "st", "--days", "4").returncode == 0
    project = tmp_path / "proj"
    project.mkdir()
    (project / "perfci.toml").write_text("stale_days = 5\n")
    r = perfci("history", "stale", tmp_path / "st", cwd=project)
    assert r.returncode == 0 and "stale after 5 day(s)" in r.stdout, r.stderr
    (project / "perfci.toml").write_text("stale_days = 0\n")
    r = perfci("history", "stale", tmp_path / "st", cwd=project)
    assert r.returncode == 2 and "'stale_days' must be" in r.stderr and r.stderr.count("\n") == 1
    r = perfci("history", "stale", tmp_path / "nope")
    assert r.returncode == 2 and "no such history store" in r.stderr


def _cells_per_row(doc: str) -> list[int]:
    rows, n = [], 0
    for t in _MD.parse(doc):
        n = 0 if t.type == "tr_open" else n + (t.type in ("td_open", "th_open"))
        if t.type == "tr_close":
            rows.append(n)
    return rows


def test_the_markdown_table_shows_hostile_names_and_nothing_in_them_is_live():
    # It goes to the job summary (perfci-stale.yml): device names are the stores', suites and commits the runs'.
    hostile = "@team #12 `x` | <img src=x> [x](http://e)\n# heading"
    ages = [stale.SuiteAge(hostile, hostile, hostile, hostile, hostile, 3.0, True),
            stale.SuiteAge("st", "NVIDIA H200 (sm_90)", "decode", "2026-12-09T00:00:00+00:00", "0123456789abcdef",
                           1.0, False)]
    doc = stale.render_markdown(ages, 2)
    assert live(doc) == [], doc
    assert _cells_per_row(doc) == [7, 7, 7] and doc.count("\n") == 4  # header, rule, two rows: no cell, line more
    assert "| @\u200dteam #\u200d12 \\`x\\` \\| \\<img src=x> [x]\\(http:\u200d//e) # heading |" in doc  # the device
    assert ("| NVIDIA H200 (sm_90) | `decode` | 2026-12-09T00:00:00+00:00 | `0123456789ab` | 1.0 | ok | `st` |"
            in doc)  # an ordinary store reads as written


def test_the_cli_writes_the_markdown_table(tmp_path):
    now = datetime.now(timezone.utc)
    store.add_runs(tmp_path / "st", [str(write_night(tmp_path / "n.csv", 0, suite="decode",
                                                     env={"timestamp": (now - timedelta(days=3)).isoformat()}))])
    r = perfci("history", "stale", tmp_path / "st", "--format", "markdown")
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("| device | suite |") and "| `decode` |" in r.stdout and "**STALE**" in r.stdout
