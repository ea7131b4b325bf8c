"""Command-line interface: the ``policyopt`` parser and entry point.

Bad input prints one line on stderr and exits with code 2, never a traceback.  Each sub-command lives in its
own module of this package exposing ``add_command(sub)``; shared option parsers are in
:mod:`policyopt.cli.options`.  Heavy libraries are imported inside the command handlers so ``policyopt --help``
starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from policyopt import progress
from policyopt.cli import (backtest, check_data, check_model, discounted, fran, ledger, publish, schedule, sweep, tpl,
                           tpl_budget)
from policyopt.cli.options import OneLineParser, error_line, silence_stdout
from policyopt.errors import PolicyOptError

__all__ = ["main", "build_parser"]

#: The sub-command modules, in the order ``policyopt --help`` lists them; each exposes ``add_command(sub)``.
COMMANDS = (schedule, tpl, tpl_budget, discounted, fran, sweep, publish, ledger, backtest, check_model, check_data)


def _version() -> str:
    """The installed package's version (``importlib.metadata``; no heavy import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("policyopt")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``policyopt`` command (every sub-command registered)."""
    parser = OneLineParser(
        prog="policyopt",
        description="Privacy-utility policy design for time-varying personal data (privacy in nats, time in slots).",
        epilog="Exit codes: 0 success; 2 bad input or an answer that cannot be given (one line on stderr); "
        "1 internal error (a bug: please report it); 130 interrupted (Ctrl-C).",
    )
    parser.add_argument("--version", action="version", version=f"policyopt {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for command in COMMANDS:
        command.add_command(sub)
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _print_warnings(caught, ok: bool) -> None:
    """Re-print warnings raised while a command ran, one line each (only when it succeeded).

    policyopt's own warnings print as ``policyopt: warning: …``; any other (a numpy ``RuntimeWarning`` such as an
    overflow) means an input reached arithmetic unchecked, so it is printed on one line with "please report".
    On an error exit nothing but the error line is printed.
    """
    if not ok:
        return
    seen = set()
    for w in caught:
        text = _one_line(w.message)
        if text in seen:
            continue
        seen.add(text)
        if (getattr(w.category, "__module__", "") or "").startswith("policyopt"):
            print(f"policyopt: warning: {text}", file=sys.stderr)
        elif issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning,
                                     ResourceWarning)):
            continue  # about a library's future, not about this result
        else:
            print(f"policyopt: warning: unexpected numerical warning ({text}); the result may be inaccurate "
                  "(please report)", file=sys.stderr)


def main(argv=None) -> int:
    """Entry point of the ``policyopt`` command; returns the exit code.

    Exit codes: 0 success; 2 bad input, or a problem the command cannot answer, with exactly one line on stderr
    (``policyopt: error: …``); 1 an unexpected exception, which is a bug (one line ``policyopt: internal error: …
    (please report)``, never a traceback); 130 interrupted by Ctrl-C (one line ``policyopt: interrupted``).
    Without a sub-command the usage goes to stderr and the exit code is 2.
    """
    import warnings

    with _noting_interrupts() as interrupts:
        return _main(argv, interrupts, warnings)


def _main(argv, interrupts: list, warnings) -> int:
    """:func:`main` with Ctrl-C noted in `interrupts` (an error raised after one is reported as the interruption)."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            print(f"policyopt: error: a COMMAND is required, one of {', '.join(sub.choices)} (policyopt --help lists them)",
                  file=sys.stderr)
            return 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ok = False
            try:
                with progress.shown(_stderr_is_terminal() and not getattr(args, "json", False)):
                    code = args.handler(args)
                ok = True
            finally:
                _print_warnings(caught, ok)
        if interrupts and code == 0:  # a Ctrl-C that a library swallowed (its destructor or callback cleared the
            error_line("policyopt: interrupted")  # KeyboardInterrupt) is still the user's interruption: exit 130
            return 130
        return code
    except KeyboardInterrupt:
        error_line("policyopt: interrupted")
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`: not an error of the input
        silence_stdout()
        return 0
    except Exception as exc:  # noqa: BLE001 - classified below, each on one line
        if interrupts:  # Ctrl-C came first: what failed after it is its consequence (a library converting the
            error_line("policyopt: interrupted")  # KeyboardInterrupt into its own error, an import left half done)
            return 130
        if isinstance(exc, (PolicyOptError, OSError)):
            error_line(f"policyopt: error: {_one_line(exc)}")
            return 2
        if isinstance(exc, RecursionError):
            error_line("policyopt: internal error: input nested too deeply for an unguarded reader (please report)")
            return 1
        # the last line of defence: a bug, reported on one line
        error_line(f"policyopt: internal error: {type(exc).__name__}: {_one_line(exc)[:500]} (please report)")
        return 1


@contextlib.contextmanager
def _noting_interrupts():
    """Note every SIGINT (Ctrl-C) in the yielded list while raising KeyboardInterrupt as Python's own handler does.

    A KeyboardInterrupt can come back as another error: an import it interrupts is left half done (OpenDP's lazy
    import, which loads scipy's HiGHS core), and a later import of the same module fails (seen: ImportError "type
    ObjSense is already registered"; OpenDP's own "'private_pca' is already registered").  With the interrupt noted,
    :func:`main` reports such an error as the interruption (exit 130), not as a bug.  Only Python's default handler is replaced (an ignored SIGINT
    stays ignored), only in the main thread, and it is restored on exit (for calls of :func:`main` in a process).
    """
    import signal
    import threading

    noted: list = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield noted
        return

    def handler(signum, frame):
        """SIGINT: note it (`signum`), then interrupt as Python's default handler does."""
        noted.append(signum)
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook

    def unraisable(info):
        """A noted Ctrl-C raised where Python cannot propagate it (a weakref callback of an import's module lock, a
        destructor) is the interruption :func:`main` reports in its one line: not printed again as "Exception
        ignored"; anything else goes to the previous hook."""
        if noted and info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt):
            return
        previous_hook(info)

    signal.signal(signal.SIGINT, handler)
    sys.unraisablehook = unraisable
    try:
        yield noted
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _stderr_is_terminal() -> bool:
    """Whether stderr is a terminal (progress bars are shown there, never in a pipe or a log file)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
