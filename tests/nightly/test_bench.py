"""``perfci nightly --bench CMD``: a team's own bench as the night's source, with a stand-in bench.

The bench here is a small script that writes a perfci results CSV of two cases
whose times come from speed.txt (with 0.2% of noise, a GPU's repeats: with more, the
untouched case could not be shown within the nightly's ±1% against one night and
would go to confirm too), so a whole night (compare,
confirm in worktrees, bisect) costs seconds, not the interpreter's minutes.
It logs how it was called, so the narrowing ($PERFCI_CASES, {cases}) and where
it ran are checked too. tests/e2e/ runs the real thing (a Triton GEMM through
pytest) in a repository built from examples/kernel-repo.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.bisect.clihelp import default_sigint
from tests.bisect.synth import git
from tests.nightly.conftest import ROOT, stage, verdict
from tests.proc_util import wait_until_dead

BENCH = textwrap.dedent('''\
    """A stand-in bench: two cases, times from speed.txt, a perfci results CSV at argv[1]."""
    import csv, json, os, random, sys
    from datetime import datetime, timezone

    out, cases_arg = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    speed = float(open("speed.txt").read())
    wanted = None
    if os.environ.get("PERFCI_CASES"):
        from perfci.suites import load_case_keys
        wanted = set(load_case_keys(os.environ["PERFCI_CASES"]))
    with open(os.environ["FAKE_BENCH_LOG"], "a") as log:
        log.write(json.dumps({"cwd": os.getcwd(), "cases_env": os.environ.get("PERFCI_CASES", ""),
                              "cases_arg": cases_arg, "wanted": sorted(map(list, wanted or []))}) + "\\n")
    rows = []
    for kernel, base in (("fake_gemm", 100.0), ("fake_gemv", 50.0)):
        key = (kernel, "16x16x32", "fp32")
        if wanted is not None and key not in wanted:
            continue
        scale = speed if kernel == "fake_gemm" else 1.0
        reps = [base * scale * random.gauss(1.0, 0.002) for _ in range(7)]
        rows.append({"kernel": kernel, "shape": "16x16x32", "dtype": "fp32", "M": 16, "N": 16, "K": 32,
                     "median_us": f"{sorted(reps)[3]:.4f}", "repeats_us": ";".join(f"{r:.4f}" for r in reps),
                     "status": "ok", "arch": "cpu", "device_name": "stand-in", "vendor": "cpu",
                     "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "suite": "bench", "schema": "3"})
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\\n")
        writer.writeheader()
        writer.writerows(rows)
''')
BUILD = "import os, sys; sys.exit('the build is broken here' if os.path.exists('BROKEN') else 0)\n"
CONFIRM = ["--confirm-args", "--min-rounds 3 --max-rounds 3 --min-effect 10"]
BISECT = ["--bisect-args", "--min-rounds 3", "--budget", "3600"]  # the night's budget: tests of its own


def tool(cwd: Path, *args: str, log: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """perfci as the installed tool (the console script), run in ``cwd``."""
    exe = shutil.which("perfci")
    argv = [exe] if exe else [sys.executable, "-m", "perfci"]
    env = dict(os.environ, FAKE_BENCH_LOG=str(log))
    env.pop("PERFCI_DEBUG", None)
    return subprocess.run([*argv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def make_project(top: Path, sub: str = "", build: bool = False) -> Path:
    """A git repository whose perfci project (pyproject [tool.perfci], bench.py) is at ``top/sub``."""
    root = top / sub if sub else top
    root.mkdir(parents=True)
    table = "[tool.perfci]\nhistory = \"../history\"\n" if not sub else "[tool.perfci]\nhistory = \"../../history\"\n"
    if build:
        table += 'build = "python build.py"\n'
        (root / "build.py").write_text(BUILD)
    (root / "pyproject.toml").write_text("[project]\nname = \"fake\"\nversion = \"0\"\n\n" + table)
    (root / "bench.py").write_text(BENCH)
    (root / "speed.txt").write_text("1.0\n")
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    return root


def commit(top: Path, message: str, files: dict[str, str | None]) -> str:
    for name, text in files.items():
        if text is None:
            (top / name).unlink()
        else:
            (top / name).write_text(text)
    git(top, "add", "-A")
    git(top, "commit", "-qm", message)
    return git(top, "rev-parse", "HEAD")


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def bench_night(cwd: Path, out: Path, log: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = f"{sys.executable} bench.py {{out}} {{cases}}"
    return tool(cwd, "nightly", "bench", "--bench", cmd, "--out", str(out), "--device", "cpu", *CONFIRM, *BISECT,
                *args, log=log)


@pytest.mark.slow  # two nights, confirmed and bisected: ~30 s
def test_a_bench_night_in_a_project_below_the_top_is_confirmed_narrowed_and_bisected(tmp_path):
    top = tmp_path / "mono"
    root = make_project(top, "gemm")
    log = tmp_path / "calls.jsonl"
    first = bench_night(root, tmp_path / "n1", log)
    assert first.returncode == 0, first.stderr
    v = verdict(tmp_path / "n1")
    assert v["first_night"] is True and v["history_appended"] is True
    assert (tmp_path / "history" / "cpu" / "runs").is_dir()  # [tool.perfci] history, one store per device
    assert [c["cases_arg"] for c in calls(log)] == [""]  # tonight: every case, {cases} an empty word
    assert calls(log)[0]["cases_env"] == "" and Path(calls(log)[0]["cwd"]) == root

    commit(top, "docs: one", {"gemm/NOTES": "one\n"})
    commit(top, "docs: two", {"gemm/NOTES": "one\ntwo\n"})
    plant = commit(top, "fake_gemm: three times slower", {"gemm/speed.txt": "3.0\n"})
    commit(top, "docs: four", {"gemm/NOTES": "four\n"})
    tonight = commit(top, "docs: five", {"gemm/NOTES": "five\n"})
    log.unlink()
    proc = bench_night(root, tmp_path / "n2", log)
    assert proc.returncode == 1, proc.stderr
    v = verdict(tmp_path / "n2")
    verdicts = {c["kernel"]: c["verdict"] for c in v["cases"]}
    assert verdicts["fake_gemm"] == "regressed" and v["sha"] == tonight
    assert [(c["kernel"], c["verdict"]) for c in v["confirmed"]] == [("fake_gemm", "regressed")]
    assert v["culprit"]["sha"] == plant and "gemm/speed.txt" in v["culprit"]["diffstat"]
    seen = calls(log)
    narrowed = [c for c in seen if c["cases_env"]]
    assert len(narrowed) == len(seen) - 1  # every run after tonight's was narrowed
    assert all(c["cases_arg"] == c["cases_env"] for c in narrowed)
    assert all(c["wanted"] == [["fake_gemm", "16x16x32", "fp32"]] for c in narrowed)
    # confirm and bisect measure in worktrees, each in the project's folder of its tree
    assert all(Path(c["cwd"]).name == "gemm" for c in seen)
    assert all(Path(c["cwd"]) != root for c in narrowed)
    assert git(top, "status", "--porcelain") == "" and git(top, "worktree", "list").count("\n") == 0


@pytest.mark.slow  # two nights, confirmed and bisected: ~25 s
def test_a_commit_whose_build_fails_is_skipped_by_bisect_never_named(tmp_path):
    root = make_project(tmp_path / "repo", build=True)
    log = tmp_path / "calls.jsonl"
    assert bench_night(root, tmp_path / "n1", log).returncode == 0
    commit(root, "break the build", {"BROKEN": "x\n"})
    commit(root, "fake_gemm: three times slower", {"speed.txt": "3.0\n"})
    tonight = commit(root, "mend the build", {"BROKEN": None})
    proc = bench_night(root, tmp_path / "n2", log)
    assert proc.returncode == 1, proc.stderr
    v = verdict(tmp_path / "n2")
    assert v["sha"] == tonight and v["confirmed_regression"] is True  # confirm built both ends
    assert v["culprit"] is None  # both commits between are unbuildable: skipped, no verdict on them
    bisect = json.loads((tmp_path / "n2" / "bisect.json").read_text())
    assert bisect["status"] == "all-skipped"
    assert "bisect" in stage(v, "bisect")["name"] and "no culprit" in stage(v, "bisect")["detail"]
    assert git(root, "status", "--porcelain") == "" and not (root / "BROKEN").exists()


def test_a_build_that_fails_tonight_is_one_line_and_exit_2(tmp_path):
    root = make_project(tmp_path / "repo", build=True)
    commit(root, "break the build", {"BROKEN": "x\n"})
    log = tmp_path / "calls.jsonl"
    proc = bench_night(root, tmp_path / "n1", log)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("perfci: error: ") and "the build 'python build.py' failed" in line
    assert "the build is broken here" in line
    assert not log.exists()  # nothing measured


@pytest.mark.parametrize("args, expect", [
    (["--bench", "pytest bench/"], "must write its results at {out}"),
    (["--bench", "pytest 'bench/ {out}"], "cannot be parsed as a shell line"),
    (["--bench", "true {out}"], "exited 0 and wrote no results at {out}"),
    (["--bench", "echo it broke; exit 3 # {out}"], "exited 3 and wrote no results at {out}: it broke"),
    (["--bench", "true {out}", "--bench-args", "--repeats 3"], "with --bench, bisect runs your command"),
    (["--bench", "true {out}", "--run", "x.csv"], "not allowed with argument"),
])
def test_a_bench_perfci_cannot_use_is_one_line_and_exit_2(tmp_path, args, expect):
    root = make_project(tmp_path / "repo")
    proc = tool(root, "nightly", "bench", "--out", str(tmp_path / "n"), *args, log=tmp_path / "log")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert expect in proc.stderr.strip().splitlines()[-1]


def test_a_suite_file_under_bench_is_refused(tmp_path):
    root = make_project(tmp_path / "repo")
    proc = tool(root, "nightly", "suites/x.toml", "--bench", "true {out}", "--out", str(tmp_path / "n"),
                log=tmp_path / "log")
    assert proc.returncode == 2 and "with --bench, SUITE is the name" in proc.stderr


# --------------------------------------------------------------------------- the bench's processes, its time


def test_a_bench_s_background_child_is_killed_and_the_night_records_its_timeout(tmp_path):
    root = make_project(tmp_path / "repo")
    pid = tmp_path / "child.pid"
    proc = bench_night(root, tmp_path / "n", tmp_path / "log", "--bench",
                       f"sleep 3334 & echo $! > {pid}; {sys.executable} bench.py {{out}}")
    assert proc.returncode == 0, proc.stderr
    assert wait_until_dead(int(pid.read_text()), timeout=2.0), "the bench's child outlived the night"
    assert verdict(tmp_path / "n")["bench_timeout_s"] == 1800


def test_a_bench_that_hangs_after_writing_its_results_times_out_as_a_failed_run_never_judged(tmp_path):
    root = make_project(tmp_path / "repo")
    started = time.monotonic()
    proc = bench_night(root, tmp_path / "n", tmp_path / "log", "--bench-timeout", "1", "--bench",
                       f"{sys.executable} bench.py {{out}}; sleep 3334")
    assert time.monotonic() - started < 120
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "timed out after 1 s (--bench-timeout)" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "n" / "run.csv").exists()
    v = verdict(tmp_path / "n")
    assert v["bench_timeout_s"] == 1 and stage(v, "tonight")["status"] == "failed"


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("perfci-"))


def _bench_line(pids: Path) -> str:
    """A bench that starts two children of its own and waits on them, writing their pids first."""
    return f"sleep 3334 & echo $! >> {pids}; sleep 3335 & echo $! >> {pids}; wait # {{out}}"


def _wait_for_pids(pids: Path, count: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pids.exists() and len(pids.read_text().split()) >= count:
            return [int(p) for p in pids.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the bench never started")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_confirm_of_a_bench_leaves_no_temporary_folder_and_no_process(tmp_path, sig):
    root = make_project(tmp_path / "repo")
    commit(root, "two", {"NOTES": "two\n"})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pids = tmp_path / "pids"
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    bench = [sys.executable, "-m", "perfci.nightly.bench", "--command", _bench_line(pids), "--results", "r.csv",
             "--suite", "bench"]
    proc = subprocess.Popen([sys.executable, "-m", "perfci", "confirm", "HEAD~1", "HEAD", "--results", "r.csv",
                             "--build", "", "--", *bench], cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    children = _wait_for_pids(pids, 2)
    assert any(name.startswith("perfci-bench-") for name in _leftovers(tmp))
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert all(wait_until_dead(pid, timeout=2.0) for pid in children)
    assert _leftovers(tmp) == []  # the worktrees' folder and the bench's own temporary folder
    assert git(root, "worktree", "list").count("\n") == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_worktrees_entry_point_ends_its_bench_and_removes_its_folder_on_a_signal(tmp_path, sig):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pids = tmp_path / "pids"
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "perfci.nightly.bench", "--command", _bench_line(pids),
                             "--results", "r.csv", "--suite", "bench"], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint)
    children = _wait_for_pids(pids, 2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip() == "perfci: interrupted"
    assert all(wait_until_dead(pid, timeout=2.0) for pid in children)
    assert _leftovers(tmp) == []
