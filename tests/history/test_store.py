"""The history store: round trip, refusals (one line, exit 2, nothing written), concurrent adds."""
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.errors import PerfciError
from perfci.history import store
from perfci.history.model import STORE_SCHEMA, case_series
from tests.history.synth import write_night

ROOT = Path(__file__).resolve().parents[2]


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_round_trip_keeps_every_run_whole_and_in_time_order(tmp_path):
    # Added out of order, two suites: load sorts by time and keeps each file byte for byte.
    files = [write_night(tmp_path / f"n{i}.csv", i, suite=s) for i, s in ((2, "decode"), (0, "decode"), (1, "prefill"))]
    r = perfci("history", "add", tmp_path / "st", *files)
    assert r.returncode == 0, r.stderr
    assert "driver 580.159.04, cuda 13.0, torch 2.11.0+cu130, triton 3.6.0" in r.stdout
    assert r.stdout.strip().endswith("3 run(s)")
    h = store.load(tmp_path / "st")
    assert [r.info.timestamp[:10] for r in h.runs] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    assert [r.info.suite for r in h.runs] == ["decode", "prefill", "decode"]
    assert h.runs[0].info.git_sha == "00" * 20 and h.runs[0].info.runtime == "cuda 13.0"
    assert h.manifest.device_name == "NVIDIA H200" and h.manifest.arch == "sm_90"
    manifest = json.loads((tmp_path / "st" / "perfci-history.json").read_text())
    assert manifest["format"] == "perfci-history" and manifest["schema"] == STORE_SCHEMA
    stored = sorted((tmp_path / "st" / "runs").iterdir())
    assert len(stored) == 3 and stored[0].read_bytes() == files[1].read_bytes()
    series = case_series(h.runs)
    assert len(series) == 24 and all(len(s.points) == 3 for s in series)  # same cases in both suites here


def test_the_same_run_twice_is_refused_in_one_line(tmp_path):
    f = write_night(tmp_path / "a.csv", 0)
    assert perfci("history", "add", tmp_path / "st", f).returncode == 0
    before = snapshot(tmp_path / "st")
    r = perfci("history", "add", tmp_path / "st", f)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "is already in" in r.stderr and "Traceback" not in r.stderr
    assert snapshot(tmp_path / "st") == before
    # also when given twice in one call, before anything is written
    r = perfci("history", "add", tmp_path / "new", f, f)
    assert r.returncode == 2 and "give each run once" in r.stderr and not (tmp_path / "new").exists()


@pytest.mark.parametrize("make, words", [
    (lambda d: (d / "notes.txt").write_text("mine"), "not a perfci history store"),
    (lambda d: (d / "perfci-history.json").write_text("{not json"), "corrupt store manifest"),
    (lambda d: (d / "perfci-history.json").write_text(json.dumps(
        {"format": "perfci-history", "schema": 99, "device_name": "x", "arch": "y"})), "newer perfci"),
    (lambda d: (d / "perfci-history.json").write_text(json.dumps({"format": "other"})), "not a perfci history"),
])
def test_foreign_corrupt_or_newer_stores_are_refused(tmp_path, make, words):
    st = tmp_path / "st"
    st.mkdir()
    make(st)
    before = snapshot(st)
    r = perfci("history", "add", st, write_night(tmp_path / "a.csv", 0))
    assert r.returncode == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert snapshot(st) == before
    assert perfci("history", "check", st).returncode == 2


def test_a_run_of_another_device_is_refused_and_nothing_is_written(tmp_path):
    assert perfci("history", "add", tmp_path / "st", write_night(tmp_path / "a.csv", 0)).returncode == 0
    before = snapshot(tmp_path / "st")
    other = write_night(tmp_path / "b.csv", 1, env={"device_name": "AMD Instinct MI300X", "arch": "gfx942"})
    good = write_night(tmp_path / "c.csv", 2)
    r = perfci("history", "add", tmp_path / "st", good, other)  # the good one is not written either
    assert r.returncode == 2 and "one device kind" in r.stderr
    assert snapshot(tmp_path / "st") == before
    # Same device name, other arch: still another device.
    r = perfci("history", "add", tmp_path / "st", write_night(tmp_path / "d.csv", 3, env={"arch": "sm_100"}))
    assert r.returncode == 2 and "sm_100" in r.stderr


def test_a_bad_csv_or_one_without_device_columns_is_refused(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("kernel,shape,dtype,median_us,repeats_us,status\nk,1x1x1,bf16,abc,1;2,ok\n")
    r = perfci("history", "add", tmp_path / "st", bad)
    assert r.returncode == 2 and "line 2, column 'median_us'" in r.stderr and not (tmp_path / "st").exists()
    plain = tmp_path / "plain.csv"
    plain.write_text("kernel,shape,dtype,median_us,repeats_us,status\nk,1x1x1,bf16,1.0,1;1,ok\n")
    r = perfci("history", "add", tmp_path / "st", plain)
    assert r.returncode == 2 and "'device_name' is empty or missing" in r.stderr


def test_a_corrupt_run_file_in_the_store_is_named(tmp_path):
    assert perfci("history", "add", tmp_path / "st", write_night(tmp_path / "a.csv", 0)).returncode == 0
    (run,) = (tmp_path / "st" / "runs").iterdir()
    run.write_text(run.read_text().replace("ok", "maybe", 1))
    r = perfci("history", "check", tmp_path / "st")
    assert r.returncode == 2 and run.name in r.stderr and "'status'" in r.stderr


@pytest.mark.parametrize("made", ["link-to-dev-zero", "fifo"])
def test_a_run_file_in_the_store_that_is_not_a_regular_file_is_one_line(tmp_path, made):
    # Was: a run committed as a link to /dev/zero filled the memory until the OOM killer.
    assert perfci("history", "add", tmp_path / "st", write_night(tmp_path / "a.csv", 0)).returncode == 0
    (run,) = (tmp_path / "st" / "runs").iterdir()
    run.unlink()
    if made == "fifo":
        os.mkfifo(run)
    else:
        run.symlink_to("/dev/zero")
    r = perfci("history", "check", tmp_path / "st")
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert run.name in line and "not a CSV file (perfci reads only regular files)" in line


def _add(args):
    path, csv, start = args
    start.wait()
    try:
        store.add_runs(path, [csv])
        return "ok"
    except PerfciError as err:
        return err.message


@pytest.mark.slow  # 16 spawned interpreters
def test_concurrent_adds_never_collide_and_a_run_lands_once(tmp_path):
    # spawn, not fork: the test process may hold threads (torch's, imported by other tests), and a
    # forked child of a threaded process can deadlock on a lock copied mid-use.
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(4):
        st = tmp_path / f"st{round_}"  # a new store each round: the first adds also race on the manifest
        a = write_night(tmp_path / f"a{round_}.csv", 0)
        b = write_night(tmp_path / f"b{round_}.csv", 1)
        with ctx.Manager() as manager:
            start = manager.Event()
            with ctx.Pool(4) as pool:
                pending = pool.map_async(_add, [(st, a, start), (st, b, start), (st, a, start), (st, b, start)])
                start.set()
                results = pending.get(timeout=60)
        assert sum(r == "ok" for r in results) == 2, results  # each run exactly once; the twin add is refused
        assert all("already in" in r for r in results if r != "ok"), results
        names = sorted(p.name for p in (st / "runs").iterdir())
        assert len(names) == 2 and not any(n.startswith(".") for n in names)  # no staging file left
        assert len(store.load(st).runs) == 2
