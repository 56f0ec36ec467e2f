"""``perfci compile`` output: a table for people, json for tools. Pure."""
from __future__ import annotations

import json
from typing import Any, Sequence

from perfci.compile.report import CaseReport, KernelReport, case_json
from perfci.escape import term_text

_SHORT = {"num_warps": "w", "num_stages": "s", "waves_per_eu": "wpe", "matrix_instr_nonkdim": "mi", "kpack": "kp",
          "GROUP_M": "g", "SPLIT_K": "split", "BLOCK": "block"}


def config_text(config: Sequence[tuple[str, Any]]) -> str:
    items = dict(config)
    parts = []
    if "BLOCK_M" in items:
        parts.append(f"{items.pop('BLOCK_M')}x{items.pop('BLOCK_N')}x{items.pop('BLOCK_K')}")
    parts += [f"{_SHORT.get(k, k)}{v}" for k, v in items.items() if v is not None]
    return " ".join(parts)


def _regs(k: KernelReport) -> str:
    if k.vgprs is not None:
        return f"{k.vgprs}/{k.agprs}/{k.sgprs}"
    return "-" if k.registers is None else str(k.registers)


def _num(value: Any) -> str:
    return "-" if value is None else str(value)


def _row(report: CaseReport, k: KernelReport, first: bool) -> list[str]:
    spec = report.case
    occ = k.occupancy
    return [
        report.arch, spec.label if first else "  + " + k.kernel, spec.shape if first else "",
        spec.dtype if first else "", config_text(k.config), _regs(k), _num(k.spills), _num(k.scratch_bytes),
        "-" if k.shared_bytes is None else f"{k.shared_bytes / 1024:.1f}",
        "-" if occ is None else f"{occ.value} ({occ.limiter})",
        "; ".join(k.problems) if k.problems else "ok",
    ]


def table(reports: Sequence[CaseReport]) -> str:
    header = ["arch", "kernel", "shape", "dtype", "config", "VGPR/AGPR/SGPR | regs", "spills", "scratch",
              "shared KiB", "occupancy", "verdict"]
    rows = []
    for report in reports:
        if not report.kernels:
            spec = report.case
            rows.append([report.arch, spec.label, spec.shape, spec.dtype, "-", "-", "-", "-", "-", "-", report.note])
        for i, k in enumerate(report.kernels):
            rows.append(_row(report, k, i == 0))
    # Labels and compile errors are the kernels' text: no control character of theirs reaches the terminal.
    rows = [[term_text(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(summary(reports))
    lines.append("occupancy: AMD waves per SIMD (VGPRs+AGPRs and LDS), NVIDIA warps per SM; "
                 "spills: AMD registers, NVIDIA bytes of spill stores; scratch: AMD private bytes, NVIDIA stack bytes")
    return "\n".join(lines)


def summary(reports: Sequence[CaseReport]) -> str:
    counts = {s: sum(1 for r in reports if r.status == s) for s in ("ok", "accepted", "fail", "vendor")}
    return (f"{len(reports)} case(s): {counts['ok']} ok, {counts['fail']} failing (spill, shared memory or "
            f"compile error), {counts['accepted']} with an accepted spill (ACCEPTED_SPILLS, reasons in json "
            f"'note'), {counts['vendor']} not compiled (a vendor library, no Triton launch, or none recordable here)")


def to_json(reports: Sequence[CaseReport], suite: str, arches: Sequence[str]) -> str:
    return json.dumps({"suite": suite, "arches": list(arches), "summary": summary(reports),
                       "cases": [case_json(r) for r in reports]}, indent=2)
