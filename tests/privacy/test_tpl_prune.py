"""The grid bound-and-prune of the TPL envelope's row pairs (policyopt.privacy.tpl_prune).

Reference values: the plain scan that sorts every ordered pair (Algorithm 2 line 7 for all pairs,
``tpl_envelope.scan_pairs``) and exact rational arithmetic for the upper bounds.
"""

from fractions import Fraction

import numpy as np
import pytest

import policyopt.privacy.tpl_envelope as T
import policyopt.privacy.tpl_loss as tpl_loss
from policyopt.privacy.temporal import LossFunction, supremum
from policyopt.privacy.tpl_prune import _grid, _outward, _upper_values, prune_pairs


def _support(P, pairs, mus):
    """max(0, max over the chain of the pairs of y − μx) at each μ (the function Φ(1 + μ))."""
    n = P.shape[0]
    cx, cy, _, _ = T.scan_list(P, pairs // n, pairs % n)
    if not cx.size:
        return np.zeros(mus.size)
    return np.maximum(0.0, (cy[None, :] - mus[:, None] * cx[None, :]).max(axis=1))


def _families(rng, n):
    U = rng.random((n, n))
    yield U / U.sum(1, keepdims=True)
    yield rng.dirichlet(np.full(n, 0.1), size=n)
    M = rng.random((n, n))
    M[rng.random((n, n)) < 0.4] = 0.0
    M[:, 0] += 1e-3
    yield M / M.sum(1, keepdims=True)
    Q = np.round(rng.random((n, n)) * 4) / 4 + 0.25  # ties of ratios and of whole prefixes
    yield Q / Q.sum(1, keepdims=True)
    R = rng.random((4, n))
    yield (R / R.sum(1, keepdims=True))[rng.integers(0, 4, n)]  # duplicate rows
    E = np.exp(-rng.random((n, n)) * 120.0)  # ratios up to e^120: the grid reaches far beyond the dense part
    yield E / E.sum(1, keepdims=True)


@pytest.mark.parametrize("seed", range(6))
def test_pruned_pairs_give_the_same_chain_as_all_pairs(seed):
    # source: the plain scan over all ordered pairs; the pruned set must give the same support function
    # wherever it is positive (the only place L(α) uses it), at 600 slopes from 0 to 1e15
    rng = np.random.default_rng(seed)
    mus = np.concatenate([[0.0], np.geomspace(1e-8, 1e15, 600)])
    for P in _families(rng, int(rng.integers(3, 24))):
        rel, _ = T.scan_pairs(P)
        got = prune_pairs(P, T.scan_list, max_alive=1.0)
        assert got is not None
        np.testing.assert_allclose(_support(P, got, mus), _support(P, rel, mus), rtol=1e-13, atol=0.0)


def test_pruning_keeps_few_pairs_on_a_random_matrix():
    # source: the plain scan finds 12 chain-owning pairs of this 300-state matrix; the grid test and
    # bisection leave a handful of the 89,700 ordered pairs, a superset of them
    P = np.random.default_rng(11).random((300, 300))
    P /= P.sum(1, keepdims=True)
    rel, _ = T.scan_pairs(P)
    got = prune_pairs(P, T.scan_list)
    assert rel.size == 12
    assert np.isin(rel, got).all()
    assert got.size <= 64


def test_upper_values_bound_phi_exactly():
    # source: φ_ij(λ) = Σ_k (P_ik − λP_jk)⁺ in exact rationals, at every grid point
    rng = np.random.default_rng(5)
    P = rng.random((7, 7)) ** 4
    P[rng.random((7, 7)) < 0.2] = 0.0
    P[:, 1] += 1e-9
    P /= P.sum(1, keepdims=True)
    grid, n_dense, _ = _grid(P)
    U = _upper_values(*_outward(P), grid, n_dense)
    F = [[Fraction(v) for v in row] for row in P.tolist()]
    for g, lam in enumerate(grid.tolist()):
        L = Fraction(lam)
        for i in range(7):
            for j in range(7):
                exact = sum((max(F[i][k] - L * F[j][k], Fraction(0)) for k in range(7)), Fraction(0))
                assert Fraction(U[g, i, j]) >= exact
                assert U[g, i, j] <= float(exact) * (1 + 1e-12) + 1e-13  # tight up to the rounding margins


def test_subnormal_entries_are_left_to_the_exact_scan():
    P = np.array([[0.5, 0.5 - 1e-300, 1e-300], [0.2, 0.3, 0.5], [0.6, 0.4, 0.0]])
    assert prune_pairs(P, T.scan_list) is None


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_function_with_and_without_pruning_agree(monkeypatch, seed):
    # source: the same LossFunction built by the plain scan (pruning switched off)
    rng = np.random.default_rng(100 + seed)
    n = 170
    P = rng.random((n, n)) ** 3
    P[rng.random((n, n)) < 0.3] = 0.0
    P[:, 0] += 1e-6
    P /= P.sum(1, keepdims=True)
    alphas = np.array([0.0, 1e-4, 0.1, 1.0, 5.0, 40.0, 709.0, 1000.0])
    monkeypatch.setattr(tpl_loss, "_PRUNE_N", 10**9)
    plain = LossFunction(P)
    ref = plain.piecewise(alphas)
    monkeypatch.setattr(tpl_loss, "_PRUNE_N", 2)
    pruned = LossFunction(P)
    np.testing.assert_allclose(pruned.piecewise(alphas), ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pruned.per_pair(alphas), ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pruned.breakpoints, plain.breakpoints, rtol=1e-12)
    np.testing.assert_array_equal(pruned._zero_cand, plain._zero_cand)  # all pairs' D = 0 prefixes, formed lazily
    for eps in (0.05, 1.0, 8.0):
        a, b = supremum(plain, eps), supremum(pruned, eps)
        assert (a.status, a.case, a.q, a.d) == (b.status, b.case, b.q, b.d)
        assert (a.value is None and b.value is None) or abs(a.value - b.value) <= 1e-12 * max(1.0, a.value)


@pytest.mark.parametrize("n", [1, 2, 7, 60, 130])
def test_pair_total_variations_bound_the_exact_ones(n):
    # source: exact rational Σ_k (P_ik − P_jk)⁺ of every ordered pair; numpy (n < 32) and the compiled
    # pass (n = 60; on 2 threads for n = 130) must be an upper bound within its slack,
    # also for rows summing to 1 only up to 1e-9 (the old 1 − Σ min was not a bound there) and subnormals
    rng = np.random.default_rng(n)
    P = rng.random((n, n)) * (1.0 + 1e-9 * rng.standard_normal((n, 1)))
    P /= P.sum(1, keepdims=True)
    P[:, 0] *= 1.0 + 1e-9 * rng.standard_normal(n)  # rows off stochastic by about 1e-9
    if n > 2:
        P[1, 1] = 3e-320
    got = T._pair_tv(P)
    slack = 8.0 * (n + 2) * np.finfo(float).eps
    rows = [[Fraction(x) for x in row] for row in P.tolist()]
    pick = range(n) if n <= 60 else rng.integers(0, n, 25)
    for i in pick:
        for j in range(n):
            if i == j:
                assert got[i, j] == 0.0
                continue
            exact = sum((max(a - b, Fraction(0)) for a, b in zip(rows[i], rows[j])), Fraction(0))
            assert exact <= Fraction(got[i, j]) <= exact + Fraction(2.0 * slack), (i, j)  # slack + its own addition


@pytest.mark.parametrize("seed", range(4))
def test_compiled_pair_values_match_the_subset_enumeration(seed):
    # source: eqs. (19)–(21) of Cao et al. (2019) by enumerating every index set S in mpmath (60
    # digits, rows normalised exactly): Theorem 5's sorted prefixes in log space, numpy and compiled,
    # must give each pair's max over S within 1e-13, with subnormal entries, α = 1e-9 … 1000
    import itertools

    import mpmath as mp

    from _mp_refs import mpf_matrix

    rng = np.random.default_rng(seed)
    n = 5
    P = rng.dirichlet(np.full(n, 0.3), size=n)
    P[0, 1], P[2, 3] = 4e-320, 0.0
    P /= P.sum(1, keepdims=True)
    M = mpf_matrix(P)
    pi, pj = np.divmod(np.arange(n * n), n)
    from policyopt.privacy import tpl_kernels

    assert n < T._COMPILED_N  # _pair_values takes its numpy path here; the compiled loop is called directly
    for alpha in (1e-9, 0.1, 1.0, 50.0, 1000.0):
        got = T._pair_values(P, pi, pj, alpha)
        compiled = np.empty(pi.size)
        tpl_kernels.pair_values(P, pi, pj, alpha, compiled)
        u = mp.expm1(mp.mpf(alpha))
        for m, (i, j) in enumerate(zip(pi.tolist(), pj.tolist())):
            best = mp.mpf(0)
            for r in range(1, n + 1):
                for S in itertools.combinations(range(n), r):
                    Q, D = sum(M[i, k] for k in S), sum(M[j, k] for k in S)
                    best = max(best, mp.log((Q * u + 1) / (D * u + 1)))
            for value in (got[m], compiled[m]):
                assert abs(value - float(best)) <= 1e-13 * max(1.0, float(best)), (alpha, i, j, value, best)
