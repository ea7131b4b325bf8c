"""Utility penalty: MSE of the released mean (Zhang et al. 2024, eqs. (48)–(49))."""

from __future__ import annotations

import numpy as np
import pytest

from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.models.markov import MarkovChain, Population, two_state_chain
from policyopt.utility.penalty import CallablePenalty, MSEPenalty, two_state_mse


@pytest.mark.parametrize("p, q, users", [(0.1, 0.1, 20), (0.1, 0.3, 5), (0.7, 0.9, 3), (0.05, 0.5, 1)])
def test_mse_matches_two_state_closed_form(p, q, users):
    # source: Zhang et al. (2024), eq. (49) for the chain (43), derived in penalty.two_state_mse
    pen = MSEPenalty(Population([two_state_chain(p, q)], [users]))
    t = np.arange(0, 60)
    for eps in (0.1, 1.0, 50.0):
        np.testing.assert_allclose(pen.value(t, eps), two_state_mse(t, eps, p, q, users), rtol=1e-12)
    assert pen.sensitivity == pytest.approx(2.0 / users)
    # the correct Laplace noise is 4× the variance 2/(ε² I²) printed for mechanism (48)
    assert pen.noise_variance(1.0) == pytest.approx(4 * 2 / users**2)
    assert pen.staleness_limit == pytest.approx(8 * p * q / (users * (p + q) ** 2), rel=1e-12)


def test_mse_matches_monte_carlo_of_the_mechanism(nonreversible3):
    """Seeded simulation (numpy noise: simulation only, nothing is released)."""
    chains = [nonreversible3, MarkovChain([[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]], [0.0, 1.0, 3.0])]
    pop = Population(chains, counts=[2, 3])
    pen = MSEPenalty(pop)
    t, eps, n = 3, 1.5, 200_000
    rng = np.random.default_rng(20231213)
    old_sum = np.zeros(n)
    now_sum = np.zeros(n)
    for chain, count in zip(pop.chains, pop.counts):
        Pt = np.linalg.matrix_power(chain.P, t)
        v = chain.state_values
        for _ in range(count):
            x_old = rng.choice(3, size=n, p=chain.stationary)  # X_{−t} ~ π
            u = rng.random(n)
            x_now = (u[:, None] > np.cumsum(Pt[x_old], axis=1)).sum(axis=1)  # X_0 ~ P_t(X_{−t}, ·)
            old_sum += v[x_old]
            now_sum += v[x_now]
    released = old_sum / 5 + rng.laplace(0.0, pen.sensitivity / eps, size=n)  # simulation of M(X_{−t})
    err2 = (released - now_sum / 5) ** 2
    se = err2.std() / np.sqrt(n)
    assert abs(err2.mean() - pen.value(t, eps)) < 4 * se
    assert pen.sensitivity == pytest.approx(3.0 / 5)


def test_staleness_is_zero_at_age_zero_and_tends_to_limit(nonreversible3):
    pen = MSEPenalty(Population([nonreversible3], [4]))
    assert pen.staleness(0) == 0.0
    assert pen.staleness(400) == pytest.approx(pen.staleness_limit, rel=1e-12)


def test_epoch_penalty_takes_max_over_ages_when_not_monotone():
    # p = q = 0.9: 1 − p − q = −0.8, so the staleness oscillates in t
    pen = MSEPenalty(Population([two_state_chain(0.9, 0.9)], [4]))
    s = pen.staleness(np.arange(6))
    assert s[1] > s[2]  # not monotone
    table = pen.epoch_table(4, 3, 2.0)
    noise = pen.noise_variance(2.0)
    assert table[2, 0] == pytest.approx(s[2] + noise)  # A = 2, S̄ = 1: age 2 only
    assert table[1, 1] == pytest.approx(max(s[1], s[2]) + noise)  # ages 1, 2
    assert table[2, 2] == pytest.approx(max(s[2], s[3], s[4]) + noise)


def test_closed_form_inverse_is_tight_and_feasible():
    pen = MSEPenalty(Population([two_state_chain(0.1, 0.1)], [20]))
    stale = pen.staleness(np.arange(10))
    f_bar = 0.08
    eps = pen.min_epsilon_c(stale, f_bar)
    ok = np.isfinite(eps)
    assert np.all(stale[ok] + pen.noise_variance(eps[ok]) <= f_bar)
    assert np.all(stale[ok] + pen.noise_variance(eps[ok] * (1 - 1e-9)) > f_bar)
    assert np.all(~ok == (stale >= f_bar))


def test_generic_root_finding_matches_closed_form():
    pen = MSEPenalty(Population([two_state_chain(0.2, 0.1)], [10]))
    generic = CallablePenalty(pen.value, pen.noiseless, name="mse-callable")
    f_bar = 0.12  # staleness limit is 0.178: long epochs become infeasible
    closed = pen.min_epsilon_c_table(5, 6, f_bar)
    found = generic.min_epsilon_c_table(5, 6, f_bar)
    np.testing.assert_array_equal(np.isfinite(found), np.isfinite(closed))
    ok = np.isfinite(closed)
    assert 5 < ok.sum() < ok.size  # some schedules feasible, some not
    np.testing.assert_allclose(found[ok], closed[ok], rtol=1e-9)
    for a, j in zip(*np.nonzero(ok)):  # every returned budget meets f̄
        assert generic.epoch_table(5, 6, found[a, j])[a, j] <= f_bar


def test_penalty_errors():
    pen = MSEPenalty(Population([two_state_chain(0.1, 0.1)], [20]))
    with pytest.raises(InvalidInputError, match=r"`max_penalty` \(f̄\) must be a positive finite number, got -1"):
        pen.min_epsilon_c(0.0, -1)
    with pytest.raises(InvalidModelError, match="all state values equal 2.0"):
        MSEPenalty(Population([MarkovChain([[0.5, 0.5], [0.5, 0.5]], [2.0, 2.0])]))
    with pytest.raises(InvalidModelError, match="`population` must be a Population"):
        MSEPenalty(two_state_chain(0.1, 0.1))


def test_with_users_equals_a_new_penalty_bit_for_bit(nonreversible3):
    # source: MSEPenalty(population, users=I) built afresh; with_users(I) shares the staleness sums
    # (formed once) and must give the same staleness, ε_C tables and penalty tables exactly,
    # whichever object extends the shared sums first
    chains = [nonreversible3, MarkovChain([[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]], [0.0, 1.0, 3.0])]
    pop = Population(chains, counts=[2, 3])
    base = MSEPenalty(pop, users=7, value_range=(-1.0, 4.0))
    base.staleness(np.arange(5))  # a short prefix first: the sums are extended later by a copy
    for users in (1, 7, 1000, 10**6):
        got = base.with_users(users)
        new = MSEPenalty(pop, users=users, value_range=(-1.0, 4.0))
        assert got.users == users and got.sensitivity == new.sensitivity == 5.0 / users
        t = np.arange(300)
        assert np.array_equal(got.staleness(t), new.staleness(t))
        assert got.staleness_limit == new.staleness_limit
        assert np.array_equal(got.epoch_table(12, 20, 0.3), new.epoch_table(12, 20, 0.3))
        f_bar = float(new.staleness(40)) * 1.5
        assert np.array_equal(got.min_epsilon_c_table(30, 40, f_bar), new.min_epsilon_c_table(30, 40, f_bar))
        assert got.staleness_rel_error == new.staleness_rel_error
    assert base.users == 7  # the original is unchanged
    with pytest.raises(InvalidInputError, match="users"):
        base.with_users(0)
    with pytest.raises(InvalidInputError, match="users"):
        base.with_users(2.5)
