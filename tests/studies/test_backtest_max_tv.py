"""The backtest's held-out Δ(t) comparison (``max_tv_comparison``): a Monte Carlo test against the training chains
for a chains' design, the band rule for a design against the data's upper band.

The rule it replaced (a lag exceeds when the held-out band's lower end lies above the design's Δ) compared a biased
statistic (the max over users of plug-in TVs) with the training chains' Δ: on 17 users × 2,000 slots of 3-state
first-order chains, the same chains in both halves, it claimed "the held-out data depend on the past more than the
design assumed" in 29 of 200 data sets at level 0.95 (14.5 %); the Monte Carlo test in 14 of 200 (7.0 %, 95 %
Clopper–Pearson 3.9–11.5 %), and caught 78 of 200 held-out halves whose chains are 30 % stickier
(``tests/benchmarks/bench_backtest_max_tv.py``).
"""

from __future__ import annotations

import pytest

from policyopt.io.schedule_design import BAND_SOURCE
from policyopt.models.estimation import fit_population
from policyopt.studies.backtest import max_tv_comparison, max_tv_comparison_text

from _markov_data import user_chains_readings as _chains_data


def _compare(df, design=None, lags=(1,)):
    train, held = df[df.time < 1000], df[df.time >= 1000]
    fitted = fit_population(train, 3, smoothing=0.01, value_range=(0, 2), source="training readings")
    return max_tv_comparison(train, held, fitted, design or {"source": None, "values": {}}, list(lags), level=0.95,
                             seed=0), fitted


def test_same_chains_in_both_halves_are_not_claimed_to_exceed():
    """Seed 21: the band's lower end (0.927) lies above the training chains' Δ(1) (0.917), which the old rule called
    an exceedance; the held-out Δ̂(1) is below the 95 % quantile of data sets from the training chains (p = 0.125)."""
    c, fitted = _compare(_chains_data(21))
    assert c["rule"] == "monte-carlo" and c["draws"] == 39
    assert c["design_max_tv"][0] == pytest.approx(float(fitted.population.max_tv(1)), rel=1e-12)
    assert c["held_out_lower"][0] > c["design_max_tv"][0]  # what the old rule took for evidence
    assert c["held_out_max_tv"][0] < c["critical"][0] and c["p_value"] == pytest.approx(5 / 40)
    assert c["exceeds"] == [False] and c["holds"] is True
    assert max_tv_comparison_text(c).endswith("— not refuted (Monte Carlo p = 0.125), not confirmed")


def test_a_stickier_held_out_half_exceeds():
    """The same data set with the held-out half's chains halfway to the identity: Δ̂(1) above every simulated set."""
    c, _ = _compare(_chains_data(21, stickier=0.5), lags=(1, 2))
    assert c["lags"] == [1, 2] and c["p_value"] == pytest.approx(1 / 40)  # the smallest p of 39 draws
    assert all(e > cr > d for e, cr, d in zip(c["held_out_max_tv"], c["critical"], c["design_max_tv"]))
    assert c["exceeds"] == [True, True] and c["holds"] is False
    assert "family-wise over lags 1–2 by max-T" in c["method"]  # max_tv_check_result named the schedule's lags
    text = max_tv_comparison_text(c)
    assert "95% of data from the training chains ≤ " in text
    assert text.endswith("the held-out data depend on the past more than the design assumed (Monte Carlo p = 0.025): "
                         "its ε* is no bound for them")


def test_a_design_against_the_data_band_keeps_the_band_rule():
    """A design against the data's upper band: the held-out band's lower end against Δ̃(t); no Monte Carlo test."""
    df = _chains_data(21, stickier=0.5)
    c, _ = _compare(df, {"source": BAND_SOURCE, "values": {1: 0.99}})
    assert c["rule"] == "band" and c["p_value"] is None and c["critical"] is None and c["draws"] is None
    assert c["design_max_tv"] == [0.99] and c["held_out_lower"][0] < 0.99 and c["holds"] is True
    c, _ = _compare(df, {"source": BAND_SOURCE, "values": {1: 0.5}})
    assert c["exceeds"] == [True] and c["held_out_lower"][0] > 0.5
    assert "held-out band's lower end lies above the design's upper band" in c["method"]


def test_the_check_names_the_lags_it_was_given():
    """``max_tv_check_result`` on columns that are not lags 1..L (a schedule's A and S̄): the worst lag is one of them."""
    import numpy as np

    from policyopt.errors import InvalidInputError
    from policyopt.studies.markov_check import max_tv_check_result

    sims = np.tile([0.2, 0.1], (39, 1)) + np.linspace(0, 0.01, 39)[:, None]
    r = max_tv_check_result(np.array([0.15, 0.5]), sims, level=0.95, min_pairs=100, model_name="chain", lags=[1, 49])
    assert r["worst_lag"] == 49 and r["max_lag"] == 49 and r["refuted"] and r["p_value"] == pytest.approx(1 / 40)
    assert "family-wise over lags 1, 49 by max-T" in r["method"]
    assert max_tv_check_result(np.array([0.15, 0.5]), sims, level=0.95, min_pairs=100, model_name="chain")["worst_lag"] == 2
    with pytest.raises(InvalidInputError, match="names 3 lags for 2 columns"):
        max_tv_check_result(np.array([0.15, 0.5]), sims, level=0.95, min_pairs=100, model_name="chain", lags=[1, 2, 3])
