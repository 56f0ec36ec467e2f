"""perfci: benchmark-regression CI for GPU GEMM kernels.

Three commands, one pipeline: ``perfci run`` measures a suite into a results
CSV, ``perfci compare`` judges two such CSVs with noise-aware statistics, and
``perfci bisect`` walks git history to the commit that made a kernel slower.
"""
from __future__ import annotations

__version__ = "0.1.0"

from perfci.errors import PerfciError
from perfci.model import CaseResult, CaseSpec, Environment, RepeatSample

__all__ = ["__version__", "PerfciError", "CaseSpec", "CaseResult", "Environment", "RepeatSample"]
