"""The fast kernels of the direct Δ(t) estimate (policyopt.models.lag_counts, row_tv, chain_simulation, empirical)
give the same numbers as plain loops, bit for bit.

Both counting paths (one ``np.bincount`` over (series, lag, state, state) codes; FFT cross-correlation), the
pairs-per-row shortcut, the vectorised largest row TV and the chain simulation are compared with straightforward
Python loops on random series with gaps (−1), several K and L, L up to T − 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from policyopt.models import empirical as emp
from policyopt.models import lag_counts, row_tv
from policyopt.models.empirical import lagged_pair_counts, max_row_tv, simulate_chain_states


def loop_counts(x, K, L):
    """counts[u, t − 1, a, b] = #{s : x_s = a, x_{s−t} = b}, by plain loops."""
    out = np.zeros((len(x), L, K, K), dtype=np.int64)
    for u, row in enumerate(x.tolist()):
        for t in range(1, L + 1):
            for s in range(t, len(row)):
                if row[s] >= 0 and row[s - t] >= 0:
                    out[u, t - 1, row[s], row[s - t]] += 1
    return out


def loop_max_tv(c, ok):
    """max over claimed rows x < x' of ½ Σ_y |R(x, y) − R(x', y)| for one (K, K) table, pair by pair."""
    rows = c.sum(axis=-1)
    best = 0.0
    for a in range(c.shape[0]):
        for b in range(a + 1, c.shape[0]):
            if ok[a] and ok[b] and rows[a] > 0 and rows[b] > 0:
                best = max(best, 0.5 * np.abs(c[a] / rows[a] - c[b] / rows[b]).sum())
    return min(best, 1.0)


def series(rng, S, T, K, gaps):
    x = rng.integers(0, K, size=(S, T))
    x[rng.random((S, T)) < gaps] = -1
    x[0, T // 2 :] = -1  # a shorter user (padded with −1)
    return x


def fft_counts(x, K, L):
    ind = (x[:, None, :] == np.arange(K)[None, :, None]).astype(np.float64)
    past = np.concatenate([np.zeros(ind.shape[:2] + (L,)), ind], axis=-1)
    return lag_counts._xcorr_counts(ind, past, L)


@pytest.mark.parametrize("K", [2, 3, 5, 12])
@pytest.mark.parametrize("gaps", [0.0, 0.1, 0.7])
def test_direct_and_fft_counts_equal_a_plain_loop(K, gaps):
    rng = np.random.default_rng([K, int(gaps * 10)])
    for T in (2, 9, 40):
        x = series(rng, 4, T, K, gaps)
        for L in sorted({1, max(1, T // 3), T - 1}):
            want = loop_counts(x, K, L)
            np.testing.assert_array_equal(lag_counts._direct_counts(x, K, L), want)
            np.testing.assert_array_equal(fft_counts(x, K, L), want)
            np.testing.assert_array_equal(lagged_pair_counts(x, K, L), want)
            got = lag_counts.pairs_per_row(x, K, L, lag_counts.state_totals(x, K))
            if got is not None:  # None: too many gaps for the shortcut
                np.testing.assert_array_equal(got, want.sum(axis=-1))


def test_cost_model_picks_each_path_where_it_is_faster():
    assert lag_counts._direct_is_cheaper(168, 12, 95)  # short series, many states: direct
    assert not lag_counts._direct_is_cheaper(8760, 3, 876)  # a year hourly: FFT
    assert not lag_counts._direct_is_cheaper(8760, 12, 876)


@pytest.mark.parametrize("K", [2, 3, 4, 7, 8, 12])
def test_max_row_tv_equals_a_pairwise_loop_bit_for_bit(K):
    rng = np.random.default_rng(K)
    counts = rng.integers(0, 40, size=(6, 5, K, K))
    counts[0, 0] = 0  # no pairs at all
    counts[1, :, 0] = 0  # a row with no pairs
    counts[2, 1, : K - 1] = 0  # a single row with pairs
    for mp in (1, 60, 150):
        got = max_row_tv(counts, mp)
        rows = counts.sum(axis=-1)
        want = np.array([loop_max_tv(c.astype(float), r >= mp) for c, r in zip(counts.reshape(-1, K, K), rows.reshape(-1, K))])
        np.testing.assert_array_equal(got.ravel(), want)
    claimed = rng.random((1, 5, K)) < 0.7  # broadcast over the leading axis, as the bootstrap passes it
    got = max_row_tv(counts, claimed=claimed)
    flat_ok = np.broadcast_to(claimed, counts.shape[:-1]).reshape(-1, K)
    want = [loop_max_tv(c.astype(float), ok) for c, ok in zip(counts.reshape(-1, K, K), flat_ok)]
    np.testing.assert_array_equal(got.ravel(), want)


@pytest.mark.parametrize("K", [3, 12])
def test_per_user_statistic_with_shortcuts_equals_full_counts(K):
    # user_max_tv skips users whose rows cannot reach min_pairs; it must equal the TV of the full counts
    rng = np.random.default_rng(K + 100)
    x = series(rng, 12, 300, K, 0.02)
    x[:3, 150:] = -1  # shorter users
    x[3, :] = rng.integers(0, 2, 300)  # two states only
    x[4, ::2] = -1  # many gaps
    L = 60
    counts = loop_counts(x, K, L)
    for mp in (1, 20, 90, 200):
        per_user, rows = row_tv.user_max_tv(x, K, L, mp)
        np.testing.assert_array_equal(rows, counts.sum(axis=-1))
        np.testing.assert_array_equal(per_user, max_row_tv(counts, mp))
        np.testing.assert_array_equal(row_tv.user_max_tv(x, K, L, mp, with_rows=False)[0], per_user)


def loop_simulate(P, lengths, initial, R, gens):
    """Each user's draws from its own generator, state by state: #{k < K − 1 : u ≥ cumsum(P[prev])[k]}."""
    U, K = len(P), P[0].shape[0]
    out = np.full((R, U, max(lengths)), -1, dtype=np.int64)
    for u in range(U):
        cum = np.cumsum(P[u], axis=1)
        uni = gens[u].random((R, lengths[u] - 1)) if lengths[u] > 1 else np.zeros((R, 0))
        for r in range(R):
            out[r, u, 0] = initial[u]
            for s in range(1, lengths[u]):
                out[r, u, s] = sum(uni[r, s - 1] >= cum[out[r, u, s - 1], k] for k in range(K - 1))
    return out


@pytest.mark.parametrize("K", [2, 3, 12])
def test_simulate_chain_states_equals_a_plain_loop(K):
    rng = np.random.default_rng(K)
    U = 5
    P = rng.dirichlet(np.full(K, 0.5), size=(U, K))
    lengths = [1, 2, 17, 30, 30]
    initial = rng.integers(0, K, U)
    got = simulate_chain_states(list(P), lengths, initial, 3, [np.random.default_rng([4, u]) for u in range(U)])
    want = loop_simulate(list(P), lengths, initial, 3, [np.random.default_rng([4, u]) for u in range(U)])
    np.testing.assert_array_equal(got, want)


def test_resampled_counts_equal_the_double_precision_product():
    rng = np.random.default_rng(5)
    m = 40
    W = rng.multinomial(m, np.full(m, 1.0 / m), size=30).astype(np.float64)
    for hi in (50, 2**20):  # single precision is exact below 2^24; beyond that the double-precision path is taken
        flat = rng.integers(0, hi, size=(m, 90)).astype(np.float64)
        got = emp._resampled_counts(W, flat)
        np.testing.assert_array_equal(got, W @ flat)
        assert got.dtype == (np.float32 if hi == 50 else np.float64)


def test_users_without_two_claimed_rows_are_not_resampled_and_change_no_number(monkeypatch):
    """With a stream per user, users who cannot claim two rows at any lag are left out of the bootstrap: the estimate,
    every replicate, the counts and the band equal those of resampling every user (the skip forced off)."""
    rng = np.random.default_rng(8)
    K, T, L = 3, 900, 30
    x = rng.integers(0, K, size=(9, T))
    x[:3, :] = np.where(rng.random((3, T)) < 0.97, 0, 1)  # rarely out of state 0: rows 1, 2 under 100 pairs
    x[3, 25:] = -1  # too short for L
    x[4] = -1  # no reading at all
    x[5, rng.random(T) < 0.2] = -1  # gaps
    names = [f"u{i}" for i in range(x.shape[0])]

    def run():
        return emp.max_tv_part(x, K, L, n_boot=40, rng=emp.user_streams(names, 3, stream=2))

    skipped = run()
    assert set(range(9)) - set(row_tv.claimable_series(x, K, L, emp.DEFAULT_MIN_PAIRS).tolist()) == {0, 1, 2, 3, 4}
    only_rare = emp.max_tv_part(x[:3], K, L, n_boot=40, rng=emp.user_streams(names[:3], 3, stream=2))
    assert only_rare.block_range is None and "none was resampled" in emp.max_tv_band(only_rare).method
    monkeypatch.setattr(emp, "claimable_series", lambda x, K, L, mp, total=None: np.arange(x.shape[0]))
    full = run()
    for name in ("estimate", "boot", "users_without_claim", "per_user", "row_pairs"):
        np.testing.assert_array_equal(getattr(skipped, name), getattr(full, name), err_msg=name)
    assert (skipped.used, skipped.n_users) == (full.used, full.n_users) == (7, 9)
    assert skipped.boot.max() > 0 and np.all(skipped.users_without_claim >= 5)
    assert np.all(skipped.block_lengths[:5] == 0) and np.all(skipped.block_lengths[5:] > 0)
    band = emp.max_tv_band(skipped)
    np.testing.assert_array_equal(band.upper, emp.max_tv_band(full).upper)
