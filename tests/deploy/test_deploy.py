"""policyopt.deploy: the ledger's accounting against an independent Theorem 3, the designed
limit (30), the noise's distribution and sampler, and the API's input checks."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from decimal import Decimal as D, getcontext

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from policyopt.deploy import Ledger, LedgerRow, ModelSpec, Publisher, RiskLimitError, ScheduleSpec
from policyopt.deploy.ledger import APPLICATION_ID, SCHEMA_VERSION
from policyopt.deploy.out_file import OUT_HEADER, render_out
from policyopt.deploy.stream import check_stream_order, read_stream_csv
from policyopt.errors import InvalidInputError
from policyopt.models.markov import two_state_chain

getcontext().prec = 50

# Two-state chain (43) with p = q: Δ(t) = |1 − p − q|^t exactly (reversible, rows differ by that factor).
P_FLIP = 0.3
CHAIN = f"two-state:p={P_FLIP},q={P_FLIP}"


def delta(t):
    return abs(1 - 2 * D(str(P_FLIP))) ** int(t)


def expm1(x):
    """e^x − 1 in decimal, accurate for tiny x too (a 50-digit exp would round e^x to 1)."""
    return x + x * x / 2 + x * x * x / 6 if abs(x) < D("1e-12") else x.exp() - 1


def log1p(x):
    """ln(1 + x) in decimal, accurate for tiny x too."""
    return x - x * x / 2 + x * x * x / 3 if abs(x) < D("1e-12") else (1 + x).ln()


def theorem3_independent(S, tau, eps, horizon):
    """ε(t) and AoI(t), t = 0..horizon, by eq. (25) written out in 50-digit decimal, recursively over the inputs.

    L_n(t) = ln(1 + Δ(t − τ_n)(exp(ε_n + L_{n−1}(τ_n)) − 1)), L_0 ≡ 0, ε(t) = L_{n(t)}(t) with n(t) the
    last release with S_n ≤ t (Zhang et al. 2024, IEEE Trans. Inf. Theory 2024, Theorem 3; the prior term is the
    leakage of queries 1..n−1 about X_{τ_n}, as in the proof's (63b)).
    """

    def L(n, t):
        if n == 0:
            return D(0)
        prior = L(n - 1, tau[n - 1])
        return log1p(delta(t - tau[n - 1]) * expm1(D(eps[n - 1]) + prior))

    risk, aoi = [], []
    for t in range(horizon + 1):
        n = sum(1 for s in S if s <= t)
        risk.append(L(n, t))
        aoi.append(None if n == 0 else t - tau[n - 1])
    return risk, aoi


def _row(sch, n, slot, tau, eps, status="released"):
    return LedgerRow(n=n, slot=slot, input_time=tau, status=status, users=3 if status == "released" else 0, clipped=0,
                     epsilon_c=eps, epsilon_spent=eps, sensitivity=None, noise_scale=None,
                     value=0.0 if status == "released" else None, prior_risk=None, risk_at_release=None, reason=None, input_sha256="",
                     schedule_id=sch.id, package_version="test", sampler="test", committed_at="now")


def test_ledger_risk_matches_independent_theorem3_irregular(tmp_path):
    # Irregular publishing times, agings (A_4 = 3 > S_4 − S_3 = 1) and budgets, with one skipped row.
    sch = ScheduleSpec(3, 2, 1.0, (0.0, 1.0), origin=0)
    S = [3, 5, 11, 12, 20]
    tau = [0, 1, 9, 9, 15]
    eps = [0.5, 1.3, 0.2, 2.0, 0.7]
    led = Ledger(tmp_path / "l.sqlite", writer=True)
    led.initialise(sch, ModelSpec(CHAIN))
    n = 1
    for k, (s, t, e) in enumerate(zip(S, tau, eps)):
        if k == 2:  # a skipped release between the 2nd and 3rd: no effect on the risk
            led.append(_row(sch, n, 8, 5, 0.0, status="skipped"))
            n += 1
        led.append(_row(sch, n, s, t, e))
        n += 1
    led.close()
    with Ledger(tmp_path / "l.sqlite") as audit:
        got = audit.risk(audit.model.load(), at=25)
    want, aoi = theorem3_independent(S, tau, eps, 25)
    assert got.times.tolist() == list(range(26))
    for t in range(26):
        assert got.risk[t] == pytest.approx(float(want[t]), rel=1e-12, abs=1e-300)
        assert D(repr(float(got.risk[t]))) >= want[t]  # an upper bound (issue 26)
        assert (np.isnan(got.aoi[t]) if aoi[t] is None else got.aoi[t] == aoi[t])
    assert got.released == 5 and got.skipped == 1
    assert got.peak_risk == pytest.approx(float(max(want[s] for s in S)), rel=1e-12)
    # `at` inside the sequence leaves later releases out
    with Ledger(tmp_path / "l.sqlite") as audit:
        part = audit.risk(audit.model.load(), at=11)
    want11, _ = theorem3_independent(S[:3], tau[:3], eps[:3], 11)
    assert part.released == 3
    np.testing.assert_allclose(part.risk, [float(x) for x in want11], rtol=1e-11)


@st.composite
def release_sequences(draw):
    """Irregular releases: strictly increasing S_n, non-decreasing inputs τ_n ≤ S_n, budgets in [0, 3] nats."""
    n = draw(st.integers(1, 6))
    S, tau, eps = [], [], []
    s, t = 0, 0
    for _ in range(n):
        s += draw(st.integers(1, 5))
        t = draw(st.integers(t, s))
        S.append(s)
        tau.append(t)
        eps.append(draw(st.floats(0.0, 3.0)))
    return S, tau, eps, S[-1] + draw(st.integers(0, 6))


@settings(max_examples=30, deadline=None)
@given(release_sequences())
@example(([1], [0], [5e-324], 2))  # found by Hypothesis: ε(2) = Δ(2)·ε ≈ 7.9e-325 underflowed to a reported 0
def test_ledger_risk_equals_independent_theorem3_property(seq):
    import tempfile

    S, tau, eps, horizon = seq
    sch = ScheduleSpec(1, 1, 1.0, (0.0, 1.0), origin=0)
    with tempfile.TemporaryDirectory() as d:
        led = Ledger(Path(d) / "l.sqlite", writer=True)
        led.initialise(sch, ModelSpec(CHAIN))
        for n, (s, t, e) in enumerate(zip(S, tau, eps), start=1):
            led.append(_row(sch, n, s, t, e))
        got = led.risk(led.model.load(), at=horizon)
        led.close()
    want, aoi = theorem3_independent(S, tau, eps, horizon)
    # the ledger reports outward-rounded upper bounds (issue 26): never below the exact value, within a rounding margin
    assert all(D(repr(float(g))) >= w for g, w in zip(got.risk, want))
    np.testing.assert_allclose(got.risk, [float(x) for x in want], rtol=1e-11, atol=1e-300)  # subnormals: one step up
    assert [None if np.isnan(a) else int(a) for a in got.aoi] == aoi


def _constant_stream(users, slots, value=1.0):
    return pd.DataFrame([(f"u{i}", t, value) for t in range(slots) for i in range(users)], columns=["user", "time", "value"])


def test_publisher_with_missing_readings_matches_theorem3(tmp_path):
    # Readings missing at some input slots: those releases are skipped, the rest use I present users.
    rng = np.random.default_rng(7)
    df = _constant_stream(4, 60)
    df["value"] = rng.uniform(-0.5, 2.5, len(df))  # some outside [0, 2]: clipped and counted
    drop = df["time"].isin([4, 10, 11, 12]) | ((df["time"] == 16) & (df["user"] != "u0"))
    df = df[~drop].reset_index(drop=True)
    sch = ScheduleSpec(2, 2, 0.8, (0.0, 2.0))
    rep = Publisher(tmp_path / "l.sqlite", sch, model=ModelSpec(CHAIN)).publish(df)
    rows = rep.new_rows
    assert [r.slot for r in rows] == list(range(2, 59, 2))  # through = 58
    skipped = [r.input_time for r in rows if r.status == "skipped"]
    assert skipped == [4, 10, 12]
    by_tau = {r.input_time: r for r in rows}
    assert by_tau[16].users == 1 and by_tau[16].sensitivity == pytest.approx(2.0, rel=1e-12)
    assert by_tau[0].users == 4 and by_tau[0].sensitivity == pytest.approx(0.5, rel=1e-12)
    assert by_tau[0].sensitivity >= 0.5  # OpenDP's float-safe bound is never below (HI − LO)/I
    clipped = {t: int(((g.value < 0) | (g.value > 2)).sum()) for t, g in df.groupby("time")}
    assert all(r.clipped == clipped[r.input_time] for r in rows if r.status == "released")
    made = [r for r in rows if r.status == "released"]
    with Ledger(tmp_path / "l.sqlite") as led:
        got = led.risk(led.model.load())
    want, _ = theorem3_independent([r.slot for r in made], [r.input_time for r in made], [r.epsilon_spent for r in made], 58)
    np.testing.assert_allclose(got.risk, [float(x) for x in want], rtol=1e-11)
    # the per-release risk recorded while publishing equals the audit
    np.testing.assert_allclose([r.risk_at_release for r in made], got.epoch_peaks, rtol=1e-12)


def test_designed_schedule_reaches_eq30(tmp_path):
    A, S_bar, eps = 2, 3, 1.0
    sch = ScheduleSpec(A, S_bar, eps, (0.0, 2.0))
    Publisher(tmp_path / "l.sqlite", sch, model=ModelSpec(CHAIN)).publish(_constant_stream(2, 200))
    with Ledger(tmp_path / "l.sqlite") as led:
        got = led.risk(led.model.load())
    # source: Zhang et al. 2024, Proposition 3, eq. (30), evaluated in 50-digit decimal
    e = D(eps)
    star = (1 + delta(A) * (e.exp() - 1) / (1 - delta(S_bar) * e.exp())).ln()
    assert got.released == 66
    assert got.designed_status == "finite"
    assert got.designed_peak_risk == pytest.approx(float(star), rel=1e-13)
    assert np.all(np.diff(got.epoch_peaks) >= -1e-15)  # increasing to the limit
    assert got.epoch_peaks[-1] == pytest.approx(float(star), rel=1e-12)  # OpenDP's ε spent is ε_C to the ulp
    assert got.epoch_peaks[0] < 0.9 * float(star)


def test_noise_is_laplace_of_the_stated_scale_ks(tmp_path):
    # A constant stream: every release is 1.0 + noise; 1500 releases, KS against Laplace(Δf/ε_C).
    sch = ScheduleSpec(0, 1, 1.0, (0.0, 2.0))
    rep = Publisher(tmp_path / "l.sqlite", sch, model=ModelSpec("two-state:p=0.45,q=0.45")).publish(_constant_stream(4, 1501))
    rows = rep.new_rows
    assert len(rows) == 1500
    scale = rows[0].noise_scale
    assert scale == pytest.approx(0.5, rel=1e-12) and all(r.noise_scale == scale for r in rows)
    noise = np.array([r.value for r in rows]) - 1.0
    assert stats.kstest(noise, "laplace", args=(0.0, scale)).pvalue > 1e-3
    # the test has power: twice the scale, or a Gaussian of the same variance, is rejected
    assert stats.kstest(noise, "laplace", args=(0.0, 2 * scale)).pvalue < 1e-6
    assert len(set(noise.tolist())) == 1500  # every draw fresh


def test_sampler_is_opendp_not_numpy(tmp_path, monkeypatch):
    import opendp.measurements as odm

    calls = []
    real = odm.then_laplace

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("numpy's Laplace sampler must not be used for a release")

    monkeypatch.setattr(odm, "then_laplace", spy)
    monkeypatch.setattr(np.random, "default_rng", forbidden)  # no numpy generator is even created
    monkeypatch.setattr(np.random, "laplace", forbidden)
    rep = Publisher(tmp_path / "l.sqlite", ScheduleSpec(0, 1, 2.0, (0.0, 1.0)), model=ModelSpec(CHAIN)).publish(
        _constant_stream(3, 11, 0.5)
    )
    assert len(rep.new_rows) == 10
    assert len(calls) == 1  # one measurement for I = 3, reused
    assert calls[0][0][0] == pytest.approx(rep.new_rows[0].noise_scale, rel=0)
    assert rep.new_rows[0].sampler.startswith("opendp ") and "make_laplace" in rep.new_rows[0].sampler
    # OpenDP's map at the replace-one distance: ≥ ε_C and equal to it up to rounding
    assert rep.new_rows[0].epsilon_spent >= 2.0 and rep.new_rows[0].epsilon_spent == pytest.approx(2.0, rel=1e-12)


def test_resume_never_redraws_and_out_is_rebuilt(tmp_path):
    sch = ScheduleSpec(1, 2, 1.0, (0.0, 2.0))
    out = tmp_path / "r.csv"
    pub = Publisher(tmp_path / "l.sqlite", sch, model=ModelSpec(CHAIN), out=out)
    df = _constant_stream(3, 40)
    first = pub.publish(df[df.time < 20])
    assert out.read_text() == render_out(first.new_rows)
    out.write_text(out.read_text()[:-15])  # a torn last line, as after a crash mid-write
    again = pub.publish(df[df.time < 20])
    assert again.new_rows == [] and again.out_rebuilt
    assert out.read_text() == render_out(first.new_rows)
    more = pub.publish(df)
    with Ledger(tmp_path / "l.sqlite") as led:
        rows = led.rows()
    assert rows[: len(first.new_rows)] == first.new_rows  # committed values never change
    assert [r.n for r in rows] == list(range(1, len(rows) + 1)) and len(rows) == len(first.new_rows) + len(more.new_rows)
    assert out.read_text() == render_out(rows)
    assert [r.slot for r in pub.publish(df, through=39).new_rows] == [39]  # the last slot declared complete
    assert pub.publish(df).new_rows == []  # default `through` (38) is behind the ledger: nothing due, no error
    with pytest.raises(InvalidInputError, match=r"the stream ends at slot 20 .* already released slot 39: time went backwards"):
        pub.publish(df[df.time <= 20])
    out.write_text(OUT_HEADER + "\n1,2,1,released,3,,,,9.0\n")  # not the ledger's
    with pytest.raises(InvalidInputError, match=r"`out` .* disagrees with the ledger at line 2"):
        pub.publish(df)


def test_max_risk_refuses_and_writes_nothing(tmp_path):
    sch = ScheduleSpec(0, 1, 1.0, (0.0, 2.0))
    path = tmp_path / "l.sqlite"
    with pytest.raises(RiskLimitError, match=r"release 3 at slot 2 would raise the peak .* > --max-risk 1.6; nothing was published "
                       r"\(2 earlier due releases stay within it: --through 1 publishes them\)"):
        Publisher(path, sch, model=ModelSpec(CHAIN), max_risk=1.6, out=tmp_path / "o.csv").publish(_constant_stream(2, 10))
    assert not path.exists() and not (tmp_path / "o.csv").exists()
    rep = Publisher(path, sch, model=ModelSpec(CHAIN), max_risk=1.6).publish(_constant_stream(2, 10), through=1)
    assert len(rep.new_rows) == 2 and rep.peak_risk <= 1.6


def test_ledger_file_identity(tmp_path):
    sch = ScheduleSpec(0, 1, 1.0, (0.0, 2.0))
    Publisher(tmp_path / "l.sqlite", sch, model=ModelSpec(CHAIN)).publish(_constant_stream(2, 5))
    con = sqlite3.connect(tmp_path / "l.sqlite")
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    stored = json.loads(con.execute("SELECT json FROM schedule").fetchone()[0])
    assert stored["A"] == 0 and stored["origin"] == 0 and stored["value_range"] == [0.0, 2.0]
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    with pytest.raises(InvalidInputError, match=rf"has ledger schema {SCHEMA_VERSION + 1}, newer than"):
        Ledger(tmp_path / "l.sqlite")


def test_api_input_errors(tmp_path):
    with pytest.raises(InvalidInputError, match=r"`A` must be an integer from 0 to 4611686018427387904 \(slots\), got 1.5"):
        ScheduleSpec(1.5, 2, 1.0, (0, 1))
    with pytest.raises(InvalidInputError, match=r"`S_bar` must be an integer from 1 to 4611686018427387904 \(slots\), got 0"):
        ScheduleSpec(1, 0, 1.0, (0, 1))
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be finite and > 0 \(nats\), got 0.0"):
        ScheduleSpec(1, 1, 0.0, (0, 1))
    with pytest.raises(InvalidInputError, match=r"`value_range` must be finite with LO < HI, got \(1, 1\)"):
        ScheduleSpec(1, 1, 1.0, (1, 1))
    with pytest.raises(InvalidInputError, match=r"`model` must be bundled, data:CSV, matrix:FILE or two-state"):
        ModelSpec("markov:3")
    with pytest.raises(InvalidInputError, match=r"`max_risk` must be finite and > 0 \(nats\), got -1"):
        Publisher(tmp_path / "l.sqlite", ScheduleSpec(1, 1, 1.0, (0, 1)), max_risk=-1)
    with pytest.raises(InvalidInputError, match=r"`readings` line 3: time goes backwards for user 'a' \(1 after 2 on line 2\)"):
        check_stream_order(pd.DataFrame({"user": ["a", "a", "b"], "time": [2, 1, 0]}), "`readings`")
    with pytest.raises(InvalidInputError, match=r"`readings` holds no reading"):
        Publisher(tmp_path / "l.sqlite", ScheduleSpec(1, 1, 1.0, (0, 1))).publish(pd.DataFrame(columns=["user", "time", "value"]))
    with pytest.raises(InvalidInputError, match=r"`through` must be a slot of the data \(0\.\.4\), got 9"):
        Publisher(tmp_path / "l.sqlite", ScheduleSpec(1, 1, 1.0, (0, 1))).publish(_constant_stream(1, 5), through=9)
    assert not (tmp_path / "l.sqlite").exists()
    bad = tmp_path / "s.csv"
    bad.write_text("user,time,value\na,0,1\na,2,1\na,1,1\n")
    with pytest.raises(InvalidInputError, match=r"--data '.*s.csv' line 4: time goes backwards for user 'a' \(1 after 2 on line 3\)"):
        read_stream_csv(bad)
    # times beyond 2^53 are read as exact integers (through float, 2^53 + 1 and 2^53 + 2 both became 2^53 + 2 and the
    # forward stream was refused as going backwards)
    big = tmp_path / "big.csv"
    big.write_text(f"user,time,value\nb,{2**53 + 3},1\na,{2**53 + 1},1\na,{2**53 + 2},2\n")
    df = read_stream_csv(big)
    assert df["user"].tolist() == ["b", "a", "a"]  # file order
    assert [int(t) for t in df["time"]] == [2**53 + 3, 2**53 + 1, 2**53 + 2]
    assert df["value"].tolist() == [1.0, 1.0, 2.0]
    sched = tmp_path / "sched.json"
    sched.write_text(json.dumps({"status": "infeasible", "A": None, "message": "f̄ below the smallest penalty"}))
    with pytest.raises(InvalidInputError, match=r"--schedule '.*sched.json' has status 'infeasible': there is no schedule to publish"):
        ScheduleSpec.from_json_file(sched, value_range=(0, 1))
    sched.write_text(json.dumps({"status": "optimal", "A": 2.5, "S_bar": 3, "epsilon_c": 1.0}))
    with pytest.raises(InvalidInputError, match=r"`A` = 2.5 is not a whole number of slots"):
        ScheduleSpec.from_json_file(sched, value_range=(0, 1))
    with pytest.raises(InvalidInputError, match=r"--ledger file not found"):
        Ledger(tmp_path / "missing.sqlite")


def test_two_state_delta_is_what_the_test_assumes():
    # the independent evaluation above relies on Δ(t) = |1 − p − q|^t for chain (43)
    chain = two_state_chain(P_FLIP, P_FLIP)
    for t in (0, 1, 5, 30):
        assert chain.max_tv(t) == pytest.approx(float(delta(t)), rel=1e-12)


def test_slot_groups_are_the_per_slot_groupby():
    """The publisher's per-slot readings (``_slot_groups``: one stable sort and slices) are pandas's
    ``groupby("time")`` arrays: the same slots, users and values in the same row order, dtypes and read-only flags."""
    from policyopt.data import load_citylearn
    from policyopt.deploy.publisher import _slot_groups
    from policyopt.models.estimation import sort_readings, validate_readings

    df = load_citylearn()
    df = df[(df["time"] < 500) & (np.random.default_rng(4).random(len(df)) < 0.6)]  # gaps, some slots without readings
    clean = sort_readings(validate_readings(df, sort=False))
    want = {int(t): (g["user"].to_numpy(), g["value"].to_numpy(dtype=float)) for t, g in clean.groupby("time")[["user", "value"]]}
    got = _slot_groups(clean)
    assert list(got) == list(want)
    for t, (users, values) in want.items():
        gu, gv = got[t]
        assert gu.dtype == users.dtype and gu.tolist() == users.tolist()
        assert gv.dtype == values.dtype and gv.tobytes() == values.tobytes()
        assert gv.flags.writeable == values.flags.writeable and gv.flags.c_contiguous
    assert _slot_groups(clean.iloc[:0]) == {}
