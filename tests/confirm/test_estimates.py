"""One estimate per interval: whatever the rounds, no estimate confirm prints lies outside its own interval.

A property test over :func:`perfci.confirm.analysis.analyze` (random rounds,
missing runs, a reference or none, either method and orientation) and the four
renderers, which must show the numbers of the Confirmation they were given.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from types import SimpleNamespace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfci.confirm.analysis import analyze
from perfci.confirm.render import render_csv, render_json, render_markdown, render_table

SIDES = (SimpleNamespace(ref="base", sha="a" * 40), SimpleNamespace(ref="cur", sha="b" * 40))
ROUNDS = SimpleNamespace(rows={}, bench_runs=0, seconds=0.0)
PCT = r"([+-][0-9]+\.[0-9]{2})%"


@st.composite
def sessions(draw):
    """Case key -> rounds: per case a level and a change, per run a shared drift, holes, outliers."""
    n_cases = draw(st.integers(1, 7))
    n_rounds = draw(st.integers(3, 14))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    drift = rng.normal(0, draw(st.sampled_from([0.0, 0.005, 0.03])), 4 * n_rounds)
    changes = rng.choice([0.0, 0.01, -0.02, 0.05, 0.3], n_cases)
    hole = draw(st.sampled_from([0.0, 0.1, 0.3]))
    cur = np.tile([False, True, True, False], n_rounds)
    cases = {}
    for c in range(n_cases):
        logs = rng.normal(3.0, 1.0) + drift + rng.normal(0, draw(st.sampled_from([0.0, 0.001, 0.02])), 4 * n_rounds)
        logs = logs + cur * changes[c] + (rng.random(4 * n_rounds) < 0.05) * 0.3
        v = [None if rng.random() < hole else float(x) for x in np.exp(logs)]
        cases[(f"k{c}", f"{c + 1}x8x8", "bf16")] = [((v[4 * r], v[4 * r + 3]), (v[4 * r + 1], v[4 * r + 2]))
                                                   for r in range(n_rounds)]
    refs = draw(st.sampled_from(["none", "some", "all"]))
    keys = list(cases)
    reference = None if refs == "none" else keys if refs == "all" else keys[len(keys) // 2:]
    return cases, reference


def within(value, low, high) -> bool:
    return value is None or low is None or low <= value <= high


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.sampled_from(["t", "wilcoxon"]), st.booleans(), st.sampled_from([0.95, 0.99]))
def test_no_estimate_lies_outside_its_interval_in_the_analysis_or_any_render(session, method, hib, confidence):
    cases, reference = session
    conf = analyze(cases, 1.0, 0.05, confidence, method=method, higher_is_better=hib, reference=reference)
    for c in conf.cases:
        assert within(c.ratio, c.ci_low, c.ci_high), c
        assert within(c.raw_ratio, c.raw_ci_low, c.raw_ci_high), c
        if not c.common_mode:  # no reference taken out: the judged and the raw estimate are one
            assert (c.ratio, c.ci_low, c.ci_high) == (c.raw_ratio, c.raw_ci_low, c.raw_ci_high) or c.ratio is None
    s = conf.suite
    assert within(s.ratio, s.ci_low, s.ci_high), s

    data = json.loads(render_json(conf, ROUNDS, SIDES, None))
    for c, d in zip(conf.cases, data["cases"]):
        for field in ("ratio", "ci_low", "ci_high", "raw_ratio", "raw_ci_low", "raw_ci_high"):
            assert d[field] == getattr(c, field)
        assert d["relative_to_reference"] == c.common_mode
    assert data["summary"]["suite"]["ratio"] == s.ratio and data["summary"]["reference"]["used"] == conf.reference_used

    for c, row in zip(conf.cases, csv.DictReader(io.StringIO(render_csv(conf, ROUNDS, SIDES, None)))):
        for field in ("ratio", "ci_low", "ci_high", "raw_ratio", "raw_ci_low", "raw_ci_high"):
            value = getattr(c, field)
            assert row[field] == ("" if value is None else str(value))

    table = render_table(conf, ROUNDS, SIDES, None).splitlines()
    markdown = render_markdown(conf, ROUNDS, SIDES, None).splitlines()
    for c in conf.cases:
        name = " ".join(c.key)
        line = next(x for x in table if f" {name} " in x)
        md = next(x for x in markdown if f"`{name}`" in x)
        shown = [float(x) for x in re.findall(PCT, line)]
        shown_md = [float(x) for x in re.findall(PCT, md)]
        if c.ratio is None:
            continue
        est, lo, hi = shown[:3]  # cur/base, then its interval; raw cur/base after, labelled apart
        assert lo <= est <= hi and shown_md[:3] == [est, lo, hi]
        assert est == round(100 * (c.ratio - 1), 2) or math.isclose(est, 100 * (c.ratio - 1), abs_tol=0.006)
        if conf.reference_used:
            assert "raw cur/base" in table[1] and len(shown) == 4
