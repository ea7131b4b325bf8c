"""Shared helpers of the CLI and report tests: the installed entry point, strict JSON, and an HTML table's cells."""

from __future__ import annotations

import functools
import hashlib
import html.parser
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import _warm_cli
from _warm_cli import POLICYOPT  # noqa: F401 - the installed entry point, imported from here by the tests


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


#: Environment variable naming the run-once store of the session (set by ``conftest.py``, shared by the xdist
#: workers); unset, every command runs.
MEMO_ENV = "POLICYOPT_TEST_CLI_MEMO"

#: Metavars of the options whose value names a file, a data set or a service: a command with one is always run.
_PLACE_METAVARS = {"FILE", "FILE.csv", "CSV", "CSV_OR_PARQUET", "SOURCE", "MODEL", "SPEC", "ADDRESS"}


@functools.lru_cache(maxsize=1)
def _place_options() -> frozenset:
    """The option strings of every sub-command whose value names a place (a file, a data set, a scheduler)."""
    from policyopt.cli.main import build_parser

    out = set()
    for sub in build_parser()._subparsers._group_actions[0].choices.values():
        for action in sub._actions:
            if action.metavar in _PLACE_METAVARS or (action.metavar is None and action.dest in ("out", "ledger")):
                out.update(action.option_strings)
    return frozenset(out)


def reads_only_bundled_data(args, cwd=None) -> bool:
    """True when no argument can name a file, a data set or a shell construct, so the output is a function of the
    arguments and the installed package alone: no option of :func:`_place_options`, no ``/``, no shell character,
    no ``NAME.ext`` token and no token that names something in `cwd`."""
    base = Path(cwd or ".")
    places = _place_options()
    for a in args:
        a = str(a)
        if a.split("=", 1)[0] in places or any(c in a for c in "/\\<>|;&$`*?~'\"") or a == "-":
            return False
        if re.search(r"\.[A-Za-z][A-Za-z0-9]*$", a) or (not a.startswith("-") and (base / a).exists()):
            return False
    return True


def _run(argv: list, env, cwd, timeout):
    """``subprocess.run(argv)`` (text, captured); ``policyopt`` itself forked from the warm server
    (:func:`_warm_cli.run`)."""
    if argv[0] == POLICYOPT:
        return _warm_cli.run(argv[1:], env=env, cwd=cwd, timeout=timeout)
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def memo_run(argv: list, *, env: dict | None = None, cwd=None, timeout: float = 300, key_extra: str = ""):
    """``subprocess.run(argv)`` (text, captured; ``policyopt`` forked from the warm server), run once per session for a command that
    :func:`reads_only_bundled_data`: the installed policyopt is deterministic for one argument list, so a second
    test with the same command (and the same ``POLICYOPT_*`` environment) reads the first run's exit code, stdout
    and stderr from the store instead of starting the program again.  Any other command simply runs."""
    store = os.environ.get(MEMO_ENV)
    pure = store and argv[0] == POLICYOPT and reads_only_bundled_data(argv[1:], cwd)
    if not pure:
        return _run(argv, env, cwd, timeout)
    penv = sorted((k, v) for k, v in (env if env is not None else os.environ).items() if k.startswith("POLICYOPT_")
                  and k != MEMO_ENV)
    digest = hashlib.sha256(json.dumps([argv[1:], penv, key_extra]).encode()).hexdigest()
    path = Path(store) / f"{digest}.json"
    if path.is_file():
        rec = json.loads(path.read_text(encoding="utf-8"))
        return subprocess.CompletedProcess(argv, rec["returncode"], rec["stdout"], rec["stderr"])
    proc = _run(argv, env, cwd, timeout)
    if "Traceback" not in proc.stderr:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}),
                       encoding="utf-8")
        os.replace(tmp, path)
    return proc


def run_cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the installed ``policyopt`` with `args` (as strings); assert exit 0 (stderr in the message)."""
    proc = memo_run([POLICYOPT, *map(str, args)], timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc


def run_any(*args, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the installed ``policyopt`` with `args` (as strings), without the publisher's test pause; any exit code."""
    env = {k: v for k, v in os.environ.items() if k != "POLICYOPT_PUBLISH_PAUSE"}
    return memo_run([POLICYOPT, *map(str, args)], env=env, timeout=timeout)


def without_times(obj):
    """`obj` (a JSON value) without its wall times: keys ending in ``_s`` are seconds of one run."""
    if isinstance(obj, dict):
        return {k: without_times(v) for k, v in obj.items() if not k.endswith("_s")}
    if isinstance(obj, list):
        return [without_times(v) for v in obj]
    return obj


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
