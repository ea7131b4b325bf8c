"""`policyopt publish` / `policyopt ledger` through the installed entry point: crash injection with
SIGKILL, two publishers, one-line errors that leave the ledger untouched, and the bundled data as a stream."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from policyopt.deploy import Ledger
from policyopt.deploy.out_file import render_out
from policyopt.formatting import text_problems

from _cli import default_sigint  # noqa: E402
import _warm_cli  # noqa: E402

EXE = str(Path(sys.executable).with_name("policyopt"))
CHAIN = "two-state:p=0.3,q=0.3"


def _strict(text):
    def bad(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=bad)


def run(*args, env=None, timeout=180):
    e = dict(os.environ)
    e.pop("POLICYOPT_PUBLISH_PAUSE", None)
    e.update(env or {})
    return _warm_cli.run(args, env=e, timeout=timeout)


def start(*args, pause=None):
    e = dict(os.environ)
    e.pop("POLICYOPT_PUBLISH_PAUSE", None)
    if pause:
        e["POLICYOPT_PUBLISH_PAUSE"] = pause
    return subprocess.Popen([EXE, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                            preexec_fn=default_sigint)


def write_stream(path, users, slots, rng=None, skip=()):
    rng = rng or np.random.default_rng(0)
    lines = ["user,time,value"]
    for t in range(slots):
        if t in skip:
            continue
        for u in range(users):
            lines.append(f"u{u},{t},{rng.uniform(0, 2):.6f}")
    Path(path).write_text("\n".join(lines) + "\n")


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def ledger_rows(path):
    with Ledger(path) as led:
        return led.rows()


def ledger_intervals(path):
    """The ledger's error-bar record (what --out's interval columns are computed from)."""
    from policyopt.deploy.error_bars import recorded_intervals

    with Ledger(path) as led:
        return recorded_intervals(led.meta())


def check_consistent(ledger, out, seen):
    """No gap, no duplicate; every slot always carries the same value; out is a prefix of (or equal to) the ledger."""
    rows = ledger_rows(ledger)
    assert [r.n for r in rows] == list(range(1, len(rows) + 1))
    slots = [r.slot for r in rows]
    assert slots == sorted(set(slots))
    for r in rows:
        assert seen.setdefault(r.slot, r.value) == r.value, f"slot {r.slot} released with two values"
    if Path(out).exists():
        text = Path(out).read_text()
        assert render_out(rows, ledger_intervals(ledger)).startswith(text)
    return rows


PUBLISH = ["publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--model", CHAIN]


@pytest.mark.slow
def test_crash_injection_sigkill_at_named_and_random_points(tmp_path):
    rng = np.random.default_rng(2024)
    data, ledger, out = tmp_path / "s.csv", tmp_path / "l.sqlite", tmp_path / "r.csv"
    write_stream(data, 3, 120, rng)  # releases at slots 1, 3, ..., 117 (59 in all)
    args = [*PUBLISH, "--data", data, "--ledger", ledger, "--out", out]
    seen = {}
    done = 0
    # Named points: between the noise draw and the commit, and between the commit and the CSV write.
    for stage in ("drawn", "committed", "drawn", "committed"):
        k = int(rng.integers(1, 6))
        proc = start(*args, pause=f"{stage}:{k}")
        line = proc.stderr.readline()
        assert line.startswith(f"policyopt-pause {stage} slot="), line
        slot = int(line.split("slot=")[1])
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        rows = check_consistent(ledger, out, seen)
        committed = [r.slot for r in rows]
        assert (slot in committed) == (stage == "committed")
        assert len(rows) == done + k - (stage == "drawn")
        if stage == "committed":  # the CSV lags the ledger by exactly the killed row
            assert Path(out).read_text() == render_out(rows[:-1], ledger_intervals(ledger))
        done = len(rows)
    # The stream grows; random points while releasing (a release takes 3-15 ms here, depending on the load).
    write_stream(data, 3, 600, np.random.default_rng(2024))  # same first 120 slots, more after
    for _ in range(4):
        before = len(ledger_rows(ledger))
        proc = start(*args)
        # wait until a random number of new releases is in --out (header + `before` rows + k), past any rebuild, then
        # kill at a random moment of the next few milliseconds: a point in the middle of the run however fast it is
        k = int(rng.integers(1, 40))
        while Path(out).read_text().count("\n") <= before + k and proc.poll() is None:
            time.sleep(0.001)
        time.sleep(float(rng.uniform(0.0, 0.004)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        rows = check_consistent(ledger, out, seen)
        assert before < len(rows) < 299  # killed in the middle of a run
    res = run(*args, "--json")
    assert res.returncode == 0, res.stderr
    rep = _strict(res.stdout)
    rows = check_consistent(ledger, out, seen)
    assert len(rows) == 299 and rep["rows"] == 299 and rep["next_slot"] == 599
    assert Path(out).read_text() == render_out(rows, ledger_intervals(ledger))  # the resumed --out equals the ledger
    assert len(seen) == 299


def test_two_publishers_one_refused(tmp_path):
    data, ledger = tmp_path / "s.csv", tmp_path / "l.sqlite"
    write_stream(data, 2, 40)
    args = [*PUBLISH, "--data", data, "--ledger", ledger]
    first = start(*args, pause="committed:3")
    assert first.stderr.readline().startswith("policyopt-pause committed")
    second = run(*args)
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
    assert "is locked by another process" in second.stderr and "second publisher is refused" in second.stderr
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert [r.n for r in ledger_rows(ledger)] == [1, 2, 3]
    assert run(*args).returncode == 0
    rows = ledger_rows(ledger)
    assert [r.slot for r in rows] == list(range(1, 39, 2))


def test_ctrl_c_leaves_a_consistent_ledger(tmp_path):
    data, ledger, out = tmp_path / "s.csv", tmp_path / "l.sqlite", tmp_path / "r.csv"
    write_stream(data, 2, 30)
    args = [*PUBLISH, "--data", data, "--ledger", ledger, "--out", out]
    proc = start(*args, pause="drawn:4")
    assert proc.stderr.readline().startswith("policyopt-pause drawn")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip().startswith("policyopt: interrupted; the ledger is consistent") and "Traceback" not in err
    rows = ledger_rows(ledger)
    assert len(rows) == 3 and Path(out).read_text() == render_out(rows, ledger_intervals(ledger))


def _one_line_error(res, *phrases):
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    assert res.stderr.startswith(("policyopt: error: ", "policyopt publish: error: ", "policyopt ledger: error: ")) and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    for p in phrases:
        assert p in res.stderr, res.stderr


@pytest.mark.slow
def test_bad_inputs_one_line_exit_2_ledger_untouched(tmp_path):
    data, ledger = tmp_path / "s.csv", tmp_path / "l.sqlite"
    write_stream(data, 2, 30)
    base = ["--data", data, "--ledger", ledger, "--model", CHAIN]
    assert run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", *base).returncode == 0
    before = digest(ledger)
    rows_before = ledger_rows(ledger)

    # another schedule
    _one_line_error(run("publish", "--A", 2, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", *base),
                    "belongs to another schedule or data range", "A: ledger 1, given 2")
    # another data range
    _one_line_error(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:3", *base),
                    "value range: ledger 0.0:2.0, given 0.0:3.0")
    # time going backwards inside the stream
    back = tmp_path / "back.csv"
    back.write_text(data.read_text() + "u0,31,1.0\nu0,30,1.0\n")
    _one_line_error(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2",
                        "--data", back, "--ledger", ledger, "--model", CHAIN), "time goes backwards for user 'u0' (30 after 31")
    # the stream ends before the ledger's last release
    short = tmp_path / "short.csv"
    write_stream(short, 2, 10)
    _one_line_error(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2",
                        "--data", short, "--ledger", ledger, "--model", CHAIN), "time went backwards")
    # infeasible schedule JSON, as `policyopt schedule` prints it, without a horizon design to publish instead (no
    # schedule has a finite ε*; `schedule` then designs over --horizon, which this file lacks)
    sched = run("schedule", "--chain", "two-state:p=0.2,q=0.2", "--max-penalty", "1e-6", "--json")
    assert sched.returncode == 0 and _strict(sched.stdout)["status"] == "infeasible"
    sfile = tmp_path / "infeasible.json"
    sfile.write_text(json.dumps(dict(_strict(sched.stdout), horizon_design=None)))
    _one_line_error(run("publish", "--schedule", sfile, "--value-range", "0:2", *base),
                    "has status 'infeasible': there is no schedule to publish")
    assert digest(ledger) == before and ledger_rows(ledger) == rows_before

    # a non-SQLite file and a corrupted ledger are refused and left as they are
    text = tmp_path / "notes.sqlite"
    text.write_text("this is not a database\n" * 200)
    t0 = digest(text)
    _one_line_error(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2",
                        "--data", data, "--ledger", text, "--model", CHAIN), "is not a policyopt ledger (not an SQLite database")
    _one_line_error(run("ledger", "--ledger", text), "is not a policyopt ledger")
    assert digest(text) == t0
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    f0 = digest(foreign)
    _one_line_error(run("ledger", "--ledger", foreign), "is an SQLite database but not a policyopt ledger")
    assert digest(foreign) == f0
    broken = tmp_path / "broken.sqlite"
    raw = bytearray(Path(ledger).read_bytes())
    page = 4096
    assert len(raw) >= 3 * page
    raw[page + 8 : 2 * page] = b"\xa5" * (page - 8)  # garbage over the second page
    broken.write_bytes(bytes(raw))
    b0 = digest(broken)
    res = run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--data", data,
              "--ledger", broken, "--model", CHAIN)
    _one_line_error(res, "is corrupted")
    _one_line_error(run("ledger", "--ledger", broken), "is corrupted")
    assert digest(broken) == b0

    # --max-risk: refused, exit 2, nothing written
    fresh, fout = tmp_path / "fresh.sqlite", tmp_path / "fresh.csv"
    _one_line_error(run("publish", "--A", 0, "--S-bar", 1, "--epsilon-c", 1, "--value-range", "0:2", "--data", data,
                        "--ledger", fresh, "--out", fout, "--model", CHAIN, "--max-risk", 1.2), "> --max-risk 1.2; nothing was published")
    assert not fresh.exists() and not fout.exists()
    longer = tmp_path / "longer.csv"
    write_stream(longer, 2, 40)
    _one_line_error(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--data", longer,
                        "--ledger", ledger, "--model", CHAIN, "--max-risk", 0.01), "release 15 at slot 29 would raise", "nothing was published")
    assert digest(ledger) == before
    # option-level errors
    _one_line_error(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "2:0", *base),
                    "--value-range must be LO:HI with finite LO < HI, got '2:0'")
    _one_line_error(run("publish", "--A", 1, "--value-range", "0:2", *base), "missing --S-bar, --epsilon-c")
    _one_line_error(run("ledger", "--ledger", ledger, "--at", 3, "--states", 4), "--states/--smoothing apply to a fitted model")
    assert digest(ledger) == before


@pytest.mark.slow
def test_end_to_end_bundled_data_as_a_stream(tmp_path):
    """A schedule designed on a CSV stream; the stream grows by appended lines; the ledger repeats the design's ε*."""
    from policyopt.data import load_citylearn

    df = load_citylearn().sort_values(["time", "user"], kind="stable")
    stream = tmp_path / "stream.csv"
    df[df.time < 240].to_csv(stream, index=False)  # ten days so far
    # the chains are refuted on held-out readings: their ε* is printed only on request (--accept-refuted)
    design = run("schedule", "--data", stream, "--value-range", "0:48", "--states", 3, "--users", 100000,
                 "--max-penalty", 1.5e-5, "--penalty", "chain", "--accept-refuted", "compare the ledger's ε*", "--json")
    assert design.returncode == 0, design.stderr
    sched = _strict(design.stdout)
    assert sched["deployment"]["data"]["format"] == "csv" and sched["deployment"]["model"]["states"] == 3
    sfile = tmp_path / "schedule.json"
    sfile.write_text(design.stdout)
    A, S_bar = sched["A"], sched["S_bar"]
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "releases.csv"
    cmd = ["publish", "--trial", "a pilot stream", "--schedule", sfile, "--data", stream, "--ledger", ledger, "--out", out, "--json"]
    first = run(*cmd)
    assert first.returncode == 0, first.stderr
    r1 = _strict(first.stdout)
    due1 = [A + k * S_bar for k in range(1000) if A + k * S_bar <= 238]
    assert [r["slot"] for r in r1["new_releases"]] == due1 and r1["through"] == 238
    df[df.time < 24 * 30].to_csv(stream, index=False)  # the stream grows to thirty days (the same lines first)
    second = run(*cmd)
    assert second.returncode == 0, second.stderr
    r2 = _strict(second.stdout)
    due2 = [A + k * S_bar for k in range(1000) if A + k * S_bar <= 24 * 30 - 2]
    assert [r["slot"] for r in r2["new_releases"]] == due2[len(due1):] and r2["rows"] == len(due2)
    for r in r1["new_releases"] + r2["new_releases"]:
        assert r["users"] == 17 and r["status"] == "released"
        assert r["noise_scale"] == pytest.approx(48 / 17 / sched["epsilon_c"], rel=1e-12)
    audit = run("ledger", "--ledger", ledger, "--json")
    assert audit.returncode == 0, audit.stderr
    led = _strict(audit.stdout)
    assert led["released"] == len(due2) and led["skipped"] == 0 and led["at"] == due2[-1]
    # the releases of both runs, composed whatever the correlation; the headline follows the design's verdict
    assert led["model_free"]["releases"] == len(due2) == r2["model_free"]["releases"]
    assert led["model_verdict"]["verdict"] == ("passed" if sched["model_check"]["passed"] else "refuted")
    assert led["guarantee"]["kind"] == ("model-based" if led["model_verdict"]["bound"] else "model-free")
    # designed peak (30) of the ledger = the schedule's own ε*: the chains are refitted on the design's 240 slots only
    assert led["designed_peak_risk"] == pytest.approx(sched["peak_risk"], rel=1e-9)
    assert led["model_reason"] == f"the design recorded in --schedule {sfile}" and led["override"] is None
    assert led["peak_risk"] <= led["designed_peak_risk"] * (1 + 1e-12)
    assert led["peak_risk"] == max(r["risk_at_release"] for r in led["releases"])
    for r in led["releases"]:
        assert r["risk_at_release"] == pytest.approx(r["recorded_risk_at_release"], rel=1e-12)
    traj = led["trajectory"]
    assert traj["times"][0] == 0 and traj["times"][-1] == due2[-1]
    assert (A == 0 or traj["aoi"][A - 1] is None) and traj["aoi"][A] == A and traj["aoi"][-1] == A
    assert max(traj["risk"]) == pytest.approx(led["peak_risk"], rel=1e-12)
    rows = ledger_rows(ledger)
    assert out.read_text() == render_out(rows, ledger_intervals(ledger))
    # --out deleted: rebuilt from the ledger, no noise redrawn
    out.unlink()
    again = run(*cmd)
    r3 = _strict(again.stdout)
    assert r3["new_releases"] == [] and r3["out_rebuilt"] is True and out.read_text() == render_out(rows, ledger_intervals(ledger))
    # text output: privacy numbers rounded up
    text = run("ledger", "--ledger", ledger, "--at", due2[-1] + 5)
    assert text.returncode == 0 and f"AoI = {A + 5} slots" in text.stdout and text_problems(text.stdout) == [], text.stdout
    assert "designed    : ε* = " in text.stdout
