"""Triage records: one file each, validated on load, written from two processes or two git clones at once."""
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.errors import PerfciError
from perfci.history import store, triage
from perfci.history.check import check
from perfci.history.plot import trend_png
from tests.history.synth import write_night

ROOT = Path(__file__).resolve().parents[2]
SHA = "0101010101010101010101010101010101010101"


def perfci(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)


def make_store(tmp_path: Path, nights=2) -> Path:
    files = [write_night(tmp_path / f"n{i}.csv", i) for i in range(nights)]
    assert perfci("history", "add", tmp_path / "st", *files).returncode == 0
    return tmp_path / "st"


def test_a_record_round_trips_through_the_cli_and_lists_as_json(tmp_path):
    st = make_store(tmp_path)
    r = perfci("history", "triage", st, "--case", "matmul_tiled 16x* bf16", "--sha", SHA[:9], "--as", "expected",
               "--reason", "bigger tile: prefill faster", "--link", "https://github.com/o/r/pull/7", "--who", "ana")
    assert r.returncode == 0, r.stderr
    assert "recorded expected for matmul_tiled 16x* bf16" in r.stdout
    files = list((st / "triage").iterdir())
    assert len(files) == 1 and files[0].suffix == ".json" and "_expected_" in files[0].name
    r = perfci("history", "triage", st, "--list", "--format", "json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert listed == [{"case": "matmul_tiled 16x* bf16", "sha": SHA[:9], "state": "expected",
                       "reason": "bigger tile: prefill faster", "link": "https://github.com/o/r/pull/7",
                       "who": "ana", "when": listed[0]["when"], "id": files[0].stem}]
    table = perfci("history", "triage", st, "--list").stdout
    assert "expected" in table and "ana" in table and "bigger tile" in table
    # the store still loads as a store: runs are untouched by a triage folder
    assert len(store.load(st).runs) == 2


@pytest.mark.parametrize("args, words", [
    (["--case", "k", "--sha", SHA, "--as", "expected"], "give --reason"),
    (["--case", "k", "--sha", SHA, "--as", "expected", "--reason", "  "], "'reason' is required"),
    (["--case", "k", "--sha", "main", "--as", "expected", "--reason", "r"], "is not a commit"),
    (["--case", "k", "--sha", SHA, "--as", "wontfix", "--reason", "r"], "invalid choice"),
    (["--case", "suite:", "--sha", SHA, "--as", "invalid", "--reason", "r"], "suite:NAME"),
    (["--case", "k", "--sha", SHA, "--as", "invalid", "--reason", "a\nb"], "one line"),
    (["--list", "--case", "k"], "without --list"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, words):
    st = make_store(tmp_path, nights=1)
    r = perfci("history", "triage", st, *args)
    assert r.returncode == 2, r
    assert words in r.stderr and "Traceback" not in r.stderr
    assert not (st / "triage").exists()


def test_a_store_that_does_not_exist_is_refused(tmp_path):
    r = perfci("history", "triage", tmp_path / "none", "--case", "k", "--sha", SHA, "--as", "fixed", "--reason", "r")
    assert r.returncode == 2 and "no such history store" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    (json.dumps({"format": "perfci-triage", "schema": 1, "case": "k", "sha": SHA, "state": "maybe",
                 "who": "a", "when": "2026-12-01T00:00:00+00:00", "reason": "r"}), "'state' 'maybe'"),
    (json.dumps({"format": "perfci-triage", "schema": 1, "case": "k", "sha": SHA, "state": "fixed",
                 "who": "a", "when": "2026-12-01T00:00:00+00:00"}), "'reason' is required"),
    (json.dumps({"format": "something", "schema": 1}), "'format' is not"),
    (json.dumps({"format": "perfci-triage", "schema": 9, "case": "k"}), "newer perfci"),
])
def test_a_corrupt_record_file_is_exit_2_with_one_line(tmp_path, text, words):
    st = make_store(tmp_path, nights=2)
    assert perfci("history", "triage", st, "--case", "k", "--sha", SHA, "--as", "fixed", "--reason", "r").returncode == 0
    bad = st / "triage" / "20261201T000000Z_bad.json"
    bad.write_text(text)
    readers = [["history", "triage", st, "--list"]]
    if text.startswith("{not"):  # compare STORE reads them the same way (one reader is enough: ~5 s each)
        readers.append(["compare", st, tmp_path / "n1.csv"])
    for args in readers:
        r = perfci(*args)
        assert r.returncode == 2, (args, r)
        assert r.stderr.count("\n") == 1 and str(bad) in r.stderr and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    with pytest.raises(PerfciError, match="corrupt triage record|newer perfci"):
        store.load_triage(st)


def _add(args):
    st, i = args
    return triage.make_record(f"case {i}", SHA, "acknowledged", f"reason {i}", "w"), \
        store.add_triage(st, triage.make_record(f"case {i}", SHA, "acknowledged", f"reason {i}", "w")).record_id


def test_records_from_many_processes_at_once_all_land(tmp_path):
    st = make_store(tmp_path, nights=1)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        ids = [rid for _, rid in pool.map(_add, [(st, i) for i in range(16)])]
    assert len(set(ids)) == 16
    records = store.load_triage(st)
    assert sorted(r.case for r in records) == sorted(f"case {i}" for i in range(16))
    assert not [p for p in (st / "triage").iterdir() if p.name.startswith(".")]  # no staging file left


def test_two_cli_processes_at_the_same_moment_both_land(tmp_path):
    st = make_store(tmp_path, nights=1)
    cmd = [sys.executable, "-m", "perfci", "history", "triage", str(st), "--sha", SHA, "--as", "invalid"]
    procs = [subprocess.Popen(cmd + ["--case", f"k{i}", "--reason", f"r{i}"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert sorted(r.case for r in store.load_triage(st)) == ["k0", "k1"]


def git(cwd, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


def test_a_git_branch_store_takes_records_from_two_clones_without_a_conflict(tmp_path):
    # The CI layout: the perf-history branch checked out into perf-history/, one store per device.
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "--quiet", str(origin), str(seed))
    git(seed, "switch", "--quiet", "--orphan", "perf-history")
    night = write_night(tmp_path / "n0.csv", 0)
    assert perfci("history", "add", seed / "h200", night).returncode == 0
    git(seed, "add", "-A")
    git(seed, "commit", "--quiet", "-m", "history")
    git(seed, "push", "--quiet", "origin", "HEAD:perf-history")
    jobs = []
    for name, state in (("job1", "expected"), ("job2", "acknowledged")):
        clone = tmp_path / name
        git(tmp_path, "clone", "--quiet", "--branch", "perf-history", str(origin), str(clone))
        r = perfci("history", "triage", clone / "h200", "--case", "suite:decode", "--sha", SHA, "--as", state,
                   "--reason", f"from {name}", "--who", name)
        assert r.returncode == 0, r.stderr
        git(clone, "add", "-A")
        git(clone, "commit", "--quiet", "-m", f"triage {name}")
        jobs.append(clone)
    git(jobs[0], "push", "--quiet", "origin", "HEAD:perf-history")
    git(jobs[1], "pull", "--quiet", "--rebase", "origin", "perf-history")  # a conflict would fail here
    git(jobs[1], "push", "--quiet", "origin", "HEAD:perf-history")
    final = tmp_path / "final"
    git(tmp_path, "clone", "--quiet", "--branch", "perf-history", str(origin), str(final))
    r = perfci("history", "triage", final / "h200", "--list", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert sorted((x["state"], x["reason"]) for x in json.loads(r.stdout)) == [
        ("acknowledged", "from job2"), ("expected", "from job1")]
    assert len(store.load(final / "h200").runs) == 1


def test_a_record_names_a_key_a_glob_or_a_suite():
    key = ("splitk_decode[m_fast=1]", "16x1024x6144", "bf16")
    exact = triage.make_record(" ".join(key), SHA, "invalid", "r", "w")
    glob = triage.make_record("splitk_decode* 16x* bf16", SHA, "invalid", "r", "w")
    suite = triage.make_record("suite:decode", SHA, "invalid", "r", "w")
    assert exact.names(key) and glob.names(key) and suite.names(key, "decode")
    assert not suite.names(key, "prefill") and not glob.names(("matmul_tiled", "16x1024x6144", "bf16"))
    assert not exact.names(("splitk_decode[m_fast=1]", "1x1024x6144", "bf16"))


def test_the_newest_record_of_a_case_is_its_state():
    old = triage.TriageRecord("suite:decode", SHA, triage.TriageState.ACKNOWLEDGED, "a", "2026-12-01T00:00:00+00:00",
                              "r", record_id="1")
    new = triage.TriageRecord("k 1x1 bf16", SHA, triage.TriageState.FIXED, "a", "2026-12-02T00:00:00+00:00", "r",
                              record_id="2")
    assert triage.state_of([old, new], ("k", "1x1", "bf16"), "decode") is new
    assert triage.state_of([old, new], ("j", "1x1", "bf16"), "decode") is old
    assert triage.state_of([old, new], ("j", "1x1", "bf16"), "prefill") is None


def test_an_expected_record_restarts_at_its_commits_first_night():
    rec = triage.make_record("suite:decode", "abcdef1", "expected", "r", "w")
    shas = ["1234567aa", "abcdef1bb", "abcdef1bb", "9999999cc"]
    assert triage.restart_index(rec, shas) == 1
    assert triage.restart_index(rec, shas[:1], cur_sha="abcdef1bb-dirty") == 1
    assert triage.restart_index(rec, ["1234567aa", "9999999cc"]) is None
    assert triage.restart_index(rec, ["1234567aa", "9999999cc"], after=lambda s, sha: sha.startswith("9")) == 1


@pytest.mark.slow
def test_canary_reports_the_false_alarm_rate_of_real_nights_as_the_team_judged_them(tmp_path):
    st = make_store(tmp_path, nights=4)  # the first night has nothing to be judged against: 3 real nights
    for case, sha in (("suite:decode", "02" * 20), ("matmul_tiled 1x* bf16", "03" * 20),
                      ("suite:prefill", "01" * 20)):  # the last names a suite with no night: not counted
        assert perfci("history", "triage", st, "--case", case, "--sha", sha[:8], "--as", "invalid",
                      "--reason", "noise").returncode == 0
    assert perfci("history", "triage", st, "--case", "suite:decode", "--sha", "01" * 4, "--as", "expected",
                  "--reason", "not a false alarm").returncode == 0
    r = perfci("history", "canary", st)
    assert r.returncode == 0, r.stderr
    assert "real nights, as the team judged them: false alarms 2/3 = 67% [21%, 94%]" in r.stdout
    r = perfci("history", "canary", st, "--format", "json")
    team = json.loads(r.stdout)["devices"][0]["team_false_alarm"]
    assert (team["hits"], team["n"]) == (2, 3) and 0.2 < team["low"] < 0.67 < team["high"] < 1.0


@pytest.mark.slow
def test_the_report_has_a_triage_page_and_each_case_marks_its_triaged_nights(tmp_path):
    st = make_store(tmp_path, nights=3)
    for args in (("--case", "matmul_tiled 16x* bf16", "--sha", "01" * 4, "--as", "expected", "--reason",
                  "tile <b>x</b>", "--link", "https://github.com/o/r/pull/7"),
                 ("--case", "suite:decode", "--sha", "02" * 4, "--as", "invalid", "--reason", "noise")):
        assert perfci("history", "triage", st, *args).returncode == 0
    r = perfci("history", "report", st, "--out", tmp_path / "site")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "site" / "triage.html").read_text()
    assert "false alarms 1/2 = 50%" in page and "tile &lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert 'href="triage.html"' in (tmp_path / "site" / "index.html").read_text()
    cases = {p.name: p.read_text() for p in (tmp_path / "site" / "cases").iterdir()}
    marked = [t for n, t in cases.items() if n.startswith("matmul_tiled_16x")]
    other = [t for n, t in cases.items() if n.startswith("matmul_tiled_1x")]
    assert marked and all("<h2>Triage</h2>" in t and "<td>expected</td>" in t and "<td>invalid</td>" in t
                          for t in marked)
    assert other and all("<td>invalid</td>" in t and "expected" not in t for t in other)


def test_a_trend_png_draws_its_triage_marks(tmp_path):
    case = check(store.load(make_store(tmp_path, nights=3))).cases[0]
    plain = trend_png(case.series, case.detection, judged=case.judged)
    marked = trend_png(case.series, case.detection, judged=case.judged, marks=[(1, "expected"), (1, "invalid")])
    assert plain[:8] == b"\x89PNG\r\n\x1a\n" and marked[:8] == plain[:8] and marked != plain


def test_a_record_naming_no_case_or_no_night_is_kept_with_a_warning(tmp_path):
    st = make_store(tmp_path, nights=1)
    r = perfci("history", "triage", st, "--case", "matmul_tild 16x* bf16", "--sha", "abcdef12", "--as", "invalid",
               "--reason", "typo")
    assert r.returncode == 0 and "no case of" in r.stderr and "no night at abcdef12" in r.stderr
    r = perfci("history", "triage", st, "--case", "matmul_tiled 16x* bf16", "--sha", "00" * 4, "--as", "invalid",
               "--reason", "fine")
    assert r.returncode == 0 and r.stderr == ""
    assert len(store.load_triage(st)) == 2
