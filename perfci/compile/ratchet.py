"""The compile diff beside the timing verdicts: for the nightly's reports and compare --explain.

:func:`run` is the IO edge: ``perfci compile SUITE --arch ... --baseline DIR
--format json`` in a child process (compiling needs Triton's real JIT, which a
process that imported the kernels under the interpreter no longer has; and a
crash there stays there). The rest is pure: the json that command prints, read
back into a markdown section, and into the resource change behind a timed case.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from perfci.compile.arches import ARCHES
from perfci.compile.diff import ResourceVerdict
from perfci.errors import PerfciError
from perfci.escape import md_code, md_text
from perfci.files import read_input_text
from perfci.suites import load_suite
from perfci.verdict import Verdict

Key = tuple[str, str, str]
MAX_ROWS = 40


def baseline_arches(baseline_dir: str | os.PathLike, suite_name: str) -> list[str]:
    """The arches with a resources file of the suite (``SUITE-ARCH.json``, as ``--out DIR`` names it)
    whose Triton backend is installed here (a ROCm build of Triton may lack the NVIDIA one)."""
    def installed(arch: str) -> bool:
        try:
            return importlib.util.find_spec(f"triton.backends.{'amd' if ARCHES[arch].vendor == 'amd' else 'nvidia'}") \
                is not None
        except ImportError:
            return False
    return [a for a in ARCHES if (Path(baseline_dir) / f"{suite_name}-{a}.json").is_file() and installed(a)]


def run(suite: str, baseline_dir: str | os.PathLike, cwd: str | os.PathLike, timeout: float = 1800) -> dict[str, Any]:
    """The compile diff of ``suite`` against ``baseline_dir`` for every arch it has a file of, as json data.

    Adds ``exit_code`` (perfci compile's: 0 nothing worse, 1 a case worse) and
    ``baseline``. PerfciError (one line) when there is nothing to diff or the
    command refused its input or crashed.
    """
    name = load_suite(suite).name
    arches = baseline_arches(baseline_dir, name)
    if not arches:
        raise PerfciError(f"compile baseline {baseline_dir}: no {name}-ARCH.json for any of {', '.join(ARCHES)} "
                          f"that this Triton can compile for")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "perfci", "compile", suite, "--arch", ",".join(arches), "--baseline",
           str(Path(baseline_dir).resolve()), "--format", "json"]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PerfciError(f"perfci compile {suite} took more than {timeout:.0f} s") from None
    if proc.returncode not in (0, 1):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PerfciError(f"perfci compile exit {proc.returncode}: {last.removeprefix('perfci: error: ')}")
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise PerfciError(f"perfci compile {suite}: its json output could not be read") from None
    data.update(exit_code=proc.returncode, baseline=str(baseline_dir))
    return data


def read_diff(path: str) -> dict[str, Any]:
    """A file of ``perfci compile --baseline ... --format json`` output (compare --compile-diff)."""
    text = read_input_text(path, "compile diff")
    try:
        data = json.loads(text)
    except ValueError as err:
        raise PerfciError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("diffs"), list) or "rule" not in data:
        raise PerfciError(f"{path}: not the json of `perfci compile --baseline DIR --format json`")
    return data


def changes_by_case(data: Mapping[str, Any], arch: str | None = None) -> dict[Key, list[tuple[str, str, str]]]:
    """case key -> [(arch, verdict, what changed)] for every case the diff lists (``arch``: that arch only)."""
    out: dict[Key, list[tuple[str, str, str]]] = {}
    for d in data.get("diffs") or ():
        if arch and d.get("arch") != arch:
            continue
        for c in d.get("cases") or ():
            if not c.get("summary"):
                continue
            worse = c.get("verdict") == ResourceVerdict.WORSE
            verdict = "worse (accepted)" if worse and c.get("accepted") else c.get("verdict", "")
            out.setdefault((c["kernel"], c["shape"], c["dtype"]), []).append((d["arch"], verdict, c["summary"]))
    return out


def behind(data: Mapping[str, Any], cases: Iterable[tuple[Key, str]], arch: str | None) -> list[dict[str, Any]]:
    """For each (key, timing verdict) regressed or improved: the resource change the compile diff found, if any.

    ``arch``: the timed device's; when the diff has no file of it (a CPU night), every arch's change is given.
    """
    arches = {d.get("arch") for d in data.get("diffs") or ()}
    found = changes_by_case(data, arch if arch in arches else None)
    return [{"case": list(key), "verdict": verdict, "arch": a, "compile": cv, "changes": what}
            for key, verdict in cases if verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
            for a, cv, what in found.get(key, ())]


def markdown(data: Mapping[str, Any], behind_rows: Sequence[Mapping[str, Any]] = (), heading: str = "####") -> str:
    """The nightly's section: counts per arch, the changed cases, and what is behind a timing verdict."""
    diffs = data.get("diffs") or []
    failing = int(data.get("failing") or 0)
    out = [f"{heading} Compiled resources (against {md_text(data.get('baseline', 'the baseline'))})", ""]
    out.append(f"**{failing} case(s) worse** than the compile baseline." if failing else
               "No case worse than the compile baseline.")
    out.append("")
    for d in diffs:
        n = d.get("counts") or {}
        out.append(f"- {md_text(d.get('suite'))} on {md_text(d.get('arch'))}: {n.get('worse', 0)} worse "
                   f"({n.get('accepted', 0)} accepted), {n.get('better', 0)} better, {n.get('same', 0)} same, "
                   f"{n.get('added', 0)} added, {n.get('removed', 0)} removed")
    rows = [(d.get("arch"), c) for d in diffs for c in d.get("cases") or ()]
    if rows:
        out += ["", "| arch | case | what changed | verdict |", "|---|---|---|---|"]
        for arch, c in rows[:MAX_ROWS]:
            verdict = c.get("verdict", "")
            verdict = "worse (accepted)" if verdict == ResourceVerdict.WORSE and c.get("accepted") else (
                f"**{verdict}**" if verdict == ResourceVerdict.WORSE else md_text(verdict))
            out.append(f"| {md_text(arch)} | {md_code(' '.join((c['kernel'], c['shape'], c['dtype'])), table=True)} | "
                       f"{md_text(c.get('summary') or '-')} | {verdict} |")
        if len(rows) > MAX_ROWS:
            out.append(f"| … | {len(rows) - MAX_ROWS} more in compile.json | | |")
    if behind_rows:
        out += ["", "Behind tonight's timing verdicts:", ""]
        out += [f"- {md_code(' '.join(b['case']))} {md_text(b['verdict'])}: {md_text(b['arch'])} "
                f"{md_text(b['changes'])} ({md_text(b['compile'])})" for b in behind_rows]
    out += ["", f"<sub>{md_text(data.get('rule', ''))}</sub>", ""]
    return "\n".join(out)
