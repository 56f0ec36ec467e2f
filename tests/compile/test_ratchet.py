"""The compile diff beside the timing verdicts: compare --explain --compile-diff, and perfci nightly --compile-baseline.

compare: a real H200 decode run (it recorded no compiled resources) with its GEMV
cases planted 40% slower, and a compile diff (a planted copy of a real resources
file) in which one of them lost occupancy: that case's explanation names the
resource change. nightly: a quiet night of the tiny
GEMV suite with a compile baseline in which a case had more occupancy: the
reports carry the diff, the exit code stays 0; a compile baseline that cannot be
read is a line in the reports, the exit code still 0.
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.compile.ratchet import behind, changes_by_case, markdown
from tests.compile.procs import CACHE, compiler_env
from tests.nightly.conftest import FAST, make_repo, measured, perfci, read_rows, verdict, write_rows  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
SM90 = ROOT / "tests" / "data" / "compile" / "decode-sample-sm_90.json"
H200 = ROOT / "baselines" / "h200" / "decode.csv"
GEMV = ("gemv", "1x1024x6144", "bf16")


def _env() -> dict:
    return compiler_env()


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfci", *argv], capture_output=True, text=True, env=_env(),
                          cwd=cwd, timeout=900)


def _compile_diff(tmp_path: Path) -> Path:
    """`perfci compile --baseline --current --format json` where sm_90's gemv 1x1024x6144 went 16 -> 12 warps/SM."""
    data = copy.deepcopy(json.loads(SM90.read_text()))
    case = next(c for c in data["cases"] if (c["kernel"], c["shape"], c["dtype"]) == GEMV)
    case["kernels"][0].update(registers=168)
    case["kernels"][0]["occupancy"].update(value=12, by_registers=12)
    cur = tmp_path / "cur-sm_90.json"
    cur.write_text(json.dumps(data))
    proc = run("compile", "--baseline", str(SM90), "--current", str(cur), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    out = tmp_path / "compile-diff.json"
    out.write_text(proc.stdout)
    return out


def test_the_diff_json_reads_back_by_case(tmp_path):
    data = json.loads(_compile_diff(tmp_path).read_text())
    found = changes_by_case(data, "sm_90")
    assert found == {GEMV: [("sm_90", "worse", "occupancy 16 -> 12 warps/SM (registers), registers 104 -> 168")]}
    assert changes_by_case(data, "gfx942") == {}
    rows = behind(data, [(GEMV, "regressed"), (("gemv", "1x6144x768", "bf16"), "regressed"), (GEMV, "unchanged")],
                  "cpu")  # a CPU night: no file of its arch, so every arch's change
    assert [(r["case"], r["arch"], r["compile"]) for r in rows] == [(list(GEMV), "sm_90", "worse")]
    md = markdown({**data, "baseline": "baselines/compile/"}, rows)
    assert "**1 case(s) worse** than the compile baseline." in md
    assert "| sm_90 | `gemv 1x1024x6144 bf16` | occupancy 16 -> 12 warps/SM" in md
    assert "- `gemv 1x1024x6144 bf16` regressed: sm_90 occupancy 16 -> 12" in md


def test_compare_explain_names_the_resource_change_behind_a_regression(tmp_path):
    rows = read_rows(H200)
    slow = [dict(r, repeats_us=";".join(f"{1.4 * float(x):.4f}" for x in r["repeats_us"].split(";")),
                 median_us=f"{1.4 * float(r['median_us']):.4f}")
            if r["kernel"] == "gemv" else r for r in rows]  # all four: one alone is not significant among 84
    cur = write_rows(tmp_path / "cur.csv", slow)
    diff = _compile_diff(tmp_path)
    proc = run("compare", str(H200), str(cur), "--explain", "--compile-diff", str(diff), "--only-changed")
    assert proc.returncode == 1, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("explain gemv 1x1024x6144 bf16 (regressed)"))
    assert line.endswith("compiled against the compile baseline: sm_90 occupancy 16 -> 12 warps/SM (registers), "
                         "registers 104 -> 168 (worse)")
    assert "* compiled resources" in proc.stdout
    data = json.loads(run("compare", str(H200), str(cur), "--compile-diff", str(diff), "--format", "json").stdout)
    case = next(c for c in data["cases"] if (c["kernel"], c["shape"], c["dtype"]) == GEMV)
    assert "occupancy 16 -> 12" in case["explain"]["cur"]["compiled resources"]
    # Without the option, nothing of it.
    assert "compiled against" not in run("compare", str(H200), str(cur), "--explain").stdout


def test_compare_refuses_what_is_not_a_compile_diff(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cases": []}))
    proc = run("compare", str(H200), str(H200), "--explain", "--compile-diff", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "not the json of `perfci compile --baseline DIR --format json`" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_night_carries_the_compile_diff_and_keeps_its_exit_code(tmp_path, measured):  # noqa: F811
    repo = make_repo(tmp_path / "repo")
    baselines = tmp_path / "compile"
    made = run("compile", "suites/tiny.toml", "--arch", "gfx950", "--out", str(baselines), cwd=repo)
    assert made.returncode == 0, made.stderr
    # The baseline had one more wave per SIMD on the first case: tonight reads it as lost occupancy.
    path = baselines / "tiny-gfx950.json"
    data = json.loads(path.read_text())
    occ = data["cases"][0]["kernels"][0]["occupancy"]
    occ["value"] += 1
    path.write_text(json.dumps(data))
    cache = {"PERFCI_CACHE": str(CACHE)}
    proc = perfci(repo, "nightly", "suites/tiny.toml", "--out", str(tmp_path / "out"), *FAST, "--run",
                  str(measured), "--baseline", str(measured), "--compile-baseline", str(baselines), env=cache)
    assert proc.returncode == 0, proc.stderr
    assert "perfci nightly: compile: 1 case(s) worse than" in proc.stderr
    v = verdict(tmp_path / "out")
    assert v["exit_code"] == 0 and v["compile"]["failing"] == 1 and v["compile"]["exit_code"] == 1
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "#### Compiled resources" in summary and "**1 case(s) worse** than the compile baseline." in summary
    assert f"occupancy {occ['value']} -> {occ['value'] - 1} waves/SIMD" in summary
    assert "#### Compiled resources" in (tmp_path / "out" / "issue.md").read_text()
    assert json.loads((tmp_path / "out" / "compile.json").read_text())["failing"] == 1

    # A compile baseline that cannot be read: a line in the reports, the night as it was.
    path.write_text("{")
    proc = perfci(repo, "nightly", "suites/tiny.toml", "--out", str(tmp_path / "broken"), *FAST, "--run",
                  str(measured), "--baseline", str(measured), "--compile-baseline", str(baselines), env=cache)
    assert proc.returncode == 0, proc.stderr
    v = verdict(tmp_path / "broken")
    assert v["exit_code"] == 0 and "not JSON" in v["compile"]["error"]
    assert "not diffed against" in (tmp_path / "broken" / "summary.md").read_text()

    # Not a directory: bad input before the night starts.
    proc = perfci(repo, "nightly", "suites/tiny.toml", "--out", str(tmp_path / "none"), *FAST, "--run",
                  str(measured), "--compile-baseline", str(tmp_path / "nowhere"), env=cache)
    assert proc.returncode == 2 and "--compile-baseline" in proc.stderr and not (tmp_path / "none").exists()
