"""Why a case got slower (or faster): base and cur side by side, and a one-line reading. Pure.

For every ``regressed`` / ``improved`` case: the compiled kernel's config, grid,
resources and occupancy (the ``launch`` / ``resources`` columns ``perfci run``
records), the clocks, power and throttling of the repeats, the driver and
library versions, and the position on the roofline. The reading follows fixed
rules, first match wins: a config change; register pressure (spills, or
registers with occupancy); shared memory; the grid; the compiled code; the
kernel's source (its ``source`` hash, the launch unchanged); then,
with the kernel unchanged, the device (clock moved or throttling), the software
stack (versions), and what is left (the kernel's code or inputs; for a vendor
library case, its inputs or the library).
"""
from __future__ import annotations

import statistics
from dataclasses import replace

from perfci.compare.comparison import CaseComparison, Comparison, Explanation
from perfci.model import KernelRecord, ResultRow, ResultTable
from perfci.verdict import Verdict

EXPLAINED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.CONFIG_FLIP)
VENDOR_PREFIXES = ("torch_",)  # backends that call a vendor library: no kernel of ours to read
CLOCK_MOVED = 0.03
POWER_ROSE = 1.05  # a power-capped kernel whose clock fell as its power rose slowed itself  # a median clock this far apart is a device change worth naming
SOFTWARE = ("driver", "runtime", "torch", "triton")


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _main(row: ResultRow | None) -> KernelRecord | None:
    return row.kernels[0] if row is not None and row.kernels else None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _kib(text: str) -> str:
    n = _int(text)
    return text if n is None else f"{n / 1024:g} KiB"


def _changes(b: KernelRecord, c: KernelRecord) -> dict[str, list[str]]:
    """What differs between two records of the same kernel, by kind."""
    out: dict[str, list[str]] = {"config": [], "grid": [], "spills": [], "regs": [], "shared": [], "occupancy": []}
    keys = list(dict.fromkeys([k for k, _ in b.launch] + [k for k, _ in c.launch]))
    for key in keys:
        bv, cv = b.value(key), c.value(key)
        if bv != cv and bv and cv:
            out["grid" if key == "grid" else "config"].append(f"{key} {bv} -> {cv}")
    for key, label in (("spills", "spills"), ("regs", "registers"), ("occupancy", "occupancy")):
        bv, cv = b.value(key), c.value(key)
        if bv and cv and bv != cv:
            out[key].append(f"{label} {bv} -> {cv}")
    if b.value("shared") and c.value("shared") and b.value("shared") != c.value("shared"):
        out["shared"].append(f"shared memory {_kib(b.value('shared'))} -> {_kib(c.value('shared'))}")
    return out


def _kernel_reading(ch: dict[str, list[str]]) -> tuple[str, str] | None:
    occ = ch["occupancy"]
    if ch["config"]:
        follows = ch["spills"] + ch["shared"] + occ
        return "config", f"config changed ({', '.join(ch['config'])})" + (f"; {', '.join(follows)}" if follows else "")
    if ch["spills"] or (ch["regs"] and occ):
        return "registers", " and ".join((ch["spills"] or ch["regs"]) + occ) + ": register pressure"
    if ch["shared"]:
        return "shared", " and ".join(ch["shared"] + occ) + ": shared memory"
    if ch["grid"]:
        return "launch", f"{', '.join(ch['grid'])}: the launch"
    if ch["regs"] or occ:
        return "code", f"{', '.join(ch['regs'] + occ)}: the compiled code"
    return None


def explain_case(kernel: str, base: ResultRow | None, cur: ResultRow | None) -> Explanation:
    """The reading and the side-by-side of one case from its two rows (either may be missing)."""
    b, c = _main(base), _main(cur)
    vendor = kernel.startswith(VENDOR_PREFIXES)
    recorded = b is not None and c is not None
    if recorded and b.name == c.name:
        found = _kernel_reading(_changes(b, c))
        if found:
            moved = " with the kernel's source changed" if b.source and c.source and b.source != c.source else ""
            return Explanation(found[0], found[1] + moved, sides(base, cur))
        if b.source and c.source and b.source != c.source:
            return Explanation("code", "the kernel's source changed, its launch did not: the kernel's code; "
                                       "bisect it", sides(base, cur))
    elif recorded:
        return Explanation("code", f"another kernel ({b.name} -> {c.name})", sides(base, cur))
    read = "resources and launch" if recorded and (b.resources or c.resources) else "launch"
    prefix = (f"{read} unchanged" if recorded else
              "nothing in the kernel changed" if vendor else "no compiled resources recorded")
    clocks = [_median(r.sclk_mhz) if r is not None else None for r in (base, cur)]
    device = []
    if clocks[0] and clocks[1] and abs(clocks[1] / clocks[0] - 1.0) >= CLOCK_MOVED:
        device.append(f"clock {100.0 * (clocks[1] / clocks[0] - 1.0):+.0f}%")
    throttled = [sum(bool(t) for t in r.throttled) if r is not None else 0 for r in (base, cur)]
    if throttled[0] != throttled[1] and base is not None and cur is not None and base.throttled and cur.throttled:
        device.append(f"throttled {throttled[0]}/{len(base.throttled)} -> {throttled[1]}/{len(cur.throttled)}")
    power = [_median(r.power_w) if r is not None else None for r in (base, cur)]
    if (device and device[0].startswith("clock -") and power[0] and power[1] and power[1] >= power[0] * POWER_ROSE
            and cur is not None and any(cur.throttled)):
        return Explanation("power", f"{prefix}, {device[0]} as power rose {power[0]:.0f} -> {power[1]:.0f} W "
                                    f"under the power cap: the kernel draws more power, not the device",
                           sides(base, cur))
    if device:
        return Explanation("device", f"{prefix}, {' and '.join(device)}: the device", sides(base, cur))
    software = [f"{f} {getattr(base, f)} -> {getattr(cur, f)}" for f in SOFTWARE
                if base is not None and cur is not None and getattr(base, f) and getattr(cur, f)
                and getattr(base, f) != getattr(cur, f)]
    if software:
        what = "the vendor library" if vendor else "the software stack"
        return Explanation("software", f"{prefix}, {', '.join(software)}: {what}", sides(base, cur))
    if vendor:
        return Explanation("vendor", "nothing in the kernel changed: look at inputs or the vendor library",
                           sides(base, cur))
    if recorded:
        what = "resources, launch" if b.resources or c.resources else "launch (no compiled resources on the CPU)"
        return Explanation("code", f"{what}, clocks and versions unchanged: the kernel's code "
                                   "(memory access order) or its inputs; bisect it", sides(base, cur))
    return Explanation("unknown", f"{prefix} (a CPU run or an older file); clocks and versions unchanged",
                       sides(base, cur))


def _fmt(x: float | None, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def _side(row: ResultRow | None) -> dict[str, str]:
    if row is None:
        return {}
    k = _main(row)
    out: dict[str, str] = {}
    if k is not None:
        out["kernel"] = " + ".join(r.name for r in row.kernels)
        out["source"] = " + ".join(r.source for r in row.kernels if r.source)
        out["config"] = " ".join(f"{key}={v}" for key, v in k.launch if key != "grid")
        out["grid"] = k.value("grid")
        regs = k.value("regs")
        if k.value("vgprs"):
            regs = f"{regs} (VGPR {k.value('vgprs')}, AGPR {k.value('agprs')}, SGPR {k.value('sgprs')})"
        out["registers"] = regs
        out["spills"] = k.value("spills")
        out["shared memory"] = _kib(k.value("shared")) if k.value("shared") else ""
        unit = "waves/SIMD" if k.value("vgprs") else "warps/SM"
        occ = k.value("occupancy")
        out["occupancy"] = f"{occ} {unit} ({k.value('occ_limit')})" if occ else ""
    out["clock MHz"] = _fmt(_median(row.sclk_mhz), ".0f")
    out["power W"] = _fmt(_median(row.power_w), ".0f")
    out["throttled"] = f"{sum(bool(t) for t in row.throttled)}/{len(row.throttled)}" if row.throttled else ""
    for f in SOFTWARE:
        out[f] = getattr(row, f)
    out["% roofline"] = _fmt(row.roofline_pct, ".1f")
    return out


def sides(base: ResultRow | None, cur: ResultRow | None) -> tuple[tuple[str, str, str], ...]:
    """(what, base, cur) for every field either row recorded, in reading order."""
    b, c = _side(base), _side(cur)
    keys = list(dict.fromkeys(list(b) + list(c)))
    return tuple((k, b.get(k, ""), c.get(k, "")) for k in keys if b.get(k) or c.get(k))


def with_explain(cmp: Comparison, base: ResultTable | None, cur: ResultTable) -> Comparison:
    """``cmp`` with an :class:`Explanation` on every regressed / improved case."""
    b_rows, c_rows = (base.by_key() if base is not None else {}), cur.by_key()
    cases = tuple(replace(case, explain=explain_case(case.kernel, b_rows.get(case.key), c_rows.get(case.key)))
                  if case.verdict in EXPLAINED else case for case in cmp.cases)
    return replace(cmp, cases=cases)


def with_compile_diff(cmp: Comparison, changes: dict[tuple[str, str, str], list[tuple[str, str, str]]]) -> Comparison:
    """Each explained case whose compiled resources changed (``perfci compile --baseline``'s json, read by
    :func:`perfci.compile.ratchet.changes_by_case`: key -> [(arch, verdict, what changed)]): that change
    appended to the reading and the sides. The only resources signal where the runs recorded none."""
    out = []
    for case in cmp.cases:
        found = changes.get(case.key) if case.explain is not None else None
        if not found:
            out.append(case)
            continue
        text = "; ".join(f"{arch} {what} ({verdict})" for arch, verdict, what in found)
        ex = case.explain
        out.append(replace(case, explain=replace(ex, reading=f"{ex.reading}; compiled against the compile "
                                                             f"baseline: {text}",
                                                 sides=ex.sides + (("compiled resources", "compile baseline", text),))))
    return replace(cmp, cases=tuple(out))


def explain_lines(case: CaseComparison) -> list[str]:
    """Plain text: the reading, then what / base / cur (a '*' marks what differs)."""
    ex = case.explain
    if ex is None:
        return []
    width = max((len(w) for w, _, _ in ex.sides), default=0)
    out = [f"explain {case.kernel} {case.shape} {case.dtype} ({case.verdict}): {ex.reading}"]
    out += [f"  {'*' if b != c else ' '} {what.ljust(width)}  {b or '-'}  ->  {c or '-'}" for what, b, c in ex.sides]
    return out


def explain_json(ex: Explanation | None) -> dict | None:
    if ex is None:
        return None
    return {"cause": ex.cause, "reading": ex.reading,
            "base": {w: b for w, b, _ in ex.sides}, "cur": {w: c for w, _, c in ex.sides}}
