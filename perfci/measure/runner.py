"""Run a suite: one isolated worker process per case, under a per-GPU lock.

This is the IO edge of ``perfci run``: processes, files, the lock and the
progress display live here; what a case *is* and how it is timed live in
:mod:`perfci.model`, :mod:`perfci.measure.worker` and :mod:`perfci.measure.timing`.
"""
from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from perfci.errors import PerfciError
from perfci.procs import kill_process_group
from perfci.model import CaseResult, CaseSpec, Environment, RepeatSample


@dataclass(frozen=True)
class RunOptions:
    device: str = "auto"  # auto | cuda | cpu
    iters: int = 70
    repeats: int = 7
    timeout_s: float = 600.0
    launch: str = "eager"  # eager | graph
    timer: str = "events"  # events | profiler (GPU only; the CPU uses the host clock)
    seed: int | None = None
    warmup_min_s: float = 0.3
    warmup_max_s: float = 3.0
    lock_timeout_s: float = 3600.0
    fork: bool = True  # fork each case from a server that imported torch once (Linux)


def resolve_device(requested: str) -> str:
    if requested in ("cuda", "cpu"):
        if requested == "cuda" and not _gpu_available():
            raise PerfciError("--device cuda: no GPU is visible (check CUDA_VISIBLE_DEVICES / "
                              "HIP_VISIBLE_DEVICES and that torch was built for your GPU)")
        return requested
    return "cuda" if _gpu_available() else "cpu"


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        raise PerfciError("torch is not installed; see README for the CUDA and ROCm installs") from None
    return bool(torch.cuda.is_available())


def gpu_lock(lock_timeout_s: float, notify: Callable[[str], None]):
    """An exclusive lock for the GPU this process would use.

    Two perfci jobs on one GPU would each measure the other's load; the lock
    makes the second wait. The lock directory is shared by every user of the
    machine unless PERFCI_LOCK_DIR says otherwise.
    """
    from filelock import FileLock, Timeout

    from perfci.measure.devices import gpu_lock_name

    lock_dir = Path(os.environ.get("PERFCI_LOCK_DIR", Path(tempfile.gettempdir()) / "perfci-locks"))
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = gpu_lock_name(os.environ)
    lock = FileLock(str(lock_dir / f"gpu-{name}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        notify(f"waiting for GPU {name}: another perfci run holds {lock.lock_file}")
        try:
            lock.acquire(timeout=lock_timeout_s)
        except Timeout:
            raise PerfciError(f"GPU {name} stayed locked for {lock_timeout_s:.0f} s by another "
                              f"perfci run ({lock.lock_file})") from None
    return lock  # acquired: the caller releases it


def _worker_env(root: Path, device: str) -> dict[str, str]:
    env = dict(os.environ)
    # Kernels come from the project checkout (so bisect measures each commit's own).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


class ForkServer:
    """A ``perfci.measure.worker --serve`` process that forks one child per case.

    See :func:`perfci.measure.worker.serve` for why. Replies are read on a thread so
    that waiting for a case can time out without blocking on the pipe.
    """

    def __init__(self, env: dict[str, str], log_path: Path):
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "perfci.measure.worker", "--serve"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=os.getcwd(),
            start_new_session=True, text=True, bufsize=1)
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line.strip())
        self._replies.put(None)  # the server is gone

    def _reply(self, timeout: float | None) -> str:
        reply = self._replies.get(timeout=timeout)
        if reply is None:
            raise RuntimeError("the perfci fork server exited")
        return reply

    def run(self, request: Path, result: Path, log: Path, timeout_s: float) -> int | None:
        """Run one case; its exit code, or None when it was killed for running too long."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{request}\t{result}\t{log}\n")
        self.proc.stdin.flush()
        pid = int(self._reply(60.0).split()[1])
        try:
            return int(self._reply(timeout_s).split()[2])
        except queue.Empty:
            kill_process_group(pid)
            self._reply(60.0)
            return None
        except BaseException:
            kill_process_group(pid)
            raise

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, OSError):
            kill_process_group(self.proc.pid)
        self._log.close()


def run_case(spec: CaseSpec, options: RunOptions, device: str, root: Path,
             workdir: Path, index: int, env: dict | None = None,
             server: ForkServer | None = None) -> tuple[CaseResult, dict]:
    """Measure one case in a fresh process; every outcome becomes a CaseResult."""
    request = {
        "spec": {"kernel": spec.kernel, "m": spec.m, "n": spec.n, "k": spec.k, "dtype": spec.dtype,
                 "variant": dict(spec.variant), "weight": spec.weight, "group": spec.group},
        "device": device, "iters": options.iters, "repeats": options.repeats,
        "seed": options.seed if options.seed is not None else random.randrange(2**31),
        "launch": options.launch, "timer": options.timer, "warmup_min_s": options.warmup_min_s,
        "warmup_max_s": options.warmup_max_s, "env": env,
    }
    req_path = workdir / f"case{index:04d}.request.json"
    res_path = workdir / f"case{index:04d}.result.json"
    log_path = workdir / f"case{index:04d}.log"
    req_path.write_text(json.dumps(request))
    if server is not None:
        code = server.run(req_path, res_path, log_path, options.timeout_s)
        if code is None:
            return CaseResult(spec=spec, status="timeout",
                              message=f"no result after {options.timeout_s:g} s; killed"), {}
        return _collect(spec, code, res_path, log_path)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfci.measure.worker", str(req_path), str(res_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=_worker_env(root, device), cwd=os.getcwd(),
            start_new_session=True,  # its own process group, so a kill takes its children too
        )
        try:
            code = proc.wait(timeout=options.timeout_s)
        except subprocess.TimeoutExpired:
            kill_process_group(proc.pid, leader=proc)
            return CaseResult(spec=spec, status="timeout",
                              message=f"no result after {options.timeout_s:g} s; killed"), {}
        except BaseException:
            kill_process_group(proc.pid, leader=proc)
            raise
    return _collect(spec, code, res_path, log_path)


def _collect(spec: CaseSpec, code: int, res_path: Path, log_path: Path) -> tuple[CaseResult, dict]:
    if not res_path.is_file():
        return CaseResult(spec=spec, status="error",
                          message=_crash_message(code, log_path)), {}
    data = json.loads(res_path.read_text())
    repeats = tuple(
        RepeatSample(median_us=r["median_us"], iters_us=tuple(r.get("iters_us") or ()),
                     sclk_mhz=r.get("sclk_mhz"), temp_c=r.get("temp_c"),
                     power_w=r.get("power_w"), throttled=r.get("throttled"))
        for r in data.get("repeats", []))
    result = CaseResult(spec=spec, status=data["status"], repeats=repeats,
                        iters=int(data.get("iters") or 0), message=data.get("message", ""),
                        timer=data.get("timer", ""),
                        rel_error=data.get("rel_error"))
    return result, data


def _crash_message(code: int, log_path: Path) -> str:
    if code < 0:
        try:
            what = signal.Signals(-code).name
        except ValueError:
            what = f"signal {-code}"
        head = f"worker died of {what}"
    else:
        head = f"worker exited with code {code} and no result"
    tail = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    return f"{head}: {tail[-1][:300]}" if tail else head


def fallback_environment(device: str) -> Environment:
    from perfci import __version__
    from perfci.measure.envinfo import collect_environment

    try:
        return collect_environment("cpu") if device == "cpu" else Environment(perfci=__version__)
    except Exception:  # noqa: BLE001 - metadata must never sink a run
        return Environment(perfci=__version__)


def run_cases(cases: Sequence[CaseSpec], options: RunOptions, device: str, root: Path,
              on_done: Callable[[int, CaseResult, dict], None],
              on_start: Callable[[int, CaseSpec], None] = lambda i, s: None) -> None:
    """Measure cases one after another; ``on_done`` sees each result as it lands."""
    env = None
    with tempfile.TemporaryDirectory(prefix="perfci-run-") as tmp:
        server = ForkServer(_worker_env(root, device), Path(tmp) / "server.log") if options.fork else None
        try:
            for index, spec in enumerate(cases):
                on_start(index, spec)
                started = time.perf_counter()
                if server is not None and server.proc.poll() is not None:
                    server.close()
                    server = ForkServer(_worker_env(root, device), Path(tmp) / f"server{index}.log")
                try:
                    result, raw = run_case(spec, options, device, root, Path(tmp), index, env, server)
                except (RuntimeError, queue.Empty) as err:
                    # The fork server itself died (not the case's own process); record
                    # the case and let the next one start a fresh server.
                    result, raw = CaseResult(spec=spec, status="error",
                                             message=f"perfci fork server failed: {err}"), {}
                    if server is not None:
                        kill_process_group(server.proc.pid)
                env = env or raw.get("env")
                raw["wall_s"] = time.perf_counter() - started
                on_done(index, result, raw)
        finally:
            if server is not None:
                server.close()
