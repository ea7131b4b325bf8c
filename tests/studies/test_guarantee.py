"""The guarantee a schedule states first follows the evidence: model-based only under a Markov model that passed its
checks on held-out time, else model-free; every privacy upper bound printed is above the exact risk of the processes
the data were simulated from (tests/_exact_risk.py)."""

from __future__ import annotations

import math
from functools import lru_cache

import pytest

import _exact_risk as E
import _processes as P
from _cli import ok_json, run_any

#: One year of hourly slots is too long for the test suite: 20 users × 4000 slots (the full size is measured in
#: tests/benchmarks/bench_guarantee.py).
USERS, SLOTS = 20, 4000
COMMON = ("--value-range", "0:1", "--states", "2", "--max-age", "24", "--max-interval", "24", "--users", "10000",
          "--max-rmse", "0.005", "--slot-length", "1h", "--phase-period", "1",  # no daily cycle in these processes
          # the point estimate of the readings' MSE (independent users: at I = 10,000 the staleness band reaches 0, and
          # the default readings-auto would design against its upper end); these tests are about the guarantee
          "--penalty", "readings")

PROCESSES = {"first_order": lambda: P.first_order_chain(0.05, 0.1), "order2": lambda: P.order2_chain()}


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    """Simulated binary readings of each process (seed 1), written once."""
    return P.write_readings(tmp_path_factory.mktemp("guarantee"), PROCESSES, USERS, SLOTS, seed=1)


@lru_cache(maxsize=None)
def _run(path, *args):
    return ok_json("schedule", "--data", path, *COMMON, *args)


def schedule(csv, name, *args):
    """The JSON of ``schedule`` on a process's readings (each distinct command run once)."""
    return _run(str(csv[name]), *args)


def _no_violation(report, name):
    assert E.printed_bound_violations(report, PROCESSES[name](), horizon=3000) == []


def test_a_first_order_chain_keeps_its_model_based_guarantee_above_the_exact_risk(csv):
    r = schedule(csv, "first_order")
    assert r["model_check"]["passed"] is True and r["model_check"]["chosen"] == "chain"
    g = r["guarantee"]
    assert g["kind"] == "model-based" and g["epsilon"] == r["peak_risk"] and g["delta"] == 0.0 and g["model"] == "chain"
    assert r["peak_risk"] is not None and r["warnings"] == []
    exact = E.tail_risk(PROCESSES["first_order"](), r["A"], r["S_bar"], r["epsilon_c"], horizon=3000).value
    assert 0.0 < exact <= r["peak_risk"]  # Theorem 3 holds for a chain: the printed ε* bounds the exact risk
    _no_violation(r, "first_order")


def test_the_data_band_keeps_a_model_based_guarantee_only_while_the_first_order_premise_holds(csv):
    ok = schedule(csv, "first_order", "--max-tv", "empirical")
    assert ok["guarantee"]["kind"] == "model-based" and ok["peak_risk"] is not None
    _no_violation(ok, "first_order")
    bad = schedule(csv, "order2", "--max-tv", "empirical")
    assert bad["guarantee"]["kind"] == "model-free" and bad["peak_risk"] is None
    assert bad["model_check"]["markov_test"]["refuted"] is True
    _no_violation(bad, "order2")


def test_an_order_2_chain_refutes_the_chain_and_passes_as_order_2(csv):
    chain = schedule(csv, "order2")
    assert chain["model_check"]["passed"] is False and chain["model_check"]["markov_test"]["refuted"] is True
    assert chain["guarantee"]["kind"] == "model-free" and chain["peak_risk"] is None
    assert chain["benchmarks"]["no_aging"]["peak_risk"] is None  # no model-based ε* under a refuted model
    assert any("refuted by the readings" in w for w in chain["warnings"])
    _no_violation(chain, "order2")
    o2 = schedule(csv, "order2", "--markov-model", "order:2")
    assert o2["model_check"]["passed"] is True and o2["guarantee"]["kind"] == "model-based"
    assert o2["guarantee"]["model"] == "order:2" and o2["peak_risk"] is not None
    _no_violation(o2, "order2")


def test_accept_refuted_prints_the_refuted_models_risk_but_never_as_the_guarantee(csv):
    r = schedule(csv, "order2", "--accept-refuted", "comparison with last year's report")
    assert r["peak_risk"] is not None and r["guarantee"]["kind"] == "model-free"
    assert r["accepted_refuted"] == {"model": "chain", "reason": "comparison with last year's report"}
    assert any("printed on request (--accept-refuted: comparison with last year's report)" in w for w in r["warnings"])
    text = run_any("schedule", "--data", csv["order2"], *COMMON, "--accept-refuted", "comparison with last year's report")
    assert text.returncode == 0, text.stderr
    assert "under the REFUTED model chain, printed on request" in text.stdout


def test_model_free_numbers_are_the_composition_of_the_releases(csv):
    import dp_accounting
    from dp_accounting import pld
    from mpmath import mp, mpf

    r = schedule(csv, "order2")
    mf = r["model_free"]
    assert mf["horizon"] == 8760 and mf["releases"] == math.ceil(8760 / r["S_bar"]) and mf["delta"] == 1e-6
    mp.dps = 50
    exact = mpf(mf["releases"]) * mpf(mf["epsilon_c"])  # basic composition, exact
    assert mf["epsilon_pure"] >= exact and mf["epsilon_pure"] - exact < 1e-12 * exact
    acc = pld.PLDAccountant()
    acc.compose(dp_accounting.LaplaceDpEvent(1.0 / mf["epsilon_c"]), count=mf["releases"])
    direct = acc.get_epsilon(mf["delta"])  # dp_accounting's PLD on its default grid
    assert mf["epsilon"] == pytest.approx(direct, rel=2e-3) and mf["epsilon"] <= mf["epsilon_pure"]
    g = r["guarantee"]
    assert (g["epsilon"], g["delta"], g["horizon"]) == (mf["epsilon"], mf["delta"], mf["horizon"])


def test_the_bundled_homes_state_the_model_free_guarantee_and_say_why():
    r = ok_json("schedule", "--max-age", "24", "--max-interval", "24")
    mt = r["model_check"]["markov_test"]
    assert set(mt) >= {"method", "level", "lags", "statistic", "p_value", "worst_lag", "refuted"}
    assert mt["refuted"] is True and mt["lags"][0] == 1 and mt["lags"][-1] >= 168  # at least a week of hourly lags
    assert r["model_check"]["refuted"] is True and r["peak_risk"] is None
    assert r["guarantee"]["kind"] == "model-free" and r["warnings"]
    assert r["guarantee_settings"]["horizon_source"] == "a year of 1h slots"
    assert r["guarantee_settings"]["delta"] == 1e-6  # min(1e-6, 1/(10·I)) with I = 100000


def test_privacy_model_free_designs_the_model_free_optimum():
    from policyopt.data import load_citylearn
    from policyopt.problems.model_free import ModelFreeProblem
    from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments

    r = ok_json("schedule", "--max-age", "24", "--max-interval", "24", "--privacy", "model-free",
                "--max-penalty", "0.05")
    assert r["privacy"] == "model-free" and r["A"] == 0
    moments = readings_moments(load_citylearn(), 49, value_range=(0.0, 48.0), phase_period=24)
    pen = ReadingsMSEPenalty(moments, users=100_000, unit="kWh^2")
    sol = ModelFreeProblem(pen, 0.05, horizon=8760, delta=1e-6, A_max=24, S_max=24).solve()
    assert (r["A"], r["S_bar"]) == (sol.decision["A"], sol.decision["S_bar"])
    assert r["epsilon_c"] == pytest.approx(sol.decision["epsilon_c"], rel=1e-12)
    assert r["model_free"]["epsilon"] == pytest.approx(sol.objective, rel=1e-12)


def test_a_chain_given_without_data_is_an_assumption():
    r = ok_json("schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", "100", "--max-penalty", "0.0195")
    g = r["guarantee"]
    assert g["kind"] == "model-based" and g["model"] == "the given chain" and g["epsilon"] == r["peak_risk"]
    assert "an assumption nobody checked against data" in g["statement"]
    assert r["model_free"]["releases"] == math.ceil(8760 / r["S_bar"])


@pytest.mark.parametrize("args, message", [
    (("--markov-model", "order:2"), "--markov-model order:2 is fitted to readings held in memory"),
    (("--delta", "0"), "--delta must be strictly between 0 and 1"),
    (("--accept-refuted", " "), "`accept_refuted` must give a reason"),
])
def test_bad_guarantee_options_are_refused_in_one_line(args, message):
    res = run_any("schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", "100", "--max-penalty", "0.0195", *args)
    assert res.returncode == 2 and message in res.stderr and res.stderr.count("\n") == 1
