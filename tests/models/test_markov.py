"""Markov chains, the reversed process and Δ(t) (Zhang et al. 2024, eqs. (1), (12), (43)–(47), (54)–(55))."""

from __future__ import annotations

import numpy as np
import pytest
from _refs import brute_max_tv
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.models.markov import MarkovChain, Population, two_state_chain

T = np.arange(0, 301)


@pytest.mark.parametrize("p, q", [(0.1, 0.1), (0.1, 0.3), (0.05, 0.6), (0.7, 0.9), (0.95, 0.8)])
def test_two_state_max_tv_is_power_of_second_eigenvalue(p, q):
    # source: Zhang et al. (2024), eq. (47): Δ(t) = |1 − p − q|^t, also for p ≠ q and 1 − p − q < 0
    chain = two_state_chain(p, q)
    expected = np.abs(1 - p - q) ** T.astype(float)
    np.testing.assert_allclose(chain.max_tv(T), expected, rtol=1e-11, atol=0)


def test_two_state_max_tv_keeps_relative_accuracy_far_below_machine_epsilon():
    # Δ(1000) = 0.5^1000 ≈ 9.3e-302: subtracting rows would give 0 or noise.
    chain = two_state_chain(0.25, 0.25)
    assert chain.max_tv(1000) == pytest.approx(0.5**1000, rel=1e-12)


def test_two_state_stationary_and_reversibility():
    # source: Zhang et al. (2024), below eq. (43): π = (q, p)/(p + q); the chain is reversible
    chain = two_state_chain(0.1, 0.3)
    np.testing.assert_allclose(chain.stationary, [0.75, 0.25], rtol=1e-15)
    assert chain.is_reversible()
    assert chain.lambda_star == pytest.approx(0.6, rel=1e-14)
    np.testing.assert_array_equal(chain.state_values, [-1.0, 1.0])


def test_max_tv_matches_definition_and_differs_from_forward_rows(nonreversible3):
    chain = nonreversible3
    assert not chain.is_reversible()
    for t in range(0, 25):
        assert chain.max_tv(t) == pytest.approx(brute_max_tv(chain.P, t), rel=1e-10, abs=1e-15)
    # Forward rows give a different (wrong) Δ for a non-reversible chain.
    P1 = chain.P
    forward = max(0.5 * np.abs(P1[i] - P1[j]).sum() for i in range(3) for j in range(3))
    assert forward == pytest.approx(0.7)  # rows 0 and 1 differ by 0.7 in total variation
    assert chain.max_tv(1) == pytest.approx(brute_max_tv(P1, 1))
    assert abs(chain.max_tv(1) - forward) > 0.05


def test_max_tv_vectorised_any_shape_and_order(nonreversible3):
    t = np.array([[5, 0], [3, 5]])
    out = nonreversible3.max_tv(t)
    assert out.shape == (2, 2)
    assert out[0, 0] == out[1, 1] == pytest.approx(nonreversible3.max_tv(5), rel=1e-13)
    assert out[0, 1] == 1.0
    assert isinstance(nonreversible3.max_tv(3), float)


def test_max_tv_zero_for_iid_chain():
    chain = MarkovChain([[0.2, 0.8], [0.2, 0.8]])
    np.testing.assert_array_equal(chain.max_tv([0, 1, 2, 50]), [1.0, 0.0, 0.0, 0.0])


def test_stationary_gth_accurate_for_nearly_decomposable_chain():
    eps1, eps2 = 1e-12, 1e-6
    chain = MarkovChain([[1 - eps1, eps1], [eps2, 1 - eps2]])
    expected0 = eps2 / (eps1 + eps2)
    assert chain.stationary[0] == pytest.approx(expected0, rel=1e-14)
    assert chain.stationary[1] == pytest.approx(eps1 / (eps1 + eps2), rel=1e-12)


@pytest.mark.parametrize(
    "P, irreducible, period",
    [
        ([[0, 1], [1, 0]], True, 2),
        ([[0, 1, 0], [0, 0, 1], [1, 0, 0]], True, 3),
        ([[0.5, 0.5], [0.5, 0.5]], True, 1),
        ([[0, 0.5, 0.5], [1, 0, 0], [1, 0, 0]], True, 2),
        ([[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1]], False, None),
    ],
)
def test_irreducibility_and_period_table(P, irreducible, period):
    chain = MarkovChain(P)
    assert chain.is_irreducible is irreducible
    if irreducible:
        assert chain.period == period
        assert chain.is_aperiodic is (period == 1)
    else:
        with pytest.raises(InvalidModelError, match="communicating classes"):
            chain.stationary
        with pytest.raises(InvalidModelError, match="irreducible"):
            chain.max_tv(1)


def test_reversed_chain_is_stochastic_and_involutive(nonreversible3):
    rev = nonreversible3.reversed()
    np.testing.assert_allclose(rev.P.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(nonreversible3.stationary @ rev.P, nonreversible3.stationary, atol=1e-15)
    np.testing.assert_allclose(rev.reversed().P, nonreversible3.P, atol=1e-15)
    np.testing.assert_array_equal(rev.state_values, nonreversible3.state_values)


def test_step_matrix(nonreversible3):
    np.testing.assert_allclose(nonreversible3.step_matrix(3), np.linalg.matrix_power(nonreversible3.P, 3))


@st.composite
def chains(draw, max_states=5):
    k = draw(st.integers(2, max_states))
    rows = [draw(st.lists(st.floats(0.01, 1.0), min_size=k, max_size=k)) for _ in range(k)]
    P = np.array(rows)
    return MarkovChain(P / P.sum(axis=1, keepdims=True))


@settings(max_examples=60, deadline=None)
@given(chains())
def test_spectral_bound_dominates_exact_max_tv(chain):
    # source: Zhang et al. (2024), eq. (55) (Fill 1991 for non-reversible chains)
    t = np.arange(0, 120)
    exact = chain.max_tv(t)
    bound = chain.spectral_bound(t)
    assert np.all(bound >= exact * (1 - 1e-9))
    assert np.all(exact <= 1.0) and np.all(np.diff(exact) <= 1e-12)  # TV contracts: non-increasing


@settings(max_examples=40, deadline=None)
@given(chains(), st.integers(1, 150))
def test_envelope_is_smallest_dominating_constant(chain, horizon):
    env = chain.envelope(horizon)
    t = np.arange(horizon + 1)
    exact = chain.max_tv(t)
    assert env.c >= 1.0 and env.rho == chain.lambda_star
    assert np.all(env(t) >= exact * (1 - 1e-12))
    if env.c > 1.0:  # smallest: the envelope touches Δ somewhere
        assert np.max(exact / env(t)) == pytest.approx(1.0, rel=1e-9)


def test_two_state_envelope_is_exact():
    env = two_state_chain(0.1, 0.3).envelope(200)
    assert env.c == pytest.approx(1.0, abs=1e-12)
    assert env.rho == pytest.approx(0.6, rel=1e-14)


def test_envelope_with_given_rho_and_bad_rho():
    chain = two_state_chain(0.1, 0.1)  # Δ(t) = 0.8^t
    env = chain.envelope(10, rho=0.5)
    assert env.c == pytest.approx(1.6**10, rel=1e-10)
    with pytest.raises(InvalidInputError, match=r"`rho` must be in \[0, 1\], got 1.5"):
        chain.envelope(10, rho=1.5)


def test_population_is_max_over_users(nonreversible3):
    chains_ = [two_state_chain(0.1, 0.3), nonreversible3, MarkovChain([[0.3, 0.7], [0.6, 0.4]])]
    pop = Population(chains_, counts=[3, 1, 2])
    assert pop.n_users == 6
    t = np.arange(40)
    np.testing.assert_allclose(pop.max_tv(t), np.max([c.max_tv(t) for c in chains_], axis=0), rtol=1e-14)
    np.testing.assert_allclose(
        pop.spectral_bound(t), np.max([c.spectral_bound(t) for c in chains_], axis=0), rtol=1e-12
    )


def test_large_population_pruning_is_exact():
    rng = np.random.default_rng(7)
    chains_ = []
    for _ in range(300):
        M = rng.dirichlet(np.full(4, 0.5), size=4)
        chains_.append(MarkovChain(0.5 * np.eye(4) + 0.5 * M))
    pop = Population(chains_)
    t = np.array([0, 1, 2, 3, 7, 30, 31, 90])
    expected = np.max([c.max_tv(t) for c in chains_], axis=0)
    np.testing.assert_allclose(pop.max_tv(t), expected, rtol=1e-13)


@pytest.mark.parametrize(
    "P, match",
    [
        ([[0.5, 0.5, 0.0]], "square"),
        ([[0.5, 0.5], [0.4, 0.5]], r"row 1 sums to 0.9"),
        ([[1.2, -0.2], [0.5, 0.5]], r"negative entry -0.2 at row 0, column 1"),
        ([[np.nan, 1.0], [0.5, 0.5]], r"non-finite entry nan at row 0, column 0"),
        ("abc", "square numeric matrix"),
    ],
)
def test_bad_transition_matrix(P, match):
    with pytest.raises(InvalidModelError, match=match):
        MarkovChain(P)


def test_bad_state_values_and_times():
    with pytest.raises(InvalidModelError, match="one value per state"):
        MarkovChain([[1.0]], state_values=[1.0, 2.0])
    with pytest.raises(InvalidModelError, match=r"`p` must be a probability in \[0, 1\], got 1.5"):
        two_state_chain(1.5, 0.1)
    chain = two_state_chain(0.1, 0.1)
    with pytest.raises(InvalidInputError, match=r"`t` must be non-negative integers \(slots\), got -1"):
        chain.max_tv(-1)
    with pytest.raises(InvalidInputError, match=r"got 1.5"):
        chain.max_tv(1.5)
    with pytest.raises(InvalidModelError, match="at least one MarkovChain"):
        Population([])
    with pytest.raises(InvalidInputError, match="one positive integer per chain"):
        Population([chain], counts=[0])


def test_log_max_tv_below_the_float_range():
    # Δ(t) = 0.1^t underflows a float for t > 323; its logarithm does not
    chain = two_state_chain(0.4, 0.5)
    t = np.array([0, 1, 330, 1000, 5000])
    np.testing.assert_allclose(chain.log_max_tv(t), t * np.log(0.1), rtol=1e-12, atol=0)
    assert chain.max_tv(1000) == 0.0  # the linear value underflows ...
    assert np.isneginf(MarkovChain([[0.2, 0.8], [0.2, 0.8]]).log_max_tv(3))  # ... only exact zeros are −inf


def test_stationary_underflow_is_an_error_not_nan():
    chain = MarkovChain([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1e-310, 0.0, 1 - 1e-310]])
    with pytest.raises(InvalidModelError, match="stationary distribution underflows"):
        chain.stationary


def test_spectral_bound_holds_for_nearly_identical_rows():
    # σ₂ ≈ 1e-10 carries an absolute SVD error: the rate gets an allowance so (55) stays a bound
    chain = MarkovChain([[0.5, 0.5], [0.5 - 1e-10, 0.5 + 1e-10]])
    t = np.arange(0, 25)
    assert np.all(chain.spectral_bound(t) >= chain.max_tv(t))


def test_rows_within_tolerance_are_renormalised():
    chain = MarkovChain([[0.5, 0.5 + 9e-10], [0.5, 0.5]])
    np.testing.assert_allclose(chain.P.sum(axis=1), 1.0, rtol=0, atol=2e-16)
