"""A disk cache of compiled resources, so the CPU runners recompile only what changed.

One JSON file per compiled launch under the cache directory, named by a SHA-256
over everything the compiled code depends on:

- the kernel's source: the JIT function's ``cache_key`` (Triton's own hash of its
  source, the JIT functions it calls and the globals it reads), or the module
  file's text where there is none;
- the launch: signature, constexprs, specialization attributes, options;
- the target and the compilers: ``GPUTarget``, ``triton.__version__``, the
  backend's hash (the bundled LLVM on AMD, the ptxas version on NVIDIA);
- the environment variables that steer Triton's compilers (``TRITON_*``,
  ``AMDGCN_*``, ...), and the text of the parsers that read the result, so a
  fix to a parser is not hidden by an old entry.

A compile error is cached as well: it is as deterministic as a success. Entries
are written atomically (perfci.files.atomic_write_text); an entry that cannot
be read is a miss, never an error.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perfci.compile.report import Compiled
from perfci.compile.resources import AmdResources, NvidiaResources
from perfci.errors import PerfciError
from perfci.files import atomic_write_text

FORMAT = 2  # bump when an entry's layout changes (2: knobs carry num_warps)
# Environment variables that change what Triton's compilers produce. Those that only
# move files or add output (the cache and dump directories, the interpreter) are left out.
_ENV_PREFIXES = ("TRITON_", "AMDGCN_", "AMD_", "MLIR_", "LLVM_", "NVPTX", "PTXAS")
_ENV_IGNORED = {"TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR", "TRITON_INTERPRET",
                "TRITON_PRINT_AUTOTUNING", "TRITON_CACHE_MANAGER", "TRITON_DEBUG"}
_PARSERS = Path(__file__).with_name("resources.py")


def default_dir() -> Path:
    """``$PERFCI_CACHE/compile``, else ``$XDG_CACHE_HOME/perfci/compile``, else ``~/.cache/perfci/compile``."""
    root = os.environ.get("PERFCI_CACHE", "").strip()
    if root:
        return Path(root) / "compile"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return Path(xdg or Path.home() / ".cache") / "perfci" / "compile"


def compiler_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES) and k not in _ENV_IGNORED}


def _parsers_hash() -> str:
    try:
        return hashlib.sha256(_PARSERS.read_bytes()).hexdigest()
    except OSError:
        return ""


def entry_key(source: str, launch: Any, compilers: dict[str, str], env: dict[str, str] | None = None) -> str:
    """The SHA-256 naming a compiled launch's entry. ``launch``: anything with a stable ``repr``."""
    material = json.dumps({"format": FORMAT, "source": source, "launch": repr(launch), "compilers": compilers,
                           "env": compiler_env() if env is None else env, "parsers": _parsers_hash()},
                          sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def _to_json(value: Compiled | str) -> dict:
    if isinstance(value, str):
        return {"format": FORMAT, "error": value}
    res = value.resources
    return {"format": FORMAT, "vendor": "amd" if isinstance(res, AmdResources) else "nvidia",
            "resources": asdict(res), "shared_bytes": value.shared_bytes, "knobs": [list(k) for k in value.knobs]}


def _from_json(data: Any) -> Compiled | str | None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    if isinstance(data.get("error"), str):
        return data["error"]
    kind = {"amd": AmdResources, "nvidia": NvidiaResources}.get(data.get("vendor"))
    try:
        resources = kind(**data["resources"])  # type: ignore[misc]
        return Compiled(resources, int(data["shared_bytes"]), tuple((str(k), v) for k, v in data["knobs"]))
    except (TypeError, KeyError, ValueError):
        return None


class DiskCache:
    """Entries under ``root``; ``hits`` and ``misses`` count this process's lookups."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Compiled | str | None:
        try:
            value = _from_json(json.loads(self._path(key).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            value = None
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: str, value: Compiled | str) -> None:
        try:
            atomic_write_text(self._path(key), json.dumps(_to_json(value), sort_keys=True))
        except (PerfciError, OSError):  # a cache that cannot be written only costs the next run time
            pass
