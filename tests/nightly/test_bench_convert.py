"""What a --bench command wrote, turned into the night's perfci results CSV (perfci.nightly.bench.convert)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perfci.errors import PerfciError
from perfci.history.model import run_info
from perfci.nightly.bench import check_command, convert, expand
from perfci.results import read_results_cells

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
PERFCI_CSV = Path(__file__).resolve().parents[2] / "baselines" / "cpu" / "smoke.csv"


def converted(tmp_path: Path, source: Path, keys=None, suite: str = "night"):
    raw = tmp_path / "raw"
    shutil.copyfile(source, raw)  # the bench's file has no telling suffix: read by its content
    out = tmp_path / "run.csv"
    out.write_text(convert(raw, suite, keys, device="cpu"))
    table, cells = read_results_cells(out)
    return table, cells, out


def test_a_perfci_csv_keeps_its_cells_under_the_night_s_suite(tmp_path):
    table, cells, out = converted(tmp_path, PERFCI_CSV)
    original, before = read_results_cells(PERFCI_CSV)
    assert [r.key for r in table.rows] == [r.key for r in original.rows]
    assert {c["suite"] for c in cells} == {"night"}
    assert [c["median_us"] for c in cells] == [c["median_us"] for c in before]
    assert run_info(str(out), table, cells).suite == "night"


def test_only_the_listed_cases_are_kept(tmp_path):
    original, _ = read_results_cells(PERFCI_CSV)
    wanted = {original.rows[1].key}
    table, _, _ = converted(tmp_path, PERFCI_CSV, wanted)
    assert [r.key for r in table.rows] == [original.rows[1].key]
    with pytest.raises(PerfciError, match="hold no case among the 1 listed in \\$PERFCI_CASES"):
        converted(tmp_path, PERFCI_CSV, {("nothing", "1x1x1", "fp32")})


@pytest.mark.parametrize("name", ["flydsl_cur.csv", "pb_cur.json"])
def test_flydsl_and_pytest_benchmark_rows_get_this_host_s_device_and_time(tmp_path, name):
    from perfci.compare.inputs import read_any

    table, cells, out = converted(tmp_path, DATA / name)
    source = read_any(DATA / name)
    assert [r.key for r in table.rows] == [r.key for r in source.rows]
    assert [r.median_us for r in table.rows] == pytest.approx([r.median_us for r in source.rows], rel=1e-6)
    assert {(c["arch"], c["vendor"]) for c in cells} == {("cpu", "cpu")} and all(c["timestamp"] for c in cells)
    info = run_info(str(out), table, cells)  # what the history store needs of a run
    assert info.suite == "night" and info.arch == "cpu"


def test_placeholders_are_shell_quoted():
    assert expand("run --out {out} --cases {cases}", Path("/a b/r.csv"), None) == "run --out '/a b/r.csv' --cases ''"
    assert expand("x {out}", "o", "c s.json") == "x o"
    assert expand("x {out} {cases}", "o", "c s.json") == "x o 'c s.json'"
    with pytest.raises(PerfciError, match="must write its results at"):
        check_command("pytest bench/")
