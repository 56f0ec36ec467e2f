"""The house: no import cycles in perfci/, between modules or between packages; layers kept; every module imports alone.

The graph counts every import of a perfci module, at module level or inside a
function, so a function-level import cannot hide a cycle either.

Layers: each folder perfci/<pkg>/ is one capability (measure, compare, bisect, ...).
The top-level modules perfci/*.py are the shared layer, the vocabulary every
capability speaks (results, suites, git, stats, ...), except perfci/cli.py and
perfci/__main__.py, which are the top: they dispatch to every capability's cli.py.
perfci/stats/ is a folder of the shared layer, not a capability (:data:`SHARED_PACKAGES`).
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from perfci.verdict import Verdict

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "perfci"

# Shared-layer modules that still import a capability package: (module, imported module), each
# with why and until when. The test fails on any other such edge, and on an entry here that no
# longer exists (so a fixed one is deleted, not left to excuse a new one). Each is also left out
# of the package graph, as a known cycle through the shared layer (suites -> measure -> suites).
# Empty since the kernel registry moved to the shared layer (perfci/kernel_registry.py), which
# took perfci/suites.py's last edge into measure/ with it.
SHARED_LAYER_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()
# Imports of perfci's own modules made inside a function, outside the seams (the cli.py files and
# __main__.py, lazy so that `perfci --help` stays cheap): (module, imported module) -> why. Every
# other module imports at its top, where a reader sees what it depends on and the cycle check sees
# it too. A new function-level import fails the test with its file and line; an entry whose imports
# are gone may be deleted (the list only shrinks).
LAZY_PERFCI_IMPORTS: dict[tuple[str, str], str] = {
    # Triton: hold's probes are Triton kernels, and the worker sets TRITON_INTERPRET before triton loads.
    ("perfci.measure.worker", "perfci.measure.hold"): "triton",
    # The pytest11 entry point is loaded by every pytest run where perfci is installed: a seam like a cli.py.
    ("perfci.plugin.pytest_plugin", "perfci.plugin.measuring"): "cost: the measuring stack (~70 ms)",
    ("perfci.plugin.pytest_plugin", "perfci.plugin.session"): "numpy, through perfci compare",
    ("perfci.plugin.pytest_plugin", "perfci.suites"): "cost: read only when $PERFCI_CASES is set",
}
# Folders that belong to the shared layer: perfci's statistics, pure numbers that every capability uses.
SHARED_PACKAGES = ("perfci.stats",)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package.parent): p for p in sorted(package.rglob("*.py"))}


def import_targets(node: ast.Import | ast.ImportFrom, name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that one import statement of module ``name`` (at ``path``) imports."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
        targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                   for alias in node.names]
    # `import perfci.a.b` also names perfci.a.b's parents, which Python imports first;
    # only the module itself is an edge of this file.
    return {target for target in targets if target in known and target != name}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= import_targets(node, name, path, known)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
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
        for w in graph.get(v, ()):
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

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = all_modules(package)
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def capability(module: str, graph: dict[str, set[str]]) -> str | None:
    """The capability package a module belongs to (``perfci.measure`` for perfci.measure.telemetry.x), or None."""
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package's own __init__: shared layer
    head = ".".join(parts[:2])
    if head in SHARED_PACKAGES:
        return None
    is_folder = len(parts) > 2 or any(m.startswith(head + ".") for m in graph)
    return head if is_folder else None


def package_graph(graph: dict[str, set[str]], allowed: set[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
    """Each capability folder collapsed to one node; shared-layer modules stay nodes of their own.

    A cycle through the shared layer (measure -> perfci.suites -> measure) is a package
    cycle as well. ``allowed`` edges (module, imported module) are left out.
    """
    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = capability(module, graph) or module
        edges = collapsed.setdefault(source, set())
        for target in targets:
            if (module, target) in allowed:
                continue
            node = capability(target, graph) or target
            if node != source:
                edges.add(node)
    return collapsed


def shared_layer_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(shared module, capability module) for every import of a capability from the shared layer."""
    return {(module, target) for module, targets in graph.items()
            if capability(module, graph) is None and module.rpartition(".")[2] not in ("cli", "__main__")
            for target in targets if capability(target, graph) is not None}


def cli_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(module, cli module) for every import of a cli.py (or of the top) from anywhere but the top."""
    top = {m for m in graph if capability(m, graph) is None and m.rpartition(".")[2] in ("cli", "__main__")}
    return {(module, target) for module, targets in graph.items() if module not in top
            for target in targets if target.rpartition(".")[2] == "cli"}


def function_level_imports(package: Path = PACKAGE) -> list[tuple[str, str, str]]:
    """(module, imported module, ``path:line``) for each import of one of the package's own modules
    made inside a function (or a method), outside the seams: the ``cli.py`` files and ``__main__.py``."""
    modules = all_modules(package)
    known = set(modules)
    found = []
    for name, path in modules.items():
        if path.name in ("cli.py", "__main__.py"):
            continue
        where = path.relative_to(package.parent).as_posix()
        for func in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(func):  # a nested function's import is seen twice: deduplicated below
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found += [(name, target, f"{where}:{node.lineno}")
                              for target in import_targets(node, name, path, known)]
    return sorted(set(found), key=lambda f: (f[2].split(":")[0], int(f[2].split(":")[1]), f[1]))


# --------------------------------------------------------------------------- the planted failures


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``planted`` in tmp_path with these modules (path -> source)."""
    root = tmp_path / "planted"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(text)
    return root


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "perfci"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "a.py").write_text("def f():\n    from perfci.sub import b\n    from . import c\n")
    known = {"perfci.sub.a", "perfci.sub.b", "perfci.sub.c", "perfci.sub"}
    assert imported_modules("perfci.sub.a", pkg / "sub" / "a.py", known) == {"perfci.sub.b", "perfci.sub.c"}


def test_a_planted_package_cycle_is_found_where_modules_have_none(tmp_path):
    root = _plant(tmp_path, {"a/x.py": "from planted.b import y\n", "a/z.py": "",
                             "b/y.py": "", "b/w.py": "def f():\n    from planted.a import z\n"})
    graph = import_graph(root)
    assert cycles(graph) == []  # x -> y and w -> z: no module cycle
    assert cycles(package_graph(graph)) == [["planted.a", "planted.b"]]


def test_a_package_cycle_through_the_shared_layer_is_found_unless_allowed(tmp_path):
    root = _plant(tmp_path, {"words.py": "from planted.a import x\n", "a/x.py": "", "a/y.py": "import planted.words\n"})
    graph = import_graph(root)
    assert cycles(package_graph(graph)) == [["planted.a", "planted.words"]]
    assert shared_layer_imports(graph) == {("planted.words", "planted.a.x")}
    assert cycles(package_graph(graph, {("planted.words", "planted.a.x")})) == []


def test_a_planted_cli_import_is_found(tmp_path):
    root = _plant(tmp_path, {"cli.py": "from planted.a import cli\n", "a/cli.py": "", "a/core.py": "",
                             "b/core.py": "def f():\n    from planted.a.cli import main\n"})
    assert cli_imports(import_graph(root)) == {("planted.b.core", "planted.a.cli")}


# --------------------------------------------------------------------------- perfci


def test_perfci_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 30  # the walk really saw the package
    assert cycles(graph) == []


def test_perfci_has_no_package_cycle():
    graph = import_graph()
    packages = package_graph(graph, SHARED_LAYER_EXCEPTIONS)
    assert {"perfci.measure", "perfci.compare", "perfci.bisect", "perfci.confirm"} <= set(packages)
    assert cycles(packages) == []


def test_the_shared_layer_imports_no_capability():
    assert shared_layer_imports(import_graph()) == SHARED_LAYER_EXCEPTIONS


def test_only_the_top_imports_a_cli():
    graph = import_graph()
    assert {t for t in graph["perfci.cli"] if t.endswith(".cli")}  # the rule sees the dispatcher's imports
    assert cli_imports(graph) == set()


def test_a_planted_function_level_import_is_found_outside_the_seams(tmp_path):
    root = _plant(tmp_path, {
        "a.py": "import os\n\ndef f():\n    import json\n    from planted import b\n    return b\n",
        "b.py": "from planted import c\n",  # at the top: fine
        "c.py": "class K:\n    def m(self):\n        from .b import c\n        return c\n",
        "cli.py": "def main():\n    from planted import a\n",  # the seam may
        "d/cli.py": "def main():\n    from planted.d import core\n", "d/core.py": "",
    })
    assert function_level_imports(root) == [("planted.a", "planted.b", "planted/a.py:5"),
                                             ("planted.c", "planted.b", "planted/c.py:3")]


def test_perfci_imports_its_own_modules_at_the_top_outside_the_seams():
    found = function_level_imports()
    assert len(all_modules()) > 30  # the scan saw the package
    new = [f"{where}: {module} imports {target} inside a function; import it at the top of the module"
           for module, target, where in found if (module, target) not in LAZY_PERFCI_IMPORTS]
    assert new == []
    # and the list holds no entry that is no longer there: a stale one would let the import come back unseen
    stale = set(LAZY_PERFCI_IMPORTS) - {(module, target) for module, target, _ in found}
    assert stale == set()


MAX_MODULE_LINES = 500  # a module one can read in a sitting


def test_no_module_is_longer_than_a_reader_can_hold():
    long = {name: n for name, path in all_modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


# --------------------------------------------------------------------------- verdicts are Verdict members


def bare_verdict_comparisons(package: Path = PACKAGE) -> list[str]:
    """``path:line: 'word'`` for each comparison of a value with a bare verdict string outside verdict.py.

    A Compare node anywhere in a module (``==``, ``!=``, ``in``, ``not in``, ...) with a str Constant,
    alone or inside a tuple, list or set on either side, that equals a
    :class:`perfci.verdict.Verdict` value: such a test is written with the member, so a renamed or
    misspelled verdict is a NameError / AttributeError rather than a comparison that is never true.
    """
    words = {v.value for v in Verdict}
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() == "verdict.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Compare):
                continue
            for side in (node.left, *node.comparators):
                for leaf in ast.walk(side):
                    if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str) and leaf.value in words:
                        found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {leaf.value!r}")
    return found


def test_a_planted_bare_verdict_comparison_is_found(tmp_path):
    root = _plant(tmp_path, {
        "verdict.py": "X = 'regressed' == 'regressed'\n",  # the vocabulary's own module may
        "a.py": "def f(c):\n    return c.verdict in ('added', 'removed')\n",
        "b.py": "def f(c):\n    return c.verdict != 'unchanged' and c.status == 'ok'\n",
        "c.py": "WORDS = ('regressed',)\nOK = {'verdict': 'regressed'}\n",  # not a comparison
    })
    assert bare_verdict_comparisons(root) == ["planted/a.py:2: 'added'", "planted/a.py:2: 'removed'",
                                              "planted/b.py:2: 'unchanged'"]


def test_no_module_compares_with_a_bare_verdict_string():
    assert bare_verdict_comparisons() == []


# --------------------------------------------------------------------------- imports alone and in any order

# One interpreter: before each import every module of the package is dropped from
# sys.modules, so each module is imported as if alone (third-party modules, torch
# included, stay loaded: they are not what is checked, and they make up most of the
# time). Then a few shuffled orders of all of them.
_IMPORT_CHECK = """\
import importlib, json, random, sys, traceback
package, names, seeds = json.loads(sys.stdin.read())

def purge():
    for key in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
        del sys.modules[key]

def failure(where):
    return where + ": " + traceback.format_exc().strip().splitlines()[-1]

failures = []
for name in names:
    purge()
    try:
        importlib.import_module(name)
    except BaseException:
        failures.append(failure(name + " alone"))
for seed in seeds:
    purge()
    for i, name in enumerate(random.Random(seed).sample(names, len(names))):
        try:
            importlib.import_module(name)
        except BaseException:
            failures.append(failure(f"{name} as number {i + 1} of order {seed}"))
            break
print(json.dumps(failures))
"""


def import_failures(package: Path, seeds=(0, 1, 2)) -> list[str]:
    """Why a module of ``package`` does not import alone, or in a shuffled order of all of them."""
    names = sorted(n for n in all_modules(package) if not n.endswith("__main__"))  # importing it runs the CLI
    proc = subprocess.run([sys.executable, "-c", _IMPORT_CHECK], input=json.dumps([package.name, names, seeds]),
                          capture_output=True, text=True, cwd=package.parent, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_module_that_needs_another_imported_first_is_found(tmp_path):
    # b.py reaches planted.a through the package without importing it: fine once a.py is in, not alone.
    root = _plant(tmp_path, {"a.py": "VALUE = 1\n", "b.py": "import planted\nVALUE = planted.a.VALUE\n"})
    failures = import_failures(root, seeds=())
    assert len(failures) == 1 and failures[0].startswith("planted.b alone: AttributeError"), failures


def test_every_module_imports_alone_and_in_any_order():
    assert import_failures(PACKAGE) == []


def test_every_package_of_perfci_is_in_the_wheel():
    """pyproject lists perfci's packages by hand (a folder mapped to another name defeats `find`):
    a package left out is missing from what `pip install perfci` installs, though a checkout runs."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {module_name(p.parent) for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts}
    assert packages - listed == set()
