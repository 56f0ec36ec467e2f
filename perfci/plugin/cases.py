"""The ``perfci_benchmark`` fixture's arguments, checked into a :class:`BenchmarkCase`.

Pure: no torch, no pytest. Every problem is a :class:`BenchmarkUsageError`
whose message is one line, which the fixture turns into a failed test.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from perfci.kernel import TOLERANCE
from perfci.model import DTYPES, CaseSpec, shape_key

ITERS_RANGE = (60, 80)  # as `perfci run --iters`
REPEATS_RANGE = (1, 50)  # as `perfci run --repeats`
DEFAULT_ITERS, DEFAULT_REPEATS = 70, 7
# torch dtype names (str(torch.float16) == "torch.float16") -> the results CSV's dtype.
TORCH_DTYPES = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float8_e4m3fn": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2": "fp8", "float8_e5m2fnuz": "fp8",
}
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")
_KERNEL_RE = re.compile(r"^[A-Za-z0-9_.:\-\[\]=,+/]+$")


class BenchmarkUsageError(ValueError):
    """A bad argument to ``perfci_benchmark``: the message is the one line the user sees."""


@dataclass(frozen=True)
class BenchmarkCase:
    """One benchmark as the fixture was asked for it."""

    spec: CaseSpec
    iters: int = DEFAULT_ITERS
    repeats: int = DEFAULT_REPEATS
    flops: float | None = None  # overrides 2MNK for the tflops column
    bytes: float | None = None  # overrides the GEMM's fewest bytes for the tbps column
    tolerance: float | None = None
    extra_info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.spec.key


def normalize_dtype(dtype: object) -> str:
    """``"bf16"``, ``torch.bfloat16`` or ``"bfloat16"`` -> ``"bf16"``."""
    if dtype is None:
        raise BenchmarkUsageError(f"perfci_benchmark: dtype= is required (one of {', '.join(DTYPES)}, "
                                  f"or a torch dtype)")
    text = str(dtype).strip()
    text = text[len("torch."):] if text.startswith("torch.") else text
    if text in DTYPES:
        return text
    if text in TORCH_DTYPES:
        return TORCH_DTYPES[text]
    raise BenchmarkUsageError(f"perfci_benchmark: dtype={dtype!r} is not one of {', '.join(DTYPES)} "
                              f"(or torch.float32, float16, bfloat16, float8_*)")


def normalize_shape(shape: object) -> tuple[int, int, int]:
    """``(M, N, K)`` or ``"MxNxK"`` -> three positive ints."""
    if isinstance(shape, str):
        match = _SHAPE_RE.match(shape)
        dims: tuple[Any, ...] = tuple(int(g) for g in match.groups()) if match else ()
    elif isinstance(shape, (tuple, list)):
        dims = tuple(shape)
    else:
        dims = ()
    if len(dims) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise BenchmarkUsageError(f"perfci_benchmark: shape={shape!r} must be (M, N, K) or 'MxNxK' with "
                                  f"positive integers (the case key is kernel, shape, dtype)")
    return dims  # type: ignore[return-value]


def _count(name: str, value: object, default: int, bounds: tuple[int, int], hint: str) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not bounds[0] <= value <= bounds[1]:
        raise BenchmarkUsageError(f"perfci_benchmark: {name}={value!r}: use {bounds[0]}..{bounds[1]} {hint}")
    return value


def _positive(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BenchmarkUsageError(f"perfci_benchmark: {name}={value!r} must be a positive number")
    return float(value)


def make_case(fn: object, *, kernel: object = None, shape: object = None, dtype: object = None,
              flops: object = None, bytes: object = None, iters: object = None, repeats: object = None,
              tolerance: object = None, extra_info: object = None,
              weight: object = None, group: object = "") -> BenchmarkCase:
    """Check the fixture's arguments; the first problem raises :class:`BenchmarkUsageError`."""
    if not callable(fn):
        raise BenchmarkUsageError(f"perfci_benchmark: the first argument must be the function to time, "
                                  f"got {type(fn).__name__}")
    if not isinstance(kernel, str) or not kernel.strip():
        raise BenchmarkUsageError("perfci_benchmark: kernel= is required: the case's name in the results "
                                  "(with shape= and dtype=, its key), e.g. kernel='matmul'")
    if not _KERNEL_RE.match(kernel):
        raise BenchmarkUsageError(f"perfci_benchmark: kernel={kernel!r}: use letters, digits and _ . : - "
                                  f"[ ] = , + / (no spaces: it is a CSV key)")
    if shape is None:
        raise BenchmarkUsageError("perfci_benchmark: shape= is required: (M, N, K) or 'MxNxK'")
    m, n, k = normalize_shape(shape)
    # group and weight as a suite's case has them: compare's per-group lines and time-weighted speedup.
    if not isinstance(group, str) or any(ch in group for ch in "\r\n"):
        raise BenchmarkUsageError(f"perfci_benchmark: group= must be one line of text, got {group!r}")
    weight = _positive("weight", weight) or 1.0
    spec = CaseSpec(kernel=kernel, m=m, n=n, k=k, dtype=normalize_dtype(dtype), weight=weight, group=group.strip())
    if extra_info is not None and not isinstance(extra_info, Mapping):
        raise BenchmarkUsageError(f"perfci_benchmark: extra_info= must be a dict, got {type(extra_info).__name__}")
    return BenchmarkCase(
        spec=spec,
        iters=_count("iters", iters, DEFAULT_ITERS, ITERS_RANGE,
                     "launches per repeat (as perfci run --iters; default 70)"),
        repeats=_count("repeats", repeats, DEFAULT_REPEATS, REPEATS_RANGE, "repeats (default 7)"),
        flops=_positive("flops", flops), bytes=_positive("bytes", bytes),
        tolerance=_positive("tolerance", tolerance), extra_info=dict(extra_info or {}))


def default_tolerance(dtype: str) -> float:
    """||out - ref|| / ||ref|| allowed by default: the suites' own per-dtype value."""
    return TOLERANCE[dtype]


def override_throughput(row: dict[str, str], case: BenchmarkCase, median_us: float | None) -> dict[str, str]:
    """The row with tflops/tbps from the caller's flops=/bytes= (roofline_pct then left empty)."""
    if median_us is None or (case.flops is None and case.bytes is None):
        return row
    row = dict(row)
    if case.flops is not None:
        row["tflops"] = f"{case.flops / (median_us * 1e-6) / 1e12:.3f}"
    if case.bytes is not None:
        row["tbps"] = f"{case.bytes / (median_us * 1e-6) / 1e12:.4f}"
    row["roofline_pct"] = ""  # the GEMM model's ceiling no longer describes this work
    return row


def extra_info_message(case: BenchmarkCase) -> str:
    """extra_info as ``k=v; ...`` for the results' message column (a row has no other free-form cell)."""
    return "; ".join(f"{k}={case.extra_info[k]}" for k in sorted(case.extra_info))


def reference_kind(reference: object) -> str:
    """'none', 'callable' or 'tensor' (anything else with .shape counts as a tensor)."""
    if reference is None:
        return "none"
    if callable(reference):
        return "callable"
    if hasattr(reference, "shape"):
        return "tensor"
    raise BenchmarkUsageError(f"perfci_benchmark: reference= must be a callable (called with the same "
                              f"arguments) or a tensor, got {type(reference).__name__}")


def check_setup(setup: object) -> Callable[[], object] | None:
    if setup is not None and not callable(setup):
        raise BenchmarkUsageError(f"perfci_benchmark: setup= must be a callable, got {type(setup).__name__}")
    return setup  # type: ignore[return-value]


def shape_text(case: BenchmarkCase) -> str:
    return shape_key(case.spec.m, case.spec.n, case.spec.k)
