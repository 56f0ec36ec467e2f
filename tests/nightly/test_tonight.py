"""perfci.nightly.tonight and the builds of the night: each bounded by [tool.perfci] build_timeout."""
from __future__ import annotations

import json
import time

from perfci.nightly.stages import _build_words, _rebuild_checkout
from perfci.nightly.state import Log, Project
from tests.nightly.conftest import commit, make_repo, perfci


def test_a_build_still_going_at_build_timeout_is_bad_input_exit_2_in_one_line(tmp_path):
    repo = make_repo(tmp_path / "repo")
    head = commit(repo, "configure", {"perfci.toml": 'kernels = ["kernels.backends"]\nbuild = "sleep 30"\n'
                                                     'build_timeout = 1\n'})
    started = time.monotonic()
    proc = perfci(repo, "nightly", "tiny", "--device", "cpu", "--no-canary", "--out", str(tmp_path / "night"))
    assert time.monotonic() - started < 25.0  # the hung build was not waited for
    assert proc.returncode == 2, proc.stderr
    expected = (f"the build 'sleep 30' in {repo.resolve()} at {head[:12]} did not finish in 1 s "
                f"([tool.perfci] build_timeout)")
    assert expected in proc.stderr
    verdict = json.loads((tmp_path / "night" / "verdict.json").read_text())
    assert verdict["exit_code"] == 2


def test_confirm_and_bisect_get_the_project_s_build_timeout(tmp_path):
    p = Project(tmp_path, where=tmp_path, subdir="bench", build="make", build_timeout=90.0)
    assert _build_words(p) == ["--build", "cd bench && make", "--build-timeout", "90"]
    assert _build_words(Project(tmp_path, where=tmp_path)) == []  # no build: neither option


def test_a_rebuild_cut_off_after_confirm_is_a_note_that_says_so(tmp_path):
    log = Log()
    started = time.monotonic()
    _rebuild_checkout(Project(tmp_path, where=tmp_path, build="sleep 30", build_timeout=1.0), log)
    assert time.monotonic() - started < 15.0
    assert log.notes == ["building tonight's checkout again after confirm/bisect failed: build did not finish in "
                         "1 s ([tool.perfci] build_timeout)"]
