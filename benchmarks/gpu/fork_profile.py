"""Where a freshly forked measuring process spends its first seconds on a GPU (no perfci run around it).

A warm side forks one process per run (perfci/measure/sides.py, isolation ``run``); each pays for a device
context, cuBLAS, Triton's loader and perfci's device hold before the first case is timed. This forks three
children from a parent that has imported torch and triton (as the side's worker has) and prints, per child,
the seconds to each step. Usage, on the GPU machine from perfci's repository root (perfci importable):
    python3 benchmarks/gpu/fork_profile.py
"""
import os
import sys
import tempfile
import time

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="fork-profile-"))
t0 = time.perf_counter()
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

print(f"parent: import torch, triton {time.perf_counter() - t0:.2f} s", flush=True)


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def child() -> None:
    start = time.perf_counter()
    marks = []

    def mark(name):
        torch.cuda.synchronize() if name != "cuda init" else None
        marks.append(f"{name} {time.perf_counter() - start:.3f}")

    torch.cuda.init()
    mark("cuda init")
    x = torch.zeros(1 << 20, device="cuda")
    mark("first tensor")
    a = torch.randn(1024, 1024, device="cuda")
    _ = a @ a
    mark("cublas fp32")
    h = a.half()
    _ = h @ h
    mark("cublas fp16")
    add_one[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    mark("triton first launch")
    add_one[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
    mark("triton second launch")
    from perfci.measure.hold import DeviceHold

    DeviceHold(torch, "nvidia")
    mark("perfci device hold")
    print("child: " + ", ".join(marks), flush=True)


for i in range(3):
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            child()
        finally:
            sys.stdout.flush()
            os._exit(0)
    os.waitpid(pid, 0)
    print(f"child {i}: {time.perf_counter() - t:.3f} s from fork to exit", flush=True)
