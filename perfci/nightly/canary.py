"""The canary stage: a change of known size, measured every night, to score the night's own detector.

Two builds of ``perfci_canary`` (kernels/canary.py), the twin (no plant) and the
planted build (``--canary PCT``: that share of extra, masked K iterations), are
measured in ABBA rounds on this machine, each run in a fresh process as
``perfci confirm --suite`` measures its sides. From them:

* **confirm**: confirm's own statistic and stopping rule on the rounds
  (:func:`perfci.confirm.stopping.look`: the paired per-round ratio, its looks,
  its budget), planted as CUR and twin as BASE: did it find the plant?
* **the truth**: the paired ratio over every round at 95%: what the plant cost
  tonight, the size the detectors are scored at.
* **compare**: each build's first run is a row of ``DIR/canary.csv`` (suite
  ``perfci-canary``, as ``perfci run`` writes rows); the twin is judged against
  the earlier canary nights in the store as any case is (pooled from 2 nights,
  one-run from 1): anything but ``unchanged`` is a false alarm; the planted row,
  relabelled as the twin, against the same baseline: ``regressed`` is found.

Nothing here decides the night: the outcome is a line in the reports and in the
store's canary records (:mod:`perfci.history.canary`), a blind or noisy detector
a warning, and a canary that could not be measured a warning too.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from perfci.compare.comparison import CompareOptions
from perfci.compare.inputs import read_any, read_profile
from perfci.compare.store import check_tonight, pooled_compare
from perfci.compare.verdicts import compare
from perfci.confirm.analysis import Round, analyze_case
from perfci.confirm.session import round_orders
from perfci.confirm.stopping import StoppingRule, look
from perfci.errors import PerfciError
from perfci.history.canary import CanaryNight, rates, tonight_line
from perfci.history.model import run_info
from perfci.history.store import MANIFEST, load_canaries
from perfci.measure.runner import CaseRunner, RunOptions, fallback_environment, gpu_lock
from perfci.model import CaseSpec, Environment
from perfci.nightly import core
from perfci.nightly.loaded import Store
from perfci.nightly.state import CanaryResult, Log, NightConfig, Project, Sources, StageOutcome, TonightResult
from perfci.results import read_results_cells, result_to_row, write_results
from perfci.roofline import ceiling_for
from perfci.verdict import Verdict

SUITE = "perfci-canary"  # the canary's runs in the store, apart from every suite's
KERNEL = "perfci_canary"
GPU_PCT = 3.0  # the default plant on a GPU night
# A detector that called the planted build any of these did not find it.
NOT_FOUND = (Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.INCONCLUSIVE)


@dataclass(frozen=True)
class Method:
    """The canary's case and how each run measures it."""

    device: str  # cuda | cpu
    m: int
    n: int
    k: int
    dtype: str
    iters: int
    repeats: int


# On a GPU: perfci run's method (7 repeats of 70 launches) on a GEMM of ~50 us on an H200, two
# waves of 128x128 tiles, 64 K iterations (a 3% plant is 2 of them).
GPU = Method("cuda", 2048, 2048, 4096, "bf16", iters=70, repeats=7)
# On the CPU every interpreter launch of even this tile costs 30-80 ms: 3 launches a repeat keeps a
# run near a second. A CPU night tests the plumbing, not what a GPU resolves.
CPU = Method("cpu", 16, 16, 64, "fp32", iters=3, repeats=5)


def wanted_pct(cfg: NightConfig, arch: str) -> float | None:
    """The plant tonight: --canary PCT, else 3% on a GPU night; none with --no-canary or on a CPU night."""
    if cfg.canary_off:
        return None
    if cfg.canary is not None:
        return cfg.canary
    return None if arch == "cpu" else GPU_PCT


def canary(cfg: NightConfig, p: Project, t: TonightResult, sources: Sources, store: Store,
           log: Log) -> StageOutcome[CanaryResult]:
    """Stage: measure the two builds, judge them as compare and confirm would; its result is the outcome."""
    pct = wanted_pct(cfg, t.arch)
    if pct is None:
        why = "--no-canary" if cfg.canary_off else "off on a CPU night (--canary PCT measures one)"
        return StageOutcome(core.SKIPPED, why)
    if p.where is None:
        return StageOutcome(core.SKIPPED, "no project root")
    method = CPU if t.arch == "cpu" else GPU
    twin = CaseSpec(KERNEL, method.m, method.n, method.k, method.dtype, {"plant_pct": 0})
    plant = CaseSpec(KERNEL, method.m, method.n, method.k, method.dtype, {"plant_pct": _number(pct)})
    rule, budget = _rule(cfg)
    session = _measure(p.where, method, twin, plant, rule, budget)
    rows = _rows(t.sha, session, method)
    device = (rows[0]["device_name"], rows[0]["arch"])
    if device != (t.device_name, t.arch):
        raise PerfciError(f"this machine measures {device[0]} ({device[1]}), tonight's results are of "
                          f"{t.device}: the canary must run where the suite runs (or --no-canary)")
    path = cfg.out / "canary.csv"
    write_results(path, rows)
    log.files.append("canary.csv")
    record = _record(t, p.suite, pct, method, path, session, rule, judge(store, sources.profile, cfg.nights, rows))
    result = CanaryResult(record, rates([*_earlier(store.path), record]), path)
    log.warnings.extend(warnings_for(record))
    return StageOutcome(core.OK, f"{tonight_line(record)} ({session.seconds:.0f} s of rounds)", result)


# --------------------------------------------------------------------------- the rule confirm would use


def _rule(cfg: NightConfig):
    """confirm's stopping rule (its looks, --min-rounds, --max-rounds, --min-effect, --alpha from the night's
    --confirm-args), and the canary's own budget: confirm's --budget is the flagged cases' time, not its."""
    p = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    p.add_argument("--min-rounds", type=int, default=5)
    p.add_argument("--max-rounds", type=int)
    p.add_argument("--min-effect", type=float, default=1.0)
    p.add_argument("--alpha", type=float, default=0.05)
    try:
        known, _ = p.parse_known_args(list(cfg.confirm_args))
        rule = StoppingRule(known.min_rounds, known.max_rounds, alpha=known.alpha,
                            min_effect_pct=known.min_effect)
    except (argparse.ArgumentError, ValueError):  # confirm says what is wrong with them, if it runs
        rule = StoppingRule()
    return rule, cfg.canary_budget_s


# --------------------------------------------------------------------------- measuring


@dataclass
class Session:
    rounds: list  # perfci.confirm.analysis.Round per completed round
    first: dict  # side -> (CaseResult, env dict) of its first ok run
    look: object  # the last perfci.confirm.stopping.Look
    seconds: float = 0.0


def _measure(where: Path, method: Method, twin, plant, rule, budget_s: float) -> Session:
    isolation = "run" if hasattr(os, "fork") else "spawn"
    options = RunOptions(iters=method.iters, repeats=method.repeats, isolation=isolation)
    specs = {"base": twin, "cur": plant}
    session = Session([], {}, None)
    failures: dict[str, str] = {}
    with CaseRunner(options, where) as runner:
        device = runner.resolve_device(method.device)
        fast = device == "cuda"
        runner.options = replace(options, device=device, warmup_min_s=0.1 if fast else 0.05,
                                 warmup_max_s=1.5 if fast else 0.5)
        lock = gpu_lock(options.lock_timeout_s, lambda text: print(f"perfci nightly: canary: {text}",
                                                                     file=sys.stderr)) if fast else None
        started = time.monotonic()
        orders = round_orders("perfci canary")  # confirm's rounds: ABBA / BAAB, twin = base
        try:
            while True:
                values: dict[str, list] = {"base": [], "cur": []}
                for side in next(orders):
                    values[side].append(_one_run(runner, specs[side], side, session.first, failures))
                session.rounds.append(Round(base=tuple(values["base"]), cur=tuple(values["cur"])))
                if len(session.rounds) == 1:
                    dead = [s for s in ("base", "cur") if not any(values[s])]
                    if dead:
                        build = "twin" if dead[0] == "base" else "planted build"
                        raise PerfciError(f"the canary's {build} did not measure: {failures.get(dead[0], '?')}")
                session.seconds = time.monotonic() - started
                per_round = session.seconds / len(session.rounds)
                left = max(0, int((budget_s - session.seconds) // per_round))
                session.look = look({twin.key: session.rounds}, rule, force=left == 0, rounds_left=left)
                if session.look.stop:
                    return session
        finally:
            if lock is not None:
                lock.release()


def _one_run(runner, spec, side: str, first: dict, failures: dict) -> float | None:
    got: list = []
    runner.run([spec], lambda i, result, raw: got.append((result, raw.get("env"))))
    result, env = got[0] if got else (None, None)
    if result is None or result.status != "ok" or not result.median_us:
        failures[side] = f"{result.status} {result.message}".strip() if result is not None else "no result"
        return None
    first.setdefault(side, (result, env))
    return float(result.median_us)


def _rows(sha: str, session: Session, method: Method) -> list[dict[str, str]]:
    """Each build's first run as ``perfci run`` writes a row, recorded at tonight's commit."""
    rows = []
    for side in ("base", "cur"):
        result, env = session.first[side]
        environment = Environment(**env) if env else fallback_environment(method.device)
        environment = replace(environment, git_sha=sha or environment.git_sha)
        peaks = ceiling_for(environment.arch, result.spec.dtype)
        rows.append(result_to_row(result, environment, SUITE, *(peaks or (None, None))))
    return rows


# --------------------------------------------------------------------------- judging


@dataclass(frozen=True)
class Judged:
    baseline: str = ""
    twin: tuple = ("", None, None, None)  # verdict, ratio, low, high
    plant: tuple = ("", None, None, None)


def judge(store: Store, profile_path: str | None, pool_nights: int, rows: list[dict[str, str]]) -> Judged:
    """The twin against the store's earlier canary nights, and the planted build against the same
    (with the noise profile at ``profile_path``; None: the arch's built-in)."""
    if store.path is None or not (Path(store.path) / MANIFEST).is_file():
        return Judged()
    history = store.history()
    nights = [r for r in history.runs if r.info.suite == SUITE]
    if not nights:
        return Judged()
    profile = read_profile(profile_path) if profile_path else None
    twin, plant = rows
    out = {}
    with tempfile.TemporaryDirectory(prefix="perfci-canary-") as tmp:
        for name, row in (("twin", twin), ("plant", dict(plant, kernel=twin["kernel"]))):
            path = Path(tmp) / f"{name}.csv"
            write_results(path, [row])
            if len(nights) >= 2:
                table, cells = read_results_cells(path)
                check_tonight(history, table, cells)  # before the triage records, as the CLI's compare
                result = pooled_compare(history, table, cells, store.triage(), profile, CompareOptions(),
                                        pool_nights)
            else:
                # as the suite's cases against one night (stages.baseline)
                within = CompareOptions(unchanged_within_pct=core.ONE_NIGHT_UNCHANGED_WITHIN_PCT)
                result = compare(nights[-1].table, read_any(path), profile, within)
            case = next((c for c in result.cases if c.key == (twin["kernel"], twin["shape"], twin["dtype"])),
                        None)
            out[name] = ("", None, None, None) if case is None else (
                case.verdict, case.ratio, case.ci_low,
                case.ci_high)
    used = f"pooled, last {min(pool_nights, len(nights))} of {len(nights)} nights" if len(nights) >= 2 \
        else "one night"
    return Judged(used, out["twin"], out["plant"])


def _record(t: TonightResult, suite: str, pct: float, method: Method, path: Path, session: Session, rule, judged: Judged
            ) -> CanaryNight:
    # lazy: the bundled kernels; a canary that cannot load them is a warning, never a failed night
    from perfci_kernels.canary import CPU_BLOCKS, GPU_BLOCKS, planted_pct

    table, cells = read_results_cells(path)
    info = run_info(str(path), table, cells)
    truth = analyze_case(session.rounds, rule.min_effect_pct, 0.95)
    conf = session.look.confirmation if session.look is not None else None
    paired = conf.cases[0] if conf is not None and conf.cases else None
    block_k = (CPU_BLOCKS if method.device == "cpu" else GPU_BLOCKS)[2]
    return CanaryNight(
        run_id=info.run_id, timestamp=info.timestamp, sha=t.sha, device_name=t.device_name, arch=t.arch,
        suite=suite, plant_pct=pct, planted_pct=planted_pct(method.k, block_k, pct),
        shape=f"{method.m}x{method.n}x{method.k}", dtype=method.dtype,
        truth_ratio=truth.ratio, truth_low=truth.ci_low, truth_high=truth.ci_high, baseline=judged.baseline,
        twin_verdict=str(judged.twin[0]), twin_ratio=judged.twin[1], twin_low=judged.twin[2],
        twin_high=judged.twin[3], plant_verdict=str(judged.plant[0]), plant_ratio=judged.plant[1],
        plant_low=judged.plant[2], plant_high=judged.plant[3],
        confirm_verdict=str(paired.verdict) if paired is not None else "",
        confirm_ratio=paired.ratio if paired is not None else None,
        confirm_low=paired.ci_low if paired is not None else None,
        confirm_high=paired.ci_high if paired is not None else None,
        confirm_rounds=paired.rounds if paired is not None else len(session.rounds))


def _earlier(store: str | None) -> list[CanaryNight]:
    if store is None or not (Path(store) / MANIFEST).is_file():
        return []
    return load_canaries(store)


def warnings_for(c: CanaryNight) -> list[str]:
    """A blind or noisy detector tonight, in words: warnings, never the night's verdict."""
    out = []
    size = (f"the plant measured {100 * (c.truth_ratio - 1):+.1f}%" if c.truth_ratio
            else f"a {c.plant_pct:g}% plant")
    if c.false_alarm:
        out.append(f"canary: compare called the unchanged twin {c.twin_verdict} "
                   f"({_pct(c.twin_ratio)}): a false alarm of compare tonight")
    if c.plant_verdict in NOT_FOUND:
        out.append(f"canary: compare did not find the planted build ({c.plant_verdict} {_pct(c.plant_ratio)}; "
                   f"{size}): a change of that size can pass compare unseen tonight")
    if c.confirm_verdict in NOT_FOUND:
        out.append(f"canary: confirm's paired check did not find the planted build ({c.confirm_verdict} "
                   f"{_pct(c.confirm_ratio)} after {c.confirm_rounds} rounds; {size})")
    return out


def _pct(ratio: float | None) -> str:
    return f"{100.0 * (ratio - 1.0):+.1f}%" if ratio is not None and math.isfinite(ratio) else "?"


def _number(pct: float) -> float | int:
    """3.0 -> 3: the variant as a suite would write it, so the case's label reads plant_pct=3."""
    return int(pct) if float(pct).is_integer() else pct
