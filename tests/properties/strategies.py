"""Hypothesis strategies shared by the property tests: tricky cells, files on disk, settings."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Fast enough for the whole of tests/properties to stay under a minute.
FAST = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

_DIR = Path(tempfile.mkdtemp(prefix="perfci-properties-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)  # nothing left in the temporary directory


def on_disk(data: bytes | str, name: str = "input.csv") -> str:
    """``data`` written to a file named ``name`` (one scratch directory for the session)."""
    path = _DIR / name
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    path.write_bytes(data)
    return os.fspath(path)


# Cells a real file has, and the ones the bad-input probe found: huge and tiny
# numbers, non-finite words, lists, separators, quotes, many digits.
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=1e-6, max_value=1e7).map(lambda x: f"{x:.4f}"),
    st.integers().map(str),
    st.integers(min_value=1, max_value=600).map(lambda n: "9" * n),
    st.sampled_from(["1e-320", "1e308", "-0", "0", "nan", "inf", "-inf", "1_000", "٣", "0x10", "1e400"]),
)
CELL = st.one_of(
    NUMBERS,
    st.lists(NUMBERS, min_size=1, max_size=9).map(";".join),
    st.sampled_from(["", "-", ";", ";;", "ok", "fail", "skip", "error", "timeout", "missing", "bf16", "fp32",
                     "16x16x32", "1x1024x6144_tile64", "sm_90", "NVIDIA H200", "gfx942", '"', "a,b", "2/4",
                     "84:0123456789ab", "events", "spin"]),
    st.text(max_size=12),
)
