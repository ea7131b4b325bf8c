"""``compose`` evaluates Δ only up to the largest lag Theorem 3 needs, with the results of the all-ages evaluation.

Reference: ``tests/_compose_ref.compose_all_ages``, a second formulation of Theorem 3 (epoch by epoch) with Δ at
every age up to the horizon, as ``compose`` evaluated it before.  Theorem 3 of Zhang, Wei, Berry, Huang, "Age-Dependent Differential
Privacy", IEEE Trans. Inf. Theory, 2024, eq. (25).
"""

from __future__ import annotations

import numpy as np
import pytest

from _compose_ref import compose_all_ages
from policyopt.errors import InvalidInputError
from policyopt.models.markov import MarkovChain, Population
from policyopt.privacy.age_dependent import compose

FIELDS = ("times", "risk", "aoi", "epoch_peaks", "prior_risk")


def _same_bits(new, old):
    for name in FIELDS:
        a, b = np.asarray(getattr(new, name)), np.asarray(getattr(old, name))
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), f"{name} differs: max |Δ| {np.nanmax(np.abs(a - b))}"


def _random_chain(rng, k):
    p = rng.random((k, k)) + 0.05
    return MarkovChain(p / p.sum(axis=1, keepdims=True), state_values=np.arange(k, dtype=float))


@pytest.fixture(scope="module")
def population():
    rng = np.random.default_rng(20261124)
    chains = [_random_chain(rng, 3) for _ in range(4)] + [_random_chain(rng, 5) for _ in range(3)]
    return Population(chains)


def _random_schedule(rng, n):
    S = np.cumsum(rng.integers(1, 30, size=n)) + int(rng.integers(0, 20))
    tau = np.empty(n, dtype=np.int64)
    prev = 0
    for i, s in enumerate(S):
        tau[i] = min(int(s), max(prev, int(s) - int(rng.integers(0, 60))))
        prev = tau[i]
    return S, S - tau, rng.uniform(0.0, 3.0, size=n)


class _Recorder:
    """A model that records the largest age it is asked for (ln Δ from the wrapped population)."""

    def __init__(self, model):
        self.model, self.asked = model, []

    def log_max_tv(self, t):
        self.asked.append(np.asarray(t))
        return self.model.log_max_tv(t)


def test_equal_spacing_long_horizon_bit_for_bit(population):
    # a year of hourly slots, A = 24, S̄ = 12 (the needed ages are 0..35, the horizon 8760)
    S = 24 + 12 * np.arange(729)
    rec = _Recorder(population)
    new = compose(S, 24, 0.7, rec, horizon=8760)
    _same_bits(new, compose_all_ages(S, 24, 0.7, population, horizon=8760))
    assert max(int(a.max()) for a in rec.asked) == 24 + 12 - 1


@pytest.mark.parametrize("seed", range(12))
def test_random_schedules_bit_for_bit(population, seed):
    rng = np.random.default_rng(seed)
    S, A, eps = _random_schedule(rng, int(rng.integers(1, 40)))
    horizon = int(S[-1]) + int(rng.integers(0, 200))
    _same_bits(compose(S, A, eps, population, horizon=horizon), compose_all_ages(S, A, eps, population, horizon=horizon))
    # a bound method, a plain callable and a table take the same path as before
    chain = population.chains[0]
    for model in (chain.max_tv, lambda t: chain.max_tv(t), chain.max_tv(np.arange(horizon + 1))):
        _same_bits(compose(S, A, eps, model, horizon=horizon), compose_all_ages(S, A, eps, model, horizon=horizon))


def test_prior_risk_lag_above_every_epoch_lag():
    # A_2 = 0: the prior-risk lag τ_2 − τ_1 = 15 exceeds every in-epoch lag (5..14, then 0)
    chain = MarkovChain([[0.9, 0.1], [0.2, 0.8]])
    rec = _Recorder(chain)
    S, A = [5, 15], [5, 0]
    new = compose(S, A, 1.0, rec)
    _same_bits(new, compose_all_ages(S, A, 1.0, chain))
    assert max(int(a.max()) for a in rec.asked) == 15


def test_large_budget_and_zero_max_tv():
    # ε_C = 50 with Δ(t) below the float range (log path), and Δ(t) = 0 for t ≥ 1 (identical rows)
    fast = MarkovChain([[0.5, 0.5], [0.5, 0.5]])
    slow = MarkovChain([[0.999, 0.001], [0.001, 0.999]])
    deep = MarkovChain([[0.02, 0.98], [0.97, 0.03]])
    for chain in (fast, slow, deep):
        for S, A in (([400, 800, 1200], 400), ([3, 4, 5, 900], [1, 1, 1, 2])):
            new = compose(S, A, 50.0, chain, horizon=5000)
            _same_bits(new, compose_all_ages(S, A, 50.0, chain, horizon=5000))
            assert np.all(np.isfinite(new.risk))
    assert compose([3, 6], 1, 50.0, fast).peak_risk == 0.0


def test_short_table_still_rejected_up_to_the_horizon():
    table = np.full(20, 0.5)
    with pytest.raises(InvalidInputError, match=r"`max_tv` table has 20 entries but ages up to 29 slots are needed"):
        compose([2, 4], 2, 1.0, table, horizon=29)
    bad = np.full(30, 0.5)
    bad[25] = 1.5  # beyond every lag Theorem 3 looks up, still validated as before
    with pytest.raises(InvalidInputError, match=r"`max_tv` must lie in \[0, 1\]"):
        compose([2, 4], 2, 1.0, bad, horizon=29)
