"""The README's main job, as CI runs it: the smoke suite through the Triton
interpreter, then a comparison against the committed CPU baseline."""
import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_suite_runs_every_kernel_on_the_cpu_and_compares_with_its_baseline(tmp_path):
    out = tmp_path / "results.csv"
    run = subprocess.run([sys.executable, "-m", "perfci", "run", "smoke", "--device", "cpu",
                          "--out", str(out), "--format", "markdown"],
                         capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    kernels = {r["kernel"].split("[")[0] for r in rows}
    assert kernels == {"matmul_tiled", "splitk_decode", "gemv", "matmul_persistent", "torch_matmul"}
    assert all(r["status"] == "ok" and len(r["repeats_us"].split(";")) == 7 for r in rows)
    assert "| matmul_persistent | 16x16x32 | fp32 |" in run.stdout

    compare = subprocess.run([sys.executable, "-m", "perfci", "compare",
                              str(ROOT / "baselines" / "cpu" / "smoke.csv"), str(out), "--format", "json"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert compare.returncode in (0, 1), compare.stderr  # a verdict either way, never a usage error
    import json

    report = json.loads(compare.stdout)
    assert len(report["cases"]) == len(rows)
    assert {c["verdict"] for c in report["cases"]} <= {"unchanged", "inconclusive", "regressed", "improved"}
