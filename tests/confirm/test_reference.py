"""``--reference EXPR``: the cases a user declares untouched, matched as ``perfci run --filter`` matches them."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from perfci.benchcmd import BenchSpec
from perfci.benchmetric import MetricSpec
from perfci.confirm.reference import reference_keys
from perfci.confirm.session import ConfirmConfig, Rounds, decider
from perfci.errors import PerfciError
from perfci.model import CaseSpec

KEYS = [("matmul_tiled", "4096x4096x4096", "bf16"), ("torch_matmul", "4096x4096x4096", "bf16"),
        ("splitk_decode[m_fast=1]", "16x1024x6144", "bf16"), ("torch_matmul", "16x1024x6144", "bf16")]


def test_an_expression_matches_keys_by_kernel_shape_dims_and_dtype():
    assert reference_keys("kernel=torch_matmul", KEYS) == (KEYS[1], KEYS[3])
    assert reference_keys("M>=4096", KEYS) == tuple(KEYS[:2])
    assert reference_keys("kernel~splitk*", KEYS) == (KEYS[2],)
    assert reference_keys("*m_fast=1*", KEYS) == (KEYS[2],)
    # With --suite the cases are known as declared: their group matches too.
    specs = {KEYS[3]: CaseSpec("torch_matmul", 16, 1024, 6144, "bf16", group="qkv")}
    assert reference_keys("group=qkv", KEYS, specs) == (KEYS[3],)


@pytest.mark.parametrize("expr, message", [
    ("kernel=cublas", "matches none of the 4 measured case(s)"),
    ("M=x", "--reference 'M=x'"),
    ("group=qkv", "matches none"),  # a bench's results CSV carries no group
])
def test_an_expression_that_matches_nothing_or_does_not_parse_is_one_line(expr, message):
    with pytest.raises(PerfciError) as err:
        reference_keys(expr, KEYS)
    assert message in str(err.value) and "\n" not in str(err.value)


def _rounds(rng, planted, run_sd=0.02, n=8) -> Rounds:
    """Rounds as the session records them: per round four runs of {case: value}."""
    out = Rounds()
    for _ in range(n):
        drift = rng.normal(0, run_sd, 4)
        runs = []
        for j, side in enumerate(("base", "cur", "cur", "base")):
            values = {k: math.exp(3.0 + drift[j] + rng.normal(0, 0.002) + (planted.get(k, 0.0) if side == "cur" else 0))
                      for k in KEYS}
            runs.append((side, values))
        out.runs.append(runs)
    return out


def test_the_session_s_decider_takes_the_run_drift_from_the_reference_only():
    # Two Triton kernels 3% slower, the two torch_matmul cases untouched, 2% run drift.
    rng = np.random.default_rng(41)
    rounds = _rounds(rng, {KEYS[0]: math.log(1.03), KEYS[2]: math.log(1.03)})
    bench = BenchSpec(("true",), None, MetricSpec(), None)
    base = ConfirmConfig(Path("."), "a", "b", bench, results_path="r.csv", min_rounds=8)
    judged, stop, why = decider(ConfirmConfig(**{**base.__dict__, "reference": "kernel=torch_matmul"}))(
        rounds, False, 100)
    assert judged.reference_used and judged.reference == (KEYS[1], KEYS[3])
    assert [judged.case(k).verdict for k in (KEYS[0], KEYS[2])] == ["regressed", "regressed"]
    # Relative to each other the untouched cases sit within +-0.5%, but under 2% run drift their own
    # raw intervals reach past +-1%: not unchanged yet, and the session goes on.
    for k in (KEYS[1], KEYS[3]):
        assert judged.case(k).verdict == "inconclusive" and "raw paired interval" in judged.case(k).reason
    assert not stop and why == "2 undecided; next look at 12"
    alone, _, _ = decider(base)(rounds, False, 100)
    assert not alone.reference_used and alone.suite.verdict == "n/a"
    wide = alone.case(KEYS[0])
    narrow = judged.case(KEYS[0])
    assert narrow.ci_high / narrow.ci_low < wide.ci_high / wide.ci_low


def test_the_decider_plans_its_looks_at_the_first_one_from_the_budget_left():
    # 100 more rounds affordable at round 8: the looks end at 108 and every later call keeps that plan.
    rng = np.random.default_rng(42)
    rounds = _rounds(rng, {}, run_sd=0.0, n=8)
    bench = BenchSpec(("true",), None, MetricSpec(), None)
    decide = decider(ConfirmConfig(Path("."), "a", "b", bench, results_path="r.csv", min_rounds=8))
    first, _, why = decide(rounds, False, 100)
    assert first.alpha == pytest.approx(0.05 / sum(1 / k for k in range(1, 9)))  # 8 looks: 8, 12, .. 93, 108
    more = _rounds(rng, {}, run_sd=0.0, n=4)
    rounds.runs.extend(more.runs)  # round 12, with (say) 10,000 rounds now affordable: the plan holds
    second, _, _ = decide(rounds, False, 10_000)
    assert second.alpha == pytest.approx(first.alpha / 2)
