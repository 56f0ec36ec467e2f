"""Which bisect the night starts: from warm workers (bisect --suite), or a perfci run per bench run."""
from __future__ import annotations

import pytest

from perfci.nightly.stages import _warm_bench_args


@pytest.mark.parametrize("words, warm", [
    ((), []),
    (("--repeats", "1", "--iters", "60"), ["--repeats", "1", "--iters", "60"]),
    (("--iters=40",), ["--iters", "40"]),
    (("--repeats", "3", "--isolation", "shared"), None),  # another perfci run option: a run per bench run
    (("--timer", "profiler"), None),
    (("--repeats",), None),  # a value missing: perfci run says so itself
])
def test_bench_args_of_only_repeats_and_iters_go_to_the_warm_bisect(words, warm):
    assert _warm_bench_args(words) == warm
