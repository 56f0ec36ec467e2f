"""perfci's built-in suites and baselines: found beside the running perfci, named ``builtin:DEVICE/SUITE``.

The wheel carries them as package data (``.ci/run`` installs the wheel in a fresh virtual
environment and runs the README's main job with them); here, from the checkout.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfci import builtin
from perfci.errors import PerfciError
from perfci.suites import BUILTIN_SUITES, resolve_suite_path

ROOT = Path(__file__).resolve().parents[1]


def test_every_built_in_suite_and_the_readme_baselines_are_found():
    for name, file in BUILTIN_SUITES.items():
        assert (builtin.SUITES_DIR / file).is_file(), name
    for name in ("cpu/smoke", "h200/decode", "h200/prefill"):
        path = Path(builtin.resolve_baseline(f"builtin:{name}"))
        assert path.read_bytes() == (ROOT / "baselines" / f"{name}.csv").read_bytes()
    assert builtin.baseline_names() == ["cpu/smoke", "h200/decode", "h200/prefill"]


def test_a_suite_name_outside_any_project_is_the_built_in_one(tmp_path):
    assert resolve_suite_path("smoke", tmp_path) == builtin.SUITES_DIR / "smoke.toml"


@pytest.mark.parametrize("word", ["builtin:cpu/nope", "builtin:../../etc/passwd", "builtin:smoke"])
def test_an_unknown_built_in_baseline_is_one_line(word):
    with pytest.raises(PerfciError, match="no such built-in baseline .*builtin:cpu/smoke"):
        builtin.resolve_baseline(word)


def test_any_other_base_is_left_as_it_is():
    assert builtin.resolve_baseline("baselines/cpu/smoke.csv") == "baselines/cpu/smoke.csv"


def test_compare_takes_a_built_in_baseline_from_any_folder(tmp_path):
    cur = ROOT / "baselines" / "cpu" / "smoke.csv"
    ok = subprocess.run([sys.executable, "-m", "perfci", "compare", "builtin:cpu/smoke", str(cur), "--format", "json"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr  # the baseline against itself
    bad = subprocess.run([sys.executable, "-m", "perfci", "compare", "builtin:cpu/none", str(cur)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
