"""One ``perfci_benchmark`` call, measured as ``perfci run`` measures a case.

The steps and the functions are the worker's (:mod:`perfci.measure.worker`):
correctness against the reference (its ``relative_error``), then on a GPU the
cache flush (``cache_flush``), and for every device the warm-up until the clock
settles and ``repeats`` x ``iters`` timed launches with the device hold/gate and
per-repeat clock and telemetry (``timed_repeats``, which uses
:mod:`perfci.measure.timing` and :mod:`perfci.measure.hold`). On the CPU the
launches are timed with the host clock, as ``perfci run --device cpu`` does.

What differs from the worker: the function timed is the test's ``fn(*args)``
(not a suite backend's launch), there is no output poisoning (``fn`` owns its
output), and the result dict is turned into a :class:`CaseResult` here (the
runner does it from the worker's JSON file; this glue is the same few lines).
"""
from __future__ import annotations

import os
from typing import Any, Callable

from perfci.measure import worker
from perfci.measure.envinfo import collect_environment
from perfci.model import CaseResult, Environment, RepeatSample
from perfci.plugin.cases import BenchmarkCase, BenchmarkUsageError, default_tolerance

# perfci run's warm-up bounds (perfci/measure/cli.py): seconds, (min, max).
WARMUP_S = {"cuda": (0.1, 1.5), "cpu": (0.05, 0.5)}


def resolve_device(asked: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'; 'cuda' without one is a usage error."""
    if asked == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        return "cpu"
    import torch  # lazy: torch

    if torch.cuda.is_available():
        return "cuda"
    if asked == "cuda":
        raise BenchmarkUsageError("--perfci-device cuda: torch sees no GPU on this machine "
                                  "(use --perfci-device cpu, or auto)")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return "cpu"


def environment(device: str) -> Environment:
    return collect_environment(device)


def case_result(case: BenchmarkCase, data: dict) -> CaseResult:
    """The worker-style result dict -> :class:`CaseResult` (as the runner's ``_collect`` does)."""
    repeats = tuple(
        RepeatSample(median_us=r["median_us"], iters_us=tuple(r.get("iters_us") or ()),
                     sclk_mhz=r.get("sclk_mhz"), temp_c=r.get("temp_c"), power_w=r.get("power_w"),
                     throttled=r.get("throttled"), stalled=bool(r.get("stalled")),
                     clock_source=r.get("clock_source") or "")
        for r in data.get("repeats", []))
    return CaseResult(spec=case.spec, status=data["status"], repeats=repeats,
                      iters=int(data.get("iters") or 0), message=data.get("message", ""),
                      timer=data.get("timer", ""), rel_error=data.get("rel_error"),
                      gate=data.get("gate", ""), stalls=int(data.get("stalls") or 0))


def call_once(fn: Callable, args: tuple, kwargs: dict, device: str) -> Any:
    import torch  # lazy: torch

    value = fn(*args, **kwargs)
    if device == "cuda":
        torch.cuda.synchronize()
    return value


def check_output(case: BenchmarkCase, value: Any, reference: Any, args: tuple, kwargs: dict) -> float | None:
    """The relative error of ``value`` against the reference, or None without one."""
    if reference is None:
        return None
    import torch  # lazy: torch

    expected = reference(*args, **kwargs) if callable(reference) else reference
    if not isinstance(value, torch.Tensor) or not isinstance(expected, torch.Tensor):
        raise BenchmarkUsageError(f"perfci_benchmark: reference= needs fn to return a tensor and the reference "
                                  f"to be (or return) one; got {type(value).__name__} and "
                                  f"{type(expected).__name__}")
    if tuple(value.shape) != tuple(expected.shape):
        raise BenchmarkUsageError(f"perfci_benchmark: fn returned shape {tuple(value.shape)}, the reference "
                                  f"{tuple(expected.shape)}")
    return worker.relative_error(torch, value, expected.to(value.device))


def measure(case: BenchmarkCase, fn: Callable, args: tuple, kwargs: dict, reference: Any,
            device: str, env: Environment) -> tuple[CaseResult, Any]:
    """Check, warm up and time ``fn(*args, **kwargs)``; returns (result, fn's first output)."""
    import torch  # lazy: torch

    gpu = device == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    data: dict = {"status": "error", "message": "", "repeats": []}
    value = call_once(fn, args, kwargs, device)  # also compiles whatever fn compiles
    error = check_output(case, value, reference, args, kwargs)
    data["rel_error"] = error
    tolerance = case.tolerance if case.tolerance is not None else default_tolerance(case.spec.dtype)
    if error is not None and not error <= tolerance:
        data.update(status="fail", message=f"output differs from the reference: relative error "
                                           f"{error:.3g} > tolerance {tolerance:.3g}")
        return case_result(case, data), value
    flush = worker.cache_flush(torch, env.arch, torch.device("cuda", 0), data) if gpu else None
    timer = "events" if gpu else "host"
    phases = worker.Phases(0.0)
    samples = worker.timed_repeats(torch, lambda: fn(*args, **kwargs), flush, sync,
                                    env.vendor if gpu else "cpu", timer, case.iters, case.repeats,
                                    WARMUP_S[device], data, phases, gate="spin")
    data.update(status="ok", repeats=samples, iters=case.iters, timer=timer)
    return case_result(case, data), value
