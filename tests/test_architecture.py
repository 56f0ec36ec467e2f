"""The house: no import cycles in perfci/, and every module imports on its own, in any order.

The graph counts every import of a perfci module, at module level or inside a
function, so a function-level import cannot hide a cycle either.
"""
from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "perfci"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The perfci modules ``name`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                       for alias in node.names]
        else:
            continue
        for target in targets:
            # `import perfci.a.b` also names perfci.a.b's parents, which Python imports first;
            # only the module itself is an edge of this file.
            if target in known and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "perfci"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "a.py").write_text("def f():\n    from perfci.sub import b\n    from . import c\n")
    known = {"perfci.sub.a", "perfci.sub.b", "perfci.sub.c", "perfci.sub"}
    assert imported_modules("perfci.sub.a", pkg / "sub" / "a.py", known) == {"perfci.sub.b", "perfci.sub.c"}


def test_perfci_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 30  # the walk really saw the package
    assert cycles(graph) == []


def test_no_module_is_longer_than_a_reader_can_hold():
    # ~500 lines: a module one can read in a sitting (issue 8).
    long = {name: n for name, path in all_modules().items()
            if (n := len(path.read_text().splitlines())) > 520}
    assert long == {}


def _python(code: str) -> subprocess.CompletedProcess:
    # The script goes in on stdin: it grows as modules squared, past the OS's limit for one argument.
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def test_every_module_imports_alone_and_in_any_order():
    names = sorted(n for n in all_modules() if not n.endswith("__main__"))  # importing it runs the CLI
    # Each module first, in a fresh interpreter, then the rest after it in a shuffled order:
    # whatever a module needs, it imports itself.
    orders = [[first] + random.Random(i).sample([n for n in names if n != first], len(names) - 1)
              for i, first in enumerate(names)]
    script = ("import importlib, subprocess, sys\n"
              f"orders = {orders!r}\n"
              "for order in orders:\n"
              "    code = ';'.join(f'import {m}' for m in order)\n"
              "    proc = subprocess.run([sys.executable, '-'], input=code, capture_output=True, text=True)\n"
              "    if proc.returncode:\n"
              "        print(order[0], proc.stderr.strip().splitlines()[-1]); sys.exit(1)\n")
    proc = _python(script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
