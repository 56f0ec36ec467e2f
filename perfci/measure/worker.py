"""One case, measured in a process of its own: ``python -m perfci.measure.worker REQUEST RESULT``.

The runner starts a fresh worker per case, so a crash, a hang or an
out-of-memory error costs one case, and no compiled-kernel cache, allocator
state or clock history leaks from one case into the next. The worker reads a
JSON request, writes a JSON result (atomically), and exits 0 whenever it could
say what happened, including 'fail' and 'error' outcomes.

Steps, in order: prepare inputs -> correctness gate -> (graph capture) ->
warm up until the clock settles -> repeats x iterations -> result.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from dataclasses import asdict

from perfci.model import CaseSpec

_STARTED = time.perf_counter()
from perfci.measure.timing import EventMarks, HostMarks, ProfilerMarks, clock_settled, median, time_iterations


def spec_from_dict(data: dict) -> CaseSpec:
    return CaseSpec(kernel=data["kernel"], m=data["m"], n=data["n"], k=data["k"],
                    dtype=data["dtype"], variant=dict(data.get("variant") or {}),
                    weight=data.get("weight", 1.0), group=data.get("group", ""))


def relative_error(torch, out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere (an unwritten element) is infinite."""
    out64, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.isfinite(out64).all():
        return math.inf
    denom = torch.linalg.vector_norm(ref64).item() or 1.0
    return torch.linalg.vector_norm(out64 - ref64).item() / denom


def measure(request: dict) -> dict:
    device = request["device"]
    if device == "cpu":
        # Must be set before triton is imported: the interpreter is chosen at import.
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from perfci.measure.backends import get_backend
    from perfci.measure.devices import device_cache_bytes, flush_bytes
    from perfci.measure.envinfo import collect_environment
    from perfci.measure.telemetry import Sampler, open_source

    from perfci.model import Environment

    phases: dict[str, float] = {"import": time.perf_counter() - _STARTED}
    spec = spec_from_dict(request["spec"])
    # The first case describes the environment (driver queries, git); later
    # cases reuse it, since each costs a fraction of a second per process.
    env = Environment(**request["env"]) if request.get("env") else collect_environment(device)
    result: dict = {"env": asdict(env), "status": "error", "message": "", "repeats": [], "phases": phases}
    mark = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = round(now - mark, 3)
        mark = now

    gpu = device == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    torch_device = torch.device("cuda", 0) if gpu else torch.device("cpu")

    backend = get_backend(spec.kernel)
    try:
        prepared = backend.prepare(spec, torch_device, int(request["seed"]))
    except ValueError as err:
        # The kernel cannot run here (fp8 on a GPU without it, bf16 in the interpreter).
        result.update(status="skip", message=str(err))
        return result
    phase("prepare")

    # Correctness gate: poisoned output, fresh random-normal inputs, fp32 reference.
    prepared.poison()
    prepared.run()
    sync()
    reference = prepared.reference()
    error = relative_error(torch, prepared.output, reference)
    result["rel_error"] = error
    phase("gate")
    if not error <= prepared.tolerance:
        result.update(status="fail", message=f"output differs from the fp32 reference: "
                      f"relative error {error:.3g} > tolerance {prepared.tolerance:.3g}")
        return result

    timed = prepared.run
    launch = "eager"
    if gpu and request.get("launch", "eager") == "graph":
        try:
            timed = _capture_graph(torch, prepared.run)
            launch = "graph"
            # The graph must write the same output the eager launch did.
            prepared.poison()
            timed()
            sync()
            graph_error = relative_error(torch, prepared.output, reference)
            if not graph_error <= prepared.tolerance:
                result.update(status="fail", message=f"graph replay output wrong: relative error {graph_error:.3g}")
                return result
        except Exception as err:  # noqa: BLE001 - some launches can't be captured; eager is still right
            timed, launch = prepared.run, "eager"
            result["launch_note"] = f"graph capture failed ({type(err).__name__}); timed eager launches"
    result["launch"] = launch
    phase("capture")

    flush = None
    if gpu:
        props = torch.cuda.get_device_properties(0)
        nbytes = flush_bytes(device_cache_bytes(props, env.arch))
        scratch = torch.empty(nbytes, dtype=torch.uint8, device=torch_device)
        flush = scratch.zero_
        result["flush_bytes"] = nbytes

    source = open_source(env.vendor if gpu else "cpu", 0)
    try:
        warm = _warm_up(timed, flush, sync, source, request["warmup_min_s"], request["warmup_max_s"])
        result["warmup"] = warm
        phase("warmup")
        iters, repeats = int(request["iters"]), int(request["repeats"])
        samples = []
        with Sampler(source) as sampler:
            for _ in range(repeats):
                window = sampler.window()
                marks = _marks(request.get("timer", "events"), iters, torch) if gpu else HostMarks(iters)
                times = time_iterations(timed, marks, iters, flush)
                summary = window.stop()
                samples.append({
                    "median_us": median(times), "iters_us": times,
                    "sclk_mhz": summary.sclk_mhz, "temp_c": summary.temp_c,
                    "power_w": summary.power_w, "throttled": summary.throttled,
                })
    finally:
        source.close()
    phase("measure")
    result.update(status="ok", repeats=samples, iters=iters, timer=request.get("timer", "events") if gpu else "host")
    return result


def _marks(timer: str, iters: int, torch):
    return ProfilerMarks(iters, torch) if timer == "profiler" else EventMarks(iters, torch)


def _capture_graph(torch, run):
    """Capture one launch in a device graph; replaying it costs one cheap launch."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()  # capture needs allocator and library handles created off the graph
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    torch.cuda.synchronize()
    return graph.replay


def _warm_up(run, flush, sync, source, min_s: float, max_s: float) -> dict:
    """Launch in growing batches until the clock settles (or ``max_s`` passes).

    Each batch is synchronised, so the host never queues seconds of work ahead
    of the device, and batches grow towards ~50 ms so the clock reading after
    each one reflects the load rather than the gaps.
    """
    clocks: list[float | None] = []
    start = time.perf_counter()
    batch, batches = 1, 0
    while True:
        t0 = time.perf_counter()
        for _ in range(batch):
            if flush is not None:
                flush()
            run()
        sync()
        took = time.perf_counter() - t0
        batches += 1
        clocks.append(source.read().sclk_mhz)
        elapsed = time.perf_counter() - start
        no_clock = all(c is None for c in clocks)
        if elapsed >= max_s:
            break
        if elapsed >= min_s and (clock_settled(clocks) or (no_clock and batches >= 3)):
            break
        batch = max(1, min(batch * 4, int(batch * 0.05 / took) if took > 0 else batch * 4))
    settled = clock_settled(clocks)
    return {"seconds": round(time.perf_counter() - start, 3), "batches": batches,
            "settled": settled, "last_sclk_mhz": clocks[-1] if clocks else None}


def serve(commands, replies) -> None:
    """Fork server: pay for ``import torch`` once, then fork a fresh child per case.

    Importing torch and triton takes seconds on some hosts, longer than a decode
    case's whole measurement. The server imports them *without* touching the
    GPU, so each forked child still creates its own device context, compiles in
    its own process and can crash, hang or run out of memory alone: the
    isolation of a fresh process at a fraction of the start-up cost.

    Protocol, one line each way per case (tab-separated paths in, pid and exit
    code out): ``REQUEST\tRESULT\tLOG`` -> ``pid N`` ... ``exit N CODE``.
    """
    global _STARTED
    import torch  # noqa: F401 - imported for the children; no CUDA call here

    import perfci.measure.backends  # noqa: F401
    import perfci.measure.envinfo  # noqa: F401
    import perfci.measure.telemetry  # noqa: F401

    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    for line in commands:
        request, result, log = line.rstrip("\n").split("\t")
        pid = os.fork()
        if pid == 0:  # the case's own process
            code = 1
            try:
                os.setsid()  # its own process group, so a timeout kill takes its children too
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                _STARTED = time.perf_counter()
                code = main([request, result])
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        replies.write(f"pid {pid}\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(f"exit {pid} {os.waitstatus_to_exitcode(status)}\n")
        replies.flush()


def main(argv: list[str]) -> int:
    if argv == ["--serve"]:
        serve(sys.stdin, sys.stdout)
        return 0
    if len(argv) != 2:
        print("usage: python -m perfci.measure.worker REQUEST.json RESULT.json | --serve", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        request = json.load(fh)
    try:
        _inject_fault(os.environ.get("PERFCI_TEST_FAULT", ""), spec_from_dict(request["spec"]).label)
        result = measure(request)
    except Exception as err:  # noqa: BLE001 - any failure becomes this case's 'error' row
        oom = "out of memory" in str(err).lower() or type(err).__name__ == "OutOfMemoryError"
        message = "out of memory" if oom else f"{type(err).__name__}: {err}"
        if isinstance(err, ModuleNotFoundError) and err.name == "triton":
            message = ("triton is not installed: on a CPU-only machine pip install -e '.[cpu]'; "
                       "on a GPU it comes with the vendor's torch")
        traceback.print_exc()  # goes to the worker's log for whoever investigates
        result = {"status": "error", "message": " ".join(message.split())[:500], "repeats": []}
    tmp = argv[1] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, default=_json_default)
    os.replace(tmp, argv[1])
    return 0


def _inject_fault(fault: str, label: str) -> None:
    """Let the tests prove isolation with real crashes, hangs and OOMs.

    ``PERFCI_TEST_FAULT=KIND`` or ``KIND@KERNEL_LABEL`` (only that case).
    """
    kind, _, target = fault.partition("@")
    if target and target != label:
        return
    if kind == "segv":
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "hang":
        import subprocess
        # A grandchild that would outlive a plain kill of the worker: the runner
        # must take the whole process group.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        pid_file = os.environ.get("PERFCI_TEST_FAULT_PIDFILE")
        if pid_file:
            with open(pid_file, "w") as fh:
                fh.write(str(child.pid))
        time.sleep(3600)
    elif kind == "oom":
        raise MemoryError("out of memory (injected)")


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
