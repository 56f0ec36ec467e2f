"""`perfci history export --otava --out DIR` with suite names that are paths and YAML."""
import subprocess
import sys
from pathlib import Path

import yaml

from perfci.history import store
from tests.history.synth import write_night

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_stays_in_dir_and_no_suite_name_writes_yaml(tmp_path):
    victim = tmp_path / "victim"
    suites = ["../../escaped", f"{victim}/abs", "y\n  evil.test:\n    type: csv\n    file: /etc/passwd",
              "decode", "decode/", "Decode", "1__2"]
    files = [write_night(tmp_path / f"n{i}.csv", 0, suite=s) for i, s in enumerate(suites)]
    store.add_runs(tmp_path / "st", [str(f) for f in files])
    out = tmp_path / "deep" / "er" / "ot"
    r = subprocess.run([sys.executable, "-m", "perfci", "history", "export", str(tmp_path / "st"), "--otava",
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    inputs = set(files) | {p for p in (tmp_path / "st").rglob("*")}
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in inputs]
    assert written and all(p.parent == out for p in written), written  # nothing outside DIR
    assert not victim.exists()
    config = yaml.safe_load((out / "otava.yaml").read_text())
    tests = config["tests"]
    assert len(tests) == len(suites) and "evil.test" not in tests  # one test per suite, none injected
    assert len({t["file"] for t in tests.values()}) == len(suites)  # "decode", "decode/" and "Decode" apart
    for name, test in tests.items():
        assert isinstance(name, str) and name.startswith("perfci.") and "/" not in test["file"]
        assert (out / test["file"]).is_file() and test["type"] == "csv"
        assert all(isinstance(m, str) and spec["column"] == m for m, spec in test["metrics"].items())
    assert set(config) == {"tests"}
    for name in tests:
        assert name in r.stdout  # the command it prints names the tests the file holds
