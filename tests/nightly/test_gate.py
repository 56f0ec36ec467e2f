"""``perfci nightly`` red nights, bad input and internal errors, driven as a user drives it (a subprocess in a repo).

Tonight's results come from one real run of the suite (``measured``), edited the
way a bad night looks: cases removed, cases errored. Judged against that same
run as --baseline, so no timing noise can colour the verdicts.
"""
from __future__ import annotations

import io
import signal
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from perfci import cli
from tests.nightly.conftest import FAST, commit, perfci, read_rows, stage, verdict, write_rows

HERE = Path(__file__).resolve().parent
GEMV_B = ["gemv", "1x16x16", "fp32"]
# Seven repeats spread +-1% around 1: a quiet run, whatever this machine did while `measured` ran.
QUIET_REPEATS = (1.000, 0.995, 1.004, 0.990, 1.010, 0.998, 1.002)


def times(row: dict, scale: float) -> dict:
    """``row`` with chosen repeat times: QUIET_REPEATS x 100 us x ``scale``."""
    repeats = [100.0 * scale * q for q in QUIET_REPEATS]
    return dict(row, median_us=f"{sorted(repeats)[len(repeats) // 2]:.4f}",
                repeats_us=";".join(f"{x:.4f}" for x in repeats))


def night(repo: Path, out: Path, *args: str):
    return perfci(repo, "nightly", "suites/tiny.toml", "--out", str(out), *FAST, *args)


def test_half_the_suite_missing_is_red_and_allowed_with_allow_missing(repo, measured, tmp_path):
    rows = read_rows(measured)
    base = write_rows(tmp_path / "base.csv", rows)
    half = write_rows(tmp_path / "half.csv", rows[:1])
    proc = night(repo, tmp_path / "out", "--run", str(half), "--baseline", str(base))
    assert proc.returncode == 1, proc.stderr
    v = verdict(tmp_path / "out")
    assert v["exit_code"] == 1 and v["confirmed_regression"] is False
    assert v["gate"]["missing"] == [GEMV_B]
    assert "1 baseline case(s) missing tonight" in v["verdict"]
    assert {c["verdict"] for c in v["cases"]} == {"unchanged", "removed"}

    proc = night(repo, tmp_path / "allowed", "--run", str(half), "--baseline", str(base), "--allow-missing")
    assert proc.returncode == 0, proc.stderr
    v = verdict(tmp_path / "allowed")
    assert v["exit_code"] == 0 and any("--allow-missing" in w for w in v["warnings"])
    assert "allowed by --allow-missing" in (tmp_path / "allowed" / "summary.md").read_text()


@pytest.mark.parametrize("status", ["error", "skip"])
def test_a_night_that_measured_nothing_is_never_green(repo, measured, tmp_path, status):
    rows = read_rows(measured)
    base = write_rows(tmp_path / "base.csv", rows)
    dead = [dict(r, status=status, median_us="", repeats_us="", sclk_mhz="", throttled="", tflops="", tbps="",
                 roofline_pct="", rel_error="", message="RuntimeError: no device") for r in rows]
    tonight = write_rows(tmp_path / "dead.csv", dead)
    proc = night(repo, tmp_path / "out", "--run", str(tonight), "--baseline", str(base))
    assert proc.returncode == 1, proc.stderr
    v = verdict(tmp_path / "out")
    assert v["gate"]["nothing_measured"] is True and "nothing measured" in v["verdict"]
    # ... and on a first night too: nothing to judge against does not make nothing measured green
    proc = night(repo, tmp_path / "first", "--run", str(tonight))
    assert proc.returncode == 1, proc.stderr
    assert verdict(tmp_path / "first")["first_night"] is True


def test_no_shard_arrived_is_nothing_measured_red_not_bad_input(repo, tmp_path):
    """Every shard job failed: nothing measured, exit 1 as the README's table says, with the reports written."""
    out = tmp_path / "out"
    proc = perfci(repo, "nightly", "suites/tiny.toml", "--shards", str(tmp_path / "shards" / "shard-*.csv"),
                  "--out", str(out), *FAST)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "exit 1: nothing measured: --shards" in proc.stdout and "no shard results arrived" in proc.stdout
    v = verdict(out)
    assert v["exit_code"] == 1 and v["confirmed_regression"] is False
    assert v["verdict"].startswith("nothing measured: ")
    assert stage(v, "tonight")["error"] == "nothing measured" and stage(v, "history")["status"] == "skipped"
    assert "nothing measured" in (out / "summary.md").read_text()


def test_a_broken_kernel_is_red(repo, measured, tmp_path):
    base = write_rows(tmp_path / "base.csv", read_rows(measured))
    gemv = (repo / "kernels" / "gemv.py").read_text()
    assert "c = tl.sum(acc, axis=1)" in gemv
    commit(repo, "gemv: double the result", {"kernels/gemv.py": gemv.replace("c = tl.sum(acc, axis=1)",
                                                                               "c = 2.0 * tl.sum(acc, axis=1)")})
    proc = night(repo, tmp_path / "out", "--baseline", str(base))  # measured tonight
    assert proc.returncode == 1, proc.stderr
    v = verdict(tmp_path / "out")
    assert [b["status"] for b in v["gate"]["broken"]] == ["fail", "fail"]
    assert {c["verdict"] for c in v["cases"]} == {"broken"}
    assert stage(v, "tonight")["status"] == "ok" and "2 fail" in stage(v, "tonight")["detail"]
    assert (tmp_path / "out" / "run.jsonl").is_file()


@pytest.mark.parametrize("args, message", [
    (["nightly", "suites/nope.toml", "--run", "RUN"], "does not exist"),
    (["nightly", "nope", "--run", "RUN"], "unknown suite"),
    (["nightly", "suites/tiny.toml", "--run", "CORRUPT"], "CORRUPT"),
    (["nightly", "suites/tiny.toml", "--run", "RUN", "--shards", "x*"], "not allowed with"),
    (["nightly", "suites/tiny.toml", "--run", "RUN", "--nights", "1"], "at least 2 nights"),
])
def test_bad_input_is_one_line_and_exit_2(repo, measured, tmp_path, args, message):
    corrupt = tmp_path / "corrupt.csv"
    corrupt.write_text("kernel,shape,dtype,median_us,repeats_us,status\ngemv,1x8x16,fp32,fast,1;2,ok\n")
    words = [str(measured) if a == "RUN" else str(corrupt) if a == "CORRUPT" else a for a in args]
    message = str(corrupt) if message == "CORRUPT" else message
    proc = perfci(repo, *words, "--out", str(tmp_path / "out"), *FAST)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    if (tmp_path / "out" / "verdict.json").exists():  # judged stages ran: the failure is recorded
        v = verdict(tmp_path / "out")
        assert v["exit_code"] == 2 and stage(v, "tonight")["error"] == "input"


def test_a_baseline_of_another_device_is_refused(repo, measured, tmp_path):
    rows = read_rows(measured)
    other = write_rows(tmp_path / "h200.csv", [dict(r, arch="sm_90", device_name="NVIDIA H200") for r in rows])
    proc = night(repo, tmp_path / "out", "--run", str(measured), "--baseline", str(other))
    assert proc.returncode == 2, proc.stderr
    assert "a different device is not a regression" in proc.stderr.strip().splitlines()[-1]
    v = verdict(tmp_path / "out")
    assert stage(v, "baseline")["status"] == "failed" and stage(v, "history")["status"] == "skipped"


@pytest.mark.parametrize("where", ["tonight", "baseline", "history"])
def test_a_crashed_stage_is_exit_4_with_the_reports_written(repo, measured, tmp_path, where):
    base = write_rows(tmp_path / "base.csv", read_rows(measured))
    out = tmp_path / "out"
    proc = perfci(repo, where, "--", "suites/tiny.toml", "--out", str(out), *FAST, "--run", str(measured),
                  "--baseline", str(base), "--history", str(tmp_path / "hist"), entry=HERE / "fault_entry.py")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("perfci: internal error: stage ") and "injected fault" in last
    assert "Traceback" not in proc.stderr
    v = verdict(out)
    assert v["exit_code"] == 4 and v["confirmed_regression"] is False
    crashed = stage(v, where)
    assert (crashed["status"], crashed["error"]) == ("failed", "internal")
    assert "RuntimeError: injected fault" in crashed["detail"]
    assert f"stage {where} crashed" in (out / "summary.md").read_text()
    assert (out / "issue.md").is_file()
    if where != "history":
        assert stage(v, "history")["status"] == "skipped" and v["history_appended"] is False


def test_cli_main_turns_an_unexpected_exception_into_one_line_and_exit_4(monkeypatch, tmp_path):
    from perfci.nightly import night

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # cli.main's SIGTERM hook: not in pytest's process
    def boom(*args, **kwargs):
        raise ValueError("a bug\nover two lines")

    monkeypatch.setattr(night, "run_night", boom)
    monkeypatch.delenv("PERFCI_DEBUG", raising=False)
    err = io.StringIO()
    with redirect_stderr(err):
        code = cli.main(["nightly", "tiny", "--out", str(tmp_path / "out")])
    assert code == 4
    assert err.getvalue().splitlines() == ["perfci: internal error: ValueError: a bug over two lines "
                                           "(PERFCI_DEBUG=1 shows the traceback)"]
    monkeypatch.setenv("PERFCI_DEBUG", "1")
    err = io.StringIO()
    with redirect_stderr(err):
        assert cli.main(["nightly", "tiny", "--out", str(tmp_path / "out")]) == 4
    assert "Traceback" in err.getvalue() and err.getvalue().splitlines()[-1].startswith("perfci: internal error:")


def shards(measured, folder: Path, labels: dict[str, list[int]]) -> str:
    """Shard CSVs cut from one real run: NAME -> the rows it holds; each labelled I/N as `perfci run --shard` does."""
    rows = read_rows(measured)
    folder.mkdir()
    for i, (name, which) in enumerate(sorted(labels.items()), start=1):
        write_rows(folder / name, [dict(rows[r], shard=f"{i}/2") for r in which])
    return str(folder / "shard-*.csv")


def test_shards_are_merged_into_tonight(repo, measured, tmp_path):
    glob = shards(measured, tmp_path / "shards", {"shard-1.csv": [0], "shard-2.csv": [1]})
    proc = night(repo, tmp_path / "out", "--shards", glob, "--baseline", str(measured))
    assert proc.returncode == 0, proc.stderr
    v = verdict(tmp_path / "out")
    assert "merged 2 shard(s)" in stage(v, "tonight")["detail"]
    assert [r["kernel"] + r["shape"] for r in read_rows(tmp_path / "out" / "run.csv")] == \
        ["gemv1x8x16", "gemv1x16x16"]
    assert {c["verdict"] for c in v["cases"]} == {"unchanged"}


def test_a_shard_that_never_arrived_is_red_not_bad_input(repo, measured, tmp_path):
    # the shard job of 2/2 failed: merge alone refuses the set; the night judges what came and is red
    glob = shards(measured, tmp_path / "shards", {"shard-1.csv": [0]})
    proc = night(repo, tmp_path / "out", "--shards", glob, "--history", str(tmp_path / "hist"))
    assert proc.returncode == 1, proc.stderr
    v = verdict(tmp_path / "out")
    assert v["gate"]["incomplete"] == "shard(s) 2/2 of 2 missing" and v["first_night"] is True
    assert "incomplete" in v["verdict"]
    proc = night(repo, tmp_path / "allowed", "--shards", glob, "--allow-missing")
    assert proc.returncode == 0, proc.stderr


def test_overlapping_shards_are_bad_input(repo, measured, tmp_path):
    glob = shards(measured, tmp_path / "shards", {"shard-1.csv": [0, 1], "shard-2.csv": [1]})
    proc = night(repo, tmp_path / "out", "--shards", glob)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "overlap" in lines[0], proc.stderr


def test_the_devices_own_noise_profile_sets_the_floor(repo, measured, tmp_path):
    """A 1.9x slower case is regressed under the cpu built-in 75% floor, and held back by a calibrated
    profile whose floor is 95% (its A/A nights were that noisy); a missing profile is bad input.

    Judged on chosen repeat times (the measured run's rows, its times replaced), not on live timings:
    how spread out a loaded machine's repeats came out must not decide a test of the floor.
    """
    rows = [dict(r, git_sha="") for r in read_rows(measured)]  # no commit: confirm skipped, compare decides
    base = write_rows(tmp_path / "base.csv", [times(r, 1.0) for r in rows])
    cur = write_rows(tmp_path / "cur.csv", [times(rows[0], 1.9), *(times(r, 1.0) for r in rows[1:])])
    profile = tmp_path / "noisy-cpu.json"
    profile.write_text('{"name": "noisy-cpu", "arch": "cpu", "floor_pct": 95, "unclocked_floor_pct": 95, '
                       '"band_floor_pct": 95, "unclocked_band_floor_pct": 95, "clock_swing_pct": 5, '
                       '"suite_floor_pct": 95, "source": "a test"}')
    built_in = night(repo, tmp_path / "a", "--run", str(cur), "--baseline", str(base), "--no-bisect")
    v = verdict(tmp_path / "a")
    assert [c["verdict"] for c in v["cases"]] == ["regressed", "unchanged"], built_in.stderr
    assert built_in.returncode == 1, built_in.stderr
    calibrated = night(repo, tmp_path / "b", "--run", str(cur), "--baseline", str(base), "--no-bisect",
                       "--noise-profile", str(profile))
    v = verdict(tmp_path / "b")
    assert calibrated.returncode == 0, calibrated.stderr
    assert all(c["verdict"] != "regressed" for c in v["cases"])
    assert "noisy-cpu" in (tmp_path / "b" / "summary.md").read_text()
    missing = night(repo, tmp_path / "c", "--run", str(cur), "--baseline", str(base), "--noise-profile", "nope.json")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_against_the_store_s_one_night_a_change_inside_the_floor_is_not_unchanged(repo, measured, tmp_path):
    """+3% on one case, far inside the CPU's 75% one-run floor: `inconclusive` (confirm's to decide), not
    `unchanged`, when the second night is judged against the store's one night; 0.2% stays `unchanged`."""
    rows = [dict(r, git_sha="") for r in read_rows(measured)]  # no commit: confirm skipped, compare decides

    def timed(row: dict, scale: float, when: str) -> dict:  # repeats within ±0.1%, as a GPU's are
        repeats = [100.0 * scale * (1 + (q - 1) / 10) for q in QUIET_REPEATS]
        return dict(row, median_us=f"{sorted(repeats)[3]:.4f}", repeats_us=";".join(f"{x:.4f}" for x in repeats),
                    timestamp=when)

    first = write_rows(tmp_path / "n1.csv", [timed(r, 1.0, "2026-12-01T01:00:00+00:00") for r in rows])
    second = write_rows(tmp_path / "n2.csv", [timed(r, s, "2026-12-02T01:00:00+00:00")
                                              for r, s in zip(rows, (1.03, 1.002))])
    store = str(tmp_path / "hist")
    assert night(repo, tmp_path / "a", "--run", str(first), "--history", store, "--no-bisect").returncode == 0
    proc = night(repo, tmp_path / "b", "--run", str(second), "--history", store, "--no-bisect")
    assert proc.returncode == 0, proc.stderr  # inconclusive alone is not red
    v = verdict(tmp_path / "b")
    assert "its one night" in v["baseline"]
    got = {c["kernel"] + " " + c["shape"]: (c["verdict"], c["reason"]) for c in v["cases"]}
    moved, still = (" ".join(rows[i][k] for k in ("kernel", "shape")) for i in (0, 1))
    assert got[moved][0] == "inconclusive" and "not within ±1%" in got[moved][1], got
    assert got[still][0] == "unchanged", got


def test_the_issue_body_says_why_from_the_recorded_resources(repo, tmp_path):
    # Real H200 runs (2026-12-01, benchmarks/gpu/plant_demo.sh): the large-M tile at 4 warps
    # instead of 8 spills. The night's issue body carries compare --explain's reading and side-by-side.
    data = Path(__file__).resolve().parents[1] / "data" / "compare"
    suite = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "cases" / "explain.toml"
    out = tmp_path / "n"
    proc = perfci(repo, "nightly", str(suite), "--out", str(out), "--run", str(data / "h200_3case_spill_w4.csv"),
                  "--baseline", str(data / "h200_3case_base.csv"), "--no-bisect")
    assert proc.returncode == 1, proc.stderr
    issue = (out / "issue.md").read_text()
    why = issue[issue.index("### Why (compare --explain"):]
    assert "`matmul_tiled 4096x4096x4096 bf16` (regressed" in why
    assert "config changed (num_warps 8 -> 4); spills 0 -> 188, occupancy 8 -> 4" in why
    assert "| spills | 0 | 188 |" in why and "64x8192x8192" not in why  # the unchanged case has no reading
    cases = {(c["kernel"], c["shape"]): c for c in verdict(out)["cases"]}
    assert cases[("matmul_tiled", "8192x8192x8192")]["explain"].startswith("config changed (num_warps 8 -> 4)")
    assert cases[("matmul_tiled", "64x8192x8192")]["explain"] == ""
