"""A compile diff for people (table, markdown) and tools (json). Pure: each returns text.

Only the cases with something to say are listed (a change, added, removed);
the counts under them cover every case. The rule is printed under the table.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from perfci.compile.arches import ARCHES
from perfci.compile.diff import RULE, CaseDiff, Change, ResourceDiff, ResourceVerdict
from perfci.escape import md_code, md_text, term_text

_NAMES = {"vgprs": "VGPRs", "agprs": "AGPRs", "sgprs": "SGPRs", "registers": "registers", "spills": "spills",
          "scratch_bytes": "scratch", "occupancy": "occupancy", "error": "compile error"}
_ORDER = {v: i for i, v in enumerate((ResourceVerdict.WORSE, ResourceVerdict.ADDED, ResourceVerdict.REMOVED,
                                      ResourceVerdict.BETTER, ResourceVerdict.SAME))}


def _kib_number(value: int) -> str:
    return f"{value / 1024:.1f}".rstrip("0").rstrip(".")


def _kib(value: Any) -> str:
    return "-" if value is None else f"{_kib_number(value)} KiB"


def change_text(ch: Change, arch: str, main_kernel: str = "") -> str:
    """``VGPRs 232 -> 256``, ``spills 0 -> 24 registers``, ``occupancy 2 -> 1 waves/SIMD``, ``LDS 64 -> 96 KiB``."""
    who = "" if ch.kernel == main_kernel else f"{ch.kernel}: "
    if ch.field == "kernel":
        return f"{who}{'launched' if ch.after else 'no longer launched'}"
    if ch.field == "problems":
        return f"{who}new case: {ch.after}"
    if ch.field == "error":
        return f"{who}{'compile error: ' + str(ch.after)[:120] if ch.after else 'compiles again'}"
    if ch.field == "shared_bytes":
        name = "LDS" if ARCHES[arch].vendor == "amd" else "shared memory"
        before = "-" if ch.before is None else _kib_number(ch.before)
        return f"{who}{name} {before} -> {_kib(ch.after)}"
    if ch.field == "occupancy":
        text = f"{who}occupancy {ch.before} -> {ch.after} {ch.unit}"
        b, c = ch.limiters
        return text + (f" ({b} -> {c})" if b != c else f" ({c})")
    if ch.field.startswith("config."):
        return f"{who}{ch.field[len('config.'):]} {ch.before} -> {ch.after}"
    unit = f" {ch.unit}" if ch.unit and ch.field in ("spills", "scratch_bytes") else ""
    name = _NAMES.get(ch.field, ch.field)
    if ch.field == "registers" and ARCHES[arch].vendor == "amd":
        name = "VGPRs+AGPRs"  # the unified file occupancy is computed from
    return f"{who}{name} {'-' if ch.before is None else ch.before} -> {ch.after}{unit}"


def _changes(case: CaseDiff, arch: str) -> str:
    # What decides the verdict first, then what is only reported.
    ordered = sorted(case.changes,
                     key=lambda c: (c.effect != ResourceVerdict.WORSE, c.effect != ResourceVerdict.BETTER))
    return ", ".join(change_text(c, arch, case.main_kernel) for c in ordered)


def _verdict(case: CaseDiff) -> str:
    return "worse (accepted)" if case.verdict == ResourceVerdict.WORSE and case.accepted else case.verdict


def _rows(diffs: Sequence[ResourceDiff]) -> list[tuple[ResourceDiff, CaseDiff]]:
    """Every listed case of every diff: failing first, then accepted, added, removed, better, same."""
    rows = [(d, c) for d in diffs for c in d.changed]
    return sorted(rows, key=lambda dc: (_ORDER[dc[1].verdict], bool(dc[1].accepted)))


def _short(versions: tuple[tuple[str, str], ...]) -> dict[str, str]:
    # A revision hash reads as well in 12 characters as in 40.
    return {name: v[:12] if len(v) > 16 and all(ch in "0123456789abcdef" for ch in v) else v for name, v in versions}


def compilers_text(d: ResourceDiff) -> str:
    base, cur = _short(d.base_compilers), _short(d.cur_compilers)
    names = list(dict.fromkeys(list(base) + list(cur)))
    if all(base.get(n) == cur.get(n) for n in names):
        return ", ".join(f"{n} {cur[n]}" for n in names if n in cur) + " (both)"
    return ", ".join(f"{n} {base.get(n, '-')} -> {cur.get(n, '-')}" if base.get(n) != cur.get(n) else f"{n} {cur[n]}"
                     for n in names)


def summary_line(d: ResourceDiff) -> str:
    n = d.counts()
    worse = f"{n['worse']} worse" + (f" ({n['accepted']} accepted)" if n["accepted"] else "")
    reported = sum(1 for c in d.cases if c.verdict == ResourceVerdict.SAME and c.changes)
    return (f"{d.suite} on {d.arch}: {len(d.cases)} case(s): {worse}, {n['better']} better, {n['same']} same"
            f" ({reported} with a reported change), {n['added']} added, {n['removed']} removed; "
            f"compilers: {compilers_text(d)}")


def table(diffs: Sequence[ResourceDiff]) -> str:
    header = ["arch", "kernel", "shape", "dtype", "what changed", "verdict"]
    rows = [[term_text(x) for x in (d.arch, c.kernel, c.shape, c.dtype, _changes(c, d.arch) or "-", _verdict(c))]
            for d, c in _rows(diffs)]
    lines: list[str] = []
    if rows:
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header] + rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append("")
    else:
        lines.append("no resource changed")
    lines += [term_text(summary_line(d)) for d in diffs]
    lines += [term_text(line) for line in _accepted_lines(diffs)]
    lines.append(RULE)
    return "\n".join(lines) + "\n"


def _accepted_lines(diffs: Sequence[ResourceDiff]) -> list[str]:
    """One line per reason: the cases it covers (the first few named), then the reason."""
    by_reason: dict[tuple[str, str], list[CaseDiff]] = {}
    for d, c in _rows(diffs):
        if c.verdict == ResourceVerdict.WORSE and c.accepted:
            by_reason.setdefault((d.arch, c.accepted), []).append(c)
    out = []
    for (arch, reason), cases in by_reason.items():
        named = ", ".join(f"{c.kernel} {c.shape} {c.dtype}" for c in cases[:2])
        more = f" and {len(cases) - 2} more" if len(cases) > 2 else ""
        out.append(f"accepted on {arch} ({named}{more}): {reason}")
    return out


def markdown(diffs: Sequence[ResourceDiff], heading: str = "### Compiled resources against the baseline") -> str:
    failing = sum(len(d.failing) for d in diffs)
    lines = [heading, "", f"**{failing} case(s) worse**" if failing else "No case worse.", ""]
    rows = _rows(diffs)
    if rows:
        lines += ["| arch | kernel | shape | dtype | what changed | verdict |", "|---|---|---|---|---|---|"]
        for d, c in rows:
            verdict = f"**{_verdict(c)}**" if c.failing else _verdict(c)
            what = md_text(_changes(c, d.arch)) or "-"
            lines.append(f"| {md_text(d.arch)} | {md_code(c.kernel, table=True)} | {md_text(c.shape)} | "
                         f"{md_text(c.dtype)} | {what} | {verdict} |")
        lines.append("")
    # Names, compiler versions and acceptance reasons are the project's and the files' text.
    lines += [f"- {md_text(summary_line(d))}" for d in diffs]
    lines += [f"- {md_text(line)}" for line in _accepted_lines(diffs)]
    lines += ["", f"<sub>{RULE}</sub>", ""]
    return "\n".join(lines)


def diff_json(d: ResourceDiff) -> dict[str, Any]:
    return {"suite": d.suite, "arch": d.arch,
            "compilers": {"base": dict(d.base_compilers), "cur": dict(d.cur_compilers)},
            "counts": d.counts(), "failing": len(d.failing),
            "cases": [{"kernel": c.kernel, "shape": c.shape, "dtype": c.dtype, "verdict": c.verdict,
                       "accepted": c.accepted, "summary": _changes(c, d.arch),
                       "changes": [{"kernel": ch.kernel, "field": ch.field, "before": ch.before, "after": ch.after,
                                    "effect": ch.effect, "unit": ch.unit,
                                    **({"limiters": list(ch.limiters)} if ch.field == "occupancy" else {})}
                                   for ch in c.changes]}
                      for _, c in _rows([d])]}


def to_json(diffs: Sequence[ResourceDiff]) -> str:
    return json.dumps({"rule": RULE, "failing": sum(len(d.failing) for d in diffs),
                       "diffs": [diff_json(d) for d in diffs]}, indent=2) + "\n"


RENDERERS = {"table": table, "markdown": markdown, "json": to_json}
