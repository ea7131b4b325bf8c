"""Age-dependent accounting: Theorem 1 (14), composition Theorem 3 (25), Proposition 3 (30)–(32)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _refs import dec_leak, dec_peak_risk
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from policyopt.privacy.age_dependent import compose, peak_risk, peak_risk_iteration, risk_after_aging
from policyopt.errors import InvalidInputError
from policyopt.models.markov import two_state_chain


@pytest.mark.parametrize(
    "max_tv, eps",
    [(0.5, 0.3), (0.5, 50.0), (1e-30, 50.0), (1e-3, 5000.0), (0.3, 1e-12), (1.0, 2.0), (0.0, 50.0), (0.0, 0.0)],
)
def test_theorem1_against_60_digit_reference(max_tv, eps):
    # source: Zhang et al. (2024), Theorem 1, eq. (14); reference in 400-digit decimal arithmetic
    got = risk_after_aging(max_tv, eps)
    if eps > 700:  # Decimal handles it too, but keep the reference explicit
        expected = eps + math.log(max_tv) + math.log1p((1 - max_tv) * math.exp(-eps) / max_tv)
    else:
        expected = dec_leak(max_tv, eps)
    assert got == pytest.approx(expected, rel=1e-13, abs=0)


def test_theorem1_limits_and_vectorisation():
    assert risk_after_aging(1.0, 50.0) == 50.0  # Δ = 1: classical DP
    assert risk_after_aging(0.0, 50.0) == 0.0  # Δ = 0: no leakage
    out = risk_after_aging(two_state_chain(0.1, 0.1).max_tv(np.arange(4)), 2.0)
    assert out.shape == (4,)
    # source: Zhang et al. (2024), eq. (52): ln(1 + |1−p−q|^t (e^ε − 1))
    np.testing.assert_allclose(out, np.log1p(0.8 ** np.arange(4) * np.expm1(2.0)), rtol=1e-14)


def test_fig3_composition_converges_to_closed_form_and_iteration_agrees():
    # source: Zhang et al. (2024), Fig. 3: A = 2, S̄ = 4, ε_C = 0.5, p = q = 0.1 (Δ(t) = 0.8^t)
    chain = two_state_chain(0.1, 0.1)
    S = 2 + 4 * np.arange(120)
    comp = compose(S, 2, 0.5, chain.max_tv)
    closed = peak_risk(0.8**2, 0.8**4, 0.5)
    assert closed.status == "finite"
    assert closed.value == pytest.approx(dec_peak_risk(0.8**2, 0.8**4, 0.5), rel=1e-13)
    assert closed.value == pytest.approx(0.82361656614590, abs=1e-13)
    peaks = comp.epoch_peaks
    assert np.all(np.diff(peaks) > -1e-15)  # in-epoch peaks increase in n ...
    assert peaks[-1] == pytest.approx(closed.value, rel=1e-12)  # ... to the fixed point (30)
    it = peak_risk_iteration(0.8**2, 0.8**4, 0.5)
    assert it.status == "converged"
    assert it.value == pytest.approx(closed.value, abs=1e-12)
    np.testing.assert_allclose(it.epoch_peaks[:50], peaks[:50], rtol=1e-13)
    # the risk decreases inside each epoch and spikes at each publication (Fig. 2)
    r = comp.risk
    assert r[S[3]] > r[S[3] + 1] > r[S[3] + 2] > r[S[3] + 3] < r[S[4]]
    np.testing.assert_array_equal(comp.aoi[S[3] : S[3] + 4], [2, 3, 4, 5])
    assert np.isnan(comp.aoi[0]) and comp.risk[0] == 0.0


def test_composition_with_aging_longer_than_interval():
    # A = 7 > S̄ = 3: each input predates the previous publication; limit is still (30)
    chain = two_state_chain(0.2, 0.1)
    lam = 0.7
    S = 7 + 3 * np.arange(200)
    comp = compose(S, 7, 0.8, chain.max_tv)
    assert comp.epoch_peaks[-1] == pytest.approx(dec_peak_risk(lam**7, lam**3, 0.8), rel=1e-12)
    # first query: ε(S_1) = Theorem 1 at age A
    assert comp.epoch_peaks[0] == pytest.approx(dec_leak(lam**7, 0.8), rel=1e-13)
    # second: prior leakage about X_{S_2−A} from query 1 is Theorem 1 at lag 3
    prior = dec_leak(lam**3, 0.8)
    assert comp.prior_risk[1] == pytest.approx(prior, rel=1e-13)
    assert comp.epoch_peaks[1] == pytest.approx(dec_leak(lam**7, 0.8 + prior), rel=1e-13)


def test_static_database_reduces_to_basic_composition():
    # Δ ≡ 1 (static data): eq. (25) becomes ε(t) = ε_C,n + ε(S_n − A_n), Proposition 2
    eps = np.array([0.1, 0.4, 0.25, 1.0])
    comp = compose([1, 2, 5, 9], [0, 1, 1, 3], eps, np.ones(20), horizon=12)
    np.testing.assert_allclose(comp.epoch_peaks, np.cumsum(eps), rtol=1e-14)
    assert comp.risk[-1] == pytest.approx(eps.sum())


def test_arbitrary_schedule_against_direct_recursion():
    chain = two_state_chain(0.15, 0.25)
    lam = 0.6
    S = np.array([3, 4, 9, 10, 20])
    A = np.array([3, 2, 5, 1, 6])
    eps = np.array([0.5, 1.5, 0.2, 3.0, 50.0])
    comp = compose(S, A, eps, chain.max_tv, horizon=25)
    tau = S - A
    prior = 0.0
    for n in range(5):
        if n:
            prior = dec_leak(lam ** (tau[n] - tau[n - 1]), eps[n - 1] + prior)
        assert comp.prior_risk[n] == pytest.approx(prior, rel=1e-12)
        stop = S[n + 1] if n < 4 else 26
        for t in range(S[n], stop):
            assert comp.risk[t] == pytest.approx(dec_leak(lam ** (t - tau[n]), eps[n] + prior), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.floats(0.0, 60.0),
)
def test_closed_form_peak_risk_against_high_precision(dA, dS, eps):
    assume(math.log(dS) + eps < -1e-6 if dS > 0 else True)
    got = peak_risk(dA, dS, eps)
    assert got.status == "finite"
    assert got.value == pytest.approx(dec_peak_risk(dA, dS, eps), rel=1e-9, abs=1e-300)
    it = peak_risk_iteration(dA, dS, eps, max_iter=200_000)  # near (31)'s edge it converges slowly: cap its cost
    if it.status == "converged":
        assert it.value == pytest.approx(got.value, rel=1e-8, abs=1e-12)


def test_extreme_budgets_and_zero_max_tv():
    # ε_C = 50 with Δ(S̄) = 1e-25 satisfies (31) (1e-25·e^50 ≈ 5.2e-4)
    res = peak_risk(1e-3, 1e-25, 50.0)
    assert res.value == pytest.approx(dec_peak_risk(1e-3, 1e-25, 50.0), rel=1e-13)
    assert peak_risk(0.0, 0.5, 0.5).value == 0.0
    assert peak_risk(0.5, 0.0, 50.0).value == pytest.approx(dec_leak(0.5, 50.0), rel=1e-13)


def test_divergence_is_reported_not_a_number():
    res = peak_risk(0.3, 0.9, 0.2)  # 0.9·e^0.2 ≈ 1.099 ≥ 1
    assert res.status == "divergent" and res.value is None
    assert "(31)" in res.message
    it = peak_risk_iteration(0.3, 0.9, 0.2)
    assert it.status == "divergent" and it.value is None
    # the paper's contraction claim is false: F'(ε) → 1; the composition peaks really grow without bound
    comp = compose(np.arange(1, 400), 0, 0.2, np.full(401, 0.9))
    assert comp.epoch_peaks[-1] > 60 * 0.2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(publish_times=[2, 4], ages=[0, 3]), r"non-decreasing \(Theorem 3\), but publication 1 uses slot 1 after publication 0 used slot 2"),
        (dict(publish_times=[1, 4], ages=[2, 0]), r"input time stamp S_n − A_n = -1 of publication 0 is negative"),
        (dict(publish_times=[3, 3], ages=0), r"`publish_times` must be strictly increasing, got \[3, 3\]"),
        (dict(publish_times=[1, 2], ages=[0, 0, 0]), r"`ages` must have one entry per publication \(2\)"),
        (dict(publish_times=[1, 2], ages=0, horizon=1), r"`horizon`=1 is before the last publication at slot 2"),
        (dict(publish_times=[1, 2], ages=0, epsilon_c=-1.0), r"`epsilon_c` must be a finite non-negative number"),
    ],
)
def test_composition_errors(kwargs, match):
    args = dict(epsilon_c=0.5, max_tv=np.full(50, 0.5))
    args.update(kwargs)
    with pytest.raises(InvalidInputError, match=match):
        compose(**args)


def test_accounting_input_errors():
    with pytest.raises(InvalidInputError, match=r"`max_tv` table has 3 entries but ages up to 5 slots are needed"):
        compose([5], 0, 0.5, [1.0, 0.5, 0.25])
    with pytest.raises(InvalidInputError, match=r"`max_tv` must lie in \[0, 1\]"):
        risk_after_aging(1.5, 1.0)
    with pytest.raises(InvalidInputError, match=r"`max_tv_s` must lie in \[0, 1\]"):
        peak_risk(0.5, -0.1, 1.0)
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be a finite non-negative number \(nats\), got nan"):
        risk_after_aging(0.5, float("nan"))


def test_large_budgets_with_max_tv_below_float_range():
    from policyopt.privacy.age_dependent import risk_after_aging_log

    chain = two_state_chain(0.4, 0.5)  # Δ(t) = 0.1^t
    log_d = chain.log_max_tv(330)
    # source: ln(1 + Δ(e^1000 − 1)) = 1000 + ln Δ + O(e^-240) for Δ = 1e-330
    assert risk_after_aging_log(log_d, 1000.0) == pytest.approx(1000 + 330 * math.log(0.1), rel=1e-13)
    comp = compose([330, 700], [330, 0], [1000.0, 1.0], chain, horizon=700)
    assert comp.epoch_peaks[0] == pytest.approx(1000 + 330 * math.log(0.1), rel=1e-12)
    # the prior leakage about X_700 from query 1 (lag 700 from its input) is still counted;
    # ln Δ(700) ≈ −1611.8 carries an absolute error ~1e-13, i.e. ~1e-13 relative on the leak
    assert comp.prior_risk[1] == pytest.approx(math.log1p(math.exp(1000 + 700 * math.log(0.1))), rel=1e-10, abs=0)


def test_iteration_returns_an_upper_bound_with_relative_tolerance():
    # source: (30) is the limit; tiny budgets need a relative stopping rule
    for dA, dS, eps in [(0.2, 0.1, 1e-15), (0.9, 0.9, 1e-12), (0.64, 0.4096, 0.5)]:
        exact = dec_peak_risk(dA, dS, eps)
        it = peak_risk_iteration(dA, dS, eps)
        assert it.status == "converged"
        assert it.value >= exact * (1 - 1e-15)
        assert it.value == pytest.approx(exact, rel=1e-11)
    assert peak_risk(0.5, 1.0, 0.0).value == 0.0  # ε_C = 0 releases nothing
