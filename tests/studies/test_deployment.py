"""Designing a deployment from pilot data (issue 11): deployment MSE, public value range with clipping,
estimation uncertainty (sparse rows, Dirichlet posterior check, simultaneous Δ(t) band), the trade-off range.

Source of the formulas: Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf.
Theory, 2024: Δ(t) eq. (12), peak risk (30) under (31), problem (28), MSE penalty (48)–(49).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.models.estimation import Quantizer, fit_population
from policyopt.models.markov import MarkovChain, Population
from policyopt.models.posterior import posterior_log_max_tv, simultaneous_upper_band
from policyopt.models.tabulated import TabulatedMaxTV
from policyopt.problems import ScheduleProblem
from policyopt.studies.deployment import credible_peak_risk, explain, sparse_row_warnings, tradeoff_range
from policyopt.studies.schedule import design_schedule
from policyopt.utility.penalty import MSEPenalty

P1 = [[0.7, 0.2, 0.1], [0.3, 0.5, 0.2], [0.2, 0.3, 0.5]]
P2 = [[0.9, 0.1, 0.0], [0.05, 0.9, 0.05], [0.0, 0.2, 0.8]]
VALUES = [0.2, 1.0, 3.0]


def pilot():
    return Population([MarkovChain(P1, VALUES), MarkovChain(P2, VALUES)])


def simulate_readings(P, values, n, rng, user="u"):
    """One user's stationary chain path of n readings (simulation only)."""
    chain = MarkovChain(P, values)
    P = np.asarray(P, dtype=float)
    x = rng.choice(len(values), p=chain.stationary)
    states = np.empty(n, dtype=int)
    cum = np.cumsum(P, axis=1)
    u = rng.random(n)
    for i in range(n):
        states[i] = x
        x = min(int(np.searchsorted(cum[x], u[i], side="right")), len(values) - 1)
    return pd.DataFrame({"user": user, "time": np.arange(n), "value": np.asarray(values)[states]})


# ---------------------------------------------------------------- deployment MSE


def test_deployment_mse_matches_monte_carlo_of_I_users():
    """f(t, ε) of the deployment against a simulation of I = 300 users, 150 on each pilot chain."""
    pop = pilot()
    I, t, eps, lo, hi = 300, 3, 0.8, 0.0, 4.0
    pen = MSEPenalty(pop, users=I, value_range=(lo, hi))
    rng = np.random.default_rng(20261124)  # simulation only
    n_rep = 20_000
    err = np.zeros(n_rep)
    for chain in pop.chains:
        k = I // 2
        Pt = np.linalg.matrix_power(chain.P, t)
        old = rng.choice(3, p=chain.stationary, size=(n_rep, k))  # x_{−t}, stationary
        cum = np.cumsum(Pt, axis=1)
        new = np.minimum((rng.random((n_rep, k))[..., None] > cum[old]).sum(axis=-1), 2)  # x_0 ~ P^t(x_{−t}, ·)
        v = chain.state_values
        err += (v[old] - v[new]).sum(axis=1) / I
    err += rng.laplace(scale=(hi - lo) / I / eps, size=n_rep)  # the mechanism's noise (simulated)
    sq = err**2
    mean, half = sq.mean(), 4.0 * sq.std(ddof=1) / math.sqrt(n_rep)
    assert abs(float(pen.value(t, eps)) - mean) < half, (float(pen.value(t, eps)), mean, half)
    # and the formula's parts: staleness (1/I)·avg_i E_i[(x_t − x_0)²], noise 2(Δf/ε)², Δf = (HI − LO)/I
    by_hand = 0.0
    for chain in pop.chains:
        W = (chain.state_values[:, None] - chain.state_values[None, :]) ** 2
        by_hand += 0.5 * float(chain.stationary @ (np.linalg.matrix_power(chain.P, t) * W).sum(axis=1))
    assert pen.staleness(t) == pytest.approx(by_hand / I, rel=1e-12)
    assert pen.sensitivity == (hi - lo) / I
    assert pen.noise_variance(eps) == pytest.approx(2 * ((hi - lo) / I / eps) ** 2, rel=1e-15)


def test_without_users_the_deployment_is_the_pilot():
    pop = pilot()
    a, b = MSEPenalty(pop), MSEPenalty(pop, users=2)
    ts = np.arange(20)
    np.testing.assert_allclose(a.value(ts, 0.5), b.value(ts, 0.5), rtol=1e-15)
    assert a.sensitivity == (3.0 - 0.2) / 2 and not a.value_range_declared
    # more users: staleness × n/I, noise × (n/I)²
    c = MSEPenalty(pop, users=2000)
    np.testing.assert_allclose(c.staleness(ts), a.staleness(ts) * 2 / 2000, rtol=1e-12)
    assert c.noise_variance(1.0) == pytest.approx(a.noise_variance(1.0) * (2 / 2000) ** 2, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"users": 0}, InvalidInputError, r"`users` \(deployment size I\) must be an integer ≥ 1, got 0"),
        ({"users": 2.5}, InvalidInputError, r"`users` \(deployment size I\) must be an integer ≥ 1, got 2.5"),
        ({"value_range": (1.0, 2.0)}, InvalidInputError, r"does not contain the state values \[0.2, 3.0\]"),
        ({"value_range": (3.0, 1.0)}, InvalidInputError, r"`value_range` must be finite numbers with LO < HI, got \(3.0, 1.0\)"),
        ({"value_range": "ab"}, InvalidInputError, r"`value_range` must be a pair \(LO, HI\) of numbers, got 'ab'"),
    ],
)
def test_mse_penalty_bad_deployment(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        MSEPenalty(pilot(), **kwargs)


def test_exact_optimum_with_a_deployment_equals_brute_force():
    """Problem (28) with I = 5000 users on two pilot chains: the exact solver against an independent enumeration."""
    pop = pilot()
    I, (lo, hi), A_max, S_max = 5000, (0.0, 4.0), 8, 8
    pen = MSEPenalty(pop, users=I, value_range=(lo, hi))
    f_bar = 0.97 * pen.staleness_limit
    sol = ScheduleProblem(pop, pen, f_bar, A_max=A_max, S_max=S_max).solve("exact")

    def max_tv(t):  # eq. (12) by matrix powers of the reversed chains
        out = 0.0
        for c in pop.chains:
            R = np.linalg.matrix_power(c.reversed_matrix, t)
            out = max(out, max(0.5 * np.abs(R[x] - R[y]).sum() for x in range(3) for y in range(3)))
        return out

    def stale(t):
        acc = 0.0
        for c in pop.chains:
            W = (c.state_values[:, None] - c.state_values[None, :]) ** 2
            acc += 0.5 * float(c.stationary @ (np.linalg.matrix_power(c.P, t) * W).sum(axis=1))
        return acc / I

    best = (math.inf, None)
    for A in range(A_max + 1):
        for S in range(1, S_max + 1):
            room = f_bar - max(stale(a) for a in range(A, A + S))
            if room <= 0:
                continue
            eps = (hi - lo) / I * math.sqrt(2.0 / room)
            dS, dA = max_tv(S), max_tv(A)
            if dS * math.exp(eps) >= 1:
                continue
            risk = math.log1p(dA * math.expm1(eps) / (1 - dS * math.exp(eps)))  # eq. (30)
            if risk < best[0] - 1e-12:
                best = (risk, (A, S))
    assert sol.status.value == "optimal"
    assert (sol.decision["A"], sol.decision["S_bar"]) == best[1]
    assert sol.objective == pytest.approx(best[0], rel=1e-9)


# ---------------------------------------------------------------- value range and clipping


def test_clipping_equals_clipping_by_hand():
    rng = np.random.default_rng(7)
    frames = [simulate_readings(P1, VALUES, 600, rng, "a"), simulate_readings(P2, VALUES, 600, rng, "b")]
    df = pd.concat(frames, ignore_index=True)
    df.loc[::17, "value"] = 9.5  # readings above the public range
    df.loc[5::23, "value"] = -2.0  # and below it
    lo, hi = 0.0, 4.0
    clipped = fit_population(df, 3, value_range=(lo, hi))
    by_hand = df.assign(value=df["value"].clip(lo, hi))
    ref = fit_population(by_hand, 3)
    np.testing.assert_array_equal(clipped.quantizer.edges, ref.quantizer.edges)
    np.testing.assert_array_equal(clipped.quantizer.state_values, ref.quantizer.state_values)
    for u in ref.users:
        np.testing.assert_array_equal(clipped.counts[u], ref.counts[u])
    assert clipped.clipped == int(((df["value"] < lo) | (df["value"] > hi)).sum()) > 0
    assert clipped.value_range == (lo, hi) and ref.value_range is None
    # the clipped values changed the estimate (otherwise the test would prove nothing)
    assert not np.array_equal(fit_population(df, 3).quantizer.state_values, ref.quantizer.state_values)
    pen = MSEPenalty(clipped.population, users=10_000, value_range=(lo, hi))
    assert pen.sensitivity == (hi - lo) / 10_000 and pen.value_range_declared


def test_fit_population_bad_value_range():
    df = simulate_readings(P1, VALUES, 100, np.random.default_rng(1))
    with pytest.raises(InvalidInputError, match=r"`value_range` must be finite numbers with LO < HI, got \(2, 2\)"):
        fit_population(df, 3, value_range=(2, 2))


# ---------------------------------------------------------------- sparse rows and the posterior


QUANT = Quantizer(edges=np.array([0.6, 2.0]), state_values=np.array(VALUES))


def sparse_pilot(rng):
    """Two users: one well observed; one whose state 2 is left only a handful of times."""
    a = simulate_readings(P1, VALUES, 4000, rng, "dense")
    b = simulate_readings([[0.8, 0.2, 0.0], [0.2, 0.7992, 0.0008], [0.0, 0.5, 0.5]], VALUES, 4000, rng, "sparse")
    return pd.concat([a, b], ignore_index=True)


def test_sparse_states_and_row_transitions():
    fitted = fit_population(sparse_pilot(np.random.default_rng(3)), 3, quantizer=QUANT)
    rows = fitted.row_transitions()
    assert set(rows) == {"dense", "sparse"}
    for u in fitted.users:
        assert rows[u].sum() == fitted.transitions[u] and rows[u].tolist() == fitted.counts[u].sum(axis=1).tolist()
    sp = fitted.sparse_states(30)
    assert sp and all(s["user"] == "sparse" and s["transitions"] < 30 for s in sp)
    assert fitted.sparse_states(1) == [s for s in sp if s["transitions"] < 1]
    with pytest.raises(InvalidInputError, match=r"`min_row_transitions` must be an integer ≥ 1, got 0"):
        fitted.sparse_states(0)


def test_posterior_check_many_observations_is_close_to_the_point_estimate():
    rng = np.random.default_rng(11)
    df = pd.concat([simulate_readings(P1, VALUES, 200_000, rng, "a"), simulate_readings(P2, VALUES, 200_000, rng, "b")])
    fitted = fit_population(df, 3, quantizer=QUANT)
    cred = credible_peak_risk(fitted, 2, 8, 0.5, level=0.95, draws=100, rng=np.random.default_rng(0))
    assert cred["condition_31_fails"] == 0.0
    assert cred["point"] <= cred["upper"] <= 1.05 * cred["point"]
    assert abs(cred["median"] - cred["point"]) <= 0.03 * cred["point"]
    assert "not a proof" in cred["note"]


def test_posterior_check_sparse_row_is_far_above_the_point_estimate():
    fitted = fit_population(sparse_pilot(np.random.default_rng(3)), 3, quantizer=QUANT)
    A, S = 2, 6
    cred = credible_peak_risk(fitted, A, S, 0.3, level=0.95, draws=100, rng=np.random.default_rng(0))
    assert cred["upper"] is None or cred["upper"] >= 2 * cred["point"], cred
    assert cred["condition_31_fails"] > 0.05  # some plausible chains never forget state 2 fast enough
    # the point estimate's never-left row is uniform pseudo-count (fast mixing): it does not set Δ̂, so no witness warning
    wit, warn = sparse_row_warnings(fitted, {"A": A, "S_bar": S}, 30)
    assert all(2 not in w["states"] or w["user"] != "sparse" for w in wit) and warn == []


def test_warning_when_a_sparse_row_sets_max_tv():
    """A sticky state left only ~20 times sets Δ(t) of the point estimate: the report warns."""
    rng = np.random.default_rng(4)
    a = simulate_readings(P1, VALUES, 4000, rng, "dense")
    b = simulate_readings([[0.8, 0.2], [0.2, 0.8]], VALUES[:2], 4000, rng, "sticky")
    b.loc[2000:2019, "value"] = VALUES[2]  # one 20-slot stay in state 2: 20 transitions out of it, 19 to itself
    fitted = fit_population(pd.concat([a, b], ignore_index=True), 3, quantizer=QUANT)
    n2 = int(fitted.row_transitions()["sticky"][2])
    assert 0 < n2 < 30
    wit, warn = sparse_row_warnings(fitted, {"A": 1, "S_bar": 5}, 30)
    assert [w["user"] for w in wit] == ["sticky", "sticky"] and all(2 in w["states"] for w in wit)
    assert wit[1]["max_tv"] == pytest.approx(float(fitted.population.max_tv(5)), rel=1e-9)
    assert len(warn) == 2 and f"state 2 ({n2} observed transitions), fewer than 30" in warn[1]
    assert warn[1].startswith("Δ(5) at S̄ = 5 is set by user sticky")


def test_credible_bad_arguments():
    fitted = fit_population(simulate_readings(P1, VALUES, 500, np.random.default_rng(1)), 3, quantizer=QUANT)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidInputError, match=r"`level` must be a probability strictly between 0 and 1, got 1.5"):
        credible_peak_risk(fitted, 0, 2, 0.5, level=1.5, rng=rng)
    with pytest.raises(InvalidInputError, match=r"`draws` must be an integer ≥ 2, got 1"):
        credible_peak_risk(fitted, 0, 2, 0.5, draws=1, rng=rng)
    with pytest.raises(InvalidInputError, match=r"`rng` must be a numpy.random.Generator, got 3"):
        credible_peak_risk(fitted, 0, 2, 0.5, draws=5, rng=3)
    no_prior = fit_population(simulate_readings(P1, VALUES, 500, np.random.default_rng(1)), 3, smoothing=0.0, quantizer=QUANT)
    with pytest.raises(InvalidInputError, match=r"needs a positive smoothing pseudo-count"):
        credible_peak_risk(no_prior, 0, 2, 0.5, draws=5, rng=rng)


def test_simultaneous_band_covers_the_draws_and_is_non_increasing():
    fitted = fit_population(sparse_pilot(np.random.default_rng(3)), 3, quantizer=QUANT)
    ts = np.arange(31)
    logs = posterior_log_max_tv(fitted, ts, 60, np.random.default_rng(2))
    point = np.asarray(fitted.population.log_max_tv(ts))
    band, info = simultaneous_upper_band(logs, 0.9, point)
    inside = np.all(logs <= band[None, :] + 1e-12, axis=1)
    assert inside.mean() == info["coverage"] >= 0.9
    assert np.all(np.diff(band) <= 0) and np.all(band >= point) and np.all(band <= 0)
    # used as a Δ(t) source, the robust design's ε* is at least the point design's
    src = TabulatedMaxTV(band, fitted.population.n_users, fitted.population.spectral_rate)
    pen = MSEPenalty(fitted.population, users=50_000, value_range=(0.0, 4.0))
    f_bar = 0.98 * pen.staleness_limit
    robust = ScheduleProblem(src, pen, f_bar, A_max=14, S_max=14).solve("exact")
    plain = ScheduleProblem(fitted.population, pen, f_bar, A_max=14, S_max=14).solve("exact")
    assert plain.objective is not None
    assert robust.objective is None or robust.objective >= plain.objective
    with pytest.raises(InvalidModelError, match=r"non-increasing table"):
        TabulatedMaxTV([0.0, -1.0, -0.5], 2, 0.5)


# ---------------------------------------------------------------- the trade-off range


def _status(pop, pen, f_bar, box=40):
    return ScheduleProblem(pop, pen, f_bar, A_max=box, S_max=box).solve("exact").status.value


def test_tradeoff_range_brackets_the_status_changes():
    pop = pilot()
    pen = MSEPenalty(pop, users=2000, value_range=(0.0, 4.0))
    low, high = tradeoff_range(ScheduleProblem(pop, pen, 1.0, A_max=40, S_max=40))
    assert high == pytest.approx(pen.staleness_limit, rel=1e-15) and 0 < low < high
    assert _status(pop, pen, low * (1 - 1e-6)) == "infeasible"
    assert _status(pop, pen, low * (1 + 1e-6)) == "optimal"
    # bisect the status changes: infeasible → optimal exactly at `low`
    a, b = low * 0.5, 0.5 * (low + high)
    for _ in range(40):
        mid = 0.5 * (a + b)
        a, b = (mid, b) if _status(pop, pen, mid) == "infeasible" else (a, mid)
    assert b == pytest.approx(low, rel=1e-9)
    # optimal → unbounded at `high` (the staleness limit), to within 0.1% in a 40-slot box
    a, b = 0.5 * (low + high), high * 1.5
    assert _status(pop, pen, a) == "optimal" and _status(pop, pen, b) == "unbounded"
    for _ in range(30):
        mid = 0.5 * (a + b)
        a, b = (mid, b) if _status(pop, pen, mid) == "optimal" else (a, mid)
    assert abs(b / high - 1) < 1e-3
    # below `high` the optimum does not move when the box grows; above it ε* keeps falling towards 0
    inside = [ScheduleProblem(pop, pen, high * 0.999, A_max=n, S_max=n).solve("exact") for n in (40, 160)]
    # same (A, S̄); ε_C and ε* agree to the certification margin of ε_C, which grows with the tabulated ages
    # (MSEPenalty.min_epsilon_c subtracts a rounding-error bound proportional to the table size)
    d0, d1 = inside[0].decision, inside[1].decision
    assert (d0["A"], d0["S_bar"]) == (d1["A"], d1["S_bar"])
    assert d0["epsilon_c"] == pytest.approx(d1["epsilon_c"], rel=1e-10)
    assert inside[0].objective == pytest.approx(inside[1].objective, rel=1e-10)
    above = [ScheduleProblem(pop, pen, high * 1.01, A_max=n, S_max=n).solve("exact").objective for n in (20, 40, 80, 160)]
    assert all(x > y for x, y in zip(above, above[1:])) and above[-1] < 1e-8


def test_explanations_use_the_numbers():
    pop = pilot()
    pen = MSEPenalty(pop, users=2000, value_range=(0.0, 4.0))
    low, high = tradeoff_range(ScheduleProblem(pop, pen, 1.0, A_max=40, S_max=40))
    for f_bar, status, words in (
        (low * 0.5, "infeasible", "tighter than any schedule can reach"),
        (high * 2, "unbounded", "looser than publishing data of any age"),
        (0.5 * (low + high), "optimal", "lies inside the trade-off range"),
    ):
        out = design_schedule(pop, max_penalty=f_bar, penalty=pen, A_max=40, S_max=40).to_dict()
        assert out["status"] == status
        assert out["model"]["tradeoff_range"] == pytest.approx([low, high])
        text = " ".join(explain(out))
        assert words in text and f"{(low if status != 'unbounded' else high):.4g}" in text
        if status != "infeasible":
            assert "aging" in text


def test_an_unbounded_box_names_its_a_max_not_the_aging_found():
    """Issue 33 item 9: "beyond A_max = 115" was printed for a box whose A_max is 168 (the readings' staleness is
    not monotone in the age, so the best schedule inside the box can have A < A_max while A_max + 1 does better)."""
    out = {"status": "unbounded", "A": 115, "S_bar": 6, "max_penalty": 0.05, "peak_risk": 0.2,
           "model": {"tradeoff_range": [0.001, 0.3], "penalty_unit": "kWh^2"}, "benchmarks": {"no_aging": None}}
    text = " ".join(explain(out, A_max=168))
    assert ("unbounded in this box: an aging beyond A_max = 168 slots gives a smaller risk (the best schedule inside "
            "it has A = 115 slots); raise --max-age") in text
    assert "A_max = 115" not in text
    at_edge = " ".join(explain({**out, "A": 168}, A_max=168))
    assert "beyond A_max = 168 slots gives a smaller risk; raise --max-age" in at_edge and "inside it" not in at_edge
