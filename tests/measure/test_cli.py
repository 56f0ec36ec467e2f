"""``perfci run`` as a user runs it: a process, its stdout/stderr, its exit code."""
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.proc_util import wait_until_dead

from perfci.errors import PerfciError

ROOT = Path(__file__).resolve().parents[2]

TWO_CASES = """
name = "tiny"
devices = ["cpu", "cuda"]
dtype = "fp32"

[[cases]]
kernel = "torch_matmul"
M = [8, 16]
N = 16
K = 32
"""


def perfci(*args, env=None, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "perfci", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


def faulty_perfci(fault, *args, env=None):
    """``perfci ARGS`` whose cases really crash, hang or run out of memory (tests/measure/faulty_worker.py)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                **(env or {})}
    return subprocess.run([sys.executable, "-m", "tests.measure.faulty_worker", "--perfci", fault, *args],
                          capture_output=True, text=True, cwd=ROOT, env=full_env, timeout=120)


# A process per case (fork, run) costs 10-20 s a test here; shared isolation covers the same
# faults in the default run, the others run with the slow tests.
SLOW = pytest.mark.slow


def read_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def tiny_suite(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TWO_CASES)
    return path


@pytest.mark.parametrize("isolation", ["shared", pytest.param("fork", marks=SLOW), pytest.param("run", marks=SLOW)])
def test_a_crashed_case_is_recorded_and_the_suite_goes_on(tmp_path, tiny_suite, isolation):
    out = tmp_path / "r.csv"
    # Both cases crash; the second still runs, because a crash costs only the process it happened in.
    proc = faulty_perfci("segv", "run", str(tiny_suite), "--device", "cpu", "--out", str(out), "--iters", "60",
                         "--repeats", "3", "--isolation", isolation)
    assert proc.returncode == 1, proc.stderr
    rows = read_rows(out)
    assert [r["status"] for r in rows] == ["error", "error"]
    assert "SIGSEGV" in rows[0]["message"]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("isolation", ["shared", pytest.param("run", marks=SLOW)])
def test_ok_run_writes_every_column_and_seven_repeats(tmp_path, tiny_suite, isolation):
    out = tmp_path / "r.csv"
    proc = perfci("run", str(tiny_suite), "--device", "cpu", "--out", str(out), "--format", "markdown",
                  "--isolation", isolation)
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(out)
    assert [r["shape"] for r in rows] == ["8x16x32", "16x16x32"]
    for row in rows:
        assert row["status"] == "ok" and row["kernel"] == "torch_matmul"
        repeats = [float(v) for v in row["repeats_us"].split(";")]
        # 7 repeats as on a GPU, of 20 launches: the CPU's default (70 on a GPU).
        assert len(repeats) == 7 and row["iters"] == "20"
        assert float(row["median_us"]) == sorted(repeats)[3]
        assert row["arch"] == "cpu" and row["timestamp"] and float(row["rel_error"]) < 1e-5
        # The commit measured: the checkout's (the worker runs elsewhere, and must still say it).
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        assert head and row["git_sha"].startswith(head)
    assert "| torch_matmul | 8x16x32 | fp32 |" in proc.stdout


@pytest.mark.parametrize("isolation", ["shared", pytest.param("run", marks=SLOW)])
def test_a_hung_case_is_killed_with_its_whole_process_group(tmp_path, tiny_suite, isolation):
    out, pid_file = tmp_path / "r.csv", tmp_path / "grandchild.pid"
    started = time.monotonic()
    proc = faulty_perfci("hang", "run", str(tiny_suite), "--device", "cpu", "--out", str(out), "--timeout", "8",
                         "--filter", "M=8", "--isolation", isolation, env={"FAULT_PIDFILE": str(pid_file)})
    assert time.monotonic() - started < 60
    assert proc.returncode == 1
    (row,) = read_rows(out)
    assert row["status"] == "timeout" and "killed" in row["message"]
    grandchild = int(pid_file.read_text())
    assert wait_until_dead(grandchild)  # the worker's own child died with the group


@pytest.mark.parametrize("isolation", ["shared", pytest.param("run", marks=SLOW)])
def test_out_of_memory_becomes_an_error_row(tmp_path, tiny_suite, isolation):
    out = tmp_path / "r.csv"
    proc = faulty_perfci("oom", "run", str(tiny_suite), "--device", "cpu", "--out", str(out), "--filter", "M=16",
                         "--isolation", isolation)
    assert proc.returncode == 1
    (row,) = read_rows(out)
    assert row["status"] == "error" and row["message"] == "out of memory"


@SLOW
def test_run_isolation_goes_on_after_an_error_case_in_a_fresh_process(tmp_path, tiny_suite):
    # Every case errors: after an error the run's process leaves (its device state may be
    # poisoned), and the next case is measured in a new one.
    out = tmp_path / "r.csv"
    proc = faulty_perfci("oom@torch_matmul", "run", str(tiny_suite), "--device", "cpu", "--out", str(out),
                         "--isolation", "run", "--repeats", "3")
    assert proc.returncode == 1
    assert [r["status"] for r in read_rows(out)] == ["error", "error"]


@pytest.mark.parametrize("args, message", [
    (["run", "decoder", "--out", "x.csv"], "unknown suite 'decoder'"),
    (["run", "decode", "--out", "x.csv", "--device", "cpu"], "sized for cuda"),
    (["run", "smoke", "--out", "x.csv", "--iters", "10"], "--iters 10: use 60..80"),
    (["run", "smoke", "--out", "x.csv", "--filter", "M=999"], "no case of suite 'smoke' matches"),
    (["run", "smoke", "--out", "x.csv", "--shard", "5/4"], "--shard 5/4"),
    (["run", "smoke"], "--out CSV is required"),
    (["run", "missing.toml", "--out", "x.csv"], "suite file missing.toml does not exist"),
    (["run", "smoke", "--out", "tests"], "--out tests: is a directory"),
    (["run", "smoke", "--out", "/proc/nope/x.csv"], "--out /proc/nope/x.csv: cannot write"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = perfci(*args, cwd=ROOT, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert message in lines[-1] and "Traceback" not in proc.stderr
    assert not (ROOT / "x.csv").exists()


@pytest.mark.parametrize("body, message", [
    ("name = 'b'\n[[cases]]\nkernel = 'gemv'\nM = 4\nN = 8\nK = 8\ndtype = 'fp32'\n", "gemv 4x8x8 fp32: "),
    ("name = 'b'\n[[cases]]\nkernel = 'warp_drive'\nM = 4\nN = 8\nK = 8\n", "unknown kernel 'warp_drive'"),
    ("name = 'b'\n[[cases]]\nkernel = 'gemv'\nM = 1\nN = 8\nK = 8\ndtype = 'int3'\n", "unknown dtype 'int3'"),
    ("name = 'b'\n[[cases]\n", "not valid TOML"),
])
def test_bad_suite_files(tmp_path, body, message):
    suite = tmp_path / "bad.toml"
    suite.write_text(body)
    proc = perfci("run", str(suite), "--out", str(tmp_path / "x.csv"), timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_gpu_lock_makes_a_second_run_wait_then_give_up(tmp_path, monkeypatch):
    from perfci.measure.runner import gpu_lock

    monkeypatch.setenv("PERFCI_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    notes = []
    first = gpu_lock(1.0, notes.append)
    try:
        with pytest.raises(PerfciError, match="stayed locked"):
            # A second run in another process would block the same way; filelock
            # locks are per-object, so a second object stands in for it.
            gpu_lock(0.3, notes.append)
        assert notes and "waiting for GPU" in notes[0]
    finally:
        first.release()
    gpu_lock(0.3, notes.append).release()  # free again once released


def test_an_error_while_preparing_a_case_is_an_error_never_a_skip(tmp_path):
    # A seed torch refuses fails the case's preparation: that is an error (the run
    # exits 1), never a skip; only what the device declares unsupported is a skip.
    from perfci.measure import worker

    request = {"spec": {"kernel": "torch_matmul", "m": 8, "n": 16, "k": 32, "dtype": "fp32", "variant": {},
                        "weight": 1.0, "group": ""},
               "device": "cpu", "iters": 60, "repeats": 1, "seed": 2**70, "launch": "eager", "timer": "events",
               "gate": "none", "poll_s": 0.0, "warmup_min_s": 0.0, "warmup_max_s": 0.1, "env": None}
    (tmp_path / "req.json").write_text(json.dumps(request))
    assert worker.main([str(tmp_path / "req.json"), str(tmp_path / "res.json")]) == 0
    result = json.loads((tmp_path / "res.json").read_text())
    assert result["status"] == "error" and "Overflow" in result["message"]


def test_a_former_group_name_in_filter_lists_the_renamed_group_with_a_warning_line():
    proc = perfci("run", "decode", "--filter", "group=seed002-qkv", "--list")
    assert proc.returncode == 0
    assert {line.split("\t")[3] for line in proc.stdout.splitlines()} == {"decode-qkv"}
    assert len(proc.stdout.splitlines()) == 8
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("perfci: warning: --filter ")


def test_a_seed_out_of_range_is_one_line(tmp_path, tiny_suite):
    proc = perfci("run", str(tiny_suite), "--device", "cpu", "--out", str(tmp_path / "r.csv"), "--seed", str(2**70))
    assert proc.returncode == 2 and "--seed" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_run_that_measured_nothing_is_never_green(tmp_path):
    # Every case skipped (bf16 Triton kernels in the interpreter): nothing was measured.
    suite = tmp_path / "bf16.toml"
    suite.write_text('name = "bf16"\ndevices = ["cpu"]\ndtype = "bf16"\n\n[[cases]]\nkernel = "gemv"\n'
                     'M = 1\nN = 16\nK = 32\n')
    out = tmp_path / "r.csv"
    proc = perfci("run", str(suite), "--device", "cpu", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert [r["status"] for r in read_rows(out)] == ["skip"]
    assert "nothing was measured" in proc.stderr
