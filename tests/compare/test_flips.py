"""A config flip: the launched config changed while the kernel's source did not (perfci/compare/flips.py).

Golden runs of a team's suite on an H200 (tests/data/compare/flip_*.csv), where the
autotuner's choice stands recorded in the ``launch`` and ``source`` columns: a
library's int8 GEMM picked BLOCK_SIZE_N 32 / BLOCK_SIZE_K 256 / 4 warps in base's
process and 128 / 128 / 8 in cur's (57.2 vs 28.3 us at M=64, 17.6 vs 25.4 us at
M=16, as seen on the H200). ``flip_cur.csv`` has the same kernel source as base;
``flip_source_changed_cur.csv`` the same times and configs with the source changed.
The kernels' sources are marked ``autotuned``, as perfci run records a kernel an autotuner launched.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from perfci.compare.explain import with_explain
from perfci.compare.flips import PIN, find_flip, ran_two_configs
from perfci.compare.noise import profile_for_arch
from perfci.compare.pooled import PooledOptions, build_baseline
from perfci.compare.render import render_markdown
from perfci.compare.verdicts import compare
from perfci.model import KernelRecord
from perfci.results import read_results
from perfci.verdict import Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
ROOT = Path(__file__).resolve().parents[2]
INT8_64 = ("lib.int8:w8a16", "64x4096x4096", "bf16")
INT8_16 = ("lib.int8:w8a16", "16x4096x4096", "bf16")
WAS = "int8_w8a16_gemm_kernel BLOCK_SIZE_M=16 BLOCK_SIZE_N=32 BLOCK_SIZE_K=256 GROUP_SIZE_M=1 num_warps=4 num_stages=3"
NOW = "int8_w8a16_gemm_kernel BLOCK_SIZE_M=16 BLOCK_SIZE_N=128 BLOCK_SIZE_K=128 GROUP_SIZE_M=1 num_warps=8 num_stages=3"


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def by_key(cmp):
    return {c.key: c for c in cmp.cases}


def test_a_config_that_changed_with_the_source_unchanged_is_a_flip_not_a_regression():
    cmp = compare(read_results(DATA / "flip_base.csv"), read_results(DATA / "flip_cur.csv"))
    cases = by_key(cmp)
    slow, fast = cases[INT8_64], cases[INT8_16]
    assert slow.verdict == fast.verdict == Verdict.CONFIG_FLIP
    # what the times alone said, kept with the flip; the ratio is still reported
    assert (slow.flip.was, fast.flip.was) == (Verdict.REGRESSED, Verdict.IMPROVED)
    assert slow.raw_ratio > 2.0
    assert [(c.config, c.seen_in, c.median_us) for c in slow.flip.configs] == [(WAS, "base", 28.3), (NOW, "cur", 57.2)]
    assert slow.flip.pin == PIN and "triton.autotune kernel" in PIN and "library" in PIN and "@" not in PIN
    assert not cmp.regressed and cmp.inconclusive  # neither regressed nor unchanged
    assert cmp.summary.counts[Verdict.CONFIG_FLIP] == 2 and cmp.summary.counts[Verdict.UNCHANGED] == 6
    assert cmp.summary.worst == ()


def test_the_same_config_change_with_the_source_changed_is_judged_as_any_change():
    base, cur = read_results(DATA / "flip_base.csv"), read_results(DATA / "flip_source_changed_cur.csv")
    cmp = with_explain(compare(base, cur), base, cur)
    cases = by_key(cmp)
    assert (cases[INT8_64].verdict, cases[INT8_16].verdict) == (Verdict.REGRESSED, Verdict.IMPROVED)
    assert cases[INT8_64].flip is None and cmp.regressed
    reading = cases[INT8_64].explain.reading
    assert reading.startswith("config changed (BLOCK_SIZE_N 32 -> 128, BLOCK_SIZE_K 256 -> 128, num_warps 4 -> 8")
    assert reading.endswith("with the kernel's source changed")


def test_compare_exits_0_on_a_flip_3_under_strict_and_renders_the_configs_their_times_and_the_pin():
    r = perfci("compare", DATA / "flip_base.csv", DATA / "flip_cur.csv", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    case = next(c for c in out["cases"] if (c["kernel"], c["shape"]) == INT8_64[:2])
    assert case["verdict"] == "config-flip" and case["flip"]["was"] == "regressed"
    assert [c["median_us"] for c in case["flip"]["configs"]] == [28.3, 57.2]
    assert out["regressed"] is False and out["summary"]["counts"]["config-flip"] == 2
    assert perfci("compare", DATA / "flip_base.csv", DATA / "flip_cur.csv", "--strict").returncode == 3
    assert perfci("compare", DATA / "flip_base.csv", DATA / "flip_source_changed_cur.csv").returncode == 1

    text = perfci("compare", DATA / "flip_base.csv", DATA / "flip_cur.csv").stdout
    flip_line = (f"config-flip lib.int8:w8a16 64x4096x4096 bf16 (the times alone: regressed): "
                 f"{WAS} in base: 28.3 us; {NOW} in cur: 57.2 us")
    assert f"note: {flip_line}" in text.splitlines()
    assert "note: 2 case(s) launched another config with the kernel source unchanged" in text and PIN in text

    md = render_markdown(compare(read_results(DATA / "flip_base.csv"), read_results(DATA / "flip_cur.csv")))
    assert f"- {flip_line}" in md.splitlines() and "keep only the chosen triton.Config" in md


def _row(config: str, source: str, us: float, sha: str = "a1b2c3d4e5f6", autotuned: bool = False):
    base = read_results(DATA / "flip_base.csv").by_key()[INT8_64]
    kernel = KernelRecord("k", (("grid", "8x1x1"), ("BLOCK_N", config)), (), source, autotuned)
    return replace(base, kernels=(kernel,), median_us=us, git_sha=sha)


def test_runs_of_one_source_with_two_configs_are_a_flip_whatever_side_they_are_on():
    # A pooled baseline: three nights of one source, two of them with another config than tonight's.
    nights = [_row("64", "s1", 10.0), _row("32", "s1", 12.0), _row("64", "s1", 10.2)]
    flip = find_flip(nights, [_row("64", "s1", 10.1)], Verdict.UNCHANGED)
    assert [(c.config, c.seen_in, c.median_us) for c in flip.configs] == [
        ("k BLOCK_N=64", "base (2 runs), cur", 10.1), ("k BLOCK_N=32", "base", 12.0)]
    # Base's nights of an older source do not count against tonight's: one config of tonight's source.
    assert find_flip([_row("32", "s0", 12.0), _row("64", "s1", 10.0)], [_row("64", "s1", 10.1)],
                     Verdict.REGRESSED) is None
    # Nothing recorded (a vendor library, an older file) or no source: never a flip.
    assert find_flip([_row("32", "", 12.0)], [_row("64", "", 10.1)], Verdict.REGRESSED) is None
    assert find_flip([replace(_row("32", "s1", 12.0), kernels=())], [_row("64", "s1", 10.1)],
                     Verdict.REGRESSED) is None


def test_a_config_the_host_code_chose_is_a_change_of_code_unless_one_revision_ran_two():
    # Another commit, the JIT function's source the same, the tile chosen by the launcher's Python:
    # a tile tuned by hand, judged as any change. With an autotuner, or within one commit, a flip.
    assert find_flip([_row("32", "s1", 12.0, sha="good")], [_row("64", "s1", 10.1, sha="bad")],
                     Verdict.IMPROVED) is None
    assert find_flip([_row("32", "s1", 12.0, sha="good", autotuned=True)],
                     [_row("64", "s1", 10.1, sha="bad", autotuned=True)], Verdict.IMPROVED) is not None
    assert find_flip([_row("32", "s1", 12.0, sha="bad"), _row("64", "s1", 10.0, sha="good")],
                     [_row("64", "s1", 10.1, sha="bad")], Verdict.IMPROVED) is not None


def test_the_golden_flip_without_an_autotuner_is_regressed_and_improved(tmp_path):
    # flip_cur.csv with the kernels' sources not marked autotuned: the launcher's host code picked
    # the tiles in another commit, which is a change of code.
    paths = []
    for name in ("flip_base", "flip_cur"):
        path = tmp_path / f"{name}.csv"
        path.write_text((DATA / f"{name}.csv").read_text().replace(":autotuned", ""))
        paths.append(path)
    cases = by_key(compare(read_results(paths[0]), read_results(paths[1])))
    assert (cases[INT8_64].verdict, cases[INT8_16].verdict) == (Verdict.REGRESSED, Verdict.IMPROVED)


def test_a_history_store_whose_nights_of_one_source_ran_two_configs_makes_tonight_a_flip(tmp_path):
    # Three stored nights at tonight's source: the autotuner chose BLOCK_N 128 on the second, 64 on the
    # others and tonight. Every night is equally fast: the pooled compare alone would call it unchanged.
    from perfci.history import store
    from tests.history.synth import night_rows, write_rows

    key = ("matmul_tiled", "64x6144x768", "bf16")

    def night(i, block_n, source="s1"):
        rows = night_rows(i)
        for r in rows:
            if (r["kernel"], r["shape"], r["dtype"]) == key:
                r.update(launch=f"k:grid=48x1x1,BLOCK_N={block_n},num_warps=4", source=f"k:{source}:autotuned")
        return write_rows(tmp_path / f"n{i}.csv", rows)

    store.add_runs(tmp_path / "st", [str(night(0, 64)), str(night(1, 128)), str(night(2, 64))])
    r = perfci("compare", tmp_path / "st", night(9, 64), "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    case = next(c for c in json.loads(r.stdout)["cases"] if (c["kernel"], c["shape"], c["dtype"]) == key)
    assert case["verdict"] == "config-flip" and case["flip"]["was"] == "unchanged"
    assert [(c["config"], c["seen_in"]) for c in case["flip"]["configs"]] == [
        ("k BLOCK_N=64 num_warps=4", "base (2 runs), cur"), ("k BLOCK_N=128 num_warps=4", "base")]
    # The stored nights of an older source: tonight's source ran one config, nothing to flip.
    store.add_runs(tmp_path / "old", [str(night(3, 64, "s0")), str(night(4, 128, "s0")), str(night(5, 64, "s0"))])
    r = perfci("compare", tmp_path / "old", night(10, 64), "--format", "json")
    case = next(c for c in json.loads(r.stdout)["cases"] if (c["kernel"], c["shape"], c["dtype"]) == key)
    assert r.returncode == 0 and case["verdict"] == "unchanged"


def test_a_store_whose_nights_ran_two_configs_of_one_source_is_told_apart():
    base = read_results(DATA / "flip_base.csv").by_key()
    cur = read_results(DATA / "flip_cur.csv").by_key()
    moved = read_results(DATA / "flip_source_changed_cur.csv").by_key()
    key = next(k for k in base if find_flip((base[k],), (cur[k],), Verdict.REGRESSED) is not None)
    assert ran_two_configs([base[key], cur[key]])
    assert not ran_two_configs([base[key], base[key]])  # one config on every night
    # The newest night's source is another: its one config is all that night's source ran.
    assert not ran_two_configs([base[key], moved[key]])
    # The pooled compare marks such a case in its store, so its race stays out of the suite's bound.
    nights = [("gemm", read_results(DATA / name)) for name in ("flip_base.csv", "flip_cur.csv")]
    pools = build_baseline(nights, profile_for_arch("sm_90"), PooledOptions(nights=2), "sm_90").pools
    assert pools[key].flipped and not any(p.flipped for k, p in pools.items() if k[0] != key[0])
