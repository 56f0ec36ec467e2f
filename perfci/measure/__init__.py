"""Measuring a suite: ``perfci run``.

perfci.suites (what to run) -> runner (a process per case, the GPU lock) -> worker
(prepare, correctness gate, warm-up, the timing loop of :mod:`.timing`, telemetry)
-> a results CSV (:mod:`perfci.results`). Torch is imported by the worker only.
"""
from perfci.measure.runner import CaseRunner, RunOptions

__all__ = ["CaseRunner", "RunOptions"]
