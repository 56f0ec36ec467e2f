"""Suites: declarative TOML files that expand into benchmark cases.

A suite file names itself and lists ``[[cases]]`` entries; every field of an
entry may be a single value or a list, and an entry expands to the cartesian
product of its lists::

    name = "decode"
    devices = ["cuda"]          # where the suite makes sense; smoke adds "cpu"
    dtype = "bf16"              # default for every entry

    [[cases]]
    group = "qkv"               # the model row this entry stands for
    kernel = ["splitk_decode", "torch_matmul"]
    variants = [{m_fast = 0}, {m_fast = 1}]   # only for kernels that take them
    M = [1, 4, 16, 64]
    N = 1024
    K = 6144
    weight = 1.0                # calls per step, for time-weighted speedups

A suite name resolves in the project's suites folder (``[tool.perfci] suites``,
default ``suites/``: :mod:`perfci.config`), then among perfci's built-in suites,
registered explicitly in :data:`BUILTIN_SUITES`; any other suite is given by its
path. A kernel is a registered name or an import path ``package.module:object``
(:mod:`perfci.kernel_registry`). Loading validates everything it can without a
GPU (kernel names, dtypes, variant keys and epilogues the kernel declares,
shapes it cannot take) and reports the first problem as one line naming the
file and the entry.
"""
from __future__ import annotations

import fnmatch
import itertools
import json
import math
import operator
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from perfci import builtin
from perfci.config import ProjectConfig, load_config
from perfci.errors import PerfciError
from perfci.files import is_present, read_input_text
from perfci.kernel_registry import KernelRegistry
from perfci.model import DTYPES, CaseSpec
from perfci.results import MAX_DIM, WEIGHT_RANGE, selection_id
from perfci.verdict import Verdict

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

BUILTIN_SUITES = {
    "smoke": "smoke.toml",
    "decode": "decode.toml",
    "prefill": "prefill.toml",
}
SUITE_KEYS = {"name", "description", "devices", "dtype", "cases"}
ENTRY_KEYS = {"group", "kernel", "variants", "variant", "M", "N", "K", "dtype", "weight"}


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    path: str
    devices: tuple[str, ...]
    cases: tuple[CaseSpec, ...]


def project_root(start: str | os.PathLike | None = None) -> Path:
    """The project whose suites and kernels perfci should use (:func:`perfci.config.load_config`).

    Looking upward from the working directory means that, inside ``perfci
    bisect``, every commit is measured with its own kernels rather than with
    whatever copy happens to be installed.
    """
    return load_config(start).root


# perfci's own suites, for any project: the installed package's data, or the checkout's suites/.
BUILTIN_DIR = builtin.SUITES_DIR


def suite_is_a_path(word: str) -> bool:
    """Whether a suite word is a file path (else a name, resolved in each project's suites folder)."""
    return word.endswith(".toml") or os.sep in word or "/" in word


def resolve_suite_path(name_or_path: str, root: Path | None = None,
                       config: ProjectConfig | None = None) -> Path:
    """A suite name (the project's suites folder first, then the built-ins) or a .toml path -> its file."""
    config = config or load_config(root)
    is_path = suite_is_a_path(name_or_path)
    if not is_path and name_or_path:
        own = config.suites / f"{name_or_path}.toml"
        if is_present(own):  # read, and refused there if it is a FIFO, a device or a dangling link
            return own
        if name_or_path in BUILTIN_SUITES:
            path = BUILTIN_DIR / BUILTIN_SUITES[name_or_path]
            if not path.is_file():
                raise PerfciError(f"built-in suite '{name_or_path}' not found at {path}")
            return path
    path = Path(name_or_path)
    if path.is_dir():
        raise PerfciError(f"{name_or_path} is a directory; give a suite name or a .toml file")
    if is_path:
        if not is_present(path):
            raise PerfciError(f"suite file {name_or_path} does not exist")
        return path
    own = sorted(p.stem for p in config.suites.glob("*.toml")) if config.suites.is_dir() else []
    listed = f"suites in {config.suites}: {', '.join(own)}; " if own and config.suites != BUILTIN_DIR else ""
    known = ", ".join(sorted(BUILTIN_SUITES))
    raise PerfciError(f"unknown suite '{name_or_path}'; {listed}built-in suites: {known} (or give a .toml path)")


def load_suite(name_or_path: str, root: Path | None = None,
               check: Callable[[CaseSpec], str | None] | None = None) -> Suite:
    """Read, validate and expand a suite.

    Args:
        name_or_path: a suite name or a path to a TOML file.
        root: the project root (default: found from the working directory);
            its configuration names the suites folder and the kernel modules.
        check: returns why a kernel cannot take a case, or None; defaults to
            the project's kernels (:class:`perfci.kernel_registry.KernelRegistry`).
            Tests pass their own.
    """
    config = load_config(root)
    path = resolve_suite_path(name_or_path, config=config)
    return parse_suite(read_suite_data(path), str(path), check or KernelRegistry.for_project(config).check)


def read_suite_data(path: Path, shown: str | None = None) -> dict:
    """A suite file's TOML tables; errors name the file as ``shown`` (default: ``path``)."""
    shown = shown or str(path)
    text = read_input_text(str(path), "suite")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise PerfciError(f"{shown}: not valid TOML (nested too deeply)") from None
    except ValueError as err:  # TOMLDecodeError, or an integer beyond Python's digit limit
        raise PerfciError(f"{shown}: not valid TOML ({str(err).splitlines()[0]})") from None


def suite_kernel_problem(path: Path, shown: str, check: Callable[[CaseSpec], str | None]) -> str:
    """The first problem of a suite loaded without its kernels (``perfci run`` loads it in a
    process that imports no kernel module, and checks it where the kernels are measured): the
    one line :func:`load_suite` would give, naming the file as ``shown``; "" when there is none."""
    try:
        parse_suite(read_suite_data(path, shown), shown, check)
    except PerfciError as err:
        return " ".join(err.message.split())
    except Exception as err:  # noqa: BLE001 - a kernel's own check_case may raise anything
        return " ".join(f"{shown}: {type(err).__name__}: {err}".split())[:500]
    return ""


def parse_suite(data: Mapping[str, object], path: str,
                check: Callable[[CaseSpec], str | None] | None = None) -> Suite:
    if check is None:
        check = KernelRegistry.for_project(load_config()).check
    unknown = set(data) - SUITE_KEYS
    if unknown:
        raise PerfciError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}; "
                          f"allowed: {', '.join(sorted(SUITE_KEYS))}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise PerfciError(f"{path}: needs a 'name' string")
    devices = tuple(_as_list(data.get("devices", ["cuda"]), f"{path}: 'devices'", str))
    bad_devices = [d for d in devices if d not in ("cuda", "cpu")]
    if bad_devices:
        raise PerfciError(f"{path}: 'devices' may hold cuda and cpu, not {', '.join(bad_devices)}")
    entries = data.get("cases")
    if not isinstance(entries, list) or not entries:
        raise PerfciError(f"{path}: needs at least one [[cases]] entry")
    if not isinstance(data.get("description", ""), str):
        raise PerfciError(f"{path}: 'description' must be a string")
    default_dtype = data.get("dtype", "bf16")
    cases: list[CaseSpec] = []
    for number, entry in enumerate(entries, start=1):
        where = f"{path}: [[cases]] entry {number}"
        if not isinstance(entry, dict):
            raise PerfciError(f"{where}: must be a table")
        cases.extend(_expand_entry(entry, where, default_dtype, check))
    seen: dict[tuple[str, str, str], int] = {}
    for case in cases:
        if case.key in seen:
            raise PerfciError(f"{path}: case {' '.join(case.key)} is declared twice")
        seen[case.key] = 1
    return Suite(name=name, description=str(data.get("description", "")), path=path,
                 devices=devices, cases=tuple(cases))


def _as_list(value: object, where: str, kind: type) -> list:
    items = value if isinstance(value, list) else [value]
    if not items:  # an empty list would expand to no case at all, silently
        raise PerfciError(f"{where}: is an empty list; give at least one value")
    for item in items:
        # bool is an int in Python; a suite saying M = true is a mistake.
        if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
            raise PerfciError(f"{where}: expected {kind.__name__} value(s), got {item!r}")
    return items


def _expand_entry(entry: Mapping[str, object], where: str, default_dtype: object,
                  check: Callable[[CaseSpec], str | None]) -> Iterable[CaseSpec]:
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise PerfciError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                          f"allowed: {', '.join(sorted(ENTRY_KEYS))}")
    for required in ("kernel", "M", "N", "K"):
        if required not in entry:
            raise PerfciError(f"{where}: missing '{required}'")
    kernels = _as_list(entry["kernel"], f"{where}: 'kernel'", str)
    dims = [_as_list(entry[d], f"{where}: '{d}'", int) for d in ("M", "N", "K")]
    for axis, values in zip("MNK", dims):
        if any(not 0 < v <= MAX_DIM for v in values):
            raise PerfciError(f"{where}: '{axis}' must be a positive integer up to {MAX_DIM}")
    dtypes = _as_list(entry.get("dtype", default_dtype), f"{where}: 'dtype'", str)
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise PerfciError(f"{where}: unknown dtype '{dtype}'; known: {', '.join(DTYPES)}")
    if "variant" in entry and "variants" in entry:
        raise PerfciError(f"{where}: give 'variant' or 'variants', not both")
    variants = entry.get("variants", [entry["variant"]] if "variant" in entry else [{}])
    variants = _as_list(variants, f"{where}: 'variants'", dict)
    for variant in variants:
        for key, value in variant.items():
            # Variant values become part of the case key; true/1.0 would make
            # a second key for what the kernel reads as 1.
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise PerfciError(f"{where}: variant {key} = {value!r}: use an integer or a string")
    weight = entry.get("weight", 1.0)
    low, high = WEIGHT_RANGE
    if (isinstance(weight, bool) or not isinstance(weight, (int, float))
            or not math.isfinite(float(weight)) or not low <= weight <= high):
        raise PerfciError(f"{where}: 'weight' must be a number from {low:g} to {high:g}")
    group = entry.get("group", "")
    if not isinstance(group, str):
        raise PerfciError(f"{where}: 'group' must be a string")
    for kernel, variant, m, n, k, dtype in itertools.product(kernels, variants, *dims, dtypes):
        spec = CaseSpec(kernel=kernel, m=m, n=n, k=k, dtype=dtype, variant=dict(variant),
                        weight=float(weight), group=group)
        reason = check(spec)
        if reason:
            raise PerfciError(f"{where}: {spec.label} {spec.shape} {dtype}: {reason}")
        yield spec


# --------------------------------------------------------------------------- selection

_CONDITION = re.compile(r"^\s*(kernel|group|dtype|shape|M|N|K)\s*(==|=|!=|<=|>=|<|>|~)\s*(\S.*?)\s*$")
_OPS: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


# The built-in suites' groups were first named after the documents their shapes were drawn from, "seed"
# and a number (_FORMER_GROUP matches them: decode's six, prefill's one); they are named for the shape's
# role now (decode-qkv ... decode-gemv, prefill-square). --filter reads the former names until
# RENAMED_GROUPS_UNTIL, with a warning, so a CI line that selects by them keeps its cases for a release.
_FORMER_GROUP = re.compile(r"seed0(02-?|00)")
RENAMED_GROUPS_UNTIL = "0.2.0"


def renamed_groups(expression: str) -> str:
    """EXPRESSION with the built-in suites' former group names in it replaced by their names now ("" if none)."""
    renamed = _FORMER_GROUP.sub(lambda m: "decode-" if m.group(1).startswith("02") else "prefill-square",
                                expression)
    return renamed if renamed != expression else ""


def make_filter(expression: str) -> Callable[[CaseSpec], bool]:
    """Turn ``--filter`` text into a predicate.

    Comma-separated conditions must all hold. A condition is ``FIELD OP VALUE``
    (fields kernel, group, dtype, shape, M, N, K; ops = != < <= > >= and ~ for
    a glob), or a bare glob matched against "kernel shape dtype group".
    Examples: ``M<=16``, ``kernel~splitk*,dtype=bf16``, ``*m_fast=1*``.

    A former built-in group name (:func:`renamed_groups`) matches the group it
    became, with one warning line on stderr the first time it is what selects
    a case; a suite's own group of that name still matches as itself.
    """
    predicates = [_condition(part) for part in expression.split(",") if part.strip()]
    if not predicates:
        raise PerfciError(f"--filter '{expression}' has no condition")
    keep: Callable[[CaseSpec], bool] = lambda spec: all(p(spec) for p in predicates)  # noqa: E731
    renamed = renamed_groups(expression)
    if not renamed:
        return keep
    keep_renamed = make_filter(renamed)
    warned: list[bool] = []

    def either(spec: CaseSpec) -> bool:
        if keep(spec):
            return True
        if not keep_renamed(spec):
            return False
        if not warned:
            warned.append(True)
            print(f"perfci: warning: --filter '{expression}' names a group by its former name, read as "
                  f"'{renamed}'; the former names are accepted until perfci {RENAMED_GROUPS_UNTIL}",
                  file=sys.stderr)
        return True
    return either


def _condition(text: str) -> Callable[[CaseSpec], bool]:
    match = _CONDITION.match(text)
    if not match:
        pattern = text.strip()
        if not any(ch in pattern for ch in "*?["):
            pattern = f"*{pattern}*"
        return lambda s: fnmatch.fnmatchcase(f"{s.label} {s.shape} {s.dtype} {s.group}", pattern)
    field, op, value = match.groups()
    if field in ("M", "N", "K"):
        try:
            number = int(value)
        except ValueError:
            raise PerfciError(f"--filter: {field} needs an integer, got '{value}'") from None
        if op == "~":
            raise PerfciError(f"--filter: use = < > with {field}, not ~")
        attr = field.lower()
        return lambda s: _OPS[op](getattr(s, attr), number)
    getter = {"kernel": lambda s: s.label, "group": lambda s: s.group,
              "dtype": lambda s: s.dtype, "shape": lambda s: s.shape}[field]
    if op == "~":
        return lambda s: fnmatch.fnmatchcase(getter(s), value)
    if op not in ("=", "==", "!="):
        raise PerfciError(f"--filter: {field} compares with =, != or ~, not {op}")
    return lambda s: _OPS[op](getter(s), value)


MAX_SHARDS = 10_000


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (1-based, as CI matrices count) -> (I, N)."""
    match = re.fullmatch(r"\s*([0-9]{1,9})\s*/\s*([0-9]{1,9})\s*", text)
    if not match:
        raise PerfciError(f"--shard {text!r} must look like I/N with 1 <= I <= N, e.g. 2/4")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise PerfciError(f"--shard {text}: N must be between 1 and {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise PerfciError(f"--shard {text}: I must be between 1 and N ({count})")
    return index, count


def shard_cases(cases: Sequence[CaseSpec], shard: tuple[int, int]) -> list[CaseSpec]:
    """The cases of shard I of N, in the order of ``cases``.

    The partition depends only on the set of cases, not on their order: the
    cases are sorted by FLOPs (2MNK, largest first; ties by kernel, shape,
    dtype) and dealt to the shards like cards, in a snake order (1..N, then
    N..1, ...). Every shard gets within one case of len/N, and nearly the same
    FLOPs: within 7% of the mean for decode and prefill at 2-4 shards, where
    interleaving the suite order was 31-139% over.

    Raises:
        PerfciError: N is larger than the number of cases (a shard would be empty).
    """
    index, count = shard
    if count > len(cases):
        raise PerfciError(f"--shard {index}/{count}: only {len(cases)} case(s) are selected, so "
                          f"{count} shards would leave some empty; use at most {len(cases)}")
    ranked = sorted(cases, key=lambda c: (-c.m * c.n * c.k, c.key))
    dealt = set()
    for position, case in enumerate(ranked):
        lap, seat = divmod(position, count)
        if (seat if lap % 2 == 0 else count - 1 - seat) == index - 1:
            dealt.add(case.key)
    return [c for c in cases if c.key in dealt]


def placements(selected: Sequence[CaseSpec],
               shard: tuple[int, int] | None) -> dict[tuple[str, str, str], dict[str, str]]:
    """Each selected case's ``shard``, ``case_index`` and ``selection`` cells (the results CSV's)."""
    ident = selection_id(c.key for c in selected)
    label = f"{shard[0]}/{shard[1]}" if shard else ""
    return {c.key: {"shard": label, "case_index": str(i), "selection": ident}
            for i, c in enumerate(selected, start=1)}


# A compare json's verdicts that measuring again cannot change: unchanged, and a config flip
# (an autotuner's choice: every new run chooses again, perfci/compare/flips.py).
NOT_TO_CONFIRM = (Verdict.UNCHANGED, Verdict.CONFIG_FLIP)


def load_case_keys(path: str) -> list[tuple[str, str, str]]:
    """The cases a file names, for ``perfci run --cases``.

    Either a ``perfci compare --format json`` output (its cases that are neither
    ``unchanged`` nor ``config-flip``: what a nightly wants confirmed), or lines of
    ``kernel,shape,dtype`` (or ``perfci run --list``'s tab-separated lines);
    ``#`` starts a comment.
    """
    text = read_input_text(path, "case list")
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except RecursionError:
            raise PerfciError(f"--cases {path}: not valid JSON (nested too deeply)") from None
        except ValueError as err:
            raise PerfciError(f"--cases {path}: not valid JSON ({str(err).splitlines()[0]})") from None
        cases = data.get("cases") if isinstance(data, dict) else None
        if not isinstance(cases, list):
            raise PerfciError(f"--cases {path}: a JSON case list is a 'perfci compare --format json' output")
        keys = []
        for i, case in enumerate(cases):
            if not isinstance(case, dict) or not all(isinstance(case.get(f), str) for f in ("kernel", "shape", "dtype")):
                raise PerfciError(f"--cases {path}: cases[{i}] has no kernel, shape and dtype")
            if case.get("verdict") not in NOT_TO_CONFIRM:
                keys.append((case["kernel"], case["shape"], case["dtype"]))
        return keys
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in re.split(r"[,\t]", line)]
        if len(parts) < 3 or not all(parts[:3]):
            shown = repr(line) if len(line) <= 60 else f"{line[:50]!r}... ({len(line)} characters)"
            raise PerfciError(f"--cases {path}: line {number}: expected kernel,shape,dtype, got {shown}")
        keys.append((parts[0], parts[1], parts[2]))
    return keys


def select_cases(cases: Sequence[CaseSpec], filter_expr: str | None = None,
                 shard: tuple[int, int] | None = None,
                 keys: Sequence[tuple[str, str, str]] | None = None) -> list[CaseSpec]:
    """Keep the cases ``keys`` names (in the suite's order), filter, then take
    shard I of N (:func:`shard_cases`)."""
    chosen = list(cases)
    if keys is not None:
        known = {c.key for c in chosen}
        missing = [k for k in dict.fromkeys(keys) if k not in known]
        if missing:
            shown = ", ".join(" ".join(k) for k in missing[:3]) + (" ..." if len(missing) > 3 else "")
            raise PerfciError(f"--cases: {len(missing)} case(s) are not in this suite: {shown}")
        wanted = set(keys)
        chosen = [c for c in chosen if c.key in wanted]
    if filter_expr:
        keep = make_filter(filter_expr)
        chosen = [c for c in chosen if keep(c)]
    if shard and chosen:
        chosen = shard_cases(chosen, shard)
    return chosen
