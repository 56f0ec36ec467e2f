"""One estimate per interval: whatever the tables, compare and the pooled compare print each case's
estimate inside its own interval, and the table, markdown, JSON and CSV all show that same estimate."""
from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from perfci.compare import CompareOptions, compare
from perfci.compare.noise import profile_for_arch
from perfci.compare.pooled import PooledOptions, build_baseline, judge
from perfci.compare.render import _ci, _pct, render_csv, render_json, render_markdown, render_table
from perfci.model import ResultRow, ResultTable
from tests.properties.strategies import FEW

KERNELS = ("matmul_tiled", "splitk_decode[m_fast=1]", "torch_matmul", "gemv")
SHAPES = ((1, 1024, 6144), (16, 4096, 4096), (64, 6144, 768), (4096, 4096, 4096), (8192, 28672, 4096))


@st.composite
def suites(draw):
    """(seed, cases, repeats, clocks, arch, shift, spread): what a pair of runs is drawn from."""
    return (draw(st.integers(0, 2 ** 32 - 1)), draw(st.integers(1, 16)), draw(st.sampled_from((1, 2, 3, 7, 9))),
            draw(st.booleans()), draw(st.sampled_from(("sm_90", "gfx942", "gfx950", ""))),
            draw(st.floats(-0.3, 0.3)), draw(st.sampled_from((0.0, 1e-4, 0.01, 0.1))))


def _table(rng, keys, repeats, clocks, arch, level, spread, path, failing=()):
    rows = []
    for i, (kernel, (m, n, k)) in enumerate(keys):
        status = "fail" if i in failing else "ok"
        reps = tuple(float(x) for x in level[i] * np.exp(rng.normal(0.0, spread, repeats))) if status == "ok" else ()
        sclk = tuple(float(c) for c in rng.uniform(1600, 2100, len(reps))) if clocks else ()
        throttled = tuple(bool(t) for t in rng.random(len(reps)) < 0.3) if clocks else ()
        rows.append(ResultRow(kernel=kernel, shape=f"{m}x{n}x{k}", dtype="bf16", status=status, m=m, n=n, k=k,
                              median_us=float(np.median(reps)) if reps else None, repeats_us=reps, sclk_mhz=sclk,
                              throttled=throttled, arch=arch))
    return ResultTable(path, "perfci", tuple(rows))


def _keys(rng, n):
    picks = {(KERNELS[int(rng.integers(len(KERNELS)))], SHAPES[int(rng.integers(len(SHAPES)))]) for _ in range(n)}
    return sorted(picks)


_PCT = re.compile(r"[+-]\d+\.\d%")


def _pcts(text):
    return [float(x[:-1]) for x in _PCT.findall(text)]


def check_one_estimate(cmp):
    """Every case's estimate inside its interval, in the data and in every rendering of it."""
    judged = [c for c in cmp.cases if c.ratio is not None]
    for c in judged:
        assert c.ci_low is not None and c.ci_high is not None
        assert c.ci_low <= c.ratio <= c.ci_high, (c.kernel, c.shape, c.ci_low, c.ratio, c.ci_high)
    for c in cmp.cases:
        if c.ratio is None:
            assert c.ci_low is None and c.ci_high is None  # no interval without its estimate
    by_key = {c.key: c for c in cmp.cases}
    for row in json.loads(render_json(cmp))["cases"]:
        c = by_key[(row["kernel"], row["shape"], row["dtype"])]
        assert (row["ratio"], row["ci_low"], row["ci_high"], row["raw_ratio"]) == (
            c.ratio, c.ci_low, c.ci_high, c.raw_ratio)
        assert "adj_ratio" not in row
    for row in csv.DictReader(io.StringIO(render_csv(cmp))):
        c = by_key[(row["kernel"], row["shape"], row["dtype"])]
        assert row["ratio"] == ("" if c.ratio is None else str(c.ratio))
        assert row["raw_ratio"] == ("" if c.raw_ratio is None else str(c.raw_ratio))
    text = render_table(cmp)
    table = text[:text.index("\n\n")].splitlines()[3:]  # the rows, below the title, header and rule
    markdown = render_markdown(cmp, max_rows=1000).splitlines()
    for c in judged:
        mine = [line for line in table if f" {c.shape} " in line and f" {c.kernel} " in line]
        assert len(mine) == 1 and re.search(re.escape(_pct(c.ratio)) + r"\s+" + re.escape(_ci(c)), mine[0]), mine
        md = [line for line in markdown if f"| `{c.kernel}` | {c.shape} |" in line]
        assert len(md) == 1
        cols = [x.strip() for x in md[0].split(" | ")]
        raw, estimate, interval = cols[8], cols[9], cols[10]
        assert raw == _pct(c.raw_ratio) and estimate == _pct(c.ratio) and interval == _ci(c)
        if interval != "(point)":
            lo, hi = _pcts(interval)
            assert lo <= _pcts(estimate)[0] <= hi  # as printed, to the tenth of a percent


@FEW
@given(suites())
def test_compare_prints_each_estimate_inside_its_own_interval(suite):
    seed, n, repeats, clocks, arch, shift, spread = suite
    rng = np.random.default_rng(seed)
    keys = _keys(rng, n)
    level = np.exp(rng.uniform(math.log(5.0), math.log(3000.0), len(keys)))
    moved = level * np.exp(shift + rng.normal(0.0, 0.05, len(keys)))
    failing = {int(i) for i in rng.integers(0, len(keys), 1)} if rng.random() < 0.3 else set()
    base = _table(rng, keys, repeats, clocks, arch, level, spread, "base.csv")
    cur = _table(rng, keys, repeats, clocks, arch, moved, spread, "cur.csv", failing)
    check_one_estimate(compare(base, cur, None, CompareOptions()))


@FEW
@given(suites(), st.integers(1, 5))
def test_the_pooled_compare_prints_each_estimate_inside_its_own_interval(suite, k):
    seed, n, repeats, _, _, shift, spread = suite
    rng = np.random.default_rng(seed)
    keys = _keys(rng, n)
    level = np.exp(rng.uniform(math.log(5.0), math.log(3000.0), len(keys)))
    nights = [("decode", _table(rng, keys, repeats, False, "sm_90", level * np.exp(rng.normal(0, 0.01, len(keys))),
                                spread, f"n{i}.csv")) for i in range(k)]
    tonight = _table(rng, keys, repeats, False, "sm_90", level * np.exp(shift + rng.normal(0, 0.05, len(keys))),
                     spread, "cur.csv")
    profile = profile_for_arch("sm_90")
    baseline = build_baseline(nights, profile, PooledOptions(nights=k), "sm_90")
    check_one_estimate(judge(baseline, tonight, "decode", "sm_90", profile, CompareOptions(), PooledOptions(nights=k)))
