"""``perfci compile SUITE --arch ...``: compile every case for each arch, report its resources, diff a baseline."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from perfci.errors import EXIT_OK, EXIT_REGRESSION, PerfciError
from perfci.escape import md_block

DESCRIPTION = """\
Compile every case of SUITE with the kernel and config 'perfci run' would launch
on each --arch, on this machine (no GPU needed: Triton cross-compiles), and
report per case: the config, VGPRs/AGPRs/SGPRs (AMD) or registers (NVIDIA),
spills, scratch, LDS / shared memory, and the occupancy that follows. Vendor
cases (torch_matmul) are listed as not compiled. See docs/compile.md.

baselines (a ratchet on resources, not a fixed rule):
  --out PATH         write the resources as JSON: PATH.json for one arch, or a
                     directory that gets SUITE-ARCH.json per arch
  --baseline PATH    diff against such a file (or a directory of them), case by
                     case: what rose or fell, and a verdict: worse (more spills
                     or scratch, lower occupancy, shared memory past the arch's
                     budget, a new compile error), better, or same (a register
                     or config change that keeps occupancy is reported only)
  --current PATH     diff two files (or directories) without compiling: e.g. the
                     same commit under two compilers
  --against-triton V compile here and under triton V (in a venv made for it) and
                     diff: base = the triton installed here, cur = V

exit codes: 0 nothing spills or overflows (with a baseline: nothing got worse,
or only what perfci/compile/accept.py or [tool.perfci] compile_accept
accepts); 1 a case spills, exceeds the
arch's LDS / shared memory, or fails to compile (with a baseline: a case got
worse); 2 bad input or usage.
"""
EXAMPLES = """\
examples:
  perfci compile prefill --arch gfx942,gfx950,sm_90
  perfci compile decode --arch gfx950 --filter 'kernel~splitk*' --format json
  perfci compile decode --arch gfx942,gfx950,sm_90 --out baselines/compile/
  perfci compile decode --arch gfx942,gfx950,sm_90 --baseline baselines/compile/ --format markdown
  perfci compile --baseline old/decode-gfx950.json --current new/decode-gfx950.json
  perfci compile prefill --arch gfx950 --against-triton 3.8.0
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compile", help="cross-compile a suite for gfx942 / gfx950 / sm_90 and report resources",
                              description=DESCRIPTION, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", metavar="SUITE", nargs="?",
                   help="built-in suite (smoke, decode, prefill) or a .toml path (not needed with --current)")
    p.add_argument("--arch", metavar="ARCH[,ARCH]", help="gfx942, gfx950, sm_90, comma-separated")
    p.add_argument("--filter", metavar="EXPR", help="keep matching cases, as for 'perfci run'")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    p.add_argument("--out", metavar="PATH", help="write the resources file(s): FILE.json (one arch) or a directory")
    p.add_argument("--baseline", metavar="PATH", help="diff against a resources file, or a directory of them")
    p.add_argument("--current", metavar="PATH", help="with --baseline: the other file (or directory); no compiling")
    p.add_argument("--against-triton", metavar="VERSION", help="diff this triton against triton VERSION")
    p.add_argument("--triton-env", metavar="DIR",
                   help="--against-triton's virtual environment (default: next to the cache; made if missing)")
    p.add_argument("--cache", metavar="DIR", help="compiled-resources cache (default: $PERFCI_CACHE/compile, "
                                                  "else ~/.cache/perfci/compile)")
    p.add_argument("--no-cache", action="store_true", help="compile everything, read and write no cache")
    p.set_defaults(handler=main)


def _cache(args):
    from perfci.compile.cache import DiskCache, default_dir

    return None if args.no_cache else DiskCache(args.cache or default_dir())


def _file_name(suite: str, arch: str) -> str:
    """``SUITE-ARCH.json``, SUITE the suite's name (a .toml suite's ``name``)."""
    return f"{suite}-{arch}.json"


def _paths(path: str, suite: str, arches, option: str) -> dict[str, Path]:
    """--out / --baseline: a FILE.json for one arch, or a directory holding SUITE-ARCH.json per arch."""
    target = Path(path)
    if target.suffix == ".json" and not target.is_dir():
        if len(arches) != 1:
            raise PerfciError(f"{option} {path}: one file holds one arch; give a directory for "
                              f"{', '.join(a.name for a in arches)}")
        return {arches[0].name: target}
    return {a.name: target / _file_name(suite, a.name) for a in arches}


def main(args) -> int:
    from perfci.compile.arches import parse_arches

    if args.current:
        return _diff_files(args)
    if not args.suite or not args.arch:
        raise PerfciError("perfci compile: give SUITE and --arch (or --baseline PATH --current PATH to diff files)")
    if args.against_triton and args.baseline:
        raise PerfciError("--against-triton diffs two compilers; it takes no --baseline")
    arches = parse_arches(args.arch)
    from perfci.compile.build import use_the_jit
    from perfci.suites import load_suite, select_cases

    use_the_jit()  # before the suite imports a team's kernel module

    suite = load_suite(args.suite)
    cases = select_cases(suite.cases, args.filter) if args.filter else list(suite.cases)
    if not cases:
        raise PerfciError(f"--filter '{args.filter}' matches no case of suite {suite.name}")
    baselines = _read_baselines(args.baseline, suite.name, arches, cases) if args.baseline else None
    outs = _paths(args.out, suite.name, arches, "--out") if args.out else {}
    python = None
    if args.against_triton:  # the other environment first: a version pip cannot install stops before compiling
        from perfci.compile.toolchain import check_version, triton_python

        python = triton_python(check_version(args.against_triton), args.triton_env)

    from perfci.compile.baseline import from_reports, to_json
    from perfci.compile.build import compile_cases, compiler_versions
    from perfci.files import atomic_write_text

    disk = _cache(args)
    started = time.monotonic()
    reports = compile_cases(cases, arches, disk=disk)
    # Under a table only: json stays json, and stderr stays for the one line of an error.
    args.footer = (f"compiled {len(reports)} case(s) in {time.monotonic() - started:.1f} s"
                   + (f"; cache {disk.root}: {disk.hits} hit(s), {disk.misses} compiled" if disk else "; no cache"))
    files = {a.name: from_reports(reports, suite.name, a.name, compiler_versions(a)) for a in arches}
    for arch, path in outs.items():
        atomic_write_text(path, to_json(files[arch]))
    if python is not None:
        return _against(args, python, suite.name, arches, files)
    if baselines is not None:
        return _render_diffs(args, [(baselines[a.name], files[a.name]) for a in arches])

    from perfci.compile.render import table
    from perfci.compile.render import to_json as report_json

    if args.format == "json":
        print(report_json(reports, suite.name, [a.name for a in arches]))
    elif args.format == "markdown":
        print(md_block(table(reports), "text"))
    else:
        print(table(reports))
        print(args.footer)
    sys.stdout.flush()
    return EXIT_REGRESSION if any(r.status == "fail" for r in reports) else EXIT_OK


def _read_baselines(path: str, suite: str, arches, cases) -> dict:
    """Each arch's baseline, restricted to the cases selected (a --filter is no removal)."""
    from perfci.compile.baseline import read

    keys = {c.key for c in cases}
    out = {}
    for arch, file in _paths(path, suite, arches, "--baseline").items():
        if not file.exists():
            raise PerfciError(f"--baseline: {file}: no such file (write it with `perfci compile {suite} "
                              f"--arch {arch} --out {file}`)")
        base = read(str(file))
        if base.arch != arch or base.suite != suite:
            raise PerfciError(f"--baseline {file} is suite {base.suite} on {base.arch}, not {suite} on {arch}")
        out[arch] = base.only(keys)
    return out


def _diff_files(args) -> int:
    from perfci.compile.arches import ARCHES, parse_arches
    from perfci.compile.baseline import read

    if not args.baseline:
        raise PerfciError("--current PATH needs --baseline PATH: the two files to diff")
    if args.against_triton or args.out:
        raise PerfciError("--current diffs two files; it takes no --against-triton or --out")
    base, cur = Path(args.baseline), Path(args.current)
    if base.is_dir() != cur.is_dir():
        raise PerfciError(f"--baseline {base} and --current {cur}: give two files or two directories")
    if not cur.is_dir():
        return _render_diffs(args, [(read(str(base)), read(str(cur)))], names=[(str(base), str(cur))])
    arches = {a.name for a in parse_arches(args.arch)} if args.arch else set(ARCHES)
    pairs, names = [], []
    for path in sorted(cur.glob("*.json")):
        cur_file = read(str(path))
        if cur_file.arch not in arches or (args.suite and cur_file.suite != args.suite):
            continue
        other = base / path.name
        if not other.exists():
            raise PerfciError(f"--baseline {base}: no {path.name} to diff {path} against")
        pairs.append((read(str(other)), cur_file))
        names.append((str(other), str(path)))
    if not pairs:
        raise PerfciError(f"--current {cur}: no resources file" + (f" of suite {args.suite}" if args.suite else "")
                          + (f" for {args.arch}" if args.arch else ""))
    return _render_diffs(args, pairs, names)


def _against(args, python: Path, suite: str, arches, here: dict) -> int:
    from perfci.compile.baseline import read
    from perfci.compile.toolchain import compile_elsewhere

    cache = None if args.no_cache else str(_cache(args).root)
    with tempfile.TemporaryDirectory(prefix="perfci-against-") as tmp:
        compile_elsewhere(python, args.suite, [a.name for a in arches], Path(tmp), args.filter, cache,
                          args.against_triton)
        there = {a.name: read(str(Path(tmp) / _file_name(suite, a.name))) for a in arches}
    return _render_diffs(args, [(here[a.name], there[a.name]) for a in arches])


def _render_diffs(args, pairs, names=None) -> int:
    from perfci.compile.diff import check_comparable, diff
    from perfci.compile.render_diff import RENDERERS

    for i, (base, cur) in enumerate(pairs):
        b_name, c_name = names[i] if names else ("the baseline", "this compile")
        check_comparable(base, cur, b_name, c_name)
    from perfci.compile.accept import accepted_table, project_entries
    from perfci.config import load_config

    config = load_config()
    where = f"{config.file} compile_accept" if config.file else "compile_accept"
    table = accepted_table(project_entries(config.compile_accept, where))
    diffs = [diff(base, cur, table) for base, cur in pairs]
    sys.stdout.write(RENDERERS[args.format](diffs))
    if args.format == "table" and getattr(args, "footer", ""):
        print(args.footer)
    sys.stdout.flush()
    return EXIT_REGRESSION if any(d.failing for d in diffs) else EXIT_OK
