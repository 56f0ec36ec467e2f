"""perfci's built-in data: the suites (smoke, decode, prefill) and the baselines committed for them.

An installed perfci (a wheel) carries them as package data, ``perfci/builtin_suites/`` and
``perfci/builtin_baselines/``, read through :mod:`importlib.resources`; perfci run from its
checkout (PYTHONPATH, an editable install) reads the checkout's ``suites/`` and ``baselines/``,
so a revision's own files are the ones used.
"""
from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from perfci.errors import PerfciError

# `perfci compare builtin:cpu/smoke CUR`: the baseline BASELINES/cpu/smoke.csv that ships with perfci.
BASELINE_PREFIX = "builtin:"
_BASELINE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _root(package_data: str, checkout_folder: str) -> Path:
    packaged = Path(str(files("perfci") / package_data))
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[1] / checkout_folder


SUITES_DIR = _root("builtin_suites", "suites")
BASELINES_DIR = _root("builtin_baselines", "baselines")


def baseline_names() -> list[str]:
    """DEVICE/SUITE of every built-in baseline."""
    found = BASELINES_DIR.glob("*/*.csv") if BASELINES_DIR.is_dir() else ()
    return sorted(f"{p.parent.name}/{p.stem}" for p in found)


def resolve_baseline(word: str) -> str:
    """``builtin:DEVICE/SUITE`` -> the path of that built-in baseline; any other word as it is."""
    if not word.startswith(BASELINE_PREFIX):
        return word
    name = word[len(BASELINE_PREFIX):]
    path = BASELINES_DIR / f"{name}.csv"
    if not _BASELINE_NAME.match(name) or not path.is_file():
        known = ", ".join(BASELINE_PREFIX + n for n in baseline_names()) or "none"
        raise PerfciError(f"{word}: no such built-in baseline (give {BASELINE_PREFIX}DEVICE/SUITE; "
                          f"built-in: {known})")
    return str(path)
