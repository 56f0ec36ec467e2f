import json
import re

import pytest

from perfci.errors import PerfciError
from perfci.model import CaseSpec
from perfci.suites import (BUILTIN_SUITES, load_suite, make_filter, parse_shard, parse_suite,
                           project_root, renamed_groups, select_cases)

ROOT = project_root()
accept_all = lambda spec: None  # noqa: E731


@pytest.mark.parametrize("name", sorted(BUILTIN_SUITES))
def test_builtin_suites_load_against_the_real_backends(name):
    suite = load_suite(name, ROOT)
    assert suite.name == name
    assert len({c.key for c in suite.cases}) == len(suite.cases)


def test_decode_suite_has_its_split_k_rows_with_both_grid_orders():
    suite = load_suite("decode", ROOT)
    for group, (n, k) in {"decode-qkv": (1024, 6144), "decode-o": (6144, 768),
                          "decode-router": (192, 6144), "decode-shared-down": (6144, 224)}.items():
        rows = [c for c in suite.cases if c.group == group]
        assert {(c.m, c.variant["m_fast"]) for c in rows} == {(m, f) for m in (1, 4, 16, 64) for f in (0, 1)}
        assert all((c.n, c.k) == (n, k) and c.dtype == "bf16" for c in rows)


def test_smoke_runs_on_cpu_and_the_others_do_not():
    assert "cpu" in load_suite("smoke", ROOT).devices
    assert load_suite("prefill", ROOT).devices == ("cuda",)


def test_entry_expands_to_the_cartesian_product():
    data = {"name": "t", "cases": [{"kernel": ["a", "b"], "variants": [{"x": 0}, {"x": 1}],
                                    "M": [1, 2], "N": 8, "K": [16, 32], "dtype": "fp16"}]}
    suite = parse_suite(data, "t.toml", accept_all)
    assert len(suite.cases) == 2 * 2 * 2 * 2
    assert CaseSpec("b", 2, 8, 32, "fp16", {"x": 1}) in suite.cases


@pytest.mark.parametrize("data, message", [
    ({"cases": [{}]}, "needs a 'name'"),
    ({"name": "t"}, "needs at least one [[cases]]"),
    ({"name": "t", "bogus": 1, "cases": []}, "unknown top-level key(s) bogus"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2}]}, "entry 1: missing 'K'"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3, "colour": 1}]}, "unknown key(s) colour"),
    ({"name": "t", "cases": [{"kernel": "a", "M": "1", "N": 2, "K": 3}]}, "'M': expected int"),
    ({"name": "t", "cases": [{"kernel": "a", "M": True, "N": 2, "K": 3}]}, "'M': expected int"),
    # found by tests/properties: an empty list expanded to no case at all, and a suite of none loaded
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": []}]}, "'K': is an empty list"),
    ({"name": "t", "devices": [], "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3}]}, "'devices': is an empty"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 0, "N": 2, "K": 3}]}, "'M' must be a positive integer"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 10 ** 400, "K": 3}]},
     "'N' must be a positive integer up to 2147483648"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3, "weight": float("nan")}]},
     "'weight' must be a number from 1e-06 to 1e+06"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3, "weight": float("inf")}]}, "'weight' must be"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3, "group": [1]}]}, "'group' must be a string"),
    ({"name": "t", "description": {}, "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3}]},
     "'description' must be a string"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3, "dtype": "fp4"}]}, "unknown dtype 'fp4'"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3, "weight": -1}]}, "'weight' must be"),
    ({"name": "t", "cases": [{"kernel": "a", "variant": {"m_fast": True}, "M": 1, "N": 2, "K": 3}]},
     "variant m_fast = True: use an integer"),
    ({"name": "t", "devices": ["tpu"], "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3}]}, "not tpu"),
    ({"name": "t", "cases": [{"kernel": "a", "M": 1, "N": 2, "K": 3}, {"kernel": "a", "M": 1, "N": 2, "K": 3}]},
     "declared twice"),
])
def test_malformed_suites_say_what_and_where(data, message):
    with pytest.raises(PerfciError) as err:
        parse_suite(data, "bad.toml", accept_all)
    assert message in str(err.value) and str(err.value).startswith("bad.toml")


def test_a_shape_the_kernel_cannot_take_is_rejected_at_load():
    data = {"name": "t", "cases": [{"kernel": "gemv", "M": 4, "N": 64, "K": 64, "dtype": "fp32"}]}
    with pytest.raises(PerfciError, match="gemv 4x64x64 fp32"):
        parse_suite(data, "t.toml")
    data = {"name": "t", "cases": [{"kernel": "nope", "M": 1, "N": 64, "K": 64}]}
    with pytest.raises(PerfciError, match="unknown kernel 'nope'"):
        parse_suite(data, "t.toml")
    data = {"name": "t", "cases": [{"kernel": "gemv", "variant": {"m_fast": 1}, "M": 1, "N": 64, "K": 64}]}
    with pytest.raises(PerfciError, match="no variant key"):
        parse_suite(data, "t.toml")


def test_an_import_path_is_a_kernel_and_its_declaration_is_checked_at_load():
    # A plain callable by import path: the path is the kernel's key, a layout is a variant.
    data = {"name": "t", "cases": [{"kernel": "torch:matmul", "variants": [{}, {"b_layout": "row"}],
                                    "M": 4, "N": 8, "K": 16, "dtype": "fp16"}]}
    assert [c.key for c in parse_suite(data, "t.toml").cases] == [
        ("torch:matmul", "4x8x16", "fp16"), ("torch:matmul[b_layout=row]", "4x8x16", "fp16")]
    refused = [({"kernel": "torch:matmul", "dtype": "fp8"}, "torch:matmul does not support dtype fp8"),
               ({"kernel": "torch:matmul", "variant": {"epilogue": "bias"}}, "no variant key(s) epilogue"),
               ({"kernel": "torch_matmul", "variant": {"epilogue": "bias"}}, "no variant key(s) epilogue"),
               ({"kernel": "matmul_tiled", "variant": {"epilogue": "tanh"}}, "epilogue must be one of none, bias"),
               ({"kernel": "torch:no_such_gemm"}, "kernel 'torch:no_such_gemm': torch has no attribute")]
    for fields, message in refused:
        entry = {"M": 4, "N": 8, "K": 16, "dtype": "fp16", **fields}
        with pytest.raises(PerfciError, match=re.escape(message)):
            parse_suite({"name": "t", "cases": [entry]}, "t.toml")


def test_unknown_suite_and_bad_toml(tmp_path):
    with pytest.raises(PerfciError, match="unknown suite 'decoder'; built-in suites: decode, prefill, smoke"):
        load_suite("decoder", ROOT)
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(PerfciError, match="not valid TOML"):
        load_suite(str(bad), ROOT)


CASES = [CaseSpec("splitk_decode", m, 1024, 6144, "bf16", {"m_fast": f}, group="qkv")
         for m in (1, 4, 16, 64) for f in (0, 1)] + [CaseSpec("torch_matmul", 16, 1024, 6144, "fp16", group="ref")]


@pytest.mark.parametrize("expr, expected", [
    ("M<=4", 4),
    ("M>16", 2),
    ("kernel~splitk*,M=64", 2),
    ("*m_fast=1*", 4),
    ("group=ref", 1),
    ("dtype!=bf16", 1),
    ("shape=16x1024x6144", 3),
])
def test_filters(expr, expected):
    assert len(select_cases(CASES, expr)) == expected


FORMER = "seed002"  # the decode suite's groups' former prefix (prefill's one group was "seed000")


@pytest.mark.parametrize("expr, renamed, expected", [
    (f"group={FORMER}-qkv", "group=decode-qkv", 8),
    (f"group={FORMER}-shared-down,M=64", "group=decode-shared-down,M=64", 2),
    (f"group~{FORMER}*", "group~decode-*", 52),  # every split-K, vendor and GEMV row, no Llama row
    (FORMER, "decode-", 52),  # a bare glob over "kernel shape dtype group"
])
def test_a_former_group_name_selects_the_renamed_group_with_one_warning(expr, renamed, expected, capsys):
    decode = load_suite("decode", ROOT).cases
    assert renamed_groups(expr) == renamed
    assert select_cases(decode, expr) == select_cases(decode, renamed)
    assert len(select_cases(decode, renamed)) == expected
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1  # one line for the whole selection, not one per case
    assert lines[0].startswith(f"perfci: warning: --filter '{expr}' names a group by its former name, "
                               f"read as '{renamed}'")


def test_the_former_prefill_group_and_the_names_now_and_a_suites_own_group_of_a_former_name(capsys):
    prefill = load_suite("prefill", ROOT).cases
    assert [c.shape for c in select_cases(prefill, "group=seed000")] == ["5120x5120x8320"] * 3
    assert "group=prefill-square" in capsys.readouterr().err
    assert len(select_cases(load_suite("decode", ROOT).cases, "group=decode-qkv")) == 8
    own = [CaseSpec("splitk_decode", 16, 1024, 6144, "bf16", group=f"{FORMER}-qkv"),
           CaseSpec("splitk_decode", 16, 1024, 6144, "fp16", group="qkv")]
    assert select_cases(own, f"group={FORMER}-qkv") == own[:1]  # a project's own group keeps its name
    assert renamed_groups("group=decode-qkv,M<=16") == ""
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("expr", ["M~1", "M<=four", "kernel<x", " , "])
def test_bad_filters(expr):
    with pytest.raises(PerfciError):
        make_filter(expr)(CASES[0])


def test_shards_partition_the_cases():
    shards = [select_cases(CASES, shard=(i, 3)) for i in (1, 2, 3)]
    assert sorted(c.key for s in shards for c in s) == sorted(c.key for c in CASES)
    assert parse_shard("2/4") == (2, 4) and parse_shard(" 1 / 1 ") == (1, 1)


@pytest.mark.parametrize("text, message", [
    ("0/4", "--shard 0/4: I must be between 1 and N (4)"),
    ("5/4", "--shard 5/4: I must be between 1 and N (4)"),
    ("1/0", "--shard 1/0: N must be between 1 and 10000"),
    ("2", "--shard '2' must look like I/N with 1 <= I <= N, e.g. 2/4"),
    ("a/b", "--shard 'a/b' must look like I/N"),
    ("1/2/3", "--shard '1/2/3' must look like I/N"),
    ("-1/4", "--shard '-1/4' must look like I/N"),
    ("1/" + "9" * 5000, "must look like I/N"),  # int() of 5000 digits would raise ValueError
    ("\u0661/\u0662", "must look like I/N"),  # Arabic-Indic digits are digits to \\d, not to us
])
def test_bad_shards_are_one_line(text, message):
    with pytest.raises(PerfciError) as err:
        parse_shard(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_shards_are_balanced_in_count_and_flops_and_ignore_the_suite_order():
    from perfci.suites import shard_cases

    for name in ("decode", "prefill"):
        cases = load_suite(name).cases
        for count in (2, 3, 4):
            shards = [shard_cases(cases, (i, count)) for i in range(1, count + 1)]
            assert sorted(c.key for s in shards for c in s) == sorted(c.key for c in cases)
            sizes = [len(s) for s in shards]
            assert max(sizes) - min(sizes) <= 1
            flops = [sum(c.m * c.n * c.k for c in s) for s in shards]
            assert max(flops) <= 1.10 * sum(flops) / count, (name, count, flops)
            # each shard keeps the suite's order, and the partition does not depend on it
            assert all(s == [c for c in cases if c in s] for s in shards)
            assert [c.key for c in shard_cases(cases[::-1], (1, count))] == [c.key for c in shards[0]][::-1]


def test_more_shards_than_cases_is_refused_not_an_empty_run():
    from perfci.suites import shard_cases

    with pytest.raises(PerfciError, match=r"--shard 2/9: only \d+ case\(s\) are selected"):
        shard_cases(CASES[:3], (2, 9))


def test_placements_number_the_selection_and_name_the_shard():
    from perfci.suites import placements
    from perfci.results import selection_id

    placed = placements(CASES, (2, 3))
    assert [placed[c.key]["case_index"] for c in CASES] == [str(i) for i in range(1, len(CASES) + 1)]
    assert {p["shard"] for p in placed.values()} == {"2/3"}
    assert {p["selection"] for p in placed.values()} == {selection_id(c.key for c in CASES)}
    assert {p["shard"] for p in placements(CASES, None).values()} == {""}


# --------------------------------------------------------------------------- --cases


def test_cases_from_a_compare_json_are_those_neither_unchanged_nor_a_config_flip(tmp_path):
    from perfci.suites import load_case_keys

    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps({"cases": [
        {"kernel": "gemv", "shape": "1x64x64", "dtype": "fp32", "verdict": "regressed"},
        {"kernel": "torch_matmul", "shape": "8x16x32", "dtype": "fp32", "verdict": "unchanged"},
        {"kernel": "torch_matmul", "shape": "16x16x32", "dtype": "fp32", "verdict": "inconclusive"},
        {"kernel": "gemv", "shape": "1x16x64", "dtype": "fp32", "verdict": "config-flip"}]}))
    assert load_case_keys(str(path)) == [("gemv", "1x64x64", "fp32"), ("torch_matmul", "16x16x32", "fp32")]


def test_cases_from_lines_accept_run_list_output_and_comments(tmp_path):
    from perfci.suites import load_case_keys

    path = tmp_path / "keys.txt"
    path.write_text("# confirm these\ngemv,1x64x64,fp32\ntorch_matmul\t8x16x32\tfp32\tgroup-a\n\n")
    assert load_case_keys(str(path)) == [("gemv", "1x64x64", "fp32"), ("torch_matmul", "8x16x32", "fp32")]
    path.write_text("gemv 1x64x64\n")
    with pytest.raises(PerfciError, match="line 1: expected kernel,shape,dtype"):
        load_case_keys(str(path))


def test_select_cases_keeps_exactly_the_named_ones_and_refuses_unknown_keys():
    from perfci.suites import select_cases

    suite = load_suite("smoke")
    first, last = suite.cases[0], suite.cases[-1]
    assert select_cases(suite.cases, keys=[last.key, first.key]) == [first, last]  # suite order
    with pytest.raises(PerfciError, match="1 case\\(s\\) are not in this suite: nope 1x1x1 fp32"):
        select_cases(suite.cases, keys=[first.key, ("nope", "1x1x1", "fp32")])


@pytest.mark.parametrize("text, message", [
    ("name = 'b'\n[[cases]\n", "not valid TOML (Expected ']]' at the end of an array declaration (at line 2, column 8))"),
    ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "not valid TOML (nested too deeply)"),
    ("name = 'b'\nx = 1" + "0" * 5000 + "\n", "not valid TOML (Exceeds the limit (4300 digits)"),
    ("", "the file is empty"),
])
def test_unreadable_suite_files_are_one_line(tmp_path, text, message):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(PerfciError) as err:
        load_suite(str(path))
    assert str(err.value).startswith(f"{path}: {message}")


def test_project_root_outside_a_checkout_falls_back_to_the_one_perfci_runs_from():
    # it fell back to perfci/, where no suites/ is: `perfci run smoke` failed outside the checkout
    fallback = project_root("/")
    assert (fallback / "suites" / "smoke.toml").is_file() and fallback == ROOT
