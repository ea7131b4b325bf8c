"""AR(1) Gaussian process of Zhang et al. (2024), Appendix I (81)–(92): Δ(t), both MSE estimators vs Monte Carlo, solver hook."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from policyopt.privacy.age_dependent import risk_after_aging
from policyopt.models.ar1 import AR1Model
from policyopt.utility.ar1_penalty import AR1MSEPenalty, simulate_ar1_mse
from policyopt.errors import InvalidInputError
from policyopt.problems import ScheduleProblem
from policyopt.result import Status
from policyopt.studies.schedule import design_schedule


@pytest.mark.parametrize("rho, sigma, B", [(0.8, 1.0, 3.0), (-0.6, 0.5, 1.0), (0.95, 2.0, 0.5)])
def test_max_tv_is_the_gaussian_tv_and_below_pinsker(rho, sigma, B):
    m = AR1Model(rho, sigma, 10, clip_bound=B)
    t = np.arange(0, 30)
    v = sigma**2 / (1 - rho**2)
    for tt in (1, 3, 10):
        s = math.sqrt(v * (1 - rho ** (2 * tt)))  # source: Zhang et al. (2024), (83)–(84)
        a, b = rho**tt * B, -(rho**tt) * B  # the most distant current values ±B
        # independent reference: TV = ∫ (p − q)_+ by quadrature
        tv = integrate.quad(lambda x: max(0.0, stats.norm.pdf(x, a, s) - stats.norm.pdf(x, b, s)), -50, 50, points=[0.0], limit=200)[0]
        assert m.max_tv(tt) == pytest.approx(tv, rel=1e-7, abs=1e-12)
    assert m.max_tv(0) == 1.0
    d, pins = m.max_tv(t), m.pinsker_max_tv(t)
    assert np.all(d <= pins + 1e-15)  # source: Zhang et al. (2024), (88): Pinsker bound min(1, |ρ|^t B/σ), t ≥ 1
    np.testing.assert_allclose(pins[1:], np.minimum(1, abs(rho) ** t[1:] * B / sigma), rtol=1e-14)
    env = m.envelope(30)
    assert np.all(d <= env(t) * (1 + 1e-12))


def test_log_max_tv_far_below_float_range():
    m = AR1Model(0.5, 1.0, 5, clip_bound=2.0)
    # Δ(t) ≈ (2/√π)·|ρ|^t B/(√2 σ_∞) for large t, σ_∞² = v
    t = 3000
    expected = math.log(2 / math.sqrt(math.pi)) + t * math.log(0.5) + math.log(2.0) - 0.5 * math.log(2) - 0.5 * math.log(1 / 0.75)
    assert m.log_max_tv(t) == pytest.approx(expected, rel=1e-12)
    assert m.max_tv(t) == 0.0  # underflows; the log does not
    # ε = 50 with Δ small but representable: finite risk, no overflow
    assert np.isfinite(risk_after_aging(m.max_tv(40), 50.0))


@pytest.mark.parametrize("estimator", ["release", "predictor"])
@pytest.mark.parametrize("rho, B, t, eps", [(0.8, 3.0, 2, 1.0), (0.9, 1.0, 5, 0.5), (-0.7, 2.0, 3, 2.0)])
def test_mse_matches_monte_carlo(estimator, rho, B, t, eps):
    """Seeded simulation (numpy noise: simulation only, nothing is released)."""
    pen = AR1MSEPenalty(AR1Model(rho, 1.0, 8, clip_bound=B), estimator)
    est, se = simulate_ar1_mse(pen, t, eps, n_samples=200_000, rng=np.random.default_rng(7 + t))
    assert abs(est - pen.value(t, eps)) < 4.5 * se


@pytest.mark.parametrize("t, eps", [(1, 1.0), (4, 0.3), (12, 3.0)])
def test_closed_forms_without_clipping(t, eps):
    # B far in the tails: clipping is negligible and the textbook closed forms hold
    rho, sigma, I, B = 0.8, 1.0, 20, 40.0
    m = AR1Model(rho, sigma, I, clip_bound=B)
    noise = 2 * (2 * B / (I * eps)) ** 2  # Laplace variance, sensitivity 2B/I
    # source: issue 7 / derivation from Zhang et al. (2024) (82)–(84): E[(x_0 − x_t)²] = 2v(1 − ρ^t)
    release = 2 * sigma**2 * (1 - rho**t) / (I * (1 - rho**2)) + noise
    # source: Zhang et al. (2024), (92) staleness term (1 − ρ^{2t})σ²/(I(1 − ρ²)), with the predictor's noise ρ^{2t}·noise
    predictor = (1 - rho ** (2 * t)) * sigma**2 / (I * (1 - rho**2)) + rho ** (2 * t) * noise
    assert AR1MSEPenalty(m, "release").value(t, eps) == pytest.approx(release, rel=1e-12)
    assert AR1MSEPenalty(m, "predictor").value(t, eps) == pytest.approx(predictor, rel=1e-12)


def test_clipped_moments_by_quadrature():
    m = AR1Model(0.7, 1.3, 4, clip_bound=1.1)
    s = math.sqrt(m.variance)
    c2 = integrate.quad(lambda x: np.clip(x, -1.1, 1.1) ** 2 * stats.norm.pdf(x, 0, s), -60, 60, points=[-1.1, 1.1])[0]
    cx = integrate.quad(lambda x: x * np.clip(x, -1.1, 1.1) * stats.norm.pdf(x, 0, s), -60, 60, points=[-1.1, 1.1])[0]
    assert m.clipped_moments == pytest.approx((c2, cx), rel=1e-10)


def test_monotonicity_checked_predictor_not_monotone_in_t():
    m = AR1Model(0.8, 1.0, 20, clip_bound=3.0)
    rel = AR1MSEPenalty(m, "release").check_monotonicity(np.arange(40), np.geomspace(0.05, 50, 30))
    assert rel.increasing_in_t and rel.decreasing_in_epsilon
    pred = AR1MSEPenalty(m, "predictor").check_monotonicity(np.arange(40), np.geomspace(0.05, 50, 30))
    assert pred.decreasing_in_epsilon and not pred.increasing_in_t  # large noise shrinks with ρ^{2t}
    assert pred.worst_t[1] == pytest.approx(0.05)


def test_exact_solver_uses_the_ar1_max_tv():
    m = AR1Model(0.8, 1.0, 20, clip_bound=3.0)
    pen = AR1MSEPenalty(m, "release")
    f_bar = 0.3
    prob = ScheduleProblem(m, pen, f_bar, A_max=15, S_max=15)
    np.testing.assert_allclose(prob.max_tv_table, m.max_tv(np.arange(17)), rtol=1e-12)
    sol = prob.solve()
    assert sol.status in (Status.OPTIMAL, Status.UNBOUNDED)
    # brute force: per (A, S̄), closed-form smallest ε_C and the peak risk (30) with the exact Δ
    d = m.max_tv(np.arange(17))
    best = math.inf
    for A in range(16):
        for S in range(1, 16):
            ages = np.arange(A, A + S)
            slack = f_bar - pen.staleness(ages)
            if np.any(slack <= 0):
                continue
            e = float(np.max(pen.sensitivity * np.sqrt(2 / slack)))
            if d[S] * math.exp(e) >= 1:
                continue
            best = min(best, math.log1p(d[A] * math.expm1(e) / (1 - d[S] * math.exp(e))))  # source: Zhang et al. (2024), (30)
    assert sol.objective == pytest.approx(best, rel=1e-9)
    rep = design_schedule(m, max_penalty=f_bar, A_max=15, S_max=15, penalty=pen).to_dict()
    assert rep["peak_risk"] == pytest.approx(best, rel=1e-9)
    assert rep["model"]["states"] is None and rep["model"]["c"] == 3.0 and rep["model"]["rho"] == 0.8
    heur = design_schedule(m, max_penalty=f_bar, A_max=15, S_max=15, penalty=pen, method="heuristic").to_dict()
    assert heur["peak_risk"] >= best - 1e-12  # (39) with the Pinsker envelope bounds the exact risk


def test_errors():
    with pytest.raises(TypeError, match="clip_bound"):
        AR1Model(0.5, 1.0, 3)  # the clipping bound is mandatory
    with pytest.raises(InvalidInputError, match="`clip_bound` must be a positive finite number, got inf"):
        AR1Model(0.5, 1.0, 3, clip_bound=math.inf)
    with pytest.raises(InvalidInputError, match=r"`rho` must satisfy 0 < \|rho\| < 1, got 1.0"):
        AR1Model(1.0, 1.0, 3, clip_bound=1.0)
    with pytest.raises(InvalidInputError, match="`sigma` must be a positive finite number, got 0"):
        AR1Model(0.5, 0, 3, clip_bound=1.0)
    m = AR1Model(0.5, 1.0, 3, clip_bound=1.0)
    with pytest.raises(InvalidInputError, match=r"`estimator` must be one of \['release', 'predictor'\], got 'mmse'"):
        AR1MSEPenalty(m, "mmse")
    with pytest.raises(InvalidInputError, match="`penalty` is required when `population` is not a Population"):
        design_schedule(m, max_penalty=1.0, A_max=3, S_max=3)
    with pytest.raises(InvalidInputError, match="decays at"):
        m.envelope(10, rho=0.9)
