"""The CLI tests' warm start (``tests/_warm_cli.py``) runs the same program as the console script.

Each command below runs twice, exec'ed (the installed ``policyopt`` script, as a shell starts it) and forked from
the warm server, and both runs must end with the same exit code, the same stdout (the wall time aside) and the same
stderr.  The commands cover what a run can do that the start might change: the help and version text, a one-line
refusal, an internal error, text and JSON reports on the bundled data, files read and written relative to the
working directory, the environment, and a run that overruns its time-out.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import time

import pytest

import _warm_cli

#: One pilot file shared by the commands that read and write files (written in the test's folder).
CSV = "user,time,value\n" + "".join(f"u{u},{t},{(t * 7 + u * 3) % 5 * 0.4:.1f}\n" for t in range(400) for u in range(3))

#: What differs between two runs of one command by design: the wall time, and a release's Laplace noise (a fresh
#: draw of OpenDP's sampler each run: the released value and its error bars).
VARIES = re.compile(r'^wall time.*$|"wall(_time)?_s": [0-9.e+-]+|"(value|ci_low|ci_high)": [0-9.e+-]+', re.M)
NOISY_COLUMNS = ("value", "ci_low", "ci_high")

COMMANDS = [
    ["--version"],
    ["--help"],
    ["schedule", "--help"],
    [],
    ["schedule", "--no-such-option"],
    ["schedule", "--max-penalty", "0"],
    ["schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", "20", "--max-penalty", "0.2", "--max-age", "24",
     "--max-interval", "24"],
    ["schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", "20", "--max-penalty", "0.2", "--json"],
    ["tpl", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--epsilon", "0.1", "--horizon", "10", "--json"],
    ["check-data", "--data", "pilot.csv", "--states", "2", "--json"],
    ["schedule", "--data", "pilot.csv", "--value-range", "0:2", "--states", "2", "--users", "1000",
     "--max-rmse", "0.05", "--json"],
    ["publish", "--A", "0", "--S-bar", "50", "--epsilon-c", "1", "--value-range", "0:2", "--model",
     "two-state:p=0.1,q=0.1", "--data", "pilot.csv", "--ledger", "ledger.db", "--out", "out.csv", "--json"],
    ["schedule", "--data", "missing.csv", "--max-penalty", "0.2"],
]


def _same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert a.returncode == b.returncode, (a.returncode, b.returncode, a.stderr, b.stderr)
    assert VARIES.sub("", a.stdout) == VARIES.sub("", b.stdout)
    assert a.stderr == b.stderr


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:3]) or "no command")
def test_forked_run_is_the_exec_run(args, tmp_path):
    results, written = [], []
    folder = tmp_path / "run"  # one path for both runs: the reports name their files
    for warm in (False, True):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        (folder / "pilot.csv").write_text(CSV)
        results.append(_warm_cli.run(args, cwd=folder, timeout=300, warm=warm))
        if "--out" in args:  # what the run wrote, relative to its working directory
            with open(folder / "out.csv", newline="") as f:
                rows = list(csv.DictReader(f))
            assert rows and all(NOISY_COLUMNS[0] in r for r in rows)
            written.append([{k: v for k, v in r.items() if k not in NOISY_COLUMNS} for r in rows])
    _same(*results)
    if written:
        assert written[0] == written[1]


def test_recursion_limit_and_exit_status_are_the_scripts(tmp_path):
    """A schedule file nested past the reader's recursion limit: the same line and exit status both ways (the
    server's stack depth must not change where the limit is met)."""
    bad = tmp_path / "nested.json"
    bad.write_text("[" * 100000 + "]" * 100000)
    args = ["backtest", "--schedule", str(bad)]
    _same(_warm_cli.run(args, timeout=300, warm=False), _warm_cli.run(args, timeout=300))


def test_environment_reaches_the_run_and_does_not_stay(tmp_path):
    """``POLICYOPT_*`` set for one run is that run's alone: the next run from the same server does not see it."""
    data = tmp_path / "s.csv"
    data.write_text(CSV)
    args = ["publish", "--A", "0", "--S-bar", "2", "--epsilon-c", "1", "--value-range", "0:2", "--model",
            "two-state:p=0.1,q=0.1", "--data", str(data)]
    env = {**os.environ, "POLICYOPT_PUBLISH_PAUSE": "committed:1"}
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        _warm_cli.run([*args, "--ledger", str(tmp_path / "a.db")], env=env, timeout=8)
    assert 8 <= time.monotonic() - start < 60  # killed at the time-out, not after the hook's 600 s sleep
    assert "policyopt-pause committed" in info.value.stderr
    clean = {k: v for k, v in os.environ.items() if k != "POLICYOPT_PUBLISH_PAUSE"}
    done = _warm_cli.run([*args, "--ledger", str(tmp_path / "b.db"), "--json"], env=clean, timeout=300)
    assert done.returncode == 0 and "policyopt-pause" not in done.stderr, done.stderr


def test_exec_is_forced_by_the_environment_variable(monkeypatch):
    """``POLICYOPT_TEST_EXEC=1`` execs every run: no server is asked."""
    def no_server(env):
        raise AssertionError("forked although POLICYOPT_TEST_EXEC=1")

    monkeypatch.setattr(_warm_cli, "_server", no_server)
    monkeypatch.setenv(_warm_cli.EXEC_ENV, "1")
    assert _warm_cli.run(["--version"], timeout=60).stdout.startswith("policyopt ")
    monkeypatch.setenv(_warm_cli.EXEC_ENV, "0")
    with pytest.raises(AssertionError, match="forked although"):
        _warm_cli.run(["--version"], timeout=60)


def test_variables_libraries_set_in_the_test_process_do_not_start_another_server():
    """What Dask's nanny and matplotlib's tests leave in a test process's environment (``_warm_cli._DRIFT_ENV``) picks
    the same server as without them; any other start-up variable picks another one (a real start reads it)."""
    base = {k: v for k, v in os.environ.items() if k not in _warm_cli._DRIFT_ENV}
    drifted = {**base, "PYTHONHASHSEED": "6640", "__DASK_PARENT_PID": "12345", "MALLOC_TRIM_THRESHOLD_": "65536",
               "MALLOC_MMAP_THRESHOLD_": "33554432", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE"}
    assert _warm_cli._start_up(drifted) == _warm_cli._start_up(base)
    assert _warm_cli._start_up({**base, "PYTHONPATH": "/elsewhere"}) != _warm_cli._start_up(base)
    assert _warm_cli._start_up({**base, "TZ": "Asia/Tokyo"}) != _warm_cli._start_up(base)
    one = _warm_cli.run(["--version"], env=base, timeout=120)
    two = _warm_cli.run(["--version"], env=drifted, timeout=120)
    assert one.returncode == two.returncode == 0 and one.stdout == two.stdout
    assert _warm_cli._SERVERS[_warm_cli._start_up(base)] is _warm_cli._SERVERS[_warm_cli._start_up(drifted)]
