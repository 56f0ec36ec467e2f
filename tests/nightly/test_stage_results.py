"""Each stage returns its result and the runner keeps it, also the part a failing stage had found."""
from __future__ import annotations

import io
import json

from perfci.nightly import core, night
from perfci.nightly.night import run_night
from perfci.nightly.state import Confirmation, Night, NightConfig, StageOutcome, Unfinished
from tests.nightly.conftest import make_repo
from tests.nightly.test_report_steps import SLOW_CASE, results


def test_a_baseline_with_no_case_in_common_fails_and_the_reports_still_name_it(tmp_path):
    repo = make_repo(tmp_path / "repo")
    base = results(tmp_path / "base.csv", "2026-11-30T02:00:00+00:00")
    base.write_text(base.read_text().replace("\ngemv,", "\nrenamed,"))
    tonight = results(tmp_path / "tonight.csv", "2026-12-01T02:00:00+00:00")
    out = tmp_path / "out"
    outcome, decision = run_night(NightConfig(suite=str(repo / "suites" / "tiny.toml"), out=out, run=str(tonight),
                                              baseline=str(base), repo=repo, device="cpu", bisect=False,
                                              canary_off=True), echo=io.StringIO())
    stage = outcome.stage("baseline")
    assert (stage.status, stage.error) == (core.FAILED, core.INPUT) and "no case in common" in stage.detail
    assert outcome.baseline == f"--baseline {base}" and outcome.cases is None
    assert json.loads((out / "verdict.json").read_text())["baseline"] == f"--baseline {base}"
    assert decision.exit_code == 2


def test_the_runner_keeps_a_stages_result_and_what_an_unfinished_one_carries(tmp_path):
    n = Night(NightConfig(suite="tiny", out=tmp_path))
    flagged = Confirmation((SLOW_CASE,))

    def keep(night_, confirmation):
        night_.confirmation = confirmation

    def interrupted(_n):
        raise Unfinished(KeyboardInterrupt(), flagged)

    stage = night._run("confirm", interrupted, keep, n, None)
    assert (stage.status, stage.error) == (core.FAILED, core.INTERRUPTED) and n.confirmation == flagged
    done = Confirmation((SLOW_CASE,), (), "unchanged")
    stage = night._run("confirm", lambda _n: StageOutcome(core.OK, "fine", done), keep, n, None)
    assert (stage.status, stage.detail) == (core.OK, "fine") and n.confirmation is done
    stage = night._run("confirm", lambda _n: StageOutcome(core.SKIPPED, "nothing"), keep, n, None)
    assert stage.status == core.SKIPPED and n.confirmation is done  # no result: nothing replaced
