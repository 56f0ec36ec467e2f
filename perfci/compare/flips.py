"""A config flip: a case whose launched config changed while its kernel's source did not. Pure.

An autotuner (``@triton.autotune``, or a library's own that picks at first
call) benchmarks its configs again in every new process, and when two are
close the choice goes either way: the same code then runs at two speeds, and
the times compare the autotuner's choices, not the code. Measuring again
cannot settle it (every run chooses again), so such a case is neither
regressed nor unchanged: it is ``config-flip``, with each config, where it
ran, its time, and how to pin it.

What counts is what perfci saw launch (the ``launch`` and ``source`` columns,
:class:`perfci.model.KernelRecord`): the runs of the case whose kernels have
tonight's source, base and cur alike, launched two or more configs, and the
config is one that can move between processes: an autotuner launched the kernel
(``autotuned``; its configs and key are part of the source hash, so a changed
list of configs is a change of code), or one revision's runs (one git_sha)
ran two configs. A config that changed together with the source is a code
change, judged as any other (``compare --explain`` names the config change), and
so is one a launcher's host code chose (a tile tuned by hand outside the JIT
function). A run that recorded no kernel or no source (a vendor library, an
older file) never makes a flip.
"""
from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Mapping, Sequence

from perfci.compare.comparison import Comparison, ConfigFlip, FlipConfig, summarize
from perfci.model import ResultRow
from perfci.verdict import TESTED, Verdict

Key = tuple[str, str, str]

# No "@" in it: in an issue or a PR comment "@triton" would be a mention.
PIN = ("pin the config so that every process launches the same one: for a triton.autotune kernel, keep only "
       "the chosen triton.Config for this case's key (or launch the plain triton.jit kernel with it); for a "
       "library's own autotuner, its own way to fix a config (a fixed config or its tuning cache); "
       "then measure again")

_Sources = tuple[tuple[str, str], ...]
_Configs = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


def identity(row: ResultRow) -> tuple[_Sources, _Configs] | None:
    """(each kernel's name and source, each kernel's name and config) of an ok row; None when it
    recorded no kernel, or a kernel without its source."""
    if row.status != "ok" or not row.kernels or not all(k.source for k in row.kernels):
        return None
    return (tuple((k.name, k.source) for k in row.kernels), tuple((k.name, k.config) for k in row.kernels))


def ran_two_configs(rows: Sequence[ResultRow]) -> bool:
    """Whether these runs of one case (a store's nights) launched two or more configs of their newest
    source, as an autotuner's choice can (:func:`find_flip`'s rule, within one side)."""
    idents = [(row, ident) for row, ident in zip(rows, map(identity, rows)) if ident is not None]
    if not idents:
        return False
    source = idents[-1][1][0]
    group = [(row, configs) for row, (sources, configs) in idents if sources == source]
    return len({configs for _, configs in group}) > 1 and _chosen_per_process(group)


def config_text(configs: _Configs) -> str:
    """``rowdot_kernel BLOCK_N=32 num_warps=2``; several kernels joined by `` + ``."""
    return " + ".join(" ".join([name, *(f"{k}={v}" for k, v in config)]) for name, config in configs)


def find_flip(base: Sequence[ResultRow], cur: Sequence[ResultRow], was: Verdict) -> ConfigFlip | None:
    """The flip among one case's runs (BASE's and CUR's rows of it), or None.

    CUR's runs must agree on the source; every run of that source (either side) counts,
    and two or more configs among them make a flip.
    """
    tonight = [i for i in map(identity, cur) if i is not None]
    if not tonight or len({sources for sources, _ in tonight}) != 1:
        return None
    source = tonight[0][0]
    seen: dict[_Configs, list[tuple[str, float | None]]] = {}
    group = []
    for side, rows in (("base", base), ("cur", cur)):
        for row in rows:
            ident = identity(row)
            if ident is not None and ident[0] == source:
                seen.setdefault(ident[1], []).append((side, row.median_us))
                group.append((row, ident[1]))
    if len(seen) < 2 or not _chosen_per_process(group):
        return None
    return ConfigFlip(tuple(FlipConfig(config_text(configs), _where(runs), _median(runs))
                            for configs, runs in seen.items()), was, PIN)


def _chosen_per_process(group: Sequence[tuple[ResultRow, _Configs]]) -> bool:
    """Whether these runs' configs can differ without a change of code: an autotuner launched the
    kernel, or one revision (git_sha) ran two configs. A config that a launcher's host code chose
    (a tile tuned by hand, in Python outside the JIT function) changed with the code: not a flip."""
    if any(k.autotuned for row, _ in group for k in row.kernels):
        return True
    by_sha: dict[str, set[_Configs]] = {}
    for row, configs in group:
        if row.git_sha:
            by_sha.setdefault(row.git_sha, set()).add(configs)
    return any(len(configs) > 1 for configs in by_sha.values())


def _where(runs: Sequence[tuple[str, float | None]]) -> str:
    out = []
    for side in ("base", "cur"):
        n = sum(1 for s, _ in runs if s == side)
        if n:
            out.append(side if n == 1 else f"{side} ({n} runs)")
    return ", ".join(out)


def _median(runs: Sequence[tuple[str, float | None]]) -> float | None:
    times = [t for _, t in runs if t is not None]
    return statistics.median(times) if times else None


def _each(flip: ConfigFlip) -> str:
    """``CONFIG in base: 28.3 us; CONFIG in cur: 57.2 us``."""
    return "; ".join(f"{c.config} in {c.seen_in}" + (f": {c.median_us:.4g} us" if c.median_us else "")
                     for c in flip.configs)


def flip_reason(flip: ConfigFlip) -> str:
    """One line: the configs, where each ran and its time, and that the source is the same."""
    return f"kernel source unchanged, launched config differs: {_each(flip)}"


def with_flips(cmp: Comparison, base: Mapping[Key, Sequence[ResultRow]],
               cur: Mapping[Key, Sequence[ResultRow]]) -> Comparison:
    """``cmp`` with every case the times judged (regressed, improved, unchanged, inconclusive)
    that is a flip (:func:`find_flip`) made ``config-flip``, and notes (which every renderer
    prints): what a flip is and how to pin it, then each flip's configs, where they ran, their times."""
    cases, flipped = [], []
    for case in cmp.cases:
        flip = (find_flip(base.get(case.key, ()), cur.get(case.key, ()), Verdict(case.verdict))
                if case.verdict in TESTED else None)
        if flip is None:
            cases.append(case)
            continue
        flipped.append(replace(case, verdict=Verdict.CONFIG_FLIP, reason=flip_reason(flip), flip=flip))
        cases.append(flipped[-1])
    if not flipped:
        return cmp
    cases.sort(key=lambda c: c.severity_key())
    notes = [f"{len(flipped)} case(s) launched another config with the kernel source unchanged (config-flip: "
             f"an autotuner's choice, not the code; not regressed, not unchanged, and not for confirm); {PIN}"]
    notes += [flip_note(c.kernel, c.shape, c.dtype, c.flip) for c in flipped if c.flip is not None]
    return replace(cmp, cases=tuple(cases), summary=summarize(cases), notes=cmp.notes + tuple(notes))


def flip_note(kernel: str, shape: str, dtype: str, flip: ConfigFlip) -> str:
    """One line for the notes every renderer prints: the case, each config where it ran and its time."""
    return f"config-flip {kernel} {shape} {dtype} (the times alone: {flip.was}): {_each(flip)}"

