"""publish --schedule / ledger for a schedule designed with ``--max-tv empirical``: the ledger accounts with the
schedule's own Δ̃(t) table (1 beyond it), repeats its ε* or horizon risk, and every ε it prints is an upper bound
on Theorem 3 (Zhang et al. 2024, eq. (25)) recomputed independently with that table in 50-digit arithmetic."""

from __future__ import annotations

import json
import sqlite3

import mpmath
import pytest

from policyopt.formatting import fmt_upper

from tests._cli import ok_json, refused, run_any, run_cli, strict_json

mpmath.mp.dps = 50
THROUGH = 120  # releases at slots 0..THROUGH (A = 0, S̄ = 1 on the bundled data)


def _schedule(tmp, name, *extra):
    res = run_cli("schedule", "--max-tv", "empirical", "--max-age", 24, "--max-interval", 24, *extra, "--json")
    path = tmp / name
    path.write_text(res.stdout, encoding="utf-8")
    return path, strict_json(res.stdout)


@pytest.fixture(scope="module")
def finite(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("emp")
    # the first-order Markov premise is refuted on the bundled homes: the design's ε* is printed only on request
    path, sched = _schedule(tmp, "s.json", "--accept-refuted", "compare the ledger's ε* with the design's")
    ledger = tmp / "l.db"
    pub = ok_json("publish", "--trial", "a pilot stream", "--schedule", path, "--ledger", ledger, "--through", THROUGH)
    text = run_cli("ledger", "--ledger", ledger).stdout
    return sched, pub, ok_json("ledger", "--ledger", ledger), text, ledger, tmp


def _table(sched):
    return [mpmath.mpf(v) for v in sched["empirical_max_tv"]["max_tv_used"]]


def _delta(table, t):
    return table[t] if t < len(table) else mpmath.mpf(1)


def _leak(d, e):
    """Theorem 1 (eq. 14): ln(1 + Δ(e^ε − 1)), exactly."""
    return mpmath.log(1 + d * mpmath.expm1(e))


def _reference(rows, table):
    """ε(S_n) and the prior risks of the releases made, Theorem 3's recursion with Δ̃ from the table."""
    peaks, prior, prev = {}, mpmath.mpf(0), None
    for r in rows:
        if r["status"] != "released":
            continue
        tau = r["input_time"]
        if prev is not None:
            prior = _leak(_delta(table, tau - prev[0]), prev[1] + prior)
        peaks[r["slot"]] = (_leak(_delta(table, r["slot"] - tau), r["epsilon_spent"] + prior), prior)
        prev = (tau, r["epsilon_spent"])
    return peaks


@pytest.mark.slow
def test_ledger_accounts_with_the_schedules_table(finite):
    sched, pub, led, text, ledger, _ = finite
    assert sched["status"] == "optimal" and sched["deployment"]["model"]["max_tv_source"] == "empirical:0.95"
    assert pub["max_tv_source"] == led["max_tv_source"] == "empirical:0.95"
    assert led["max_tv_table"] == sched["empirical_max_tv"]["max_tv_used"]
    # the table is stored in the ledger itself (meta: model), with where it came from (meta: provenance)
    con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    con.close()
    assert json.loads(meta["model"])["max_tv_table"] == sched["empirical_max_tv"]["max_tv_used"]
    assert "empirical_max_tv.max_tv_used" in json.loads(meta["provenance"])["max_tv_table_from"]
    assert "Δ(t) from empirical:0.95: the recorded table for t ≤ 47, 1 beyond" in text
    # the ledger repeats the schedule's ε* (eq. (30) with the same Δ̃(A), Δ̃(S̄)), and it bounds the exact value
    assert led["designed_status"] == "finite"
    assert led["designed_peak_risk"] == sched["peak_risk"]
    tab = _table(sched)
    A, S, ec = sched["A"], sched["S_bar"], mpmath.mpf(sched["epsilon_c"])
    exact = mpmath.log(1 + _delta(tab, A) * mpmath.expm1(ec) / (1 - _delta(tab, S) * mpmath.exp(ec)))
    assert led["designed_peak_risk"] >= exact
    assert f"ε* = {fmt_upper(sched['peak_risk'])} nats" in text
    # ... but under a refuted premise it is no bound: the headline is the model-free guarantee of the releases made
    assert led["model_verdict"]["verdict"] == "refuted" and led["guarantee"]["kind"] == "model-free"
    assert led["model_free"]["releases"] == THROUGH + 1 and led["guarantee"]["epsilon"] == led["model_free"]["epsilon"]
    designed = next(x for x in text.splitlines() if x.startswith("designed    : "))
    assert designed.endswith("— under the REFUTED model chain (the first-order Markov premise of Theorem 3; Δ(t) from "
                             "the data's band): not a bound for these data")


def test_every_printed_risk_bounds_the_recomputed_one(finite):
    sched, pub, led, text, _, _ = finite
    tab = _table(sched)
    ref = _reference(led["releases"], tab)
    assert led["released"] == THROUGH + 1 == len(ref)
    for r in pub["new_releases"]:  # what publish printed and recorded
        peak, prior = ref[r["slot"]]
        assert r["risk_at_release"] >= peak and r["prior_risk"] >= prior
    for r in led["releases"]:  # what the ledger recomputes
        assert r["risk_at_release"] >= ref[r["slot"]][0]
    assert led["peak_risk"] >= max(p for p, _ in ref.values()) and pub["peak_risk"] >= max(p for p, _ in ref.values())
    # the trajectory: ε(t) = ln(1 + Δ̃(t − τ_n)(e^{ε_n + prior_n} − 1)) inside the n-th epoch (A = 0, S̄ = 1: t = S_n)
    for t, eps in zip(led["trajectory"]["times"], led["trajectory"]["risk"]):
        assert eps >= ref[t][0]
    # upper bounds, but tight: the outward rounding moves them by far less than a printed digit
    worst = max(p for p, _ in ref.values())
    assert led["peak_risk"] - worst < 1e-9
    assert f"max ε(S_n) = {fmt_upper(led['peak_risk'])} nats" in text


def test_the_chains_are_not_used(finite):
    """Auditing under the chains needs --override, and then gives other numbers: the recorded table was used."""
    sched, _, led, _, ledger, _ = finite
    refused(run_any("ledger", "--ledger", ledger, "--states", 12, "--json"), "is not the model recorded in the ledger")
    chains = ok_json("ledger", "--ledger", ledger, "--states", 12, "--override", "compare with the chains")
    assert chains["max_tv_source"] == "chain" and chains["max_tv_table"] is None and not chains["model_is_recorded"]
    assert chains["peak_risk"] != pytest.approx(led["peak_risk"], rel=1e-3)
    assert chains["designed_peak_risk"] != pytest.approx(led["designed_peak_risk"], rel=1e-3)


@pytest.mark.slow
def test_horizon_design_is_repeated(tmp_path):
    path, sched = _schedule(tmp_path, "h.json", "--max-rmse", 0.008, "--horizon", 300)
    hd = sched["horizon_design"]
    assert sched["status"] == "infeasible" and sched["A"] is None and hd["status"] == "optimal"
    # the Markov premise is refuted, so the horizon design minimises the model-free ε over H (issue 32): its
    # horizon_risk is the pure ε of its ⌈H/S̄⌉ releases, which the ledger repeats whatever Δ(t) it accounts with
    assert hd["accounting"] == "model-free" and hd["releases"] == -(-300 // hd["S_bar"])
    ledger = tmp_path / "h.db"
    pub = ok_json("publish", "--trial", "a pilot stream", "--schedule", path, "--ledger", ledger, "--through", 50)
    led = ok_json("ledger", "--ledger", ledger)
    text = run_cli("ledger", "--ledger", ledger).stdout
    assert (pub["schedule"]["A"], pub["schedule"]["S_bar"], pub["schedule"]["epsilon_c"]) == (hd["A"], hd["S_bar"], hd["epsilon_c"])
    assert led["designed_peak_risk"] is None and led["designed_status"] == "divergent"
    assert led["designed_horizon"] == hd["horizon"] == 300 and led["designed_horizon_accounting"] == "model-free"
    assert led["schedule"]["designed_horizon_risk"] == hd["horizon_risk"]
    # the ledger's own recomputation repeats the schedule's pure ε over H (basic composition, rounded up)
    assert led["designed_horizon_risk"] == pytest.approx(hd["horizon_risk"], rel=1e-12)
    exact_pure = hd["releases"] * mpmath.mpf(hd["epsilon_c"])
    assert led["designed_horizon_risk"] >= exact_pure
    tab = _table(sched)
    A, S, ec = hd["A"], hd["S_bar"], mpmath.mpf(hd["epsilon_c"])
    prior = mpmath.mpf(0)
    for _ in range(hd["releases"] - 1):
        prior = _leak(_delta(tab, S), ec + prior)
    exact = _leak(_delta(tab, A), ec + prior)
    assert led["designed_horizon_risk"] >= exact and hd["horizon_risk"] >= exact
    assert "no finite ε* (condition (31) Δ(S̄)e^ε_C < 1 fails); designed over 300 slots" in text
    assert (f"for the model-free guarantee: pure ε ≤ {fmt_upper(led['designed_horizon_risk'])} nats for its "
            f"{hd['releases']} planned releases") in text
    assert fmt_upper(led["designed_horizon_risk"]) == fmt_upper(hd["horizon_risk"])
    # the releases made so far: their risk, each an upper bound of the recomputed one
    ref = _reference(led["releases"], tab)
    assert all(r["risk_at_release"] >= ref[r["slot"]][0] for r in led["releases"])


def test_schedule_without_its_table_is_refused(finite, tmp_path):
    sched = dict(finite[0])
    del sched["empirical_max_tv"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(sched), encoding="utf-8")
    res = run_any("publish", "--schedule", path, "--ledger", tmp_path / "x.db", "--through", 5)
    refused(res, "records no `empirical_max_tv.max_tv_used` table")
    assert not (tmp_path / "x.db").exists()

