"""Issue 26: the last bad or extreme inputs, run through the installed ``policyopt`` as a subprocess.

Each case ends in a valid result (exit 0, strict JSON with --json, nothing on stderr unless a stated warning) or in
exactly one line on stderr with exit code 2 — never a traceback, never exit 1, never a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import mpmath as mp
import pytest

from _cli import POLICYOPT, strict_json
import _warm_cli  # noqa: E402


def run(*argv, timeout=120, **kw):
    """The installed command; a first argument ``--as-nobody`` runs it as user 65534 through ``setpriv`` (root only)."""
    prefix = []
    if argv and argv[0] == "--as-nobody":
        prefix, argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"], argv[1:]
    if prefix:  # another user: the console script started under setpriv
        proc = subprocess.run([*prefix, os.path.realpath(POLICYOPT), *map(str, argv)], capture_output=True, text=True,
                              timeout=timeout, **kw)
    else:
        proc = _warm_cli.run(argv, timeout=timeout, **kw)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def refused(*argv, match: str, timeout=120, **kw):
    """Exit 2 with exactly one line on stderr that contains `match`."""
    proc = run(*argv, timeout=timeout, **kw)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert match in proc.stderr, proc.stderr
    return proc.stderr


def ok_json(*argv, timeout=120, **kw):
    proc = run(*argv, "--json", timeout=timeout, **kw)
    assert proc.returncode == 0, proc.stderr
    return strict_json(proc.stdout), proc.stderr


# ------------------------------------------------------------------ 2. large ε in tpl, subnormal inputs


@pytest.mark.parametrize("eps,horizon", [(1000, 10), (700, 50), (300, 50)])
def test_tpl_large_epsilon_finite_supremum(eps, horizon):
    """Theorem 11's supremum is finite for these chains at any ε; it stays finite and rounded up past ε ≈ 700."""
    out, err = ok_json("tpl", "--pb", "0.8,0.2;0.1,0.9", "--epsilon", eps, "--horizon", horizon)
    assert err == ""
    import _mp_refs as R
    exact = R.supremum([[0.8, 0.2], [0.1, 0.9]], eps)
    assert mp.isfinite(exact) and mp.mpf(out["supremum"]["bpl"]) >= exact
    assert out["supremum"]["bpl"] - exact < 1e-6 * exact


def test_tpl_bundled_epsilon_700_json():
    # the bundled homes refute the chain (issue 32): its leakage is computed only when accepted on purpose
    out, err = ok_json("tpl", "--epsilon", 700, "--horizon", 50, "--accept-refuted", "stress test of the numerics",
                       timeout=300)
    assert isinstance(out["supremum"]["tpl"], float) and out["supremum"]["tpl"] >= out["max_tpl"]
    assert out["accepted_refuted"] is not None and out["guarantee"]["kind"] == "model-free"
    # 50 releases of ε_C = 700: basic composition (the PLD is no smaller at this ε)
    assert out["model_free"]["epsilon_pure"] == 35000.0 and out["model_free"]["releases"] == 50


def test_tpl_subnormal_matrix_row(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("0.99999999999999,1e-14\n1e-320,1\n")
    out, err = ok_json("tpl", "--pb", m, "--epsilon", 1, "--horizon", 5)
    import _mp_refs as R
    exact = R.supremum([[0.99999999999999, 1e-14], [1e-320, 1.0]], 1.0)
    assert mp.mpf(out["supremum"]["bpl"]) >= exact


def test_discounted_hyperbolic_subnormal_beta():
    out, err = ok_json("discounted", "--notion", "hyperbolic", "--beta", "1e-320", "--epsilon", 1, "--horizon", 10)
    assert out["total_variance"] is None and any("overflows a float" in w for w in out["warnings"])
    assert all(isinstance(b, float) and b > 0 for b in out["schedule"])


# ------------------------------------------------------------------ 3 and 5: publish / ledger inputs


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    d = tmp_path_factory.mktemp("pub")
    (d / "st.csv").write_text("user,time,value\n" + "".join(f"{u},{t},{1.0 + (t % 3)}\n" for t in range(31) for u in "ab"))
    sch = strict_json(run("schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.09", "--json").stdout)
    for name, change in (("null_model", {"model": None}), ("big_sbar", {"S_bar": 10**30})):
        (d / f"{name}.json").write_text(json.dumps(dict(sch, **change)))
    (d / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (d / "big.csv").write_text("user,time,value\n" + "".join(f"{u},{10**17 + t},1.5\n" for t in range(12) for u in "ab"))
    return d


PUB = ["--value-range", "0:4", "--model", "two-state:p=0.1,q=0.1"]
DIRECT = ["--A", "0", "--S-bar", "2"]


@pytest.mark.parametrize("argv,match", [
    (DIRECT + ["--epsilon-c", "1e-320"] + PUB, "`epsilon_c` = 1e-320 nats is too small"),
    (DIRECT + ["--epsilon-c", "1", "--value-range=0:1e308", "--model", "two-state:p=0.1,q=0.1"],
     "`value_range` must lie within ±1e+300"),
    (DIRECT + ["--epsilon-c", "99999999999999999999999999999"] + PUB, "`epsilon_c` must be ≤ 700 nats"),
    (DIRECT + ["--epsilon-c", "1", "--start", "99999999999999999999999999"] + PUB, "`origin` must be an integer from 0"),
    (["--schedule", "{d}/deep.json"] + PUB, "is JSON nested too deeply"),
    (["--schedule", "{d}/big_sbar.json"] + PUB, "`S_bar` must be an integer from 1 to 4611686018427387904"),
])
def test_publish_refuses(stream, argv, match):
    argv = [a.replace("{d}", str(stream)) for a in argv]
    db = stream / "refused.db"
    refused("publish", *argv, "--data", stream / "st.csv", "--ledger", db, match=match)
    assert not db.exists()


def test_publish_schedule_with_null_model(stream, tmp_path):
    out, err = ok_json("publish", "--schedule", stream / "null_model.json", *PUB, "--data", stream / "st.csv",
                       "--ledger", tmp_path / "l.db", "--trial", "2 users of the design's 20")
    assert out["released"] > 0 and err == ""


def test_publish_times_beyond_2_53_like_schedule(stream, tmp_path):
    """Times ≥ 10^17 are valid integer slots for `publish` as for `schedule` (no float conversion)."""
    out, _ = ok_json("publish", *DIRECT, "--epsilon-c", "1", *PUB, "--data", stream / "big.csv", "--ledger", tmp_path / "l.db")
    assert out["released"] == 6 and out["schedule"]["origin"] == 10**17
    audit, _ = ok_json("ledger", "--ledger", tmp_path / "l.db")
    assert audit["at"] == 10**17 + 10


@pytest.fixture()
def ledger(stream, tmp_path):
    db = tmp_path / "ok.db"
    ok_json("publish", *DIRECT, "--epsilon-c", "1", *PUB, "--data", stream / "st.csv", "--ledger", db)
    return db


@pytest.mark.parametrize("at,match", [("100000000000000000", "at most 10000000 slots are audited"),
                                      ("99999999999999999999999999", "`at` must be an integer from 0")])
def test_ledger_at_far_away(ledger, at, match):
    refused("ledger", "--ledger", ledger, "--at", at, match=match)


@pytest.mark.parametrize("sql,match", [
    ("UPDATE schedule SET json = '{}'", "its schedule or model record is unreadable"),
    ("UPDATE schedule SET json = '[[[[1]]]]'", "its schedule or model record is unreadable"),
    ("UPDATE releases SET reason = CAST(randomblob(64) AS TEXT) WHERE n = 1", "a release row is unreadable"),
    ("UPDATE releases SET sampler = randomblob(64) WHERE n = 2", "release n=2 (status 'released') lacks"),
    ("UPDATE meta SET value = CAST(randomblob(64) AS TEXT) WHERE key = 'created_at'", "is corrupted or not a ledger"),
    ("UPDATE meta SET value = '99' WHERE key = 'schema_version'", "records schema_version '99'"),
    ("UPDATE releases SET value = NULL WHERE n = 1", "release n=1 (status 'released') lacks a value"),
])
def test_corrupted_ledger(stream, ledger, sql, match):
    import sqlite3

    con = sqlite3.connect(ledger)
    con.execute(sql)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the change into the main file, so that bytes compare
    con.close()
    before = ledger.read_bytes()
    refused("ledger", "--ledger", ledger, match=match)
    refused("publish", *DIRECT, "--epsilon-c", "1", *PUB, "--data", stream / "st.csv", "--ledger", ledger, match=match)
    assert ledger.read_bytes() == before


# ------------------------------------------------------------------ 7. Ctrl-C at any moment of a publish run


def test_ctrl_c_during_publish_always_130(tmp_path):
    """SIGINT at spread-out moments of a long run (between, inside and right after the per-release transactions):
    always exit 130 with one line, never "cannot rollback - no transaction is active" (exit 1)."""
    import os
    import signal
    import sqlite3
    import time

    from _cli import default_sigint

    data = tmp_path / "s.csv"
    data.write_text("user,time,value\n" + "".join(f"u{u},{t},{(t * 7 + u) % 5 * 0.4:.1f}\n" for t in range(3000) for u in range(2)))
    env = {k: v for k, v in os.environ.items() if k != "POLICYOPT_PUBLISH_PAUSE"}
    codes = []
    for k in range(6):
        db = tmp_path / f"l{k}.db"
        proc = subprocess.Popen([POLICYOPT, "publish", *DIRECT, "--epsilon-c", "1", *PUB, "--data", data, "--ledger", db],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=default_sigint)
        deadline = time.monotonic() + 60
        while not (db.exists() and db.stat().st_size > 0) and time.monotonic() < deadline:  # releases are being made
            time.sleep(0.02)
        time.sleep(0.05 + 0.13 * k)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        codes.append(proc.returncode)
        assert proc.returncode == 130, (k, proc.returncode, err)
        assert err.count("\n") == 1 and err.startswith("policyopt: interrupted") and "Traceback" not in err, err
        if db.exists():  # interrupted before the ledger was initialised: the file is removed
            con = sqlite3.connect(db)
            n, top = con.execute("SELECT count(*), coalesce(max(n), 0) FROM releases").fetchone()
            con.close()
            assert n == top  # consistent: numbered without gaps
    assert codes == [130] * 6


# ------------------------------------------------------------------ 8. read-only ledgers


def test_read_only_ledger_audited_not_published(stream, ledger):
    """A ledger in a read-only file and directory: `ledger` audits it (read-only connection), `publish` refuses it
    in one line.  As root (who ignores file modes) the commands run as the unprivileged user 65534."""
    import os
    import shutil
    import stat
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="policyopt-ro-"))
    try:
        shutil.copy(ledger, d / "ro.db")
        shutil.copy(stream / "st.csv", d / "st.csv")
        (d / "ro.db").chmod(0o444)
        d.chmod(0o555)
        as_user = []
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: file modes cannot be tested")
            as_user = ["--as-nobody"]

        want, _ = ok_json("ledger", "--ledger", ledger)
        out, err = ok_json(*as_user, "ledger", "--ledger", d / "ro.db", cwd=d)
        assert err == "" and out["peak_risk"] == want["peak_risk"] and out["released"] == want["released"]
        refused(*as_user, "publish", *DIRECT, "--epsilon-c", "1", *PUB, "--data", d / "st.csv", "--ledger", d / "ro.db",
                match="is read-only", cwd=d)
        assert sorted(p.name for p in d.iterdir()) == ["ro.db", "st.csv"]  # nothing created, nothing changed
    finally:
        d.chmod(stat.S_IRWXU)
        shutil.rmtree(d)


# ------------------------------------------------------------------ 5 and 6: sweep grids


def test_sweep_infinite_grid_no_warning(tmp_path):
    err = refused("sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty=inf:inf:2", "--out", tmp_path / "s.csv",
                  match="--max-penalty values must be finite")
    assert "RuntimeWarning" not in err


def test_sweep_vary_users_past_the_users_cap(tmp_path):
    refused("sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.1,0.2", "--vary", "users=1e9:1e10:2",
            "--out", tmp_path / "s.csv", match="--vary users values must be ≤ 1e+09")
    assert not (tmp_path / "s.csv").exists()


# ------------------------------------------------------------------ 4. time limits


def test_tpl_budget_horizon_limit_documented():
    refused("tpl-budget", "--alpha", "1", "--horizon", "1000000", match="--horizon must be ≤ 100000")
    assert "at most 100000" in run("tpl-budget", "--help").stdout


def test_schedule_draws_limit_documented():
    refused("schedule", "--draws=99999999999999", match="--draws must be ≤ 10000")


@pytest.mark.parametrize("P", [[[0.8, 0.2], [0.1, 0.9]], [[0.999, 0.001], [0.002, 0.998]], [[0.5, 0.5], [0.5, 0.5]]])
def test_leakage_fixed_point_fill_is_bit_identical(P):
    """The recursion (13) stops evaluating L once α repeats inside a run of equal budgets; the values are the
    plain loop's, bit for bit (Cao et al. 2019, eq. 13)."""
    import numpy as np

    from policyopt.privacy.tpl_leakage import leakage
    from policyopt.privacy.tpl_loss import LossFunction, scalar_piecewise

    budgets = np.concatenate([[0.4], np.full(20000, 0.003), [0.5], np.full(500, 0.2), [0.1]])
    f = scalar_piecewise(LossFunction(np.array(P), "P"))
    plain, prev = [], 0.0
    for t, e in enumerate(budgets.tolist()):
        prev = (f(prev) if t else 0.0) + e
        plain.append(prev)
    got = leakage(np.array(P), None, budgets).bpl
    assert got.tolist() == plain


def test_publish_sparse_stream_is_fast(tmp_path):
    """Readings every 1,000 slots with S̄ = 1: 49,950 skipped rows, one transaction per gap (was ~3 ms per row)."""
    import sqlite3
    import time

    data = tmp_path / "sparse.csv"
    data.write_text("user,time,value\n" + "".join(f"{u},{t},1.5\n" for t in range(0, 50001, 1000) for u in "ab"))
    start = time.perf_counter()
    out, _ = ok_json("publish", "--A", "0", "--S-bar", "1", "--epsilon-c", "1", *PUB, "--data", data,
                     "--ledger", tmp_path / "l.db", "--out", tmp_path / "r.csv")
    assert time.perf_counter() - start < 30
    assert (out["released"], out["skipped"]) == (50, 49950)
    con = sqlite3.connect(tmp_path / "l.db")
    n, top, skipped = con.execute("SELECT count(*), max(n), sum(status = 'skipped') FROM releases").fetchone()
    con.close()
    assert n == top == 50000 and skipped == 49950
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 50001


def test_fran_max_age_1000_is_fast():
    """--max-age 1000 (10^6 AoI vectors, inside the documented 2^20 limit) took ~50 s; now a few seconds."""
    import time

    start = time.perf_counter()
    out, _ = ok_json("fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.8", "--max-age", "1000")
    assert time.perf_counter() - start < 30
    assert out["status"] in ("optimal", "unbounded") and max(out["aoi"]) <= 1000 and out["epsilon_s"] >= 0
