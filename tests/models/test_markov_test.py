"""Markov tests (policyopt.models.markov_test): G² per lag, family-wise max-T / min-p p-values, power and size."""

from __future__ import annotations

import math

import numpy as np
import pytest

import policyopt.models.markov_test as mt
from _markov_data import fit_chains
from policyopt.errors import InvalidInputError
from policyopt.models.empirical import simulate_chain_states, user_streams
from policyopt.models.markov_test import (
    G2Profile,
    chi2_logsf,
    default_markov_lags,
    describe_context,
    family_wise_p,
    g2_profile,
    markov_test,
    markov_test_from_parts,
)

# --------------------------------------------------------------------------------------------------------------------
# independent references


def loop_g2(series, K, lags, k=1, period=None, starts=None, observed=None):
    """G²(ℓ), df(ℓ), triples by plain Python dictionaries (Anderson & Goodman 1957, the textbook formula)."""
    stat, dfs, pairs = [], [], []
    for ell in lags:
        G, D, N = 0.0, 0, 0
        for u, row in enumerate(series):
            x = [int(v) if (observed is None or observed[u][t] >= 0) else -1 for t, v in enumerate(row)]
            n = {}
            for t in range(ell, len(x) - 1):
                ctx = tuple(x[t - i] for i in range(k))
                if min(ctx) < 0 or x[t - ell] < 0 or x[t + 1] < 0:
                    continue
                if period is not None:
                    ctx += ((int(starts[u]) + t) % period,)
                n[(ctx, x[t - ell], x[t + 1])] = n.get((ctx, x[t - ell], x[t + 1]), 0) + 1
            N += sum(n.values())
            for c in {c for c, _, _ in n}:
                cells = {(a, y): v for (cc, a, y), v in n.items() if cc == c}
                tot = sum(cells.values())
                rows, cols = {}, {}
                for (a, y), v in cells.items():
                    rows[a] = rows.get(a, 0) + v
                    cols[y] = cols.get(y, 0) + v
                G += 2 * sum(v * math.log(v * tot / (rows[a] * cols[y])) for (a, y), v in cells.items())
                D += (len(rows) - 1) * (len(cols) - 1)
        stat.append(G)
        dfs.append(D)
        pairs.append(N)
    return np.array(stat), np.array(dfs), np.array(pairs)


def simulate_like(x, matrices, R, seed):
    """R data sets from first-order chains, each user from its own stream, started in its first state."""
    U, T = x.shape
    return simulate_chain_states(matrices, np.full(U, T), x[:, 0], R, user_streams([f"u{i}" for i in range(U)], seed))


def order2_chain(U, T, rng):
    """Binary order-2 chain: Pr(X_t = 1 | X_{t−1}, X_{t−2}) from a table where X_{t−2} matters."""
    p1 = np.array([[0.1, 0.7], [0.6, 0.9]])  # [x_{t−2}, x_{t−1}]
    x = np.zeros((U, T), dtype=np.int64)
    x[:, :2] = rng.integers(0, 2, size=(U, 2))
    for t in range(2, T):
        x[:, t] = rng.random(U) < p1[x[:, t - 2], x[:, t - 1]]
    return x


@pytest.fixture(params=["direct", "bits"])
def path(request, monkeypatch):
    """Both counting paths of the kernel: one increment per triple, or bit sets with popcount."""
    monkeypatch.setattr(mt, "BITSET_COST_RATIO", 0.0 if request.param == "direct" else 1e18)
    return request.param


# --------------------------------------------------------------------------------------------------------------------
# the statistic


def test_tiny_series_by_hand(path):
    x = np.array([[0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1]])
    prof = g2_profile(x, 2, [1])
    # source: by hand — in each current state the 5 triples are (a, y) = (0, 1) ×3 and (1, 0) ×2, so each context
    # gives 2[3 ln(5·3/(3·3)) + 2 ln(5·2/(2·2))]; df = 2 contexts × (2 − 1)(2 − 1)
    want = 2 * 2 * (3 * math.log(5 / 3) + 2 * math.log(5 / 2))
    assert prof.statistic[0] == pytest.approx(want, rel=1e-14)
    assert prof.df.tolist() == [2] and prof.pairs.tolist() == [10]
    ref = loop_g2(x.tolist(), 2, [1])
    assert prof.statistic[0] == pytest.approx(ref[0][0], rel=1e-14)


def test_structural_zeros_reduce_df(path):
    # context 0: past state a is always 0 (one non-empty a margin) → (1 − 1)(s − 1) = 0;
    # context 1: a ∈ {0, 1}, next y ∈ {0, 1, 2} → (2 − 1)(3 − 1) = 2
    x = np.array([[0, 0, 1, 2, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 2, 0]])
    prof = g2_profile(x, 3, [1])
    s, d, n = loop_g2(x.tolist(), 3, [1])
    assert prof.df.tolist() == d.tolist()
    np.testing.assert_allclose(prof.statistic, s, rtol=1e-13)
    assert prof.pairs.tolist() == n.tolist() == [14]


def test_kernel_equals_loops_on_random_inputs(path):
    rng = np.random.default_rng(11)
    for _ in range(12):
        K, k, U, T = int(rng.integers(2, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(30, 220))
        period = None if rng.random() < 0.4 else int(rng.integers(2, 9))
        starts = rng.integers(-50, 1000, U) if period else None
        x = np.where(rng.random((U, T)) < 0.12, -1, rng.integers(0, K, size=(U, T)))
        lags = sorted(set(rng.integers(k, min(T - 1, 150), size=5).tolist()))
        got = g2_profile(x, K, lags, context_order=k, period=period, starts=starts)
        s, d, n = loop_g2(x.tolist(), K, lags, k, period, starts)
        np.testing.assert_allclose(got.statistic, s, rtol=1e-11, atol=1e-10)
        np.testing.assert_array_equal(got.df, d)
        np.testing.assert_array_equal(got.pairs, n)


def test_observed_missing_slots_apply_to_simulated(path):
    rng = np.random.default_rng(12)
    obs = np.where(rng.random((3, 90)) < 0.2, -1, rng.integers(0, 3, size=(3, 90)))
    sim = rng.integers(0, 3, size=(3, 80))  # fewer columns: the rest is missing
    got = g2_profile(sim, 3, 6, observed=obs)
    s, d, n = loop_g2(sim.tolist(), 3, range(1, 7), observed=obs)
    np.testing.assert_allclose(got.statistic, s, rtol=1e-12)
    np.testing.assert_array_equal(got.df, d)
    np.testing.assert_array_equal(got.pairs, n)


def test_factorised_table_gives_exactly_zero(path):
    # the de Bruijn cycle 00010111 holds every binary triple once; repeated m times (plus the wrap), each lag-1
    # table n(c, a, y) is m for every (c, a, y): it factorises and G² must be exactly 0 (not just small)
    x = np.array([list(np.tile([0, 0, 0, 1, 0, 1, 1, 1], 25)) + [0, 0]])
    prof = g2_profile(x, 2, [1])
    assert prof.statistic[0] == 0.0
    assert prof.df[0] == 2 and prof.pairs[0] == 200


def test_groups_of_users_add_up():
    rng = np.random.default_rng(13)
    x = np.where(rng.random((7, 150)) < 0.05, -1, rng.integers(0, 3, size=(7, 150)))
    starts = rng.integers(0, 500, 7)
    whole = g2_profile(x, 3, 20, period=24, starts=starts)
    parts = g2_profile(x[:3], 3, 20, period=24, starts=starts[:3]) + g2_profile(x[3:], 3, 20, period=24,
                                                                                 starts=starts[3:])
    np.testing.assert_allclose(parts.statistic, whole.statistic, rtol=1e-12)
    np.testing.assert_array_equal(parts.df, whole.df)
    assert parts.users == 7 and parts.period == 24


def test_chi2_logsf_far_tail_matches_mpmath():
    import mpmath

    mpmath.mp.dps = 40
    for x, d in [(1e5, 10), (3000.0, 10), (1e6, 40_000), (1500.0, 1000), (10.0, 3)]:
        # source: mpmath's regularised upper incomplete gamma, ln Q(df/2, x/2)
        ref = float(mpmath.log(mpmath.gammainc(mpmath.mpf(d) / 2, mpmath.mpf(x) / 2, mpmath.inf, regularized=True)))
        assert float(chi2_logsf(x, d)) == pytest.approx(ref, rel=1e-13)
    assert chi2_logsf(5.0, 0) == 0.0 and chi2_logsf(0.0, 4) == 0.0


# --------------------------------------------------------------------------------------------------------------------
# the family-wise p-value


def test_family_wise_p_is_exact_for_exchangeable_sets():
    # R + 1 exchangeable sets (i.i.d. from one distribution, per-lag df differing): the family-wise p is uniform on
    # {1, …, R + 1}/(R + 1), so the rejection rate at level 0.95 is 1/20 = 0.05 for both transforms
    rng = np.random.default_rng(14)
    R, L, reps = 19, 8, 1500
    df = np.array([1, 2, 3, 5, 8, 13, 21, 34])
    p_chi2, p_z = [], []
    for _ in range(reps):
        sets = rng.chisquare(df, size=(R + 1, L)) * rng.uniform(0.5, 2.0)  # the χ² shape need not be right
        p_chi2.append(family_wise_p(sets[0], sets[1:], df=df).p_value)
        p_z.append(family_wise_p(sets[0], sets[1:], transform="z").p_value)
    for p in (np.array(p_chi2), np.array(p_z)):
        rate = np.mean(p <= 0.05 + 1e-12)
        assert abs(rate - 0.05) < 3.5 * math.sqrt(0.05 * 0.95 / reps)  # binomial sd, 3.5 σ
        assert abs(np.mean(p) - 0.525) < 0.02  # mean of the uniform on {1..20}/20


def test_family_wise_p_definition_and_worst_lag():
    obs = np.array([1.0, 30.0, 2.0])
    draws = np.array([[1.0, 5.0, 2.0], [40.0, 1.0, 1.0], [2.0, 2.0, 50.0]])
    fw = family_wise_p(obs, draws, df=np.array([1, 1, 1]))
    # source: by the definition — m_0 = ln sf(30) is beaten by set 1 (ln sf(40)) and set 2 (ln sf(50)): p = 3/4
    assert fw.p_value == 0.75 and fw.worst == 1
    np.testing.assert_allclose(fw.pointwise, [(1 + 3) / 4, (1 + 0) / 4, (1 + 2) / 4])
    z = family_wise_p(obs, draws, transform="z")
    assert z.worst == 1 and 0.25 <= z.p_value <= 1.0
    flat = family_wise_p(np.ones(3), np.ones((4, 3)), transform="z")  # no lag varies: no evidence
    assert flat.p_value == 1.0 and flat.worst is None


# --------------------------------------------------------------------------------------------------------------------
# power and size


def test_order2_chain_is_refuted():
    rng = np.random.default_rng(15)
    x = order2_chain(20, 2000, rng)
    sims = simulate_like(x, fit_chains(x, 2), 19, seed=1)
    res = markov_test(x, 2, sims, 5)
    assert res.refuted and res.p_value == 0.05 and res.worst_lag == 1
    assert res.pointwise_p_values[0] == 0.05
    d = res.to_dict()
    assert set(d) == {"method", "level", "lags", "statistic", "p_value", "worst_lag", "refuted", "pointwise_p_values",
                      "df", "draws", "context"}
    assert d["lags"] == [1, 2, 3, 4, 5] and d["draws"] == 19 and d["context"] == "the current state X_t"
    assert "max-T/min-p" in d["method"] and "19" in d["method"] and "G²" in d["method"]
    again = markov_test(x, 2, iter(list(sims)), 5)  # an iterable of (U, T) sets gives the same verdict
    np.testing.assert_array_equal(again.draw_statistic, res.draw_statistic)


def test_xor_chain_is_refuted_though_lag_one_tv_is_zero():
    # X_t = X_{t−1} ⊕ X_{t−2} ⊕ noise: the pair chain (X_{t−1}, X_t) is doubly stochastic, so in stationarity the
    # pairs are uniform and X_t is independent of X_{t−1} and of X_{t−2} alone (Δ(1) = Δ(2) = 0; a first-order fit
    # is i.i.d. uniform), yet (X_{t−1}, X_{t−2}) fix X_t up to the noise
    rng = np.random.default_rng(16)
    U, T = 10, 1500
    x = np.zeros((U, T), dtype=np.int64)
    x[:, :2] = rng.integers(0, 2, size=(U, 2))
    for t in range(2, T):
        x[:, t] = x[:, t - 1] ^ x[:, t - 2] ^ (rng.random(U) < 0.1)
    P = fit_chains(x, 2)
    pooled = fit_chains(x.reshape(1, -1), 2)[0]
    assert abs(pooled[0, 1] - pooled[1, 1]) < 0.01  # the chains see no lag-1 dependence (a slowly mixing 10 % noise
    # leaves per-user wiggles of a few percent)
    res = markov_test(x, 2, simulate_like(x, P, 19, seed=2), 3)
    assert res.refuted and res.worst_lag == 1


def test_weekly_routine_is_refuted_at_lag_167():
    # a week of hourly states repeated, 10 % of slots flipped: given X_t, X_{t+1} depends on X_{t−167} (same hour
    # of the week), which a first-order chain forgets
    rng = np.random.default_rng(17)
    U, T, K = 6, 168 * 6, 3
    pattern = rng.integers(0, K, size=(U, 168))
    x = np.tile(pattern, (1, T // 168))
    flip = rng.random((U, T)) < 0.1
    x = np.where(flip, (x + rng.integers(1, K, size=(U, T))) % K, x)
    res = markov_test(x, K, simulate_like(x, fit_chains(x, K), 19, seed=3), 168)
    assert res.refuted and res.worst_lag == 167
    assert res.log_sf[166] == res.log_sf.min()


def test_phase_context_explains_a_daily_cycle():
    # a deterministic daily cycle with flips: with the phase (slot mod 24) in the context, the weekly lag carries no
    # information beyond the phase; without it, it does
    rng = np.random.default_rng(18)
    U, T = 4, 24 * 40
    day = rng.integers(0, 2, size=(U, 24))
    x = np.where(rng.random((U, T)) < 0.2, 1 - np.tile(day, (1, 40)), np.tile(day, (1, 40)))
    plain = g2_profile(x, 2, [23])
    phased = g2_profile(x, 2, [23], period=24, starts=np.zeros(U, dtype=int))
    # G² per df: far above 1 without the phase, about 1 (independence) with it
    assert plain.statistic[0] / plain.df[0] > 20
    assert phased.statistic[0] / phased.df[0] < 2


def test_known_first_order_chains_refuted_about_five_percent():
    # the test's chains are the true ones (no fitting): the family-wise size is exact, 1/20 at level 0.95
    rng = np.random.default_rng(19)
    U, T, reps = 4, 300, 200
    P = [np.array([[0.8, 0.15, 0.05], [0.2, 0.6, 0.2], [0.1, 0.2, 0.7]])] * U
    refuted = 0
    for r in range(reps):
        x = simulate_chain_states(P, np.full(U, T), rng.integers(0, 3, U), 1, rng)[0]
        x[rng.random((U, T)) < 0.05] = -1
        first = np.where(x[:, 0] >= 0, x[:, 0], 0)
        sims = simulate_chain_states(P, np.full(U, T), first, 19, rng)
        refuted += markov_test(x, 3, sims, 12).refuted
    # 200 repetitions at rate 0.05: 10 expected, sd 3.1; a generous ±3.5 sd
    assert 1 <= refuted <= 21, refuted


# --------------------------------------------------------------------------------------------------------------------
# defaults, reduce step, messages


def test_default_markov_lags_rule():
    assert default_markov_lags(None, 47, 8760) == 168  # a week of hourly slots
    assert default_markov_lags(336, 47, 8760) == 336  # half-hour slots
    assert default_markov_lags(None, 500, 8760) == 500  # the box's last age is larger
    assert default_markov_lags(None, 47, 100) == 98  # capped at T − 2
    assert default_markov_lags(7, 0, 2) == 1  # at least 1


def test_describe_context():
    assert describe_context() == "the current state X_t"
    assert describe_context(3, 168) == "the last 3 states X_t, …, X_(t−2) and the phase (slot mod 168)"


def test_from_parts_equals_markov_test():
    rng = np.random.default_rng(20)
    x = rng.integers(0, 2, size=(5, 200))
    sims = rng.integers(0, 2, size=(3, 5, 200))
    full = markov_test(x, 2, sims, 6, context_order=2)
    obs = g2_profile(x[:2], 2, 6, context_order=2) + g2_profile(x[2:], 2, 6, context_order=2)
    draws = [g2_profile(s[:2], 2, 6, context_order=2, observed=x[:2]) + g2_profile(s[2:], 2, 6, context_order=2,
                                                                                      observed=x[2:]) for s in sims]
    part = markov_test_from_parts(obs, draws)
    assert part.p_value == full.p_value and part.lags.tolist() == [2, 3, 4, 5, 6]
    np.testing.assert_allclose(part.draw_statistic, full.draw_statistic, rtol=1e-12)


def test_errors_name_the_argument():
    x = np.zeros((2, 50), dtype=int)
    with pytest.raises(InvalidInputError, match=r"`lags` contains 1, below `context_order`=2"):
        g2_profile(x, 2, [1, 2], context_order=2)
    with pytest.raises(InvalidInputError, match=r"`lags`=1 asks for lags 2\.\.1"):
        g2_profile(x, 2, 1, context_order=2)
    with pytest.raises(InvalidInputError, match=r"`lags` contains 49, above T − 2 = 48"):
        g2_profile(x, 2, [49])
    with pytest.raises(InvalidInputError, match=r"`lags` has repeated lags"):
        g2_profile(x, 2, [3, 3])
    with pytest.raises(InvalidInputError, match=r"`lags` must be an integer L"):
        g2_profile(x, 2, [1.5])
    with pytest.raises(InvalidInputError, match=r"`context_order` must be an integer ≥ 1, got 0"):
        g2_profile(x, 2, 3, context_order=0)
    with pytest.raises(InvalidInputError, match=r"`period`=24 needs `starts`"):
        g2_profile(x, 2, 3, period=24)
    with pytest.raises(InvalidInputError, match=r"`starts` was given .* without `period`"):
        g2_profile(x, 2, 3, starts=[0, 0])
    with pytest.raises(InvalidInputError, match=r"`starts` must be 2 integer slot indices"):
        g2_profile(x, 2, 3, period=24, starts=[0])
    with pytest.raises(InvalidInputError, match=r"`period` must be an integer ≥ 1, got 0"):
        g2_profile(x, 2, 3, period=0, starts=[0, 0])
    with pytest.raises(InvalidInputError, match=r"`observed` has shape \(1, 50\)"):
        g2_profile(x, 2, 3, observed=x[:1])
    with pytest.raises(InvalidInputError, match=r"contexts, more than 2\^62"):
        g2_profile(x, 2, 48, context_order=48, period=2**15, starts=[0, 0])
    with pytest.raises(InvalidInputError, match=r"`simulated` data set 0 has shape \(2, 60\)"):
        markov_test(x, 2, [np.zeros((2, 60), dtype=int)], 3)
    with pytest.raises(InvalidInputError, match=r"`simulated` data set 1 holds states 0\.\.2, outside 0\.\.1"):
        markov_test(x, 2, [x, x + 2 * (np.arange(50) == 3)], 3)
    with pytest.raises(InvalidInputError, match=r"`simulated` holds no data set"):
        markov_test(x, 2, [], 3)
    with pytest.raises(InvalidInputError, match=r"`simulated` must be an array \(R, U, T\)"):
        markov_test(x, 2, x, 3)
    with pytest.raises(InvalidInputError, match=r"`level` must be a probability strictly between 0 and 1, got 1\.5"):
        markov_test(x, 2, [x], 3, level=1.5)
    with pytest.raises(InvalidInputError, match=r"`transform` must be 'chi2' or 'z', got 'max'"):
        family_wise_p([1.0], [[2.0]], transform="max")
    with pytest.raises(InvalidInputError, match=r"`transform`='chi2' needs `df`"):
        family_wise_p([1.0], [[2.0]])
    with pytest.raises(InvalidInputError, match=r"`draws` must have shape \(R ≥ 1, 2\), got shape \(1, 3\)"):
        family_wise_p([1.0, 2.0], [[2.0, 1.0, 3.0]], transform="z")
    with pytest.raises(InvalidInputError, match=r"`df` and `draws_df` must be ≥ 0"):
        family_wise_p([1.0], [[2.0]], df=[-1])
    with pytest.raises(InvalidInputError, match=r"`observed` and `draws` must be finite"):
        family_wise_p([np.nan], [[2.0]], transform="z")
    with pytest.raises(InvalidInputError, match=r"`box_last_age` must be an integer ≥ 0, got -1"):
        default_markov_lags(None, -1, 100)
    with pytest.raises(InvalidInputError, match=r"`slots_per_week` must be an integer ≥ 1, got 0"):
        default_markov_lags(0, 5, 100)
    a, b = g2_profile(x, 2, 3), g2_profile(x, 2, 4)
    with pytest.raises(InvalidInputError, match=r"only profiles of the same test add"):
        a.merge(b)
    with pytest.raises(InvalidInputError, match=r"`draws` is empty"):
        markov_test_from_parts(a, [])
    with pytest.raises(InvalidInputError, match=r"`draws` item 0 is not a G2Profile of the same test"):
        markov_test_from_parts(a, [b])
    assert isinstance(a, G2Profile)


def test_chi2_logsf_is_scipy_stats_bit_for_bit_above_the_deep_tail():
    """``scipy.special`` under ``scipy.stats.chi2.logsf``'s own rule gives its numbers exactly (no scipy.stats import)."""
    from scipy import stats

    rng = np.random.default_rng(5)
    d = rng.integers(1, 400, 4000).astype(float)
    x = np.concatenate([rng.uniform(0, 2, 1000) * d[:1000], rng.uniform(0, 6, 3000) * d[1000:]])
    x[:20] = 0.0
    ref = stats.chi2.logsf(x, d)
    got = chi2_logsf(x, d)
    keep = ref > -600
    assert keep.sum() > 3000 and np.array_equal(got[keep], ref[keep])
