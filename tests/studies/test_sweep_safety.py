"""Sweeps never lose or mix rows: one writer per --out (flock), no resume across changed inputs (sha256),
unique temporary files.  Every CLI run here is the installed ``policyopt`` entry point in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from policyopt.studies import sweep as sweep_mod
from policyopt.studies.sweep import lock_path, meta_path, read_sweep_csv

from _cli import default_sigint  # noqa: E402
import _warm_cli  # noqa: E402

POLICYOPT = str(Path(sys.executable).with_name("policyopt"))

# Long enough (a few seconds: every point states its model-free guarantee, about 0.1–0.3 s a point) that a second
# process starts while the first still holds the lock.
SLOW = ["--chain", "two-state:p=0.1,q=0.1", "--max-age", "30", "--max-interval", "30",
        "--max-penalty", "0.1:0.5:15", "--vary", "p=0.05:0.3:3"]
SLOW_POINTS = 45
QUICK = ["--chain", "two-state:p=0.2,q=0.3", "--max-age", "8", "--max-interval", "8", "--max-penalty", "0.05:0.5:4"]


def strict_json(text: str):
    def bad(c):
        raise ValueError(f"non-finite JSON constant {c}")

    return json.loads(text, parse_constant=bad)


def cli(*args, cwd=None, timeout=300):
    return _warm_cli.run(args, cwd=cwd, timeout=timeout)


def one_line_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def start_slow(out: Path, *extra):
    proc = subprocess.Popen([POLICYOPT, "sweep", *SLOW, "--out", str(out), "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    # the header is written under the lock, before the first point
    while (not out.exists() or out.stat().st_size == 0) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the first sweep finished before the second could start"
    return proc


def test_second_writer_is_refused(tmp_path):
    out = tmp_path / "shared.csv"
    first = start_slow(out)
    try:
        second = cli("sweep", *QUICK, "--out", str(out), "--json")
        assert first.poll() is None, "the first sweep ended before the second was refused: the test proves nothing"
        line = one_line_error(second)
        from policyopt.errors import fmt  # the value as error messages show it (long paths shortened)

        assert line == (f"policyopt: error: --out {fmt(str(out))} is being written by another policyopt sweep "
                        f"(lock {lock_path(out)} is held); add --wait to wait for it, or give another --out")
    finally:
        stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    summary = strict_json(stdout)
    assert summary["points"] == summary["computed"] == SLOW_POINTS
    rows = read_sweep_csv(out)
    assert [r["point"] for r in rows] == list(range(SLOW_POINTS))  # none lost, none of the refused sweep's mixed in
    assert all(r["q"] == 0.1 and r["max_age"] == 30 for r in rows)  # the refused sweep (q = 0.3, A_MAX = 8) left nothing


def test_second_writer_waits_with_wait(tmp_path):
    out = tmp_path / "shared.csv"
    first = start_slow(out)
    t0 = time.monotonic()
    second = cli("sweep", *SLOW, "--out", str(out), "--json", "--wait", timeout=600)
    waited = time.monotonic() - t0
    stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert second.returncode == 0, second.stderr
    a, b = strict_json(stdout), strict_json(second.stdout)
    assert a["computed"] == SLOW_POINTS
    # the waiting sweep ran after the first had finished: it found every point done
    assert b["resumed"] == SLOW_POINTS and b["computed"] == 0 and waited > 0
    rows = read_sweep_csv(out)
    assert [r["point"] for r in rows] == list(range(SLOW_POINTS))


def write_readings(path: Path, seed: int, users: int = 3, hours: int = 400) -> None:
    rng = np.random.default_rng(seed)
    lines = ["user,time,value"]
    for u in range(users):
        x = np.abs(np.cumsum(rng.normal(size=hours)) * 0.1 + 2.0)
        lines += [f"u{u},{t},{x[t]:.4f}" for t in range(hours)]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_resume_refused_after_editing_the_data(tmp_path):
    data, out = tmp_path / "readings.csv", tmp_path / "s.csv"
    write_readings(data, 1)
    args = ["sweep", "--data", str(data), "--states", "3", "--max-age", "6", "--max-interval", "6",
            "--max-penalty", "0.5:2:3", "--out", str(out), "--json"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    meta = strict_json(meta_path(out).read_text())
    assert set(meta) == {"format", "policyopt_version", "inputs", "max_tv", "guarantee"} and meta["format"] == 2
    assert meta["max_tv"] == [{"source": "chain", "level": None, "horizon": None}]
    # the guarantee settings: the default Markov model and target, δ by the default rule, H = the data's length
    assert meta["guarantee"] == [{"markov_model": "chain", "privacy": "model-based", "delta": None, "horizon": 400,
                                  "accept_refuted": None}]
    assert meta["inputs"]["--data"]["path"] == str(data)
    assert len(meta["inputs"]["--data"]["sha256"]) == 64
    # unchanged inputs: resumed
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert strict_json(again.stdout)["resumed"] == 3
    before = out.read_bytes()
    # edit one reading: refused before any row is touched
    text = data.read_text().splitlines()
    text[5] = text[5].rsplit(",", 1)[0] + ",9.9999"
    data.write_text("\n".join(text) + "\n")
    line = one_line_error(cli(*args))
    assert line.startswith(f"policyopt: error: cannot resume --out {out}: --data {data} has changed since its rows "
                           "were computed (sha256 ")
    assert line.endswith("give another --out")
    assert out.read_bytes() == before


def test_resume_refused_across_versions_and_without_metadata(tmp_path, monkeypatch):
    from policyopt.cli.main import main

    out = tmp_path / "v.csv"
    assert main(["sweep", *QUICK, "--out", str(out)]) == 0
    from policyopt.studies import sweep_meta  # the metadata module records the version

    monkeypatch.setattr(sweep_meta, "_package_version", lambda: "0.0.0-other")
    with pytest.raises(sweep_mod.SweepInputsChangedError, match=r"cannot resume --out .*v\.csv: policyopt '0\.1\.0' wrote "
                       r"its rows, this is policyopt '0\.0\.0-other'"):
        _run_quick(out)
    monkeypatch.undo()
    meta_path(out).unlink()
    with pytest.raises(sweep_mod.SweepInputsChangedError, match=r"it has rows but no v\.meta\.json"):
        _run_quick(out)


def _run_quick(out):
    from policyopt.cli.main import build_parser
    from policyopt.app.sweep import build_models
    from policyopt.studies.sweep import SweepSettings, run_sweep

    args = build_parser().parse_args(["sweep", *QUICK, "--out", str(out)])
    settings = SweepSettings(max_age=8, max_interval=8, releases=24)
    return run_sweep(build_models(args, {}), args.max_penalty, settings, out)


@pytest.mark.slow
def test_many_concurrent_sweeps_in_one_directory(tmp_path):
    """Six sweeps started at once, each with its own --out in one directory: all write the same rows (nothing lost
    or mixed) and no temporary file is left.  Six processes on the 2-core machine keep several of
    them writing at the same time (most of each run is its start-up, about 3.5 s of CPU)."""
    n = 6
    procs = [subprocess.Popen([POLICYOPT, "sweep", *QUICK, "--out", str(tmp_path / f"o{i}.csv"), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    results = [p.communicate(timeout=600) for p in procs]
    for p, (stdout, stderr) in zip(procs, results):
        assert p.returncode == 0, stderr
        assert strict_json(stdout)["points"] == 4
    ref = [{k: v for k, v in r.items() if k != "wall_time_s"} for r in read_sweep_csv(tmp_path / "o0.csv")]
    for i in range(n):
        rows = [{k: v for k, v in r.items() if k != "wall_time_s"} for r in read_sweep_csv(tmp_path / f"o{i}.csv")]
        assert rows == ref
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_ctrl_c_one_line_exit_130_and_the_files_resume(tmp_path):
    """Ctrl-C (SIGINT) in the middle of a sweep: one line on stderr, exit 130, no traceback; the files on disk are
    consistent (every row parses, no row twice, no temporary file left) and a rerun completes exactly the missing points,
    giving the rows an uninterrupted run gives."""
    import signal

    out = tmp_path / "interrupted.csv"
    proc = start_slow(out)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:  # wait for some computed rows, then interrupt
        if out.exists() and out.read_text(encoding="utf-8").count("\n") > 20:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert stdout == "" and len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith("policyopt: interrupted")
    rows = read_sweep_csv(out)
    keys = [(r["p"], r["max_penalty"]) for r in rows]
    assert 0 < len(rows) < SLOW_POINTS and len(keys) == len(set(keys))
    assert not list(tmp_path.glob("*.tmp*"))
    resumed = cli("sweep", *SLOW, "--out", str(out), "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = strict_json(resumed.stdout)
    assert summary["points"] == SLOW_POINTS and summary["resumed"] >= len(rows)
    assert summary["computed"] + summary["resumed"] == SLOW_POINTS
    fresh = tmp_path / "fresh.csv"
    assert cli("sweep", *SLOW, "--out", str(fresh), "--json").returncode == 0

    def table(path):
        return sorted(tuple((k, v) for k, v in r.items() if k not in ("wall_time_s", "point")) for r in read_sweep_csv(path))

    assert table(out) == table(fresh)


def test_outputs_get_the_mode_of_any_new_file(tmp_path):
    """The CSV, JSON lines and meta files are written through mkstemp (0600) but end with 0666 under the umask
    (issue 33, item 11: they were 0600, unreadable by the group that reads the results)."""
    import os
    import stat

    out = tmp_path / "modes.csv"
    res = cli("sweep", *QUICK, "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    mask = os.umask(0)
    os.umask(mask)
    for path in (out, out.with_suffix(".jsonl"), meta_path(out)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path
    assert not lock_path(out).exists()  # removed after a clean exit (issue 33, item 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["modes.csv", "modes.jsonl", "modes.meta.json"]


def test_lock_removed_on_exit_stays_exclusive_for_a_waiter(tmp_path):
    """A waiter that opened the lock file before its holder removed it retries on the file the path names now: while
    it holds the lock a third writer is refused, and nothing is left after both exit."""
    import threading

    from policyopt.studies.sweep_store import SweepLockedError, exclusive_lock

    out = tmp_path / "race.csv"
    first_in, second_in, release_second = threading.Event(), threading.Event(), threading.Event()

    def second():
        with exclusive_lock(out, wait=True):
            second_in.set()
            release_second.wait(30)

    with exclusive_lock(out, wait=False):
        first_in.set()
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.3)  # the waiter has opened the lock file and blocks in flock
        assert not second_in.is_set()
    assert second_in.wait(30), "the waiter never got the lock after the first writer left"
    with pytest.raises(SweepLockedError):
        with exclusive_lock(out, wait=False):
            pass
    release_second.set()
    waiter.join(30)
    assert not lock_path(out).exists() and list(tmp_path.iterdir()) == []
