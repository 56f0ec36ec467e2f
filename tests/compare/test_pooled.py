"""`perfci compare STORE CUR`: tonight against the store's last K nights, as a user runs it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.compare import CompareOptions
from perfci.compare.noise import profile_for_arch
from perfci.history import store
from perfci.compare.pooled import PooledOptions, build_baseline, judge
from perfci.compare.prior import CaseVariance, PriorOptions, case_priors, floor_prior, suite_prior
from perfci.results import COLUMNS, read_results, render_rows_csv
from perfci.verdict import Verdict
from tests.history.synth import night_rows, write_night

ROOT = Path(__file__).resolve().parents[2]
SLOW = ("matmul_tiled", "4096x6144x768", "bf16")  # ~74 us


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    d = tmp_path_factory.mktemp("pooled")
    store.add_runs(d / "st", [str(write_night(d / f"n{i}.csv", i)) for i in range(5)])
    return d


def test_a_four_percent_regression_is_found_against_five_nights_and_exits_1(five):
    cur = write_night(five / "cur.csv", 9, slow={SLOW: 1.04})
    r = perfci("compare", five / "st", cur, "--format", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    bad = [c for c in out["cases"] if c["verdict"] == "regressed"]
    assert [(c["kernel"], c["shape"], c["dtype"]) for c in bad] == [SLOW]
    assert bad[0]["n_base"] == 5 and bad[0]["ci_low"] > 1.01 and bad[0]["q_value"] <= 0.05
    assert any(n.startswith("pooled baseline: each case against its last 5 ok nights") for n in out["notes"])
    # One run against one run cannot see 4%: the profile floor (5.36%) is in the way.
    one = perfci("compare", five / "n4.csv", cur, "--format", "json")
    assert one.returncode == 0
    assert next(c for c in json.loads(one.stdout)["cases"] if c["kernel"] == SLOW[0] and c["shape"] == SLOW[1])[
        "verdict"] != "regressed"


def test_an_unchanged_night_exits_0_with_every_case_judged(five):
    cur = write_night(five / "aa.csv", 10)
    r = perfci("compare", five / "st", cur)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "perfci compare: " in r.stdout and "(last 5 nights)" in r.stdout
    assert "regressed" not in r.stdout.split("verdicts:")[1].splitlines()[0]
    assert "24 unchanged" in r.stdout or "inconclusive" in r.stdout


def test_nights_limits_the_pool_and_the_old_two_file_compare_is_untouched(five):
    cur = write_night(five / "cur3.csv", 11, slow={SLOW: 1.04})
    out = json.loads(perfci("compare", five / "st", cur, "--nights", "3", "--format", "json").stdout)
    assert {c["n_base"] for c in out["cases"] if c["verdict"] != "added"} == {3}
    r = perfci("compare", five / "n0.csv", cur, "--nights", "3")
    assert r.returncode == 2 and "--nights" in r.stderr and r.stderr.count("\n") == 1
    r = perfci("compare", five / "st", cur, "--nights", "1")
    assert r.returncode == 2 and "at least 2" in r.stderr


def test_a_current_run_of_another_device_or_a_bad_store_is_refused(five, tmp_path):
    other = write_night(tmp_path / "amd.csv", 3, env={"device_name": "AMD Instinct MI300X", "arch": "gfx942"})
    r = perfci("compare", five / "st", other)
    assert r.returncode == 2 and "holds runs of NVIDIA H200" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = perfci("compare", tmp_path / "empty", write_night(tmp_path / "c.csv", 3))
    assert r.returncode == 2 and "not a perfci history store" in r.stderr


def test_a_store_with_one_night_judges_nothing_and_strict_says_so(tmp_path):
    store.add_runs(tmp_path / "st", [str(write_night(tmp_path / "n0.csv", 0))])
    cur = write_night(tmp_path / "cur.csv", 1, slow={SLOW: 1.5})
    r = perfci("compare", tmp_path / "st", cur)
    assert r.returncode == 0 and "24 inconclusive" in r.stdout and "pooling needs 2" in r.stdout
    assert perfci("compare", tmp_path / "st", cur, "--strict").returncode == 3


def test_cur_already_in_the_store_is_left_out_of_its_own_baseline(five):
    r = perfci("compare", five / "st", five / "n4.csv", "--format", "json")
    out = json.loads(r.stdout)
    assert any("left out of its own baseline" in n for n in out["notes"])
    assert {c["n_base"] for c in out["cases"]} == {4}


def test_broken_added_and_removed_cases(five, tmp_path):
    cur = write_night(tmp_path / "cur.csv", 12, status={SLOW: "fail"},
                      only={k for k in [SLOW, ("matmul_tiled", "1x1024x6144", "bf16")]})
    r = perfci("compare", five / "st", cur, "--format", "json")
    assert r.returncode == 1
    verdicts = {(c["kernel"], c["shape"]): c["verdict"] for c in json.loads(r.stdout)["cases"]}
    assert verdicts[SLOW[:2]] == "broken"
    assert list(verdicts.values()).count("removed") == 22


def test_regressed_needs_the_floor_and_unchanged_an_interval_that_holds_zero(five):
    nights = [("decode", read_results(five / f"n{i}.csv")) for i in range(5)]
    profile = profile_for_arch("sm_90")
    b = build_baseline(nights, profile, PooledOptions(), "sm_90")
    cur = read_results(write_night(five / "margin.csv", 14, slow={SLOW: 1.03}))
    out = judge(b, cur, "decode", "sm_90", profile, CompareOptions())
    slow = next(c for c in out.cases if c.key == SLOW)
    assert slow.verdict == Verdict.REGRESSED and slow.ci_low > 1.01
    assert slow.reason == "significant against 5 nights, interval above the floor"
    quiet = [c for c in out.cases if c.verdict == Verdict.UNCHANGED]
    assert quiet and all(c.reason.startswith("interval inside ±") for c in quiet)
    # Unchanged: inside ±1%, or holding 0 and inside ±4%; nothing else, whatever the profile's floor.
    assert all(c.ci_low < 1.0 < c.ci_high or 1 / 1.01 < c.ci_low <= c.ci_high < 1.01 for c in quiet)
    assert all(1 / 1.04 < c.ci_low and c.ci_high < 1.04 for c in quiet)
    # The rule before: inside the profile floor (5.36%) was unchanged, even an interval wholly above 0.
    old = judge(b, cur, "decode", "sm_90", profile, CompareOptions(), PooledOptions(margin="profile"))
    assert all(c.reason.endswith("% (profile floor)") for c in old.cases if c.verdict == Verdict.UNCHANGED)


def test_an_interval_wholly_above_zero_is_never_unchanged(tmp_path):
    # +2% on every night-to-night-quiet case: past the 1% floor's reach for regressed at q <= 0.05 or
    # not, its interval excludes 0, so it goes to confirm as inconclusive (the profile rule said unchanged).
    nights = [("decode", read_results(write_night(tmp_path / f"n{i}.csv", i))) for i in range(3)]
    profile = profile_for_arch("sm_90")
    b = build_baseline(nights, profile, PooledOptions(nights=3), "sm_90")
    cur = read_results(write_night(tmp_path / "cur.csv", 7, slow={SLOW: 1.02}))
    for rule, allowed in (("resolution", {Verdict.REGRESSED, Verdict.INCONCLUSIVE}), ("profile", None)):
        out = judge(b, cur, "decode", "sm_90", profile, CompareOptions(), PooledOptions(nights=3, margin=rule))
        slow = next(c for c in out.cases if c.key == SLOW)
        assert slow.ci_low > 1.0
        if allowed:
            assert slow.verdict in allowed
        else:
            assert slow.verdict == Verdict.UNCHANGED


def test_the_prior_comes_from_the_family_then_the_suite_then_the_profile(five):
    nights = [("decode", read_results(five / f"n{i}.csv")) for i in range(5)]
    profile = profile_for_arch("sm_90")
    b = build_baseline(nights, profile, PooledOptions(), "sm_90")
    # 12 cases a family: each learns its own.
    assert {(p.source, p.group) for p in b.priors.values()} == {("family", "matmul_tiled"),
                                                                ("family", "splitk_decode[m_fast=1]")}
    assert all(0 < p.d0 <= PriorOptions().max_prior_nights for p in b.priors.values())
    small = {key: CaseVariance(p.k, p.var, p.center) for key, p in b.pools.items() if key[0] == "matmul_tiled"}
    four = dict(list(small.items())[:4])
    # Four cases are too few to learn a prior: the floor's, the profile's, or lower where their own nights
    # (one kernel of five nights: 4 degrees of freedom) bound them below it.
    off = PriorOptions(suite_floor=None)
    assert suite_prior(list(four.values()), floor_prior(four, profile, off), off).source == "profile"
    assert {p.source for p in case_priors(four, profile, off).values()} == {"profile"}
    assert {p.source for p in case_priors(four, profile, PriorOptions()).values()} == {"suite bound"}
    assert {p.source for p in case_priors(small, profile, PriorOptions(scope="suite")).values()} == {"suite"}
    # Pure: the same tables give the same comparison.
    cur = read_results(write_night(five / "pure.csv", 13))
    a = judge(b, cur, "decode", "sm_90", profile, CompareOptions())
    assert a == judge(b, cur, "decode", "sm_90", profile, CompareOptions())


def _mixed_night(path, night, slow_only):
    """A night whose SLOW case mixes two speeds 6% apart (3 fast, 4 slow), or runs all slow."""
    rows = night_rows(night)
    for r in rows:
        if (r["kernel"], r["shape"], r["dtype"]) == SLOW:
            level = float(r["median_us"])
            speeds = [1.06] * 7 if slow_only else [1.0, 1.06, 1.0, 1.06, 1.06, 1.0, 1.06]
            reps = [level * s * (1 + 0.0005 * i) for i, s in enumerate(speeds)]
            r["repeats_us"] = ";".join(f"{x:.4f}" for x in reps)
            r["median_us"] = f"{sorted(reps)[3]:.4f}"
    path.write_text(render_rows_csv([{c: r.get(c, "") for c in COLUMNS} for r in rows]))
    return read_results(path)


def test_a_case_whose_nights_mix_two_speeds_is_not_regressed_when_tonight_has_only_the_slow_one(tmp_path):
    # Three tight mixed nights say nothing of a night without the fast speed; the nights' own
    # repeats do (on the H200: cuBLAS 8192x6144x4096, all slow on two nights of five).
    nights = [("decode", _mixed_night(tmp_path / f"m{i}.csv", i, False)) for i in range(3)]
    tonight = _mixed_night(tmp_path / "cur.csv", 7, True)
    profile = profile_for_arch("sm_90")
    verdicts = {}
    for floor in (True, False):
        popts = PooledOptions(within_floor=floor)
        b = build_baseline(nights, profile, popts, "sm_90")
        out = judge(b, tonight, "decode", "sm_90", profile, CompareOptions(), popts)
        verdicts[floor] = next(c for c in out.cases if c.key == SLOW).verdict
    assert verdicts == {True: "inconclusive", False: "regressed"}
