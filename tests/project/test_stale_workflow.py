"""The stale-device workflow's steps, run here over a perf-history checkout with a stand-in `gh`."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from perfci.history import store
from perfci.project.init import InitOptions, template, workflow_text
from tests.history.synth import write_night

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")
ROOT = Path(__file__).resolve().parents[2]


def steps() -> dict[str, str]:
    doc = yaml.safe_load(workflow_text(template("stale.yml"), InitOptions(perfci_spec="perfci==0.1.0")))
    return {s["name"]: s["run"] for s in doc["jobs"]["stale"]["steps"] if "run" in s}


def run(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the step uses jq, as GitHub's runners have it")
@pytest.mark.parametrize("open_issue", [False, True])
def test_a_stale_suite_opens_one_issue_or_comments_on_the_open_one(tmp_path, open_issue):
    work, temp, bins = tmp_path / "work", tmp_path / "temp", tmp_path / "bin"
    for d in (work / "repo", temp, bins):
        d.mkdir(parents=True)
    (work / "repo" / "perfci.toml").write_text("stale_days = 3\n")
    now = datetime.now(timezone.utc)
    for device, age in (("h200", 0.5), ("mi355x", 4.0)):
        night = write_night(tmp_path / f"{device}.csv", 0, env={"timestamp": (now - timedelta(days=age)).isoformat()})
        store.add_runs(work / "perf-history" / device, [str(night)])
    listed = '[{"number": 12, "title": "[perfci-stale] a device stopped reporting"}]' if open_issue else "[]"
    for name, body in (("perfci", f'exec {sys.executable} -m perfci "$@"\n'),
                       ("gh", f'if [ "$2" = list ]; then echo \'{listed}\'; exit 0; fi\n'
                              f'printf "%s\\n" "$@" > {tmp_path}/gh-args\n'
                              f'for a in "$@"; do if [ "$prev" = --body-file ]; then cp "$a" {tmp_path}/gh-body; fi; '
                              f'prev=$a; done\n')):
        (bins / name).write_text("#!/bin/bash\n" + body)
        (bins / name).chmod((bins / name).stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bins}:{os.environ['PATH']}", "RUNNER_TEMP": str(temp),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    s = steps()
    r = run(s["perfci history stale"], work / "repo", env)
    assert r.returncode == 0, r.stderr
    assert "stale after 3 day(s)" in (tmp_path / "summary.md").read_text()
    r = run(s["open or update the stale-device issue"], work, env)
    assert r.returncode == 0, r.stderr
    args = (tmp_path / "gh-args").read_text().split("\n")
    assert args[:3] == (["issue", "comment", "12"] if open_issue else ["issue", "create", "--title"])
    body = (tmp_path / "gh-body").read_text()
    assert "| `decode` |" in body and body.count("\n| ") == 2  # the header and mi355x's one suite
    assert "4.0 |" in body and "stale_days" in body


def test_nothing_stale_files_nothing(tmp_path):
    work, temp, bins = tmp_path / "work", tmp_path / "temp", tmp_path / "bin"
    for d in (work / "repo", temp, bins):
        d.mkdir(parents=True)
    now = datetime.now(timezone.utc)
    store.add_runs(work / "perf-history" / "h200",
                   [str(write_night(tmp_path / "n.csv", 0, env={"timestamp": now.isoformat()}))])
    (bins / "perfci").write_text(f'#!/bin/bash\nexec {sys.executable} -m perfci "$@"\n')
    (bins / "gh").write_text(f"#!/bin/bash\ntouch {tmp_path}/gh-called\n")
    for b in bins.iterdir():
        b.chmod(b.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bins}:{os.environ['PATH']}", "RUNNER_TEMP": str(temp),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    s = steps()
    assert run(s["perfci history stale"], work / "repo", env).returncode == 0
    r = run(s["open or update the stale-device issue"], work, env)
    assert r.returncode == 0 and "every device reported" in r.stdout and not (tmp_path / "gh-called").exists()
