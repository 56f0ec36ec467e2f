"""`perfci history check` and `export --otava` as a user runs them."""
import csv
import io
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from perfci.history import store
from tests.history.synth import write_night

ROOT = Path(__file__).resolve().parents[2]
STEP = ("matmul_tiled", "4096x6144x768", "bf16")


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """12 nights; from night 6 on, one case is 4% slower."""
    d = tmp_path_factory.mktemp("stepped")
    files = [write_night(d / f"n{i}.csv", i, slow={STEP: 1.04} if i >= 6 else None) for i in range(12)]
    store.add_runs(d / "st", [str(f) for f in files])
    return d / "st"


def test_check_json_names_the_step(stepped):
    r = perfci("history", "check", stepped, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["runs"] == 12 and out["cases"] == 24 and out["too_short"] == []
    changes = [c for c in out["changes"] if (c["kernel"], c["shape"], c["dtype"]) == STEP]
    assert len(changes) == 1
    c = changes[0]
    assert c["run_index"] == 6 and c["sha"] == "06" * 20 and c["timestamp"].startswith("2026-12-07")
    assert 1.03 < c["ratio"] < 1.05 and c["p_value"] <= 0.01
    assert c["after_us"] > c["before_us"]
    assert len(out["changes"]) <= 1  # the 23 flat cases stay quiet (alpha 0.01 each)


def test_check_table_and_short_history(stepped, tmp_path):
    r = perfci("history", "check", stepped)
    line = next(x for x in r.stdout.splitlines() if x.startswith("matmul_tiled"))
    assert r.returncode == 0 and "6/12" in line and "060606060606" in line and re.search(r"\+[34]\.\d%", line)
    store.add_runs(tmp_path / "st", [str(write_night(tmp_path / f"n{i}.csv", i)) for i in range(4)])
    r = perfci("history", "check", tmp_path / "st", "--format", "json")
    out = json.loads(r.stdout)
    assert out["changes"] == [] and len(out["too_short"]) == 24 and out["too_short"][0]["runs"] == 4
    r = perfci("history", "check", tmp_path / "st")
    assert "too short to search: 24 case(s) with 4 run(s)" in r.stdout


def test_fail_recent_fails_only_on_a_slowdown_within_the_last_n_runs(stepped):
    # The step is at run 6 of 12: its first slower run is 6 runs from the end.
    r = perfci("history", "check", stepped, "--fail-recent", "6")
    assert r.returncode == 1 and r.stdout  # the table still printed
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("perfci history check: 1 case(s) slower within their last 6 runs: matmul_tiled")
    assert "060606060606" in line
    assert perfci("history", "check", stepped, "--fail-recent", "5").returncode == 0  # an older step is history
    assert perfci("history", "check", stepped).returncode == 0  # without the option it only reports
    bad = perfci("history", "check", stepped, "--fail-recent", "0")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_check_of_a_missing_store_is_one_line():
    r = perfci("history", "check", ROOT / "no-such-store")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such history store" in r.stderr


def test_otava_csv_has_a_time_column_attributes_and_one_numeric_metric_per_case(stepped):
    r = perfci("history", "export", stepped, "--otava")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    header, body = rows[0], rows[1:]
    assert header[:7] == ["time", "commit", "run", "driver", "runtime", "torch", "triton"]
    assert len(header) == 7 + 24 and len(body) == 12
    assert "matmul_tiled__4096x6144x768__bf16" in header and "splitk_decode_m_fast_1__1x1024x6144__bf16" in header
    times = [datetime.strptime(row[0], "%Y-%m-%d %H:%M:%S %z") for row in body]
    assert times == sorted(times) and times[0].tzinfo is not None
    for row in body:
        assert len(row) == len(header)
        assert all(float(v) > 0 for v in row[7:])  # Otava calls float() on every metric cell
    i = header.index("matmul_tiled__4096x6144x768__bf16")
    assert float(body[-1][i]) > 1.03 * float(body[0][i])


def test_otava_export_leaves_out_a_case_missing_from_a_run_and_writes_the_config(tmp_path):
    files = [write_night(tmp_path / f"n{i}.csv", i, status={STEP: "error"} if i == 1 else None) for i in range(3)]
    files.append(write_night(tmp_path / "p.csv", 0, suite="prefill"))
    store.add_runs(tmp_path / "st", [str(f) for f in files])
    r = perfci("history", "export", tmp_path / "st", "--otava")
    assert r.returncode == 2 and "--suite" in r.stderr  # two suites, one stdout
    r = perfci("history", "export", tmp_path / "st", "--otava", "--suite", "decode")
    assert r.returncode == 0 and "1 case(s) left out" in r.stderr
    assert "matmul_tiled__4096x6144x768__bf16" not in r.stdout.splitlines()[0]
    r = perfci("history", "export", tmp_path / "st", "--otava", "--out", tmp_path / "ot")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ot" / "decode.csv").is_file() and (tmp_path / "ot" / "prefill.csv").is_file()
    yaml = (tmp_path / "ot" / "otava.yaml").read_text()
    assert "  perfci.decode:\n    type: csv\n    file: decode.csv\n    time_column: time" in yaml
    assert "attributes: [commit, run, driver, runtime, torch, triton]" in yaml
    assert yaml.count("direction: -1") == 23 + 24
    r = perfci("history", "export", tmp_path / "st")
    assert r.returncode == 2 and "--otava" in r.stderr
