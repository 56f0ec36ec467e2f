"""``perfci confirm --reference EXPR``: which measured cases the user declares untouched by the change.

EXPR is a ``perfci run --filter`` expression (``kernel=torch_matmul``,
``M>=4096,dtype=bf16``, a bare glob). With ``--suite`` the suite's cases are
matched as declared (their group too); with ``--results`` the cases are only
known as (kernel, shape, dtype) keys once a run has measured them, so ``group``
matches nothing there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from perfci.errors import PerfciError
from perfci.suites import make_filter

Key = tuple[str, ...]
_SHAPE = re.compile(r"([0-9]+)x([0-9]+)x([0-9]+)")


@dataclass(frozen=True)
class _KeyCase:
    """What a filter reads of a case, from its key alone."""

    label: str
    shape: str
    dtype: str
    group: str = ""
    m: int = -1
    n: int = -1
    k: int = -1


def reference_filter(expression: str) -> Callable[[object], bool]:
    """The predicate of EXPR; a malformed one is one line (exit 2)."""
    try:
        return make_filter(expression)
    except PerfciError as err:
        raise PerfciError(f"--reference {expression!r}: {err}") from None


def reference_keys(expression: str, keys: Iterable[Key], specs: Mapping[Key, object] | None = None
                   ) -> tuple[Key, ...]:
    """The keys among ``keys`` that EXPR matches, in their order.

    ``specs``: key -> the suite's CaseSpec where known (``--suite``); other keys
    are matched on kernel, shape (and M, N, K from it) and dtype.

    Raises:
        PerfciError: EXPR is malformed, or matches none of the measured cases.
    """
    match = reference_filter(expression)
    keys = list(keys)
    found = tuple(k for k in keys if match((specs or {}).get(k) or _as_case(k)))
    if not found:
        shown = ", ".join(" ".join(k) for k in keys[:3]) + (" ..." if len(keys) > 3 else "")
        raise PerfciError(f"--reference {expression!r} matches none of the {len(keys)} measured case(s) "
                          f"({shown})")
    return found


def _as_case(key: Key) -> _KeyCase:
    if len(key) != 3:
        return _KeyCase(" ".join(key), "", "")
    dims = _SHAPE.fullmatch(key[1])
    m, n, k = (int(x) for x in dims.groups()) if dims else (-1, -1, -1)
    return _KeyCase(key[0], key[1], key[2], m=m, n=n, k=k)
