"""The one vocabulary and the one rule: perfci.verdict."""
import csv
import io
import json
import math
from dataclasses import asdict, dataclass

import pytest

from perfci.verdict import (confidence_text, CASE_VERDICTS, DECIDED, DISTURBED, SEVERITY, TESTED, Decision, DisturbedRule, Reasons,
                            SuiteShift, Verdict, decide, missing, no_common_case, status_verdict, worst_first)

F = math.log(1.05)  # a 5% floor


def test_a_verdict_is_its_plain_string_everywhere_it_is_written():
    v = Verdict.REGRESSED
    assert v == "regressed" and {"regressed": 1}[v] == 1 and {v: 1}["regressed"] == 1
    assert (str(v), f"{v}", f"{v:>10}", "%s" % v) == ("regressed", "regressed", " regressed", "regressed")
    assert json.dumps({v: [v, Verdict.NOT_JUDGED]}) == '{"regressed": ["regressed", "n/a"]}'
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([v])
    assert buf.getvalue() == "regressed\n"
    assert Verdict("unchanged") is Verdict.UNCHANGED


def test_case_verdicts_run_worst_first_and_the_suite_only_word_is_not_one_of_them():
    assert [str(v) for v in CASE_VERDICTS] == ["broken", "regressed", "inconclusive", "config-flip", "improved",
                                               "unchanged", "fixed", "skipped", "added", "removed"]
    assert Verdict.NOT_JUDGED not in SEVERITY
    assert set(TESTED) == set(DECIDED) | {Verdict.INCONCLUSIVE}
    rows = [("unchanged", 1.0, ("b",)), ("regressed", 1.02, ("a",)), ("regressed", 1.3, ("z",)),
            ("broken", None, ("c",)), ("regressed", 1.3, ("y",))]
    order = sorted(rows, key=lambda r: worst_first(*r))
    assert [r[2][0] for r in order] == ["c", "y", "z", "a", "b"]


@pytest.mark.parametrize("low, high, q, verdict, reason", [
    (0.06, 0.09, 0.01, "regressed", "significant, interval above the floor"),
    (-0.09, -0.06, 0.01, "improved", "significant, interval below the floor"),
    (-0.02, 0.03, 0.01, "unchanged", "interval inside the floor"),
    (-0.02, 0.03, 0.9, "unchanged", "interval inside the floor"),
    (0.02, 0.09, 0.01, "inconclusive", "significant, but the interval straddles the floor"),
    (0.06, 0.09, 0.2, "inconclusive", "not significant, interval reaches past the floor"),
    (0.06, 0.09, None, "inconclusive", "not significant, interval reaches past the floor"),
])
def test_decide_maps_an_interval_a_floor_and_a_q_value_to_a_verdict_and_its_reason(low, high, q, verdict, reason):
    d = decide(low, high, floor=F, q=q, alpha=0.05)
    assert (d.verdict, d.reason) == (verdict, reason)
    assert isinstance(d.verdict, Verdict) and d.significant == (q is not None and q <= 0.05)


def test_the_floor_is_strict_and_q_at_alpha_is_significant():
    assert decide(F, 0.2, floor=F, q=0.05, alpha=0.05).verdict == "inconclusive"  # low == floor: not above
    assert decide(math.nextafter(F, 1), 0.2, floor=F, q=0.05, alpha=0.05).verdict == "regressed"
    assert decide(-F, F, floor=F, q=0.5, alpha=0.05).verdict == "inconclusive"  # touching the floor: not inside


def test_a_margin_wider_than_the_floor_is_the_pooled_rule():
    small, wide = math.log(1.01), math.log(1.054)
    # Significant beyond 1%: regressed, though a one-run compare could not have seen it.
    assert decide(0.02, 0.04, floor=small, margin=wide, q=0.01, alpha=0.05).verdict == "regressed"
    # Not significant, but inside the profile floor: unchanged with the margin, not with the floor alone.
    assert decide(0.02, 0.04, floor=small, margin=wide, q=0.3, alpha=0.05).verdict == "unchanged"
    assert decide(0.02, 0.04, floor=small, q=0.3, alpha=0.05).verdict == "inconclusive"


def test_reasons_are_worded_by_the_caller():
    words = Reasons(regressed="R", improved="I", unchanged="U", straddles="S", not_significant="N")
    got = [decide(lo, hi, floor=F, q=q, alpha=0.05, reasons=words).reason
           for lo, hi, q in ((0.1, 0.2, 0.0), (-0.2, -0.1, 0.0), (0.0, 0.01, 0.0), (0.0, 0.2, 0.0), (0.0, 0.2, 1.0))]
    assert got == ["R", "I", "U", "S", "N"]
    assert decide(0.1, 0.2, floor=F, q=0.0, alpha=0.05) == Decision(Verdict.REGRESSED, Reasons().regressed, True)


def test_status_verdicts():
    assert status_verdict("ok", "fail") == "broken" and status_verdict("ok", "timeout") == "broken"
    assert status_verdict("error", "ok") == "fixed"
    assert status_verdict("ok", "skipped") == "skipped" and status_verdict("skipped", "ok") == "skipped"
    assert status_verdict("fail", "error") == "skipped"


def test_the_disturbed_rule_needs_both_the_absolute_and_the_relative_spread():
    assert DISTURBED == DisturbedRule(5.0, 3.0)
    assert DISTURBED.scattered(0.06, 0.01) and not DISTURBED.scattered(0.06, 0.03)  # 2x the usual: not enough
    assert not DISTURBED.scattered(0.04, 0.001)  # 4% is within what a calm run does
    assert DISTURBED.side(0.01, 0.08) == "cur" and DISTURBED.side(0.08, 0.01) == "base"
    assert DISTURBED.side(0.08, 0.07) is None
    assert DisturbedRule(None).side(0.01, 0.9) is None


@dataclass
class _Case:
    key: tuple
    verdict: str
    base_status: str = "ok"


def test_missing_counts_removed_and_by_rule_skipped_cases():
    cases = [_Case(("a",), Verdict.REMOVED), _Case(("b",), Verdict.SKIPPED), _Case(("c",), Verdict.BROKEN),
             _Case(("d",), Verdict.SKIPPED, "fail"), _Case(("e",), Verdict.REMOVED, "skipped"),
             _Case(("f",), Verdict.UNCHANGED)]
    assert missing(cases, count_skipped=True, require_base_ok=True) == [("a",), ("b",)]  # compare, the plugin
    assert missing(cases, count_skipped=False, require_base_ok=False) == [("a",), ("e",)]  # the nightly

    @dataclass
    class Bare:  # the nightly's cases carry no base status
        key: tuple
        verdict: str

    assert missing([Bare(("x",), "removed")], count_skipped=False, require_base_ok=False) == [("x",)]


def test_no_common_case_is_a_pair_with_only_one_sided_cases():
    one_sided = [_Case(("a",), Verdict.ADDED), _Case(("b",), Verdict.REMOVED)]
    assert no_common_case(one_sided)
    assert no_common_case([])  # nothing at all to compare is no case in common either
    assert not no_common_case([*one_sided, _Case(("c",), Verdict.UNCHANGED)])
    assert not no_common_case([_Case(("d",), Verdict.BROKEN)])  # measured on both sides, if badly
    assert no_common_case([_Case(("e",), "removed")])  # as read back from a JSON report


def test_one_suite_shift_shows_each_command_its_own_fields():
    s = SuiteShift(Verdict.NOT_JUDGED, "common mode off", n_cases=3)
    assert s.to_dict(("verdict", "reason", "n_cases")) == {"verdict": "n/a", "reason": "common mode off", "n_cases": 3}
    assert list(SuiteShift(Verdict.UNCHANGED, memory_pct=1.0, method="split").to_dict(("method", "memory_pct"))) == [
        "method", "memory_pct"]
    assert json.loads(json.dumps(asdict(s)))["verdict"] == "n/a"


def test_a_sequential_looks_level_never_reads_as_100_percent():
    # a look at alpha/(k(k+1)) has a level like 0.99997: ".4g" printed it as "1" / "100%"
    assert confidence_text(0.95) == "95%"
    assert confidence_text(0.9946) == "99.46%"
    assert confidence_text(0.9999673) == "99.997%"
    assert confidence_text(1.0) == "100%"
