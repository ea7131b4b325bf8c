"""Error bars of a release (policyopt.utility.intervals): the exact input-mean interval (CI1) and the current-mean
interval (CI2), against exact arithmetic, order statistics and processes whose truth is known."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pandas as pd
import pytest

from policyopt.errors import InvalidInputError
from policyopt.utility.intervals import (
    StalenessSample,
    current_interval,
    noise_half_width,
    noise_interval,
    phase_period,
    staleness_sample,
)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999999])
@pytest.mark.parametrize("scale", [1e-300, 0.0123, 7.5, 1e290])
def test_input_interval_has_exact_laplace_coverage(level, scale):
    # P(|L| ≤ w) = 1 − exp(−w/b) for L ~ Laplace(b): exactly the level, in 50-digit arithmetic
    w = float(noise_half_width(scale, level))
    mpmath.mp.dps = 50
    cover = 1 - mpmath.e ** (-mpmath.mpf(w) / mpmath.mpf(scale))
    assert abs(cover - mpmath.mpf(level)) < 1e-15
    lo, hi = noise_interval(3.0, scale, level)
    assert lo == pytest.approx(3.0 - w, rel=1e-15, abs=1e-300) and hi == pytest.approx(3.0 + w, rel=1e-15, abs=1e-300)


def test_input_interval_covers_simulated_releases():
    # simulation only (numpy's generator): the share of releases whose interval holds the input mean
    rng = np.random.default_rng(4)
    b, level, n = 0.37, 0.95, 200_000
    m_in = rng.uniform(0, 5, size=n)
    v = m_in + rng.laplace(0.0, b, size=n)
    lo, hi = noise_interval(v, b, level)
    share = np.mean((lo <= m_in) & (m_in <= hi))
    assert abs(share - level) < 4 * math.sqrt(level * (1 - level) / n)


def test_union_bound_half_width_is_the_two_sided_alpha_over_two():
    w = float(noise_half_width(2.0, 0.95, tails=2.0))
    assert w == pytest.approx(2.0 * math.log(2 / 0.05), rel=1e-15)
    assert math.exp(-w / 2.0) == pytest.approx(0.025, rel=1e-12)  # P(|L| > w') = α/2


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, float("nan"), True, "0.9"])
def test_level_is_checked(bad):
    with pytest.raises(InvalidInputError, match="ci_level"):
        noise_interval(1.0, 1.0, bad)


def test_phase_period_is_a_day_of_slots():
    assert phase_period(3600) == 24 and phase_period(1800) == 48 and phase_period(86400) == 1
    assert phase_period(None) == 1 and phase_period(7 * 3600) == 1  # a day is not whole 7 h slots


def _sample(mu, var, users, phase=None, period=1):
    mu = np.asarray(mu, dtype=float)
    return StalenessSample(1, period, np.zeros(mu.size, np.int64) if phase is None else np.asarray(phase, np.int64), mu,
                           np.asarray(var, dtype=float), np.asarray(users, np.int64))


def test_quantiles_of_point_masses_are_order_statistics():
    rng = np.random.default_rng(1)
    mu = rng.normal(size=400)
    q = _sample(mu, np.zeros(400), np.full(400, 10)).quantiles(10, 0.95)  # p = 0.0125: the 5th and 395th of 400
    s = np.sort(mu)
    assert not q.pooled and q.slots == 400
    assert s[3] < q.low[0] <= s[4] and q.low[0] == pytest.approx(s[4], abs=1e-11)
    assert q.high[0] == pytest.approx(s[394], abs=1e-11) and q.high[0] >= s[394]


def test_quantiles_of_a_normal_mixture_match_its_distribution():
    # I = 4 users drawn from n_t = 20: variance s²(1/4 − 1/20) = 0.2 s²; two components with known mixture quantiles
    from scipy.optimize import brentq
    from scipy.stats import norm

    mu, var = np.array([-1.0, 2.0] * 50), np.array([5.0, 0.5] * 50)
    q = _sample(mu, var, np.full(100, 20)).quantiles(4, 0.9)
    sd = np.sqrt(var[:2] * 0.2)

    def F(x):
        return 0.5 * (norm.cdf((x + 1) / sd[0]) + norm.cdf((x - 2) / sd[1]))

    assert q.low[0] == pytest.approx(brentq(lambda x: F(x) - 0.025, -20, 20), abs=1e-9)
    assert q.high[0] == pytest.approx(brentq(lambda x: F(x) - 0.975, -20, 20), abs=1e-9)


def test_a_deployment_as_large_as_the_pilot_adds_no_spread():
    mu = np.linspace(-1, 1, 100)
    a = _sample(mu, np.full(100, 9.0), np.full(100, 30)).quantiles(30, 0.95)
    b = _sample(mu, np.zeros(100), np.full(100, 30)).quantiles(30, 0.95)
    assert a.low[0] == b.low[0] and a.high[0] == b.high[0]
    c = _sample(mu, np.full(100, 9.0), np.full(100, 30)).quantiles(3, 0.95)  # fewer users: wider
    assert c.low[0] < a.low[0] - 0.5 and c.high[0] > a.high[0] + 0.5


def test_sparse_phases_are_pooled_and_too_few_slots_give_none():
    mu = np.arange(200, dtype=float)
    phase = np.arange(200) % 4  # 50 slots per phase: below ⌈4/0.05⌉ = 80 at level 0.95
    s = _sample(mu, np.zeros(200), np.ones(200), phase=phase, period=4)
    q = s.quantiles(1, 0.95)
    assert q.pooled and q.slots == 200 and np.all(q.low == q.low[0])
    assert not s.quantiles(1, 0.5).pooled  # ⌈4/0.5⌉ = 8 per phase is enough
    assert _sample(mu[:50], np.zeros(50), np.ones(50)).quantiles(1, 0.95) is None


def test_staleness_sample_is_the_pilots_mean_change():
    df = pd.DataFrame({"user": ["a"] * 5 + ["b"] * 5 + ["c"] * 4,
                       "time": list(range(5)) + list(range(5)) + [0, 1, 3, 4],
                       "value": [1, 2, 4, 8, 16, 0, 0, 1, 1, 3, 5, 5, 5, 50]})
    s = staleness_sample(df, 2, value_range=(0, 10))  # c's 50 clipped to 10
    # t = 2: a 4 − 1, b 1 − 0 (c has none at 2); t = 3: a 6, b 1, c 0;
    # t = 4: a min(16, 10) − 4 = 6, b 2 (c has no reading at 2)
    assert s.age == 2 and s.period == 1
    np.testing.assert_allclose(s.mean_change, [(3 + 1) / 2, (6 + 1 + 0) / 3, (6 + 2) / 2])
    np.testing.assert_allclose(s.var_change, [2.0, np.var([6, 1, 0], ddof=1), 8.0])
    np.testing.assert_array_equal(s.users, [2, 3, 2])
    back = StalenessSample.from_dict(s.to_dict())
    assert all(np.array_equal(getattr(back, k), getattr(s, k)) for k in ("phase", "mean_change", "var_change", "users"))
    with pytest.raises(InvalidInputError, match="age"):
        staleness_sample(df, -1)
    with pytest.raises(InvalidInputError, match="5 slots"):
        staleness_sample(df, 5)


def test_current_interval_covers_a_known_process_on_held_out_time():
    # 40 homes, hourly, 120 days: a daily profile (evening ramp), a common day-to-day level (weather) and own noise.
    # Design on the first 60 days, releases on the last 60 (every hour, A = 3): the share of releases whose (CI2)
    # interval holds the current mean of the same homes is at least the level (exact in the noise: the conditional
    # probability given the readings, so no noise is simulated for the releases).
    rng = np.random.default_rng(7)
    U, days, A, level = 40, 120, 3, 0.9
    T = 24 * days
    hour = np.arange(T) % 24
    profile = 1.0 + np.where((hour >= 17) & (hour <= 21), 1.5, 0.0) + 0.3 * np.sin(2 * np.pi * hour / 24)
    common = np.repeat(rng.normal(0, 0.2, size=days), 24)
    X = np.clip(profile + common + rng.normal(0, 0.5, size=(U, T)), 0, 6)
    df = pd.DataFrame({"user": np.repeat([f"h{i}" for i in range(U)], T), "time": np.tile(np.arange(T), U),
                       "value": X.ravel()})
    half = T // 2
    sample = staleness_sample(df[df["time"] < half], A, value_range=(0, 6), slot_seconds=3600)
    assert sample.period == 24
    q = sample.quantiles(U, level)
    assert not q.pooled
    slots = np.arange(half + A, T)
    m = X.mean(axis=0)
    b = (6 - 0) / U / 0.5  # ε_C = 0.5
    D = m[slots] - m[slots - A]
    w = float(noise_half_width(b, level, tails=2.0))
    h = slots % 24
    lap = lambda x: np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / b), 1 - 0.5 * np.exp(-np.maximum(x, 0) / b))
    cover = lap(D + w - q.low[h]) - lap(D - w - q.high[h])  # P(m_now ∈ CI2 | readings)
    assert cover.mean() >= level
    # and the interval is (CI2) around a release
    lo, hi = current_interval(2.0, b, slots[:3], q, level)
    np.testing.assert_allclose(lo, 2.0 - w + q.low[h[:3]], rtol=1e-15)
    np.testing.assert_allclose(hi, 2.0 + w + q.high[h[:3]], rtol=1e-15)
