"""The pooled compare judges loaded values: the path form only reads them first."""
import shutil

from perfci.compare.comparison import CompareOptions
from perfci.compare.render import render_json
from perfci.compare.store import pooled_compare, pooled_comparison
from perfci.history import store, triage
from perfci.results import read_results_cells
from tests.history.synth import cases, write_night

SLOW = {(k, f"{m}x{n}x{kk}", "bf16"): 1.10 for k, m, n, kk in cases() if k == "matmul_tiled"}


def test_loaded_values_judge_as_the_paths_do_and_need_no_files(tmp_path):
    st = tmp_path / "store"
    store.add_runs(st, [str(write_night(tmp_path / f"n{i}.csv", i, seed=5)) for i in range(4)])
    store.add_triage(st, triage.make_record("matmul_tiled * bf16", "04" * 20, "expected", "bigger tile", "ana"))
    cur = write_night(tmp_path / "cur.csv", 4, seed=5, slow=SLOW)
    by_path = pooled_comparison(str(st), str(cur), None, CompareOptions(), 3)
    history, records = store.load(st), store.load_triage(st)
    table, cells = read_results_cells(cur)
    shutil.rmtree(st)
    cur.unlink()
    by_value = pooled_compare(history, table, cells, records, None, CompareOptions(), 3)
    assert render_json(by_value) == render_json(by_path)
    assert any(c.verdict != "unchanged" for c in by_value.cases)  # the slowdown is judged, not lost
