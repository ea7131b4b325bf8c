"""Bundled CityLearn data and estimation of users' chains (Cao et al. 2019, eq. (28))."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from policyopt.data import CITYLEARN_PATH, load_citylearn
from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.models.estimation import Quantizer, fit_population, validate_readings
from policyopt.models.markov import MarkovChain


def test_bundled_data_is_the_documented_file():
    # source: policyopt/data/PROVENANCE.md
    digest = hashlib.sha256(CITYLEARN_PATH.read_bytes()).hexdigest()
    assert digest == "3b416aca30cad2917008083579539f61346648677169dd7390c7c5e1f81e84fe"


def test_load_citylearn_tidy_table():
    df = load_citylearn()
    assert list(df.columns) == ["user", "time", "value"]
    assert df.shape == (17 * 8760, 3)
    assert sorted(df["user"].unique(), key=lambda u: int(u.split("_")[1])) == [f"Building_{i}" for i in range(1, 18)]
    b1 = df[df["user"] == "Building_1"].set_index("time")["value"]
    # source: citylearn 2.1.2, Building_1.csv, first two rows of "Equipment Electric Power [kWh]"
    assert b1.loc[0] == 2.2758
    assert b1.loc[1] == 0.8511666666666671
    assert df["time"].min() == 0 and df["time"].max() == 8759
    assert np.isfinite(df["value"]).all() and (df["value"] >= 0).all()
    assert (df["value"] == 0).sum() == 28


def test_fit_bundled_population():
    model = fit_population(load_citylearn(), 12)
    assert len(model.users) == 17 and model.excluded == {}
    assert all(n == 8759 for n in model.transitions.values())
    q = model.quantizer
    assert q.edges.shape == (11,) and np.all(np.diff(q.edges) > 0)
    assert np.all(np.diff(q.state_values) > 0)
    for chain in model.population.chains:
        np.testing.assert_allclose(chain.P.sum(axis=1), 1.0, atol=1e-12)
        assert chain.is_irreducible and chain.is_aperiodic
        np.testing.assert_array_equal(chain.state_values, q.state_values)
    # pooled quantile bins are (nearly) equally likely
    states = q.transform(load_citylearn()["value"].to_numpy())
    share = np.bincount(states, minlength=12) / states.size
    assert np.all(np.abs(share - 1 / 12) < 2e-3)


def test_estimation_recovers_a_known_chain():
    true = MarkovChain([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.2, 0.3, 0.5]], [0.0, 1.0, 2.0])
    rng = np.random.default_rng(11)  # simulation of readings
    n = 60_000
    x = np.empty(n, dtype=int)
    x[0] = 0
    cum = np.cumsum(true.P, axis=1)
    u = rng.random(n)
    for t in range(1, n):
        x[t] = np.searchsorted(cum[x[t - 1]], u[t], side="right")
    df = pd.DataFrame({"user": "u1", "time": np.arange(n), "value": true.state_values[x] + rng.uniform(-0.1, 0.1, n)})
    quant = Quantizer(edges=np.array([0.5, 1.5]), state_values=np.array([0.0, 1.0, 2.0]))
    model = fit_population(df, smoothing=0.0, quantizer=quant)
    np.testing.assert_allclose(model.population.chains[0].P, true.P, atol=0.015)
    assert model.quantizer is quant
    # with fitted quantile edges the states are equally likely bins of the pooled readings
    refit = fit_population(df, 3)
    share = np.bincount(refit.quantizer.transform(df["value"]), minlength=3) / n
    np.testing.assert_allclose(share, 1 / 3, atol=1e-4)


def test_smoothing_is_eq28_and_gaps_break_transitions():
    # readings 0,1 at times 0,1, then a gap, then 1,0 at times 5,6
    df = pd.DataFrame({"user": ["a"] * 4, "time": [0, 1, 5, 6], "value": [0.0, 1.0, 1.0, 0.0]})
    model = fit_population(df, 2, smoothing=0.5, min_transitions=1)
    assert model.transitions == {"a": 2}  # (0→1) and (5→6); not 1→5
    # counts: 0→1 once, 1→0 once; eq. (28): (n + s) / (n_row + K s)
    np.testing.assert_allclose(model.population.chains[0].P, [[0.25, 0.75], [0.75, 0.25]])


def test_user_with_too_few_transitions_is_reported_and_left_out():
    rng = np.random.default_rng(3)
    long = pd.DataFrame({"user": "long", "time": np.arange(500), "value": rng.random(500)})
    short = pd.DataFrame({"user": "short", "time": np.arange(10), "value": rng.random(10)})
    model = fit_population(pd.concat([long, short]), 4)
    assert model.users == ("long",)
    assert model.excluded == {"short": "9 transitions < 40 needed"}
    assert model.population.n_users == 1
    with pytest.raises(InvalidModelError, match="no user in `data` has at least 40 transitions"):
        fit_population(short, 4)


def test_reading_errors():
    with pytest.raises(InvalidInputError, match=r"line 3: `value` nan is not a finite number \(NaN readings are not allowed\)"):
        validate_readings(pd.DataFrame({"user": ["a", "a"], "time": [0, 1], "value": [1.0, np.nan]}))
    with pytest.raises(InvalidInputError, match=r"line 2: `time` 0.5 is not an integer slot"):
        validate_readings(pd.DataFrame({"user": ["a"], "time": [0.5], "value": [1.0]}))
    with pytest.raises(InvalidInputError, match=r"line 3: user 'a' has a second reading at time 0"):
        validate_readings(pd.DataFrame({"user": ["a", "a"], "time": [0, 0], "value": [1.0, 2.0]}))
    with pytest.raises(InvalidInputError, match=r"missing \['value'\]"):
        validate_readings(pd.DataFrame({"user": ["a"], "time": [0]}))
    with pytest.raises(InvalidInputError, match=r"unexpected columns \['extra'\]"):
        validate_readings(pd.DataFrame({"user": ["a"], "time": [0], "value": [1.0], "extra": [1]}))
    with pytest.raises(InvalidInputError, match=r"they hold only 2 distinct values; use at most 2 states"):
        Quantizer.fit([0.0] * 50 + [1.0] * 50, 4)
    with pytest.raises(InvalidInputError, match=r"one distinct value, so no states can be told apart"):
        Quantizer.fit([3.0] * 20, 2)
    with pytest.raises(InvalidInputError, match=r"`n_states` must be an integer ≥ 2, got 1"):
        Quantizer.fit([0.0, 1.0], 1)
    with pytest.raises(InvalidInputError, match=r"`smoothing` must be a finite number ≥ 0, got -1"):
        fit_population(pd.DataFrame({"user": ["a"], "time": [0], "value": [1.0]}), 2, smoothing=-1)


@pytest.mark.parametrize("zeros, edge", [(60, 0.5), (40, 1.0), (50, 0.5)])
def test_binary_readings_get_two_states_whichever_value_is_the_majority(zeros, edge):
    # source: the plain quantile edge of 0/1 readings is 0 when zeros are the majority, which put every reading in the
    # upper bin; the edges between distinct values split them (the 0.5-quantile edge 1.0 already worked and is kept)
    q = Quantizer.fit([0.0] * zeros + [1.0] * (100 - zeros), 2)
    assert q.edges.tolist() == [edge] and q.state_values.tolist() == [0.0, 1.0]
    assert np.bincount(q.transform([0.0] * zeros + [1.0] * (100 - zeros))).tolist() == [zeros, 100 - zeros]


def test_tied_readings_split_at_the_distinct_value_nearest_each_quantile():
    x = [0.0] * 70 + [1.0] * 10 + [2.0] * 10 + [3.0] * 10
    q = Quantizer.fit(x, 3)
    # cumulative shares after 0, 1, 2: 0.7, 0.8, 0.9; targets 1/3 and 2/3 → splits after 0 and after 1
    assert q.edges.tolist() == [0.5, 1.5] and q.state_values.tolist() == [0.0, 1.0, 2.5]
