"""Command-line interface: the ``policyopt`` parser and entry point.

Bad input prints one line on stderr and exits with code 2, never a traceback.  Each sub-command lives in its
own module of this package exposing ``add_command(sub)``; shared option parsers are in
:mod:`policyopt.cli.options`.  Heavy libraries are imported inside the command handlers so ``policyopt --help``
starts fast.
"""

from __future__ import annotations

import argparse
import sys

from policyopt.cli import discounted, fran, publish, schedule, sweep, tpl
from policyopt.cli.options import OneLineParser
from policyopt.errors import PolicyOptError

__all__ = ["main", "build_parser"]

#: The sub-command modules, in the order ``policyopt --help`` lists them; each exposes ``add_command(sub)``.
COMMANDS = (schedule, tpl, discounted, fran, sweep, publish)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``policyopt`` command (every sub-command registered)."""
    parser = OneLineParser(
        prog="policyopt",
        description="Privacy-utility policy design for time-varying personal data (privacy in nats, time in slots).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for command in COMMANDS:
        command.add_command(sub)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``policyopt`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except BrokenPipeError:  # output piped into e.g. `head`: not an error of the input
        sys.stderr.close()
        return 0
    except (PolicyOptError, OSError) as exc:
        text = " ".join(str(exc).split())
        print(f"policyopt: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
