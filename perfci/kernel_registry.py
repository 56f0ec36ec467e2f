"""Which code a suite's kernel word means: a registered name, or an import path.

Kernels come in through three doors, each explicit:

1. **The project's modules**, listed in ``[tool.perfci] kernels`` and imported
   from the project root (on the measuring process's path), so a bisect or
   confirm worktree measures its own revision's code.
2. **Installed kernel libraries**, through the entry-point group
   ``perfci.kernels``; perfci's own kernels come in this way (``perfci_kernels``).
3. **An import path** written in the suite, ``package.module:object``, where
   the object is a :class:`perfci.kernel.Backend` or a plain GEMM callable
   (wrapped by :func:`perfci.kernel.gemm`). The path itself is the kernel's
   name in the results.

A kernel module declares its kernels in a module-level ``BACKENDS`` (a list or
tuple of Backend); nothing is discovered by scanning or by import side effects.
An entry point names such a module (or the list itself).

Two copies of one name: a project's kernel shadows an installed library's of
the same name, so a repository measures its own copy (perfci's own checkout
declares ``kernels.backends``, which registers the same names as the installed
``perfci_kernels``; ``perfci config`` lists what shadows what). The same name
declared twice within the project, or by two installed libraries, is an error.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Mapping, Sequence

from perfci.config import ProjectConfig, load_config
from perfci.errors import PerfciError
from perfci.kernel import Backend, gemm
from perfci.model import CaseSpec

ENTRY_POINT_GROUP = "perfci.kernels"


@dataclass(frozen=True)
class Registered:
    """One name in force: its Backend and where it was declared."""

    backend: Backend
    module: str  # the module whose BACKENDS holds it
    source: str  # "project" or "installed"
    shadows: str = ""  # the installed module whose same-named kernel this one hides


class KernelRegistry:
    """Resolves kernel words for one project; loads each door only when it is needed.

    Args:
        modules: the project's kernel modules (``[tool.perfci] kernels``).
        root: imported from here (put first on ``sys.path`` if absent).
        where: how to name the module list in errors.
        installed: also look in the ``perfci.kernels`` entry points.
    """

    def __init__(self, modules: Sequence[str] = (), root: Path | None = None, *,
                 where: str = "[tool.perfci] kernels", installed: bool = True):
        self.modules = tuple(modules)
        self.root = root
        self.where = where
        self.use_installed = installed
        self._project: dict[str, Registered] | None = None
        self._installed: dict[str, Registered] | None = None
        self._broken: dict[str, str] = {}  # entry point that failed to load -> why
        self._ambiguous: dict[str, str] = {}  # name two installed libraries declare -> the one line
        self._paths: dict[str, Backend | str] = {}  # import path -> Backend, or why not

    @classmethod
    def for_project(cls, config: ProjectConfig) -> "KernelRegistry":
        return cls(config.kernels, config.root, where=f"{config.origin('kernels')}")

    # ------------------------------------------------------------------ lookups

    def find(self, word: str) -> Backend | str:
        """The Backend a suite's kernel word means, or why there is none (one line)."""
        if ":" in word:
            return self._import_path(word)
        found = self.project().get(word)
        if found is not None:
            return found.backend
        installed = self.installed()
        if word in installed:
            return installed[word].backend
        if word in self._ambiguous:
            return self._ambiguous[word]
        known = ", ".join(sorted({*self.project(), *installed})) or "none"
        note = f"; kernel libraries that failed to import: {'; '.join(self._broken.values())}" if self._broken else ""
        return f"unknown kernel '{word}'; known: {known} (or give an import path package.module:object){note}"

    def backend(self, word: str) -> Backend:
        found = self.find(word)
        if isinstance(found, str):
            raise PerfciError(found)
        return found

    def check(self, spec: CaseSpec) -> str | None:
        """Why no kernel can take ``spec``, or None: the suite loader's check (no device, no torch
        unless an import path names a module that imports it)."""
        found = self.find(spec.kernel)
        return found if isinstance(found, str) else found.check_case(spec)

    def catalogue(self) -> list[Registered]:
        """Every registered name in force (project first, then installed), for ``perfci config``."""
        project, installed = self.project(), self.installed()
        own = [Registered(r.backend, r.module, r.source, installed[n].module if n in installed else "")
               for n, r in project.items()]
        return [*own, *(r for n, r in sorted(installed.items()) if n not in project)]

    def broken_libraries(self) -> list[str]:
        """Installed kernel libraries whose entry point failed to load, one line each."""
        self.installed()
        return list(self._broken.values())

    # ------------------------------------------------------------------ the doors

    def project(self) -> dict[str, Registered]:
        if self._project is None:
            found: dict[str, Registered] = {}  # kept only when every module loaded: no half registry
            if self.modules:
                _on_path(self.root)
            for name in self.modules:
                module = _import(name, f"{self.where}: cannot import {name}")
                for item in _declared(module, name):
                    if ":" in item.name:
                        raise PerfciError(f"{name}: kernel name {item.name!r} holds ':' (kept for import paths)")
                    other = found.get(item.name)
                    if other is not None and other.backend is not item:
                        raise PerfciError(f"kernel '{item.name}' is declared twice, by {other.module} and {name}; "
                                          f"rename one")
                    found[item.name] = Registered(item, name, "project")
            self._project = found
        return self._project

    def installed(self) -> dict[str, Registered]:
        if self._installed is None:
            self._installed = {}
            if self.use_installed:
                self._load_installed()
        return self._installed

    def _load_installed(self) -> None:
        assert self._installed is not None
        twice: dict[str, list[str]] = {}
        for ep in _entry_points():
            try:
                loaded = ep.load()
                module = ep.value.split(":")[0]
                items = _declared(loaded, ep.value)
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # noqa: BLE001 - one broken library (even one that exits
                # at import) must not hide the others, nor end perfci
                self._broken[ep.value] = f"{ep.value}: {_first_line(err)}"
                continue
            for item in items:
                other = self._installed.get(item.name)
                if other is not None and other.backend is not item:
                    twice.setdefault(item.name, [other.module]).append(module)
                    continue
                self._installed[item.name] = Registered(item, module, "installed")
        for name, modules in twice.items():
            # Neither copy is taken: which one won would depend on install order.
            del self._installed[name]
            self._ambiguous[name] = (f"kernel '{name}' is declared by two installed libraries "
                                              f"({', '.join(modules)}); uninstall one, or declare the one "
                                              f"you mean in [tool.perfci] kernels")

    def _import_path(self, word: str) -> Backend | str:
        if word not in self._paths:
            self._paths[word] = self._resolve_path(word)
        return self._paths[word]

    def _resolve_path(self, word: str) -> Backend | str:
        module_name, _, attr = word.partition(":")
        if not module_name or not attr or ":" in attr:
            return f"kernel '{word}': an import path is package.module:object"
        _on_path(self.root)
        try:
            obj: Any = _import(module_name, "")
        except PerfciError as err:
            return f"kernel '{word}': cannot import {module_name} ({err.message})"
        for part in attr.split("."):
            if not hasattr(obj, part):
                return f"kernel '{word}': {module_name} has no attribute {attr}"
            obj = getattr(obj, part)
        if isinstance(obj, Backend):
            return obj
        if callable(obj):
            return gemm(obj, word)
        return (f"kernel '{word}': {module_name}.{attr} is of type {type(obj).__name__}, "
                f"neither a perfci.kernel.Backend nor a callable")


def _entry_points() -> list[Any]:
    """Every ``perfci.kernels`` entry point of every distribution on the path, once per target.

    Not ``entry_points(group=...)``, which keeps only the first metadata found
    per distribution name: a stale ``*.egg-info`` left in a checkout (first on
    the path when Python runs from there) would hide the installed one's.
    """
    seen: dict[tuple[str, str], Any] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                seen.setdefault((ep.name, ep.value), ep)
    return [seen[key] for key in sorted(seen)]


def _declared(obj: Any, where: str) -> list[Backend]:
    """The Backends a kernel module (its ``BACKENDS``), or a list, declares."""
    items = getattr(obj, "BACKENDS", None) if isinstance(obj, ModuleType) else obj
    if items is None:
        raise PerfciError(f"{where}: declares no BACKENDS (a module-level list of perfci.kernel.Backend)")
    if isinstance(items, Mapping):
        items = list(items.values())
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise PerfciError(f"{where}: BACKENDS must be a list of perfci.kernel.Backend, got a {type(items).__name__}")
    items = list(items)
    for index, item in enumerate(items):
        if not isinstance(item, Backend):
            hint = "; wrap a plain GEMM as perfci.kernel.gemm(fn, 'name')" if callable(item) else ""
            raise PerfciError(f"{where}: BACKENDS[{index}] is a {type(item).__name__}, not a "
                              f"perfci.kernel.Backend{hint}")
    return items


def _import(name: str, what: str) -> ModuleType:
    """Import a kernel module, the one door every kernel module comes through.

    A module may do anything while importing: raise, call ``sys.exit(0)`` (which would
    otherwise end perfci green with nothing measured), ``pytest.skip(...,
    allow_module_level=True)``, or raise another BaseException. All of it is the one-line
    error naming the module; only Ctrl-C (KeyboardInterrupt) stays an interruption.
    """
    try:
        return importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - a user's module may raise anything while importing
        raise PerfciError(f"{what} ({_first_line(err)})" if what else _first_line(err)) from None


def _first_line(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r}) while importing"
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}"[:300] if text else type(err).__name__


def _on_path(root: Path | None) -> None:
    """Make the project's modules importable here, as they are in the measuring process
    (whose PYTHONPATH starts with the root)."""
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
        importlib.invalidate_caches()


_BY_ROOT: dict[str, KernelRegistry] = {}


def registry_for_root(root: str | Path) -> KernelRegistry:
    """The registry of the project at ``root``, one per process: the measuring worker's door."""
    key = str(root)
    if key not in _BY_ROOT:
        _BY_ROOT[key] = KernelRegistry.for_project(load_config(Path(root)))
    return _BY_ROOT[key]


def get_backend(word: str, start: str | Path | None = None) -> Backend:
    """The Backend ``word`` means in the project found from ``start`` (default: the working directory)."""
    return registry_for_root(load_config(start).root).backend(word)
