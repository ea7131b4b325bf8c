"""Progress bars (``policyopt.progress``): shown on a terminal's stderr for a long step, never with ``--json``, in a
pipe or from library code that did not ask for them; the command's output is the same either way."""

from __future__ import annotations

import fcntl
import re
import os
import pty
import struct
import subprocess
import termios

import pytest

from _cli import POLICYOPT
from policyopt import progress
from policyopt.data import load_citylearn


def test_bars_only_inside_shown():
    assert not progress.showing()
    assert type(progress.bar(3, "x")).__name__ == "_Silent"
    with progress.shown():
        assert progress.showing()
        b = progress.bar(3, "x", unit="set")
        assert type(b).__name__ == "tqdm" and b.total == 3 and b.unit == "set" and b.leave is False
        assert b.delay == progress.DELAY_S == 2.0
        b.close()
        with progress.shown(False):
            assert not progress.showing() and type(progress.bar(1, "y")).__name__ == "_Silent"
        assert progress.showing()
    assert not progress.showing()
    with progress.bar(2, "z") as silent:  # the stand-in works as a with block too
        silent.update(2)


def test_the_delay_knob_sets_the_bars_delay(monkeypatch):
    """``POLICYOPT_PROGRESS_DELAY_S`` (the tests' knob) replaces :data:`DELAY_S` when it is a finite number ≥ 0."""
    for raw, want in (("0", 0.0), ("0.25", 0.25), ("-1", 2.0), ("nan", 2.0), ("inf", 2.0), ("soon", 2.0), ("", 2.0)):
        monkeypatch.setenv(progress.DELAY_ENV, raw)
        with progress.shown():
            b = progress.bar(1, "x")
            assert b.delay == want, raw
            b.close()


#: Releases of the publishing runs below (hourly slots 0..RELEASES − 1 of the bundled homes).
RELEASES = 60


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    d = tmp_path_factory.mktemp("progress")
    df = load_citylearn()
    df[df["time"] <= RELEASES].to_csv(d / "full.csv", index=False)
    return d


def _publish(d, ledger, *extra, terminal: bool):
    """``publish`` of :data:`RELEASES` hourly releases with stderr on a pseudo-terminal or a pipe; (exit code, stdout,
    stderr).

    The bars' delay is 0 s (``POLICYOPT_PROGRESS_DELAY_S``): a bar is drawn as soon as its step starts, however
    quickly it ends (with the default 2 s delay a run must release for seconds to show one, which made smaller runs
    flaky).  The model is given without data, so the publishing step is the run's only bar."""
    args = [POLICYOPT, "publish", "--A", "0", "--S-bar", "1", "--epsilon-c", "1", "--value-range", "0:48",
            "--model", "two-state:p=0.1,q=0.2", "--data", str(d / "full.csv"), "--ledger", str(d / ledger), *extra]
    env = {**{k: v for k, v in os.environ.items() if k != "POLICYOPT_PUBLISH_PAUSE"}, progress.DELAY_ENV: "0"}
    if not terminal:
        p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        return p.returncode, p.stdout, p.stderr
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal 120 columns wide
    out_path = d / f"{ledger}.stdout"
    try:
        with open(out_path, "w", encoding="utf-8") as out_file:  # a file, not a pipe: --json's output is large
            p = subprocess.Popen(args, stdout=out_file, stderr=sub, text=True, env=env)
        os.close(sub)
        err = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        p.wait(timeout=600)
        return p.returncode, out_path.read_text(encoding="utf-8"), err.decode("utf-8", errors="replace")
    finally:
        os.close(main)


@pytest.mark.slow
def test_publish_shows_a_bar_on_a_terminal_only(stream):
    """On a terminal the publishing step draws its bar (total = the due releases) and removes it at the end; with
    stderr in a pipe, or with --json on the terminal, nothing is printed on stderr even with a 0 s delay; the text
    report is the same either way."""
    code, out, err = _publish(stream, "a.db", terminal=True)
    # slots 0..RELEASES − 1 are due (the last complete slot is the stream's last minus one)
    assert code == 0 and err.startswith("\rpublishing: ") and re.search(rf"\| \d+/{RELEASES} \[", err) and "releas" in err
    assert err.endswith("\r") and err.rstrip("\r").endswith(" " * 100)  # removed at the end (leave=False)
    # the same run with stderr in a pipe, and one with --json on the terminal: no bar, nothing on stderr
    code, out_pipe, err_pipe = _publish(stream, "b.db", terminal=False)
    assert code == 0 and err_pipe == ""
    code, _, err_json = _publish(stream, "c.db", "--json", terminal=True)
    assert code == 0 and err_json == ""
    labels = lambda t: [ln.split(":")[0] for ln in t.splitlines()]  # noqa: E731  (the noise differs run to run)
    assert labels(out) == labels(out_pipe) and len(labels(out)) > 5
