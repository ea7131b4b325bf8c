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


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    d = tmp_path_factory.mktemp("progress")
    df = load_citylearn()
    df[df["time"] < 2000].to_csv(d / "first.csv", index=False)
    df[df["time"] <= 4001].to_csv(d / "full.csv", index=False)
    return d


def _publish(d, ledger, *extra, terminal: bool):
    """``publish`` of 4,001 hourly releases with stderr on a pseudo-terminal or a pipe; (exit code, stdout, stderr).

    About 5 s of releasing on an idle machine, well past the bars' 2 s delay (1,601 releases sometimes finished
    inside it)."""
    args = [POLICYOPT, "publish", "--A", "0", "--S-bar", "1", "--epsilon-c", "1", "--value-range", "0:48",
            "--model", f"data:{d / 'first.csv'}", "--data", str(d / "full.csv"), "--ledger", str(d / ledger), *extra]
    if not terminal:
        p = subprocess.run(args, capture_output=True, text=True, timeout=600)
        return p.returncode, p.stdout, p.stderr
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal 120 columns wide
    out_path = d / f"{ledger}.stdout"
    try:
        with open(out_path, "w", encoding="utf-8") as out_file:  # a file, not a pipe: --json's output is large
            p = subprocess.Popen(args, stdout=out_file, stderr=sub, text=True)
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
    code, out, err = _publish(stream, "a.db", terminal=True)
    # slots 0..4000 are due (the last complete slot is the stream's last minus one): 4,001 releases
    assert code == 0 and err.startswith("\rpublishing: ") and re.search(r"\| \d+/4001 \[", err) and "releas" in err
    assert err.endswith("\r") and err.rstrip("\r").endswith(" " * 100)  # removed at the end (leave=False)
    # the same run with stderr in a pipe, and one with --json on the terminal: no bar, nothing on stderr
    code, out_pipe, err_pipe = _publish(stream, "b.db", terminal=False)
    assert code == 0 and err_pipe == ""
    code, _, err_json = _publish(stream, "c.db", "--json", terminal=True)
    assert code == 0 and err_json == ""
    labels = lambda t: [ln.split(":")[0] for ln in t.splitlines()]  # noqa: E731  (the noise differs run to run)
    assert labels(out) == labels(out_pipe) and len(labels(out)) > 5
