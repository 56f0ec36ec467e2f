"""The pytest plugin (``pytest11`` entry point ``perfci``): the ``perfci_benchmark`` fixture and options.

Inert unless a test uses the fixture or a ``--perfci-*`` option is given. Every
pytest run where perfci is installed loads it, so it imports pytest and perfci's
light modules only (no torch, no numpy): the measurement (:mod:`perfci.plugin.measuring`),
the verdict (:mod:`perfci.plugin.session`) and ``$PERFCI_CASES`` (:mod:`perfci.suites`)
are imported where they are used (the entry point's seam, as a ``cli.py``'s). See docs/pytest.md.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from perfci.errors import PerfciError
from perfci.model import CaseResult
from perfci.plugin import isolate
from perfci.plugin.cases import BenchmarkUsageError, check_setup, default_tolerance, make_case, reference_kind

_STATE = pytest.StashKey["_State"]()
CASES_ENV = "PERFCI_CASES"  # perfci nightly narrows a bench run to the cases it confirms or bisects


@dataclass
class SessionRows:
    """The rows measured so far, in order, keyed by case."""

    rows: list[dict[str, str]] = field(default_factory=list)
    owners: dict[tuple[str, str, str], str] = field(default_factory=dict)  # key -> test node id

    def claim(self, key: tuple[str, str, str], nodeid: str) -> str | None:
        """Record that ``nodeid`` measures ``key``; the other test's id if one already did."""
        other = self.owners.get(key)
        if other is not None and other != nodeid:
            return other
        self.owners[key] = nodeid
        return None

    def add(self, row: dict[str, str]) -> None:
        key = (row["kernel"], row["shape"], row["dtype"])
        self.rows = [r for r in self.rows if (r["kernel"], r["shape"], r["dtype"]) != key] + [row]


class _State:
    def __init__(self, config: pytest.Config):
        opt = config.option
        self.config = config
        self.out: str | None = opt.perfci_out
        self.base: str | None = opt.perfci_compare
        self.disabled: bool = opt.perfci_disable
        self.isolate: bool = opt.perfci_isolate
        self.timeout_s: float = opt.perfci_timeout
        self.asked_device: str = opt.perfci_device
        self.device: str | None = None
        self.env = None
        self.rows = SessionRows()
        self.verdict_text = ""
        self.problem = ""
        self.wanted = wanted_cases()  # $PERFCI_CASES: only these cases are measured (None: every case)

    def resolve(self) -> str:
        from perfci.plugin.measuring import resolve_device  # lazy: cost (the measuring stack)

        if self.device is None:
            self.device = resolve_device(self.asked_device)
        return self.device


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfci", "perfci benchmarks (the perfci_benchmark fixture; docs/pytest.md)")
    group.addoption("--perfci-out", metavar="PATH", help="write the benchmarks' perfci results CSV here")
    group.addoption("--perfci-compare", metavar="BASE.csv",
                    help="judge the session against BASE (as perfci compare); exit 6 on a regression")
    group.addoption("--perfci-disable", action="store_true",
                    help="run each benchmark's function once, as a plain test (nothing timed)")
    group.addoption("--perfci-device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="where to measure: cuda (a GPU, ROCm too), cpu (host timing, the Triton "
                         "interpreter), auto: the GPU when torch sees one (default)")
    group.addoption("--perfci-isolate", action="store_true",
                    help="measure each benchmark test in a process of its own (a crash or hang costs one case)")
    group.addoption("--perfci-timeout", type=float, default=600.0, metavar="S",
                    help="with --perfci-isolate: seconds one benchmark test may take (default 600)")


def pytest_configure(config: pytest.Config) -> None:
    opt = config.option
    if opt.perfci_disable and (opt.perfci_out or opt.perfci_compare or opt.perfci_isolate):
        raise pytest.UsageError("--perfci-disable measures nothing: drop --perfci-out, --perfci-compare "
                                "and --perfci-isolate, or --perfci-disable")
    if not opt.perfci_timeout > 0:
        raise pytest.UsageError(f"--perfci-timeout {opt.perfci_timeout:g}: give a positive number of seconds")
    if opt.perfci_out:
        parent = os.path.dirname(os.path.abspath(opt.perfci_out))
        if not os.path.isdir(parent) or os.path.isdir(opt.perfci_out):
            raise pytest.UsageError(f"--perfci-out {opt.perfci_out}: not a file in an existing directory")
    if opt.perfci_compare:
        from perfci.plugin.session import check_baseline  # lazy: numpy

        try:
            check_baseline(opt.perfci_compare)
        except PerfciError as err:
            raise pytest.UsageError(str(err)) from None
    try:
        state = _State(config)
    except PerfciError as err:
        raise pytest.UsageError(f"${CASES_ENV}: {err}") from None
    if opt.perfci_device != "auto" and not opt.perfci_disable:
        try:
            state.resolve()  # cpu: sets TRITON_INTERPRET before a test module imports triton
        except BenchmarkUsageError as err:
            raise pytest.UsageError(str(err)) from None
    config.stash[_STATE] = state


class PerfciBenchmark:
    """What the ``perfci_benchmark`` fixture gives a test: call it with the function to time."""

    def __init__(self, state: _State, nodeid: str):
        self._state = state
        self._nodeid = nodeid
        self.disabled = state.disabled

    @property
    def device(self) -> str:
        """'cuda' or 'cpu': where to put the benchmark's tensors."""
        return self._state.resolve()

    def __call__(self, fn: Any, *args: Any, kernel: str | None = None, shape: Any = None, dtype: Any = None,
                 flops: float | None = None, bytes: float | None = None, reference: Any = None,
                 iters: int | None = None, repeats: int | None = None, setup: Any = None,
                 extra_info: dict | None = None, tolerance: float | None = None,
                 group: str = "", weight: float | None = None, kwargs: dict | None = None) -> Any:
        try:
            case = make_case(fn, kernel=kernel, shape=shape, dtype=dtype, flops=flops, bytes=bytes, iters=iters,
                             repeats=repeats, tolerance=tolerance, extra_info=extra_info, group=group,
                             weight=weight)
            self._skip_unless_wanted(case.key)
            reference_kind(reference)
            setup = check_setup(setup)
            if kwargs is not None and not isinstance(kwargs, dict):
                raise BenchmarkUsageError("perfci_benchmark: kwargs= must be a dict of fn's keyword arguments")
            args, kwargs = _set_up(setup, args, kwargs or {})
            other = self._state.rows.claim(case.key, self._nodeid)
            if other is not None:
                raise BenchmarkUsageError(f"perfci_benchmark: case {' '.join(case.key)} is already measured by "
                                          f"{other}; give each benchmark its own kernel/shape/dtype")
            if self.disabled:
                return _plain(case, fn, args, kwargs, reference)
            return self._measure(case, fn, args, kwargs, reference)
        except BenchmarkUsageError as err:
            pytest.fail(str(err), pytrace=False)

    def unsupported(self, reason: str, *, kernel: str | None = None, shape: Any = None, dtype: Any = None,
                    group: str = "", weight: float | None = None) -> None:
        """Declare the case unsupported on this device (fp8 without fp8 units): a ``skip`` row, as
        ``perfci run`` writes for a case its backend refuses, and the test is skipped. Without the row a
        baseline's case would read as missing, which fails the gate."""
        from perfci.plugin.measuring import environment  # lazy: cost (the measuring stack)
        from perfci.plugin.session import make_row  # lazy: numpy

        try:
            case = make_case(lambda: None, kernel=kernel, shape=shape, dtype=dtype, group=group, weight=weight)
            self._skip_unless_wanted(case.key)
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
                raise BenchmarkUsageError("perfci_benchmark.unsupported: give the reason as one line of text")
            other = self._state.rows.claim(case.key, self._nodeid)
            if other is not None:
                raise BenchmarkUsageError(f"perfci_benchmark: case {' '.join(case.key)} is already measured by "
                                          f"{other}; give each benchmark its own kernel/shape/dtype")
        except BenchmarkUsageError as err:
            pytest.fail(str(err), pytrace=False)
        if not self.disabled:
            state = self._state
            state.env = state.env or environment(state.resolve())
            row = make_row(case, CaseResult(spec=case.spec, status="skip", message=reason.strip()), state.env)
            child = isolate.child_path()
            if child:
                isolate.child_report(child, row, "done")
            state.rows.add(row)
        pytest.skip(f"perfci_benchmark {' '.join(case.key)}: unsupported here: {reason.strip()}")

    def _skip_unless_wanted(self, key: tuple[str, str, str]) -> None:
        """A run narrowed by ``$PERFCI_CASES`` (perfci nightly's confirm and bisect) measures only those."""
        wanted = self._state.wanted
        if wanted is not None and key not in wanted:
            pytest.skip(f"perfci_benchmark {' '.join(key)}: not among the cases in ${CASES_ENV}")

    def _measure(self, case, fn, args, kwargs, reference):
        from perfci.plugin.measuring import environment, measure  # lazy: cost (the measuring stack)
        from perfci.plugin.session import make_row  # lazy: numpy

        state = self._state
        device = state.resolve()
        if state.env is None:
            state.env = environment(device)
        child = isolate.child_path()
        if child:
            started = CaseResult(spec=case.spec, status="error",
                                 message="the benchmark's process died while measuring")
            isolate.child_report(child, make_row(case, started, state.env), "started")
        try:
            result, value = measure(case, fn, args, kwargs, reference, device, state.env)
        except Exception as err:  # fn raised: the case is an 'error' row, and the test fails with it
            failed = CaseResult(spec=case.spec, status="error", message=f"{type(err).__name__}: {err}"[:500])
            state.rows.add(make_row(case, failed, state.env))
            raise
        row = make_row(case, result, state.env)
        if child:
            isolate.child_report(child, row, "done")
        state.rows.add(row)
        if result.status != "ok":
            pytest.fail(f"perfci_benchmark {' '.join(case.key)}: {result.status}: {result.message}", pytrace=False)
        return value


def wanted_cases() -> frozenset[tuple[str, str, str]] | None:
    """The cases ``$PERFCI_CASES`` lists (a file of ``kernel,shape,dtype`` lines or a perfci compare
    JSON, as ``perfci run --cases`` reads), or None when it is unset or empty: every case."""
    path = os.environ.get(CASES_ENV, "").strip()
    if not path:
        return None
    from perfci.suites import load_case_keys  # lazy: cost, with $PERFCI_CASES only

    return frozenset(load_case_keys(path))


def _set_up(setup, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """pedantic-style setup: called once before the benchmark; may return (args, kwargs) to use."""
    if setup is None:
        return args, kwargs
    made = setup()
    if made is None:
        return args, kwargs
    if (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], (tuple, list))
            and isinstance(made[1], dict)):
        return tuple(made[0]), dict(made[1])
    raise BenchmarkUsageError("perfci_benchmark: setup= must return None or (args, kwargs)")


def _plain(case, fn, args, kwargs, reference):
    """--perfci-disable: one call, and the correctness check when a reference is given."""
    from perfci.plugin.measuring import check_output  # lazy: cost (the measuring stack)

    value = fn(*args, **kwargs)
    error = check_output(case, value, reference, args, kwargs)
    tolerance = case.tolerance if case.tolerance is not None else default_tolerance(case.spec.dtype)
    if error is not None and not error <= tolerance:
        pytest.fail(f"perfci_benchmark {' '.join(case.key)}: output differs from the reference: relative "
                    f"error {error:.3g} > tolerance {tolerance:.3g}", pytrace=False)
    return value


@pytest.fixture
def perfci_benchmark(request: pytest.FixtureRequest) -> PerfciBenchmark:
    """Time a function as ``perfci run`` times a case: ``perfci_benchmark(fn, *args, kernel=, shape=, dtype=)``."""
    return PerfciBenchmark(request.config.stash[_STATE], request.node.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """--perfci-isolate: a benchmark test runs in a child pytest; its row comes back as JSON."""
    state = pyfuncitem.config.stash.get(_STATE, None)
    if (state is None or not state.isolate or isolate.child_path()
            or "perfci_benchmark" not in getattr(pyfuncitem, "fixturenames", ())):
        return None
    report, problem = isolate.run_isolated(pyfuncitem.nodeid, str(pyfuncitem.config.rootpath),
                                           state.resolve(), state.timeout_s)
    if report is not None:
        row = dict(report["row"])
        if report["outcome"] == "started" and problem:
            row.update(status="timeout" if "timed out" in problem else "error", message=problem)
        state.rows.add(row)
    if problem:
        pytest.fail(problem, pytrace=False)
    return True


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None or isolate.child_path() or not state.rows.rows:
        if state is not None and state.base and not isolate.child_path():
            state.problem = "--perfci-compare: no benchmark was measured in this session; nothing compared"
        return
    from perfci.plugin.session import EXIT_PERF_REGRESSION, judge, write_rows  # lazy: numpy
    try:
        if state.out:
            write_rows(state.out, state.rows.rows)
        if state.base:
            verdict = judge(state.base, state.rows.rows, state.out)
            state.verdict_text = verdict.text
            if verdict.regressed and session.exitstatus == 0:
                session.exitstatus = EXIT_PERF_REGRESSION
            if verdict.regressed:
                state.problem = f"perfci: a benchmark regressed against {state.base} (exit {EXIT_PERF_REGRESSION})"
    except (PerfciError, OSError) as err:
        state.problem = f"perfci: {err}"
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not (state.rows.rows or state.problem):
        return
    terminalreporter.section("perfci")
    if state.out and state.rows.rows:
        terminalreporter.write_line(f"perfci: {len(state.rows.rows)} case(s) written to {state.out}")
    if state.verdict_text:
        terminalreporter.write(state.verdict_text)
    if state.problem:
        terminalreporter.write_line(state.problem, red=True, bold=True)
