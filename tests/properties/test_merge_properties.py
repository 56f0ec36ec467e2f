"""perfci merge over any split of a real run: the whole run back, or one PerfciError."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from perfci.errors import PerfciError
from perfci.suites import load_suite, placements, shard_cases
from perfci.merge.core import ShardFile, merge_shards
from perfci.results import read_results_cells
from tests.merge.shards import CUR, cut
from tests.properties.strategies import FAST

_SHARDS = Path(tempfile.mkdtemp(prefix="perfci-merge-"))
atexit.register(shutil.rmtree, _SHARDS, ignore_errors=True)  # nothing left in the temporary directory
UNSHARDED = cut(CUR, 2, _SHARDS)[0]
TABLE, CELLS = read_results_cells(UNSHARDED)
HEADER = tuple(CELLS[0])
SPECS = {c.key: c for c in load_suite("decode").cases}
CASES = [SPECS[row.key] for row in TABLE.rows]


def shards_of(count: int) -> list[ShardFile]:
    files = []
    for index in range(1, count + 1):
        mine = {c.key for c in shard_cases(CASES, (index, count))}
        placed = placements(CASES, (index, count))
        picked = [(row, {**cells, **placed[row.key]}) for row, cells in zip(TABLE.rows, CELLS) if row.key in mine]
        files.append(ShardFile(table=replace(TABLE, path=f"s{index}.csv", rows=tuple(r for r, _ in picked)),
                               header=HEADER, cells=tuple(c for _, c in picked)))
    return files


@FAST
@given(st.integers(1, 12), st.randoms(use_true_random=False))
def test_any_split_merges_back_to_the_whole_run(count, rng):
    files = shards_of(count)
    rng.shuffle(files)
    merged = merge_shards(files)
    assert [dict(r) for r in merged.rows] == [dict(c) for c in CELLS] and merged.shards == count


@FAST
@given(st.integers(2, 12), st.data())
def test_a_lost_or_repeated_row_or_shard_is_refused(count, data):
    files = shards_of(count)
    victim = data.draw(st.integers(0, count - 1))
    f = files[victim]
    how = data.draw(st.sampled_from(["drop row", "drop shard", "copy row", "copy shard"]))
    row = data.draw(st.integers(0, len(f.table.rows) - 1))
    if how == "drop row":
        files[victim] = replace(f, table=replace(f.table, rows=f.table.rows[:row] + f.table.rows[row + 1:]),
                                cells=f.cells[:row] + f.cells[row + 1:])
    elif how == "drop shard":
        del files[victim]
    elif how == "copy row":
        other = files[(victim + 1) % count]
        files[victim] = replace(f, table=replace(f.table, rows=f.table.rows + other.table.rows[:1]),
                                cells=f.cells + other.cells[:1])
    else:
        files.append(replace(f, table=replace(f.table, path="copy.csv")))
    try:
        merge_shards(files)
    except PerfciError as err:
        assert "\n" not in str(err)
    else:
        raise AssertionError(f"{how} was merged")
