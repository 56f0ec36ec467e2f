"""Run a suite's cases in worker processes, under a per-GPU lock.

This is the IO edge of ``perfci run``: processes, files and the lock live here;
what a case *is* and how it is timed live in :mod:`perfci.model`,
:mod:`perfci.measure.worker` and :mod:`perfci.measure.timing`.

Isolation, chosen per run (``--isolation``):

* ``shared`` (default): one worker process imports torch, creates the device
  context once and measures the cases one after another. A case that crashes,
  hangs or errors takes only that worker down; the next case gets a fresh one.
  Per-process start-up (torch, the device context, cuBLAS, Triton's loader) is
  paid once, not per case.
* ``fork``: the worker imports torch once and forks a fresh process per case,
  which creates its own device context: no state at all carries between cases.
* ``run``: as ``fork``, but one process per run of cases (a ``perfci run``, a
  round's side in ``perfci confirm --suite``): a fresh device context for every run
  at a fraction of ``fork``'s cost.
* ``spawn``: a new interpreter per case.
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from perfci import __version__
from perfci.benchcmd import Deadline
from perfci.errors import PerfciError
from perfci.kernel_registry import registry_for_root
from perfci.procs import kill_process_group, wait_group
from perfci.measure.devices import gpu_lock_name
from perfci.measure.envinfo import collect_environment
from perfci.measure.resources import records_from_result
from perfci.model import CaseResult, CaseSpec, Environment, RepeatSample
from perfci.suites import suite_kernel_problem


@dataclass(frozen=True)
class RunOptions:
    device: str = "auto"  # auto | cuda | cpu
    iters: int = 70
    repeats: int = 7
    timeout_s: float = 600.0
    launch: str = "eager"  # eager | graph
    timer: str = "events"  # events | profiler (GPU only; the CPU uses the host clock)
    gate: str = "spin"  # spin: hold the GPU while each repeat is enqueued; none: launch as enqueued
    poll_s: float = 0.01  # telemetry polling interval; 0 polls once per repeat
    seed: int | None = None
    warmup_min_s: float = 0.3
    warmup_max_s: float = 3.0
    lock_timeout_s: float = 3600.0
    isolation: str = "shared"  # shared | fork | run | spawn (see the module docstring)
    # The command that starts a case's process; the tests start one that injects faults.
    worker: tuple[str, ...] = (sys.executable, "-m", "perfci.measure.worker")


ISOLATIONS = ("shared", "fork", "run", "spawn")
SERVER_START_TIMEOUT_S = 300.0  # importing torch can take long on a cold disk


def gpu_lock(lock_timeout_s: float, notify: Callable[[str], None], env: Mapping[str, str] | None = None):
    """An exclusive lock for the GPU this process (or one started with ``env``) would use.

    Two perfci jobs on one GPU would each measure the other's load; the lock
    makes the second wait. The lock directory is shared by every user of the
    machine unless PERFCI_LOCK_DIR says otherwise.
    """
    from filelock import FileLock, Timeout  # lazy: filelock

    lock_dir = Path(os.environ.get("PERFCI_LOCK_DIR", Path(tempfile.gettempdir()) / "perfci-locks"))
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = gpu_lock_name(os.environ if env is None else env)
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


def _worker_env(root: Path, device: str | None, tool: Path | None = None,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, **(extra or {}))
    # Kernels come from the project checkout (so bisect and confirm measure each
    # commit's own); perfci itself from ``tool``, a folder holding only a link to
    # this process's package, so the worker speaks this parent's protocol even
    # when the checkout is an older revision with a perfci/ of its own.
    path = [str(tool) if tool else "", str(root), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    env["PERFCI_PROJECT_ROOT"] = str(root)  # its git sha is the run's (the worker's cwd is not the checkout)
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


class ServerGone(RuntimeError):
    """The worker server exited; ``code`` is its exit status (negative: the signal)."""

    def __init__(self, code: int | None):
        super().__init__(f"the perfci worker exited ({code})")
        self.code = code


class WorkerServer:
    """A ``perfci.measure.worker --serve shared|fork`` process (see :func:`perfci.measure.worker.serve`).

    Replies are read on a thread so that waiting for a case can time out
    without blocking on the pipe.
    """

    def __init__(self, worker: Sequence[str], mode: str, env: dict[str, str], log_path: Path,
                 cwd: Path | None = None):
        self.mode = mode
        self._log = open(log_path, "wb")
        self._log_path = log_path
        self.proc = subprocess.Popen(
            [*worker, "--serve", mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            env=env, cwd=cwd or os.getcwd(), start_new_session=True, text=True, bufsize=1)
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        hello = self._reply(SERVER_START_TIMEOUT_S).split()
        if hello[:1] != ["hello"]:
            raise PerfciError(f"the perfci worker did not start: {' '.join(hello)[:300]}")
        self.gpu_available = hello[1:2] == ["1"]
        self.restart_wanted = False
        self.in_run = False  # ``run`` mode: a run's process is up and takes the cases

    def open_run(self) -> None:
        self._send("run")
        reply = self._reply(SERVER_START_TIMEOUT_S).split()
        if reply[:1] != ["run"]:
            raise PerfciError(f"the perfci worker did not start a run: {' '.join(reply)[:300]}")
        self.in_run = True

    def close_run(self) -> None:
        if self.in_run:
            self._send("end")
            self._end_of_run()

    def _end_of_run(self) -> int:
        """Wait for ``run-end PID CODE``: the run's process is gone; its exit code."""
        self.in_run = False
        reply = self._reply(60.0).split()
        return int(reply[2]) if reply[:1] == ["run-end"] else 1

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line.strip())
        self._replies.put(None)  # the server is gone

    def _reply(self, timeout: float | None) -> str:
        reply = self._replies.get(timeout=timeout)
        if reply is None:
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            raise ServerGone(code)
        if reply.startswith("failed "):  # the server's own one-line reason (e.g. no torch)
            raise PerfciError(reply.removeprefix("failed "))
        return reply

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def configure(self, device: str) -> None:
        self._send(f"device {device}")
        self._reply(SERVER_START_TIMEOUT_S)

    def check_suite(self, path: Path, shown: str) -> None:
        """Have the worker check the suite's cases against the project's kernels."""
        self._send("suite " + json.dumps({"path": str(path), "shown": shown}))
        try:
            reply = self._reply(SERVER_START_TIMEOUT_S)
        except ServerGone as gone:
            raise PerfciError(f"{shown}: the perfci worker exited ({gone.code}) while importing the "
                              f"suite's kernels: {_log_tail(self._log_path)}") from None
        except queue.Empty:
            raise PerfciError(f"{shown}: importing the suite's kernels took over "
                              f"{SERVER_START_TIMEOUT_S:.0f} s") from None
        if reply.startswith("suite-error "):
            raise PerfciError(reply.removeprefix("suite-error "))
        if reply != "suite ok":
            raise PerfciError(f"the perfci worker did not check the suite: {reply[:300]}")

    def run(self, request: Path, result: Path, log: Path, timeout_s: float) -> int | None:
        """Run one case; its exit code, or None when it was killed for running too long."""
        self._send(f"{request}\t{result}\t{log}")
        started = self._reply(60.0).split()
        if started[0] == "run-end":  # the run's process died before it took the case
            self.in_run = False
            return int(started[2])
        pid = int(started[1])
        try:
            reply = self._reply(timeout_s).split()
        except queue.Empty:
            kill_process_group(pid, leader=self.proc if pid == self.proc.pid else None)
            if self.in_run:
                self._end_of_run()
            return None
        except ServerGone as gone:
            if self.mode == "shared":  # the case ran in the server: its death is the case's crash
                return gone.code if gone.code is not None else 1
            raise
        except BaseException:
            kill_process_group(pid)
            raise
        if reply[0] == "run-end":  # the run's process died with the case: its crash
            self.in_run = False
            return int(reply[2])
        self.restart_wanted = reply[3:4] == ["restart"]
        if self.in_run and self.restart_wanted:  # the run's process left; the server stays
            self.restart_wanted = False
            self._end_of_run()
        return int(reply[2])

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.restart_wanted

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, OSError):
            kill_process_group(self.proc.pid, leader=self.proc)
        self._log.close()


class CaseRunner:
    """Measures cases, each in a worker process as ``options.isolation`` says.

    Use as a context manager: the worker server (shared and fork isolation) starts
    on entry, so :meth:`resolve_device` can ask it whether a GPU is visible
    without importing torch in this process.
    """

    def __init__(self, options: RunOptions, root: Path, env: Mapping[str, str] | None = None):
        self.options = options
        self.root = root
        self.env = dict(env or {})  # on top of this process's environment: a side's GPU, its autotune cache
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._server: WorkerServer | None = None
        self._servers_started = 0
        self._device: str | None = None
        self._env: dict | None = None  # the first case's environment, reused by the rest

    def __enter__(self) -> "CaseRunner":
        self._tmp = tempfile.TemporaryDirectory(prefix="perfci-run-")
        (self.workdir / "tool").mkdir()
        (self.workdir / "tool" / "perfci").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
        if self.options.isolation != "spawn":
            self._server = self._start_server()
        return self

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    @property
    def workdir(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name)

    def _start_server(self) -> WorkerServer:
        log = self.workdir / f"server{self._servers_started}.log"
        self._servers_started += 1
        server = WorkerServer(self.options.worker, self.options.isolation,
                              _worker_env(self.root, self._device, self.workdir / "tool", self.env), log,
                              cwd=self.workdir / "tool")  # `python -m` puts the cwd first on sys.path
        if self._device is not None:
            server.configure(self._device)
        return server

    def resolve_device(self, requested: str) -> str:
        """``auto``, ``cuda`` or ``cpu`` -> the device the cases will run on."""
        visible = self._server.gpu_available if self._server is not None else _gpu_available_here()
        if requested == "cuda" and not visible:
            raise PerfciError("--device cuda: no GPU is visible (check CUDA_VISIBLE_DEVICES / "
                              "HIP_VISIBLE_DEVICES and that torch was built for your GPU)")
        device = requested if requested in ("cuda", "cpu") else ("cuda" if visible else "cpu")
        self._device = device
        if self._server is not None:
            self._server.configure(device)
        return device

    def check_suite(self, path: str) -> None:
        """Check the cases of a suite loaded without its kernels (``load_suite(..., check=...)``)
        against the project's kernels, in the worker server, which imports them anyway, so this
        process never has to. ``spawn`` isolation keeps no worker between cases: the check then
        runs here. Raises the suite loader's one line as :class:`PerfciError`."""
        if self._device is None:
            raise RuntimeError("resolve_device() first")  # the kernels import as the device needs
        if self._server is not None:
            self._server.check_suite(Path(path).resolve(), path)
        elif problem := suite_kernel_problem(Path(path), path, registry_for_root(self.root).check):
            raise PerfciError(problem)

    def run(self, cases: Sequence[CaseSpec], on_done: Callable[[int, CaseResult, dict], None],
            on_start: Callable[[int, CaseSpec], None] = lambda i, s: None,
            deadline: Deadline | None = None, limits: Mapping[tuple, float] | None = None) -> None:
        """Measure cases one after another; ``on_done`` sees each result as it lands.

        With ``deadline`` (a session's budget), a case is given at most what is left of it, not
        the whole ``timeout_s``, and a case left when it has run out is not started: a hung
        kernel cannot hold a night past its budget. ``limits``: case key -> its own timeout, where
        shorter than ``timeout_s`` (a session that knows the case's time from its other side)."""
        if self._device is None:
            raise RuntimeError("resolve_device() first")
        try:
            for index, spec in enumerate(cases):
                if deadline is not None and deadline.left() <= 0:
                    on_done(index, CaseResult(spec=spec, status="timeout",
                                              message=f"not run: {deadline.ran_out}"), {})
                    continue
                on_start(index, spec)
                started = time.perf_counter()
                result, raw = self._measure(spec, index, deadline, (limits or {}).get(spec.key))
                self._env = self._env or raw.get("env")
                raw["wall_s"] = time.perf_counter() - started
                on_done(index, result, raw)
        finally:
            if self._server is not None and self._server.alive and self._server.in_run:
                self._server.close_run()

    def _measure(self, spec: CaseSpec, index: int, deadline: Deadline | None = None,
                 limit_s: float | None = None) -> tuple[CaseResult, dict]:
        options, workdir = self.options, self.workdir
        if limit_s is not None and limit_s < options.timeout_s:
            options = replace(options, timeout_s=limit_s)
        cut = deadline is not None and deadline.left() < options.timeout_s
        if cut:
            options = replace(options, timeout_s=max(0.0, deadline.left()))
        request = {
            "spec": {"kernel": spec.kernel, "m": spec.m, "n": spec.n, "k": spec.k, "dtype": spec.dtype,
                     "variant": dict(spec.variant), "weight": spec.weight, "group": spec.group},
            "device": self._device, "iters": options.iters, "repeats": options.repeats,
            "seed": options.seed if options.seed is not None else random.randrange(2**31),
            "launch": options.launch, "timer": options.timer, "gate": options.gate, "poll_s": options.poll_s,
            "warmup_min_s": options.warmup_min_s, "warmup_max_s": options.warmup_max_s, "env": self._env,
        }
        req_path = workdir / f"case{index:04d}.request.json"
        res_path = workdir / f"case{index:04d}.result.json"
        log_path = workdir / f"case{index:04d}.log"
        req_path.write_text(json.dumps(request))
        if options.isolation == "spawn":
            code = self._spawn(req_path, res_path, log_path, options.timeout_s)
        else:
            code = self._serve(spec, req_path, res_path, log_path, options.timeout_s)
            if isinstance(code, CaseResult):
                return code, {}
        if code is None:
            why = deadline.ran_out if cut else f"{options.timeout_s:g} s"
            return CaseResult(spec=spec, status="timeout", message=f"no result after {why}; killed"), {}
        return _collect(spec, code, res_path, log_path)

    def _serve(self, spec, req_path, res_path, log_path, timeout_s: float):
        if self._server is None or not self._server.alive:
            if self._server is not None:
                self._server.close()
            self._server = self._start_server()
        try:
            if self.options.isolation == "run" and not self._server.in_run:
                self._server.open_run()
            code = self._server.run(req_path, res_path, log_path, timeout_s)
        except (ServerGone, queue.Empty) as err:
            # The fork server itself died (not the case's own process); record the
            # case, and the next one starts a fresh server.
            kill_process_group(self._server.proc.pid)
            return CaseResult(spec=spec, status="error", message=f"perfci worker server failed: {err}")
        if code is None or self.options.isolation == "shared" and not res_path.is_file():
            self._server.close()  # killed or crashed with the case: the next case starts a new one
            self._server = None
        return code

    def _spawn(self, req_path: Path, res_path: Path, log_path: Path, timeout_s: float) -> int | None:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [*self.options.worker, str(req_path), str(res_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_worker_env(self.root, self._device, self.workdir / "tool", self.env),
                cwd=self.workdir / "tool",  # `python -m` puts the cwd first on sys.path
                start_new_session=True,  # its own process group, so a kill takes its children too
            )
            # Killed at the timeout or on Ctrl-C; what the case left running is killed when it exits.
            return wait_group(proc, timeout_s, grace_s=0.0)


def _gpu_available_here() -> bool:
    try:
        import torch  # lazy: torch
    except ImportError:
        raise PerfciError("torch is not installed; see README for the CUDA and ROCm installs") from None
    return bool(torch.cuda.is_available())


def _collect(spec: CaseSpec, code: int, res_path: Path, log_path: Path) -> tuple[CaseResult, dict]:
    if not res_path.is_file():
        return CaseResult(spec=spec, status="error",
                          message=_crash_message(code, log_path)), {}
    data = json.loads(res_path.read_text())
    repeats = tuple(
        RepeatSample(median_us=r["median_us"], iters_us=tuple(r.get("iters_us") or ()),
                     sclk_mhz=r.get("sclk_mhz"), temp_c=r.get("temp_c"),
                     power_w=r.get("power_w"), throttled=r.get("throttled"),
                     stalled=bool(r.get("stalled")), clock_source=r.get("clock_source") or "")
        for r in data.get("repeats", []))
    result = CaseResult(spec=spec, status=data["status"], repeats=repeats,
                        iters=int(data.get("iters") or 0), message=data.get("message", ""),
                        timer=data.get("timer", ""), rel_error=data.get("rel_error"),
                        gate=data.get("gate", ""), stalls=int(data.get("stalls") or 0),
                        kernels=records_from_result(data))
    return result, data


def _log_tail(log_path: Path) -> str:
    """The last line of a worker's log ("no message" when it wrote none)."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1][:300] if lines else "no message"


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
    try:
        return collect_environment("cpu") if device == "cpu" else Environment(perfci=__version__)
    except Exception:  # noqa: BLE001 - metadata must never sink a run
        return Environment(perfci=__version__)
