"""``perfci run --shard I/N`` as a CI matrix runs it, and ``perfci merge`` joining the shards."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

THREE_CASES = """
name = "tiny"
devices = ["cpu", "cuda"]
dtype = "fp32"

[[cases]]
kernel = "torch_matmul"
M = [8, 16, 32]
N = 16
K = 32
"""


def perfci(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ), timeout=timeout)


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # three live runs: ~30 s
def test_two_shards_merge_into_what_one_run_writes(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(THREE_CASES)
    fast = ("--device", "cpu", "--repeats", "3", "--iters", "60", "--format", "none")
    for name, shard in (("s1.csv", ["--shard", "1/2"]), ("s2.csv", ["--shard", "2/2"]), ("all.csv", [])):
        proc = perfci("run", suite, "--out", tmp_path / name, *shard, *fast)
        assert proc.returncode == 0, proc.stderr
    s1, s2, whole = rows(tmp_path / "s1.csv"), rows(tmp_path / "s2.csv"), rows(tmp_path / "all.csv")
    # FLOPs order 32, 16, 8 dealt 1, 2, 2: shard 1 has the largest case, shard 2 the other two
    assert [r["shape"] for r in s1] == ["32x16x32"] and [r["shape"] for r in s2] == ["8x16x32", "16x16x32"]
    assert {r["shard"] for r in s1} == {"1/2"} and {r["shard"] for r in whole} == {""}
    assert [r["case_index"] for r in s1 + s2] == ["3", "1", "2"]
    assert len({r["selection"] for r in s1 + s2 + whole}) == 1 and whole[0]["selection"].startswith("3:")
    proc = perfci("merge", tmp_path / "s2.csv", tmp_path / "s1.csv", "--out", tmp_path / "merged.csv")
    assert proc.returncode == 0, proc.stderr
    merged = rows(tmp_path / "merged.csv")
    placement = ("kernel", "shape", "dtype", "shard", "case_index", "selection", "arch", "suite", "schema")
    assert [{c: r[c] for c in placement} for r in merged] == [{c: r[c] for c in placement} for r in whole]
    proc = perfci("compare", tmp_path / "all.csv", tmp_path / "merged.csv", "--format", "json")
    counts = json.loads(proc.stdout)["summary"]["counts"]
    assert counts["added"] == counts["removed"] == 0 and sum(counts.values()) == 3


@pytest.mark.parametrize("shard, message", [
    ("0/2", "--shard 0/2: I must be between 1 and N (2)"),
    ("3/2", "--shard 3/2: I must be between 1 and N (2)"),
    ("1/4", "--shard 1/4: only 3 case(s) are selected, so 4 shards would leave some empty; use at most 3"),
    ("half", "--shard 'half' must look like I/N with 1 <= I <= N, e.g. 2/4"),
    ("1/2/3", "--shard '1/2/3' must look like I/N with 1 <= I <= N, e.g. 2/4"),
])
def test_a_bad_shard_is_one_line_and_exit_2(tmp_path, shard, message):
    suite = tmp_path / "tiny.toml"
    suite.write_text(THREE_CASES)
    proc = perfci("run", suite, "--device", "cpu", "--shard", shard, "--out", tmp_path / "x.csv", timeout=60)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [f"perfci: error: {message}"]
    assert not (tmp_path / "x.csv").exists()
