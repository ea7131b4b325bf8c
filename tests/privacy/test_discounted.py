"""Discounted DP accounting and the Corollary 8 / 12 / 16 schedules (Farokhi 2020)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.privacy.discounted import (
    ROUND_UP,
    discount_matrix,
    discounted_loss,
    discounted_sum,
    discounted_sum_transpose,
    dp_loss,
    expected_relative_error,
    exponential_loss,
    hyperbolic_loss,
    privacy_losses,
    solve_discounted_transpose,
)
from policyopt.errors import InvalidInputError
from policyopt.privacy.discounted_schedules import (
    corollary8_schedule,
    corollary12_schedule,
    corollary16_check,
    corollary16_constant,
    corollary16_paper_constant,
    corollary16_paper_schedule,
    corollary16_schedule,
    corollary_schedule,
)
from policyopt.studies.citylearn import DEFAULT_DAILY_CLIP, daily_means, exponential_infinite_horizon


def brute_sum(r, weight):
    """Σ_{k≤t} weight(t − k) r_k for every t, straight from the definition with math.fsum."""
    return np.array([math.fsum(weight(t - k) * r[k] for k in range(t + 1)) for t in range(len(r))])


# --- Corollaries 8 and 12 ------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.1, 1.0, 50.0])
def test_corollary8_holds_over_1e5_steps(eps):
    # source: Farokhi (2020), Corollary 8, eq. (8): Σ_{k≤t} Δf/b_k = (6ε/π²) Σ 1/k² < ε
    T = 10**5
    for printed in (True, False):
        b = corollary8_schedule(eps, T, 2.5, printed=printed)
        loss = discounted_loss(b, 2.5, "dp")
        assert loss.holds(eps, rtol=1e-12)
        assert loss.holds(eps)  # proven: value + rounding bound ≤ ε
    t = np.array([1, 10, 1000, T])
    ref = [6 * eps / math.pi**2 * math.fsum(1.0 / k**2 for k in range(1, n + 1)) for n in t]
    np.testing.assert_allclose(loss.values[t - 1], np.array(ref) / ROUND_UP, rtol=1e-13)
    assert b[0] == pytest.approx(2.5 * math.pi**2 / (6 * eps) * ROUND_UP, rel=1e-15)


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9, 0.999])
def test_corollary12_holds_over_1e5_steps(alpha):
    # source: Farokhi (2020), Corollary 12, eq. (11): Σ α^{t−k} (1 − α) ε = ε (1 − α^t)
    T, eps = 10**5, 0.7
    b = corollary12_schedule(eps, alpha, T, 3.0)
    loss = discounted_loss(b, 3.0, "exponential", alpha=alpha)
    assert loss.holds(eps)
    printed = discounted_loss(corollary12_schedule(eps, alpha, T, 3.0, printed=True), 3.0, "exponential", alpha=alpha)
    assert printed.holds(eps, rtol=1e-12)
    t = np.array([1, 2, 50, 1000, T])
    ref = eps * (1 - alpha**t.astype(float))
    np.testing.assert_allclose(printed.values[t - 1], ref, rtol=1e-13)
    assert np.all(b == 3.0 / (eps * (1 - alpha)) * ROUND_UP)


def test_corollary12_needs_alpha_below_one():
    with pytest.raises(InvalidInputError, match=r"`alpha` must be a discount factor in \(0, 1\).*got 1.0"):
        corollary12_schedule(1.0, 1.0, 5)


# --- Corollary 16: the printed constant fails, the corrected one holds ----------------------


def test_printed_corollary16_fails_at_beta4_t1():
    # source: Farokhi (2020), Corollary 16, eq. (14): the discounted sum at t = 1 is Δf/b_1 = ε/H_paper(β)
    beta, eps = 4.0, 1.0
    h_paper = 2 * (math.atanh(1 / math.sqrt(3)) + math.atanh(math.sqrt(beta / (1 + beta)))) / math.sqrt(beta * (beta + 1))
    assert h_paper == pytest.approx(0.9400941495489, rel=1e-12)
    assert corollary16_paper_constant(beta) == pytest.approx(h_paper, rel=1e-14)
    loss = discounted_loss(corollary16_paper_schedule(eps, beta, 50, 1.0), 1.0, "hyperbolic", beta=beta)
    assert loss.values[0] == pytest.approx(eps / h_paper, rel=1e-14) and loss.values[0] > eps
    assert loss.holds_until(eps) == 0 and not loss.holds(eps)


def test_printed_corollary16_threshold_3_654():
    # source: issue 6 / Farokhi (2020) eq. (14): H_paper(β) = 1 at β ≈ 3.654
    assert corollary16_paper_constant(3.65) > 1 > corollary16_paper_constant(3.66)


def test_printed_corollary16_fails_for_small_beta_long_horizon():
    # source: Farokhi (2020), proof of Corollary 16: asinh(√z)/√(1+z) increases for z < 2.277, so the sup of the
    # sum near t = 2.277/β exceeds the printed bound ≈ 1.317/√β
    chk = corollary16_check(1e-5, 10**6, constant="paper")
    assert not chk["holds"] and chk["first_violation"] is not None
    assert 1.5e5 < chk["first_violation"] < 2.6e5
    assert 1.0 < chk["ratio"] < 1.01  # slightly


@pytest.mark.parametrize("beta", [1e-6, 1e-5, 1e-3, 0.1, 1.0, 4.0, 100.0])
def test_corrected_corollary16_holds_1e6(beta):
    # source: Farokhi (2020), Theorem 15 with the corrected constant H(β) (proof in corollary16_constant)
    chk = corollary16_check(beta, 10**6)
    assert chk["holds"] and chk["ratio"] <= 1.0


@pytest.mark.parametrize("beta", np.logspace(-6, 2, 17))
def test_corrected_corollary16_holds_direct(beta):
    # exact (direct) summation with its rounding bound, T = 5000
    chk = corollary16_check(float(beta), 5000, method="direct")
    assert chk["method"] == "direct" and chk["holds"]
    eps = 0.3
    loss = discounted_loss(corollary16_schedule(eps, float(beta), 5000, 7.0), 7.0, "hyperbolic", beta=float(beta))
    assert loss.holds(eps)


def test_corollary16_constant_proof_steps():
    # step (c): φ'(z) ∝ √(1 + 1/z) − asinh(√z) changes sign in (2.27, 2.28)
    assert math.sqrt(1 + 1 / 2.27) - math.asinh(math.sqrt(2.27)) > 0
    assert math.sqrt(1 + 1 / 2.28) - math.asinh(math.sqrt(2.28)) < 0
    # H(β) ≥ the brute-force sup over t ≤ 3000 (fsum), and is tight where small t dominates
    for beta in (0.05, 1.0, 10.0):
        H = corollary16_constant(beta)
        G = [math.fsum(1 / ((1 + beta * (t - k)) * math.sqrt(k)) for k in range(1, t + 1)) for t in range(1, 3001, 7)]
        assert max(G) <= H
    # source: G_1 = 1 dominates for large β; G_4(1) is the sup for β = 1 (direct evaluation)
    assert corollary16_constant(100.0) == pytest.approx(1.0, abs=2e-9)
    g4 = math.fsum(1 / ((1 + (4 - k)) * math.sqrt(k)) for k in range(1, 5))
    assert corollary16_constant(1.0) == pytest.approx(g4, rel=2e-9) and corollary16_constant(1.0) >= g4
    # small β: H ~ 2 max φ / √β = 2/√(z_c β) with z_c = 2.2767 (closed form of step (c))
    assert corollary16_constant(1e-6) == pytest.approx(2 / math.sqrt(2.276717531 * 1e-6), rel=2e-3)
    assert corollary16_constant(1e-9) >= 2 / math.sqrt(2.276717531 * 1e-9)


def test_corollary16_beta_zero_rejected():
    with pytest.raises(InvalidInputError, match=r"`beta` must be a finite discounting coefficient > 0.*got 0.0"):
        corollary16_schedule(1.0, 0.0, 3)


# --- notion identities and accounting against brute force ----------------------------------


def test_exponential_alpha1_and_hyperbolic_beta0_are_dp():
    # source: Farokhi (2020), remarks after Definitions 10 and 14
    r = np.random.default_rng(3).random(1000)
    dp = dp_loss(r)
    e1 = exponential_loss(r, 1.0)
    h0 = hyperbolic_loss(r, 0.0)
    assert np.array_equal(dp.values, e1.values) and np.array_equal(dp.values, h0.values)
    np.testing.assert_allclose(dp.values, brute_sum(r, lambda j: 1.0), rtol=1e-13)


@pytest.mark.parametrize("notion, kw, weight", [
    ("exponential", {"alpha": 0.83}, lambda j: 0.83**j),
    ("hyperbolic", {"beta": 0.37}, lambda j: 1 / (1 + 0.37 * j)),
])
def test_accounting_matches_brute_force_with_bounds(notion, kw, weight):
    # source: Farokhi (2020), eqs. (9) and (12) summed term by term
    rng = np.random.default_rng(11)
    b = rng.uniform(0.5, 4.0, 300)
    ref = brute_sum(2.0 / b, weight)
    methods = ["direct", "fft"] if notion == "hyperbolic" else [None]
    for m in methods:
        loss = discounted_loss(b, 2.0, notion, **kw, **({} if m is None else {"method": m}))
        assert np.all(np.abs(loss.values - ref) <= loss.error_bound)
        assert np.all(loss.error_bound <= 1e-9 * ref)
    A = discount_matrix(notion, 300, **kw)
    np.testing.assert_allclose(A @ (2.0 / b), ref, rtol=1e-12)
    np.testing.assert_allclose(discounted_sum(2.0 / b, notion, **kw), ref, rtol=1e-12)
    y = rng.random(300)
    np.testing.assert_allclose(discounted_sum_transpose(y, notion, **kw), A.T @ y, rtol=1e-12)
    np.testing.assert_allclose(A.T @ solve_discounted_transpose(y, notion, **kw), y, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=40), st.floats(0.01, 0.99), st.floats(0.0, 5.0))
def test_discounting_never_exceeds_dp(losses, alpha, beta):
    """Discounted sums are ≤ the undiscounted one and monotone in the discount (property)."""
    r = np.array(losses)
    dp = dp_loss(r).values
    assert np.all(exponential_loss(r, alpha).values <= dp * (1 + 1e-12) + 1e-300)
    assert np.all(hyperbolic_loss(r, beta).values <= dp * (1 + 1e-12) + 1e-300)


def test_large_epsilon_and_zero_sensitivity():
    # ε = 50 works without overflow; Δf = 0 gives no loss whatever the scales
    b = corollary_schedule("hyperbolic", 50.0, 1000, beta=0.5, sensitivity=0.0)
    assert np.all(b == 0.0)
    loss = discounted_loss(b, 0.0, "hyperbolic", beta=0.5)
    assert loss.worst == 0.0 and loss.holds(50.0)
    assert np.all(privacy_losses([0.0, 1.0], [0.0, 2.0]) == [0.0, 2.0])
    assert privacy_losses([0.0], 1.0)[0] == math.inf
    b = corollary12_schedule(50.0, 0.999, 10**5, 1.0)
    assert discounted_loss(b, 1.0, "exponential", alpha=0.999).holds(50.0)


@pytest.mark.parametrize("call, match", [
    (lambda: discounted_loss([1.0], 1.0, "geometric"), r"unknown `notion` 'geometric'"),
    (lambda: discounted_loss([1.0], 1.0, "dp", alpha=0.5), r"notion 'dp' takes neither `alpha` nor `beta`"),
    (lambda: discounted_loss([1.0], 1.0, "exponential"), r"notion 'exponential' needs `alpha`"),
    (lambda: discounted_loss([1.0], 1.0, "exponential", alpha=1.5), r"`alpha` must be a discount factor in \(0, 1\]"),
    (lambda: discounted_loss([1.0], 1.0, "hyperbolic", beta=-1.0), r"`beta` must be a finite discounting coefficient ≥ 0, got -1.0"),
    (lambda: discounted_loss([1.0, -2.0], 1.0, "dp"), r"`schedule` must be finite and ≥ 0.*entry 1 is -2.0"),
    (lambda: discounted_loss([1.0, 2.0], [1.0], "dp"), r"`sensitivity` must have length 2"),
    (lambda: hyperbolic_loss([1.0], 0.5, method="magic"), r"unknown `method` 'magic'"),
    (lambda: corollary8_schedule(0.0, 3), r"`epsilon` must be finite and > 0 \(nats\), got 0.0"),
    (lambda: corollary8_schedule(1.0, 0), r"`horizon` must be an integer T ≥ 1 \(slots\), got 0"),
    (lambda: corollary_schedule("dp", 1.0, 3, variant="best"), r"unknown `variant` 'best'"),
    (lambda: expected_relative_error([1.0], [0.0]), r"`truth` must be finite and ≠ 0; entry 0 is 0.0"),
    (lambda: daily_means(clip=-1.0), r"`clip` must be finite and > 0 \(kWh per home and day\), got -1.0"),
])
def test_errors_name_the_argument(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()


# --- infinite horizon, exponential ---------------------------------------------------------


def test_exponential_infinite_horizon_constant_schedule():
    out = exponential_infinite_horizon(1.0, 0.8, horizons=(20, 200, 2000))
    assert out["dominating_schedule_valid"]  # Corollary 12 is strictly dominated (b_1 = Δf/ε)
    vc = out["constant_variance"]
    assert vc == pytest.approx(2 / 0.2**2)  # source: Farokhi (2020), eq. (11), variance 2b²
    rows = out["rows"]
    for row in rows:
        assert row["status"] == "optimal"
        assert row["lower_bound_average"] <= row["optimal_average"] * (1 + 1e-6) <= vc * (1 + 1e-6)
        assert row["savings"] > 0
    # savings vanish like 1/T: T·savings converges
    ts = [row["T_times_savings"] for row in rows]
    assert abs(ts[2] - ts[1]) < 0.01 * ts[2] and rows[2]["savings"] < rows[1]["savings"] < rows[0]["savings"]


# --- data ------------------------------------------------------------------------------------


def test_daily_means_of_bundled_data():
    from policyopt.data import load_citylearn

    df = load_citylearn()
    dm = daily_means()
    # independent: pandas pivot of hourly sums per home and day
    ref = df.assign(day=df.time // 24).pivot_table(index="day", columns="user", values="value", aggfunc="sum")
    np.testing.assert_allclose(dm.values, ref.mean(axis=1).to_numpy(), rtol=1e-12)
    assert dm.values.size == 365 and dm.n_users == 17
    assert dm.sensitivity == pytest.approx(DEFAULT_DAILY_CLIP / 17) and dm.clipped == 0
    assert dm.unclipped_max == pytest.approx(96.773339, rel=1e-6)
    low = daily_means(df, clip=50.0)
    np.testing.assert_allclose(low.values, ref.clip(upper=50.0).mean(axis=1).to_numpy(), rtol=1e-12)
    assert low.clipped == int((ref > 50).to_numpy().sum()) > 0


def test_daily_means_rejects_missing_days():
    df = pd.DataFrame({"user": ["a"] * 24 + ["b"] * 23, "time": list(range(24)) + list(range(23)), "value": 1.0})
    with pytest.raises(InvalidInputError, match=r"home .b. has no complete day"):
        daily_means(df)


def test_expected_relative_error_is_scale_over_value():
    # source: Farokhi (2020), Section IV-B; E|Lap(b)| = b
    assert expected_relative_error([2.0, 3.0], [4.0, -6.0]).tolist() == [0.5, 0.5]


def test_only_the_fft_sum_is_uncertified():
    r = np.full(30, 0.01)
    assert discounted_loss(r, 1.0, "hyperbolic", beta=0.5, method="direct").certified
    assert not hyperbolic_loss(r, 0.5, method="fft").certified
    assert dp_loss(r).certified and exponential_loss(r, 0.5).certified
