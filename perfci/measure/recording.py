"""``perfci run``'s recording: each case measured, its row written to the results CSV at once.

The CSV is rewritten (atomically) after every case, so an interrupted run keeps
what it measured; ``--log-json`` gets one JSON line per case with every launch.
"""
from __future__ import annotations

import json
from typing import Mapping, Sequence

from perfci.console import Console
from perfci.measure.render import progress_line
from perfci.measure.runner import CaseRunner, fallback_environment, gpu_lock
from perfci.model import CaseResult, CaseSpec, Environment
from perfci.results import result_to_row, write_results
from perfci.roofline import ceiling_for


def record_cases(runner: CaseRunner, suite_name: str, cases: Sequence[CaseSpec], out_path: str,
                 console: Console, log_path: str | None = None,
                 placed: Mapping[tuple[str, ...], dict] | None = None) -> tuple[list[CaseResult], Environment]:
    """Run the cases; the CSV is rewritten after each one. Returns (results, environment).

    ``console`` shows each case as it starts and ends, and the notes of the GPU lock
    and of the runner. ``placed``: each case key's shard, case_index and selection cells.
    """
    results: list[CaseResult] = []
    rows: list[dict[str, str]] = []
    env_holder: dict[str, Environment] = {}
    if log_path:
        open(log_path, "w").close()  # one run per log, not an accumulation
    shown: set[str] = set()

    def on_start(index, spec):
        console.describe(f"{spec.label} {spec.shape} {spec.dtype}")

    def on_done(index, result, raw):
        env = env_holder.get("env")
        if env is None and raw.get("env"):
            env = env_holder["env"] = Environment(**raw["env"])
        if env is None:
            env = fallback_environment(options.device)
        peaks = ceiling_for(env.arch, result.spec.dtype)
        row = result_to_row(result, env, suite_name, *(peaks or (None, None)),
                            placement=(placed or {}).get(result.spec.key))
        results.append(result)
        rows.append(row)
        write_results(out_path, rows)  # after every case: an interrupted run keeps what it measured
        if log_path:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"kernel": row["kernel"], "shape": row["shape"], "dtype": row["dtype"],
                                      **{k: v for k, v in raw.items() if k != "env"}}) + "\n")
        for note in raw.get("hold_notes", ()):
            if note not in shown:  # a changed method is said once, never silently
                shown.add(note)
                console.note(f"perfci run: {note}")
        console.line(progress_line(index, len(cases), result))
        console.advance()

    options = runner.options
    lock = gpu_lock(options.lock_timeout_s, console.note) if options.device == "cuda" else None
    try:
        runner.run(cases, on_done, on_start)
    finally:
        if lock is not None:
            lock.release()
    env = env_holder.get("env") or fallback_environment(options.device)
    return results, env
