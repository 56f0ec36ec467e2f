"""Fixtures: synthetic repos with a planted slowdown, and a bench-run counter outside them."""
from __future__ import annotations

import pytest

from tests.bisect.synth import dirty_the_tree, make_history


@pytest.fixture(autouse=True)
def seeded_bench_noise(tmp_path, monkeypatch):
    """Every synthetic bench run draws seeded noise (see synth.py): no test flips on a bad draw."""
    monkeypatch.setenv("BENCH_SEED_FILE", str(tmp_path / "bench-seed.txt"))


@pytest.fixture
def history_factory(tmp_path):
    def build(n_commits=50, culprit_index=None, step=0.05, dirty=True, seed=0, **kwargs):
        import random

        culprit_index = culprit_index or random.Random(seed).randrange(2, n_commits + 1)
        history = make_history(tmp_path / "repo", n_commits, culprit_index, step, **kwargs)
        if dirty:
            dirty_the_tree(history.path)
        return history

    return build


@pytest.fixture
def counter(tmp_path):
    path = tmp_path / "bench-runs.txt"  # outside the repo, so it never dirties the tree

    def count() -> int:
        return len(path.read_text().splitlines()) if path.exists() else 0

    count.env = {"BENCH_COUNTER": str(path)}
    return count
