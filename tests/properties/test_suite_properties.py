"""Suite TOML, --shard and --cases: arbitrary input in, a valid value or one PerfciError out."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfci.errors import PerfciError
from perfci.suites import (ENTRY_KEYS, SUITE_KEYS, load_case_keys, load_suite, parse_shard, parse_suite,
                                   shard_cases)
from perfci.model import DTYPES
from perfci.results import MAX_DIM
from tests.properties.strategies import FAST, on_disk


def refused_in_one_line(call):
    try:
        return call()
    except PerfciError as err:
        assert "\n" not in str(err) and str(err)
        return None


def check_suite(suite):
    if suite is None:
        return
    assert suite.cases and len({c.key for c in suite.cases}) == len(suite.cases)
    for case in suite.cases:
        assert all(1 <= d <= MAX_DIM for d in (case.m, case.n, case.k)) and case.dtype in DTYPES
        assert 0 < case.weight < float("inf") and isinstance(case.group, str)


@FAST
@given(st.binary(max_size=1500))
def test_arbitrary_bytes_as_a_suite(data):
    check_suite(refused_in_one_line(lambda: load_suite(on_disk(data, "suite.toml"))))


# TOML values: what tomllib can hand parse_suite (no None; floats may be nan/inf; ints of any size).
TOML_SCALARS = st.one_of(st.booleans(), st.text(max_size=8), st.integers(-(10 ** 30), 10 ** 30),
                         st.floats(), st.sampled_from(["gemv", "torch_matmul", "splitk_decode", "bf16", "fp32",
                                                       "fp8", "cuda", "cpu", 1, 4, 16, 64, 1024]))
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


@st.composite
def suite_documents(draw):
    """A suite's shape with real keys, each value possibly anything TOML can hold."""
    def field(good):
        return draw(TOML_VALUES) if draw(st.integers(0, 5)) == 5 else draw(good)

    entry = {"kernel": field(st.sampled_from(["gemv", "torch_matmul", "splitk_decode", "nope"])),
             "M": field(st.sampled_from([1, 4, [1, 16], 10 ** 20, 0])), "N": field(st.sampled_from([64, 1024])),
             "K": field(st.sampled_from([64, 6144])), "dtype": field(st.sampled_from(["fp32", "bf16", "int3"])),
             "weight": field(st.sampled_from([1, 0.5, float("nan"), float("inf"), -1])),
             "variants": field(st.sampled_from([[{"m_fast": 0}, {"m_fast": 1}], [{}], [{"m_fast": True}]])),
             "group": field(st.text(max_size=5))}
    entry = {k: v for k, v in entry.items() if draw(st.integers(0, 7)) or k in ("kernel", "M", "N", "K")}
    extra = draw(st.dictionaries(st.sampled_from(sorted(ENTRY_KEYS) + ["colour"]), TOML_VALUES, max_size=2))
    doc = {"name": field(st.just("s")), "devices": field(st.just(["cpu", "cuda"])),
           "cases": field(st.lists(st.just({**entry, **extra}), min_size=1, max_size=2))}
    doc.update(draw(st.dictionaries(st.sampled_from(sorted(SUITE_KEYS) + ["bogus"]), TOML_VALUES, max_size=1)))
    return doc


@FAST
@given(suite_documents())
def test_suite_near_misses_against_the_real_backends(doc):
    check_suite(refused_in_one_line(lambda: parse_suite(doc, "s.toml")))


@FAST
@given(st.text(max_size=30))
def test_any_shard_text(text):
    parsed = refused_in_one_line(lambda: parse_shard(text))
    if parsed is not None:
        index, count = parsed
        assert 1 <= index <= count


CASES = load_suite("decode").cases


@pytest.mark.slow  # 200 examples, each sharding a whole selection
@FAST
@given(st.integers(1, len(CASES)), st.randoms(use_true_random=False))
def test_shards_partition_any_selection_in_any_order(count, rng):
    chosen = [c for c in CASES if rng.random() < 0.7] or list(CASES[:1])
    count = min(count, len(chosen))
    shuffled = list(chosen)
    rng.shuffle(shuffled)
    shards = [shard_cases(chosen, (i, count)) for i in range(1, count + 1)]
    assert sorted(c.key for s in shards for c in s) == sorted(c.key for c in chosen)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    # the partition is a function of the set of cases, not of their order
    assert [{c.key for c in shard_cases(shuffled, (i, count))} for i in range(1, count + 1)] == \
        [{c.key for c in s} for s in shards]


@FAST
@given(st.binary(max_size=800))
def test_arbitrary_bytes_as_a_case_list(data):
    keys = refused_in_one_line(lambda: load_case_keys(on_disk(data, "cases.txt")))
    assert keys is None or all(len(k) == 3 and all(isinstance(p, str) and p for p in k) for k in keys)
