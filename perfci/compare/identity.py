"""Which runs a comparison judged: their identity, and each case's throughput (pure).

A reader of a verdict table first asks what was compared with what: which
commit, when, on which device, under which driver and libraries. A difference
there (a new driver, another torch) is the first suspect of a suite-wide change,
so the reports print both runs' identity and the fields that differ.
"""
from __future__ import annotations

from dataclasses import replace

from perfci.compare.comparison import Comparison
from perfci.model import ResultTable

FIELDS = ("sha", "date", "device", "arch", "driver", "runtime", "torch", "triton")


def run_identity(table: ResultTable | None) -> dict[str, str]:
    """The identity fields of a run, from its first row that carries them ("" when unknown)."""
    if table is None:
        return {f: "" for f in FIELDS}
    rows = [r for r in table.rows if r.status == "ok"] or list(table.rows)

    def first(get) -> str:
        return next((v for v in (get(r) for r in rows) if v), "")

    return {"sha": first(lambda r: r.git_sha[:12]), "date": first(lambda r: r.timestamp[:10]),
            "device": first(lambda r: r.device_name), "arch": first(lambda r: r.arch),
            "driver": first(lambda r: r.driver), "runtime": first(lambda r: r.runtime),
            "torch": first(lambda r: r.torch), "triton": first(lambda r: r.triton)}


def with_identity(cmp: Comparison, base: ResultTable | None, cur: ResultTable) -> Comparison:
    """``cmp`` with both runs' identity and cur's TFLOP/s and % of roofline on every case."""
    b, c = run_identity(base), run_identity(cur)
    cur_by = cur.by_key()
    cases = tuple(replace(case, tflops=row.tflops, roofline_pct=row.roofline_pct)
                  if (row := cur_by.get(case.key)) is not None else case for case in cmp.cases)
    return replace(cmp, cases=cases, identity=tuple((f, b[f], c[f]) for f in FIELDS))


def identity_lines(cmp: Comparison) -> list[str]:
    """``base: ...`` / ``cur: ...`` and, where both are known and differ, what changed."""
    if not cmp.identity:
        return []
    out = []
    for side, index in (("base", 1), ("cur", 2)):
        known = [f"{f} {row[index]}" if f not in ("sha", "date", "device") else row[index]
                 for row in cmp.identity if (f := row[0]) and row[index]]
        out.append(f"{side}: {', '.join(known) or 'identity unknown'}")
    changed = [f"{f} {b} -> {c}" for f, b, c in cmp.identity
               if b and c and b != c and f not in ("sha", "date")]
    if changed:
        out.append("environment differs: " + "; ".join(changed))
    return out
