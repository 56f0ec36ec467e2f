"""``perfci compile SUITE --arch ...``: compile every case for each arch and report its resources."""
from __future__ import annotations

import argparse
import sys

from perfci.errors import EXIT_OK, EXIT_REGRESSION, PerfciError

DESCRIPTION = """\
Compile every case of SUITE with the kernel and config 'perfci run' would launch
on each --arch, on this machine (no GPU needed: Triton cross-compiles), and
report per case: the config, VGPRs/AGPRs/SGPRs (AMD) or registers (NVIDIA),
spills, scratch, LDS / shared memory, and the occupancy that follows. Vendor
cases (torch_matmul) are listed as not compiled. See docs/compile.md.

exit codes: 0 nothing spills or overflows; 1 a case spills, exceeds the arch's
LDS / shared memory, or fails to compile; 2 bad input or usage.
"""
EXAMPLES = """\
examples:
  perfci compile prefill --arch gfx942,gfx950,sm_90
  perfci compile decode --arch gfx950 --filter 'kernel~splitk*' --format json
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compile", help="cross-compile a suite for gfx942 / gfx950 / sm_90 and report resources",
                              description=DESCRIPTION, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", metavar="SUITE", help="built-in suite (smoke, decode, prefill) or a .toml path")
    p.add_argument("--arch", required=True, metavar="ARCH[,ARCH]", help="gfx942, gfx950, sm_90, comma-separated")
    p.add_argument("--filter", metavar="EXPR", help="keep matching cases, as for 'perfci run'")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=main)


def main(args) -> int:
    from perfci.compile.arches import parse_arches
    from perfci.measure.suites import load_suite, select_cases

    arches = parse_arches(args.arch)
    suite = load_suite(args.suite)
    cases = select_cases(suite.cases, args.filter) if args.filter else list(suite.cases)
    if not cases:
        raise PerfciError(f"--filter '{args.filter}' matches no case of suite {suite.name}")

    from perfci.compile.build import compile_cases
    from perfci.compile.render import table, to_json

    reports = compile_cases(cases, arches)
    if args.format == "json":
        print(to_json(reports, suite.name, [a.name for a in arches]))
    else:
        print(table(reports))
    sys.stdout.flush()
    return EXIT_REGRESSION if any(r.status == "fail" for r in reports) else EXIT_OK
