"""A seeded simulator of GEMM suite runs with known truth, for validating compare.

Pure: returns :class:`perfci.results.ResultTable` objects, touches no file.

The noise model, outermost first (each level is one a real nightly run has):

* **Run level.** The core clock of the whole run is ``nominal * (1 + u)``,
  ``u ~ U(-swing, +swing)`` (±14% on gfx950). Memory bandwidth moves a little
  too (``mem_swing``). Every case also gets its own small run offset
  (``case_run_noise``, lognormal): placement, L2 and TLB state, what the clock
  cannot explain. This is the noise the repeats cannot see.
* **Repeat level.** Each repeat's clock jitters by ``repeat_clock_jitter`` around
  the run's; the recorded clock carries measurement noise and is rounded to MHz.
* **Iteration level.** A lognormal body (``iter_sigma``) plus ``outlier_rate``
  of iterations at 1.5-3x (preemption, a late kernel). Each repeat reports the
  median of its iterations, as perfci run does.

A case's true time is a soft roofline ``(tc^p + tm^p)^(1/p)`` with per-case
compute and memory efficiencies, so its real clock sensitivity is *not* the one
compare infers from the datasheet ridge point: the simulator does not share the
analysis' assumptions.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from perfci.model import DTYPE_BYTES, OUT_DTYPE_BYTES, ResultRow, ResultTable, shape_key
from perfci.results import render_rows_csv
from perfci.roofline import ceiling_for

# (N, K) of typical LLM projections; M sweeps decode (memory-bound) to prefill.
_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (8192, 28672))
_M = (1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192)


@dataclass(frozen=True)
class SimConfig:
    arch: str = "gfx950"
    n_cases: int = 60
    repeats: int = 7
    iters: int = 50
    clock_swing: float = 0.14
    mem_swing: float = 0.015
    case_run_noise: float = 0.004
    repeat_clock_jitter: float = 0.015
    clock_meas_noise: float = 0.002
    iter_sigma: float = 0.01
    outlier_rate: float = 0.02
    roofline_p: float = 4.0
    launch_us: float = 0.3  # clock-independent part of a launch (memory latency)
    telemetry: bool = True  # record per-repeat clocks
    nominal_mhz: float = 2400.0


@dataclass(frozen=True)
class SimCase:
    kernel: str
    m: int
    n: int
    k: int
    dtype: str
    tc_us: float  # compute time at the nominal clock
    tm_us: float  # memory time at nominal bandwidth
    weight: float = 1.0


def make_suite(cfg: SimConfig, rng: np.random.Generator) -> tuple[SimCase, ...]:
    """A realistic mix: every (N, K) at every M, bf16 and fp8 alternating."""
    bf16_tflops, peak_tbps = ceiling_for(cfg.arch, "bf16")
    combos = [(m, n, k) for (n, k) in _NK for m in _M]
    cases = []
    for i in range(cfg.n_cases):
        m, n, k = combos[i % len(combos)]
        dtype = "bf16" if (i // len(combos) + i) % 2 == 0 else "fp8"
        tflops = bf16_tflops * (2.0 if dtype == "fp8" else 1.0)
        flops = 2.0 * m * n * k
        nbytes = (m * k + k * n) * DTYPE_BYTES[dtype] + m * n * OUT_DTYPE_BYTES[dtype]
        eff_c = rng.uniform(0.55, 0.8)
        eff_m = rng.uniform(0.6, 0.85)
        cases.append(SimCase(
            kernel=f"gemm_{dtype}_v{i // len(combos)}", m=m, n=n, k=k, dtype=dtype,
            tc_us=flops / (tflops * 1e12 * eff_c) * 1e6,
            tm_us=nbytes / (peak_tbps * 1e12 * eff_m) * 1e6,
            weight=float(rng.choice([1.0, 1.0, 2.0, 4.0]))))
    return tuple(cases)


def simulate_run(suite: Sequence[SimCase], cfg: SimConfig, rng: np.random.Generator, *,
                 slowdown: dict[int, float] | None = None, path: str = "sim.csv") -> ResultTable:
    """One run of ``suite``; ``slowdown`` maps case index -> true time factor."""
    n, r, it = len(suite), cfg.repeats, cfg.iters
    clock_run = 1.0 + rng.uniform(-cfg.clock_swing, cfg.clock_swing)
    mem_run = 1.0 + rng.uniform(-cfg.mem_swing, cfg.mem_swing)
    clock_rep = clock_run * (1.0 + cfg.repeat_clock_jitter * rng.standard_normal((n, r)))
    tc = np.array([c.tc_us for c in suite])[:, None] / clock_rep
    tm = np.array([c.tm_us for c in suite])[:, None] / mem_run
    p = cfg.roofline_p
    t = (tc**p + tm**p) ** (1.0 / p) + cfg.launch_us
    t = t * np.exp(cfg.case_run_noise * rng.standard_normal((n, 1)))
    if slowdown:
        for i, f in slowdown.items():
            t[i] *= f
    iters = t[:, :, None] * np.exp(cfg.iter_sigma * rng.standard_normal((n, r, it)))
    outliers = rng.random((n, r, it)) < cfg.outlier_rate
    iters = np.where(outliers, iters * rng.uniform(1.5, 3.0, (n, r, it)), iters)
    rep_us = np.median(iters, axis=2)
    recorded = np.round(cfg.nominal_mhz * clock_rep * (1.0 + cfg.clock_meas_noise *
                                                         rng.standard_normal((n, r))))
    rows = []
    for i, c in enumerate(suite):
        reps = tuple(float(x) for x in np.round(rep_us[i], 4))
        rows.append(ResultRow(
            kernel=c.kernel, shape=shape_key(c.m, c.n, c.k), dtype=c.dtype, status="ok",
            m=c.m, n=c.n, k=c.k, median_us=float(np.median(reps)), repeats_us=reps, iters=it,
            sclk_mhz=tuple(float(x) for x in recorded[i]) if cfg.telemetry else (),
            weight=c.weight, arch=cfg.arch, line=i + 2))
    return ResultTable(path=path, format="perfci", rows=tuple(rows))


def simulate_pair(cfg: SimConfig, seed: int, *, regress_case: int | None = None,
                  regress_pct: float = 0.0) -> tuple[ResultTable, ResultTable]:
    """A base and a cur run of one suite; optionally one case made slower in cur."""
    rng = np.random.default_rng(seed)
    suite = make_suite(cfg, rng)
    base = simulate_run(suite, cfg, rng, path="base.csv")
    slow = {regress_case: 1.0 + regress_pct / 100.0} if regress_case is not None else None
    cur = simulate_run(suite, cfg, rng, slowdown=slow, path="cur.csv")
    return base, cur


def simulate_runs(cfg: SimConfig, seed: int, count: int) -> list[ResultTable]:
    """``count`` A/A runs of one suite, for calibration."""
    rng = np.random.default_rng(seed)
    suite = make_suite(cfg, rng)
    return [simulate_run(suite, cfg, rng, path=f"aa{i}.csv") for i in range(count)]


def without_clocks(table: ResultTable) -> ResultTable:
    """The same run as if no clock telemetry had been recorded."""
    return replace(table, rows=tuple(replace(r, sclk_mhz=()) for r in table.rows))


def to_csv_text(table: ResultTable) -> str:
    """A simulated run as a perfci results CSV (for tests and demos)."""
    def cells(r: ResultRow) -> dict[str, str]:
        return {
            "kernel": r.kernel, "shape": r.shape, "dtype": r.dtype,
            "M": str(r.m or ""), "N": str(r.n or ""), "K": str(r.k or ""),
            "median_us": f"{r.median_us:.4f}" if r.median_us else "",
            "repeats_us": ";".join(f"{v:.4f}" for v in r.repeats_us),
            "iters": str(r.iters or ""),
            "sclk_mhz": ";".join(f"{v:.0f}" for v in r.sclk_mhz if v is not None),
            "status": r.status, "message": r.message, "weight": f"{r.weight:g}", "arch": r.arch,
            "schema": "1",
        }

    return render_rows_csv([cells(r) for r in table.rows])
