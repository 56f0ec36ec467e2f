"""Cheap rounds: each revision measured from its own warm worker, no interpreter per run.

With a bench command, every run of a round is a fresh process: on the H200's
host a small ``perfci run`` costs 15-20 s, most of it importing torch and
opening the device, so a round of four runs costs a minute before anything is
measured. With ``--suite``, confirm starts one worker per revision for the whole
session (:class:`perfci.measure.runner.CaseRunner` with that revision's worktree
as the project root, so the kernel modules its ``[tool.perfci]`` names are
imported from the revision while the worker's perfci is this one) and a run is just the cases' measurements, the
same method as ``perfci run`` (correctness check, warm-up, gated repeats).

Isolation. A process that measures a case many times gives it a time offset of
its own: on the H200, ``shared`` workers (one process per revision for the whole
session) put 0.25-0.5 us on every 9-16 us decode kernel, +2 to +3.4% fixed for the
session and different for the next process (large GEMMs: within +-0.2%); one
side's worker against the other's reads as a regression that no number of
rounds removes (benchmarks/results/h200-2026-11-30c). So the default is
``fork``: the worker imports torch once and forks a fresh process, with its own
device context, for every case of every run, and the offset becomes run-to-run
noise that the rounds average, as with a fresh ``perfci run`` per run, at a
fraction of its cost (no interpreter, no imports). It costs a device context per
case: 11 s per run of eight cases on the H200, against 2.6 s shared. ``run``
forks one process per run instead (a fresh context per run, as a fresh ``perfci
run`` has); it should randomise the offset as well, and is not yet measured on a GPU.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from perfci.errors import PerfciError
from perfci.model import CaseSpec


@dataclass(frozen=True)
class SuiteSpec:
    """What ``--suite`` measures: the cases, on which device, with which method."""

    suite: str
    cases: tuple[CaseSpec, ...]
    devices: tuple[str, ...] = ("cuda", "cpu")  # what the suite is sized for
    device: str = "auto"  # auto | cuda | cpu
    repeats: int = 7
    iters: int = 70
    timeout_s: float = 600.0
    isolation: str = "run"  # run: a process per run; fork: per case and run; shared: per revision
    project_subdir: str = ""  # the project root below the repository's top: each worktree's is measured


class WarmSides:
    """One warm worker per side, for a whole confirm session; a context manager.

    ``measure(side) -> ({case key: median us}, why-not)``; a case that did not
    end ``ok`` on that run is left out of the run's values (and said on the
    progress line), as a failed bench run is in the command mode.
    """

    def __init__(self, spec: SuiteSpec, sides: Sequence, note):
        self.spec = spec
        self._sides = list(sides)
        self._note = note
        self._runners: dict[str, object] = {}
        self._stack = ExitStack()
        self.device = ""
        self.first: dict[str, dict[tuple[str, ...], tuple]] = {}  # side -> case -> (CaseResult, env)

    def __enter__(self) -> "WarmSides":
        from perfci.measure.runner import CaseRunner, RunOptions, gpu_lock

        spec = self.spec
        options = RunOptions(iters=spec.iters, repeats=spec.repeats, timeout_s=spec.timeout_s,
                             isolation=spec.isolation)
        try:
            for side in self._sides:
                # The revision's project root: its [tool.perfci] names the kernel modules, imported from there.
                runner = self._stack.enter_context(CaseRunner(options, Path(side.path) / spec.project_subdir))
                self.device = runner.resolve_device(spec.device)
                if self.device not in spec.devices:
                    raise PerfciError(f"suite '{spec.suite}' is sized for {', '.join(spec.devices)}, and no "
                                      f"GPU is in use here")
                fast = self.device == "cuda"
                runner.options = replace(options, device=self.device, warmup_min_s=0.1 if fast else 0.05,
                                         warmup_max_s=1.5 if fast else 0.5)
                self._runners[side.name] = runner
            if self.device == "cuda":  # one lock for the session: no other perfci job measures meanwhile
                lock = gpu_lock(options.lock_timeout_s, self._note)
                self._stack.callback(lock.release)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def measure(self, side) -> tuple[dict[tuple[str, ...], float], str]:
        results, envs = [], []

        def done(i, result, raw):
            results.append(result)
            envs.append(raw.get("env"))

        self._runners[side.name].run(self.spec.cases, done)
        values = {r.spec.key: float(r.median_us) for r in results if r.status == "ok" and r.median_us}
        first = self.first.setdefault(side.name, {})
        for r, env in zip(results, envs):  # each case's first ok run per side: what --explain reads
            if r.status == "ok" and env and r.spec.key not in first:
                first[r.spec.key] = (r, env)
        for r in results:
            if r.status != "ok":
                self._note(f"{' '.join(r.spec.key)} at {side.name.upper()}: {r.status} {r.message}".strip())
        if not values:
            first = next((r for r in results if r.status != "ok"), None)
            return {}, f"no case measured: {first.status} {first.message}" if first else "no case measured"
        return values, ""


def first_rows(first: dict[str, dict[tuple[str, ...], tuple]], suite: str) -> dict[str, dict]:
    """side -> {case key: ResultRow} of each case's first ok run, as ``perfci run`` would have written it
    (launch, resources, clocks, versions): the two sides ``compare --explain`` puts next to each other."""
    import tempfile

    from perfci.model import Environment
    from perfci.results import read_results, render_rows_csv, result_to_row

    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="perfci-confirm-") as tmp:
        for side, cases in first.items():
            rows = [result_to_row(result, Environment(**env), suite) for result, env in cases.values()]
            if rows:
                path = Path(tmp) / f"{side}.csv"
                path.write_text(render_rows_csv(rows), encoding="utf-8")
                out[side] = read_results(path).by_key()
    return out


def suite_spec(suite: str, filter_expr: str | None, cases_file: str | None, device: str,
               repeats: int, timeout_s: float | None, isolation: str = "run") -> SuiteSpec:
    """Load and select the cases from the current checkout's suites (as ``perfci run`` does)."""
    from perfci.suites import load_case_keys, load_suite, project_root, select_cases

    root = project_root()
    loaded = load_suite(suite, root)
    keys = load_case_keys(cases_file) if cases_file else None
    if keys is not None and not keys:
        raise PerfciError(f"--cases {cases_file}: no case to confirm (every case was unchanged)")
    cases = select_cases(loaded.cases, filter_expr, None, keys)
    if not cases:
        raise PerfciError(f"no case of suite '{loaded.name}' matches --filter/--cases")
    if not 1 <= repeats <= 50:
        raise PerfciError(f"--repeats {repeats}: use 1..50")
    return SuiteSpec(loaded.name, tuple(cases), tuple(loaded.devices), device, repeats,
                     timeout_s=timeout_s if timeout_s is not None else 600.0, isolation=isolation,
                     project_subdir=below_top(root))


def below_top(root: Path) -> str:
    """``root`` relative to its repository's top ("" at the top, or outside any repository)."""
    from perfci import git

    top = git.toplevel(root)
    if top is None or not root.resolve().is_relative_to(top.resolve()):
        return ""
    rel = root.resolve().relative_to(top.resolve()).as_posix()
    return "" if rel == "." else rel
