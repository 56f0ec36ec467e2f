"""Synthetic nightly results CSVs for the history tests: seeded, realistic in shape, small."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from perfci.results import COLUMNS, render_rows_csv
from perfci.roofline import case_clock_exponent

# sm_90 cases of the decode/prefill kinds, 10 us to 1 ms: enough for a common mode and a prior.
SHAPES = [(m, n, k) for m in (1, 16, 64, 4096) for n, k in ((1024, 6144), (6144, 768), (4096, 4096))]
KERNELS = ("matmul_tiled", "splitk_decode[m_fast=1]")
ENV = dict(arch="sm_90", device_name="NVIDIA H200", vendor="nvidia", driver="580.159.04",
           runtime="cuda 13.0", torch="2.11.0+cu130", triton="3.6.0", perfci="0.1.0", host="ci")
MI355X = dict(arch="gfx950", device_name="AMD Instinct MI355X", vendor="amd", driver="6.4.1",
              runtime="hip 6.4", torch="2.11.0+rocm6.4", triton="3.6.0", perfci="0.1.0", host="ci")
NOMINAL_MHZ = 2400.0


def cases():
    return [(kernel, m, n, k) for kernel in KERNELS for m, n, k in SHAPES]


def base_us(m: int, n: int, k: int) -> float:
    return 10.0 + 2.0 * m * n * k / 600e12 * 1e6  # a floor plus ~600 TFLOP/s


def night_rows(night: int, *, seed: int = 0, suite: str = "decode", sha: str | None = None,
               slow: dict | None = None, env: dict | None = None, night_sd: float = 0.004,
               repeat_sd: float = 0.002, status: dict | None = None, only=None,
               clock_mhz: float | None = None) -> list[dict]:
    """One night's rows: each case at its level x a night effect, 7 repeats around it.

    CLOCK_MHZ: the night's core clock; each case's time then follows
    (NOMINAL_MHZ / clock)^e, e its clock exponent on the env's arch, and its
    repeats record that clock (+-0.3% jitter each).
    """
    rng = np.random.default_rng(seed * 1000 + night)
    arch = (env or {}).get("arch", ENV["arch"])
    rows = []
    for kernel, m, n, k in cases():
        key = (kernel, f"{m}x{n}x{k}", "bf16")
        if only is not None and key not in only:
            continue
        level = base_us(m, n, k) * math.exp(rng.normal(0.0, night_sd)) * (slow or {}).get(key, 1.0)
        reps = level * np.exp(rng.normal(0.0, repeat_sd, 7))
        clocks = ""
        if clock_mhz is not None:
            jitter = clock_mhz * np.exp(rng.normal(0.0, 0.003, 7))
            reps = reps * (NOMINAL_MHZ / jitter) ** (case_clock_exponent(arch, "bf16", m, n, k) or 0.0)
            clocks = ";".join(f"{c:.0f}" for c in jitter)
        st = (status or {}).get(key, "ok")
        ok = st == "ok"
        rows.append({
            "kernel": kernel, "shape": key[1], "dtype": "bf16", "M": str(m), "N": str(n), "K": str(k),
            "median_us": f"{np.median(reps):.4f}" if ok else "",
            "repeats_us": ";".join(f"{x:.4f}" for x in reps) if ok else "",
            "iters": "70", "timer": "events", "status": st, "message": "" if ok else "boom",
            "weight": "1", "group": "g", "suite": suite, "schema": "2", "sclk_mhz": clocks if ok else "",
            "git_sha": sha if sha is not None else f"{night:02d}" * 20,
            "timestamp": f"2026-12-{1 + night:02d}T02:00:00+00:00", **ENV, **(env or {}),
        })
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    full = [{c: r.get(c, "") for c in COLUMNS} for r in rows]
    path.write_text(render_rows_csv(full))
    return path


def write_night(path: Path, night: int, **kw) -> Path:
    return write_rows(path, night_rows(night, **kw))
