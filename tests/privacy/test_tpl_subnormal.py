"""L(α) on matrices with subnormal and zero entries, against 60-digit brute force (tests/_mp_refs.py).

Every evaluation path (a fresh object's bound-and-prune, the envelope of Algorithm 4 with
Algorithm 5, Algorithm 1 on the built tables, Algorithm 3) must return L(α) of eq. (24) to
rounding, never less: a value below the true L would make a printed TPL smaller than the
leakage it bounds.  With entries near 1e-320 the likelihood ratios q_k/d_k exceed the float
range and d_k/q_k is subnormal (a handful of significant bits), so sorting by either misorders
the entries (Algorithm 2, line 7) and the envelope lost the best index set: 731.24 printed
against the true 740.10 at α = 741 for the matrix below.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import _mp_refs as R
from policyopt.privacy.temporal import LossFunction

# Found by a random search (rows 1, 3, 4 hold entries of 1e-301 to 1e-322 and exact zeros).
SUBNORMAL = np.array([
    [0.13139089030396614, 0.019954829182505313, 0.00804925015178311, 0.3960769575916508, 0.44452807277009454],
    [7.355761539938462e-301, 2.355725e-318, 0.3998775804370732, 0.0, 0.6001224195629269],
    [0.0015222013153689787, 0.4765900443796595, 0.018668615567271264, 0.4055805774376621, 0.09763856130003813],
    [7.73885989241474e-301, 0.419029252068364, 0.2319428328959564, 0.32711171831627966, 0.021916196719399837],
    [5.997785951052682e-301, 0.4016467651640474, 1.33e-322, 0.368563138980675, 0.2297900958552776],
])


# Found by the same search: the best index set has D = 1e-323 and lies between hull points at
# x = 0 and x = 3e-323, where both products of the hull's orientation test underflow to 0.
SUBNORMAL_HULL = np.array([[0.43272005205140107, 1.835744794756e-311, 6.467e-321, 0.24613465729521916, 0.2891357570552336, 0.003740952225878943, 0.028268581372267135, 4.97136e-318], [0.0, 0.11086059858559875, 7.280122514061284e-295, 0.0778280162275992, 0.058677767644161584, 0.20012656236952056, 0.283851170454274, 0.26865588471884594], [0.36470912171374326, 0.2695327238471009, 1.8390870038954057e-298, 3.866007225961823e-299, 0.2795615592696254, 2.0364119087857984e-292, 0.08619659516953052, 0.0], [1.628624123489e-311, 0.35052537572496717, 0.17297434983682392, 5.6e-322, 0.16178260487907606, 1.2326421659920819e-292, 0.31471766955913283, 8.826801105962673e-298], [0.1785063071083389, 0.3585656100230892, 1.2e-322, 0.24462323229613323, 0.10808140742445338, 5.785080737833107e-308, 0.1102234431479853, 2.5e-323], [0.19408225895507172, 0.2050321416843259, 0.16317606548246477, 7.36e-322, 0.14836683719764088, 0.023560134087720903, 0.2295949143404472, 0.036187648252328584], [0.33464125681269136, 0.3249085956774635, 3e-323, 0.28593349444027255, 3.99658338e-315, 1e-323, 0.0, 0.05451665306957256], [5.6520140085397e-306, 0.26688202808229133, 1.175596007005755e-292, 0.17002910153114661, 0.2917174408219988, 0.02181948696832789, 0.2495519425962354, 1.251777149527064e-300]])


def _all_paths(P, alpha) -> dict:
    fresh = LossFunction(P).exact(alpha)  # bound-and-prune, no tables
    L = LossFunction(P)
    return {"fresh exact": fresh, "piecewise": L.piecewise(alpha), "exact on tables": L.exact(alpha),
            "per_pair": L.per_pair(alpha)}


def _check(P, alpha, rtol=1e-12):
    ref = float(R.loss(P, alpha))
    for name, v in _all_paths(P, alpha).items():
        assert v >= ref - rtol * max(1.0, ref), f"{name}: L({alpha}) = {v!r} below the true {ref!r}"
        assert v <= ref + rtol * max(1.0, ref), f"{name}: L({alpha}) = {v!r} above the true {ref!r}"


@pytest.mark.parametrize("alpha", [0.5, 50.0, 700.0, 741.0, 1000.0])
def test_regression_matrix_every_path_matches_brute_force(alpha):
    _check(SUBNORMAL, alpha)


@pytest.mark.parametrize("alpha", [700.0, 741.0, 760.0])
def test_regression_hull_orientation_with_subnormal_abscissae(alpha):
    _check(SUBNORMAL_HULL, alpha)  # the envelope printed 740.162 for a true L(741) = 740.212


def test_regression_value_is_the_d_zero_index_set():
    # At α = 741 the best index set is {3} of rows (q, d) = (2, 1): d_3 = 0, so L = α + log q_3 − log 1.
    v = LossFunction(SUBNORMAL).piecewise(741.0)
    assert v == pytest.approx(741.0 + np.log(0.4055805774376621), abs=1e-9)
    assert v > 740.09  # the envelope used to print 731.24


_ENTRY = st.one_of(
    st.just(0.0),
    st.floats(min_value=5e-324, max_value=1e-300),  # subnormal and tiny normal
    st.floats(min_value=1e-12, max_value=1.0),
)


@st.composite
def _tiny_matrices(draw):
    n = draw(st.integers(2, 4))
    rows = []
    for _ in range(n):
        row = np.array([draw(_ENTRY) for _ in range(n)], dtype=float)
        k = draw(st.integers(0, n - 1))
        row[k] += draw(st.floats(min_value=0.05, max_value=1.0))  # every row has a normal entry
        rows.append(row / row.sum())
    return np.array(rows)


@settings(max_examples=80, deadline=None)
@given(P=_tiny_matrices(), alpha=st.sampled_from([0.3, 20.0, 700.0, 745.0, 1500.0]))
def test_property_every_path_matches_brute_force_with_subnormal_entries(P, alpha):
    _check(P, alpha, rtol=1e-11)


# ---------------------------------------------------------------------------------------------
# LossFunction.restrict: the envelope of only the pairs that can attain L on [0, a_max]
# ---------------------------------------------------------------------------------------------

from policyopt.privacy.temporal import scalar_piecewise  # noqa: E402


def _random_matrix(n, seed, tiny=0.0, zeros=0.0):
    rng = np.random.default_rng(seed)
    P = rng.random((n, n))
    if tiny:
        mask = rng.random((n, n)) < tiny
        P[mask] = 10.0 ** rng.uniform(-323, -290, mask.sum())
    if zeros:
        P[rng.random((n, n)) < zeros] = 0.0
    P[np.arange(n), rng.integers(0, n, n)] += 0.1
    return P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n, seed, tiny, zeros", [
    (50, 1, 0.0, 0.0), (50, 2, 0.0, 0.0), (12, 3, 0.0, 0.3), (8, 4, 0.3, 0.2), (120, 5, 0.0, 0.0),
    (30, 6, 0.1, 0.1), (3, 7, 0.0, 0.0),
])
@pytest.mark.parametrize("a_max", [0.05, 1.0, 7.0, 45.0])
def test_restricted_envelope_equals_the_full_envelope_on_its_range(n, seed, tiny, zeros, a_max):
    P = _random_matrix(n, seed, tiny, zeros)
    full = LossFunction(P)
    ref = scalar_piecewise(full)
    lim = LossFunction(P).restrict(a_max)
    f = scalar_piecewise(lim)
    if a_max <= 1.0:  # Λ ≤ 1 + (e − 1)·max T < 4 and few pairs survive: only the range is built
        assert lim._env is None and lim._range is not None
    else:  # the range may need most pairs: then restrict() builds the full envelope instead
        assert (lim._env is None) != (lim._range is None)
    alphas = np.concatenate([np.linspace(0.0, a_max, 157), [a_max * (1 + 1e-7)]])
    for a in alphas.tolist():
        want = ref(a)
        assert abs(f(a) - want) <= 1e-12 * max(1.0, want), (a, f(a), want)
        assert f(a) >= LossFunction(P).exact(a) - 1e-12 * max(1.0, want)  # never below the true L
    # beyond the declared range the full envelope takes over: same values, nothing silently wrong
    for a in (a_max * 3 + 1.0, 300.0):
        assert abs(f(a) - ref(a)) <= 1e-12 * max(1.0, ref(a))
    assert lim._env is not None  # built on the first α beyond the range


@settings(max_examples=40, deadline=None)
@given(P=_tiny_matrices(), a_max=st.sampled_from([0.1, 1.0, 20.0]))
def test_property_restricted_envelope_matches_brute_force(P, a_max):
    f = scalar_piecewise(LossFunction(P).restrict(a_max))
    for a in (0.0, a_max / 3, a_max):
        ref = float(R.loss(P, a))
        assert abs(f(a) - ref) <= 1e-11 * max(1.0, ref), (a, f(a), ref)


def test_restrict_rejects_bad_alpha_max():
    L = LossFunction([[0.9, 0.1], [0.2, 0.8]])
    with pytest.raises(Exception, match="alpha_max"):
        L.restrict(-1.0)
    with pytest.raises(Exception, match="alpha_max"):
        L.restrict(float("nan"))


@pytest.mark.parametrize("n, tiny, zeros, alpha", [(50, 0.0, 0.0, 1.0), (20, 0.2, 0.2, 0.1), (33, 0.0, 0.3, 0.01)])
def test_algorithm8_unchanged_by_the_restricted_envelope(n, tiny, zeros, alpha):
    # Algorithm 8 restricts both loss functions to [0, α].  Its solution (α^B, α^F, ε_m) must equal
    # the one found on the full envelopes (built first, so that restrict() does nothing) to 1e-12.
    # The certified budgets may differ only through the proven rounding margin, which counts the
    # sub-functions each evaluator uses (leakage_rounding_error): usually fewer after restrict(), so a
    # smaller shrink κ; never more than a rounding-size difference (κ is ~1e-11 here).
    from policyopt.problems.tpl_budget import BudgetAllocationProblem

    for seed in range(3):
        PB, PF = _random_matrix(n, 100 + seed, tiny, zeros), _random_matrix(n, 200 + seed, tiny, zeros)
        fast = BudgetAllocationProblem(PB, PF, alpha, 10).solve("quantification")
        LB, LF = LossFunction(PB), LossFunction(PF)
        LB.piecewise(0.0), LF.piecewise(0.0)  # full envelopes: restrict() keeps using them
        ref = BudgetAllocationProblem(LB, LF, alpha, 10).solve("quantification")
        for key in ("alpha_B", "alpha_F", "epsilon_m"):
            assert fast.values[key] == pytest.approx(ref.values[key], rel=1e-12, abs=0), key
        assert fast.values["budget_shrink"] <= ref.values["budget_shrink"] + 1e-12
        assert fast.values["max_tpl"] <= alpha and ref.values["max_tpl"] <= alpha


@settings(max_examples=60, deadline=None)
@given(P=_tiny_matrices())
def test_small_envelope_in_plain_floats_equals_the_numpy_sweep(P):
    # Algorithm 4 in plain floats (used for the few candidates of a restricted range) must pick the
    # same segments as the numpy sweep, with the same breakpoints to rounding.
    from policyopt.privacy.tpl_envelope import envelope as _envelope, envelope_small as _envelope_small

    C = LossFunction(P)._cand
    b1, s1 = _envelope(C)
    b2, s2 = _envelope_small(C)
    assert s1.tolist() == s2.tolist()
    assert np.allclose(b1, b2, rtol=1e-13, atol=0.0)


def test_phi_all_is_an_upper_bound_of_the_exact_sum():
    # φ_ij(λ) = Σ_k (P_ik − λP_jk)⁺ in exact rational arithmetic against the blocked float bound.
    from fractions import Fraction

    from policyopt.privacy.tpl_loss import _phi_all

    P = _random_matrix(9, 11, tiny=0.2, zeros=0.2)
    lam = 1.7
    got = _phi_all(P, lam).reshape(9, 9)
    L = Fraction(lam)
    for i in range(9):
        for j in range(9):
            exact = sum(max(Fraction(P[i, k]) - L * Fraction(P[j, k]), Fraction(0)) for k in range(9))
            assert Fraction(got[i, j]) >= exact
            assert got[i, j] - float(exact) <= 1e-13


@pytest.mark.parametrize("a_max", [50.0, 709.0, 1000.0, 1e300])
def test_restrict_far_ranges_build_the_full_envelope(a_max):
    P = _random_matrix(6, 12)
    lim = LossFunction(P).restrict(a_max)
    assert lim._env is not None and lim._range is None
    ref = LossFunction(P)
    for a in (0.5, 40.0, 900.0):
        assert scalar_piecewise(lim)(a) == pytest.approx(float(ref.piecewise(a)), rel=1e-12)
