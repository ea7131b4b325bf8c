"""FRAN (Luo et al. 2025, Algorithm 1), d(k), MSE (22) and the leakage bounds: sound ≥ exact; (15) and (19) are not bounds."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _refs import dec_leak
from policyopt.privacy.age_dependent import risk_after_aging
from policyopt.models.cmc import CouplingMarkovChain, two_binary_cmc
from policyopt.errors import InvalidInputError
from policyopt.privacy.fran import (
    FRAN,
    PaperBoundWarning,
    Query,
    exact_leakage,
    mse,
    paper_leakage,
    simulate_release,
    sound_leakage,
    tight_distance,
    tight_leakage,
)
from policyopt.models.markov import MarkovChain


def independent_binary(p, q):
    P = [[1 - p, p], [q, 1 - q]]
    return CouplingMarkovChain(P, np.eye(2), [0.0, 1.0], n_sequences=2)


def grid_leakage(cmc, query, aoi, eps, n=4001):
    """Independent reference: densities of the two Laplace mixtures on a grid (atoms included), max log ratio."""
    K = cmc.aged_kernel(aoi)
    F = query(cmc.state_values[cmc.snapshots])[:, 0]
    b = query.sensitivity(cmc) / eps
    ys = np.union1d(np.linspace(F.min() - 3 * b, F.max() + 3 * b, n), F)
    dens = K @ np.exp(-np.abs(ys[None, :] - F[:, None]) / b)  # (N, len(ys)), up to 1/(2b)
    best = 0.0
    s, m = cmc.n_sequences, cmc.n_states
    X = cmc.snapshots
    for a, c in itertools.product(range(len(X)), repeat=2):
        if (X[a] != X[c]).sum() == 1:
            best = max(best, float(np.max(np.log(dens[a] / dens[c]))))
    return best


def test_query_sensitivities_closed_form_vs_enumeration():
    # source: Luo et al. (2025), Definition 8: d(k) = k for sum/mean, 1 for max/min
    T = np.random.default_rng(1).dirichlet(np.ones(3), size=(3, 3, 3))
    cmc = CouplingMarkovChain(T, np.full((3, 3), 1 / 3), [0.0, 1.0, 5.0])
    for name, fn in [("mean", lambda a: a.mean(axis=1)), ("sum", lambda a: a.sum(axis=1)),
                     ("max", lambda a: a.max(axis=1)), ("min", lambda a: a.min(axis=1))]:
        named, custom = Query(name), Query(fn, name=f"custom {name}")
        for i in (1, 2, 3):
            assert named.sensitivity_at(cmc, i) == pytest.approx(custom.sensitivity_at(cmc, i), abs=1e-12)
        assert named.k_sensitivity(cmc) == pytest.approx({"mean": 3, "sum": 3, "max": 1, "min": 1}[name])
    assert Query("mean").sensitivity(cmc) == pytest.approx(5 / 3)
    with pytest.raises(InvalidInputError, match=r"query `const` is constant"):
        Query(lambda a: np.zeros(len(a)), name="const").k_sensitivity(cmc)
    with pytest.raises(InvalidInputError, match=r"`func` must be one of"):
        Query("median")


def test_sound_bound_values_and_the_paper_inequality_failure():
    # source: issue 5 / Luo et al. (2025) Appendix B eq. (45): x = 0.5, y = 2 gives ln(1 + 0.5(e² − 1)) = 1.434 > x·y = 1
    assert sound_leakage(0.5, 1.0, 2.0) == pytest.approx(math.log(1 + 0.5 * (math.e ** 2 - 1)), rel=1e-14)
    with pytest.warns(PaperBoundWarning, match="not an upper bound"):
        assert paper_leakage(0.5, 1.0, 2.0) == pytest.approx(1.0)
    assert sound_leakage(0.5, 1.0, 2.0) > 1.43
    assert sound_leakage(0.0, 50.0, 2.0) == 0.0
    assert sound_leakage(1e-30, 50.0, 2.0) == pytest.approx(dec_leak(1e-30, 100.0), rel=1e-12)
    assert sound_leakage(0.3, 50.0, 2.0) == pytest.approx(dec_leak(0.3, 100.0), rel=1e-14)
    with pytest.raises(InvalidInputError, match=r"`d_k` must be a finite number ≥ 0"):
        sound_leakage(0.3, 1.0, -1.0)
    with pytest.raises(InvalidInputError, match=r"`max_tv` must lie in \[0, 1\]"):
        sound_leakage(1.3, 1.0, 1.0)


def test_exact_leakage_matches_grid_reference():
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    for aoi, eps in [((1, 1), 1.0), ((2, 0), 0.5), ((3, 1), 3.0)]:
        for q in (Query("mean"), Query("max")):
            ex = exact_leakage(cmc, q, aoi, eps)
            assert ex == pytest.approx(grid_leakage(cmc, q, aoi, eps), rel=1e-9, abs=1e-12)


def test_lemma1_independent_sequences_reduce_to_dp():
    # source: Luo et al. (2025), Lemma 1 (first case): no aging, independent sequences: CSDP leakage = ε_C (DP)
    cmc = independent_binary(0.2, 0.4)
    q = Query("sum")
    assert q.k_sensitivity(cmc) == 1.0
    for eps in (0.1, 1.0, 7.0, 50.0):
        dist = cmc.aged_distance((0, 0))
        assert dist == 1.0
        assert exact_leakage(cmc, q, (0, 0), eps) == pytest.approx(eps, rel=1e-12)
        assert sound_leakage(dist, eps, 1.0) == pytest.approx(eps, rel=1e-12)


def test_lemma1_temporal_only_reduces_to_adp():
    # source: Luo et al. (2025), Lemma 1 (second case) and Zhang et al. (2024), Theorem 1 (14): ln(1 + Δ(t)(e^{ε_C} − 1))
    p, q = 0.2, 0.4
    cmc = independent_binary(p, q)
    chain = MarkovChain([[1 - p, p], [q, 1 - q]])
    for a in (1, 2, 5):
        for eps in (0.5, 2.0, 50.0):
            got = sound_leakage(cmc.aged_distance((a, a)), eps, Query("sum").k_sensitivity(cmc))
            assert got == pytest.approx(risk_after_aging(chain.max_tv(a), eps), rel=1e-12)
            assert chain.max_tv(a) == pytest.approx(abs(1 - p - q) ** a, rel=1e-12)  # Zhang et al. (2024), eq. (47)


@st.composite
def small_cmcs(draw):
    s = draw(st.integers(1, 3))
    m = draw(st.integers(2, 3 if s < 3 else 2))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    conc = draw(st.sampled_from([0.3, 1.0, 3.0]))
    T = rng.dirichlet(np.ones(m) * conc, size=(s, s, m))
    lam = rng.dirichlet(np.ones(s) * conc, size=s)
    if draw(st.booleans()):
        lam = np.eye(s) if draw(st.booleans()) else lam
    aoi = tuple(draw(st.integers(0, 3)) for _ in range(s))
    return CouplingMarkovChain(T, lam, np.sort(rng.random(m)) * 3), aoi


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cmcs(), st.floats(0.05, 30.0), st.sampled_from(["mean", "sum", "max", "min"]))
def test_sound_bound_dominates_exact_leakage(model, eps, qname):
    cmc, aoi = model
    q = Query(qname)
    ex = exact_leakage(cmc, q, aoi, eps)
    dist = cmc.aged_distance(aoi)
    assert sound_leakage(dist, eps, q.k_sensitivity(cmc)) >= ex - 1e-9
    assert cmc.aged_distance(aoi, "any") >= dist - 1e-15
    assert ex <= q.k_sensitivity(cmc) * eps + 1e-9  # never above the unaged group-DP level


def test_paper_bound_is_below_the_exact_leakage():
    # Counterexample to Luo et al. (2025) Theorem 1 (15), in the paper's own family (eq. 25 with λ = 0.5):
    # p = q = 0.05, A_t = (3, 3), ε_C = 1, mean query (d(2) = 2).
    cmc, q = two_binary_cmc(0.05, 0.05, 0.5), Query("mean")
    dist = cmc.aged_distance((3, 3))
    ex = exact_leakage(cmc, q, (3, 3), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaperBoundWarning)
        pb = paper_leakage(dist, 1.0, 2.0)
    assert ex == pytest.approx(grid_leakage(cmc, q, (3, 3), 1.0), rel=1e-9)
    assert pb == pytest.approx(0.795430, abs=1e-6) and ex == pytest.approx(0.856762, abs=1e-6)
    assert pb < ex <= sound_leakage(dist, 1.0, 2.0)


def test_tight_bound_is_not_an_upper_bound():
    # Luo et al. (2025) Theorem 2 (19) as printed: below the exact leakage for coupled and for independent sequences.
    cmc, q = two_binary_cmc(0.1, 0.95, 0.9), Query("mean")
    ex = exact_leakage(cmc, q, (1, 1), 5.0)
    ti = tight_leakage(cmc, (1, 1), 5.0)
    assert ex == pytest.approx(grid_leakage(cmc, q, (1, 1), 5.0), rel=1e-9)
    assert ti == pytest.approx(0.520463, abs=1e-6) and ex == pytest.approx(0.631840, abs=1e-6)
    assert ti < ex
    # independent chains: ḡ = g̲ = 1, so Δ̄ is each chain's Δ(A) = |1 − p − q|^A and (19) = Δ·ε_C < exact
    ind = independent_binary(0.9, 0.05)
    assert tight_distance(ind, (2, 2)) == pytest.approx(0.05 ** 2, rel=1e-9)
    ex2 = exact_leakage(ind, q, (2, 2), 5.0)
    ti2 = tight_leakage(ind, (2, 2), 5.0)
    assert ti2 == pytest.approx(0.0125, rel=1e-9) and ti2 < ex2
    assert ex2 == pytest.approx(grid_leakage(ind, q, (2, 2), 5.0), rel=1e-9)
    # with no aging both (19) and the exact leakage equal ε_C for independent sequences
    assert tight_leakage(ind, (0, 0), 2.0) == pytest.approx(2.0)
    assert exact_leakage(ind, q, (0, 0), 2.0) == pytest.approx(2.0)


def test_mse_closed_form_matches_monte_carlo():
    cmc, q = two_binary_cmc(0.3, 0.3, 0.75), Query("mean")
    aoi, eps = (2, 1), 1.5
    expected = mse(cmc, q, aoi, eps)
    # independent reference for the noise-free part: E[(f(z) − f(x))²] by path sums
    rng = np.random.default_rng(2026)
    P, X = cmc.joint_chain.P, cmc.snapshots
    T = 200_000
    cum = np.cumsum(P, axis=1)
    path = np.empty(T, dtype=np.int64)
    path[0] = 0
    u = rng.random(T)
    for t in range(1, T):
        path[t] = np.searchsorted(cum[path[t - 1]], u[t] * cum[path[t - 1], -1], side="right")
    history = X[path].astype(float)
    mech = FRAN(q, aoi, eps, q.sensitivity(cmc))
    ages = np.array(aoi)
    t_idx = np.arange(10, T)
    aged = history[t_idx[:, None] - ages[None, :], np.arange(2)[None, :]]
    released = aged.mean(axis=1) + rng.laplace(0.0, mech.scale, size=t_idx.size)
    err = (released - history[t_idx].mean(axis=1)) ** 2
    assert err.mean() == pytest.approx(expected, rel=0.02)
    # the simulation helper draws from the same law
    sims = simulate_release(mech, history[:100], rng, size=50_000)[:, 0]
    base = q(mech.age(history[:100]))[0]
    assert np.var(sims - base) == pytest.approx(2 * mech.scale ** 2, rel=0.05)


def test_fran_release_uses_opendp_and_ages():
    hist = np.arange(20, dtype=float).reshape(10, 2)  # slot t holds (2t, 2t + 1)
    mech = FRAN("mean", (2, 0), 1.0, 0.5)
    np.testing.assert_array_equal(mech.age(hist), [14.0, 19.0])  # x^(1)_{9−2}, x^(2)_{9}
    np.testing.assert_array_equal(mech.age(hist, t=5), [6.0, 11.0])
    assert mech.opendp_epsilon == pytest.approx(1.0, rel=1e-6) and mech.opendp_epsilon >= 1.0
    outs = np.array([mech.release(hist)[0] for _ in range(3000)]) - 16.5
    assert abs(np.median(outs)) < 0.06
    assert np.mean(np.abs(outs)) == pytest.approx(0.5, rel=0.08)  # E|Lap(b)| = b = Δf/ε_C
    vec = FRAN("identity", (0, 1), 2.0, 1.0)
    assert vec.release(hist).shape == (2,)
    with pytest.raises(InvalidInputError, match=r"`t`=1 is younger than the age A\^\(0\)=2"):
        mech.age(hist, t=1)
    with pytest.raises(InvalidInputError, match=r"`history` must have shape \(T, 2\)"):
        mech.age(np.zeros((4, 3)))
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be finite and > 0"):
        FRAN("mean", (1, 1), 0.0, 0.5)
    with pytest.raises(InvalidInputError, match=r"`aoi` must be non-negative integers"):
        FRAN("mean", (1, -1), 1.0, 0.5)


def test_exact_needs_scalar_query():
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    with pytest.raises(InvalidInputError, match=r"needs a scalar query \(d = 1\), query `identity` has d = 2"):
        exact_leakage(cmc, Query("identity"), (1, 1), 1.0)
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be finite and > 0"):
        exact_leakage(cmc, Query("mean"), (1, 1), -1.0)
