"""``perfci config [PATH]``: the project configuration in force, and where each value came from."""
from __future__ import annotations

import argparse
import json

from perfci.errors import EXIT_OK

DESCRIPTION = """\
Print the project configuration perfci uses here: the [tool.perfci] table of
the nearest pyproject.toml (or a perfci.toml), looking up from the working
directory to the repository's top, and where each value came from (file: key,
or default). Then the kernels a suite can name: the project's modules
([tool.perfci] kernels, imported from the project root) and the installed
kernel libraries (entry point perfci.kernels), with any name the project's
copy shadows.

Keys: suites (folder), kernels (modules), baselines (folder), history (store),
noise_profiles (arch = profile file), build (command). docs/kernels.md.

exit codes: 0 printed; 2 a configuration perfci cannot use (one line).
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("config", help="show the project configuration in force and where it came from",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="look from this directory, or read this perfci.toml / pyproject.toml "
                        "(default: the working directory)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-kernels", action="store_true",
                   help="do not import the kernel modules to list the kernels")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from perfci.config import KEYS, load_config, render_config
    from perfci.kernel_registry import KernelRegistry

    config = load_config(args.path)
    kernels: list[tuple[str, str, str]] = []
    problems: list[str] = []
    if not args.no_kernels:
        registry = KernelRegistry.for_project(config)
        kernels = [(r.backend.name, r.module, r.shadows) for r in registry.catalogue()]
        problems = registry.broken_libraries()
    if args.format == "json":
        values = {key: _plain(getattr(config, key)) for key in KEYS}
        print(json.dumps({"root": str(config.root), "file": str(config.file) if config.file else None,
                          "values": values, "origins": {key: config.origin(key) for key in KEYS},
                          "kernels": [{"name": n, "module": m, "shadows": h} for n, m, h in kernels],
                          "broken_libraries": problems}, indent=2))
    else:
        print(render_config(config, kernels, problems), end="")
    return EXIT_OK


def _plain(value):
    if value is None:
        return None
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {k: str(v) for k, v in value.items()}
    return str(value)
