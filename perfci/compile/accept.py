"""Resource changes perfci accepts in a compile diff, each with its bound and its reason. Pure data.

A case the diff finds worse (:mod:`perfci.compile.diff`) still passes when every
worse change is covered by an entry here: same arch, a case label starting with
the entry's prefix, and the new value within the entry's bound for that field
(``spills``, ``scratch_bytes``, ``shared_bytes``: at most the bound; ``occupancy``:
at least). A compile error is never accepted. Add an entry in the commit that
causes the change, with the measurement or reason that makes it acceptable;
remove it when the cause is gone. A project accepts its own kernels' changes the
same way, in ``[tool.perfci] compile_accept`` (:func:`project_entries`).

:data:`perfci.compile.report.ACCEPTED_SPILLS` (the absolute check: a spill
perfci tolerates at all) are accepted here too: a spill within its bound does
not fail the diff either, and on NVIDIA a spill lives in the stack frame, so
the same bound covers the scratch (stack) bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from perfci.compile.arches import ARCHES
from perfci.compile.report import ACCEPTED_SPILLS
from perfci.errors import PerfciError

BOUNDED = ("spills", "scratch_bytes", "shared_bytes", "occupancy")


@dataclass(frozen=True)
class Accepted:
    arch: str
    prefix: str  # case labels starting with it: "splitk_decode", "matmul_tiled[epilogue=bias_gelu]"
    bounds: tuple[tuple[str, int], ...]  # (field, bound): spills / scratch / shared at most, occupancy at least
    reason: str
    shapes: tuple[str, ...] = ()  # only these shapes (MxNxK); () for every shape of the prefix

    def covers(self, arch: str, label: str, field: str, value: int | None, shape: str = "") -> bool:
        if arch != self.arch or not label.startswith(self.prefix) or value is None:
            return False
        if self.shapes and shape not in self.shapes:
            return False
        for name, bound in self.bounds:
            if name == field:
                return value >= bound if field == "occupancy" else value <= bound
        return False


# Changes accepted beyond ACCEPTED_SPILLS (docs/compile.md: the Triton 3.8 -> 3.9 diff).
ACCEPTED_CHANGES: tuple[Accepted, ...] = (
    Accepted("sm_90", "gemv", (("occupancy", 16),),
             "ptxas 13.4 (Triton 3.9) gives the 1x8x1024 4-warp GEMV 104 registers where ptxas 12.9 (Triton 3.8) "
             "gave 96, so 16 warps/SM fit instead of 20; its grid is 128 (N=1024) or 24 (N=192) blocks of 4 warps "
             "on 132 SMs, one block per SM, which either occupancy holds",
             shapes=("1x1024x6144", "1x192x6144")),
)


def project_entries(entries: Iterable[Mapping[str, Any]], where: str = "[tool.perfci] compile_accept"
                    ) -> tuple[Accepted, ...]:
    """A project's ``compile_accept`` tables (perfci.config checked their keys and types) as entries."""
    out = []
    for entry in entries:
        if entry["arch"] not in ARCHES:
            raise PerfciError(f"{where}: arch {entry['arch']!r} is not one of {', '.join(ARCHES)}")
        bounds = tuple((k, int(entry[k])) for k in BOUNDED if k in entry)
        out.append(Accepted(entry["arch"], entry["case"], bounds, entry["reason"], tuple(entry.get("shapes", ()))))
    return tuple(out)


def accepted_table(project: tuple[Accepted, ...] = ()) -> tuple[Accepted, ...]:
    """ACCEPTED_SPILLS as diff entries (on NVIDIA, where both are bytes, bounding the stack too), perfci's
    own accepted changes, then the project's (``[tool.perfci] compile_accept``)."""
    spills = tuple(Accepted(arch, prefix, (("spills", most),) + ((("scratch_bytes", most),)
                                                                 if ARCHES[arch].vendor == "nvidia" else ()), why)
                   for (arch, prefix), (most, why) in ACCEPTED_SPILLS.items())
    return spills + ACCEPTED_CHANGES + project
