"""The pooled compare's prior of each case's between-night variance: per kernel family, never below a case's own."""
import math
from dataclasses import replace

import numpy as np
import pytest

from perfci.compare import CompareOptions
from perfci.compare.noise import profile_for_arch
from perfci.compare.pooled import PooledOptions, build_baseline, judge
from perfci.compare.prior import (CaseVariance, Prior, PriorOptions, case_priors, kernel_of, moderated_var,
                                  suite_bound)
from perfci.compare.shift import tonight_offsets
from perfci.model import ResultRow, ResultTable
from perfci.verdict import Verdict

PROFILE = profile_for_arch("sm_90")
# A split-K family whose cases each move by 2% from one process to the next, among GEMMs that move by 0.4%.
FAMILIES = (("splitk_decode[m_fast=1]", 12, 0.02), ("matmul_tiled", 72, 0.004))


def _night(rng, families=FAMILIES, slow=None):
    rows = []
    for kernel, n, sd in families:
        for i in range(n):
            level = (10.0 + 3 * i) * math.exp(rng.normal(0.0, sd)) * ((slow or {}).get(kernel, 1.0))
            reps = tuple(float(x) for x in level * np.exp(rng.normal(0.0, 0.002, 7)))
            rows.append(ResultRow(kernel=kernel, shape=f"{i + 1}x4096x4096", dtype="bf16", status="ok", m=i + 1,
                                  n=4096, k=4096, median_us=float(np.median(reps)), repeats_us=reps, arch="sm_90"))
    return ResultTable("night.csv", "perfci", tuple(rows))


def _split_k(scope: str, seeds=range(24)):
    """(moderated spreads, verdicts) of the split-K cases on unchanged nights judged against two nights."""
    spreads, verdicts = [], []
    popts = PooledOptions(nights=2, absolute_floor=False,
                          prior=PriorOptions(scope=scope, max_prior_nights=1e4 if scope == "suite" else 8.0))
    for seed in seeds:
        rng = np.random.default_rng(seed)
        nights = [_night(rng) for _ in range(3)]
        b = build_baseline([("decode", t) for t in nights[:2]], PROFILE, popts, "sm_90")
        out = judge(b, nights[2], "decode", "sm_90", PROFILE, CompareOptions(), popts)
        mine = [c for c in out.cases if c.kernel.startswith("splitk")]
        spreads += [c.spread_base_pct for c in mine]
        verdicts += [c.verdict for c in mine]
    return np.asarray(spreads), verdicts


def test_a_family_that_moves_two_percent_between_processes_keeps_its_spread():
    suite, suite_verdicts = _split_k("suite")
    family, family_verdicts = _split_k("family")
    # The suite's prior (most cases move 0.4%) shrinks the split-K cases' 2% to about 1%; their family's keeps it.
    assert np.median(suite) < 1.2 and np.median(family) > 1.6
    # So the suite's intervals are too narrow: over twice the false alarms (12 of 288 against 5), and a
    # quarter of these unchanged nights called unchanged on a spread the cases do not have.
    regressed = family_verdicts.count(Verdict.REGRESSED)
    assert regressed <= 0.02 * len(family_verdicts) and suite_verdicts.count(Verdict.REGRESSED) >= 2 * regressed
    assert suite_verdicts.count(Verdict.UNCHANGED) >= 0.2 * len(suite_verdicts)
    assert family_verdicts.count(Verdict.UNCHANGED) <= 0.05 * len(family_verdicts)


def test_a_prior_never_pulls_a_case_below_the_lower_bound_of_its_own_variance():
    quiet = Prior(d0=1e4, intercept=math.log(0.005 ** 2), slope=0.0, source="family", group="splitk")
    mover = CaseVariance(k=4, var=0.03 ** 2, center=math.log(10.0))
    bounded, df = moderated_var(mover, quiet, PriorOptions())
    free, _ = moderated_var(mover, quiet, PriorOptions(own_bound=None))
    assert math.sqrt(free) < 0.006  # a prior worth 10,000 nights: the case's own 3% is gone
    assert math.sqrt(bounded) == pytest.approx(0.03 * math.sqrt(3 / 7.8147), rel=1e-3)  # chi2(3) at 95%
    assert df == pytest.approx(1e4 + 3)


def test_small_families_borrow_their_kernels_prior_or_the_suites_but_never_less_than_the_profile():
    rng = np.random.default_rng(3)
    cases = {(kernel, f"{i}x1x1", "bf16"): CaseVariance(4, float(rng.uniform(0.5, 2.0)) * 1e-6, math.log(20.0))
             for kernel, n in (("matmul_tiled", 10), ("matmul_tiled[epilogue=bias]", 2), ("gemv", 3))
             for i in range(n)}
    priors = case_priors(cases, PROFILE, PriorOptions())
    by_kernel = {key[0]: p for key, p in priors.items()}
    assert (by_kernel["matmul_tiled"].source, by_kernel["matmul_tiled"].group) == ("family", "matmul_tiled")
    # Its variant has two cases: the kernel's prior (learned over all twelve matmul_tiled cases).
    assert (by_kernel["matmul_tiled[epilogue=bias]"].source,
            by_kernel["matmul_tiled[epilogue=bias]"].group) == ("kernel", "matmul_tiled")
    # gemv's three cases: the suite's, raised to the profile's one-run spread (1.2% on the H200) ...
    profile_sd = PROFILE.floor_pct / 100 / (1.25 * 2.5758 * math.sqrt(2))
    held = case_priors(cases, PROFILE, PriorOptions(suite_floor=None))
    assert math.sqrt(held[("gemv", "0x1x1", "bf16")].s0sq(20.0)) == pytest.approx(profile_sd, rel=1e-6)
    # ... or, where lower, to the bound the suite's own nights give: two kernels (matmul_tiled with its
    # variant, gemv) of four nights, each one series of 3 degrees of freedom; chi2(6) at 5% is 1.635.
    pooled = [np.mean([c.var for key, c in cases.items() if kernel_of(key[0]) == k]) for k in ("matmul_tiled", "gemv")]
    bound = 6 * np.mean(pooled) / 1.6354
    assert suite_bound(cases, 0.95) == pytest.approx(bound, rel=1e-3)
    sd = math.sqrt(by_kernel["gemv"].s0sq(20.0))
    assert sd == pytest.approx(math.sqrt(bound), rel=1e-3) and sd < profile_sd / 4
    assert (by_kernel["gemv"].source, by_kernel["gemv"].d0) == ("suite", PriorOptions().profile_prior_nights)
    assert kernel_of("splitk_decode[m_fast=1]") == "splitk_decode"


def test_tonights_shift_is_fitted_on_the_other_kernels_so_a_kernels_change_stays_its_own():
    rng = np.random.default_rng(5)
    kernels = ["torch_matmul"] * 32 + ["splitk_decode"] * 16 + ["gemv"] * 36
    log_us = np.log(rng.uniform(7.0, 80.0, len(kernels)))
    devs = rng.normal(0.0, 0.004, len(kernels)) + 0.01  # tonight every case ran 1% slower ...
    devs[:32] += math.log(1.03)  # ... and torch_matmul 3% more
    exps, scales = [0.0] * len(kernels), [0.004] * len(kernels)
    own = tonight_offsets(devs, exps, log_us, kernels, scales, "affine", 6)
    every = tonight_offsets(devs, exps, log_us, kernels, scales, "affine", 6, exclude_own_kernel=False)
    planted, rest = devs[:32] - own[:32], devs[32:] - own[32:]
    assert np.mean(planted) == pytest.approx(math.log(1.03), abs=0.002)  # the plant kept whole
    assert np.mean(rest) == pytest.approx(0.0, abs=0.002)  # the suite's 1% out, nothing pushed the other way
    # One Huber fit over every case: part of the plant taken as the suite's, the rest pushed down by as much.
    assert np.mean(devs[:32] - every[:32]) < math.log(1.03) - 0.005 and np.mean(devs[32:] - every[32:]) < -0.002


def test_a_three_percent_change_to_a_whole_kernel_is_flagged_not_unchanged():
    rng = np.random.default_rng(11)
    families = (("torch_matmul", 32, 0.004), ("splitk_decode", 16, 0.004), ("gemv", 36, 0.004))
    nights = [_night(rng, families) for _ in range(4)]
    tonight = _night(rng, families, slow={"torch_matmul": 1.03})
    popts = PooledOptions(nights=4)
    out = judge(build_baseline([("decode", t) for t in nights], PROFILE, popts, "sm_90"), tonight, "decode",
                "sm_90", PROFILE, CompareOptions(), popts)
    planted = [c for c in out.cases if c.kernel == "torch_matmul"]
    assert sum(c.verdict != Verdict.UNCHANGED for c in planted) >= 0.9 * len(planted)
    assert not any(c.verdict == Verdict.REGRESSED for c in out.cases if c.kernel != "torch_matmul")


# A team's suite: four kernels of two or three cases each, whose nights agree within 0.3%.
TEAM = (("tiled", 3, 0.003), ("tuned", 3, 0.003), ("torch_matmul", 2, 0.003), ("library_mm", 2, 0.003))


def _team_nights(families, k, seeds, slow=None, suite_floor=0.95):
    """Each seed's cases, judged tonight against K stored nights of FAMILIES."""
    popts = PooledOptions(nights=k, prior=PriorOptions(suite_floor=suite_floor))
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        nights = [_night(rng, families) for _ in range(k)]
        tonight = _night(rng, families, slow=slow)
        b = build_baseline([("gemm", t) for t in nights], PROFILE, popts, "sm_90")
        out.append(judge(b, tonight, "gemm", "sm_90", PROFILE, CompareOptions(), popts).cases)
    return out


def test_a_quiet_small_suite_is_called_unchanged_on_its_second_stored_night():
    def whole(nights):
        return sum(all(c.verdict == Verdict.UNCHANGED for c in cases) for cases in nights)

    held = _team_nights(TEAM, 2, range(40), suite_floor=None)
    own = _team_nights(TEAM, 2, range(40))
    # Held to the H200 profile's 1.2%, two stored nights make intervals of about ±4.4%: no night is
    # called unchanged whole, every one goes to confirm.
    assert whole(held) == 0
    # The suite's own bound (four kernels, 4 degrees of freedom: ~2.4 x their 0.3%) calls most nights
    # unchanged whole (54 of 60 seeds when this was written), and no case regressed.
    assert whole(own) >= 0.75 * len(own)
    assert not any(c.verdict == Verdict.REGRESSED for cases in own for c in cases)


def test_the_suites_bound_still_flags_three_percent_on_one_kernel():
    for k in (2, 3):
        nights = _team_nights(TEAM, k, range(30), slow={"tiled": 1.03})
        planted = [c.verdict for cases in nights for c in cases if c.kernel == "tiled"]
        assert sum(v != Verdict.UNCHANGED for v in planted) >= 0.9 * len(planted), k
        others = [c.verdict for cases in nights for c in cases if c.kernel != "tiled"]
        assert Verdict.REGRESSED not in others


def test_a_noisy_kernel_in_the_suite_keeps_the_profiles_floor():
    # split-K cases that move 2% from one process to the next raise the suite's pool, and its bound, past
    # the profile's: nothing is lowered, and the quiet kernels are held as before.
    families = TEAM[:2] + (("splitk_decode", 3, 0.02),)
    rng = np.random.default_rng(4)
    popts = PooledOptions(nights=2)
    b = build_baseline([("gemm", _night(rng, families)) for _ in range(2)], PROFILE, popts, "sm_90")
    assert {p.source for p in b.priors.values()} == {"suite"}  # the suite's, lifted to ...
    profile_sd = PROFILE.floor_pct / 100 / (1.25 * 2.5758 * math.sqrt(2))
    assert all(math.sqrt(p.s0sq(20.0)) == pytest.approx(profile_sd, rel=1e-6) for p in b.priors.values())


def test_a_case_whose_nights_ran_two_configs_is_left_out_of_the_suites_bound():
    # Four quiet kernels, and one autotuned case whose nights launched two configs 4.5% apart (H200,
    # gemmlab_tuned 1024^3: 17.57 against 16.8 us): counted, it holds the whole suite to the profile.
    rng = np.random.default_rng(8)
    cases = {(kernel, f"{i}x1x1", "fp16"): CaseVariance(2, float(rng.uniform(0.5, 1.5)) * 0.003 ** 2, math.log(20.0))
             for kernel in ("tiled", "tuned", "torch_matmul", "library_mm") for i in range(2)}
    profile_var = (PROFILE.floor_pct / 100 / (1.25 * 2.5758 * math.sqrt(2))) ** 2
    race = CaseVariance(2, 0.045 ** 2 / 2, math.log(17.0), flipped=False)
    assert suite_bound({**cases, ("tuned", "1024x1024x1024", "fp16"): race}, 0.95) > profile_var
    bound = suite_bound({**cases, ("tuned", "1024x1024x1024", "fp16"): replace(race, flipped=True)}, 0.95)
    assert bound == pytest.approx(suite_bound(cases, 0.95)) and bound < profile_var / 2


def test_in_a_small_suite_a_kernels_change_is_measured_against_the_other_kernels_level():
    # Three kernels of three cases: each has six others at most, too few for the whole design, so
    # before, each took the suite's fit over every case, its own change included.
    rng = np.random.default_rng(12)
    kernels = ["splitk_decode"] * 3 + ["gemv"] * 3 + ["torch_matmul"] * 2
    devs = rng.normal(0.0, 0.003, len(kernels)) + 0.01  # tonight every case 1% slower ...
    devs[:3] += math.log(1.03)  # ... and split-K 3% more
    log_us, exps, scales = np.log(rng.uniform(8.0, 60.0, len(kernels))), [0.0] * len(kernels), [0.004] * len(kernels)
    offsets = tonight_offsets(devs, exps, log_us, kernels, scales, "affine", 6)
    assert np.mean(devs[:3] - offsets[:3]) == pytest.approx(math.log(1.03), abs=0.004)
    assert np.mean(devs[3:] - offsets[3:]) == pytest.approx(0.0, abs=0.004)
    # The others' level starts from the suite's mode: gemv's five others are three split-K cases 4% up and
    # two torch cases 1% up, and the split-K majority is not taken for tonight's level.
    assert np.mean(devs[3:6] - offsets[3:6]) == pytest.approx(0.0, abs=0.006)  # not 1.7%: the split-K mode
