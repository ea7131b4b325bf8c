"""Direct estimate of Δ(t) from readings (policyopt.models.empirical): counts, estimate, band, model draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.errors import InvalidInputError
from policyopt.models.empirical import (
    chain_statistic_draws,
    default_max_lag,
    estimate_max_tv,
    lagged_pair_counts,
    max_row_tv,
    states_matrix,
)


def loop_counts(series, K, L):
    """Lagged-pair counts by plain Python loops (the independent reference)."""
    out = [[[[0] * K for _ in range(K)] for _ in range(L)] for _ in series]
    for u, x in enumerate(series):
        for t in range(1, L + 1):
            for s in range(t, len(x)):
                if x[s] >= 0 and x[s - t] >= 0:
                    out[u][t - 1][x[s]][x[s - t]] += 1
    return np.array(out)


def loop_max_tv(counts, min_pairs):
    """Largest row TV of one (K, K) count matrix, by loops (rows with ≥ min_pairs pairs)."""
    K = len(counts)
    rows = [sum(r) for r in counts]
    best = 0.0
    for a in range(K):
        for b in range(K):
            if rows[a] >= max(1, min_pairs) and rows[b] >= max(1, min_pairs):
                tv = 0.5 * sum(abs(counts[a][y] / rows[a] - counts[b][y] / rows[b]) for y in range(K))
                best = max(best, tv)
    return best


def test_counts_match_loops_with_missing_and_unequal_lengths():
    rng = np.random.default_rng(1)
    series = [rng.integers(-1, 3, size=n) for n in (57, 40, 63)]
    c = lagged_pair_counts(series, 3, 9)
    assert c.shape == (3, 9, 3, 3)
    np.testing.assert_array_equal(c, loop_counts([list(s) for s in series], 3, 9))


def test_max_row_tv_matches_loops():
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 30, size=(20, 4, 4))
    for mp in (1, 40, 70):
        got = max_row_tv(counts, mp)
        want = [loop_max_tv(c.tolist(), mp) for c in counts]
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_block_counts_sum_to_the_totals():
    # the bootstrap's per-block counts must add up to the point estimate's counts: compare both paths
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, size=(2, 700))
    est = estimate_max_tv(x, 3, 30, n_boot=20, block_length=50, min_pairs=1)
    c = lagged_pair_counts(x, 3, 30)
    np.testing.assert_array_equal(est.row_pairs, c.sum(axis=-1))
    np.testing.assert_allclose(est.per_user, max_row_tv(c, 1), atol=1e-12)


def test_deterministic_cycle_has_max_tv_one():
    cycle = np.tile(np.arange(4), (3, 300))
    est = estimate_max_tv(cycle, 4, 20, n_boot=20)
    np.testing.assert_array_equal(est.estimate, 1.0)
    np.testing.assert_array_equal(est.upper, 1.0)
    assert est.max_tv(0) == 1.0 and est.max_tv(21) == 1.0


def test_iid_rows_give_max_tv_near_zero():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 3, size=(2, 6000))
    est = estimate_max_tv(x, 3, 24, n_boot=100)
    assert est.estimate.max() < 0.08  # plug-in bias only: ~sqrt(K / pairs per row)
    assert est.lower.min() <= 0.05
    assert np.all(est.upper < 0.2)


def test_max_tv_is_the_upper_band_inside_and_one_beyond():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2, size=(1, 3000))
    est = estimate_max_tv(x, 2, 10, n_boot=30)
    np.testing.assert_array_equal(est.max_tv(np.arange(1, 11)), est.upper)
    np.testing.assert_array_equal(est.max_tv([0, 11, 500]), [1.0, 1.0, 1.0])
    assert np.all(est.log_max_tv(np.arange(1, 11)) <= 0)


def test_rare_rows_make_no_claim():
    rng = np.random.default_rng(6)
    x = rng.integers(0, 2, size=(2, 2000))
    x[1, :] = np.where(rng.random(2000) < 0.01, 2, x[1])  # state 2 seen ~20 times by user 1 only
    est = estimate_max_tv(x, 3, 5, n_boot=20, min_pairs=100)
    np.testing.assert_array_equal(est.upper, 1.0)
    np.testing.assert_array_equal(est.users_without_claim, 2)  # user 0 never visits state 2 either


def test_default_max_lag_rule():
    assert default_max_lag(8760) == 876
    assert default_max_lag(10**6) == 1000
    assert default_max_lag(5) == 1


@settings(max_examples=25, deadline=None)
@given(
    K=st.integers(2, 4),
    T=st.integers(40, 160),
    users=st.integers(1, 3),
    L=st.integers(1, 8),
    seed=st.integers(0, 2**16),
    p_missing=st.sampled_from([0.0, 0.2]),
)
def test_band_properties(K, T, users, L, seed, p_missing):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, K, size=(users, T))
    x[rng.random(x.shape) < p_missing] = -1
    est = estimate_max_tv(x, K, L, n_boot=20, min_pairs=3, seed=seed)
    for a in (est.estimate, est.lower, est.upper):
        assert np.all((a >= 0) & (a <= 1))
    assert np.all(est.lower <= est.estimate + 1e-12)
    assert np.all(est.upper >= est.estimate - 1e-12)
    ref = loop_counts(x.tolist(), K, L)
    want = [max(loop_max_tv(ref[u][t].tolist(), 3) for u in range(users)) for t in range(L)]
    np.testing.assert_allclose(est.estimate, want, atol=1e-12)


def test_chain_draws_of_a_known_chain_cover_its_own_statistic():
    # data simulated from a chain: its statistic lies inside the draws' distribution at most lags
    P = np.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.05, 0.15, 0.8]])
    rng = np.random.default_rng(7)
    from policyopt.models.empirical import simulate_chain_states

    data = simulate_chain_states([P, P], [3000, 3000], [0, 2], 1, rng)[0]
    est = estimate_max_tv(data, 3, 40, n_boot=20)
    draws = chain_statistic_draws([P, P], data, 3, 40, draws=39, rng=np.random.default_rng(8))
    p = (1 + (draws >= est.estimate[None, :]).sum(axis=0)) / 40
    assert np.mean(p <= 0.05) <= 0.15


def test_errors_name_the_argument():
    x = np.zeros((1, 50), dtype=int)
    with pytest.raises(InvalidInputError, match="`max_lag`=50 must be below"):
        estimate_max_tv(x, 2, 50)
    with pytest.raises(InvalidInputError, match="`level` must be a probability"):
        estimate_max_tv(x, 2, 5, level=1.5)
    with pytest.raises(InvalidInputError, match="`max_lag` must be an integer ≥ 1"):
        estimate_max_tv(x, 2, 0)
    with pytest.raises(InvalidInputError, match="outside 0..1"):
        states_matrix([[0, 1, 2]], 2)
    with pytest.raises(InvalidInputError, match="`n_boot` must be an integer ≥ 20"):
        estimate_max_tv(x, 2, 5, n_boot=3)


def test_point_estimate_without_band_makes_no_claim():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 3, size=(3, 800))
    full = estimate_max_tv(x, 3, 12, n_boot=20, min_pairs=5)
    point = estimate_max_tv(x, 3, 12, n_boot=0, min_pairs=5)
    np.testing.assert_array_equal(point.estimate, full.estimate)
    np.testing.assert_array_equal(point.per_user, full.per_user)
    np.testing.assert_array_equal(point.upper, 1.0)
    np.testing.assert_array_equal(point.lower, 0.0)
    assert "no bootstrap band" in point.method


@settings(max_examples=15, deadline=None)
@given(K=st.integers(2, 5), T=st.integers(200, 600), L=st.integers(1, 12), shift=st.integers(0, 4))
def test_any_deterministic_cycle_has_max_tv_one(K, T, L, shift):
    x = (np.arange(T) + shift) % K  # rows of the reversed kernel are point masses on different states
    est = estimate_max_tv(np.stack([x, x[::-1] % K]), K, L, n_boot=20, min_pairs=1)
    np.testing.assert_array_equal(est.estimate, 1.0)
    np.testing.assert_array_equal(est.upper, 1.0)


@settings(max_examples=10, deadline=None)
@given(K=st.integers(2, 4), seed=st.integers(0, 2**16))
def test_iid_rows_band_contains_small_values(K, seed):
    x = np.random.default_rng(seed).integers(0, K, size=(1, 8000))  # Δ(t) = 0 for t ≥ 1
    est = estimate_max_tv(x, K, 6, n_boot=40, seed=seed)
    assert est.estimate.max() < 0.1 and est.lower.min() < 0.06
