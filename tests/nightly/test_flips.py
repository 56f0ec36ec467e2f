"""A night whose autotuned kernel launched another config with its source unchanged: a flip, not a regression.

On the CPU there is no autotuner (``@triton.autotune`` needs a device), so the
choice stands recorded: tonight's results are one real run of the suite
(``measured``, whose ``launch`` and ``source`` columns the interpreter filled),
and the baseline is that run with gemv 1x8x16's config as another process's
autotuner could have chosen it, tonight 3x its time.
"""
from __future__ import annotations

import json

from dataclasses import replace

from perfci.nightly import core, render
from tests.bisect.synth import git
from tests.nightly.conftest import commit, read_rows, stage, verdict, write_rows
from tests.nightly.test_core import A, B, conf
from tests.nightly.test_core import night as outcome
from tests.nightly.test_gate import night, times

FLIPPED = ["gemv", "1x8x16", "fp32"]


def nights_rows(measured, repo, source_changed: bool):
    """(baseline, tonight): tonight the measured rows at HEAD, gemv 1x8x16 3x the baseline's time; the
    baseline at HEAD~1, with gemv 1x8x16 launched with BLOCK_K 32 / 2 warps (its source changed too,
    when SOURCE_CHANGED)."""
    good, head = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    rows = read_rows(measured)
    assert rows[0]["launch"].startswith("gemv_kernel:grid=") and rows[0]["source"].startswith("gemv_kernel:")
    assert "BLOCK_K=16" in rows[0]["launch"] and "num_warps=1" in rows[0]["launch"]
    # the recorded choice of an autotuner: what perfci run writes for a kernel an autotuner launched
    tuned = [dict(r, source=r["source"] + ":autotuned") for r in rows]
    tonight = [dict(times(r, 3.0 if i == 0 else 1.0), git_sha=head) for i, r in enumerate(tuned)]
    base = [dict(times(r, 1.0), git_sha=good) for r in tuned]
    base[0]["launch"] = rows[0]["launch"].replace("BLOCK_K=16", "BLOCK_K=32").replace("num_warps=1", "num_warps=2")
    if source_changed:
        base[0]["source"] = "gemv_kernel:0123456789abcdef:autotuned"
    return base, tonight


def test_a_flip_is_not_confirmed_is_reported_under_its_own_heading_and_the_night_is_not_red(repo, measured,
                                                                                                tmp_path):
    commit(repo, "docs: a note", {"NOTES": "nothing that touches a kernel\n"})
    base, tonight = nights_rows(measured, repo, source_changed=False)
    base_csv, run_csv = write_rows(tmp_path / "base.csv", base), write_rows(tmp_path / "run.csv", tonight)
    out = tmp_path / "out"
    proc = night(repo, out, "--run", str(run_csv), "--baseline", str(base_csv))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    v = verdict(out)
    verdicts = {tuple(c[k] for k in ("kernel", "shape", "dtype")): c["verdict"] for c in v["cases"]}
    assert verdicts[tuple(FLIPPED)] == "config-flip"
    assert v["flagged"] == [] and v["confirmed"] is None  # no confirm budget spent on it
    assert stage(v, "confirm")["status"] == "skipped" and v["confirmed_regression"] is False
    assert any(w.startswith("config flip: gemv 1x8x16 fp32") for w in v["warnings"])
    flip = next(c for c in v["cases"] if c["verdict"] == "config-flip")
    assert [where for _, where, _ in flip["flip"]] == ["base", "cur"]
    assert "BLOCK_K=32" in flip["flip"][0][0] and "BLOCK_K=16" in flip["flip"][1][0]
    # by its times alone a regression, which confirm would have been sent to measure again
    judged = json.loads((out / "compare.json").read_text())["cases"]
    assert next(c for c in judged if c["verdict"] == "config-flip")["flip"]["was"] == "regressed"
    for name, heading in (("summary.md", "#### Config flips"), ("issue.md", "### Config flips")):
        text = (out / name).read_text()
        section = text[text.index(heading):]
        assert "gemv 1x8x16 fp32: kernel source unchanged" in section
        assert "BLOCK_K=32" in section and "BLOCK_K=16" in section
        assert "300" in section and "To pin it:" in section  # tonight's config's time, 3 x 100 us

    strict = night(repo, tmp_path / "strict", "--run", str(run_csv), "--baseline", str(base_csv), "--strict")
    assert strict.returncode == 3, strict.stdout + strict.stderr
    assert verdict(tmp_path / "strict")["verdict"].startswith("undecided: config flip: gemv 1x8x16 fp32")


def test_the_same_config_change_with_the_source_changed_is_a_regression_for_confirm(repo, measured, tmp_path):
    commit(repo, "gemv: a change", {"NOTES": "a kernel change, as far as the baseline's source says\n"})
    base, tonight = nights_rows(measured, repo, source_changed=True)
    base = [dict(r, git_sha="f" * 40) for r in base]  # a commit not in the repository: confirm cannot run
    out = tmp_path / "out"
    proc = night(repo, out, "--run", str(write_rows(tmp_path / "run.csv", tonight)),
                 "--baseline", str(write_rows(tmp_path / "base.csv", base)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    v = verdict(out)
    assert v["flagged"] == [FLIPPED] and v["cases"][0]["verdict"] == "regressed"
    assert "regression (compare; not confirmed" in v["verdict"]
    assert "Config flips" not in (out / "summary.md").read_text()


def test_a_config_flip_is_never_confirmed_nor_red_and_strict_holds_it_undecided():
    o = outcome(cases=(("config-flip", A), ("unchanged", B)))
    assert core.flagged(o.cases) == () and core.flagged(o.cases, "regressed") == (B,)
    d = core.judge_night(o)
    assert (d.exit_code, d.confirmed_regression) == (0, False)
    assert d.headline == "clean: 1 config-flip, 1 unchanged"
    assert any(w.startswith("config flip: gemv 1x8x16 fp32 launched another config") for w in d.warnings)
    strict = core.judge_night(replace(o, strict=True))
    assert strict.exit_code == 3 and strict.headline.startswith("undecided: config flip: gemv 1x8x16 fp32")
    # beside a confirmed regression the night is red for the regression, and the flip still said
    red = core.judge_night(outcome(cases=(("config-flip", A), ("regressed", B)), confirmed=conf(("regressed", B))))
    assert red.exit_code == 1 and any(w.startswith("config flip: gemv 1x8x16") for w in red.warnings)


def test_the_reports_list_flips_under_their_own_heading_with_each_config_and_how_to_pin_it():
    flip = core.Judged(*A, "config-flip", "kernel source unchanged", 10.0, 20.0, 2.0,
                       flip=(("gemv_kernel BLOCK_K=32", "base", 10.0), ("gemv_kernel BLOCK_K=16", "cur", 20.0)),
                       flip_pin="keep only the chosen triton.Config")
    o = replace(outcome(cases=None), cases=(flip, core.Judged(*B, "unchanged", ratio=1.0)))
    d = core.judge_night(o)
    for text, heading in ((render.summary_md(o, d), "#### Config flips"),
                          (render.issue_md(o, d), "### Config flips")):
        section = text[text.index(heading):]
        assert "- gemv 1x8x16 fp32: kernel source unchanged" in section
        assert "| gemv_kernel BLOCK_K=32 | base | 10.0 |" in section
        assert "| gemv_kernel BLOCK_K=16 | cur | 20.0 |" in section
        assert "To pin it: keep only the chosen triton.Config" in section
    assert "Config flips" not in render.summary_md(outcome(), core.judge_night(outcome()))


def test_a_case_confirm_found_to_be_a_flip_is_not_red_and_is_said():
    # compare flagged A regressed; confirm's two sides launched two configs of one source
    o = outcome(cases=(("regressed", A), ("unchanged", B)), flagged=(A,), confirmed=conf(("config-flip", A)))
    d = core.judge_night(o)
    assert (d.exit_code, d.confirmed_regression) == (0, False)
    assert any(w.startswith("config flip: gemv 1x8x16 fp32 launched another config") for w in d.warnings)
