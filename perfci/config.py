"""Project configuration: ``[tool.perfci]`` in a repository's pyproject.toml, or a perfci.toml.

Every command reads it from the repository it runs in: the nearest directory,
from the working directory upward and no further than the repository's top
(the first directory holding ``.git``), that has a ``perfci.toml`` or a
``pyproject.toml`` with a ``[tool.perfci]`` table. That directory is the
project root; relative paths in the file are relative to it::

    [tool.perfci]
    suites = "bench/suites"            # suite names resolve here first, then perfci's built-ins
    kernels = ["mypkg.perf_kernels"]   # modules declaring BACKENDS, imported from the root
    baselines = "bench/baselines"
    history = "../perf-history"
    noise_profiles = { sm_90 = "bench/h200-profile.json" }   # per arch the results record
    build = "pip install -e . --no-deps"
    build_timeout = 1800                # seconds a build may take before it is stopped (a failed build)
    stale_days = 2                      # `perfci history stale`: a suite with no night for longer is stale

    [[tool.perfci.compile_accept]]      # a compile-diff change accepted, with its bound and reason
    arch = "gfx950"
    case = "mymatmul"                   # case labels starting with this
    spills = 8                          # spills, scratch_bytes, shared_bytes: at most; occupancy: at least
    reason = "Triton 3.9 spills 6 VGPRs here; measured no slower on MI355X"

A perfci.toml holds the same keys at its top level. No file: the defaults,
with the root found as before configuration existed (a checkout with
``kernels/__init__.py`` and ``suites/``, whose ``kernels/backends.py`` is then
its kernel module; else perfci's own checkout, with the installed kernels).
:class:`ProjectConfig` is plain data; ``origins`` says where each value came
from, which ``perfci config`` prints.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from perfci.errors import PerfciError
from perfci.files import is_present, read_input_text

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CONFIG_FILE = "perfci.toml"
PYPROJECT = "pyproject.toml"
# key -> what it holds, for the one line a wrong value gets
KEYS = {
    "suites": "a folder (string)",
    "kernels": "a list of module names",
    "baselines": "a folder (string)",
    "history": "a history store path (string)",
    "noise_profiles": "a table of arch = profile file (strings)",
    "build": "a shell command (string)",
    "build_timeout": "a positive number of seconds (a build still going then is stopped, a failed build)",
    "compile_accept": "a list of tables, each with arch, case, reason and at least one bound",
    "stale_days": "a whole number of days >= 1 (a device with no night of a suite for longer is stale)",
}
STALE_DAYS = 2  # `perfci history stale`'s default
# A build's limit unless build_timeout (or --build-timeout) says otherwise. A build takes
# seconds (pip install -e . --no-deps) to tens of minutes (a CUDA extension compiled from
# scratch); without a limit a hung one held the night, and its runner, until the CI job's own
# limit (6 hours on GitHub). Half an hour is past a healthy build and ends a hung one long before.
BUILD_TIMEOUT_S = 1800.0
# compile_accept's bounds: the new value at most (spills, scratch, shared memory) or at least (occupancy).
ACCEPT_BOUNDS = ("spills", "scratch_bytes", "shared_bytes", "occupancy")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class ProjectConfig:
    """What is in force for one project; paths are absolute."""

    root: Path  # the project root: kernel modules are imported from here
    file: Path | None  # where the settings were read; None: every value is a default
    suites: Path
    kernels: tuple[str, ...] = ()
    baselines: Path | None = None
    history: Path | None = None
    noise_profiles: Mapping[str, Path] = field(default_factory=dict)
    build: str | None = None
    build_timeout: float = BUILD_TIMEOUT_S  # seconds
    # perfci.compile.accept's entries, as written: arch, case, reason, shapes (optional), bounds
    compile_accept: tuple[Mapping[str, Any], ...] = ()
    stale_days: int = STALE_DAYS
    origins: Mapping[str, str] = field(default_factory=dict)  # key -> "pyproject.toml: tool.perfci.suites" or "default"

    def origin(self, key: str) -> str:
        return self.origins.get(key, "default")


def find_config_file(start: str | os.PathLike | None = None) -> Path | None:
    """The perfci.toml or pyproject.toml (with ``[tool.perfci]``) in force at ``start``, or None.

    Raises:
        PerfciError: one directory has both, or its pyproject.toml is not valid TOML.
    """
    here = Path(start or os.getcwd()).resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        own, pyproject = folder / CONFIG_FILE, folder / PYPROJECT
        # Anything by these names is read, so a FIFO or a link to a device is an error, not the defaults.
        has_table = is_present(pyproject) and _has_perfci_table(pyproject)
        if is_present(own) and has_table:
            raise PerfciError(f"{folder}: both {CONFIG_FILE} and {PYPROJECT} [tool.perfci] configure perfci; "
                              f"keep one")
        if is_present(own):
            return own
        if has_table:
            return pyproject
        if (folder / ".git").exists():  # the repository's top: a config above it is another project's
            return None
    return None


def load_config(start: str | os.PathLike | None = None) -> ProjectConfig:
    """The configuration in force at ``start`` (default: the working directory).

    ``start`` may also name a perfci.toml or pyproject.toml to read.

    Raises:
        PerfciError: the file is unreadable, not TOML, or has an unknown key or a wrong type.
    """
    chosen = Path(start) if start is not None else None
    if chosen is not None and not chosen.is_dir():
        # Not a folder: the file to read. Missing, a FIFO or a device is one line, never the defaults.
        path: Path | None = chosen.resolve() if chosen.is_file() else Path(os.path.abspath(chosen))
        if path.name == PYPROJECT and not _has_perfci_table(path):
            raise PerfciError(f"{chosen}: has no [tool.perfci] table")
    else:
        path = find_config_file(chosen)
    if path is None:
        root, laid_out = _legacy_root(chosen)
        # A checkout laid out as perfci's own (forks, and the test repositories
        # built from it) measures its kernels/backends.py, as it did before
        # configuration existed; anywhere else the installed libraries serve.
        own = laid_out and (root / "kernels" / "backends.py").is_file()
        return ProjectConfig(root=root, file=None, suites=root / "suites", baselines=root / "baselines",
                             kernels=("kernels.backends",) if own else (),
                             origins={"kernels": "default: a checkout laid out as perfci's"} if own else {})
    return parse_config(_read_table(path), path)


def parse_config(table: Mapping[str, Any], path: Path) -> ProjectConfig:
    """``[tool.perfci]`` (or perfci.toml's top level) read from ``path`` -> a :class:`ProjectConfig`."""
    where = f"{path}" + (" [tool.perfci]" if path.name == PYPROJECT else "")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise PerfciError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS)}")
    root = path.parent
    prefix = "tool.perfci." if path.name == PYPROJECT else ""
    origins = {key: f"{path.name}: {prefix}{key}" for key in table}

    def text(key: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise PerfciError(f"{where}: '{key}' must be {KEYS[key]}, got {value!r}")
        return value

    def folder(key: str) -> Path | None:
        value = text(key)
        return (root / value).resolve() if value is not None else None

    kernels = table.get("kernels", [])
    if not isinstance(kernels, list) or not all(isinstance(m, str) for m in kernels):
        raise PerfciError(f"{where}: 'kernels' must be {KEYS['kernels']}, got {kernels!r}")
    for module in kernels:
        if not _MODULE.match(module):
            raise PerfciError(f"{where}: 'kernels': {module!r} is not a module name (dotted, like mypkg.kernels)")
    profiles = table.get("noise_profiles", {})
    if not isinstance(profiles, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                 for k, v in profiles.items()):
        raise PerfciError(f"{where}: 'noise_profiles' must be {KEYS['noise_profiles']}, got {profiles!r}")
    accept = _compile_accept(table.get("compile_accept", []), where)
    stale = table.get("stale_days", STALE_DAYS)
    if isinstance(stale, bool) or not isinstance(stale, int) or stale < 1:
        raise PerfciError(f"{where}: 'stale_days' must be {KEYS['stale_days']}, got {stale!r}")
    build_timeout = table.get("build_timeout", BUILD_TIMEOUT_S)
    if not is_seconds(build_timeout):
        raise PerfciError(f"{where}: 'build_timeout' must be {KEYS['build_timeout']}, got {build_timeout!r}")
    return ProjectConfig(
        root=root, file=path,
        suites=folder("suites") or root / "suites",
        kernels=tuple(dict.fromkeys(kernels)),
        baselines=folder("baselines") or root / "baselines",
        history=folder("history"),
        noise_profiles={arch: (root / value).resolve() for arch, value in profiles.items()},
        build=text("build"),
        build_timeout=float(build_timeout),
        compile_accept=accept,
        stale_days=stale,
        origins=origins,
    )


def is_seconds(value: Any) -> bool:
    """A limit in seconds: a number (not a bool) above zero and finite (an infinite one is no limit)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:  # an integer past a float's range (TOML has no limit on one) is no limit either
        return math.isfinite(value) and value > 0
    except OverflowError:
        return False


def _compile_accept(entries: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise PerfciError(f"{where}: 'compile_accept' must be {KEYS['compile_accept']}, got {entries!r}")
    out = []
    for i, entry in enumerate(entries, 1):
        at = f"{where}: compile_accept entry {i}"
        unknown = sorted(set(entry) - {"arch", "case", "shapes", "reason", *ACCEPT_BOUNDS})
        if unknown:
            raise PerfciError(f"{at}: unknown key(s) {', '.join(unknown)}; allowed: arch, case, shapes, reason, "
                              f"{', '.join(ACCEPT_BOUNDS)}")
        for key in ("arch", "case", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise PerfciError(f"{at}: '{key}' must be a non-empty string (a change is accepted for a reason)")
        shapes = entry.get("shapes", [])
        if not isinstance(shapes, list) or not all(isinstance(s, str) for s in shapes):
            raise PerfciError(f"{at}: 'shapes' must be a list of MxNxK strings, got {shapes!r}")
        bounds = {k: entry[k] for k in ACCEPT_BOUNDS if k in entry}
        if not bounds:
            raise PerfciError(f"{at}: give at least one bound ({', '.join(ACCEPT_BOUNDS)})")
        bad = [k for k, v in bounds.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0]
        if bad:
            raise PerfciError(f"{at}: '{bad[0]}' must be an integer >= 0, got {bounds[bad[0]]!r}")
        out.append(dict(entry, shapes=list(shapes)))
    return tuple(out)


def _has_perfci_table(pyproject: Path) -> bool:
    text = _read_text(pyproject)
    if "perfci" not in text:  # most pyproject.tomls on the way up are not perfci's business
        return False
    tool = _parse(text, pyproject).get("tool")
    return isinstance(tool, dict) and "perfci" in tool


def _read_table(path: Path) -> Mapping[str, Any]:
    data = _parse(_read_text(path), path)
    if path.name != PYPROJECT:
        return data
    tool = data.get("tool")
    table = tool.get("perfci") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise PerfciError(f"{path}: [tool.perfci] must be a table")
    return table


def _read_text(path: Path) -> str:
    return read_input_text(str(path), "configuration", allow_empty=True)


def _parse(text: str, path: Path) -> dict:
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise PerfciError(f"{path}: not valid TOML (nested too deeply)") from None
    except ValueError as err:  # TOMLDecodeError, or an integer beyond Python's digit limit
        raise PerfciError(f"{path}: not valid TOML ({str(err).splitlines()[0]})") from None


def _legacy_root(start: Path | None) -> tuple[Path, bool]:
    """(root, laid out as perfci's): a checkout with ``kernels/__init__.py`` and ``suites/``
    above ``start``, else (perfci's own checkout, False).

    Looking upward first means that, inside ``perfci bisect``, a revision of a
    repository laid out as perfci's is measured with its own kernels rather
    than with whatever copy happens to be installed.
    """
    here = Path(start or os.getcwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "kernels" / "__init__.py").is_file() and (candidate / "suites").is_dir():
            return candidate, True
    return Path(__file__).resolve().parents[1], False  # perfci/config.py -> the checkout perfci came from


def render_config(config: ProjectConfig, kernels: Sequence[tuple[str, str, str]] = (),
                  problems: Sequence[str] = ()) -> str:
    """What ``perfci config`` prints: every value in force and where it came from.

    ``kernels``: (name, where it is declared, what it hides or "") per registered name;
    ``problems``: installed kernel libraries that failed to load, one line each.
    """
    def shown(value: Any) -> str:
        if value is None or value == () or value == {}:
            return "(not set)"
        if isinstance(value, tuple) and all(isinstance(v, Mapping) for v in value):  # compile_accept
            return "; ".join(f"{e['arch']} {e['case']} " + " ".join(f"{k}={e[k]}" for k in ACCEPT_BOUNDS if k in e)
                             for e in value)
        if isinstance(value, tuple):
            return ", ".join(value)
        if isinstance(value, Mapping):
            return ", ".join(f"{k} = {v}" for k, v in sorted(value.items()))
        return str(value)

    if config.file is None:
        source = "(no perfci.toml or [tool.perfci]: defaults)"
    else:
        source = f"{config.file}" + (" [tool.perfci]" if config.file.name == PYPROJECT else "")
    lines = [f"project root: {config.root}", f"read from:    {source}"]
    width = max(len(k) for k in KEYS)
    values = {key: shown(getattr(config, key)) for key in KEYS}
    column = max(len(v) for v in values.values())
    for key in KEYS:
        lines.append(f"  {key:<{width}}  {values[key]:<{column}}  [{config.origin(key)}]")
    if kernels:
        lines.append("kernels in force (a suite may also name package.module:object):")
        width = max(len(name) for name, _, _ in kernels)
        for name, module, hides in kernels:
            lines.append(f"  {name:<{width}}  {module}" + (f"  (shadows {hides})" if hides else ""))
    for problem in problems:
        lines.append(f"kernel library not loaded: {problem}")
    return "\n".join(lines) + "\n"
