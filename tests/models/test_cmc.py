"""Coupling Markov chain (Luo et al. 2025, eqs. 4–5), its joint snapshot chain, aging kernel and Δ_k (Definition 9)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _refs import brute_max_tv
from policyopt.models.cmc import CouplingMarkovChain, two_binary_cmc
from policyopt.models.cmc_fit import fit_cmc, fit_cmc_from_readings
from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.models.markov import MarkovChain


def random_cmc(rng, s, m, conc=1.0):
    T = rng.dirichlet(np.ones(m) * conc, size=(s, s, m))
    lam = rng.dirichlet(np.ones(s), size=s)
    return CouplingMarkovChain(T, lam)


def brute_joint(cmc):
    """Joint transition matrix by summing over every vector of sources (k_1..k_s) explicitly."""
    s, m = cmc.n_sequences, cmc.n_states
    X = list(itertools.product(range(m), repeat=s))
    P = np.zeros((len(X), len(X)))
    for a, x in enumerate(X):
        for b, y in enumerate(X):
            tot = 0.0
            for ks in itertools.product(range(s), repeat=s):
                pr = 1.0
                for j, k in enumerate(ks):
                    pr *= cmc.coupling[j, k] * cmc.transitions[j, k][x[k], y[j]]
                tot += pr
            P[a, b] = tot
    return P


def marginals(mu, cmc):
    X = cmc.snapshots
    return np.array([[mu[X[:, j] == a].sum() for a in range(cmc.n_states)] for j in range(cmc.n_sequences)])


def test_q_block_matrix_two_binary():
    # source: Luo et al. (2025), eq. (5) with P^(jk) of eq. (25) and λ = 0.5: blocks λ_jk P^(jk)ᵀ
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    block = 0.5 * np.array([[0.7, 0.3], [0.3, 0.7]])
    np.testing.assert_allclose(cmc.Q, np.block([[block, block], [block, block]]), atol=1e-15)
    np.testing.assert_allclose(cmc.stationary, [[0.5, 0.5], [0.5, 0.5]], atol=1e-12)


@pytest.mark.parametrize("s,m,seed", [(2, 2, 1), (3, 2, 2), (2, 3, 3)])
def test_joint_chain_matches_source_enumeration(s, m, seed):
    cmc = random_cmc(np.random.default_rng(seed), s, m)
    np.testing.assert_allclose(cmc.joint_chain.P, brute_joint(cmc), atol=1e-13)


@pytest.mark.parametrize("s,m,seed", [(2, 2, 4), (3, 3, 5), (4, 2, 6)])
def test_joint_marginals_evolve_by_Q(s, m, seed):
    # source: Luo et al. (2025), eqs. (4)–(5): marginals of the joint chain move by Q
    rng = np.random.default_rng(seed)
    cmc = random_cmc(rng, s, m)
    mu = rng.dirichlet(np.ones(cmc.n_snapshots))
    for _ in range(3):
        nxt = mu @ cmc.joint_chain.P
        np.testing.assert_allclose(marginals(nxt, cmc), cmc.step_marginals(marginals(mu, cmc)), atol=1e-13)
        col = cmc.Q @ marginals(mu, cmc).reshape(-1)  # the paper's column form
        np.testing.assert_allclose(marginals(nxt, cmc).reshape(-1), col, atol=1e-13)
        mu = nxt
    np.testing.assert_allclose(marginals(cmc.joint_stationary, cmc), cmc.stationary, atol=1e-10)


def test_aged_joint_matches_path_enumeration():
    cmc = random_cmc(np.random.default_rng(7), 3, 2)
    P, pi, X = cmc.joint_chain.P, cmc.joint_stationary, cmc.snapshots
    J = np.einsum("a,ab,bc->abc", pi, P, P)  # states at t−2, t−1, t
    W = np.zeros((8, 8))
    for a, b, x in itertools.product(range(8), repeat=3):
        z = (X[a][0], X[x][1], X[b][2])  # AoI (2, 0, 1)
        W[z[0] * 4 + z[1] * 2 + z[2], x] += J[a, b, x]
    np.testing.assert_allclose(cmc.aged_joint((2, 0, 1)), W, atol=1e-15)
    K = cmc.aged_kernel((2, 0, 1))
    np.testing.assert_allclose(K.sum(axis=1), 1.0, atol=1e-12)


def test_uniform_aoi_kernel_is_reversed_power_and_any_distance_is_max_tv():
    cmc = random_cmc(np.random.default_rng(8), 2, 3, conc=0.5)
    joint = cmc.joint_chain
    for a in (0, 1, 3):
        # source: Zhang et al. (2024), eq. (1): reversed chain P̂ = D^{-1} Pᵀ D, a-step rows
        np.testing.assert_allclose(cmc.aged_kernel(a), np.linalg.matrix_power(joint.reversed_matrix, a), atol=1e-12)
        ref = brute_max_tv(joint.P, a)  # source: Zhang et al. (2024), eq. (12)
        assert cmc.aged_distance(a, "any") == pytest.approx(ref, abs=1e-12)
        C = cmc.aged_kernel((a, a))
        brute_any = max(0.5 * np.abs(C[i] - C[j]).sum() for i in range(9) for j in range(9))
        assert brute_any == pytest.approx(ref, abs=1e-12)
        assert cmc.aged_distance((a, a), "one") <= ref + 1e-15


def test_distance_decays_to_zero_with_age():
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    d = [cmc.aged_distance(a) for a in range(31)]
    assert d[0] == 1.0
    assert all(x >= y - 1e-15 for x, y in zip(d, d[1:]))
    assert d[30] < 1e-10
    # hand value: A = 1, x = (0,0) vs (0,1): rows of the reversed joint chain differ by 0.24
    assert d[1] == pytest.approx(0.24, abs=1e-12)


def test_temporal_only_distance_is_max_of_single_chains():
    # source: Luo et al. (2025), Lemma 1 (temporal correlation only): Δ reduces to each chain's Δ(t) of Zhang et al. (2024) eq. (12)
    rng = np.random.default_rng(9)
    P1, P2 = rng.dirichlet(np.ones(3), size=3), rng.dirichlet(np.ones(3), size=3)
    T = np.zeros((2, 2, 3, 3))
    T[0, 0], T[1, 1], T[0, 1], T[1, 0] = P1, P2, np.eye(3), np.eye(3)
    cmc = CouplingMarkovChain(T, np.eye(2))
    assert cmc.correlation_degree == 1
    for a, b in [(0, 0), (1, 2), (3, 1), (2, 2)]:
        ref = max(brute_max_tv(P1, a), brute_max_tv(P2, b))
        assert cmc.aged_distance((a, b)) == pytest.approx(ref, abs=1e-12)


def test_correlation_degree():
    m = np.array([[0.9, 0.1], [0.2, 0.8]])
    lam = [[0.5, 0.5, 0], [0, 1, 0], [0, 0, 1]]
    assert CouplingMarkovChain(m, lam, n_sequences=3).correlation_degree == 2
    assert CouplingMarkovChain(m, np.eye(3), n_sequences=3).correlation_degree == 1
    assert CouplingMarkovChain(m, np.full((3, 3), 1 / 3), n_sequences=3).correlation_degree == 3


def test_validation_errors():
    P = [[0.9, 0.1], [0.2, 0.8]]
    with pytest.raises(InvalidModelError, match=r"`coupling` row 0 sums to"):
        CouplingMarkovChain(P, [[0.5, 0.6], [0.5, 0.5]], n_sequences=2)
    with pytest.raises(InvalidModelError, match=r"`coupling` must be finite and ≥ 0"):
        CouplingMarkovChain(P, [[1.5, -0.5], [0.5, 0.5]], n_sequences=2)
    with pytest.raises(InvalidModelError, match=r"transitions\[0, 1\].*row 1 sums to"):
        T = np.broadcast_to(np.array(P), (2, 2, 2, 2)).copy()
        T[0, 1, 1] = [0.5, 0.6]
        CouplingMarkovChain(T, np.eye(2))
    with pytest.raises(InvalidModelError, match=r"give `n_sequences`"):
        CouplingMarkovChain(P, np.eye(2))
    with pytest.raises(InvalidModelError, match=r"`coupling` must have shape \(2, 2\)"):
        CouplingMarkovChain(P, np.eye(3), n_sequences=2)
    with pytest.raises(InvalidModelError, match=r"`p` must be a probability"):
        two_binary_cmc(1.2, 0.3, 0.5)
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    with pytest.raises(InvalidInputError, match=r"`aoi` must hold one age per sequence \(2\)"):
        cmc.aged_distance((1, 2, 3))
    with pytest.raises(InvalidInputError, match=r"`aoi` must be non-negative integers"):
        cmc.aged_distance((1, -2))
    with pytest.raises(InvalidInputError, match=r"`neighbours` must be 'one' or 'any'"):
        cmc.aged_distance(1, "all")


def test_exact_limit_is_a_clear_error():
    big = CouplingMarkovChain([[0.9, 0.1], [0.2, 0.8]], np.full((13, 13), 1 / 13), n_sequences=13)
    assert big.n_snapshots == 8192 and big.correlation_degree == 13
    with pytest.raises(InvalidModelError, match=r"8192 snapshots, above the exact limit 4096.*spectral upper bound"):
        big.joint_chain
    ok = two_binary_cmc(0.3, 0.3, 0.5)
    assert ok.spectral_max_tv(4) >= ok.aged_distance(4, "any") - 1e-15  # source: Zhang et al. (2024), eq. (55)


def test_fit_recovers_a_lagged_copy():
    # sequence 2 copies sequence 1 with one slot of delay: λ_21 = 1, P^(21) = I
    rng = np.random.default_rng(10)
    P = np.array([[0.8, 0.2], [0.3, 0.7]])
    T = 20000
    x1 = np.zeros(T, dtype=np.int64)
    for t in range(1, T):
        x1[t] = rng.random() < P[x1[t - 1], 1]
    x2 = np.concatenate([[0], x1[:-1]])
    cmc = fit_cmc(np.stack([x1, x2], axis=1), 2, smoothing=0.0)
    assert cmc.coupling[1, 0] == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(cmc.transitions[1, 0], np.eye(2), atol=1e-12)
    np.testing.assert_allclose(cmc.transitions[0, 0], P, atol=0.02)
    assert cmc.coupling[0, 0] > 0.9  # sequence 1 is best predicted by itself


def test_fit_bundled_homes():
    from policyopt.data import load_citylearn

    cmc = fit_cmc_from_readings(load_citylearn(), ["Building_1", "Building_2"], 3)
    assert cmc.n_sequences == 2 and cmc.n_states == 3
    assert np.all(np.diff(cmc.state_values) > 0)
    np.testing.assert_allclose(cmc.coupling.sum(axis=1), 1.0, atol=1e-12)
    assert cmc.joint_chain.is_irreducible
    with pytest.raises(InvalidInputError, match=r"`users` not found in the data: \['Building_99'\]"):
        fit_cmc_from_readings(load_citylearn(), ["Building_1", "Building_99"], 3)
    with pytest.raises(InvalidInputError, match=r"`states` entries must lie in 0..1"):
        fit_cmc(np.array([[0, 2], [1, 1]]), 2)


def test_pairwise_lower_bound_matches_marginalised_kernel():
    cmc = random_cmc(np.random.default_rng(13), 3, 2)
    lb2 = cmc.pairwise_distance(3)
    single = cmc.single_sequence_distance(3)
    X = cmc.snapshots
    pairs = cmc.neighbour_pairs()
    for aoi in [(0, 1, 2), (3, 0, 0), (2, 2, 1)]:
        K = cmc.aged_kernel(aoi)
        for i, j in [(0, 1), (0, 2), (1, 2)]:
            M = np.zeros((8, 4))
            for z in range(8):
                M[:, X[z, i] * 2 + X[z, j]] += K[:, z]  # law of (z_i, z_j) by summing the joint kernel
            ref = max(0.5 * np.abs(M[a] - M[b]).sum() for a, b in pairs)
            assert lb2[i, j, aoi[i], aoi[j]] == pytest.approx(ref, abs=1e-12)
            assert lb2[i, j, aoi[i], aoi[j]] >= max(single[i, aoi[i]], single[j, aoi[j]]) - 1e-12
        assert max(lb2[i, j, aoi[i], aoi[j]] for i in range(3) for j in range(3) if i != j) <= cmc.aged_distance(aoi) + 1e-12


def test_one_entry_distance_matches_brute_force():
    cmc = random_cmc(np.random.default_rng(14), 3, 3, conc=0.5)
    X = cmc.snapshots
    for aoi in [(0, 0, 0), (1, 0, 2), (2, 2, 2)]:
        K = cmc.aged_kernel(aoi)
        ref = max(0.5 * np.abs(K[a] - K[b]).sum() for a in range(27) for b in range(27)
                  if (X[a] != X[b]).sum() == 1)  # source: Luo et al. (2025) Definition 5 (one entry differs)
        assert cmc.aged_distance(aoi) == pytest.approx(ref, abs=1e-13)
    assert cmc.aged_distance((0, 0, 0)) == 1.0


# ------------------------------------------------------------------ matrix-free spectral bound
def test_matrix_free_products_match_dense():
    from policyopt.models.cmc_spectral import JointOperator as _JointOperator

    rng = np.random.default_rng(40)
    for s, m in ((1, 3), (3, 2), (4, 3)):
        cmc = random_cmc(rng, s, m)
        P = brute_joint(cmc) if s <= 3 else cmc.joint_chain.P  # source: Luo et al. (2025) eq. (4), sources summed explicitly
        op = _JointOperator(cmc)
        V = rng.standard_normal((cmc.n_snapshots, 3))
        np.testing.assert_allclose(op.matvec(V), P @ V, atol=1e-13)
        np.testing.assert_allclose(op.rmatvec(V), P.T @ V, atol=1e-13)
        np.testing.assert_allclose(op.matvec(V[:, 0]), P @ V[:, 0], atol=1e-13)


@pytest.mark.parametrize("s,m,seed", [(2, 2, 1), (6, 2, 2), (4, 3, 3), (8, 2, 4), (5, 3, 5), (9, 2, 6), (6, 3, 7)])
def test_matrix_free_spectral_bound_equals_dense(s, m, seed):
    rng = np.random.default_rng(seed)
    cmc = random_cmc(rng, s, m)
    ts = np.arange(0, 15)
    cert = cmc.spectral_certificate()
    dense = cmc.joint_chain.spectral_bound(ts)  # source: Zhang et al. (2024) eq. (55), dense SVD (policyopt.models.markov)
    mf = cmc.spectral_max_tv(ts, method="matrix-free")
    np.testing.assert_allclose(mf, dense, rtol=0, atol=1e-9)
    assert np.all(mf >= dense - 1e-12)  # the certificate only adds margins
    assert abs(cert.rate - cmc.joint_chain.spectral_rate) < 1e-9
    exact = cmc.joint_chain.max_tv(ts)  # source: Zhang et al. (2024) eq. (12), exact Δ(t) of the joint chain
    assert np.all(mf >= exact - 1e-15)
    # the certified stationary vector is the joint chain's (GTH elimination) within its proven error
    err = np.abs(cert.stationary - cmc.joint_stationary).sum()
    assert err <= cert.stationary_l1_error + 1e-14


@pytest.mark.slow
def test_spectral_bound_of_thirteen_independent_sequences_has_a_closed_form():
    # λ = I: the joint chain is the tensor product of 13 chains, so D^{1/2}PD^{-1/2} = ⊗_j B_j, whose second
    # singular value is max_j σ₂(B_j), and π_min = Π_j min π_j (source: Zhang et al. (2024) eq. 55; singular values of ⊗).
    rng = np.random.default_rng(13)
    s = 13
    chains = [np.array([[1 - a, a], [b, 1 - b]]) for a, b in rng.uniform(0.2, 0.8, size=(s, 2))]
    T = np.zeros((s, s, 2, 2))
    for j in range(s):
        for k in range(s):
            T[j, k] = chains[j]
    cmc = CouplingMarkovChain(T, np.eye(s))
    assert cmc.n_snapshots == 8192
    pis = [np.array([b, a]) / (a + b) for (a, b) in ((c[0, 1], c[1, 0]) for c in chains)]
    rate = max(abs(1 - c[0, 1] - c[1, 0]) for c in chains)  # two-state chains are reversible: σ₂ = |1 − a − b|
    pmin = float(np.prod([p.min() for p in pis]))
    ts = np.arange(0, 30)
    ref = np.minimum(1.0, np.sqrt((1 - pmin) / pmin) * rate ** ts)
    got = cmc.spectral_max_tv(ts)
    # rtol 1e-7: the certificate inflates the rate by its proven stationary-vector margin (τ ≈ 6e-10 here)
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-12)
    assert np.all(got >= ref - 1e-15)
    cert = cmc.spectral_certificate()
    assert cert.failure_probability == pytest.approx(1e-12) and cert.n_snapshots == 8192
    # marginals of the certified joint stationary vector = stationary vector of Q (Luo et al. 2025 eq. 5)
    marg = np.stack([np.bincount(cmc.snapshot_grid()[:, j], weights=cert.stationary, minlength=2) for j in range(s)])
    assert np.abs(marg - cmc.stationary).max() <= cert.stationary_l1_error + 1e-12


def test_spectral_limit_is_a_clear_error():
    huge = CouplingMarkovChain([[0.9, 0.1], [0.2, 0.8]], np.full((17, 17), 1 / 17), n_sequences=17)
    with pytest.raises(InvalidModelError, match=r"131072 snapshots, above the spectral limit 65536.*Δ_k ≤ 1"):
        huge.spectral_max_tv(3)
    with pytest.raises(InvalidModelError, match=r"not even the spectral bound.*Δ_k ≤ 1"):
        huge.joint_chain
    small = two_binary_cmc(0.3, 0.3, 0.5)
    with pytest.raises(InvalidInputError, match=r"`method` must be"):
        small.spectral_max_tv(1, method="svd")
    with pytest.raises(InvalidInputError, match=r"`kind` must be"):
        small.aged_distance_bound((1, 2), kind="exact")


@settings(max_examples=25, deadline=None)
@given(s=st.integers(1, 3), m=st.integers(2, 3), seed=st.integers(0, 10 ** 6),
       ages=st.lists(st.integers(0, 4), min_size=3, max_size=3))
def test_aged_distance_is_bounded_by_the_joint_chain_at_the_youngest_age(s, m, seed, ages):
    rng = np.random.default_rng(seed)
    cmc = random_cmc(rng, s, m, conc=0.7)
    aoi = ages[:s]
    joint = cmc.aged_distance_bound(aoi, kind="joint")
    assert joint == pytest.approx(float(cmc.joint_chain.max_tv(min(aoi))), abs=0)
    exact_any = cmc.aged_distance(aoi, "any")  # source: Luo et al. (2025) Definition 9, exact on the joint chain
    exact_one = cmc.aged_distance(aoi, "one")
    assert exact_one <= exact_any + 1e-12 and exact_any <= joint + 1e-12
    spectral = cmc.aged_distance_bound(aoi)
    assert spectral >= joint - 1e-12
    assert cmc.spectral_max_tv(min(aoi), method="matrix-free") >= joint - 1e-12


def test_exact_distance_is_kept_by_model_content_and_equals_a_fresh_computation():
    """Δ_k in exact arithmetic is kept by the model's numbers: a second chain with the same numbers (a sweep over
    l̄ builds one per problem) reads it, and every kept value equals the computation without the caches."""
    from policyopt.models import cmc_exact as module

    a = two_binary_cmc(0.2, 0.35, 0.6)
    b = two_binary_cmc(0.2, 0.35, 0.6)
    for ages in ([0, 0], [1, 3], [2, 2], [4, 0]):
        first = a.aged_distance(ages)
        key = (module.content_key(a), tuple(ages), "one")
        assert module._RATIONAL_DELTA[key] == first and module.content_key(b) == module.content_key(a)
        assert b.aged_distance(ages) == first
        module._RATIONAL_JOINT.clear()
        assert module.exact_aged_distance_uncached(b, ages, "one") == first
    other = two_binary_cmc(0.2, 0.35, 0.61)  # other numbers: its own value
    assert module.content_key(other) != module.content_key(a)
    assert other.aged_distance([1, 3]) != a.aged_distance([1, 3])
