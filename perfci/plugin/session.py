"""A pytest session's benchmarks: rows in, the results CSV and the verdict out.

The rows are :func:`perfci.results.result_to_row`'s (what ``perfci run``
writes), written with :func:`perfci.results.write_results`, and judged by the
same functions ``perfci compare`` calls, so the file and the verdict are the
CLI's own.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from perfci.compare.comparison import missing_cases
from perfci.compare.identity import with_identity
from perfci.compare.inputs import check_same_device, read_any
from perfci.compare.render import RENDERERS
from perfci.compare.verdicts import compare
from perfci.errors import PerfciError
from perfci.model import CaseResult, Environment
from perfci.plugin.cases import BenchmarkCase, extra_info_message, override_throughput
from perfci.results import result_to_row, write_results
from perfci.roofline import ceiling_for
from perfci.verdict import no_common_case

SUITE = "pytest"  # the suite column of the plugin's rows
# Exit status of a pytest session whose benchmarks regressed against --perfci-compare
# (and nothing else failed): pytest's own codes are 0..5.
EXIT_PERF_REGRESSION = 6


@dataclass
class SessionComparison:
    """The session's benchmarks against ``--perfci-compare``: whether one regressed, and the text to show."""

    regressed: bool
    text: str  # compare's table, and a line for cases the session did not measure


def make_row(case: BenchmarkCase, result: CaseResult, env: Environment) -> dict[str, str]:
    """The results CSV row of one benchmark, as perfci run writes it (plus flops=/bytes=/extra_info)."""
    peaks = ceiling_for(env.arch, case.spec.dtype) or (None, None)
    row = override_throughput(result_to_row(result, env, SUITE, *peaks), case, result.median_us)
    info = extra_info_message(case)
    if info and result.status == "ok":
        row["message"] = " ".join(info.split())
    return row


def write_rows(path: str, rows: list[dict[str, str]]) -> None:
    write_results(path, rows)


def check_baseline(path: str) -> None:
    """Read BASE now, so a bad file is a usage error before anything is measured."""
    if os.path.isdir(path):
        raise PerfciError(f"--perfci-compare {path}: a directory; give a results CSV "
                          f"(history stores: perfci compare STORE out.csv)")
    read_any(path)


def judge(base_path: str, rows: list[dict[str, str]], out_path: str | None) -> SessionComparison:
    """``perfci compare BASE CUR`` over this session's rows (CUR: ``out_path`` or a temporary file).

    Cases of BASE that the session did not measure are listed, not failed: a
    pytest session often runs a selection (``-k``); ``perfci compare`` on the CSV
    is the strict, whole-suite gate.
    """
    with tempfile.TemporaryDirectory(prefix="perfci-pytest-") as tmp:
        cur_path = out_path or os.path.join(tmp, "session.csv")
        if not out_path:
            write_rows(cur_path, rows)
        base, cur = read_any(base_path), read_any(cur_path)
        check_same_device(base, cur)
        result = with_identity(compare(base, cur), base, cur)
    if no_common_case(result.cases):
        raise PerfciError(f"--perfci-compare {base_path}: no case in common with this session (key: kernel, "
                          f"shape, dtype); nothing was compared")
    text = RENDERERS["table"](result)
    missing = missing_cases(result)
    if missing:
        shown = ", ".join(" ".join(k) for k in missing[:3]) + (" ..." if len(missing) > 3 else "")
        text += f"\n{len(missing)} case(s) of the baseline were not measured in this session: {shown}\n"
    return SessionComparison(regressed=bool(result.regressed), text=text)
