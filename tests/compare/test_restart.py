"""An `expected` triage record restarts its cases' pooled baseline at its commit (simulated stores)."""
import json
import os
import subprocess
import sys
from pathlib import Path

from perfci.compare.comparison import CompareOptions
from perfci.compare.store import pooled_comparison
from perfci.history import store, triage
from perfci.verdict import Verdict
from tests.history.synth import cases, write_night

ROOT = Path(__file__).resolve().parents[2]
STEP_NIGHT = 6
STEPPED = {(k, f"{m}x{n}x{kk}", "bf16"): 1.10 for k, m, n, kk in cases() if k == "matmul_tiled"}
S = f"{STEP_NIGHT:02d}" * 20


def night(tmp: Path, i: int) -> Path:
    return write_night(tmp / f"n{i}.csv", i, seed=3, slow=STEPPED if i >= STEP_NIGHT else None)


def stores(tmp: Path, upto: int) -> tuple[Path, Path]:
    """Nights 0..UPTO-1 in two stores; the first marks the step expected, its twin does not."""
    marked, twin = tmp / "marked", tmp / "twin"
    runs = [str(night(tmp, i)) for i in range(upto)]
    store.add_runs(marked, runs)
    store.add_runs(twin, runs)
    store.add_triage(marked, triage.make_record("matmul_tiled * bf16", S[:10], "expected",
                                                "bigger tile: every matmul_tiled case +10%", "ana"))
    return marked, twin


def judged(st: Path, cur: Path) -> dict:
    return {c.key: c for c in pooled_comparison(str(st), str(cur), None, CompareOptions(), 5).cases}


def test_nights_after_an_expected_step_are_judged_against_the_new_level_alone(tmp_path):
    marked, twin = stores(tmp_path, STEP_NIGHT + 3)  # three nights at the new level stored
    cur = night(tmp_path, STEP_NIGHT + 3)
    new, old = judged(marked, cur), judged(twin, cur)
    for key in STEPPED:
        assert abs(new[key].ratio - 1.0) < 0.02, (key, new[key].ratio)
        assert new[key].verdict != Verdict.REGRESSED and new[key].n_base == 3
    # the unmarked twin still judges against the blend of old and new nights
    ratios = [old[key].ratio for key in STEPPED]
    assert min(ratios) > 1.02 and all(old[k].verdict != Verdict.UNCHANGED for k in STEPPED), ratios
    assert sum(new[k].verdict == Verdict.UNCHANGED for k in STEPPED) > sum(old[k].verdict == Verdict.UNCHANGED
                                                                          for k in STEPPED)
    # cases the record does not name keep their whole pool, and are no longer pulled by the stepped
    # kernel's blend through tonight's suite-wide shift (fitted on the other kernels' cases)
    others = [k for k in new if k not in STEPPED]
    assert others and all(new[k].n_base == 5 and abs(new[k].ratio - 1.0) < 0.02 for k in others)


def test_with_one_night_since_the_step_the_one_night_rule_applies(tmp_path):
    marked, twin = stores(tmp_path, STEP_NIGHT + 1)
    cur = night(tmp_path, STEP_NIGHT + 1)
    new, old = judged(marked, cur), judged(twin, cur)
    for key in STEPPED:
        c = new[key]
        assert abs(c.ratio - 1.0) < 0.03, (key, c.ratio)
        assert c.verdict in (Verdict.UNCHANGED, Verdict.INCONCLUSIVE) and "one night since" in c.reason
        if c.verdict == Verdict.UNCHANGED:
            assert abs(c.ratio - 1.0) <= 0.01 + 1e-9
    assert min(old[k].ratio for k in STEPPED) > 1.03


def test_tonight_at_the_expected_commit_is_the_new_levels_first_night(tmp_path):
    marked, twin = stores(tmp_path, STEP_NIGHT)
    cur = night(tmp_path, STEP_NIGHT)
    new, old = judged(marked, cur), judged(twin, cur)
    assert all(new[k].verdict == Verdict.ADDED and "first night since" in new[k].reason for k in STEPPED)
    assert all(old[k].verdict == Verdict.REGRESSED for k in STEPPED)


def test_compare_store_says_which_cases_restarted_and_why(tmp_path):
    marked, _ = stores(tmp_path, STEP_NIGHT + 2)
    cur = night(tmp_path, STEP_NIGHT + 2)
    r = subprocess.run([sys.executable, "-m", "perfci", "compare", str(marked), str(cur), "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 3), r.stderr
    notes = " ".join(json.loads(r.stdout)["notes"])
    assert "12 case(s) pooled only from the nights since their baseline restarted" in notes
    assert "bigger tile" in notes


def test_a_culprit_no_night_was_measured_at_is_placed_by_git_ancestry(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shas = []
    for i in range(8):
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True,
                       env={**os.environ, **env})
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    culprit = 4  # the step landed at c4; nights were measured at c0-c3 and c5-c7
    measured = [0, 1, 2, 3, 5, 6]
    files = [str(write_night(tmp_path / f"n{i}.csv", i, seed=3, sha=shas[c],
                             slow=STEPPED if c > culprit else None)) for i, c in enumerate(measured)]
    store.add_runs(tmp_path / "st", files)
    store.add_triage(tmp_path / "st", triage.make_record("matmul_tiled * bf16", shas[culprit], "expected",
                                                         "bisected to c4", "ana"))
    cur = write_night(tmp_path / "cur.csv", len(measured), seed=3, sha=shas[7], slow=STEPPED)
    monkeypatch.chdir(tmp_path)  # not a repository: the commit cannot be placed, nothing restarts
    outside = judged(tmp_path / "st", cur)
    assert all(outside[k].n_base == 5 for k in STEPPED)
    monkeypatch.chdir(repo)
    inside = judged(tmp_path / "st", cur)
    assert all(inside[k].n_base == 2 and abs(inside[k].ratio - 1.0) < 0.02 for k in STEPPED)
    assert all(inside[k].verdict != Verdict.REGRESSED for k in STEPPED)
