"""End to end through ``python -m perfci bisect`` on synthetic repos with dirty trees."""
from __future__ import annotations

import time

import pytest

from tests.bisect.clihelp import one_clean_line, parse_json, perfci
from tests.bisect.synth import git, snapshot


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_finds_the_culprit_and_restores_everything(history_factory, tmp_path):
    h = history_factory(n_commits=50, seed=11, legacy_until=20)
    before = snapshot(h.path)
    plot = tmp_path / "bisect.png"
    result = perfci(h.path, "--format", "json", "--plot", str(plot), h.good, "main", "--", "./bench.py")
    assert result.returncode == 0, result.stderr
    report = parse_json(result.stdout)
    assert report["culprit"]["sha"] == h.culprit
    assert report["culprit"]["subject"].startswith("shrink BLOCK_K")
    assert "base.txt" in report["culprit"]["diffstat"]
    assert {"good", "bad", "steps"} <= set(report)
    assert all({"sha", "samples", "verdict"} <= set(step) for step in report["steps"])
    low, high = report["culprit_interval"]["low_pct"], report["culprit_interval"]["high_pct"]
    assert low < 5.0 < high or abs(report["culprit_interval"]["estimate_pct"] - 5.0) < 1.5
    # git bisect saw every verdict, so its log names the same commit.
    assert f"# first bad commit: [{h.culprit}]" in report["bisect_log"]
    assert plot.stat().st_size > 10_000
    assert snapshot(h.path) == before


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_text_and_markdown_reports(history_factory):
    h = history_factory(n_commits=12, culprit_index=7, dirty=False)
    text = perfci(h.path, h.good, h.bad, "--", "./bench.py")
    assert text.returncode == 0 and f"first bad commit: {h.culprit}" in text.stdout
    assert "GOOD (endpoint)" in text.stdout and "<- first bad" in text.stdout
    markdown = perfci(h.path, "--format", "markdown", h.good, h.bad, "--", "./bench.py")
    assert markdown.stdout.startswith("## perfci bisect") and "| `" in markdown.stdout


def test_higher_is_better_regex_metric(history_factory):
    # Same history, read as a throughput that *rises* at the culprit: that is a speedup, so
    # with --higher-is-better the endpoints look swapped.
    h = history_factory(n_commits=10, culprit_index=4, dirty=False)
    result = perfci(h.path, "--metric", r"time: ([\d.]+)", "--higher-is-better", h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 3 and "swapped" in result.stdout


def test_no_real_difference_exits_3_with_numbers(history_factory):
    h = history_factory(n_commits=10, culprit_index=4, step=0.0)
    before = snapshot(h.path)
    result = perfci(h.path, h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 3
    assert "GOOD -> BAD" in result.stdout and "paired rounds" in result.stdout
    assert snapshot(h.path) == before


def test_small_difference_below_min_effect(history_factory):
    h = history_factory(n_commits=10, culprit_index=4, step=0.05, dirty=False)
    result = perfci(h.path, "--min-effect", "10", h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 3 and "no slowdown past --min-effect 10%" in result.stdout


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_all_skipped_range_names_the_candidates(history_factory):
    h = history_factory(n_commits=12, culprit_index=6, broken=(4, 5, 6, 7, 8))
    before = snapshot(h.path)
    result = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 2, result.stderr
    report = parse_json(result.stdout)
    assert report["status"] == "all-skipped"
    assert h.culprit in report["candidates"]
    # Commits 4-8 are broken; 3 is the last good, 9 the first measurable bad.
    assert set(report["candidates"]) == set(h.commits[3:9])
    assert snapshot(h.path) == before


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_skips_around_a_broken_commit_still_find_the_culprit(history_factory):
    h = history_factory(n_commits=16, culprit_index=9, broken=(8,), dirty=False)
    result = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 2 or parse_json(result.stdout)["culprit"]["sha"] == h.culprit
    # Commit 8 cannot be measured, so the answer is "8 or 9": exit 2 naming both, or 9 itself.
    report = parse_json(result.stdout)
    if result.returncode == 2:
        assert set(report["candidates"]) == {h.commits[7], h.commits[8]}


def test_a_commit_whose_build_hangs_is_skipped_at_build_timeout_and_everything_is_restored(history_factory):
    h = history_factory(n_commits=4, culprit_index=3, broken=(2,))
    before = snapshot(h.path)
    started = time.monotonic()
    result = perfci(h.path, "--format", "json", "--build", "if [ -e broken.txt ]; then sleep 30; fi",
                    "--build-timeout", "1", h.good, h.bad, "--", "./bench.py")
    assert time.monotonic() - started < 25.0  # the hung build was not waited for
    report = parse_json(result.stdout)
    # Commit 2 is skipped as a failed build is, so the answer is "2 or 3": exit 2 naming both.
    (hung,) = [step for step in report["steps"] if step["sha"] == h.commits[1]]
    assert hung["verdict"] == "skip" and hung["reason"] == "build did not finish in 1 s (--build-timeout)"
    assert result.returncode == 2 and set(report["candidates"]) == {h.commits[1], h.commits[2]}
    assert snapshot(h.path) == before


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_cache_means_a_rerun_measures_nothing(history_factory, counter):
    h = history_factory(n_commits=30, seed=3)
    first = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", env=counter.env)
    assert first.returncode == 0
    runs = counter()
    assert runs == parse_json(first.stdout)["bench_runs"] > 0
    second = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", env=counter.env)
    assert second.returncode == 0
    assert counter() == runs
    assert parse_json(second.stdout)["culprit"]["sha"] == parse_json(first.stdout)["culprit"]["sha"]


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_jobs_2_uses_worktrees_and_never_touches_the_tree(history_factory, counter):
    h = history_factory(n_commits=16, seed=5, legacy_until=10)
    before = snapshot(h.path)
    result = perfci(h.path, "--format", "json", "--jobs", "2", "--gpus", "0,1", h.good, h.bad, "--", "./bench.py",
                    env=counter.env)
    assert result.returncode == 0, result.stderr
    assert parse_json(result.stdout)["culprit"]["sha"] == h.culprit
    assert snapshot(h.path) == before  # includes `git worktree list`: the temp worktrees are gone
    assert "worktrees under" in result.stderr


def test_timeout_counts_as_failed_run(history_factory, tmp_path):
    h = history_factory(n_commits=6, culprit_index=3, dirty=False)
    result = perfci(h.path, "--timeout", "0.5", h.good, h.bad, "--", "bash", "-c", "sleep 30; echo 1")
    assert result.returncode == 2
    assert "timed out" in one_clean_line(result.stderr)


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_csv_metric_through_a_results_file(history_factory):
    h = history_factory(n_commits=10, culprit_index=5, dirty=False)
    writer = (
        "import subprocess, sys; t = subprocess.run(['./bench.py'], capture_output=True, text=True).stdout.split()[-2];"
        "open(sys.argv[sys.argv.index('--out') + 1], 'w').write("
        "'kernel,shape,dtype,median_us,repeats_us,status\\nmatmul_tiled,64x64x64,fp16,' + t + ',' + t + ',ok\\n"
        "gemv,1x64x64,fp16,1.0,1.0,ok\\n')"
    )
    import sys

    result = perfci(h.path, "--csv-column", "median_us", "--case", "matmul_tiled,64x64x64,fp16",
                    "--format", "json", h.good, h.bad, "--", sys.executable, "-c", writer, "--out", "r.csv")
    assert result.returncode == 0, result.stderr
    assert parse_json(result.stdout)["culprit"]["sha"] == h.culprit


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_bench_output_over_a_users_untracked_file_leaves_the_users_file(history_factory):
    """The README's own example writes r.csv; a user may have an r.csv of their own."""
    h = history_factory(n_commits=10, culprit_index=5)  # dirty tree, tracked edits included
    (h.path / "r.csv").write_text("the user's own results, not the bench's\n")
    before = snapshot(h.path)
    writer = (
        "import subprocess, sys; t = subprocess.run(['./bench.py'], capture_output=True, text=True).stdout.split()[-2];"
        "open('r.csv', 'w').write('kernel,shape,dtype,median_us,repeats_us,status\\nk,1x1x1,fp16,' + t + ',' + t + ',ok\\n');"
        "open('extra-artifact.log', 'w').write('bench log')"
    )
    import sys

    result = perfci(h.path, "--csv-column", "median_us", "--case", "k,1x1x1,fp16", "--format", "json",
                    h.good, h.bad, "--", sys.executable, "-c", writer, "--out", "r.csv")
    assert result.returncode == 0, result.stderr
    assert parse_json(result.stdout)["culprit"]["sha"] == h.culprit
    assert snapshot(h.path) == before  # the bench wrote its r.csv in the worktrees, never over the user's


# --------------------------------------------------------------------------- bad input


def _bad_input_cases(h):
    return {
        "unknown ref": ([ "nosuchref", h.bad, "--", "./bench.py"], "not a commit"),
        "not an ancestor": ([h.bad, h.good, "--", "./bench.py"], "not an ancestor"),
        "same commit": ([h.good, h.good, "--", "./bench.py"], "same commit"),
        "no bench command": ([h.good, h.bad], "no bench command"),
        "missing bench": ([h.good, h.bad, "--", "./nope.sh"], "does not exist"),
        "not on PATH": ([h.good, h.bad, "--", "no-such-program-xyz"], "not on PATH"),
        "no metric": ([h.good, h.bad, "--", "echo", "hello"], "no number on stdout"),
        "a gone option": (["--repeats", "5", h.good, h.bad, "--", "./bench.py"], "are gone"),
        "no budget": (["--budget", "0", h.good, h.bad, "--", "./bench.py"], "--budget: 0 must be a positive number of seconds"),
        "no build time": (["--build", "true", "--build-timeout", "0", h.good, h.bad, "--", "./bench.py"],
                          "--build-timeout: 0 must be a positive number of seconds"),
        "too few rounds": (["--min-rounds", "1", h.good, h.bad, "--", "./bench.py"], "at least 2"),
        "csv without case": (["--csv-column", "median_us", h.good, h.bad, "--", "./bench.py"], "go together"),
        "bad regex": (["--metric", "(", h.good, h.bad, "--", "./bench.py"], "not a valid regex"),
        "unknown option": (["--no-such-option", h.good, h.bad, "--", "./bench.py"], "unrecognized"),
    }


def test_bad_input_is_one_line_exit_2_tree_untouched(history_factory):
    h = history_factory(n_commits=5, culprit_index=3)
    (h.path / "noexec.sh").write_text("#!/bin/sh\necho 1\n")
    before = snapshot(h.path)
    cases = _bad_input_cases(h)
    cases["not executable"] = ([h.good, h.bad, "--", "./noexec.sh"], "not executable")
    for name, (argv, expected) in cases.items():
        result = perfci(h.path, *argv)
        assert result.returncode == 2, (name, result.stderr)
        assert expected in one_clean_line(result.stderr), name
        assert snapshot(h.path) == before, name


def test_refuses_during_a_merge_and_a_running_bisect(history_factory):
    h = history_factory(n_commits=5, culprit_index=3, dirty=False)
    git(h.path, "bisect", "start")
    result = perfci(h.path, h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 2 and "git bisect is already running" in one_clean_line(result.stderr)
    git(h.path, "bisect", "reset")
    (h.path / ".git" / "MERGE_HEAD").write_text(h.good + "\n")
    result = perfci(h.path, h.good, h.bad, "--", "./bench.py")
    assert result.returncode == 2 and "merge is in progress" in one_clean_line(result.stderr)


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_an_ignored_file_tracked_in_history_is_left_alone(history_factory):
    """Checkout overwrote such a file without a word; commits now run in worktrees, never in the user's tree."""
    h = history_factory(n_commits=5, culprit_index=3, dirty=False)
    (h.path / ".gitignore").write_text("build/\nlog.txt\n")
    git(h.path, "rm", "-q", "--cached", "log.txt")
    git(h.path, "commit", "-qam", "stop tracking log.txt")
    (h.path / "log.txt").write_text("the user's own log, ignored now\n")
    before = snapshot(h.path)
    result = perfci(h.path, h.good, "HEAD", "--", "./bench.py")
    assert result.returncode in (0, 3), result.stderr
    assert snapshot(h.path) == before


@pytest.mark.parametrize("flag", ["--abort", "--resume"])
def test_abort_without_a_journal_says_so(history_factory, flag):
    h = history_factory(n_commits=3, culprit_index=2, dirty=False)
    result = perfci(h.path, flag)
    assert result.returncode == 2 and "nothing to abort" in one_clean_line(result.stderr)


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~10 s on a loaded 2-core machine
def test_a_report_redirected_into_the_repo_lands_there_and_nothing_else_moves(history_factory):
    """The stash once swallowed it; with worktrees the user's tree, and the file the shell opened, stay."""
    import subprocess
    import sys

    h = history_factory(n_commits=6, culprit_index=3)
    before = snapshot(h.path)
    report = h.path / "report.json"
    with open(report, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "perfci", "bisect", "--format", "json", h.good, h.bad, "--",
                               "./bench.py"], cwd=h.path, stdout=out, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert parse_json(report.read_text())["culprit"]["sha"] == h.culprit
    report.unlink()
    assert snapshot(h.path) == before


def test_a_bench_run_has_a_timeout_unless_told_otherwise():
    from perfci.bisect import cli as bisect_cli
    from perfci.cli import build_parser

    def bench(*words: str):
        args = build_parser().parse_args(["bisect", "v1", "HEAD", *words, "--", "./bench.sh"])
        bisect_cli._split_command(args)
        return bisect_cli._config(args, lambda phase: None).bench

    assert bench().timeout == 1800
    assert bench("--timeout", "7").timeout == 7
    assert bench().build_timeout == 1800 and bench("--build", "make", "--build-timeout", "90").build_timeout == 90


def test_the_total_budget_stops_a_hung_run_in_flight(history_factory, tmp_path):
    from tests.proc_util import wait_until_dead

    h = history_factory(n_commits=4, culprit_index=2)
    before = snapshot(h.path)
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = perfci(h.path, "--budget", "10", "--total-budget", "2", h.good, h.bad, "--", "bash", "-c",
                    f"sleep 3334 & echo $! >> {pids}; wait; echo 1", timeout=60)
    assert time.monotonic() - started < 45  # 2 s and a grace of 1 s, on a loaded machine; not the 1800 s timeout
    # GOOD's run stopped at the budget's end: undecided for time (exit 3), the reason in the report
    assert result.returncode == 3, result.stderr
    assert "the --total-budget 2 s ran out" in result.stdout and "Traceback" not in result.stderr
    assert all(wait_until_dead(int(pid), timeout=2) for pid in pids.read_text().split())
    assert snapshot(h.path) == before


def test_a_total_budget_that_ends_in_good_s_build_is_undecided_not_bad_input(history_factory):
    # A late night gives bisect little time; GOOD's build still going at its end is a bisect undecided
    # for time (exit 3), not "no metric from the bench at GOOD" (exit 2, as if the input were wrong).
    h = history_factory(n_commits=4, culprit_index=3)
    before = snapshot(h.path)
    started = time.monotonic()
    result = perfci(h.path, "--format", "json", "--build", "sleep 30", "--total-budget", "1", h.good, h.bad,
                    "--", "./bench.py")
    assert time.monotonic() - started < 25.0
    assert result.returncode == 3, result.stderr[-2000:]
    report = parse_json(result.stdout)
    assert report["status"] != "culprit" and "--total-budget 1 s ran out" in result.stdout
    assert snapshot(h.path) == before
