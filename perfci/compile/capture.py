"""The launches a kernel perfci did not write makes for a case: run its own host code once, and record them.

perfci plans its own kernels' launches from their config tables for any arch
(:mod:`perfci.compile.plan`). A team's kernel has no such table perfci can
read, so its prepare runs here, on the CPU, and its launch (the case's
``Prepared.run``) runs once with Triton's launcher replaced by a recorder: every
``kernel[grid](...)`` it makes becomes a :class:`~perfci.compile.plan.Launch`
(tensors as pointers of their dtype and storage size, ints and floats as the
JIT would specialize them, constexprs and launch options as passed), and no
kernel runs. An autotuned kernel gives one launch per config it lists.

The config is the one the kernel's host code picks on this machine. The inputs
live on the GPU where there is one, else on the CPU; a launcher that insists on
a GPU (FlagGems: "Expected a cuda device") or picks by the one it finds
(``torch.cuda.get_device_capability``) cannot be recorded without it: its case
is "not compiled", with the launcher's reason, not a failure.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from perfci.compile.plan import Launch, Ptr
from perfci.model import CaseSpec

# torch dtype name -> Triton's element type in a signature ("*bf16").
_TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
                 "float8_e4m3fn": "fp8e4nv", "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2": "fp8e5",
                 "float8_e5m2fnuz": "fp8e5b16", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                 "uint8": "u8", "bool": "i1"}
_LAUNCH_ONLY = ("grid", "warmup")

# (module, kernel) -> the JIT function a captured Launch names: a team's kernel need not be a
# module attribute (a closure, a class member), so the compiler gets the object itself.
FUNCTIONS: dict[tuple[str, str], Any] = {}
# id(JIT function) -> the autotuner (Triton's, or a library's built on it) seen launching it in
# triton_launches(execute=True): its choice can differ from process to process.
TUNERS: dict[int, Any] = {}


class NotPlannable(ValueError):
    """The kernel's host code could not make its launch here; the message says why."""


def capture_case(backend: Any, spec: CaseSpec) -> tuple[Launch, ...]:
    """The Triton launches one ``run()`` of ``backend``'s prepared case makes, on the CPU, none executed."""
    if os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes"):
        raise NotPlannable("TRITON_INTERPRET is set: the launch would run in the interpreter, not record")
    device = _device()
    try:
        prepared = backend.prepare_case(spec, device, 0)
    except Exception as err:  # noqa: BLE001 - the team's code: any failure is this case's finding
        raise NotPlannable(f"its prepare failed on the {device.upper()} ({type(err).__name__}: {_line(err)})") from None
    with triton_launches(execute=False) as seen:
        try:
            prepared.run()
        except Exception as err:  # noqa: BLE001 - as above
            if not seen:
                raise NotPlannable(f"its launch failed before any Triton kernel ({type(err).__name__}: "
                                   f"{_line(err)})") from None
    return tuple(_launch(fn, args, kwargs, grid) for fn, grid, args, kwargs in seen)


@contextlib.contextmanager
def triton_launches(execute: bool) -> Iterator[list[tuple]]:
    """Every ``kernel[grid](*args, **kwargs)`` made inside, as ``(jit_function, grid, args, kwargs)``.

    ``execute``: launch them as well (on a GPU, to read what was compiled), with an autotuned
    kernel's chosen config; a kernel a library launches from its own cache of compiled kernels
    (FlagGems' LibEntry calls ``compiled[grid](*args)``) is recorded as that compiled kernel.
    Without: nothing runs, and an autotuned kernel records every config. A callable grid is
    evaluated on the launch's arguments. In the interpreter (``TRITON_INTERPRET``), where a
    kernel is an ``InterpretedFunction``, its launches are recorded the same way.
    """
    from triton.compiler.compiler import CompiledKernel  # lazy: triton
    from triton.runtime.autotuner import Autotuner  # lazy: triton
    from triton.runtime.interpreter import InterpretedFunction  # lazy: triton
    from triton.runtime.jit import JITFunction  # lazy: triton

    seen: list[tuple] = []
    jit_run, tuned_run, compiled_launch = JITFunction.run, Autotuner.run, CompiledKernel.__getitem__
    interpreted_run = InterpretedFunction.run
    tuning: list[Any] = []  # the autotuners whose run() is under way, innermost last

    def observe(self, *args, grid, warmup, **kwargs):
        if not warmup:
            seen.append((self, _grid(self, grid, args, kwargs), args, kwargs))
            if tuning:
                TUNERS[id(self)] = tuning[-1]
        return jit_run(self, *args, grid=grid, warmup=warmup, **kwargs) if execute or warmup else None

    def observe_tuned(self, *args, **kwargs):
        tuning.append(self)
        try:
            return tuned_run(self, *args, **kwargs)
        finally:
            tuning.pop()

    def observe_interpreted(self, *args, grid, warmup, **kwargs):
        if not warmup:
            seen.append((self, _grid(self, grid, args, kwargs), args, kwargs))
        return interpreted_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    def every_config(self, *args, **kwargs):
        for config in self.configs:
            self.fn.run(*args, **{**kwargs, **config.all_kwargs()})

    def observe_compiled(self, grid):
        seen.append((_Compiled(self), tuple(int(g) for g in grid), (), _constexprs(self)))
        return compiled_launch(self, grid)

    JITFunction.run = observe
    if execute:
        CompiledKernel.__getitem__ = observe_compiled
        InterpretedFunction.run = observe_interpreted
        Autotuner.run = observe_tuned
    else:
        Autotuner.run = every_config
    try:
        yield seen
    finally:
        JITFunction.run, Autotuner.run, CompiledKernel.__getitem__ = jit_run, tuned_run, compiled_launch
        InterpretedFunction.run = interpreted_run


class _Compiled:
    """A launch of an already compiled kernel: its "warmup" is the kernel itself."""

    def __init__(self, kernel: Any):
        self.kernel = kernel

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        return self.kernel


def _constexprs(kernel: Any) -> dict[str, Any]:
    """The constexprs a compiled kernel was specialized with, by name (its block sizes: the config)."""
    src = getattr(kernel, "src", None)
    try:
        names = src.fn.arg_names
        return {names[key[0]]: value for key, value in src.constants.items() if len(key) == 1}
    except (AttributeError, IndexError, TypeError):
        return {}


def _device() -> str:
    """Where the case's inputs live while its launch is recorded: a GPU where there is one (a
    library may insist on device tensors), else the CPU."""
    import torch  # lazy: torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _grid(fn: Any, grid: Any, args: tuple, kwargs: dict) -> tuple[int, ...]:
    if callable(grid):
        grid = grid({**dict(zip(fn.arg_names, args)), **kwargs})
    return tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))


def _launch(fn: Any, args: tuple, kwargs: dict, grid: tuple[int, ...]) -> Launch:
    names = list(fn.arg_names)
    if len(args) > len(names):
        raise NotPlannable(f"{fn.__name__} takes {len(names)} arguments, the launch passed {len(args)}")
    bound = dict(zip(names, args))
    options = {k: v for k, v in kwargs.items() if k not in names and k not in _LAUNCH_ONLY}
    bound.update({k: v for k, v in kwargs.items() if k in names})
    params = []
    for param in fn.params:
        if param.name in bound:
            value = bound[param.name]
        elif param.has_default:
            value = param.default
        else:
            raise NotPlannable(f"{fn.__name__}: the launch gave no value for {param.name}")
        params.append((param.name, ("constexpr", value) if param.is_constexpr or value is None else _arg(value)))
    module, name = fn.fn.__module__, fn.fn.__qualname__
    FUNCTIONS[(module, name)] = fn
    return Launch(module, name, tuple(params), tuple(sorted(options.items())), grid, None)


def _arg(value: Any) -> Any:
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        kind = str(value.dtype).removeprefix("torch.")
        if kind not in _TRITON_TYPES:
            raise NotPlannable(f"a tensor of dtype {kind}, which perfci compile cannot name for Triton")
        return Ptr(_TRITON_TYPES[kind], int(value.untyped_storage().nbytes()))
    if isinstance(value, (bool, int, float)):
        return value
    raise NotPlannable(f"an argument of type {type(value).__name__}, which perfci compile cannot specialize")


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:200] or type(err).__name__
