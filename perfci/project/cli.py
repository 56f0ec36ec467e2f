"""``perfci config [PATH]``: the configuration in force; ``perfci init``: a repository set up for perfci."""
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
noise_profiles (arch = profile file), build (command), build_timeout (seconds a build
may take, default 1800), compile_accept (compile-diff
changes accepted: arch, case, bounds, reason; docs/compile.md), stale_days (`perfci
history stale`, default 2). docs/kernels.md.

exit codes: 0 printed; 2 a configuration perfci cannot use (one line).
"""


INIT_DESCRIPTION = """\
Set up this repository for perfci: write what is missing of

  [tool.perfci]       in pyproject.toml (added at its end; created when there is
                      none), unless a [tool.perfci] or perfci.toml is in force
  a starter suite     SUITES/NAME.toml naming your kernel (--kernel)
  the baselines       BASELINES/README.md: how to commit DEVICE/SUITE.csv
  two workflows       .github/workflows/perfci-nightly.yml (a nightly per device,
                      history on a perf-history branch, an issue per confirmed
                      regression) and perfci-pr.yml (perfci confirm on a PR with
                      the label perf-check), from perfci's own tested workflows;
                      --device LABEL=RUNNER once per device

A file that exists is kept as it is (said so): running init again changes
nothing. Then: perfci config, perfci run NAME, perfci nightly NAME (docs/kernels.md).

exit codes: 0 done; 2 an option perfci cannot use (one line).
"""


def add_parser(subparsers) -> None:
    _add_init(subparsers)
    p = subparsers.add_parser("config", help="show the project configuration in force and where it came from",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="look from this directory, or read this perfci.toml / pyproject.toml "
                        "(default: the working directory)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-kernels", action="store_true",
                   help="do not import the kernel modules to list the kernels")
    p.set_defaults(handler=main)


def _add_init(subparsers) -> None:
    p = subparsers.add_parser("init", help="set up a repository for perfci: [tool.perfci], a suite, workflows",
                              description=INIT_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", default=".", metavar="PATH",
                   help="the project's folder (default: the working directory)")
    p.add_argument("--kernel", default="torch:matmul", metavar="KERNEL",
                   help="what the starter suite measures: an import path package.module:object (a GEMM "
                        "callable or a Backend) or a name your --kernels-module registers (default: "
                        "torch:matmul, to replace)")
    p.add_argument("--kernels-module", action="append", default=[], metavar="MODULE",
                   help="a module of yours declaring BACKENDS ([tool.perfci] kernels); repeat for more")
    p.add_argument("--suite", default="gemm", metavar="NAME", help="the starter suite's name (default gemm)")
    p.add_argument("--cpu", action="store_true",
                   help="size the starter suite for a CPU (Triton's interpreter: tiny fp32 shapes), to try "
                        "perfci without a GPU")
    p.add_argument("--device", action="append", default=[], metavar="LABEL=RUNNER",
                   help="a device of the nightly: its label (baselines/LABEL/, history LABEL) and its "
                        "self-hosted runner label, e.g. h200=h200 or gfx942=mi300x; repeat per device "
                        "(default gpu=gpu)")
    p.add_argument("--perfci", default=None, metavar="REQUIREMENT",
                   help="what the runners pip install (default perfci==THIS_VERSION)")
    p.add_argument("--bench", default="", metavar="CMD",
                   help="the night's source in the workflows: your bench command, writing its results at "
                        "{out} (default: perfci run SUITE)")
    p.add_argument("--build", default="", metavar="CMD", help="[tool.perfci] build: how to build your kernels")
    p.add_argument("--no-workflows", dest="workflows", action="store_false", help="write no workflow")
    p.set_defaults(handler=init_main)


def init_main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from perfci import __version__, git
    from perfci.config import find_config_file, load_config
    from perfci.errors import PerfciError
    from perfci.project.init import InitOptions, apply, check, plan

    root = Path(args.path).resolve()
    if not root.is_dir():
        raise PerfciError(f"{args.path}: not a directory")
    devices = []
    for word in args.device or ["gpu=gpu"]:
        label, eq, runner = word.partition("=")
        if not eq:
            raise PerfciError(f"--device {word}: give LABEL=RUNNER (e.g. h200=h200, gfx942=mi300x)")
        devices.append((label.strip(), runner.strip()))
    opts = check(InitOptions(kernel=args.kernel, kernel_modules=tuple(args.kernels_module), suite=args.suite,
                             devices=tuple(devices), perfci_spec=args.perfci or f"perfci=={__version__}",
                             bench=args.bench, build=args.build, cpu=args.cpu, workflows=args.workflows))
    configured = load_config(root) if find_config_file(root) is not None else None
    top = git.toplevel(root) or root
    if configured is not None and configured.file is not None:
        print(f"perfci init: kept {configured.file} (its [tool.perfci] is in force)")
    lines = apply(plan(root, top, opts, configured), root)
    for line in lines:
        print(f"perfci init: {line}")
    placeholder = args.kernel == "torch:matmul" and any(line.endswith(f"(suite {opts.suite})") for line in lines)
    print(f"next: perfci config; perfci run {opts.suite} --out run.csv; perfci nightly {opts.suite} --out nightly/"
          + (" (first name your kernel in the suite: it measures torch:matmul)" if placeholder else ""))
    return EXIT_OK


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
