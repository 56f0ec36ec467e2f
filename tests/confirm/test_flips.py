"""A confirm session whose two sides launched different configs of one kernel source: config-flip."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from perfci.confirm import render
from perfci.confirm.analysis import analyze
from perfci.confirm.flips import with_config_flips
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
