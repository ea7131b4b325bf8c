"""The MSE penalty estimated from the readings (policyopt.utility.readings_penalty) and its backtest.

Reference values come from independent computations: direct double sums over pairs of users, brute-force means
of simulated deployments, and a slot-by-slot replay written here with plain numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from policyopt.errors import InvalidInputError
from policyopt.utility.readings_penalty import (
    ReadingsMSEPenalty,
    lag_products,
    readings_moments,
    slot_terms,
)


def common_factor_panel(n, T, rng, missing=0.0):
    """Readings that move together: x_i(t) = daily cycle + AR(1) common factor + AR(1) own part (+ gaps)."""
    t = np.arange(T)
    common = np.zeros(T)
    own = np.zeros((n, T))
    e_c, e_o = rng.normal(0, 0.5, T), rng.normal(0, 1.0, (n, T))
    for k in range(1, T):
        common[k] = 0.9 * common[k - 1] + e_c[k]
        own[:, k] = 0.6 * own[:, k - 1] + e_o[:, k]
    X = 2.0 + np.sin(2 * np.pi * t / 24)[None, :] + common[None, :] + own
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X


def direct_terms(X, a):
    """Per slot t ≥ a: self = mean_i d_i², cross = mean over ordered pairs i ≠ j of d_i d_j (valid users only)."""
    n, T = X.shape
    s, c = np.full(T, np.nan), np.full(T, np.nan)
    for t in range(a, T):
        d = X[:, t] - X[:, t - a]
        d = d[np.isfinite(d)]
        if d.size >= 1:
            s[t] = np.mean(d**2)
        if d.size >= 2:
            c[t] = sum(d[i] * d[j] for i in range(d.size) for j in range(d.size) if i != j) / (d.size * (d.size - 1))
    return s, c


def test_lag_products_against_loops():
    rng = np.random.default_rng(1)
    U, V = rng.normal(size=(4, 70)), rng.normal(size=(4, 70))
    B = lag_products(U, V, 9, block=16)
    for a in (0, 1, 5, 9):
        ref = np.array([np.sum(U[:, t - a] * V[:, t]) if t >= a else 0.0 for t in range(70)])
        np.testing.assert_allclose(B[a], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_cross_term_map_reduce_equals_direct_double_sum(missing):
    """((Σd)² − Σd²)/(n(n−1)) reduced over chunks of users = the direct double sum over ordered pairs i ≠ j."""
    rng = np.random.default_rng(2)
    X = common_factor_panel(7, 60, rng, missing)
    whole = slot_terms(X, 6, value_range=(-10, 10), chunk_users=100)
    chunked = slot_terms(X, 6, value_range=(-10, 10), chunk_users=2)  # four map steps, one reduce
    for terms in (whole, chunked):
        S, C = terms.self_slot(), terms.cross_slot()
        for a in (1, 3, 6):
            s_ref, c_ref = direct_terms(X, a)
            np.testing.assert_allclose(S[a], s_ref, rtol=1e-9, atol=1e-10, equal_nan=True)
            np.testing.assert_allclose(C[a], c_ref, rtol=1e-9, atol=1e-10, equal_nan=True)


def test_complete_and_general_paths_agree():
    X = common_factor_panel(5, 80, np.random.default_rng(3))
    a = slot_terms(X, 10, value_range=(-20, 20), complete=True)
    b = slot_terms(X, 10, value_range=(-20, 20), complete=False)
    for f in ("n", "sum_sq", "sum_d"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("I", [3, 8])
def test_decomposition_against_brute_force_deployments(I):
    """cross(a) + (self(a) − cross(a))/I = E[(m_{t−a} − m_t)²] of the mean of I pilot users drawn at random.

    Drawn without replacement (I distinct homes): exactly (R1).  Drawn with replacement a home can appear twice, so
    the pair term is the V-statistic ((n−1)·cross + self)/n; the brute force confirms that too.
    """
    rng = np.random.default_rng(4)
    n, T = 12, 300
    X = common_factor_panel(n, T, rng)
    pen = ReadingsMSEPenalty(readings_moments(X, 8, value_range=(-20, 20)), users=I)
    pooled = pen.moments.pooled([1, 4, 8])
    draws = 4000
    for k, a in enumerate((1, 4, 8)):
        for replace in (False, True):
            errs = np.empty(draws)
            for r in range(draws):
                J = rng.choice(n, size=I, replace=replace)
                m = X[J].mean(axis=0)
                errs[r] = np.mean((m[a:] - m[:-a]) ** 2)
            s, c = pooled["self"][k], pooled["cross"][k]
            expected = pen.staleness(a) if not replace else ((n - 1) * c + s) / n + (s - ((n - 1) * c + s) / n) / I
            se = errs.std(ddof=1) / np.sqrt(draws)
            assert abs(errs.mean() - expected) < 4 * se, (a, replace, errs.mean(), expected, se)
    assert pen.staleness(0) == 0.0


def test_worst_phase_and_band():
    rng = np.random.default_rng(5)
    X = common_factor_panel(6, 24 * 40, rng)
    m = readings_moments(X, 30, value_range=(-20, 20), phase_period=24)
    pen = ReadingsMSEPenalty(m, users=1000)
    self_h, cross_h = m.by_phase()
    per_phase = cross_h + (self_h - cross_h) / 1000
    np.testing.assert_allclose(pen.staleness(np.arange(1, 31)), per_phase[:, 1:].max(axis=0), rtol=1e-12)
    lo, hi = pen.band()
    assert np.all(lo[1:] <= hi[1:]) and pen.bootstrap_info()["block_periods"] >= 1
    up = ReadingsMSEPenalty(m, users=1000, design="upper")
    assert np.all(up.staleness(np.arange(31)) >= pen.staleness(np.arange(31)))
    other = pen.with_users(10)
    assert other.users == 10 and other._shared is pen._shared
    np.testing.assert_allclose(other.staleness(np.arange(31)),
                               ReadingsMSEPenalty(m, users=10).staleness(np.arange(31)), rtol=1e-15)


def test_negative_estimates_are_raised_to_zero():
    """Independent users: the cross term's estimate is ≈ 0 ± noise, so cross + (self − cross)/I < 0 at some age for a
    large I; the staleness (a mean square) is then 0, never negative, and equals the estimate wherever that is ≥ 0."""
    rng = np.random.default_rng(11)
    X = rng.normal(2.0, 1.0, (8, 24 * 30))  # i.i.d. readings: cross(a) = 0 in truth
    m = readings_moments(X, 20, value_range=(-5, 9))
    self_h, cross_h = m.by_phase()
    raw = (cross_h + (self_h - cross_h) / 10**6)[:, 1:].max(axis=0)
    assert np.any(raw < 0)  # the estimate itself dips below 0 here
    pen = ReadingsMSEPenalty(m, users=10**6)
    np.testing.assert_array_equal(pen.staleness(np.arange(1, 21)), np.maximum(raw, 0.0))
    lo, hi = pen.band()
    assert np.all(lo >= 0.0) and np.all(hi >= lo)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"users": 0}, r"`users` must be an integer ≥ 1 \(deployment size I\), got 0"),
        ({"users": 5, "design": "max"}, r"`design` must be 'point', 'upper' or 'auto', got 'max'"),
        ({"users": 5, "level": 1.0}, r"`level` must be a probability strictly between 0 and 1, got 1.0"),
    ],
)
def test_bad_arguments(kwargs, match):
    m = readings_moments(common_factor_panel(3, 50, np.random.default_rng(6)), 5, value_range=(-20, 20))
    with pytest.raises(InvalidInputError, match=match):
        ReadingsMSEPenalty(m, **kwargs)
    with pytest.raises(InvalidInputError, match=r"`t` = 6 slots is beyond the ages estimated from the readings \(0..5\)"):
        ReadingsMSEPenalty(m, users=3).staleness(6)


@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_band_equals_the_direct_block_bootstrap(missing):
    """The band from arch's circular block bootstrap indices, each replicate's per-phase means formed directly
    (Σ weight·sum / Σ weight·count over the resampled periods), bit for bit: the penalty's shortcut for the counts
    (only the periods with gaps multiplied) is exact."""
    from arch.bootstrap import CircularBlockBootstrap

    X = common_factor_panel(6, 24 * 40, np.random.default_rng(11), missing=missing)
    m = readings_moments(X, 30, value_range=(-20, 20), phase_period=24)
    pen = ReadingsMSEPenalty(m, users=1000, reps=60, seed=4)
    D, P, L1 = m.self_sum.shape
    bs = CircularBlockBootstrap(pen.bootstrap_info()["block_periods"], np.arange(D), seed=np.random.default_rng(4))
    W = np.array([np.bincount(pos[0], minlength=D) for pos, _ in bs.bootstrap(60)], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = ((W @ m.self_sum.reshape(D, -1)) / (W @ m.self_cnt.reshape(D, -1))).reshape(60, P, L1)
        c = ((W @ m.cross_sum.reshape(D, -1)) / (W @ m.cross_cnt.reshape(D, -1))).reshape(60, P, L1)
    v = c + (s - c) / 1000
    v = np.where(np.isfinite(v), v, -np.inf).max(axis=1)
    v = np.where(np.isfinite(v), v, 0.0)
    lo, hi = np.quantile(v, 0.025, axis=0, method="lower"), np.quantile(v, 0.975, axis=0, method="higher")
    band = pen.band()
    assert np.array_equal(band[0][1:], lo[1:]) and np.array_equal(band[1][1:], hi[1:])


def test_short_readings_and_upper_band_refused():
    X = common_factor_panel(3, 50, np.random.default_rng(7))
    with pytest.raises(InvalidInputError, match=r"`max_age` = 60 slots needs readings spanning more than 60 slots; the data span 50"):
        slot_terms(X, 60)
    m = readings_moments(X, 5, value_range=(-20, 20), phase_period=24)
    with pytest.raises(InvalidInputError, match=r"needs ≥ 10 periods of 24 slots; the readings cover 3"):
        ReadingsMSEPenalty(m, users=3, design="upper")


# ---------------------------------------------------------------- the bundled homes


@pytest.fixture(scope="module")
def homes():
    import policyopt as po

    df = po.load_citylearn()
    X = df.pivot(index="user", columns="time", values="value").to_numpy()
    return df, np.clip(X, 0.0, 48.0)


def independent_mse(X, a, I):
    """cross + (self − cross)/I at age a from the pivoted readings, by the direct double sum at every slot."""
    d = X[:, a:] - X[:, :-a]
    n = d.shape[0]
    self_ = np.mean(d**2)
    pair = (np.einsum("it,jt->t", d, d) - np.sum(d**2, axis=0)) / (n * (n - 1))  # Σ_{i≠j} d_i d_j, every slot
    cross = float(np.mean(pair))
    return cross + (self_ - cross) / I, self_, cross


def test_bundled_self_and_cross(homes):
    df, X = homes
    m = readings_moments(df, 8, value_range=(0, 48))
    pooled = m.pooled([1, 3, 8])
    for k, a in enumerate((1, 3, 8)):
        _, s, c = independent_mse(X, a, 1)
        assert pooled["self"][k] == pytest.approx(s, rel=1e-9) and pooled["cross"][k] == pytest.approx(c, rel=1e-9)
    # source: issue 24 (measured on main): 0.016 / 0.098 / 0.369 kWh² at a = 1 / 3 / 8
    np.testing.assert_allclose(pooled["cross"], [0.016, 0.098, 0.369], rtol=0.03)


@pytest.mark.parametrize("f_bar", [0.05, 0.2, 0.5])
def test_design_promise_covers_the_readings_at_peak_aoi(homes, f_bar):
    """At I = 10⁵ the MSE a design promises is ≥ 0.8 × an independent cross/self computation at its peak AoI."""
    import policyopt as po

    df, X = homes
    fitted = po.fit_population(df, 3, value_range=(0, 48))
    rep = po.design_schedule(fitted.population, max_penalty=f_bar, data=df, users=100_000, value_range=(0, 48),
                             phase_period=24).to_dict()
    assert rep["status"] in ("optimal", "feasible", "unbounded") and rep["A"] is not None
    peak = rep["peak_aoi"]
    noise = 2 * (48 / 100_000 / rep["epsilon_c"]) ** 2
    indep = (independent_mse(X, peak, 100_000)[0] if peak > 0 else 0.0) + noise
    assert rep["penalty"] >= 0.8 * indep and rep["penalty"] <= f_bar
    pc = rep["penalty_comparison"]
    if peak > 0:
        assert pc["ratio"] > 100  # the chain model promises orders of magnitude less


def test_backtest_agrees_with_an_independent_replay(homes):
    """backtest on the bundled year (train on the first half) against a slot-by-slot replay of its schedule."""
    from policyopt.studies.backtest import backtest

    df, X = homes
    r = backtest(df, None, train_fraction=0.5, users=100_000, value_range=(0, 48), phase_period=24, max_penalty=0.2)
    A, S, eps = r["schedule"]["A"], r["schedule"]["S_bar"], r["schedule"]["epsilon_c"]
    split = 4380
    errs = []
    for t in range(split, X.shape[1]):
        age = A + (t - split) % S
        if age == 0:
            errs.append(0.0)
            continue
        d = X[:, t] - X[:, t - age]
        n = d.size
        cross = (d.sum() ** 2 - np.sum(d**2)) / (n * (n - 1))
        errs.append(cross + (np.mean(d**2) - cross) / 100_000)
    replay = float(np.mean(errs)) + 2 * (48 / 100_000 / eps) ** 2
    assert r["realized_mse"] == pytest.approx(replay, rel=1e-9)
    assert r["realized_mse_lower"] <= replay <= r["realized_mse_upper"]
    assert r["holds"] == (r["realized_mse"] <= 0.2) and r["users"] == 100_000 and r["train_fraction"] == 0.5


def test_design_schedule_defaults_to_readings_with_data(homes):
    import policyopt as po

    df, _ = homes
    fitted = po.fit_population(df, 3, value_range=(0, 48))
    rep = po.design_schedule(fitted.population, data=df, users=100_000, value_range=(0, 48), A_max=24, S_max=24)
    d = rep.to_dict()
    low, high = d["model"]["tradeoff_range"]
    assert d["model"]["penalty"] == "readings-mse" and d["max_penalty"] == pytest.approx((low * high) ** 0.5)
    assert d["max_penalty_source"].startswith("default")


def test_independent_chains_give_the_chain_model():
    """Synthetic truth: users on independent two-state chains (values ±1).  The readings penalty then finds no cross
    term and agrees with the chain model of eqs. (48)–(49) (MSEPenalty) within the sampling error."""
    from policyopt import Population, two_state_chain
    from policyopt.utility.penalty import MSEPenalty

    rng = np.random.default_rng(8)
    p = q = 0.1
    n, T = 200, 3000
    X = np.empty((n, T))
    X[:, 0] = rng.choice([-1.0, 1.0], size=n)
    flips = rng.random((n, T)) < p  # p = q: a switch with probability 0.1 from either state
    for t in range(1, T):
        X[:, t] = np.where(flips[:, t], -X[:, t - 1], X[:, t - 1])
    pen = ReadingsMSEPenalty(readings_moments(X, 30, value_range=(-1, 1)), users=n)
    chain = MSEPenalty(Population([two_state_chain(p, q)], [n]), users=n, value_range=(-1, 1))
    ages = np.array([1, 3, 8, 30])
    pooled = pen.moments.pooled(ages)
    # self(a) = E[(x_t − x_{t−a})²] of one chain = I × the chain model's staleness (eq. (49) without noise)
    np.testing.assert_allclose(pooled["self"], n * chain.staleness(ages), rtol=0.02)
    # no common movement: the cross term is sampling noise (its standard error here is about 1e-3 at a = 30)
    assert np.all(np.abs(pooled["cross"]) < 2e-3) and np.all(np.abs(pooled["cross"]) < 0.005 * pooled["self"])


def test_pickled_penalty_is_compact_and_equal():
    """A sweep ships the penalty to Dask workers: the pickle leaves out the per-period sums and the replicates, and
    gives the same staleness, band, summary and bootstrap description."""
    import pickle

    X = common_factor_panel(6, 24 * 40, np.random.default_rng(9))
    m = readings_moments(X, 30, value_range=(-20, 20), phase_period=24)
    for design in ("point", "upper"):
        pen = ReadingsMSEPenalty(m, users=500, design=design)
        blob = pickle.dumps(pen)
        back = pickle.loads(blob)
        ages = np.arange(31)
        assert np.array_equal(back.staleness(ages), pen.staleness(ages))
        assert all(np.array_equal(x, y) for x, y in zip(back.band(), pen.band()))
        assert back.summary(7) == pen.summary(7) and back.bootstrap_info() == pen.bootstrap_info()
        assert back.moments.periods == m.periods == 40 and back.moments.self_sum.shape[0] == 1
    assert len(blob) < m.self_sum.nbytes
