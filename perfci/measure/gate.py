"""The correctness gate a case passes before it is timed, and the launch the timing loop calls.

Poisoned output, one launch, the kernel's fp32 reference: an element the kernel
never writes stays NaN and fails, as does an output of the wrong shape. With
``--launch graph`` the captured replay must pass the same check. Torch is
passed in (the measuring process imports it, under its interpreter setting).
"""
from __future__ import annotations

import math


def relative_error(torch, out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere (an unwritten element) is infinite.

    Computed where the tensors are: copying a prefill output to the host in
    float64 cost more than the rest of the gate.
    """
    out64, ref64 = out.detach().double(), ref.detach().double()
    if not bool(torch.isfinite(out64).all()):
        return math.inf
    denom = torch.linalg.vector_norm(ref64).item() or 1.0
    return torch.linalg.vector_norm(out64 - ref64).item() / denom


def correctness_gate(torch, prepared, sync):
    """Poisoned output, fresh random-normal inputs, fp32 reference.

    Returns (reference, relative error, why the output cannot be compared or None).
    """
    prepared.poison()
    prepared.run()
    sync()
    reference = prepared.reference()
    out = prepared.result()
    if not isinstance(out, torch.Tensor):
        return reference, math.inf, f"the kernel's output is a {type(out).__name__}, not a tensor"
    if tuple(out.shape) != tuple(reference.shape):
        return reference, math.inf, (f"the kernel's output has shape {tuple(out.shape)}; "
                                     f"the case needs {tuple(reference.shape)}")
    return reference, relative_error(torch, out, reference), None


def launch_for_timing(torch, prepared, reference, sync, graph: bool):
    """What the timing loop calls: the eager launch, or a captured graph's replay.

    Returns (callable, fields for the result, failure message or None).
    """
    if not graph:
        return prepared.run, {"launch": "eager"}, None
    try:
        replay = capture_graph(torch, prepared.run)
        # The graph must write the same output the eager launch did.
        prepared.poison()
        replay()
        sync()
        graph_error = relative_error(torch, prepared.result(), reference)
        if not graph_error <= prepared.tolerance:
            return replay, {"launch": "graph"}, f"graph replay output wrong: relative error {graph_error:.3g}"
        return replay, {"launch": "graph"}, None
    except Exception as err:  # noqa: BLE001 - some launches can't be captured; eager is still right
        return prepared.run, {"launch": "eager",
                              "launch_note": f"graph capture failed ({type(err).__name__}); timed eager launches"}, None


def capture_graph(torch, run):
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
