"""``perfci init``: what a kernel team's repository needs to run perfci's nightly, as files.

:func:`plan` decides (plain data in, the files to write out): the
``[tool.perfci]`` table, a starter suite naming the team's kernel, the
baselines folder, and the nightly and PR workflows rendered from perfci's own
tested ones (``templates/``; the device labels and runner labels are
parameters). :func:`apply` is the IO edge: it writes only files that do not
exist, so a second ``perfci init`` changes nothing, and says for each file what
it did.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from perfci.errors import PerfciError
from perfci.files import atomic_write_text

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DEVICE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")  # also in a job output's name (confirmed_DEVICE, close_DEVICE)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

SUITES_DIR = "bench/suites"
BASELINES_DIR = "bench/baselines"
HISTORY_DIR = "../perf-history"
WORKFLOWS = (("nightly.yml", "perfci-nightly.yml"), ("pr.yml", "perfci-pr.yml"), ("triage.yml", "perfci-triage.yml"),
             ("stale.yml", "perfci-stale.yml"))


@dataclass(frozen=True)
class InitOptions:
    kernel: str = "torch:matmul"  # a registered name or an import path package.module:object
    kernel_modules: tuple[str, ...] = ()  # [tool.perfci] kernels
    suite: str = "gemm"
    devices: tuple[tuple[str, str], ...] = (("gpu", "gpu"),)  # (device label, runner label)
    perfci_spec: str = "perfci"
    bench: str = ""  # the nightly's --bench command; "" for perfci run SUITE
    build: str = ""
    cpu: bool = False  # a suite sized for the CPU interpreter
    workflows: bool = True


@dataclass(frozen=True)
class Planned:
    path: Path
    text: str
    what: str  # what the file is, for the line that reports it
    append: bool = False  # the [tool.perfci] table added to an existing pyproject.toml


def check(opts: InitOptions) -> InitOptions:
    """The options, or one line saying which one perfci cannot use."""
    if not (_IMPORT_PATH.match(opts.kernel) or _NAME.match(opts.kernel)):
        raise PerfciError(f"--kernel {opts.kernel!r}: give a kernel name your modules register, or an import "
                          f"path package.module:object (a GEMM callable or a perfci Backend)")
    for module in opts.kernel_modules:
        if not _MODULE.match(module):
            raise PerfciError(f"--kernels-module {module!r}: not a module name (dotted, like mypkg.perf)")
    if not _LABEL.match(opts.suite) or opts.suite.endswith(".toml"):
        raise PerfciError(f"--suite {opts.suite!r}: a suite name is letters, digits, _ . - (no .toml)")
    if not opts.devices:
        raise PerfciError("--device: give at least one LABEL=RUNNER")
    labels = [label for label, _ in opts.devices]
    for label, runner in opts.devices:
        if not _DEVICE.match(label):
            raise PerfciError(f"--device {label}={runner}: a device label is a letter, then letters, digits, _ -")
        if not _LABEL.match(runner):
            raise PerfciError(f"--device {label}={runner}: a runner label is letters, digits, _ . -")
    if len(set(labels)) != len(labels):
        raise PerfciError(f"--device: a device label given twice ({', '.join(labels)})")
    for option, value in (("--perfci", opts.perfci_spec), ("--bench", opts.bench), ("--build", opts.build)):
        if "\n" in value or "\r" in value:
            raise PerfciError(f"{option}: one line, please")
    if not opts.perfci_spec.strip():
        raise PerfciError("--perfci: give the pip requirement the runners install (e.g. perfci==0.1.0)")
    for option, value in (("--bench", opts.bench), ("--build", opts.build)):
        # Written into the workflow's env:, where GitHub expands ${{ }} before any shell
        # sees the value, and then run by a shell: an event's text would become a command.
        if "${{" in value:
            raise PerfciError(f"{option}: contains '${{{{', which GitHub Actions would expand in the "
                              f"workflow before a shell runs it; write the command without it")
    if opts.bench and "{out}" not in opts.bench:
        raise PerfciError(f"--bench {opts.bench!r}: the command must write its results at {{out}}")
    return opts


def config_table(opts: InitOptions) -> str:
    """The ``[tool.perfci]`` table (the same keys are a perfci.toml's top level)."""
    modules = ", ".join(json.dumps(m) for m in opts.kernel_modules)
    rows = [
        (f"suites = {json.dumps(SUITES_DIR)}", f"`perfci run NAME` reads {SUITES_DIR}/NAME.toml"),
        (f"kernels = [{modules}]", "modules of yours whose BACKENDS a suite may name"),
        (f"baselines = {json.dumps(BASELINES_DIR)}", f"committed baselines: {BASELINES_DIR}/DEVICE/SUITE.csv"),
        (f"history = {json.dumps(HISTORY_DIR)}", "the nightly's history, one store per device"),
        (f"build = {json.dumps(opts.build)}" if opts.build else '# build = "pip install -e . --no-deps"',
         "how a fresh checkout builds your kernels (C++/HIP extensions)"),
    ]
    width = max(len(code) for code, _ in rows) + 2
    return "\n".join(["[tool.perfci]", *(f"{code:<{width}}# {why}" for code, why in rows), ""])


def suite_text(opts: InitOptions) -> str:
    """A starter suite naming the team's kernel: tiny fp32 shapes for the CPU, an LLM layer's for a GPU."""
    if opts.cpu:
        sizes, dtype, devices = "M = [16]\nN = 16\nK = 32", "fp32", '["cpu", "cuda"]'
        why = "# Sized for a CPU (Triton's interpreter): a try-out, not a measurement of your GPU kernel."
    else:
        sizes, dtype, devices = "M = [1, 16, 128]\nN = 4096\nK = 4096", "bf16", '["cuda"]'
        why = "# A decode-to-prefill sweep of one 4096x4096 layer: put your model's shapes here."
    return "\n".join([
        f"# Written by perfci init: `perfci run {opts.suite}`, `perfci nightly {opts.suite}`.",
        why,
        "# Every field of a [[cases]] entry may be a list: an entry is the product of its lists.",
        f"name = {json.dumps(opts.suite)}",
        f"devices = {devices}",
        f"dtype = {json.dumps(dtype)}",
        "",
        "[[cases]]",
        f"kernel = {json.dumps(opts.kernel)}",
        sizes,
        "",
    ])


BASELINES_README = """\
# Baselines

One folder per device label, one results CSV per suite: `DEVICE/SUITE.csv`,
the format `perfci run` writes. `perfci nightly SUITE --device-label DEVICE`
judges against it while its history holds fewer than two nights.

To commit one: run a quiet night (or `perfci run SUITE --out run.csv`) on that
device, look at it, then `cp run.csv DEVICE/SUITE.csv` here.
"""


def workflow_text(template: str, opts: InitOptions) -> str:
    """A workflow template with its parameters filled in (values quoted as YAML strings)."""
    devices = [label for label, _ in opts.devices]
    runners = list(dict.fromkeys(runner for _, runner in opts.devices))
    values = {
        "@@SUITES@@": json.dumps(opts.suite),
        "@@SUITE@@": json.dumps(opts.suite),
        "@@PERFCI_SPEC@@": json.dumps(opts.perfci_spec),
        "@@BENCH@@": json.dumps(opts.bench),
        "@@DEVICES@@": ", ".join(devices),
        "@@DEVICE_INCLUDES@@": "\n".join(f"          - device: {label}\n            label: {runner}"
                                         for label, runner in opts.devices),
        "@@DEVICE_OUTPUTS@@": "\n".join(f"      {kind}_{label}: ${{{{ steps.nightly.outputs.{kind}_{label} }}}}"
                                        for kind in ("confirmed", "close") for label in devices),
        "@@RUNNERS@@": ", ".join(runners),
        "@@FIRST_RUNNER@@": runners[0],
    }
    text = template
    for key, value in values.items():
        text = text.replace(key, value)
    left = sorted(set(re.findall(r"@@[A-Z_]+@@", text)))
    if left:  # a template and this function out of step: a bug, not the user's input
        raise ValueError(f"workflow template: unfilled {', '.join(left)}")
    return text


def template(name: str) -> str:
    return (resources.files("perfci.project") / "templates" / name).read_text(encoding="utf-8")


def plan(root: Path, top: Path, opts: InitOptions, configured: object | None = None) -> list[Planned]:
    """The files ``perfci init`` would write for the project at ``root`` (repository top ``top``).

    ``configured``: the ProjectConfig already in force there (its suites and
    baselines folders are used), or None when the project has none yet.
    """
    out: list[Planned] = []
    if configured is None:
        pyproject = root / "pyproject.toml"
        if pyproject.is_file():
            text = _read_as_is(pyproject)
            eol = _line_ending(text)
            gap = "" if text.endswith(eol * 2) else (eol if text.endswith(eol) else eol * 2)
            out.append(Planned(pyproject, gap + config_table(opts).replace("\n", eol), "[tool.perfci]",
                               append=True))
        else:
            out.append(Planned(pyproject, config_table(opts), "[tool.perfci]"))
        suites, baselines = root / SUITES_DIR, root / BASELINES_DIR
    else:
        suites, baselines = configured.suites, configured.baselines  # type: ignore[attr-defined]
    out.append(Planned(suites / f"{opts.suite}.toml", suite_text(opts), f"suite {opts.suite}"))
    out.append(Planned(baselines / "README.md", BASELINES_README, "baselines folder"))
    if opts.workflows:
        for name, target in WORKFLOWS:
            out.append(Planned(top / ".github" / "workflows" / target, workflow_text(template(name), opts),
                               "workflow"))
    return out


def apply(planned: Sequence[Planned], root: Path) -> list[str]:
    """Write what does not exist yet; one line per file (wrote / kept)."""
    lines = []
    for p in planned:
        shown = _shown(p.path, root)
        if p.append:
            # Through a symlink to the file it names (the link stays a link), and with the
            # file's bytes as they were: only the table is added.
            target = p.path.resolve()
            text = _read_as_is(target) + p.text
            _check_toml(text, shown)
            atomic_write_text(target, text)
            lines.append(f"added {p.what} to {shown}")
        elif p.path.exists():
            lines.append(f"kept {shown} ({p.what}): it exists")
        else:
            p.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(p.path, p.text)
            lines.append(f"wrote {shown} ({p.what})")
    return lines


def _read_as_is(path: Path) -> str:
    """A text file with its line endings untranslated (CRLF stays CRLF)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


def _line_ending(text: str) -> str:
    """The file's line ending, by its first line: CRLF or LF."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _check_toml(text: str, shown: str) -> None:
    """The pyproject.toml with the table added must still be TOML (a [tool] of another shape would not be)."""
    try:
        tomllib.loads(text)
    except ValueError as err:
        raise PerfciError(f"{shown}: adding [tool.perfci] would make it invalid TOML ({str(err).splitlines()[0]}); "
                          f"add the table by hand (docs/kernels.md)") from None


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
