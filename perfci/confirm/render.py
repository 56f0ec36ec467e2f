"""Renderers for ``perfci confirm``: a Confirmation in, text out (table, markdown, json, csv)."""
from __future__ import annotations

import csv
import io
import json
import math

from perfci.compare.explain import EXPLAINED, explain_case, explain_json
from perfci.confirm.analysis import CaseConfirmation, Confirmation
from perfci.escape import csv_cell, html_text, md_code, md_text, term_text
from perfci.verdict import Verdict, confidence_text

MARK = {Verdict.REGRESSED: "!!", Verdict.IMPROVED: "++", Verdict.UNCHANGED: "~", Verdict.INCONCLUSIVE: "??",
        Verdict.CONFIG_FLIP: "<>", Verdict.BROKEN: "XX"}
# ratio is the estimate of ci_low .. ci_high (relative to the reference when one was used);
# the raw paired ratio and its interval carry "raw" in their names.
CSV_FIELDS = ("kernel", "shape", "dtype", "metric", "verdict", "ratio", "ci_low", "ci_high", "p_value",
              "q_value", "rounds", "spread_pct", "reason", "raw_ratio", "raw_ci_low", "raw_ci_high")
# What the JSON summary shows of the reference's shift (perfci.verdict.SuiteShift), in this order.
SUITE_FIELDS = ("verdict", "reason", "ratio", "ci_low", "ci_high", "p_value", "rounds", "n_cases", "spread_pct")


def _pct(r: float | None) -> str:
    return "" if r is None else f"{100.0 * (r - 1.0):+.2f}%"


def _name(case: CaseConfirmation) -> dict:
    if len(case.key) == 3:
        return {"kernel": case.key[0], "shape": case.key[1], "dtype": case.key[2]}
    return {"metric": " ".join(case.key)}


def _clean(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _case_dict(case: CaseConfirmation) -> dict:
    return {**_name(case), "verdict": case.verdict, "ratio": _clean(case.ratio), "ci_low": _clean(case.ci_low),
            "ci_high": _clean(case.ci_high), "rounds": case.rounds, "p_value": _clean(case.p_value),
            "q_value": _clean(case.q_value), "relative_to_reference": case.common_mode,
            "raw_ratio": _clean(case.raw_ratio), "raw_ci_low": _clean(case.raw_ci_low),
            "raw_ci_high": _clean(case.raw_ci_high), "spread_pct": _clean(case.spread_pct), "reason": case.reason}


def _explanations(conf: Confirmation, rounds) -> dict:
    """compare --explain's reading of every regressed / improved case, from each side's first ok run
    (``--suite`` only: a bench command records no resources)."""
    base, cur = (getattr(rounds, "rows", None) or {}).get("base", {}), (getattr(rounds, "rows", None) or {}).get("cur", {})
    if not base and not cur:
        return {}
    return {c.key: explain_case(c.key[0], base.get(c.key), cur.get(c.key))
            for c in conf.cases if c.verdict in EXPLAINED and len(c.key) == 3}


def _explain_text(conf: Confirmation, rounds) -> list[str]:
    out = []
    for key, ex in _explanations(conf, rounds).items():
        width = max((len(w) for w, _, _ in ex.sides), default=0)
        out += ["", f"explain {' '.join(key)}: {ex.reading}"]
        out += [f"  {'*' if b != c else ' '} {w.ljust(width)}  {b or '-'}  ->  {c or '-'}" for w, b, c in ex.sides]
    return out


def _headline(conf: Confirmation) -> str:
    parts = [f"{n} {v}" for v, n in conf.counts.items() if n]
    return ", ".join(parts) or "no case"


def _identity(sides, cfg) -> str:
    base, cur = sides
    return f"{base.ref} ({base.sha[:12]}) -> {cur.ref} ({cur.sha[:12]})"


def _level(conf: Confirmation) -> str:
    return f"{confidence_text(conf.confidence)} CI"


def _reference_line(conf: Confirmation) -> str:
    """What each case was judged against: itself, or the reference (and how the reference moved)."""
    suite = conf.suite
    if not conf.reference:
        return "each case judged on its own change (no --reference)"
    names = ", ".join(" ".join(k) for k in conf.reference[:3]) + (" ..." if len(conf.reference) > 3 else "")
    moved = (f"{_pct(suite.ratio)} [{_pct(suite.ci_low)}, {_pct(suite.ci_high)}], {suite.verdict}"
             if suite.ratio is not None else f"{suite.verdict}")
    if conf.reference_used:
        return (f"reference ({len(conf.reference)} case(s): {names}): its change {moved}; its run drift is taken "
                f"out of every case, so cur/base is relative to it; raw cur/base is the case's own")
    return f"reference ({len(conf.reference)} case(s): {names}) not used: {suite.reason}; its change {moved}"


def _summary(conf: Confirmation, rounds, sides, cfg) -> list[str]:
    return [f"verdicts: {_headline(conf)}; {conf.rounds} rounds, {rounds.bench_runs} bench runs, "
            f"{rounds.seconds:.0f} s",
            f"a case counts past +-{conf.min_effect_pct:g}% with its whole {100 * conf.confidence:.4g}% interval "
            f"(false discovery rate {conf.alpha:.3g} across cases at this look)",
            _reference_line(conf)]


def _raw(case: CaseConfirmation) -> str:
    return _pct(case.raw_ratio)


def render_table(conf: Confirmation, rounds, sides, cfg) -> str:
    raw = conf.reference_used
    header = ("", "case", "cur/base", _level(conf), *(("raw cur/base",) if raw else ()), "rounds", "q", "verdict")
    rows = [header]
    for case in conf.cases:
        name = term_text(" ".join(case.key))
        ci = f"[{_pct(case.ci_low)}, {_pct(case.ci_high)}]" if case.ci_low is not None else ""
        q = "" if case.q_value is None else f"{case.q_value:.2g}"
        rows.append((MARK[case.verdict], name, _pct(case.ratio), ci, *((_raw(case),) if raw else ()),
                     str(case.rounds), q, case.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    out = [f"perfci confirm: {_identity(sides, cfg)}"]
    for i, row in enumerate(rows):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    out += [f"broken: {' '.join(c.key)}: {c.reason}" for c in conf.cases if c.verdict == Verdict.BROKEN]
    out.append("")
    out.extend(_summary(conf, rounds, sides, cfg))
    out.extend(_explain_text(conf, rounds))
    # Refs, names and explanations are the user's: none of their control characters reaches the terminal.
    return "\n".join(term_text(line) for line in out) + "\n"


def render_markdown(conf: Confirmation, rounds, sides, cfg) -> str:
    icon = ":x:" if conf.regressed or conf.broken else ":warning:" if conf.inconclusive else ":white_check_mark:"
    out = [f"### {icon} perfci confirm {md_text(_identity(sides, cfg))}: {_headline(conf)}", ""]
    out += [f"- {md_text(line)}" for line in _summary(conf, rounds, sides, cfg)[1:]]
    raw = conf.reference_used
    out += ["", f"| verdict | case | cur/base | {_level(conf)} |{' raw cur/base |' if raw else ''} rounds | q |",
            f"|---|---|---:|---|{'---:|' if raw else ''}---:|---:|"]
    broken = [c for c in conf.cases if c.verdict == Verdict.BROKEN]
    for case in conf.cases:
        verdict = f"**{case.verdict}**" if case.verdict in (Verdict.REGRESSED, Verdict.BROKEN) else case.verdict
        ci = f"{_pct(case.ci_low)} .. {_pct(case.ci_high)}" if case.ci_low is not None else ""
        q = "" if case.q_value is None else f"{case.q_value:.2g}"
        name = md_code(" ".join(case.key), table=True)
        out.append(f"| {verdict} | {name} | {_pct(case.ratio)} | {ci} |{f' {_raw(case)} |' if raw else ''} "
                   f"{case.rounds} | {q} |")
    if broken:
        out += [""] + [f"- **broken** {md_code(' '.join(c.key))}: {md_text(c.reason)}" for c in broken]
    for key, ex in _explanations(conf, rounds).items():
        # Raw HTML, where markdown is not read: the name and the reading are HTML-escaped.
        out += ["", f"<details><summary><code>{html_text(' '.join(key))}</code>: {html_text(ex.reading)}</summary>",
                "", "| what | base | cur |", "|---|---|---|"]
        out += [f"| {'**' + md_text(w) + '**' if b != c else md_text(w)} | {md_text(b) or '-'} | {md_text(c) or '-'} |"
                for w, b, c in ex.sides]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def render_json(conf: Confirmation, rounds, sides, cfg) -> str:
    base, cur = sides
    summary = {**{v: n for v, n in conf.counts.items()}, "regressed_any": conf.regressed, "broken_any": conf.broken,
               "inconclusive_any": conf.inconclusive, "rounds": conf.rounds, "bench_runs": rounds.bench_runs,
               "seconds": round(rounds.seconds, 1), "min_effect_pct": conf.min_effect_pct,
               "alpha": conf.alpha, "confidence": conf.confidence, "method": conf.method,
               "reference": {"cases": [" ".join(k) for k in conf.reference], "used": conf.reference_used},
               "suite": {k: _clean(v) for k, v in conf.suite.to_dict(SUITE_FIELDS).items()}}
    data = {"base": {"ref": base.ref, "sha": base.sha}, "cur": {"ref": cur.ref, "sha": cur.sha},
            "summary": summary, "cases": [_case_dict(c) for c in conf.cases]}
    explained = _explanations(conf, rounds)
    for case in data["cases"]:
        key = (case.get("kernel"), case.get("shape"), case.get("dtype"))
        if key in explained:
            case["explain"] = explain_json(explained[key])
    return json.dumps(data, indent=2) + "\n"


def render_csv(conf: Confirmation, rounds, sides, cfg) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for case in conf.cases:
        row = _case_dict(case)
        writer.writerow({k: ("" if row.get(k) is None else csv_cell(row.get(k))) for k in CSV_FIELDS})
    return buf.getvalue()


RENDERERS = {"table": render_table, "markdown": render_markdown, "json": render_json, "csv": render_csv}
