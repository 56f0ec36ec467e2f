"""perfci: benchmark-regression CI for GPU GEMM kernels.

One pipeline in eleven commands (``perfci --help``; docs/ has a page for each):
``perfci run`` measures a suite into a results CSV (``merge`` joins its
shards), ``perfci compare`` judges two such CSVs, or tonight against a history
store, with noise-aware statistics (``calibrate`` derives the noise profile it
uses), ``perfci confirm`` measures base and cur again in interleaved rounds,
``perfci bisect`` walks git history to the commit that made a kernel slower,
``perfci history`` keeps the nightly runs and their trends, ``perfci compile``
reports what the compiler made of each case, ``perfci nightly`` runs the whole
night, and ``init`` and ``config`` set a repository up and show what is in force.
"""
from __future__ import annotations

__version__ = "0.1.0"

from perfci.errors import PerfciError
from perfci.model import CaseResult, CaseSpec, Environment, RepeatSample

__all__ = ["__version__", "PerfciError", "CaseSpec", "CaseResult", "Environment", "RepeatSample"]
