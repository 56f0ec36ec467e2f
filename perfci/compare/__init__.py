"""Judging two runs: `perfci compare` and `perfci calibrate`.

The public names are re-exported here, so a script reads::

    from perfci.compare import compare, CompareOptions, Comparison, CaseComparison, calibrate, read_any

Each is loaded on first use (PEP 562 ``__getattr__``) rather than at import:
``perfci`` imports :mod:`perfci.compare.cli` for every command, ``--help``
included, and the judging modules pull in numpy, which would double its start-up
time. Modules inside this package import each other by module path
(``perfci.compare.verdicts``), never from here.
"""
from __future__ import annotations

import importlib

# public name -> the module that defines it
_EXPORTS = {
    "compare": "perfci.compare.verdicts",
    "CompareOptions": "perfci.compare.comparison",
    "Comparison": "perfci.compare.comparison",
    "CaseComparison": "perfci.compare.comparison",
    "SuiteShift": "perfci.compare.comparison",
    "Summary": "perfci.compare.comparison",
    "calibrate": "perfci.compare.calibration",
    "Calibration": "perfci.compare.calibration",
    "read_any": "perfci.compare.inputs",
    "read_profile": "perfci.compare.inputs",
    "NoiseProfile": "perfci.compare.noise",
    "BUILTIN_PROFILES": "perfci.compare.noise",
    "profile_to_json": "perfci.compare.noise",
    "RENDERERS": "perfci.compare.render",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without coming back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
