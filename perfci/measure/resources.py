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

Nothing on the CPU interpreter (no compiled kernel) or for a vendor-library case
(no launches named). Never raises: a failure is a note, the case is still measured.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from perfci.compile.arches import ARCHES, amd_occupancy, nvidia_occupancy
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


def record_launches(prepared: Any, arch: str, gpu: bool) -> dict:
    """``{"kernels": [...]}`` for the worker's result (or a ``kernels_note``); {} when there is nothing to read.

    perfci's launchers name their launches; any other kernel's are observed over one more
    ``run()`` (after the gate, outside the timed region), so a team's Triton kernel gets its
    registers, spills and occupancy recorded too, and ``compare --explain`` can read them.
    """
    if not gpu:
        return {}
    try:
        launches = getattr(prepared.run, "launches", ()) or _observed(prepared)
        if not launches:
            return {}
        records = [kernel_record(fn.warmup(*args, grid=grid, **kwargs), grid, kwargs, arch)
                   for fn, grid, args, kwargs in launches]
    except Exception as err:  # noqa: BLE001 - metadata must never sink a measurement
        return {"kernels_note": f"compiled resources not read ({type(err).__name__}: {str(err)[:200]})"}
    return {"kernels": [{"name": r.name, "launch": dict(r.launch), "resources": dict(r.resources)}
                        for r in records]}


def _observed(prepared: Any) -> list[tuple]:
    try:
        from perfci.compile.capture import triton_launches
    except ImportError:  # no Triton here: a vendor-library case
        return []
    with triton_launches(execute=True) as seen:
        prepared.run()
    return seen


def records_from_result(data: Mapping[str, Any]) -> tuple[KernelRecord, ...]:
    """The worker result's ``kernels`` as records (for ``CaseResult.kernels``); () when absent."""
    return tuple(KernelRecord(str(k["name"]), tuple((str(a), str(b)) for a, b in k.get("launch", {}).items()),
                              tuple((str(a), str(b)) for a, b in k.get("resources", {}).items()))
                 for k in data.get("kernels") or ())
