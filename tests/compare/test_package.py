"""perfci.compare as a package: what it exports, what importing it costs, how its modules import."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import perfci.compare

PACKAGE = Path(perfci.compare.__file__).parent


def test_public_names_read_from_the_package_are_the_modules_objects():
    from perfci.compare import CaseComparison, Comparison, CompareOptions, calibrate, compare, read_any
    from perfci.compare import calibration, comparison, inputs, verdicts

    assert compare is verdicts.compare and calibrate is calibration.calibrate and read_any is inputs.read_any
    assert (CompareOptions, Comparison, CaseComparison) == (
        comparison.CompareOptions, comparison.Comparison, comparison.CaseComparison)
    for name in perfci.compare.__all__:
        module = importlib.import_module(perfci.compare._EXPORTS[name])
        assert getattr(perfci.compare, name) is getattr(module, name), name


def test_the_command_line_does_not_load_the_judging_modules_before_a_handler_runs():
    # The re-exports load on first use: `perfci --help` must not pay for numpy.
    code = ("import sys, perfci.cli; perfci.cli.build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy', 'matplotlib')"
            " or m in ('perfci.compare.verdicts', 'perfci.compare.calibration')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _imports(tree):
    """(module imported, at module level?) for every perfci import in a parsed file."""
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("perfci"):
            yield node.module, id(node) in top, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("perfci"):
                    yield alias.name, id(node) in top, []


def test_modules_import_siblings_by_module_path_and_without_cycles():
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "__init__.py":
            continue
        name = f"perfci.compare.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = set()
        for module, at_top, names in _imports(tree):
            assert module != "perfci.compare", f"{path.name}: from perfci.compare import {', '.join(names)}"
            if module.startswith("perfci.compare."):
                # Only the command line defers them, so that `perfci --help` stays fast.
                assert at_top or path.name == "cli.py", f"{path.name} imports {module} inside a function"
                if at_top:
                    graph[name].add(module)

    def visit(node, trail):
        assert node not in trail, "import cycle: " + " -> ".join(trail + [node])
        for nxt in graph.get(node, ()):
            visit(nxt, trail + [node])

    for node in graph:
        visit(node, [])
    assert graph["perfci.compare.noise"] == set()  # pure profiles: a leaf
    assert graph["perfci.compare.calibration"] >= {"perfci.compare.noise", "perfci.compare.verdicts"}
    assert "perfci.compare.verdicts" not in graph["perfci.compare.comparison"]  # data, not logic
