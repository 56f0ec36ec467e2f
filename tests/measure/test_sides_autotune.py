"""Each side of a confirm or bisect session autotunes once, into a Triton cache of its own (perfci/measure/sides.py).

The environment names are checked against the installed Triton (what its
knobs read, and that an ``@triton.autotune`` kernel then caches its results);
the sides' folders on a live session of two sides on the CPU, where a plain
callable notes the environment its worker process was given.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from perfci.measure.sides import SuiteSpec, WarmSides, autotune_env
from perfci.model import CaseSpec

ROOT = Path(__file__).resolve().parents[2]


def triton_knobs_json() -> str:
    """What the installed Triton reads from autotune_env's variables (a fresh process, no interpreter)."""
    import triton
    import triton.language as tl
    from triton import knobs

    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def tuned(x_ptr, n, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)

    return json.dumps({"cache": knobs.autotuning.cache, "dir": knobs.cache.dir,
                       "cache_results": tuned.cache_results})


def test_the_autotune_environment_is_what_the_installed_triton_reads(tmp_path):
    # triton/knobs.py: autotuning.cache <- TRITON_CACHE_AUTOTUNING, cache.dir <- TRITON_CACHE_DIR; an
    # Autotuner made under them writes its timings there and reads them back in the next process.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env.update(autotune_env(tmp_path / "cur"), PYTHONPATH=str(ROOT))
    code = "import tests.measure.test_sides_autotune as t; print(t.triton_knobs_json())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"cache": True, "dir": str(tmp_path / "cur"), "cache_results": True}


SEEN_ENV = """\
import os


def mm(a, b):  # notes the Triton cache its worker process was given, then multiplies
    with open(os.path.join(os.path.dirname(__file__), "seen.txt"), "a") as fh:
        fh.write(f"{os.environ.get('TRITON_CACHE_DIR')}|{os.environ.get('TRITON_CACHE_AUTOTUNING')}\\n")
    return a @ b
"""


def test_each_side_autotunes_into_a_cache_of_its_own_removed_with_the_session(tmp_path):
    for name in ("base", "cur"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "team.py").write_text(SEEN_ENV)
    spec = SuiteSpec("t", (CaseSpec("team:mm", 4, 8, 8, "fp32"),), device="cpu", repeats=1, iters=1,
                     timeout_s=300.0)
    notes: list[str] = []
    with WarmSides(spec, notes.append) as sides:
        for name in ("base", "cur", "base", "cur"):  # two runs a side: the same cache both times
            sides.open(name, tmp_path / name)
            run = sides.measure(name)
            assert list(run.values) == [("team:mm", "4x8x8", "fp32")], notes
        sides.close("base")
        sides.open("base", tmp_path / "base")  # reopened (a bisect slot's commit again): the same cache
        sides.measure("base")
    seen = {name: set((tmp_path / name / "seen.txt").read_text().splitlines()) for name in ("base", "cur")}
    (base,), (cur,) = seen["base"], seen["cur"]
    base_dir, cur_dir = (Path(line.split("|")[0]) for line in (base, cur))
    assert base.endswith("|1") and cur.endswith("|1") and base_dir != cur_dir
    assert base_dir.parent == cur_dir.parent and base_dir.parent.name.startswith("perfci-sides-")
    assert not base_dir.parent.exists()  # removed with the session
