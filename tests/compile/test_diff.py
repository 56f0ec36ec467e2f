"""perfci compile --baseline / --current: the diff of two resources files, on hand-edited copies of real ones.

The files under tests/data/compile/ are `perfci compile decode --out` of a few
gemv and split-K cases (Triton 3.9.0). Each test plants one change with a known
effect in a copy and checks the diff's words, verdict and exit code.
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.compile.accept import Accepted
from perfci.compile.baseline import parse, read, to_json
from perfci.compile.diff import RULE, diff
from perfci.compile.render_diff import markdown, table
from perfci.compile.render_diff import to_json as diff_json
from perfci.errors import PerfciError
from tests.compile.procs import compiler_env

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "compile"
GFX950 = DATA / "decode-sample-gfx950.json"
SM90 = DATA / "decode-sample-sm_90.json"
GEMV = ("gemv", "1x1024x6144", "bf16")
SPLITK = ("splitk_decode", "16x6144x4096", "bf16")


def cli(*argv: str):
    proc = subprocess.run([sys.executable, "-m", "perfci", "compile", *argv], capture_output=True, text=True,
                          env=compiler_env(), cwd=ROOT, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def case(data: dict, key: tuple[str, str, str]) -> dict:
    return next(c for c in data["cases"] if (c["kernel"], c["shape"], c["dtype"]) == key)


def write(tmp_path: Path, data: dict, name: str = "cur.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def planted(path: Path, key, **fields) -> dict:
    """A copy of ``path`` with the main kernel of case ``key`` given ``fields``."""
    data = copy.deepcopy(load(path))
    kernel = case(data, key)["kernels"][0]
    for name, value in fields.items():
        if name == "occupancy":
            kernel["occupancy"].update(value)
        else:
            kernel[name] = value
    return data


def test_the_sample_files_are_what_the_tests_assume():
    gfx = load(GFX950)
    gemv = case(gfx, GEMV)["kernels"][0]
    assert (gemv["spills"], gemv["scratch_bytes"], gemv["occupancy"]["value"]) == (0, 0, 5)
    assert [k["kernel"] for k in case(gfx, SPLITK)["kernels"]] == ["splitk_partial_kernel", "splitk_reduce_kernel"]
    assert {c["status"] for c in load(SM90)["cases"]} >= {"accepted"}  # the 8 B split-K spill of ptxas 13


def test_a_file_against_itself_is_empty(tmp_path):
    rf = read(str(GFX950))
    d = diff(rf, rf)
    assert d.changed == () and not d.failing and d.counts()["same"] == len(rf.cases)
    code, out, err = cli("--baseline", str(GFX950), "--current", str(GFX950))
    assert code == 0 and err == ""
    assert out.startswith("no resource changed") and RULE in out
    # Written back, read again: the same file (the reader keeps everything the diff reads).
    again = parse(to_json(rf), "again")
    assert again == rf


def test_a_new_spill_with_more_vgprs_and_lower_occupancy_is_worse_exit_1(tmp_path):
    cur = write(tmp_path, planted(GFX950, GEMV, vgprs=256, registers=256, spills=24, scratch_bytes=104,
                                  occupancy={"value": 2, "by_registers": 2}))
    code, out, _ = cli("--baseline", str(GFX950), "--current", str(cur))
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("gfx950  gemv "))
    assert row.rstrip().endswith("worse")
    for words in ("spills 0 -> 24 registers", "scratch 0 -> 104 B", "occupancy 5 -> 2 waves/SIMD",
                  "VGPRs 86 -> 256"):
        assert words in row
    assert "1 worse, 0 better" in out and RULE in out


def test_lower_occupancy_alone_is_worse_and_higher_is_better(tmp_path):
    lower = diff(read(str(GFX950)), parse(json.dumps(planted(GFX950, GEMV, occupancy={"value": 4})), "x"))
    assert [c.verdict for c in lower.changed] == ["worse"]
    higher = diff(read(str(GFX950)), parse(json.dumps(planted(GFX950, GEMV, occupancy={"value": 6})), "x"))
    assert [c.verdict for c in higher.changed] == ["better"] and not higher.failing


def test_a_register_change_that_keeps_occupancy_is_reported_not_failed(tmp_path):
    cur = write(tmp_path, planted(GFX950, GEMV, vgprs=96, registers=96))
    code, out, _ = cli("--baseline", str(GFX950), "--current", str(cur))
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("gfx950  gemv "))
    assert "VGPRs 86 -> 96" in row and row.rstrip().endswith("same")
    assert "(1 with a reported change)" in out


@pytest.mark.parametrize("shared_kib, verdict", [(96, "same"), (161, "worse")])
def test_lds_past_the_arch_budget_is_worse_within_it_reported(tmp_path, shared_kib, verdict):
    # gfx950 has 160 KiB of LDS per workgroup: 4 -> 96 KiB is reported, 4 -> 161 KiB fails.
    cur = parse(json.dumps(planted(GFX950, GEMV, shared_bytes=shared_kib * 1024)), "x")
    d = diff(read(str(GFX950)), cur)
    (changed,) = d.changed
    assert changed.verdict == verdict and bool(d.failing) == (verdict == "worse")
    assert f"LDS 4 -> {shared_kib} KiB" in table([d])


def test_a_fixed_spill_is_better(tmp_path):
    spilling = write(tmp_path, planted(GFX950, GEMV, spills=24, scratch_bytes=104), "base.json")
    code, out, _ = cli("--baseline", str(spilling), "--current", str(GFX950))
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("gfx950  gemv "))
    assert "spills 24 -> 0 registers" in row and row.rstrip().endswith("better")


def test_a_second_kernels_change_is_named_and_judged(tmp_path):
    data = copy.deepcopy(load(GFX950))
    reduce = case(data, SPLITK)["kernels"][1]
    reduce.update(spills=3, scratch_bytes=12)
    d = diff(read(str(GFX950)), parse(json.dumps(data), "x"))
    (changed,) = d.changed
    assert changed.verdict == "worse" and changed.key == SPLITK
    assert "splitk_reduce_kernel: spills 0 -> 3 registers" in table([d])


def test_a_compile_error_is_worse_and_never_accepted(tmp_path):
    data = copy.deepcopy(load(SM90))
    kernel = case(data, SPLITK)["kernels"][0]
    for name in ("vgprs", "agprs", "sgprs", "registers", "spills", "scratch_bytes", "shared_bytes", "occupancy"):
        kernel[name] = None
    kernel["problems"] = ["compile error: PassManager::run failed"]
    d = diff(read(str(SM90)), parse(json.dumps(data), "x"))
    (changed,) = d.changed
    assert changed.verdict == "worse" and changed.failing and not changed.accepted
    assert "compile error: PassManager::run failed" in table([d])


def test_a_spill_within_an_accepted_bound_passes_with_its_reason(tmp_path):
    # sm_90's split-K config spills 8 B of stores under ptxas 13 (ACCEPTED_SPILLS): from a spill-free
    # baseline that is worse, but accepted; 16 B is past the bound.
    base = write(tmp_path, planted(SM90, SPLITK, spills=0, scratch_bytes=0, problems=[]), "base.json")
    code, out, _ = cli("--baseline", str(base), "--current", str(SM90))
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("sm_90  splitk_decode  16x6144x4096"))
    assert "spills 0 -> 8 B" in row and "worse (accepted)" in row
    assert "accepted on sm_90 (splitk_decode 16x6144x4096 bf16): 8 B under Triton 3.9's ptxas" in out
    over = write(tmp_path, planted(SM90, SPLITK, spills=16, scratch_bytes=16))
    code, out, _ = cli("--baseline", str(base), "--current", str(over))
    assert code == 1 and "spills 0 -> 16 B" in out


def test_an_entry_accepts_only_its_arch_prefix_and_field():
    entry = Accepted("gfx950", "gemv", (("occupancy", 4),), "measured: no slower")
    base = read(str(GFX950))
    for occ, failing in ((4, False), (3, True)):
        d = diff(base, parse(json.dumps(planted(GFX950, GEMV, occupancy={"value": occ})), "x"), (entry,))
        assert bool(d.failing) == failing
        assert d.changed[0].accepted == ("" if failing else "measured: no slower")
    # the same occupancy drop plus a spill: the spill is not covered, so the case fails
    d = diff(base, parse(json.dumps(planted(GFX950, GEMV, occupancy={"value": 4}, spills=2)), "x"), (entry,))
    assert d.failing


def test_added_and_removed_cases(tmp_path):
    data = copy.deepcopy(load(GFX950))
    gone = data["cases"].pop(0)
    new = copy.deepcopy(gone)
    new["shape"] = "1x2048x6144"
    new["status"] = "fail"
    new["kernels"][0].update(spills=5, problems=["spills 5 VGPRs, 0 SGPRs (20 B scratch)"])
    data["cases"].append(new)
    d = diff(read(str(GFX950)), parse(json.dumps(data), "x"))
    verdicts = {c.key: c.verdict for c in d.changed}
    assert verdicts == {GEMV: "removed", ("gemv", "1x2048x6144", "bf16"): "worse"}
    assert [c.key for c in d.failing] == [("gemv", "1x2048x6144", "bf16")]


def test_markdown_and_json_carry_the_same_verdicts(tmp_path):
    d = diff(read(str(GFX950)), parse(json.dumps(planted(GFX950, GEMV, spills=24)), "x"))
    md = markdown([d])
    assert "**1 case(s) worse**" in md and "| gfx950 | `gemv` | 1x1024x6144 | bf16 |" in md and "**worse**" in md
    data = json.loads(diff_json([d]))
    assert data["failing"] == 1 and data["rule"] == RULE
    (entry,) = data["diffs"][0]["cases"]
    assert entry["verdict"] == "worse"
    assert {"field": "spills", "before": 0, "after": 24, "effect": "worse"}.items() <= entry["changes"][0].items()
    code, out, _ = cli("--baseline", str(GFX950), "--current", str(GFX950), "--format", "json")
    assert code == 0 and json.loads(out)["diffs"][0]["cases"] == []


def test_directories_pair_their_files_by_name(tmp_path):
    base_dir, cur_dir = tmp_path / "base", tmp_path / "cur"
    for d in (base_dir, cur_dir):
        d.mkdir()
    for src in (GFX950, SM90):
        (base_dir / src.name).write_text(src.read_text())
    (cur_dir / GFX950.name).write_text(json.dumps(planted(GFX950, GEMV, spills=1)))
    (cur_dir / SM90.name).write_text(SM90.read_text())
    code, out, _ = cli("--baseline", str(base_dir), "--current", str(cur_dir))
    assert code == 1 and "decode on gfx950" in out and "decode on sm_90" in out
    code, out, _ = cli("--baseline", str(base_dir), "--current", str(cur_dir), "--arch", "sm_90")
    assert code == 0 and "gfx950" not in out.split("rule:")[0]


def _bad(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("edit, needle", [
    (lambda d: "{", "not JSON"),
    (lambda d: json.dumps({"cases": []}), "not a perfci compile resources file"),
    (lambda d: json.dumps({**d, "schema": 99}), "schema 99, this perfci reads schema 1"),
    (lambda d: json.dumps({**d, "arch": "gfx1100"}), "arch 'gfx1100' is none of"),
    (lambda d: json.dumps({**d, "cases": [{"kernel": "gemv"}]}), "cases[0]: no 'shape'"),
    (lambda d: json.dumps({**d, "cases": [{**d["cases"][0], "kernels": [{**d["cases"][0]["kernels"][0],
                                                                        "spills": "many"}]}]}),
     "'spills' is not an integer"),
    (lambda d: json.dumps({**d, "cases": d["cases"][:1] * 2}), "appears twice"),
    (lambda d: json.dumps({**d, "arch": "sm_90"}), "is gfx950"),
    (lambda d: json.dumps({**d, "suite": "prefill"}), "is suite decode"),
])
def test_a_bad_or_mismatched_file_is_one_line_exit_2(tmp_path, edit, needle):
    bad = _bad(tmp_path, edit(load(GFX950)))
    code, out, err = cli("--baseline", str(GFX950), "--current", str(bad))
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, needle", [
    (["--current", "x.json"], "--current PATH needs --baseline PATH"),
    (["--baseline", "x.json", "--current", "y.json"], "x.json: no such file"),
    (["--arch", "gfx950"], "give SUITE and --arch"),
    (["decode", "--arch", "gfx950,sm_90", "--out", "one.json"], "one file holds one arch"),
    (["decode", "--arch", "gfx950", "--baseline", "nowhere/"], "no such file"),
    (["decode", "--arch", "gfx950", "--against-triton", "3.8; rm -rf /"], "is not a version"),
    (["decode", "--arch", "gfx950", "--against-triton", "3.8.0", "--baseline", "x/"], "takes no --baseline"),
])
def test_bad_usage_is_one_line_exit_2(argv, needle):
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_a_baseline_of_another_suite_is_refused(tmp_path):
    (tmp_path / "decode-gfx950.json").write_text(json.dumps({**load(GFX950), "suite": "prefill"}))
    code, _, err = cli("decode", "--arch", "gfx950", "--filter", "kernel=gemv", "--baseline", str(tmp_path))
    assert code == 2 and "is suite prefill on gfx950, not decode on gfx950" in err


def test_the_reader_refuses_what_is_not_a_file():
    with pytest.raises(PerfciError, match="no such file"):
        read("/nonexistent/decode-gfx950.json")


@pytest.mark.slow
def test_against_triton_compiles_in_the_other_environment_and_diffs(tmp_path):
    # The "other" environment is this python under another path: the same triton, so the diff is empty,
    # and the plumbing (the child's compile, its files, the diff) is what is tested.
    import triton

    env_dir = tmp_path / "env"
    (env_dir / "bin").mkdir(parents=True)
    python = env_dir / "bin" / "python"
    # pip is refused: nothing is ever installed into this python
    python.write_text(f'#!/bin/sh\n[ "$2" = pip ] && {{ echo "ERROR: no pip here" >&2; exit 1; }}\n'
                      f'exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    code, out, err = cli("decode", "--arch", "gfx950,sm_90", "--filter", "kernel=gemv", "--cache",
                         str(tmp_path / "cache"), "--against-triton", triton.__version__, "--triton-env",
                         str(env_dir), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert [(d["arch"], d["counts"]["same"], d["cases"]) for d in data["diffs"]] == [("gfx950", 4, []),
                                                                                    ("sm_90", 4, [])]
    # A version the environment does not hold, and pip cannot install there: one line, exit 2, before compiling.
    code, _, err = cli("decode", "--arch", "gfx950", "--filter", "kernel=gemv", "--against-triton", "0.0.1",
                       "--triton-env", str(env_dir))
    assert code == 2 and "--against-triton 0.0.1" in err and len(err.strip().splitlines()) == 1
