"""Property-based CLI tests of issue 26: each class of its bad or extreme inputs is *generated* (Hypothesis), not only
listed, and the installed ``policyopt`` holds the contract of :mod:`test_fuzz` (exit 0 with strict JSON, or exit 2
with one line; never exit 1, a traceback or a hang).  Few derandomized examples per class keep the file fast.

Classes: large ε and subnormal inputs of ``tpl`` / ``discounted``; extreme ``publish`` numbers (ε_C, value range,
first slot, aging, a schedule JSON with mutated fields); ``ledger --at`` far away; corrupted ledger rows (random
bytes, NULL, text into numbers, a mutated schedule record or schema version); ``sweep`` grids with non-finite ends or
past the caps; sparse streams; and the privacy numbers of a generated ledger against 50-digit mpmath.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import mpmath as mp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _cli import strict_json
from tests.cli.test_fuzz import contract_violation, run_program

FEW = settings(max_examples=4, deadline=None, derandomize=True, database=None,
               suppress_health_check=list(HealthCheck))
EXTREME = st.sampled_from(["5e-324", "1e-320", "1e-300", "1e-12", "0.5", "700", "701", "1e29", "1e308", "inf", "nan"])
BIG_INT = st.sampled_from([str(2**62), str(2**62 + 1), str(10**17), "99999999999999999999999999", "1e17"])
STREAM = "user,time,value\n" + "".join(f"{u},{t},{1.0 + (t % 3)}\n" for t in range(21) for u in "ab")
MODEL = ["--model", "two-state:p=0.1,q=0.1"]


def check(argv, cwd):
    proc = run_program([str(a) for a in argv], cwd, timeout=120)
    verdict = contract_violation([str(a) for a in argv], proc)
    assert verdict is None, f"policyopt {' '.join(map(str, argv))}: {verdict}"
    return proc


@FEW
@given(eps=st.floats(300, 5000), horizon=st.integers(1, 60), row=st.sampled_from(
    ["0.8,0.2;0.1,0.9", "0.99999999999999,1e-14;1e-320,1", "1,0;5e-324,1", "0.5,0.5;0.5,0.5"]))
def test_tpl_large_epsilon_and_subnormal_rows(eps, horizon, row):
    with tempfile.TemporaryDirectory() as d:
        check(["tpl", "--pb", row, "--epsilon", repr(eps), "--horizon", horizon, "--json"], d)


@FEW
@given(beta=st.sampled_from(["5e-324", "1e-320", "1e-300", "1e-20"]), eps=st.sampled_from(["1e-300", "1", "700"]))
def test_discounted_tiny_beta(beta, eps):
    with tempfile.TemporaryDirectory() as d:
        check(["discounted", "--notion", "hyperbolic", "--beta", beta, "--epsilon", eps, "--horizon", "10", "--json"], d)


@FEW
@given(eps=EXTREME, lo=st.sampled_from(["0", "-1e308", "-1e300", "1e-300"]), hi=st.sampled_from(["4", "1e300", "1e308"]),
       start=st.one_of(st.none(), BIG_INT), aging=st.sampled_from(["0", "3", str(2**62), "1" + "0" * 30]))
def test_publish_extreme_numbers(eps, lo, hi, start, aging):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "s.csv").write_text(STREAM)
        argv = ["publish", "--A", aging, "--S-bar", "2", f"--epsilon-c={eps}", f"--value-range={lo}:{hi}",
                "--data", "s.csv", "--ledger", "l.db", *MODEL, "--json"]
        check(argv + ([] if start is None else ["--start", start]), d)


SCHEDULE_MUTATIONS = st.sampled_from([
    ("model", None), ("model", []), ("model", "x"), ("S_bar", 10**30), ("S_bar", 1e308), ("A", -1), ("A", 2.5),
    ("epsilon_c", 1e-320), ("epsilon_c", 1e29), ("status", None), ("epsilon_c", "1"), ("S_bar", True)])


@FEW
@given(mutations=st.lists(SCHEDULE_MUTATIONS, min_size=1, max_size=3), nested=st.booleans())
def test_publish_mutated_schedule_json(mutations, nested):
    base = {"status": "optimal", "A": 0, "S_bar": 2, "epsilon_c": 0.5, "peak_risk": 1.0,
            "model": {"source": "bundled", "states": 12, "sensitivity": 0.1}}
    with tempfile.TemporaryDirectory() as d:
        Path(d, "s.csv").write_text(STREAM)
        doc = dict(base, **dict(mutations))
        text = json.dumps(doc)
        if nested:
            text = text[:-1] + ', "deep": ' + "[" * 50000 + "]" * 50000 + "}"
        Path(d, "sch.json").write_text(text)
        check(["publish", "--schedule", "sch.json", "--value-range", "0:4", "--data", "s.csv", "--ledger", "l.db",
               *MODEL, "--json"], d)


@pytest.fixture(scope="module")
def good_ledger(tmp_path_factory):
    d = tmp_path_factory.mktemp("led")
    (d / "s.csv").write_text(STREAM)
    proc = run_program(["publish", "--A", "0", "--S-bar", "2", "--epsilon-c", "1", "--value-range", "0:4", "--data",
                        "s.csv", "--ledger", "ok.db", *MODEL], d)
    assert proc.returncode == 0, proc.stderr
    return d / "ok.db"


CORRUPTIONS = st.sampled_from([
    "UPDATE schedule SET json = {v}", "UPDATE meta SET value = {v} WHERE key = 'schema_version'",
    "UPDATE meta SET value = {v} WHERE key = 'model'", "UPDATE meta SET value = {v} WHERE key = 'created_at'",
    "UPDATE releases SET value = {v} WHERE n = 2", "UPDATE releases SET reason = {v} WHERE n = 1",
    "UPDATE releases SET status = {v} WHERE n = 3", "UPDATE releases SET epsilon_spent = {v} WHERE n = 1",
    "UPDATE releases SET sampler = {v} WHERE n = 4", "UPDATE releases SET risk_at_release = {v} WHERE n = 5"])
VALUES = st.sampled_from(["NULL", "randomblob(64)", "CAST(randomblob(64) AS TEXT)", "'{}'", "'99'", "'[[[1]]]'",
                          "'abc'", "1e308", "-1", "'{\"A\": 0}'"])


@pytest.mark.slow
@FEW
@given(sql=CORRUPTIONS, value=VALUES, at=st.one_of(st.none(), BIG_INT))
def test_corrupted_ledger_and_far_at(good_ledger, sql, value, at):
    with tempfile.TemporaryDirectory() as d:
        db = Path(d, "c.db")
        db.write_bytes(good_ledger.read_bytes())
        con = sqlite3.connect(db)
        try:
            con.execute(sql.format(v=value))
            con.commit()
        except sqlite3.IntegrityError:  # a CHECK constraint refused the value: the ledger stays valid
            pass
        con.close()
        check(["ledger", "--ledger", "c.db", "--json"] + ([] if at is None else ["--at", at]), d)
        Path(d, "s.csv").write_text(STREAM)
        check(["publish", "--A", "0", "--S-bar", "2", "--epsilon-c", "1", "--value-range", "0:4", "--data", "s.csv",
               "--ledger", "c.db", *MODEL, "--json"], d)


@FEW
@given(grid=st.sampled_from(["inf:inf:2", "-inf:1:3", "nan:1:2", "0.1:inf:2", "1e308:1e308:1", "0.1,inf"]),
       vary=st.sampled_from([None, "users=1e9:1e10:2", "users=1:1e12:3", "users=999999999,1000000001", "states=2:1000:2"]))
def test_sweep_grids(grid, vary):
    with tempfile.TemporaryDirectory() as d:
        argv = ["sweep", "--chain", "two-state:p=0.1,q=0.1", f"--max-penalty={grid}", "--out", "s.csv", "--json"]
        check(argv + ([] if vary is None else ["--vary", vary]), d)


@pytest.mark.slow
@FEW
@given(gap=st.integers(50, 2000), S_bar=st.integers(1, 3))
def test_publish_sparse_streams(gap, S_bar):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "s.csv").write_text("user,time,value\n" + "".join(f"{u},{t},1.5\n" for t in range(0, 10 * gap + 1, gap)
                                                                 for u in "ab"))
        proc = check(["publish", "--A", "0", "--S-bar", S_bar, "--epsilon-c", "1", "--value-range", "0:4", "--data",
                      "s.csv", "--ledger", "l.db", *MODEL, "--json"], d)
        assert proc.returncode == 0


@pytest.mark.slow
@settings(max_examples=3, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(eps=st.floats(0.05, 30.0), k=st.integers(4, 40), A=st.integers(0, 2), S_bar=st.integers(1, 3))
def test_generated_ledger_not_below_exact(eps, k, A, S_bar):
    """Privacy numbers: every risk of `ledger --json` ≥ Theorem 3's recursion in 50-digit mpmath (Δ(t) = ρ^t)."""
    from tests.privacy.test_rounding_audit import _exact_recursion

    p, q = 0.5, 0.5 - 2.0**-k  # ρ = 2^-k: condition (31) holds for ε_C up to k ln 2
    with tempfile.TemporaryDirectory() as d:
        Path(d, "s.csv").write_text(STREAM)
        model = ["--model", f"two-state:p={p!r},q={q!r}"]
        check(["publish", "--A", A, "--S-bar", S_bar, "--epsilon-c", repr(eps), "--value-range", "0:4", "--data", "s.csv",
               "--ledger", "l.db", *model], d)
        out = strict_json(check(["ledger", "--ledger", "l.db", "--json"], d).stdout.decode())
    releases = [r for r in out["releases"] if r["status"] == "released"]
    _, traj = _exact_recursion(releases, p, q, out["trajectory"]["times"])
    assert all(mp.mpf(v) >= e for v, e in zip(out["trajectory"]["risk"], traj))
