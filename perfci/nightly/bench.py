"""A team's own bench as the night's source: ``perfci nightly SUITE --bench 'CMD'``.

CMD is a shell line that writes its results at the path perfci puts in place of
``{out}``: a perfci results CSV (``pytest bench/ --perfci-out {out}``), a FlyDSL
CSV, or pytest-benchmark JSON (``pytest --benchmark-json {out}``). Every
measurement of the night runs CMD through :func:`measure`: tonight in the
checkout, confirm's rounds and bisect's commits through ``python -m
perfci.nightly.bench`` (:func:`main`) in their worktrees. Whatever CMD wrote
becomes a perfci results CSV of the night's suite, so tonight, confirm
(``--results``) and bisect (``--csv-column median_us``) read one format.

Narrowing: confirm and bisect want only the flagged cases. Their list (lines
of ``kernel,shape,dtype``) is a file whose path replaces ``{cases}`` and is in
``$PERFCI_CASES``; the pytest plugin skips a benchmark whose case is not in it.
Tonight measures everything: ``{cases}`` is then an empty word and
``PERFCI_CASES`` is unset. Rows of other cases are dropped here as well, so a
bench that ignores the list is only slower, never wrong.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path
from typing import Mapping, Sequence, TextIO

from perfci.compare.inputs import read_any
from perfci.errors import EXIT_INTERRUPTED, EXIT_USAGE, PerfciError, internal_error_line
from perfci.files import atomic_write_text
from perfci.measure.envinfo import collect_environment
from perfci.procs import KILL_GRACE_S, drain, interrupt_on_sigterm, wait_group
from perfci.results import COLUMNS, SCHEMA_VERSION, read_results_cells, render_rows_csv
from perfci.suites import load_case_keys

OUT, CASES = "{out}", "{cases}"
CASES_ENV = "PERFCI_CASES"
TAIL_LINES = 20
# CMD's group gets SIGTERM and this long before SIGKILL. Less than the KILL_GRACE_S a
# parent perfci (confirm, bisect) gives this process when it runs as their bench, so
# CMD's group is gone and the temporary folder removed before that grace ends.
GRACE_S = KILL_GRACE_S / 2
PIPE_WAIT_S = 5.0  # for output still held open by a process that left CMD's group


def check_command(command: str) -> str:
    """``--bench CMD`` as given, or one line saying why it cannot be run."""
    if not command or not command.strip():
        raise PerfciError("--bench: give the command that runs your benchmarks, e.g. "
                          "--bench 'pytest bench/ --perfci-out {out}'")
    if OUT not in command:
        raise PerfciError(f"--bench {command!r}: the command must write its results at {{out}} (a path perfci "
                          f"gives it), e.g. 'pytest bench/ --perfci-out {{out}}'")
    try:
        shlex.split(command)
    except ValueError as err:
        raise PerfciError(f"--bench {command!r}: cannot be parsed as a shell line ({err})") from None
    return command


def expand(command: str, out: str | os.PathLike, cases: str | os.PathLike | None) -> str:
    """CMD with ``{out}`` and ``{cases}`` replaced by shell-quoted paths (``{cases}``: '' for every case)."""
    return command.replace(OUT, shlex.quote(str(out))).replace(CASES, shlex.quote(str(cases or "")))


def bench_env(env: Mapping[str, str], cases: str | os.PathLike | None, device: str) -> dict[str, str]:
    """CMD's environment: the case list in ``$PERFCI_CASES``; the Triton interpreter on the CPU."""
    out = dict(env)
    out.pop(CASES_ENV, None)
    if cases:
        out[CASES_ENV] = str(cases)
    if device == "cpu":
        out["TRITON_INTERPRET"] = "1"
    return out


def measure(command: str, cwd: Path, results: Path, suite: str, *, cases: Path | None = None,
            device: str = "auto", env: Mapping[str, str] | None = None, echo: TextIO | None = None,
            timeout_s: float | None = None) -> int:
    """Run CMD once in ``cwd`` and write what it measured to ``results`` (a perfci results CSV).

    CMD writes into a fresh temporary folder, so a file left by an earlier run
    never stands in for this one. Returns CMD's exit code: a bench
    that fails some of its cases (pytest exits 1) still gave results, which the
    night's gate judges.

    CMD runs in its own process group, ended with whatever CMD left running when
    CMD exits, at ``timeout_s`` or on an interrupt; the temporary folder goes too.

    Raises:
        PerfciError: CMD could not start, timed out, wrote nothing, or wrote a file perfci cannot
            read (the line says which, with CMD's last line of output).
    """
    keys = _case_keys(cases)
    with tempfile.TemporaryDirectory(prefix="perfci-bench-") as tmp:
        raw = Path(tmp) / "results"
        line = expand(command, raw, cases)
        code, tail = _run(line, cwd, bench_env(env if env is not None else os.environ, cases, device),
                          echo or sys.stderr, timeout_s)
        if code is None:  # whatever it wrote by then is not a measurement
            raise PerfciError(f"--bench: {command!r} timed out after {timeout_s:g} s (--bench-timeout) and was "
                              f"stopped with its child processes")
        if not raw.is_file():
            said = f": {tail[-1][:200]}" if tail else ""
            raise PerfciError(f"--bench: {command!r} exited {code} and wrote no results at {{out}}{said}")
        text = convert(raw, suite, keys, device)
    atomic_write_text(results, text)
    return code


def convert(raw: Path, suite: str, keys: set[tuple[str, str, str]] | None, device: str = "auto") -> str:
    """Whatever the bench wrote -> the text of a perfci results CSV of ``suite`` (only ``keys``, if given).

    A perfci CSV keeps every cell, with ``suite`` set to the night's (the pytest
    plugin writes ``pytest``). FlyDSL and pytest-benchmark rows carry no device,
    time or commit: this host's are filled in, as ``perfci run`` records them.
    """
    table = read_any(raw)
    if table.format == "perfci":
        _, cells = read_results_cells(raw)
        rows = [{c: v for c, v in row.items() if c in COLUMNS} for row in cells]
        rows = [dict(row, suite=suite) for row in rows]
    else:
        rows = _foreign_rows(table, suite, device)
    if keys is not None:
        rows = [r for r in rows if (r["kernel"], r["shape"], r["dtype"]) in keys]
    if not rows:
        listed = f" among the {len(keys)} listed in ${CASES_ENV}" if keys is not None else ""
        raise PerfciError(f"--bench: the results at {{out}} hold no case{listed}")
    return render_rows_csv(rows)


def _foreign_rows(table, suite: str, device: str) -> list[dict[str, str]]:
    env = collect_environment(_resolve_device(device))
    out = []
    for r in table.rows:
        number = (lambda v: "" if v is None else f"{v:.9g}")
        out.append({
            "kernel": r.kernel, "shape": r.shape, "dtype": r.dtype,
            "M": "" if r.m is None else str(r.m), "N": "" if r.n is None else str(r.n),
            "K": "" if r.k is None else str(r.k),
            "median_us": number(r.median_us), "repeats_us": ";".join(number(v) for v in r.repeats_us),
            "tflops": number(r.tflops), "tbps": number(r.tbps), "status": r.status, "message": r.message,
            "weight": f"{r.weight:g}", "timer": f"{table.format} bench",
            "arch": r.arch or env.arch, "device_name": r.device_name or env.device_name, "vendor": env.vendor,
            "driver": env.driver, "runtime": env.runtime, "torch": env.torch, "triton": env.triton,
            "perfci": env.perfci, "git_sha": r.git_sha or env.git_sha, "host": env.host,
            "timestamp": env.timestamp, "suite": suite, "schema": SCHEMA_VERSION,
        })
    return out


def _resolve_device(device: str) -> str:
    if device in ("cuda", "cpu"):
        return device
    import torch  # lazy: torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _case_keys(cases: Path | None) -> set[tuple[str, str, str]] | None:
    if cases is None:
        return None
    return set(load_case_keys(str(cases)))


def _run(line: str, cwd: Path, env: Mapping[str, str], echo: TextIO,
         timeout_s: float | None) -> tuple[int | None, list[str]]:
    """The shell line in its own process group, its output relayed to ``echo``; (exit code or None, last lines).

    The group is ended when the line exits (a ``CMD &`` it left behind too), at
    ``timeout_s`` (None is returned) and on an interrupt.
    """
    try:
        proc = subprocess.Popen(line, shell=True, cwd=str(cwd), env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True)
    except OSError as err:
        raise PerfciError(f"--bench: cannot start a shell in {cwd}: {err.strerror or err}") from None
    tail: deque[str] = deque(maxlen=TAIL_LINES)

    def relay(text: str) -> None:
        tail.append(text.rstrip("\n"))
        echo.write(text)
        echo.flush()

    reader = drain(proc.stdout, relay)
    code = wait_group(proc, timeout_s, GRACE_S)
    reader.join(timeout=PIPE_WAIT_S)
    return code, [t for t in tail if t.strip()]


# --------------------------------------------------------------------------- the worktrees' entry point


def argv(command: str, results: str, suite: str, *, cases: Path | None, device: str,
         subdir: str = "") -> list[str]:
    """``python -P -m perfci.nightly.bench ...``: one run of CMD in a confirm or bisect worktree.

    ``results`` is relative to the worktree's top (where confirm and bisect run
    their bench); CMD runs in ``subdir`` of it, the project's root.
    """
    isolate = ["-P"] if sys.version_info >= (3, 11) else []
    words = [sys.executable, *isolate, "-m", "perfci.nightly.bench", "--command", command, "--results", results,
             "--suite", suite, "--device", device]
    if cases is not None:
        words += ["--cases", str(cases)]
    if subdir:
        words += ["--in", subdir]
    return words


def main(words: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfci.nightly.bench",
                                     description="Run a nightly's --bench command once; write a perfci results CSV.")
    parser.add_argument("--command", required=True, help="the shell line, with {out} (and {cases})")
    parser.add_argument("--results", required=True, help="where the perfci results CSV goes")
    parser.add_argument("--suite", required=True, help="the night's suite name (the CSV's suite column)")
    parser.add_argument("--cases", help="the case list file: only these cases are measured and kept")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--in", dest="subdir", default="", help="run the command in this folder (the project root)")
    args = parser.parse_args(words)
    here = Path.cwd()
    # confirm and bisect end this process with SIGTERM (a timeout, their own interrupt): CMD's
    # group, in a session of its own, and the temporary folder must go with it.
    interrupt_on_sigterm()
    try:
        return measure(check_command(args.command), here / args.subdir, here / args.results, args.suite,
                       cases=Path(args.cases) if args.cases else None, device=args.device)
    except KeyboardInterrupt:
        print("perfci: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except PerfciError as err:
        print(f"perfci: error: {err.message}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - one line; bisect and confirm count it as a failed run
        print(f"perfci: internal error: {internal_error_line(err)}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
