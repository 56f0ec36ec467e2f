"""Resources files: what every case of a suite compiled to on one arch, as JSON. Pure but for :func:`read`.

A file is the baseline a later compile is diffed against (``perfci compile
--baseline``), committed under ``baselines/compile/SUITE-ARCH.json``::

    {"schema": 1, "kind": "perfci-compile-resources", "suite": "decode", "arch": "gfx950",
     "compilers": {"triton": "3.9.0", "amd_codegen": "6bc4..."},
     "cases": [{"kernel": "gemv", "shape": "1x1024x6144", "dtype": "bf16", "status": "ok",
                "kernels": [{"kernel": "gemv_kernel", "config": {...}, "vgprs": 86, "agprs": 0,
                             "sgprs": 30, "registers": 86, "spills": 0, "spill_unit": "registers",
                             "scratch_bytes": 0, "shared_bytes": 4096,
                             "occupancy": {"value": 5, "unit": "waves/SIMD", "limiter": "registers", ...},
                             "problems": []}, ...]}, ...]}

A case is keyed by (kernel label, shape, dtype), as in every results file; its
``kernels`` are the launches it makes in order (split-K: partials, then the
reduction), each with the fields ``--format json`` prints for a kernel.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from perfci.compile.arches import ARCHES, Occupancy
from perfci.compile.report import CaseReport, KernelReport, kernel_json
from perfci.errors import PerfciError
from perfci.files import read_input_text

SCHEMA = 1
KIND = "perfci-compile-resources"
_INT_FIELDS = ("vgprs", "agprs", "sgprs", "registers", "spills", "scratch_bytes", "shared_bytes")


@dataclass(frozen=True)
class CaseResources:
    """One case of a resources file: its key, status and the kernels it launches."""

    kernel: str  # the case label: matmul_tiled[epilogue=bias]
    shape: str
    dtype: str
    status: str  # ok, accepted, fail, vendor
    kernels: tuple[KernelReport, ...]
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.shape, self.dtype)


@dataclass(frozen=True)
class ResourceFile:
    suite: str
    arch: str
    compilers: tuple[tuple[str, str], ...]  # (name, version): triton, ptxas / amd_codegen
    cases: tuple[CaseResources, ...]

    def by_key(self) -> dict[tuple[str, str, str], CaseResources]:
        return {c.key: c for c in self.cases}

    def only(self, keys: Iterable[tuple[str, str, str]]) -> "ResourceFile":
        """The same file restricted to ``keys`` (a --filter's selection)."""
        wanted = set(keys)
        return ResourceFile(self.suite, self.arch, self.compilers, tuple(c for c in self.cases if c.key in wanted))


def from_reports(reports: Sequence[CaseReport], suite: str, arch: str, compilers: Mapping[str, str]) -> ResourceFile:
    cases = tuple(CaseResources(r.case.label, r.case.shape, r.case.dtype, r.status, r.kernels,
                                r.note or (f"accepted spill: {r.accepted}" if r.accepted else ""))
                  for r in reports if r.arch == arch)
    return ResourceFile(suite, arch, tuple(sorted(compilers.items())), cases)


def _case_entry(case: CaseResources) -> dict[str, Any]:
    entry: dict[str, Any] = {"kernel": case.kernel, "shape": case.shape, "dtype": case.dtype, "status": case.status}
    if case.note:
        entry["note"] = case.note
    entry["kernels"] = [kernel_json(k) for k in case.kernels]
    return entry


def to_json(rf: ResourceFile) -> str:
    return json.dumps({"schema": SCHEMA, "kind": KIND, "suite": rf.suite, "arch": rf.arch,
                       "compilers": dict(rf.compilers), "cases": [_case_entry(c) for c in rf.cases]},
                      indent=1) + "\n"


class _Bad(ValueError):
    pass


def _need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _Bad(f"{where}: no '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _Bad(f"{where}: '{key}' is {type(value).__name__}")
    return value


def _opt_int(obj: dict, key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Bad(f"{where}: '{key}' is not an integer")
    return value


def _kernel(obj: Any, where: str) -> KernelReport:
    name = _need(obj, "kernel", str, where)
    config = _need(obj, "config", dict, where)
    occ = obj.get("occupancy")
    occupancy = None
    if occ is not None:
        occupancy = Occupancy(_need(occ, "value", int, where + ".occupancy"), _need(occ, "unit", str, where),
                              int(occ.get("by_registers") or 0), int(occ.get("by_shared") or 0),
                              _need(occ, "limiter", str, where))
    problems = obj.get("problems") or []
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise _Bad(f"{where}: 'problems' is not a list of strings")
    ints = {key: _opt_int(obj, key, where) for key in _INT_FIELDS}
    return KernelReport(kernel=name, config=tuple(config.items()), grid=tuple(obj.get("grid") or ()),
                        spill_unit=str(obj.get("spill_unit") or ""), occupancy=occupancy,
                        problems=tuple(problems), **ints)


def parse(text: str, where: str) -> ResourceFile:
    """A resources file's text -> :class:`ResourceFile`; PerfciError (one line) if it is not one."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise PerfciError(f"{where}: not JSON ({err})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise PerfciError(f"{where}: not a perfci compile resources file (write one with "
                          f"`perfci compile SUITE --arch ARCH --out FILE`)")
    if data.get("schema") != SCHEMA:
        raise PerfciError(f"{where}: schema {data.get('schema')!r}, this perfci reads schema {SCHEMA}; "
                          f"write it again with this perfci")
    try:
        suite = _need(data, "suite", str, where)
        arch = _need(data, "arch", str, where)
        if arch not in ARCHES:
            raise _Bad(f"{where}: arch '{arch}' is none of {', '.join(ARCHES)}")
        compilers = _need(data, "compilers", dict, where)
        cases = []
        for i, c in enumerate(_need(data, "cases", list, where)):
            at = f"{where}: cases[{i}]"
            key = [_need(c, name, str, at) for name in ("kernel", "shape", "dtype", "status")]
            kernels = tuple(_kernel(k, f"{at}.kernels[{j}]") for j, k in enumerate(_need(c, "kernels", list, at)))
            cases.append(CaseResources(*key, kernels, str(c.get("note") or "")))
    except _Bad as err:
        raise PerfciError(str(err)) from None
    keys = [c.key for c in cases]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise PerfciError(f"{where}: case {' '.join(dup)} appears twice")
    return ResourceFile(suite, arch, tuple(sorted((str(k), str(v)) for k, v in compilers.items())), tuple(cases))


def read(path: str) -> ResourceFile:
    return parse(read_input_text(path, "resources"), path)
