"""The ``perfci`` command line: parse, dispatch, turn errors into exit codes.

Each subcommand lives in its own module, which exposes ``add_parser(subparsers)``
(registering itself with ``set_defaults(handler=...)``) and a handler
``main(args) -> int``. This file only wires them together, so it stays thin.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback

from perfci import __version__
from perfci.console import tolerate_closed_pipes
from perfci.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, PerfciError, internal_error_line

EPILOG = """\
exit codes:
  0  success (compare: no regression; bisect: culprit named)
  1  run: a case failed its check, crashed or timed out; compare: a case regressed or broke;
     confirm: a confirmed regression
  2  bad input or usage: one line naming the file, row and column
  3  compare/confirm/nightly --strict: something was inconclusive; bisect: no real GOOD/BAD difference
  4  internal error (a bug in perfci, never 1: a crash is not a regression); PERFCI_DEBUG=1 shows
     the traceback
  130 interrupted (run keeps what it measured; bisect restores your tree)
  The code survives a reader that closes the pipe early (| head, | grep -q): output stops, the code stays.

examples:
  perfci run smoke --device cpu --out results.csv    # CPU via the Triton interpreter
  perfci run decode --out cur.csv --filter 'M<=16'   # on the visible GPU
  perfci compare baselines/h200/decode.csv cur.csv --format markdown
  perfci confirm main --results r.csv -- perfci run decode --cases $PWD/verdicts.json --out r.csv
  perfci history add history/ cur.csv && perfci compare history/ cur.csv
  perfci compile prefill --arch gfx942,gfx950,sm_90      # cross-compile: registers, spills, LDS
  perfci bisect v1.2 HEAD --csv-column median_us --case 'gemv,1x1024x6144,bf16' \\
      -- perfci run decode --filter kernel=gemv --out r.csv
  perfci nightly decode --history perf-history/h200 --out nightly/    # the whole night, one command
"""


class _ParserExit(SystemExit):
    """argparse's own exit (--help, a usage error): meant, unlike a SystemExit from code perfci calls."""


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            self._print_message(message, sys.stderr)
        raise _ParserExit(status)


def build_parser() -> argparse.ArgumentParser:
    from perfci.bisect import cli as bisect_cli
    from perfci.compare import cli as compare_cli
    from perfci.compile import cli as compile_cli
    from perfci.confirm import cli as confirm_cli
    from perfci.history import cli as history_cli
    from perfci.measure import cli as run_cli
    from perfci.merge import cli as merge_cli
    from perfci.nightly import cli as nightly_cli
    from perfci.project import cli as config_cli

    parser = _Parser(
        prog="perfci",
        description="Benchmark-regression CI for GPU GEMM kernels.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"perfci {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in (run_cli, merge_cli, compare_cli, confirm_cli, bisect_cli, history_cli, compile_cli,
                   nightly_cli, config_cli):
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None, **seams: object) -> int:
    """Run one perfci command; returns its exit code.

    ``seams`` set parsed values that have no command-line option: the tests use
    them to start fault-injecting processes (e.g. ``worker=`` for ``perfci run``).
    """
    # A reader that closes the pipe early (`| head`, `| grep -q`) stops the output, not the
    # command: the verdict's exit code is returned all the same.
    with tolerate_closed_pipes():
        parser = build_parser()
        args = parser.parse_args(argv)
        for name, value in seams.items():
            if not hasattr(args, name):
                raise TypeError(f"perfci.cli.main: the {args.command!r} command has no seam {name!r}")
            setattr(args, name, value)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        # SIGTERM becomes KeyboardInterrupt so every command's cleanup runs the same way.
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return _run(handler, args)


def _run(handler, args: argparse.Namespace) -> int:
    try:
        return int(handler(args))
    except PerfciError as err:
        print(f"perfci: error: {err.message}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("perfci: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _ParserExit:  # a subcommand's own argument parsing: --help, or a usage error
        raise
    except BaseException as err:  # noqa: BLE001 - a bug, or a sys.exit() in code perfci called
        # One line and a code of its own, never 1 ("regressed") and never 0: a SystemExit(0)
        # from a library is not a verdict.
        debug = os.environ.get("PERFCI_DEBUG", "") == "1"
        if debug:
            traceback.print_exc()
        hint = "" if debug else " (PERFCI_DEBUG=1 shows the traceback)"
        print(f"perfci: internal error: {_escaped(err)}{hint}", file=sys.stderr)
        return EXIT_INTERNAL


def _escaped(err: BaseException) -> str:
    """What escaped the command, on one line; a SystemExit says who exited."""
    if isinstance(err, SystemExit):
        return f"code perfci called ran sys.exit({err.code!r}); that is not a verdict"
    return internal_error_line(err)


def _raise_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt
