"""Fast paths of issue 16 against plain baselines: L(α) on a fresh matrix, Δ(t), bulk chains.

Sources: Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release
under Temporal Correlations", IEEE TKDE, 2019, eq. (24), Theorem 5; Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eqs. (1), (12).
"""

from __future__ import annotations

import numpy as np
import pytest
from _refs import brute_max_tv, theorem5_loss

from policyopt.errors import InvalidModelError
from policyopt.models.markov import MarkovChain, Population
from policyopt.privacy.temporal import LossFunction

ALPHAS = [0.0, 1e-6, 1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 40.0, 100.0, 709.0, 710.0, 1000.0]


def random_matrix(rng, n, kind):
    """Seeded row-stochastic test matrices: dense, with zeros, with identical rows, sparse."""
    P = rng.random((n, n))
    if kind == "zeros":
        P[rng.random((n, n)) < 0.3] = 0.0
        P[:, 0] += 1e-3  # keep every row non-empty
    elif kind == "identical":
        P[1] = P[0]
        if n > 3:
            P[3] = P[2]
    elif kind == "sparse":
        P = np.where(rng.random((n, n)) < 0.15, P, 0.0)
        P[np.arange(n), rng.integers(0, n, n)] += 0.5
    elif kind == "rounded":  # many exact ties between ratios and between pairs
        P = np.round(P * 4) + 1.0
    return P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["dense", "zeros", "identical", "sparse", "rounded"])
@pytest.mark.parametrize("n", [2, 3, 5, 9, 24, 60])
def test_fresh_exact_equals_paper_literal_theorem5(n, kind):
    # source: Theorem 5 / eq. (24) by full sorting per row pair (tests/_refs.theorem5_loss)
    rng = np.random.default_rng(1000 * n + len(kind))
    P = random_matrix(rng, n, kind)
    fast = LossFunction(P).exact(ALPHAS)  # fresh object: the bound-and-prune path
    ref = np.array([theorem5_loss(P, a) for a in ALPHAS])
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("seed", range(4))
def test_fresh_exact_equals_envelope_paths(seed):
    # The pruned direct evaluation, Algorithm 1 on the tables, Algorithm 5 and Algorithm 3 agree.
    rng = np.random.default_rng(seed)
    P = random_matrix(rng, 40, ["dense", "zeros", "sparse", "rounded"][seed])
    fresh = LossFunction(P).exact(ALPHAS)
    built = LossFunction(P)
    built.piecewise(0.0)  # builds the tables and the envelope
    for other in (built.exact(ALPHAS), built.piecewise(ALPHAS), built.per_pair(ALPHAS)):
        np.testing.assert_allclose(other, fresh, rtol=1e-12, atol=1e-13)


def test_fresh_exact_special_matrices():
    # Theorem 6: identical rows, L ≡ 0; Theorem 7: a column with a 1 and a 0, L(α) = α
    assert LossFunction(np.full((4, 4), 0.25)).exact(3.0) == 0.0
    P = np.eye(3)
    np.testing.assert_array_equal(LossFunction(P).exact([0.0, 2.0, 1000.0]), [0.0, 2.0, 1000.0])
    # source: Cao et al. 2019, Example 4: L(40) = log 5 to double precision (the pair (3, 1))
    ex4 = [[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]]
    assert LossFunction(ex4).exact(40.0) == pytest.approx(np.log(5.0), abs=1e-15)


def test_fresh_exact_many_alphas_reuses_bounds():
    # One object, many α (the recursion of eq. 13 with method="exact"): same values as one by one.
    rng = np.random.default_rng(7)
    P = random_matrix(rng, 30, "dense")
    L = LossFunction(P)
    a = np.linspace(0.0, 20.0, 41)
    np.testing.assert_allclose(L.exact(a), [theorem5_loss(P, x) for x in a], rtol=1e-12, atol=1e-13)
    assert L._env is None  # the envelope was never built


def sticky_stack(rng, users, k):
    M = rng.dirichlet(np.full(k, 0.5), size=(users, k))
    P = 0.6 * np.eye(k) + 0.4 * M
    return P / P.sum(axis=2, keepdims=True)


def test_from_matrices_equals_one_by_one():
    rng = np.random.default_rng(2026)
    P = sticky_stack(rng, 50, 6)
    bulk = Population.from_matrices(P)
    single = Population([MarkovChain(p) for p in P])
    for a, b in zip(bulk.chains, single.chains):
        np.testing.assert_array_equal(a.P, b.P)
        np.testing.assert_allclose(a.stationary, b.stationary, rtol=1e-13)
        np.testing.assert_allclose(a.reversed_matrix, b.reversed_matrix, rtol=1e-12)
    ts = np.arange(0, 120)
    np.testing.assert_allclose(bulk.max_tv(ts), single.max_tv(ts), rtol=1e-12, atol=0)
    assert bulk.n_users == 50


def test_from_matrices_errors():
    good = np.array([[[0.5, 0.5], [0.5, 0.5]]])
    with pytest.raises(InvalidModelError, match=r"stack of square matrices \(U, K, K\), got shape \(2, 2\)"):
        Population.from_matrices(good[0])
    bad = good.copy()
    bad[0, 1, 0] = -0.5
    with pytest.raises(InvalidModelError, match=r"`P\[0\]` has a negative entry -0.5 at row 1, column 0"):
        Population.from_matrices(bad)
    bad = np.concatenate([good, [[[0.5, 0.6], [0.5, 0.5]]]])
    with pytest.raises(InvalidModelError, match=r"`P\[1\]` is not stochastic: row 0 sums to 1.1"):
        Population.from_matrices(bad)
    bad = np.concatenate([good, [[[1.0, 0.0], [0.0, 1.0]]]])
    with pytest.raises(InvalidModelError, match=r"`P\[1\]`: the stationary distribution needs an irreducible chain"):
        Population.from_matrices(bad)
    with pytest.raises(InvalidModelError, match=r"stack of square numeric matrices"):
        Population.from_matrices([["a"]])


@pytest.mark.parametrize("seed", range(3))
def test_population_max_tv_equals_definition(seed):
    # source: Zhang et al. 2024, eqs. (1), (11), (12) straight from the definition (tests/_refs.brute_max_tv),
    # where plain powers are still accurate (Δ ≥ 1e-6)
    rng = np.random.default_rng(seed)
    P = sticky_stack(rng, 20, 5)
    pop = Population.from_matrices(P)
    ts = np.arange(0, 40)
    got = pop.max_tv(ts)
    ref = np.array([max(brute_max_tv(p, int(t)) for p in P) for t in ts])
    ok = ref > 1e-6
    assert ok.sum() > 10
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-9)


def test_fresh_exact_subnormal_entries_and_tiny_alpha():
    # Found by Hypothesis (tests/privacy/test_tpl.py::test_property_exact_piecewise_any_alpha): entries of
    # 1e-322 make q_k/λ underflow and α = 5e-324 makes 1/u overflow; the test must keep the pair
    # (row 2 vs row 1: Q = 2e-322, D = 0) whose value α + log(2e-322) is the maximum.
    P = np.zeros((7, 7))
    P[:, 0] = 1.0
    P[0, 1] = P[2, 1] = P[2, 2] = 1e-322
    a = np.array([5e-324, 1e-3, 40.0, 1000.0])
    fresh = LossFunction(P).exact(a)
    built = LossFunction(P)
    np.testing.assert_allclose(built.piecewise(a), fresh, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(fresh, [theorem5_loss(P, x) for x in a], rtol=1e-12, atol=1e-13)
    # source: eq. (24) with Q = 2e-322 (two subnormal entries), D = 0: L(1000) = 1000 + log(2e-322)
    assert fresh[-1] == pytest.approx(1000.0 + np.log(2e-322), rel=1e-12)
