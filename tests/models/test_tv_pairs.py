"""``policyopt.models.tv_pairs``: the compiled largest-pair search of Δ(t) gives numpy's floats bit for bit, and its
pruning (pairs whose earlier distance is below the current lower bound are skipped) changes no maximum."""

from __future__ import annotations

import numpy as np
import pytest

import policyopt.models.tv_kernels as tk
from policyopt.models.markov_model import fit_markov_model
from policyopt.models.tv_pairs import PairState, max_pair_l1


def _blocks(rng, U, K, scale=1.0):
    """Row differences of random stochastic rows (U, K − 1, K), some users with duplicate rows (ties, zero pairs)."""
    P = rng.dirichlet(np.full(K, 0.3), size=(U, K)) * scale
    if K > 2:
        P[::3, 2] = P[::3, 1]  # two equal rows: a zero pair
    return np.ascontiguousarray(P[:, 1:, :] - P[:, :1, :])


@pytest.mark.parametrize("K", [2, 3, 8, 9, 12, 17, 129, 144, 300])
def test_every_users_largest_pair_is_numpys_float(K):
    rng = np.random.default_rng(K)
    d = _blocks(rng, 7, K, scale=10.0 ** rng.uniform(-30, 3))
    users = np.arange(7, dtype=np.int64)
    l1, upper = max_pair_l1(d, users, np.zeros(7), PairState(7, K - 1), -np.inf)
    assert np.array_equal(0.5 * l1, tk.pairwise_max_tv(d))  # the same additions in the same order: equal floats
    assert np.array_equal(upper, np.log(0.5 * l1))


def test_a_user_below_the_floor_gets_an_upper_bound_and_the_maximum_is_exact():
    rng = np.random.default_rng(7)
    K, U = 40, 12
    d = _blocks(rng, U, K)
    exact = np.log(tk.pairwise_max_tv(d))
    state = PairState(U, K - 1)
    users = np.arange(U, dtype=np.int64)
    max_pair_l1(d, users, np.zeros(U), state, -np.inf)  # every pair evaluated once: its bounds are exact
    step = 0.97 * np.eye(K) + 0.03 * rng.dirichlet(np.ones(K), size=K)  # one slow step: distances shrink a little
    d2 = np.ascontiguousarray(d @ step)
    exact2 = np.log(tk.pairwise_max_tv(d2))
    floor = float(exact2.max())
    l1, upper = max_pair_l1(d2, users, np.zeros(U), state, floor)
    top = int(np.argmax(exact2))
    assert 0.5 * l1[top] == tk.pairwise_max_tv(d2)[top]  # the largest user: exact
    below = np.isnan(l1)
    assert below.any()  # pruning happened
    assert np.all(upper[below] >= exact2[below]) and np.all(upper[below] < floor)
    assert np.all(np.log(0.5 * l1[~below]) == exact2[~below])
    assert exact.max() >= floor


def test_a_non_finite_block_falls_back_to_numpy():
    d = _blocks(np.random.default_rng(1), 3, 40)
    d[1, 4, 7] = np.nan
    l1, upper = max_pair_l1(d, np.arange(3, dtype=np.int64), np.zeros(3), PairState(3, 39), -np.inf)
    assert np.isnan(upper[1]) and not np.isnan(upper[0])


def _states(rng, U, T, K):
    x = np.empty((U, T), dtype=np.int64)
    x[:, 0] = rng.integers(0, K, U)
    stay = rng.uniform(0.6, 0.95, U)
    for t in range(1, T):
        jump = rng.random(U) > stay
        x[:, t] = np.where(jump, rng.integers(0, K, U), x[:, t - 1])
    x[rng.random((U, T)) < 0.02] = -1
    return x


@pytest.mark.parametrize("spec,K", [("order:2", 6), ("order:2", 8), ("chain", 40)])
def test_the_models_delta_is_the_numpy_loops_bit_for_bit(spec, K, monkeypatch):
    """Δ_Z(t), t = 0..30 and a jump to 60, of order-2 models (36 and 64 Z states) and 40-state chains: the compiled
    pruned search against numpy's loop over every pair (the threshold raised so that it is used)."""
    rng = np.random.default_rng(K)
    x = _states(rng, 25, 240, K)
    users = tuple(f"u{i}" for i in range(25))
    ages = np.r_[np.arange(31), 60]
    got = fit_markov_model(spec, x, K, users=users, smoothing=0.5).log_max_tv(ages)
    monkeypatch.setattr(tk, "COMPILED_PAIRS_MIN_STATES", 10**9)
    want = fit_markov_model(spec, x, K, users=users, smoothing=0.5).log_max_tv(ages)
    assert np.array_equal(got, want)
    assert got[0] == 0.0 and np.all(np.diff(got) <= 1e-12)
