"""Shared helpers of the CLI and report tests: the installed entry point, strict JSON, and an HTML table's cells."""

from __future__ import annotations

import html.parser
import json
import signal
import subprocess
import sys
from pathlib import Path

#: The installed ``policyopt`` entry point of the interpreter running the tests.
POLICYOPT = str(Path(sys.executable).with_name("policyopt"))


def strict_json(text: str):
    """``json.loads`` that refuses NaN / Infinity (the CLI's JSON contract)."""
    def bad(c):
        raise ValueError(f"non-finite JSON constant {c}")

    return json.loads(text, parse_constant=bad)


def main_output(*args) -> tuple[int, str, str]:
    """``policyopt ARGS`` run in this process (:func:`policyopt.cli.main.main`): exit code, stdout and stderr."""
    import contextlib
    import io

    from policyopt.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def main_json(*args):
    """The strict JSON object of ``policyopt ARGS --json`` run in this process (exit 0 asserted)."""
    code, out, err = main_output(*args, "--json")
    assert code == 0, err
    return strict_json(out)


def run_cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the installed ``policyopt`` with `args` (as strings); assert exit 0 (stderr in the message)."""
    proc = subprocess.run([POLICYOPT, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc


def run_any(*args, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the installed ``policyopt`` with `args` (as strings), without the publisher's test pause; any exit code."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "POLICYOPT_PUBLISH_PAUSE"}
    return subprocess.run([POLICYOPT, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


def ok_json(*args):
    """The strict JSON object of ``policyopt ARGS --json`` (exit 0 asserted)."""
    res = run_any(*args, "--json")
    assert res.returncode == 0, res.stderr
    return strict_json(res.stdout)


def refused(res: subprocess.CompletedProcess, *phrases) -> None:
    """Assert a refusal: exit 2, nothing on stdout, one ``policyopt: error:`` line on stderr holding every phrase."""
    assert res.returncode == 2 and res.stdout == "", (res.stdout, res.stderr)
    assert res.stderr.startswith("policyopt: error: ") and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    for p in phrases:
        assert p in res.stderr, res.stderr


def default_sigint() -> None:
    """``preexec_fn`` of a child that a test interrupts with SIGINT: Ctrl-C handled as in a terminal.

    A test runner started in the background (``cmd &``, ``nohup``) passes SIGINT on as ignored, and a
    Python program that starts with SIGINT ignored never raises KeyboardInterrupt (rightly: it was
    meant to survive Ctrl-C), so the Ctrl-C tests would fail for the runner's reason, not the CLI's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class TableCells(html.parser.HTMLParser):
    """The text of every ``<th>``/``<td>`` cell of an HTML page, in order (``.cells``)."""

    def __init__(self):
        super().__init__()
        self.cells, self._on = [], False

    def handle_starttag(self, tag, attrs):
        """Start a new cell at ``<th>`` / ``<td>``."""
        self._on = tag in ("th", "td")
        if self._on:
            self.cells.append("")

    def handle_data(self, data):
        """Append text inside a cell."""
        if self._on:
            self.cells[-1] += data
