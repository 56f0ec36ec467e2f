"""perfci merge: the shards of one run joined, and every way shards can fail to be one run refused."""
from __future__ import annotations

import json

import pytest

from perfci.cli import main
from tests.merge.shards import BASE, CUR, DATA, cut, read_rows, write_rows


def perfci(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def split(tmp_path):
    return cut(CUR, 3, tmp_path)


def test_merged_shards_are_the_unsharded_run_byte_for_byte(tmp_path, capsys, split):
    unsharded, shards = split
    assert sorted(len(read_rows(s)) for s in shards) == [28, 28, 28]
    code, out, err = perfci(capsys, "merge", *reversed(shards), "--out", tmp_path / "merged.csv")
    assert code == 0, err
    assert err == f"perfci merge: 3 shards, 84 cases (decode, NVIDIA H200, 412c5af1): wrote {tmp_path / 'merged.csv'}\n"
    assert (tmp_path / "merged.csv").read_text() == unsharded.read_text()


def test_compare_on_a_merged_run_equals_compare_on_the_unsharded_one(tmp_path, capsys, split):
    unsharded, shards = split
    assert perfci(capsys, "merge", *shards, "--out", tmp_path / "merged.csv")[0] == 0
    verdicts = {}
    for name in ("merged.csv", "unsharded.csv"):
        code, out, err = perfci(capsys, "compare", BASE, tmp_path / name, "--format", "json")
        verdicts[name] = (code, json.loads(out.replace(str(tmp_path / name), "CUR")), err)
    assert verdicts["merged.csv"] == verdicts["unsharded.csv"]
    code, result, _ = verdicts["merged.csv"]
    assert len(result["cases"]) == 84 and code in (0, 1)
    # and not because compare ignores its input: one shard alone is judged differently
    code, out, _ = perfci(capsys, "compare", BASE, shards[0], "--format", "json")
    assert json.loads(out)["summary"]["counts"]["removed"] == 56


def test_files_without_shard_metadata_merge_in_argument_order(tmp_path, capsys):
    rows = read_rows(DATA.parent.parent / "baselines" / "h200" / "decode.csv")  # schema 2
    columns = list(rows[0])
    a = write_rows(tmp_path / "a.csv", rows[40:], columns)
    b = write_rows(tmp_path / "b.csv", rows[:40], columns)
    code, _, err = perfci(capsys, "merge", b, a, "--out", tmp_path / "m.csv")
    assert code == 0 and "2 files, 84 cases" in err
    assert read_rows(tmp_path / "m.csv") == rows


def _edit(path, row=0, **cells):
    rows = read_rows(path)
    rows[row].update(cells)
    write_rows(path, rows, list(rows[0]))


def _drop(path, row=-1):
    rows = read_rows(path)
    del rows[row]
    write_rows(path, rows, list(rows[0]))


REFUSALS = {
    "overlap": (lambda s: write_rows(s[2], read_rows(s[2]) + read_rows(s[0])[:1]),
                "shard1.csv line 2: the shards overlap (one case measured twice)"),
    "device": (lambda s: _edit(s[1], device_name="NVIDIA H100"),
               "shard2.csv: line 2, column 'device_name': mixed devices: 'NVIDIA H100' here, 'NVIDIA H200' in"),
    "arch": (lambda s: [_edit(s[1], r, arch="gfx942") for r in range(28)],
             "column 'arch': mixed devices: 'gfx942' here, 'sm_90' in"),
    "sha": (lambda s: _edit(s[2], 5, git_sha="deadbeef"),
            "shard3.csv: line 7, column 'git_sha': mixed commits: 'deadbeef' here"),
    "schema": (lambda s: _edit(s[1], schema="2"), "column 'schema': mixed schemas: '2' here, '3' in"),
    "columns": (lambda s: write_rows(s[1], read_rows(s[1]), list(read_rows(s[1])[0])[:-1]),
                "shard2.csv: mixed schemas: its columns differ from"),
    "missing shard": (lambda s: s[1].unlink(), None),
    "shard twice": (lambda s: [_edit(s[1], r, shard="1/3") for r in range(28)],
                    "shard2.csv: shard 1/3 is given twice (also"),
    "other split": (lambda s: [_edit(s[1], r, shard="2/4") for r in range(28)],
                    "shard2.csv: shard 2/4, but"),
    "two shards in a file": (lambda s: _edit(s[1], 3, shard="3/3"),
                             "shard2.csv: column 'shard': rows of more than one shard, 2/3 (line 2) and 3/3 (line 5)"),
    "bad shard": (lambda s: [_edit(s[1], r, shard="4/3") for r in range(28)],
                  "shard2.csv: line 2, column 'shard': '4/3' is not I/N with 1 <= I <= N"),
    "interrupted": (lambda s: _drop(s[0]), "merge: the shards hold 83 of the 84 cases their run selected "
                                           "(case_index 82 missing): was a shard run interrupted?"),
    "other selection": (lambda s: [_edit(s[1], r, selection="84:0123456789ab") for r in range(28)],
                        "column 'selection': 84:0123456789ab, but"),
    "not a shard": (lambda s: [_edit(s[1], r, shard="") for r in range(28)],
                    "shard2.csv: not a shard (no shard column value), but"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_what_is_not_one_run_is_refused_in_one_line(tmp_path, capsys, split, name):
    _, shards = split
    change, message = REFUSALS[name]
    change(shards)
    given = [s for s in shards if s.exists()]
    out = tmp_path / "merged.csv"
    code, stdout, err = perfci(capsys, "merge", *given, "--out", out)
    assert code == 2 and stdout == "" and len(err.splitlines()) == 1, err
    assert (message or "merge: shard(s) 2/3 missing; a run split 3 ways needs all 3 shard CSVs") in err
    assert not out.exists()


def test_merge_never_writes_over_an_input_nor_takes_one_twice(tmp_path, capsys, split):
    _, shards = split
    before = shards[0].read_bytes()
    code, _, err = perfci(capsys, "merge", *shards, "--out", tmp_path / "." / "shard1.csv")
    assert code == 2 and "--out" in err and "is one of the shards it reads" in err
    assert shards[0].read_bytes() == before
    code, _, err = perfci(capsys, "merge", shards[0], shards[1], shards[0], "--out", tmp_path / "m.csv")
    assert code == 2 and f"merge: {shards[0]} is given twice" in err


def test_a_flydsl_file_is_not_a_shard(tmp_path, capsys):
    code, _, err = perfci(capsys, "merge", DATA / "compare" / "flydsl_base.csv", "--out", tmp_path / "m.csv")
    assert code == 2 and "a flydsl file; perfci merge joins the perfci results CSVs" in err
