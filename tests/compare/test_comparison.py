"""What compare returns: the summary of a judged suite, and the gate it implies."""
import math
from dataclasses import replace

import pytest

from perfci.compare.comparison import VERDICTS, CaseComparison, summarize


def _case(kernel, verdict, base_us=None, cur_us=None, weight=1.0, ratio=None):
    raw = cur_us / base_us if base_us and cur_us else None
    return CaseComparison(kernel=kernel, shape="64x64x64", dtype="bf16", verdict=verdict, base_us=base_us,
                          cur_us=cur_us, raw_ratio=raw, ratio=ratio, weight=weight)


def test_summary_counts_every_verdict_and_names_the_worst_in_order():
    cases = [_case("a", "broken", base_us=10.0), _case("b", "regressed", 10.0, 20.0, ratio=2.0),
             _case("c", "unchanged", 10.0, 10.0, ratio=1.0), _case("d", "added", cur_us=5.0)]
    s = summarize(cases)
    assert s.counts == {**{v: 0 for v in VERDICTS}, "broken": 1, "regressed": 1, "unchanged": 1, "added": 1}
    assert s.worst == (("a", "64x64x64", "bf16"), ("b", "64x64x64", "bf16"))
    assert s.n_compared == 2  # only cases timed on both sides
    assert s.geomean_raw_ratio == pytest.approx(math.sqrt(2.0)) and s.geomean_ratio == pytest.approx(math.sqrt(2.0))


def test_weighted_speedup_is_the_speedup_of_the_weighted_total_time():
    # A big case twice as fast outweighs a small one twice as slow: 1000+10 us -> 500+20 us.
    big, small = _case("big", "improved", 1000.0, 500.0), _case("small", "regressed", 10.0, 20.0)
    assert summarize([big, small]).weighted_speedup == pytest.approx(1010.0 / 520.0)
    # Weights scale each case's share: the small one counted 100 times now dominates.
    assert summarize([big, replace(small, weight=100.0)]).weighted_speedup == pytest.approx(2000.0 / 2500.0)


def test_summary_of_untimed_cases_has_no_ratios():
    s = summarize([_case("a", "removed", base_us=10.0)])
    assert (s.n_compared, s.geomean_raw_ratio, s.geomean_ratio, s.weighted_speedup) == (0, None, None, None)
