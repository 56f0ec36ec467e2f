"""A confirm session whose two sides launched different configs of one kernel source: config-flip."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from perfci.confirm import render
from perfci.confirm.analysis import analyze
from perfci.confirm.flips import with_config_flips
from perfci.confirm.stopping import StoppingRule, keep_decided, look, pending
from perfci.results import read_results
from perfci.verdict import Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
FLIP = ("lib.int8:w8a16", "64x4096x4096", "bf16")  # the autotuner chose another config at CUR, same source
CHANGED = ("matmul_tiled", "256x4096x4096", "bf16")


def session():
    """FLIP twice as slow at CUR, CHANGED 10% slower, over 6 interleaved rounds."""
    jitter = (1.0, 1.01, 0.99, 1.005, 0.995, 1.002)
    cases = {FLIP: [((28.3 * j, 28.3 * j), (57.2 * j, 57.2 * j)) for j in jitter],
             CHANGED: [((61.4 * j, 61.4 * j), (67.5 * j, 67.5 * j)) for j in jitter]}
    return analyze(cases, 1.0, 0.05, 0.95)


def rows(cur: str) -> dict:
    return {"base": read_results(DATA / "flip_base.csv").by_key(), "cur": read_results(DATA / cur).by_key()}


def test_a_case_whose_sides_ran_two_configs_of_one_source_is_a_flip_not_a_regression():
    conf = session()
    assert {c.key: c.verdict for c in conf.cases} == {FLIP: Verdict.REGRESSED, CHANGED: Verdict.REGRESSED}
    flipped = with_config_flips(conf, rows("flip_cur.csv"))
    verdicts = {c.key: c.verdict for c in flipped.cases}
    assert verdicts[FLIP] == Verdict.CONFIG_FLIP
    reason = next(c.reason for c in flipped.cases if c.key == FLIP)
    assert "kernel source unchanged" in reason and "BLOCK_SIZE_N" in reason
    assert flipped.counts[Verdict.CONFIG_FLIP] == 1
    # the other case's config did not move: still judged on its times
    assert verdicts[CHANGED] == conf.cases[[c.key for c in conf.cases].index(CHANGED)].verdict
    report = json.loads(render.render_json(flipped, SimpleNamespace(rows={}, bench_runs=24, seconds=60.0),
                                           (SimpleNamespace(ref="base", sha="a" * 40),
                                            SimpleNamespace(ref="cur", sha="b" * 40)), None))
    assert {tuple(c[k] for k in ("kernel", "shape", "dtype")): c["verdict"] for c in report["cases"]}[FLIP] \
        == "config-flip"


def test_a_config_that_moved_with_its_source_is_judged_on_its_times():
    conf = session()
    same = with_config_flips(conf, rows("flip_source_changed_cur.csv"))
    assert [c.verdict for c in same.cases] == [c.verdict for c in conf.cases]
    assert with_config_flips(conf, {}) is conf  # no rows (a bench command's session): nothing to say


def test_a_flip_is_settled_at_the_first_look_and_not_measured_again():
    # FLIP close at both sides (an autotuner's near tie), CHANGED 10% slower: without the sides' rows the
    # near tie is undecided at the first look and would be measured on; with them it is a flip, settled.
    jitter = (1.0, 1.012, 0.988, 1.006, 0.994)
    moves = (1.015, 0.995, 1.012, 0.992, 1.009)  # CUR's choice against BASE's, round by round: within ±1.5%
    cases = {FLIP: [((28.3 * j, 28.3 * j), (28.3 * j * m, 28.3 * j * m)) for j, m in zip(jitter, moves)],
             CHANGED: [((61.4 * j, 61.4 * j), (67.5 * j, 67.5 * j)) for j in jitter]}
    rule = StoppingRule(min_rounds=5)
    blind = look(cases, rule)
    assert not blind.stop and pending(blind.confirmation) == frozenset({FLIP})
    seen = look(cases, rule, first_rows=rows("flip_cur.csv"))
    verdicts = {c.key: c.verdict for c in seen.confirmation.cases}
    assert verdicts == {FLIP: Verdict.CONFIG_FLIP, CHANGED: Verdict.REGRESSED}
    assert seen.stop and seen.reason == "every case decided" and pending(seen.confirmation) == frozenset()
    # A config that moved with its source is no flip: still open, still measured.
    moved = look(cases, rule, first_rows=rows("flip_source_changed_cur.csv"))
    assert not moved.stop and pending(moved.confirmation) == frozenset({FLIP})


def test_a_later_look_keeps_an_earlier_flip_and_its_count():
    # Two looks: the flip settled at the first is kept as it was, and still counted, at the second
    # (the headline and the JSON summary read the counts).
    conf = with_config_flips(session(), rows("flip_cur.csv"))
    assert conf.counts[Verdict.CONFIG_FLIP] == 1
    later = keep_decided(session(), conf)
    assert {c.key: c.verdict for c in later.cases}[FLIP] == Verdict.CONFIG_FLIP
    assert later.counts[Verdict.CONFIG_FLIP] == 1 and later.counts[Verdict.REGRESSED] == 1
