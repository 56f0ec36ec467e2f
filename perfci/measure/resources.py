"""The compiled kernels a case launches: their launch config and resources, read on the device.

A launcher in ``kernels/`` names its launches on the call it returns
(``run.launches``: ``(jit_function, grid, args, kwargs)`` per kernel, in launch
order). After the correctness gate has compiled them, ``jit_function.warmup``
with the same arguments returns the very ``CompiledKernel`` the timed launches
use (Triton's cache key is the same; nothing is launched). From it:

* AMD: the amdgcn metadata (``kernel.asm["amdgcn"]``, parsed by
  :func:`perfci.compile.resources.parse_amdgcn`): VGPRs, AGPRs, SGPRs, spills, scratch;
* NVIDIA: ``n_regs`` and ``n_spills`` (the driver's count once the kernel is loaded);
* both: ``metadata.shared``, num_warps, num_stages, the AMD knobs, and the
  occupancy :mod:`perfci.compile.arches` computes from them (arches it knows).

On the CPU interpreter nothing is compiled: each launch's grid and config as its
host code passed them, without resources. Every record carries its kernel's
source hash (:func:`source_id`), so a config that changed while the source did
not (an autotuner's flip) is told from a code change. Nothing for a
vendor-library case (no Triton launch). Never raises: a failure is a note, the
case is still measured.
"""
from __future__ import annotations

import gc
import hashlib
import inspect
import textwrap
from dataclasses import replace
from typing import Any, Mapping, Sequence

from perfci.compile.arches import ARCHES, amd_occupancy, nvidia_occupancy
from perfci.compile.capture import TUNERS, triton_launches
from perfci.compile.report import AMD_KNOBS
from perfci.compile.resources import parse_amdgcn
from perfci.model import KernelRecord


def _text(value: Any) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def launch_fields(grid: Sequence[int], kwargs: Mapping[str, Any], metadata: Any = None) -> dict[str, str]:
    """grid (``AxBxC``), the upper-case integer constexprs (block sizes), warps, stages, AMD knobs."""
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    out = {"grid": "x".join(map(str, grid))}
    out.update({k: _text(v) for k, v in kwargs.items()
                if k.isupper() and isinstance(v, int)})
    for key in ("num_warps", "num_stages", *AMD_KNOBS):
        value = getattr(metadata, key, None) if metadata is not None else None
        value = kwargs.get(key) if value is None else value
        if value is not None:
            out[key] = _text(value)
    return out


def resource_fields(kernel: Any, arch: str) -> dict[str, str]:
    """Registers, spills, scratch, shared memory and occupancy of a ``CompiledKernel`` on ``arch``."""
    md = kernel.metadata
    shared = int(getattr(md, "shared", 0) or 0)
    warps = int(getattr(md, "num_warps", 4) or 4)
    known = ARCHES.get(arch)
    asm = getattr(kernel, "asm", {}) or {}
    out: dict[str, str] = {}
    occ = None
    if "amdgcn" in asm:
        res = parse_amdgcn(asm["amdgcn"])
        out.update(regs=str(res.total_vgprs), vgprs=str(res.vgprs), agprs=str(res.agprs), sgprs=str(res.sgprs),
                   spills=str(res.spills), scratch=str(res.scratch_bytes))
        if known is not None and known.vendor == "amd":
            occ = amd_occupancy(known, res.total_vgprs, shared, warps)
    else:
        regs, spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
        if regs is not None:
            out["regs"] = str(int(regs))
        if spills is not None:
            out["spills"] = str(int(spills))
        if regs is not None and known is not None and known.vendor == "nvidia":
            occ = nvidia_occupancy(known, int(regs), shared, warps)
    out["shared"] = str(shared)
    if occ is not None:
        out.update(occupancy=str(occ.value), occ_limit=occ.limiter)
    return out


def kernel_record(kernel: Any, grid: Sequence[int], kwargs: Mapping[str, Any], arch: str) -> KernelRecord:
    fields = launch_fields(grid, kwargs, kernel.metadata)
    return KernelRecord(str(kernel.name), tuple(fields.items()), tuple(resource_fields(kernel, arch).items()))


def source_id(fn: Any, tuner: Any = None) -> str:
    """A hash of a launched kernel's source, the same whatever config it is launched with ("" unknown).

    A JIT function's Triton ``cache_key`` (its source, the JIT functions it calls and the
    constexpr globals it reads; Triton recompiles when it changes; it also changes when the
    kernel moves within its file, which then reads as a source change: judged as any change);
    in the interpreter, which has no such key, the function's source text. With the autotuner
    that launched it, its configs and key too: the choice may move, the choices may not.
    """
    fn = _jit_function(fn)
    try:
        key = getattr(fn, "cache_key", None)
        if not isinstance(key, str) or not key:
            key = textwrap.dedent(inspect.getsource(getattr(fn, "fn", fn)))
    except (OSError, TypeError, AttributeError):
        return ""
    if tuner is not None:
        key += "|" + repr([str(c) for c in getattr(tuner, "configs", ())]) + repr(getattr(tuner, "keys", ()))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def _jit_function(fn: Any) -> Any:
    compiled = getattr(fn, "kernel", None)  # a library's own compiled kernel (capture._Compiled)
    return getattr(getattr(compiled, "src", None), "fn", None) if compiled is not None else fn


def tuner_of(fn: Any) -> Any:
    """The autotuner that launches ``fn`` (None: its host code chose the config).

    Seen launching it (:data:`perfci.compile.capture.TUNERS`), or, for a kernel a library
    launches from its own cache of compiled kernels (which skips the autotuner after its
    first call), an ``Autotuner`` (Triton's, or a library's built on it) that wraps it.
    """
    jit = _jit_function(fn)
    if jit is None:
        return None
    if id(jit) in TUNERS:
        return TUNERS[id(jit)]
    if fn is jit:  # launched as it is: its host code chose the config
        return None
    if id(jit) not in _WRAPPED:
        try:
            from triton.runtime.autotuner import Autotuner  # lazy: triton (absent for vendor libraries)
            from triton.runtime.jit import KernelInterface  # lazy: triton
        except ImportError:
            return None
        _WRAPPED[id(jit)] = _wrapping(jit, Autotuner, KernelInterface)
    return _WRAPPED[id(jit)]


# id(JIT function) -> the Autotuner found wrapping it (or None), once per process: a search of the heap.
_WRAPPED: dict[int, Any] = {}


def _wrapping(jit: Any, kind: type, wrapper: type) -> Any:
    """An object of ``kind`` whose ``fn`` is ``jit``, directly or through one other ``wrapper``
    (Triton's ``KernelInterface``: ``Heuristics``); only such objects are looked into."""
    frontier = [jit]
    for _ in range(2):
        wrappers = []
        for inner in frontier:
            for ref in gc.get_referrers(inner):
                owners = [o for o in gc.get_referrers(ref) if isinstance(o, wrapper) and o.__dict__ is ref] \
                    if isinstance(ref, dict) else [ref] if isinstance(ref, wrapper) else []
                for owner in owners:
                    if getattr(owner, "fn", None) is inner:
                        if isinstance(owner, kind):
                            return owner
                        wrappers.append(owner)
        frontier = wrappers
    return None


def _name(fn: Any) -> str:
    compiled = getattr(fn, "kernel", None)
    return str(getattr(compiled, "name", "") or getattr(fn, "__name__", "") or type(fn).__name__)


def record_launches(prepared: Any, arch: str, gpu: bool) -> dict:
    """``{"kernels": [...]}`` for the worker's result (or a ``kernels_note``); {} when there is nothing to read.

    perfci's launchers name their launches; any other kernel's are observed over one more
    ``run()`` (after the gate, outside the timed region), so a team's Triton kernel gets its
    config, registers, spills and occupancy recorded too, and ``compare --explain`` can read
    them. What launched is what perfci sees: a library's own autotuner's choice counts as
    much as ``@triton.autotune``'s. On the CPU: the launches' configs and sources only.
    """
    try:
        launches = getattr(prepared.run, "launches", ()) or _observed(prepared)
        if not launches:
            return {}
        records = []
        for fn, grid, args, kwargs in launches:
            tuner = tuner_of(fn)
            if gpu:
                record = kernel_record(fn.warmup(*args, grid=grid, **kwargs), grid, kwargs, arch)
            else:
                record = KernelRecord(_name(fn), tuple(launch_fields(_grid(grid, fn, args, kwargs), kwargs).items()))
            records.append(replace(record, source=source_id(fn, tuner), autotuned=tuner is not None))
    except Exception as err:  # noqa: BLE001 - metadata must never sink a measurement
        return {"kernels_note": f"compiled resources not read ({type(err).__name__}: {str(err)[:200]})"}
    return {"kernels": [{"name": r.name, "launch": dict(r.launch), "resources": dict(r.resources),
                         "source": r.source, "autotuned": r.autotuned} for r in records]}


def _grid(grid: Any, fn: Any, args: tuple, kwargs: Mapping[str, Any]) -> tuple[int, ...]:
    """A launcher's grid as numbers (Triton's idiom passes a function of the launch's arguments)."""
    if callable(grid):
        grid = grid({**dict(zip(getattr(fn, "arg_names", ()), args)), **kwargs})
    return tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))


def _observed(prepared: Any) -> list[tuple]:
    # No Triton here (a vendor-library case): entering the capture raises ImportError,
    # which record_launches turns into a kernels_note.
    with triton_launches(execute=True) as seen:
        prepared.run()
    return seen


def records_from_result(data: Mapping[str, Any]) -> tuple[KernelRecord, ...]:
    """The worker result's ``kernels`` as records (for ``CaseResult.kernels``); () when absent."""
    return tuple(KernelRecord(str(k["name"]), tuple((str(a), str(b)) for a, b in k.get("launch", {}).items()),
                              tuple((str(a), str(b)) for a, b in k.get("resources", {}).items()),
                              str(k.get("source") or ""), bool(k.get("autotuned")))
                 for k in data.get("kernels") or ())
