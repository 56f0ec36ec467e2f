"""Two resources files of one suite and arch -> what each case's compiled kernels gained or lost. Pure.

The rule (:data:`RULE`), kernel by kernel within a case (matched by kernel name):

- worse: more spills, more scratch, lower occupancy, shared memory / LDS past
  the arch's per-workgroup budget (newly, or further past it), a compile error
  that was not there, or a case new to the suite that fails the absolute check;
- better: the reverse of any of those;
- reported only: registers (VGPRs / AGPRs / SGPRs), shared memory within the
  budget, the config, a kernel added or dropped without a problem: a change
  that keeps occupancy costs nothing the arch can see.

A case with a worse change is ``worse`` even where another change is better. A
worse case whose every worse change falls within an entry of
:func:`perfci.compile.accept.accepted_table` is accepted: reported, not failed.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from perfci.compile.accept import Accepted, accepted_table
from perfci.compile.arches import ARCHES
from perfci.compile.baseline import CaseResources, ResourceFile
from perfci.compile.report import KernelReport
from perfci.errors import PerfciError

RULE = ("rule: worse = more spills or scratch, lower occupancy, shared memory / LDS past the arch's "
        "per-workgroup budget (gfx942 64 KiB, gfx950 160 KiB, sm_90 227 KiB), a new compile error, or a new "
        "case that fails; better = the reverse; a register, LDS or config change that keeps occupancy is "
        "reported, not failed. Exit 1 on a worse case unless accepted (perfci/compile/accept.py, or the project's "
        "[tool.perfci] compile_accept: a bound and a reason each).")


class ResourceVerdict(str, Enum):
    """A case's verdict in compile's diff (:data:`RULE`), and each change's effect (worse / better).

    Not :class:`perfci.verdict.Verdict`: this judges what the compiler made of a
    kernel (spills, occupancy, shared memory), not its time. A str, written as its
    value, as a timing verdict is.
    """

    WORSE = "worse"
    BETTER = "better"
    SAME = "same"  # nothing the arch can see changed (a register or config change may be reported)
    ADDED = "added"  # only in the current file
    REMOVED = "removed"  # only in the baseline

    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__


VERDICTS = tuple(ResourceVerdict)
REPORTED = ("vgprs", "agprs", "sgprs", "registers")  # AMD: VGPR/AGPR/SGPR; NVIDIA: registers per thread


@dataclass(frozen=True)
class Change:
    kernel: str  # the kernel function ("splitk_reduce_kernel"); a case's main kernel is its first
    field: str  # vgprs, agprs, sgprs, registers, spills, scratch_bytes, shared_bytes, occupancy, error,
    #             kernel (added or dropped), config.KEY
    before: Any
    after: Any
    effect: ResourceVerdict | str  # WORSE, BETTER or "" (reported only)
    unit: str = ""  # occupancy: waves/SIMD or warps/SM; spills: registers or B
    limiters: tuple[str, str] = ("", "")  # occupancy: what limited it before and after


@dataclass(frozen=True)
class CaseDiff:
    kernel: str  # the case label
    shape: str
    dtype: str
    verdict: ResourceVerdict
    changes: tuple[Change, ...]
    accepted: str = ""  # a worse case's acceptance reasons, or ""
    main_kernel: str = ""  # the first kernel's function name: changes of others are named

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.shape, self.dtype)

    @property
    def failing(self) -> bool:
        return self.verdict == ResourceVerdict.WORSE and not self.accepted


@dataclass(frozen=True)
class ResourceDiff:
    suite: str
    arch: str
    base_compilers: tuple[tuple[str, str], ...]
    cur_compilers: tuple[tuple[str, str], ...]
    cases: tuple[CaseDiff, ...]

    @property
    def failing(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.failing)

    @property
    def changed(self) -> tuple[CaseDiff, ...]:
        """Every case with something to say: a change, or added / removed."""
        one_sided = (ResourceVerdict.ADDED, ResourceVerdict.REMOVED)
        return tuple(c for c in self.cases if c.changes or c.verdict in one_sided)

    def counts(self) -> dict[str, int]:
        out = {v: sum(1 for c in self.cases if c.verdict == v) for v in VERDICTS}
        out["accepted"] = sum(1 for c in self.cases if c.verdict == ResourceVerdict.WORSE and c.accepted)
        return out


def _error(k: KernelReport | None) -> str:
    if k is None:
        return ""
    return next((p for p in k.problems if p.startswith("compile error")), "")


def _occ(k: KernelReport | None) -> tuple[int | None, str, str]:
    if k is None or k.occupancy is None:
        return None, "", ""
    return k.occupancy.value, k.occupancy.unit, k.occupancy.limiter


def kernel_changes(base: KernelReport | None, cur: KernelReport | None, arch: str) -> list[Change]:
    """What changed in one kernel; ``base`` None: a kernel the case did not launch before (and the reverse)."""
    name = (cur or base).kernel  # type: ignore[union-attr]
    budget = ARCHES[arch].shared_per_block
    out: list[Change] = []
    if base is None or cur is None:
        # Added or dropped: reported; an added kernel's spills, errors and shared memory are judged below
        # against nothing (no spill, no scratch, no error before).
        out.append(Change(name, "kernel", None if cur is not None else name, name if cur is not None else None, ""))
        if cur is None:
            return out
    b_err, c_err = _error(base), _error(cur)
    if b_err != c_err and (not b_err or not c_err):
        out.append(Change(name, "error", b_err or None, c_err or None,
                          ResourceVerdict.WORSE if c_err else ResourceVerdict.BETTER))
    if c_err:
        return out
    b_cfg, c_cfg = dict(base.config) if base else {}, dict(cur.config)  # type: ignore[union-attr]
    for key in dict.fromkeys(list(b_cfg) + list(c_cfg)):
        if base is not None and b_cfg.get(key) != c_cfg.get(key):
            out.append(Change(name, f"config.{key}", b_cfg.get(key), c_cfg.get(key), ""))
    assert cur is not None
    unit = "registers" if cur.spill_unit == "registers" else "B" if cur.spill_unit == "bytes" else ""

    def value(k: KernelReport | None, field: str) -> int | None:
        if k is None or _error(k):
            return 0 if field in ("spills", "scratch_bytes") else None
        return getattr(k, field)

    # AMD's unified count (VGPRs + AGPRs) says nothing the VGPRs do not when neither side has AGPRs.
    no_agprs = base is not None and cur.vgprs is not None and not base.agprs and not cur.agprs
    for field in REPORTED:
        b, c = value(base, field), value(cur, field)
        if field == "registers" and no_agprs:
            continue
        if base is not None and b is not None and c is not None and b != c:
            out.append(Change(name, field, b, c, ""))
    for field in ("spills", "scratch_bytes"):
        b, c = value(base, field), value(cur, field)
        if b is not None and c is not None and b != c:
            out.append(Change(name, field, b, c, ResourceVerdict.WORSE if c > b else ResourceVerdict.BETTER,
                              unit if field == "spills" else "B"))
    b, c = value(base, "shared_bytes"), value(cur, "shared_bytes")
    if c is not None and b != c:
        over_now, over_then = c > budget, b is not None and b > budget
        effect = (ResourceVerdict.WORSE if over_now and (not over_then or c > (b or 0))
                  else ResourceVerdict.BETTER if over_then and not over_now else "")
        if base is not None or effect:
            out.append(Change(name, "shared_bytes", b, c, effect, "B"))
    (bv, bu, bl), (cv, cu, cl) = _occ(base), _occ(cur)
    if bv is not None and cv is not None and bu == cu and (bv, bl) != (cv, cl):
        effect = ResourceVerdict.WORSE if cv < bv else ResourceVerdict.BETTER if cv > bv else ""
        out.append(Change(name, "occupancy", bv, cv, effect, cu, (bl, cl)))
    return out


def _accepted(changes: list[Change], arch: str, label: str, shape: str, table: tuple[Accepted, ...]) -> str:
    """The reasons covering every worse change, or "" when one is not covered."""
    reasons: list[str] = []
    for ch in changes:
        if ch.effect != ResourceVerdict.WORSE:
            continue
        value = ch.after
        if ch.field not in ("spills", "scratch_bytes", "shared_bytes", "occupancy") or not isinstance(value, int):
            return ""
        entry = next((a for a in table if a.covers(arch, label, ch.field, value, shape)), None)
        if entry is None:
            return ""
        reasons.append(entry.reason)
    return "; ".join(dict.fromkeys(reasons))


def case_diff(base: CaseResources | None, cur: CaseResources | None, arch: str,
              table: tuple[Accepted, ...] | None = None) -> CaseDiff:
    table = accepted_table() if table is None else table
    one = cur or base
    assert one is not None
    main = one.kernels[0].kernel if one.kernels else ""
    if base is None or cur is None:
        verdict = (ResourceVerdict.REMOVED if cur is None else ResourceVerdict.WORSE if cur.status == "fail"
                   else ResourceVerdict.ADDED)
        changes: tuple[Change, ...] = ()
        if verdict == ResourceVerdict.WORSE:
            changes = tuple(Change(k.kernel, "problems", None, "; ".join(k.problems), ResourceVerdict.WORSE)
                            for k in cur.kernels if k.problems)  # type: ignore[union-attr]
        return CaseDiff(one.kernel, one.shape, one.dtype, verdict, changes, main_kernel=main)
    found: list[Change] = []
    b_kernels = {k.kernel: k for k in base.kernels}
    c_kernels = {k.kernel: k for k in cur.kernels}
    for name in dict.fromkeys([k.kernel for k in base.kernels] + [k.kernel for k in cur.kernels]):
        found += kernel_changes(b_kernels.get(name), c_kernels.get(name), arch)
    effects = {c.effect for c in found}
    verdict = (ResourceVerdict.WORSE if ResourceVerdict.WORSE in effects else ResourceVerdict.BETTER
               if ResourceVerdict.BETTER in effects else ResourceVerdict.SAME)
    accepted = _accepted(found, arch, cur.kernel, cur.shape, table) if verdict == ResourceVerdict.WORSE else ""
    return CaseDiff(cur.kernel, cur.shape, cur.dtype, verdict, tuple(found), accepted, main)


def check_comparable(base: ResourceFile, cur: ResourceFile, base_name: str, cur_name: str) -> None:
    if base.arch != cur.arch:
        raise PerfciError(f"{base_name} is {base.arch}, {cur_name} is {cur.arch}: a diff compares one arch; "
                          f"give the baseline of {cur.arch}")
    if base.suite != cur.suite:
        raise PerfciError(f"{base_name} is suite {base.suite}, {cur_name} is suite {cur.suite}: "
                          f"give the baseline of suite {cur.suite}")


def diff(base: ResourceFile, cur: ResourceFile, table: tuple[Accepted, ...] | None = None) -> ResourceDiff:
    """Case by case, in ``cur``'s order, then the cases only ``base`` has."""
    b_cases, c_cases = base.by_key(), cur.by_key()
    cases = [case_diff(b_cases.get(c.key), c, cur.arch, table) for c in cur.cases]
    cases += [case_diff(b, None, cur.arch, table) for key, b in b_cases.items() if key not in c_cases]
    return ResourceDiff(cur.suite, cur.arch, base.compilers, cur.compilers, tuple(cases))
