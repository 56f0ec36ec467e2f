"""pytest-benchmark JSON and noise profiles: bytes or near-misses in, a valid value or one PerfciError out."""
from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from perfci.compare.calibration import MAX_FLOOR_PCT
from perfci.compare.inputs import read_any, read_profile
from perfci.compare.noise import BUILTIN_PROFILES, profile_to_json
from perfci.errors import PerfciError
from perfci.results import TIME_RANGE_US
from tests.properties.strategies import FAST, on_disk

# JSON values: every kind, with the numbers that broke readers (huge integers, tiny floats).
SCALARS = st.one_of(st.none(), st.booleans(), st.text(max_size=8),
                    st.integers(min_value=-(10 ** 400), max_value=10 ** 400),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([1e-320, 1e300, 0, -1, 1e-6, 2.5e-5]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def refused_in_one_line(call):
    try:
        return call()
    except PerfciError as err:
        assert "\n" not in str(err) and str(err)
        return None


def check_table(table):
    if table is None:
        return
    for row in table.rows:
        assert TIME_RANGE_US[0] <= row.median_us <= TIME_RANGE_US[1]
        assert all(TIME_RANGE_US[0] <= r <= TIME_RANGE_US[1] for r in row.repeats_us)
        assert all(math.isfinite(float(d)) for d in (row.m, row.n, row.k) if d is not None)


@FAST
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_as_pytest_benchmark(data):
    check_table(refused_in_one_line(lambda: read_any(on_disk(data, "pb.json"))))


@FAST
@given(st.binary(max_size=500))
def test_arbitrary_bytes_after_a_brace_are_json_whatever_the_name(data):
    check_table(refused_in_one_line(lambda: read_any(on_disk(b"{" + data, "pb.txt"))))


@st.composite
def benchmark_documents(draw):
    """pytest-benchmark's shape, each level possibly replaced by any JSON value."""
    def maybe(value):
        return draw(VALUES) if draw(st.integers(0, 9)) == 9 else value

    seconds = st.one_of(st.floats(1e-10, 1e4), SCALARS)
    stats = maybe({"data": maybe(draw(st.lists(seconds, max_size=5))), "median": maybe(draw(seconds))}
                  if draw(st.booleans()) else {"median": maybe(draw(seconds))})
    bench = maybe({"name": maybe(draw(st.text(min_size=1, max_size=10))), "stats": stats,
                   "params": maybe(draw(st.dictionaries(st.sampled_from(["m", "n", "k", "dtype", "x"]), SCALARS,
                                                        max_size=4)))})
    return maybe({"benchmarks": maybe(draw(st.lists(st.just(bench), min_size=1, max_size=3)))})


@FAST
@given(benchmark_documents())
def test_pytest_benchmark_near_misses(doc):
    check_table(refused_in_one_line(lambda: read_any(on_disk(json.dumps(doc), "pb.json"))))


@FAST
@given(st.binary(max_size=1000))
def test_arbitrary_bytes_as_a_noise_profile(data):
    refused_in_one_line(lambda: read_profile(on_disk(data, "profile.json")))


FIELDS = list(json.loads(profile_to_json(BUILTIN_PROFILES["sm_90"])))


@FAST
@given(st.dictionaries(st.sampled_from(FIELDS + ["other"]), VALUES, max_size=4), st.booleans())
def test_noise_profile_near_misses(changes, drop):
    doc = {**json.loads(profile_to_json(BUILTIN_PROFILES["sm_90"])), **changes}
    if drop and changes:
        doc.pop(next(iter(changes)), None)
    profile = refused_in_one_line(lambda: read_profile(on_disk(json.dumps(doc), "profile.json")))
    if profile is not None:
        for floor in (profile.floor_pct, profile.unclocked_floor_pct, profile.band_floor_pct,
                      profile.unclocked_band_floor_pct, profile.suite_floor_pct):
            assert 0 <= floor <= MAX_FLOOR_PCT
        assert 0 <= profile.clock_swing_pct < 100 and math.isfinite(profile.floor_us)
