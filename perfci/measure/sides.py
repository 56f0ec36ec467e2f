"""Sides: each revision of a session measured from a warm worker of its own, no interpreter per run.

A *side* is a revision checked out in a worktree (built once by its caller) and
measured by a long-lived :class:`perfci.measure.runner.CaseRunner` rooted
there: it has imported torch and perfci once, and imports the kernel modules
the revision's ``[tool.perfci]`` names from the revision's own tree, while the
worker's perfci is this one. ``perfci confirm --suite`` measures its two sides
this way for a whole session, and ``perfci bisect --suite`` one side per commit
it measures (the least recently used closed when its slot's trees move on).

Why: with a bench command, every run is a fresh process. On the H200's host a
one-case ``perfci run`` costs 10-20 s, most of it importing torch, opening the
device and (for an autotuned kernel) autotuning again; a confirm round of four
runs cost a minute, a bisect over three commits nine. From a warm worker a run
is the case's own measuring (correctness check, warm-up, gated repeats), the
same method as ``perfci run``.

Isolation. A process that measures a case many times gives it a time offset of
its own: on the H200, ``shared`` workers (one process per revision for the whole
session) put 0.25-0.5 us on every 9-16 us decode kernel, +2 to +3.4% fixed for the
session and different for the next process (large GEMMs: within +-0.2%); one
side's worker against the other's reads as a regression that no number of
rounds removes (benchmarks/results/h200-2026-11-30c). The default is ``run``:
the worker imports torch once and forks a fresh process, with its own device
context, for every run of a side. ``fork`` forks per case and run (11 s per run
of eight cases on the H200, against 2.6 s shared).

Forked children are not independent of their parent: they inherit its address
layout, allocator and thread-pool state and environment, so a worker that serves
a side for the whole session still gives every run of that side one offset (a
plain PyTorch GEMM on the CPU: identical code called changed by 3-5% in 2 of 4
confirm sessions, benchmarks/results/cpu-confirm-aa-2026-12-03). Hence :meth:`WarmSides.renew`: the session's round loop calls
it before every round, and each side's runs in that round come from a new worker
(a new interpreter, a new random environment size, so a new layout). The round is
the unit every interval is built from, so the process's own variance is inside
the interval instead of becoming a verdict. The cost is one worker start a side a
round (importing torch and the kernel modules; the compiled kernels and the
autotune choice come from the side's cache folder, below).

Autotuning. Triton's ``@triton.autotune`` benchmarks its configs again in every
new process, and a close race can go either way: each run of a side would then
measure whichever config won in that process. Each side gets a Triton cache
folder of its own for the session, with ``TRITON_CACHE_AUTOTUNING`` on, so the
side's first run autotunes and its later runs (new processes) load that choice:
the rounds measure the code, not the race, and stop paying for it. The choice
is never carried to another revision (its own folder), and the folder goes
with the session.
"""
from __future__ import annotations

import hashlib
import random
import tempfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from perfci import git
from perfci.benchcmd import Deadline
from perfci.errors import PerfciError
from perfci.measure.runner import CaseRunner, RunOptions, gpu_lock
from perfci.model import CaseResult, CaseSpec, Environment
from perfci.results import read_results, render_rows_csv, result_to_row
from perfci.suites import load_case_keys, load_suite, project_root, select_cases

CaseKey = tuple[str, ...]
LIMIT_FACTOR = 10.0  # a case's own timeout: this many times its longest ok run on either side ...
LIMIT_FLOOR_S = 60.0  # ... and never less


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


@dataclass(frozen=True)
class SideRun:
    """One run of a side: each case's median (ok cases only), why there is none when none was ok, and
    each case that did not end ``ok`` with why (its status and message)."""

    values: Mapping[CaseKey, float]
    why_not: str = ""
    failed: Mapping[CaseKey, str] = field(default_factory=dict)


def autotune_env(cache_dir: Path) -> dict[str, str]:
    """The environment that makes Triton autotune once per side and keep the choice (module docstring)."""
    return {"TRITON_CACHE_DIR": str(cache_dir), "TRITON_CACHE_AUTOTUNING": "1"}


class WarmSides:
    """Warm workers for the sides of one session; a context manager.

    ``open(name, path)`` starts the worker of the revision checked out at
    ``path`` (nothing when it is open already); ``measure(name)`` runs the
    suite's cases (or some of them) once there. With ``capacity``, at most that
    many workers are up at once and the least recently used one closes first;
    ``close(name)`` closes one whose checkout is about to change. ``env`` goes on
    top of this process's environment for every worker (a bisect slot's GPU).
    """

    def __init__(self, spec: SuiteSpec, note: Callable[[str], None], capacity: int | None = None,
                 env: Mapping[str, str] | None = None):
        self.spec = spec
        self._note = note
        self._capacity = capacity
        self._env = dict(env or {})
        self._runners: OrderedDict[str, CaseRunner] = OrderedDict()
        self._paths: dict[str, Path] = {}  # side -> its checkout: a renewed side's worker restarts there
        self._wall_s: dict[CaseKey, float] = {}  # case -> its longest ok run on any side, in seconds
        self._stack = ExitStack()
        self._tmp: Path | None = None
        self._locked = False
        self.device = ""
        self.first: dict[str, dict[CaseKey, tuple]] = {}  # side -> case -> (CaseResult, env) of its first ok run

    def limits(self) -> dict[CaseKey, float]:
        """Each case's own timeout once a side has measured it: :data:`LIMIT_FACTOR` times its longest ok
        run (its first one, compile and autotune included), at least :data:`LIMIT_FLOOR_S`. A case that
        hangs on one side is then that side's timeout, well inside the session's budget, instead of
        the spec's ``timeout_s`` (600 s by default, as long as a whole confirm budget)."""
        return {key: max(LIMIT_FLOOR_S, LIMIT_FACTOR * wall) for key, wall in self._wall_s.items()}

    def renew(self, upcoming: Sequence[tuple[str, Path]] = ()) -> None:
        """Close every worker (module docstring), and start the ``upcoming`` round's sides' new ones
        together; any other side's next :meth:`measure` starts its own. A start that fails here is
        left to that side's next measure, which says it where the side's failures are said."""
        for name in list(self._runners):
            self.close(name)
        try:
            self.open_all(upcoming)
        except PerfciError:
            pass

    def __enter__(self) -> "WarmSides":
        self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="perfci-sides-")))
        return self

    def __exit__(self, *exc) -> None:
        try:
            while self._runners:
                self.close(next(iter(self._runners)))
        finally:
            self._stack.close()

    def open(self, name: str, path: Path) -> None:
        self.open_all([(name, path)])

    def open_all(self, sides: Sequence[tuple[str, Path]]) -> None:
        """Start the workers of these sides that are not up, at once: each start is mostly waiting for a
        new interpreter to import torch and the kernels, so a round's workers start in the time of one."""
        new = [(name, Path(path)) for name, path in dict(sides).items() if name not in self._runners]
        for name, _ in sides:
            if name in self._runners:
                self._runners.move_to_end(name)
        if not new:
            return
        if self._tmp is None:
            raise RuntimeError("WarmSides is a context manager: enter it first")
        while self._capacity and self._runners and len(self._runners) + len(new) > self._capacity:
            self.close(next(iter(self._runners)))
        pool = ThreadPoolExecutor(max_workers=len(new))
        started = [pool.submit(self._start, name, path) for name, path in new]
        try:
            runners = [f.result() for f in started]
        except BaseException:  # a start that failed, or Ctrl-C: no worker this session holds is left running
            pool.shutdown(wait=True)
            for f in started:
                if f.exception() is None:
                    f.result()[0].__exit__(None, None, None)
            raise
        pool.shutdown(wait=False)
        for (name, path), (runner, device) in zip(new, runners):
            if device == "cuda" and not self._locked:  # one lock for the session: no other perfci job measures
                try:
                    lock = gpu_lock(runner.options.lock_timeout_s, self._note, self._env or None)
                except BaseException:
                    for r, _ in runners:
                        r.__exit__(None, None, None)
                    raise
                self._stack.callback(lock.release)
                self._locked = True
            self.device = device
            self._paths[name] = path
            self._runners[name] = runner

    def _start(self, name: str, path: Path) -> tuple[CaseRunner, str]:
        """A started worker for side ``name`` at checkout ``path``, and the device it measures on."""
        spec = self.spec
        cache = self._tmp / hashlib.sha256(name.encode()).hexdigest()[:16]
        cache.mkdir(exist_ok=True)  # kept when the worker closes: a reopened side keeps its choice
        options = RunOptions(iters=spec.iters, repeats=spec.repeats, timeout_s=spec.timeout_s,
                             isolation=spec.isolation)
        # The revision's project root: its [tool.perfci] names the kernel modules, imported from there.
        # A random environment size per worker: what the environment's size does to the stack's
        # and the heap's alignment becomes noise across workers, not a side's constant.
        pad = {"PERFCI_LAYOUT_PAD": "x" * random.randrange(4096)}
        runner = CaseRunner(options, path / spec.project_subdir, env={**self._env, **autotune_env(cache), **pad})
        runner.__enter__()
        try:
            device = runner.resolve_device(spec.device)
            if device not in spec.devices:
                raise PerfciError(f"suite '{spec.suite}' is sized for {', '.join(spec.devices)}, and no "
                                  f"GPU is in use here")
            fast = device == "cuda"
            runner.options = replace(options, device=device, warmup_min_s=0.1 if fast else 0.05,
                                     warmup_max_s=1.5 if fast else 0.5)
        except BaseException:
            runner.__exit__(None, None, None)
            raise
        return runner, device

    def close(self, name: str) -> None:
        runner = self._runners.pop(name, None)
        if runner is not None:
            runner.__exit__(None, None, None)

    def measure(self, name: str, cases: Sequence[CaseSpec] | None = None,
                deadline: Deadline | None = None) -> SideRun:
        """One run of side ``name`` (opened before): each ok case's median in us.

        ``deadline``: the session's budget; a case runs at most until it (``CaseRunner.run``).

        A case that did not end ``ok`` is left out of the run's values and said
        on the progress line, as a failed bench run is in the command mode.
        """
        results: list[CaseResult] = []
        envs: list[dict | None] = []

        def done(i, result, raw):
            results.append(result)
            envs.append(raw.get("env"))
            if result.status == "ok" and raw.get("wall_s"):
                key = result.spec.key
                self._wall_s[key] = max(self._wall_s.get(key, 0.0), raw["wall_s"])

        if name not in self._runners:  # renewed (or closed by capacity): a new worker at its checkout
            self.open(name, self._paths[name])
        runner = self._runners[name]
        self._runners.move_to_end(name)
        runner.run(tuple(cases) if cases is not None else self.spec.cases, done, deadline=deadline,
                   limits=self.limits())
        values = {r.spec.key: float(r.median_us) for r in results if r.status == "ok" and r.median_us}
        first = self.first.setdefault(name, {})
        for r, env in zip(results, envs):  # each case's first ok run per side: what --explain reads
            if r.status == "ok" and env and r.spec.key not in first:
                first[r.spec.key] = (r, env)
        failed = {r.spec.key: f"{r.status} {r.message}".strip() for r in results if r.status != "ok"}
        for key, why in failed.items():
            self._note(f"{' '.join(key)} at {name}: {why}")
        if values:
            return SideRun(values, "", failed)
        first = next(iter(failed.values()), "")
        return SideRun({}, f"no case measured: {first}" if first else "no case measured", failed)


def first_rows(first: dict[str, dict[CaseKey, tuple]], suite: str) -> dict[str, dict]:
    """side -> {case key: ResultRow} of each case's first ok run, as ``perfci run`` would have written it
    (launch, resources, clocks, versions): the two sides ``compare --explain`` puts next to each other."""
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="perfci-sides-") as tmp:
        for side, cases in first.items():
            rows = [result_to_row(result, Environment(**env), suite) for result, env in cases.values()]
            if rows:
                path = Path(tmp) / f"{len(out)}.csv"
                path.write_text(render_rows_csv(rows), encoding="utf-8")
                out[side] = read_results(path).by_key()
    return out


def suite_spec(suite: str, filter_expr: str | None, cases_file: str | None, device: str,
               repeats: int, timeout_s: float | None, isolation: str = "run",
               case: str | None = None, start: str | Path | None = None) -> SuiteSpec:
    """Load and select the cases from the current checkout's suites (as ``perfci run`` does).

    ``case`` names one case as bisect's ``--case`` does: ``kernel,shape,dtype``
    exactly, or a substring unique in ``kernel shape dtype``. ``start``: where
    the project is looked for (default: the working directory).
    """
    root = project_root(start)
    loaded = load_suite(suite, root)
    keys = load_case_keys(cases_file) if cases_file else None
    if keys is not None and not keys:
        raise PerfciError(f"--cases {cases_file}: no case to measure (every case was unchanged)")
    cases = select_cases(loaded.cases, filter_expr, None, keys)
    if case is not None:
        cases = [one_case(cases, case, loaded.name)]
    if not cases:
        raise PerfciError(f"no case of suite '{loaded.name}' matches --filter/--cases")
    if not 1 <= repeats <= 50:
        raise PerfciError(f"--repeats {repeats}: use 1..50")
    return SuiteSpec(loaded.name, tuple(cases), tuple(loaded.devices), device, repeats,
                     timeout_s=timeout_s if timeout_s is not None else 600.0, isolation=isolation,
                     project_subdir=below_top(root))


def one_case(cases: Sequence[CaseSpec], case: str, suite: str) -> CaseSpec:
    """The one case ``case`` names (``kernel,shape,dtype``, or a unique substring of ``kernel shape dtype``)."""
    parts = tuple(p.strip() for p in case.split(","))
    if len(parts) == 3:
        matches = [c for c in cases if c.key == parts]
    else:
        matches = [c for c in cases if case in " ".join(c.key)]
    if not matches:
        raise PerfciError(f"--case {case!r}: no case of suite '{suite}' matches it")
    if len(matches) > 1:
        names = ", ".join(",".join(c.key) for c in matches[:3])
        raise PerfciError(f"--case {case!r} matches {len(matches)} cases of suite '{suite}' ({names}, ...); "
                          f"be more specific")
    return matches[0]


def below_top(root: Path) -> str:
    """``root`` relative to its repository's top ("" at the top, or outside any repository)."""
    top = git.toplevel(root)
    if top is None or not root.resolve().is_relative_to(top.resolve()):
        return ""
    rel = root.resolve().relative_to(top.resolve()).as_posix()
    return "" if rel == "." else rel
