"""Tests of policyopt.privacy.temporal: loss function (eq. 24), BPL/FPL/TPL (eqs. 10–16), supremum (Theorem 11).

Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.privacy.temporal import LossFunction, Supremum, leakage, supremum, window_leakage

EX4 = [[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]]  # source: Cao et al. (2019), Example 4 / Fig. 4
EX2 = [[0.8, 0.2], [0.0, 1.0]]  # source: Cao et al. (2019), Examples 2–3 (blue lines of Fig. 3)
FIG8_B = [[0.8, 0.2], [0.2, 0.8]]  # source: Cao et al. (2019), Fig. 8 setting (P_B)
FIG8_F = [[0.8, 0.2], [0.1, 0.9]]  # source: Cao et al. (2019), Fig. 8 setting (P_F)


def dec_log_f(Q, D, alpha):
    """log[(Q(e^α − 1) + 1)/(D(e^α − 1) + 1)] (eq. 24) in 100-digit decimals."""
    with localcontext() as ctx:
        ctx.prec = 100
        u = Decimal(alpha).exp() - 1
        return float(((Decimal(Q) * u + 1) / (Decimal(D) * u + 1)).ln())


def brute_loss(P, alpha):
    """Eq. (24) by enumerating every index set S for every ordered pair (Lemma 1: x ∈ {m, m e^α})."""
    P = np.asarray(P, dtype=float)
    n = P.shape[0]
    best = 0.0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            for mask in range(1, 2**n):
                S = np.array([(mask >> k) & 1 for k in range(n)], dtype=bool)
                x = np.where(S, np.exp(alpha), 1.0)
                best = max(best, np.log(P[i] @ x) - np.log(P[j] @ x))
    return best


# ---------------------------------------------------------------------------- loss function


def test_example4_three_methods_agree():
    L = LossFunction(EX4)
    a = np.linspace(0.0, 15.0, 31)
    ex, pw, pp, lp = L.exact(a), L.piecewise(a), L.per_pair(a), L.lp(a)
    np.testing.assert_allclose(pw, ex, rtol=0, atol=1e-9)
    np.testing.assert_allclose(pp, ex, rtol=0, atol=1e-9)
    np.testing.assert_allclose(lp, ex, rtol=0, atol=1e-9)
    # source: Cao et al. (2019), eq. (24) by enumerating all subsets (Lemma 1), independent of Theorem 5
    np.testing.assert_allclose(ex, [brute_loss(EX4, x) for x in a], rtol=0, atol=1e-12)


def test_example4_alpha_40_is_log5_not_zero():
    L = LossFunction(EX4)
    # source: Cao et al. (2019), Example 4: for large α the top sub-function is rows (3, 1), q⁺ = 0.5, d⁺ = 0.1,
    # so L(40) = log[(0.5(e^40 − 1) + 1)/(0.1(e^40 − 1) + 1)] = log 5 − 3.4e-17 (MATLAB code: 0)
    ref = dec_log_f("0.5", "0.1", 40)
    for method in (L.exact, L.piecewise, L.per_pair):
        assert method(40.0) == pytest.approx(ref, abs=1e-15)
        assert method(40.0) == pytest.approx(np.log(5.0), abs=1e-15)


@pytest.mark.parametrize("alpha", [709.0, 710.0, 745.0, 1000.0])
def test_example4_large_alpha_finite(alpha):
    L = LossFunction(EX4)
    # source: Cao et al. (2019), Example 4; limit log(q⁺/d⁺) = log 5, reached to double precision (MATLAB code: NaN)
    for method in (L.exact, L.piecewise, L.per_pair):
        v = method(alpha)
        assert np.isfinite(v)
        assert v == pytest.approx(np.log(5.0), abs=1e-15)


def test_example4_piecewise_representation():
    L = LossFunction(EX4)
    # source: Cao et al. (2019), Example 4 / Theorems 9–10, derived by hand: near 0 the top sub-function is rows
    # (1, 3) with q⁺ = 0.7, d⁺ = 0.2 (slope Q − D = 0.5 ties with rows (3, 1), q⁺ = 0.8, d⁺ = 0.3, which
    # it dominates for α > 0); rows (3, 1) with q⁺ = 0.5, d⁺ = 0.1 overtake it at
    # u = e^α − 1 = (0.5 + 0.2 − 0.7 − 0.1)/(0.7·0.1 − 0.5·0.2) = 10/3 (Algorithm 4 line 4)
    np.testing.assert_allclose(L.breakpoints, [0.0, np.log(13 / 3)], rtol=1e-12)
    np.testing.assert_allclose(L.segment_Q, [0.7, 0.5], rtol=1e-12)
    np.testing.assert_allclose(L.segment_D, [0.2, 0.1], rtol=1e-12)


def test_algorithm2_example_transition_points():
    # source: Cao et al. (2019), text after Algorithm 2: q = [0.2, 0.3, 0.5], d = [0.1, 0, 0.9] gives
    # aArr = [Inf, 1.47, NaN] (1.47 = log(1 + 0.1/0.03); Algorithm 2 line 11 omits the "+1")
    P = [[0.2, 0.3, 0.5], [0.1, 0.0, 0.9], [0.3, 0.3, 0.4]]
    L = LossFunction(P)
    (t,) = [t for t in L.pairs if (t.row_q, t.row_d) == (0, 1)]
    np.testing.assert_allclose(t.Q, [0.3, 0.5], rtol=1e-15)
    np.testing.assert_allclose(t.D, [0.0, 0.1], rtol=1e-15)
    assert np.isinf(t.points[0])
    assert t.points[1] == pytest.approx(np.log(1 + 0.1 / 0.03), rel=1e-14)
    assert round(float(t.points[1]), 2) == 1.47


@pytest.mark.parametrize("P", [[[0.3, 0.7], [0.3, 0.7]], np.full((4, 4), 0.25), [[1.0]]])
def test_theorem6_identical_rows_zero(P):
    L = LossFunction(P)
    a = np.array([0.0, 0.5, 40.0, 1000.0])
    assert L.is_zero
    assert L.breakpoints.size == 0
    # source: Cao et al. (2019), Theorem 6: L ≡ 0
    for method in (L.exact, L.piecewise, L.per_pair):
        np.testing.assert_array_equal(method(a), np.zeros(4))
    assert L.lp(0.5) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("P", [np.eye(2), np.eye(3), [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]])
def test_theorem7_identity_loss(P):
    L = LossFunction(P)
    a = np.array([0.0, 0.3, 5.0, 40.0, 1000.0])
    assert L.is_identity
    # source: Cao et al. (2019), Theorem 7: q_i = 1, d_i = 0 gives L(α) = α
    for method in (L.exact, L.piecewise, L.per_pair):
        np.testing.assert_allclose(method(a), a, rtol=1e-15, atol=0)
    np.testing.assert_allclose(L.lp([0.3, 5.0]), [0.3, 5.0], rtol=1e-9)


def test_theorem7_without_special_case_flag():
    # The log-space sub-function alone gives exactly α for Q = 1, D = 0 (no overflow at 1000)
    from policyopt.privacy.tpl_envelope import log_f as _log_f

    a = np.array([0.0, 1.0, 800.0, 1000.0])
    # source: Cao et al. (2019), Theorem 7 (L(α) = α)
    np.testing.assert_allclose(_log_f(1.0, 0.0, 0.0, 1.0, a), a, rtol=1e-15)


def _tridiagonal(n):
    P = np.zeros((n, n))
    for i in range(n):
        P[i, max(0, i - 1):i + 2] = 1.0
    return P / P.sum(1, keepdims=True)


@pytest.mark.parametrize("n", [4, 6, 200])
def test_disjoint_supports_give_the_identity(n, monkeypatch):
    # source: eqs. (18)–(24) of Cao et al. (2019): rows 0 and 3 of a tridiagonal chain share no
    # positive entry, so S = supp(q) gives Q = 1, D = 0 and L(α) = α (no entry is 1: Theorem 7's
    # column test does not apply).  Checked against mpmath enumeration of every index set (n ≤ 6),
    # and against the plain scan of all pairs that the shortcut replaces (same envelope, same supremum)
    import policyopt.privacy.tpl_loss as temporal

    P = _tridiagonal(n)
    a = np.array([0.0, 1e-9, 0.3, 5.0, 40.0, 1000.0])
    L = LossFunction(P)
    assert L.is_identity
    for method in (L.exact, L.piecewise, L.per_pair) if n <= 6 else (L.exact, L.piecewise):
        np.testing.assert_array_equal(method(a), a)
    if n <= 6:
        from _mp_refs import loss as mp_loss

        for x in (0.3, 5.0):
            assert float(mp_loss(P, x)) == pytest.approx(x, rel=1e-15)
    sup = supremum(L, 0.2)
    monkeypatch.setattr(temporal, "_disjoint_pair", lambda P: None)
    plain = LossFunction(P)
    assert not plain.is_identity
    np.testing.assert_array_equal(plain.breakpoints, L.breakpoints)
    np.testing.assert_array_equal(plain.segment_Q, L.segment_Q)
    np.testing.assert_array_equal(plain.segment_D, L.segment_D)
    np.testing.assert_array_equal(plain.piecewise(a), a)
    assert supremum(plain, 0.2).value == sup.value


def test_overlapping_supports_are_not_the_identity():
    # source: mpmath enumeration of eqs. (18)–(21): every two rows share a positive entry, so no
    # index set has Q = 1 and D = 0, and L(1) < 1 strictly (disjoint supports are also necessary)
    from _mp_refs import loss as mp_loss

    P = [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.4, 0.2, 0.4]]
    L = LossFunction(P)
    assert not L.is_identity
    ref = float(mp_loss(P, 1.0))
    assert ref < 0.99
    assert L.exact(1.0) == pytest.approx(ref, rel=1e-12) and L.piecewise(1.0) == pytest.approx(ref, rel=1e-12)


def test_remark1_bounds_and_monotone():
    for P in (EX4, EX2, FIG8_B, FIG8_F):
        L = LossFunction(P)
        a = np.concatenate([np.linspace(0, 20, 201), [50.0, 100.0, 709.0, 800.0, 1000.0]])
        v = L.piecewise(a)
        # source: Cao et al. (2019), Remark 1: 0 ≤ L(α) ≤ α; L is non-decreasing (sub-functions increase, Theorem 10 proof)
        assert np.all(v >= 0) and np.all(v <= a)
        assert np.all(np.diff(v) >= -1e-15)


def test_example2_loss_by_hand():
    L = LossFunction(EX2)
    # source: Cao et al. (2019), Examples 2–3 matrix; hand: pairs give (q⁺, d⁺) = (0.8, 0) and (1, 0.2), so
    # L(0.1) = max(log(0.8(e^0.1 − 1) + 1), log(e^0.1/(0.2(e^0.1 − 1) + 1)))
    ref = max(np.log(0.8 * np.expm1(0.1) + 1), 0.1 - np.log(0.2 * np.expm1(0.1) + 1))
    assert L.exact(0.1) == pytest.approx(ref, abs=1e-15)
    assert L.piecewise(0.1) == pytest.approx(ref, abs=1e-15)


def test_scalar_and_shape():
    L = LossFunction(EX4)
    assert isinstance(L.exact(1.0), float)
    assert isinstance(L.piecewise(1.0), float)
    assert L.piecewise(np.ones((2, 3))).shape == (2, 3)
    assert L(1.0) == L.piecewise(1.0)
    assert "LossFunction" in repr(L)
    assert L.candidates().shape[1] == 2


# ---------------------------------------------------------------------------- leakage over time


def test_example2_3_identity_linear():
    T, eps = 10, 0.1
    r = leakage(np.eye(2), np.eye(2), [eps] * T)
    t = np.arange(1, T + 1)
    # source: Cao et al. (2019), Examples 2–3 (red lines of Fig. 3): BPL_t = tε, FPL_t = (T − t + 1)ε, TPL_t = Tε
    np.testing.assert_allclose(r.bpl, t * eps, rtol=1e-14)
    np.testing.assert_allclose(r.fpl, (T - t + 1) * eps, rtol=1e-14)
    np.testing.assert_allclose(r.tpl, T * eps, rtol=1e-14)
    assert r.tpl_level == pytest.approx(T * eps, rel=1e-14)


def test_example2_no_correlation():
    r = leakage(None, None, [0.1] * 5)
    # source: Cao et al. (2019), Examples 2–3 (black lines): BPL = FPL = TPL = ε
    np.testing.assert_allclose(r.bpl, 0.1)
    np.testing.assert_allclose(r.fpl, 0.1)
    np.testing.assert_allclose(r.tpl, 0.1)


def test_example2_bpl_grows_to_supremum():
    eps = 0.1
    r = leakage(EX2, EX2, [eps] * 400)
    # source: Cao et al. (2019), Example 2 (blue line): BPL_2 = L(0.1) + 0.1 (hand value as in test_example2_loss_by_hand)
    assert r.bpl[1] == pytest.approx(eps + np.log(0.8 * np.expm1(eps) + 1), abs=1e-15)
    assert np.all(np.diff(r.bpl[:50]) > 0) and np.all(np.diff(r.bpl) >= 0)
    # source: Cao et al. (2019), Theorem 11 case 2 with q = 0.8, d = 0: sup = log(0.2e^0.1/(1 − 0.8e^0.1))
    sup = np.log(0.2 * np.exp(eps) / (1 - 0.8 * np.exp(eps)))
    assert r.bpl[-1] == pytest.approx(sup, abs=1e-9)
    # FPL is BPL reversed under constant budgets and P_F = P_B (eqs. 13, 15)
    np.testing.assert_allclose(r.fpl, r.bpl[::-1], rtol=1e-15)
    np.testing.assert_allclose(r.tpl, r.bpl + r.fpl - eps, rtol=1e-15)


def test_exact_and_piecewise_leakage_agree():
    b = np.random.default_rng(3).uniform(0, 1, 30)
    r1 = leakage(FIG8_B, FIG8_F, b, method="exact")
    r2 = leakage(FIG8_B, FIG8_F, b, method="piecewise")
    # source: Cao et al. (2019), Fig. 8 matrices; Algorithms 1 and 5 must give the same leakage
    np.testing.assert_allclose(r1.tpl, r2.tpl, rtol=0, atol=1e-12)


def test_population_max_over_users():
    b = [0.2, 0.5, 0.1, 0.3]
    users_B = [FIG8_B, EX2, np.full((2, 2), 0.5)]
    users_F = [FIG8_F, np.eye(2), EX2]
    pop = leakage(users_B, users_F, b)
    singles = [leakage(pb, pf, b) for pb, pf in zip(users_B, users_F)]
    # source: Cao et al. (2019), eqs. (3), (7), (9): max over users
    np.testing.assert_allclose(pop.bpl, np.max([s.bpl for s in singles], axis=0), rtol=1e-15)
    np.testing.assert_allclose(pop.fpl, np.max([s.fpl for s in singles], axis=0), rtol=1e-15)
    np.testing.assert_allclose(pop.tpl, np.max([s.tpl for s in singles], axis=0), rtol=1e-15)
    # eq. (11) as printed is an upper bound of definition (3)
    assert np.all(pop.tpl <= pop.bpl + pop.fpl - np.asarray(b) + 1e-15)
    assert pop.bpl_users.shape == (3, 4)
    # a population with None for P_F: no forward correlation for anyone
    r = leakage(users_B, None, b)
    np.testing.assert_allclose(r.fpl, b)


def test_window_leakage_theorem3():
    b = np.array([0.3, 0.1, 0.4, 0.2, 0.5])
    r = leakage(FIG8_B, FIG8_F, b)
    # source: Cao et al. (2019), Corollary 1: user level (w = T) is Σ ε_t
    assert window_leakage(r, 5)[0] == pytest.approx(b.sum(), rel=1e-14)
    # source: Cao et al. (2019), Theorem 3 / eq. (16): j = 1 → α^B_t + α^F_{t+1}; j = 2 → + ε_{t+1}
    np.testing.assert_allclose(window_leakage(r, 2), r.bpl[:-1] + r.fpl[1:], rtol=1e-15)
    np.testing.assert_allclose(window_leakage(r, 3), r.bpl[:-2] + r.fpl[2:] + b[1:-1], rtol=1e-15)
    np.testing.assert_allclose(window_leakage(r, 1), r.tpl, rtol=1e-15)
    # w-event leakage lies between event level and w·max ε (Table 2)
    assert window_leakage(r, 3).max() >= r.tpl.max() - 1e-15


# ---------------------------------------------------------------------------- supremum


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 1.0, 3.0, 10.0])
def test_theorem11_case1_matches_recursion(eps):
    s = supremum(FIG8_B, eps)
    assert (s.status, s.case, s.q, s.d) == ("finite", 1, 0.8, 0.2)
    q, d = 0.8, 0.2
    e = np.exp(eps)
    # source: Cao et al. (2019), Theorem 11 case 1 closed form
    closed = np.log((np.sqrt(4 * d * e * (1 - q) + (d + q * e - 1) ** 2) + d + q * e - 1) / (2 * d))
    assert s.value == pytest.approx(closed, rel=1e-13)
    # limit of the recursion (13), iterated here straight from eq. (24) with q⁺ = 0.8, d⁺ = 0.2
    a = eps
    for _ in range(5000):
        a = eps + np.log((q * np.expm1(a) + 1) / (d * np.expm1(a) + 1))
    assert s.value == pytest.approx(a, abs=1e-9)
    assert leakage(FIG8_B, None, [eps] * 3000).bpl[-1] == pytest.approx(s.value, abs=1e-9)
    # the fixed point F = e^sup solves dF² − (qe^ε + d − 1)F − (1 − q)e^ε = 0 (derived), not eq. (39) as printed
    F = np.exp(s.value)
    assert d * F**2 - (q * e + d - 1) * F - (1 - q) * e == pytest.approx(0.0, abs=1e-9 * F**2)
    printed = d * F**2 + (q * e + d - 1) * F + (q * e - e)
    assert abs(printed) > 1e-3


def test_theorem11_large_epsilon_stable():
    s = supremum(FIG8_B, 1000.0)
    # source: Cao et al. (2019), Theorem 11 case 1: as ε → ∞, sup − ε → log(q/d) = log 4
    assert s.value == pytest.approx(1000.0 + np.log(4.0), rel=1e-15)


def test_theorem11_case2_finite():
    s = supremum(EX2, 0.1)
    # source: Cao et al. (2019), Theorem 11 case 2: d = 0, q = 0.8, ε = 0.1 < log 1.25
    assert (s.status, s.case, s.q, s.d) == ("finite", 2, 0.8, 0.0)
    assert s.value == pytest.approx(np.log(0.2 * np.exp(0.1) / (1 - 0.8 * np.exp(0.1))), rel=1e-14)


def test_theorem11_case3_divergent():
    s = supremum(EX2, 0.3)
    # source: Cao et al. (2019), Theorem 11 case 3: d = 0, q = 0.8, ε = 0.3 > log 1.25
    assert s == Supremum("divergent", None, 3, 0.8, 0.0)
    bpl = leakage(EX2, None, [0.3] * 2000).bpl
    assert bpl[-1] > bpl[999] + 50  # grows ≈ (ε − log 1.25) per step


def test_theorem11_case2_boundary_is_divergent():
    # source: Cao et al. (2019), Theorem 11 case 2 prints ε ≤ log(1/q); at equality F = (1 − q)e^ε/(1 − qe^ε) is infinite
    s = supremum([[0.5, 0.5], [0.0, 1.0]], np.log(2.0))
    assert (s.status, s.value, s.case) == ("divergent", None, 3)


def test_theorem11_case4_and_degenerate():
    # source: Cao et al. (2019), Theorem 11 case 4 (d = 0, q = 1): divergent; Example 2: BPL_t = tε
    assert supremum(np.eye(3), 0.1) == Supremum("divergent", None, 4, 1.0, 0.0)
    assert supremum(np.eye(3), 0.0).value == 0.0  # L(0) = 0: BPL_t = 0 when ε = 0
    # source: Cao et al. (2019), Theorem 6: L ≡ 0, BPL_t = ε
    assert supremum(np.full((3, 3), 1 / 3), 0.7) == Supremum("finite", 0.7, 0, None, None)
    assert supremum(LossFunction(FIG8_B), 0.0).value == 0.0


def test_algorithm6_max_over_candidates_example4():
    eps = 0.5
    s = supremum(EX4, eps)
    # Algorithm 6: the supremum is the limit of the recursion with the full L of Example 4
    bpl = leakage(EX4, None, [eps] * 2000).bpl
    assert s.status == "finite"
    assert s.value == pytest.approx(bpl[-1], abs=1e-9)


# ---------------------------------------------------------------------------- properties


@st.composite
def stochastic(draw, max_n=8, min_entry=0.0):
    n = draw(st.integers(2, max_n))
    w = draw(arrays(np.float64, (n, n), elements=st.floats(0.0, 1.0)))
    zero = draw(arrays(np.bool_, (n, n)))
    w = np.where(zero | (w < min_entry), 0.0, w)
    w[np.arange(n), draw(arrays(np.int64, n, elements=st.integers(0, n - 1)))] += 0.05
    return w / w.sum(axis=1, keepdims=True)


@settings(max_examples=20, deadline=None)
@given(P=stochastic(min_entry=1e-6), alpha=st.floats(0.0, 12.0))
def test_property_three_methods_agree(P, alpha):
    # entries are 0 or ≥ 1e-6: HiGHS silently drops matrix coefficients below 1e-9 (see LossFunction.lp)
    L = LossFunction(P)
    ex = L.exact(alpha)
    # source: Cao et al. (2019), Section 6.1 (Algorithms 1, 3, 5 identical to the LFP solution)
    assert L.piecewise(alpha) == pytest.approx(ex, abs=1e-9)
    assert L.per_pair(alpha) == pytest.approx(ex, abs=1e-9)
    assert L.lp(alpha) == pytest.approx(ex, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(P=stochastic(), alphas=arrays(np.float64, 6, elements=st.floats(0.0, 1000.0)))
def test_property_exact_piecewise_any_alpha(P, alphas):
    L = LossFunction(P)
    a = np.concatenate([alphas, [0.0, 1e-3, 40.0, 1000.0]])
    ex = L.exact(a)
    assert np.all(np.isfinite(ex)) and np.all(ex >= 0) and np.all(ex <= a)
    np.testing.assert_allclose(L.piecewise(a), ex, rtol=0, atol=1e-9)
    np.testing.assert_allclose(L.per_pair(a), ex, rtol=0, atol=1e-9)


@settings(max_examples=15, deadline=None)
@given(P=stochastic(max_n=4), alpha=st.floats(0.0, 8.0))
def test_property_matches_subset_enumeration(P, alpha):
    # source: Cao et al. (2019), Lemma 1 / eq. (34): the optimum is at x ∈ {m, m e^α}; enumerate all subsets
    assert LossFunction(P).exact(alpha) == pytest.approx(brute_loss(P, alpha), abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(PB=stochastic(max_n=5), PF=stochastic(max_n=5),
       b=arrays(np.float64, st.integers(1, 12), elements=st.floats(0.0, 3.0)))
def test_property_tpl_at_least_budget(PB, PF, b):
    r = leakage(PB, PF, b)
    # source: Cao et al. (2019), eq. (11) and Remark 1: BPL_t, FPL_t ≥ ε_t, so TPL_t ≥ ε_t; user level = Σ ε (Corollary 1)
    assert np.all(r.tpl >= b - 1e-12)
    assert np.all(r.bpl >= b - 1e-12) and np.all(r.fpl >= b - 1e-12)
    assert window_leakage(r, b.size)[0] == pytest.approx(b.sum(), rel=1e-12, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(P=stochastic(max_n=5), eps=st.floats(0.01, 3.0))
def test_property_supremum_bounds_recursion(P, eps):
    s = supremum(P, eps)
    bpl = leakage(P, None, [eps] * 60).bpl
    if s.status == "finite":
        # source: Cao et al. (2019), Theorem 11: BPL_t increases to the supremum, never above it
        assert np.all(bpl <= s.value + 1e-9)
    else:
        assert s.value is None


# ---------------------------------------------------------------------------- errors


def test_error_messages():
    with pytest.raises(InvalidModelError, match=r"`P_B` must be a non-empty square matrix, got shape \(2, 3\)"):
        LossFunction(np.ones((2, 3)) / 3, "P_B")
    with pytest.raises(InvalidModelError, match=r"`P` is not stochastic: row 0 sums to 0\.9"):
        LossFunction([[0.5, 0.4], [0.5, 0.5]])
    with pytest.raises(InvalidModelError, match=r"`P_F\[1\]` has a negative entry"):
        leakage(None, [FIG8_F, [[1.5, -0.5], [0.5, 0.5]]], [0.1])
    L = LossFunction(EX4)
    with pytest.raises(InvalidInputError, match=r"`tpl_level` must be finite and non-negative \(nats\), got -1\.0"):
        L.exact(-1.0)
    with pytest.raises(InvalidInputError, match=r"`tpl_level` must be finite and non-negative \(nats\), got nan"):
        L.piecewise(float("nan"))
    with pytest.raises(InvalidInputError, match=r"`tpl_level` must be non-negative numbers \(nats\), got 'a'"):
        L.lp("a")
    with pytest.raises(InvalidInputError, match=r"`budgets` must be a non-empty 1-D sequence"):
        leakage(EX4, EX4, [])
    with pytest.raises(InvalidInputError, match=r"`budgets` must be a non-empty 1-D sequence.*\[\[0\.1\]\]"):
        leakage(EX4, EX4, [[0.1]])
    with pytest.raises(InvalidInputError, match=r"`budgets` must be finite and non-negative \(nats\), got \[0\.1, -0\.2\]"):
        leakage(EX4, EX4, [0.1, -0.2])
    with pytest.raises(InvalidInputError, match=r"`method` must be 'piecewise' or 'exact', got 'lp'"):
        leakage(EX4, EX4, [0.1], method="lp")
    with pytest.raises(InvalidInputError, match=r"`P_B` and `P_F` must list the same users, got 2 and 3 matrices"):
        leakage([EX2, EX2], [EX2, EX2, EX2], [0.1])
    r = leakage(EX2, EX2, [0.1, 0.2])
    with pytest.raises(InvalidInputError, match=r"`w` must be an integer window length in \[1, T=2\] \(steps\), got 3"):
        window_leakage(r, 3)
    with pytest.raises(InvalidInputError, match=r"`w` must be an integer window length .* got 1\.5"):
        window_leakage(r, 1.5)
    with pytest.raises(InvalidInputError, match=r"`epsilon` must be finite and non-negative \(nats\), got -0\.1"):
        supremum(EX2, -0.1)
    with pytest.raises(InvalidInputError, match=r"`epsilon` must be a single non-negative number \(nats\), got \[0\.1, 0\.2\]"):
        supremum(EX2, [0.1, 0.2])


# ---------------------------------------------------------------------------- fast paths


@settings(max_examples=40, deadline=None)
@given(P=stochastic(max_n=7), alphas=arrays(np.float64, 5, elements=st.floats(0.0, 1000.0)))
def test_property_chain_pruning_matches_all_pairs(P, alphas):
    # L is evaluated only on the pairs owning a vertex of the candidate chain; eq. (24) over all
    # pairs and all prefixes (Theorem 5: the optimum is a prefix) must give the same value
    L = LossFunction(P)
    a = np.concatenate([alphas, [0.1, 40.0]])
    from policyopt.privacy.tpl_envelope import log_f as _log_f

    full = np.zeros(a.size)
    for t in L.pairs:
        v = _log_f(t.Q[:, None], t.Qc[:, None], t.D[:, None], t.Dc[:, None], a[None, :])  # eq. (25)
        full = np.maximum(full, v.max(axis=0))
    full = a if L.is_identity else np.clip(full, 0.0, a)
    np.testing.assert_allclose(L.exact(a), full, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(L.piecewise(a), full, rtol=1e-12, atol=1e-15)
    assert L.candidates().shape[0] >= L._cand.shape[0]


def test_recursion_fast_path_matches_array_piecewise():
    b = np.random.default_rng(5).uniform(0, 2, 200)
    for P in (EX4, EX2, FIG8_B, np.eye(3), np.full((3, 3), 1 / 3)):
        L = LossFunction(P)
        r = leakage(L, None, b)
        prev, ref = 0.0, []
        for t, e in enumerate(b):
            prev = (L.piecewise(prev) if t else 0.0) + e
            ref.append(prev)
        np.testing.assert_allclose(r.bpl, ref, rtol=1e-15, atol=0)


def test_supremum_divergent_reports_smallest_q():
    # two D = 0 candidates of pair (0, 1): q⁺ = 0.6 and 0.6 + 0.3 = 0.9 (ε = 0.6 ≥ log(1/0.6))
    P = [[0.6, 0.3, 0.1], [0.0, 0.0, 1.0], [0.2, 0.3, 0.5]]
    s = supremum(P, 0.6)
    assert (s.status, s.case, s.d) == ("divergent", 3, 0.0)
    assert s.q == pytest.approx(0.6, rel=1e-15)
