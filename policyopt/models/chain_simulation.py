r"""Series simulated from fitted first-order chains, the Δ̂(t) statistic on them, and the per-user random streams.

The test of a chain model compares the plug-in Δ̂(t) of the readings (:mod:`policyopt.models.row_tv`; Δ(t) of
M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024,
eq. (12)) with the distribution of *the same statistic* on series simulated from the fitted chains, with the same
lengths and the same missing slots (a parametric bootstrap; a Monte Carlo test, A. C. Davison, D. V. Hinkley,
"Bootstrap Methods and their Application", Cambridge University Press, 1997, Sec. 4.2.5), so the draws carry the
same upward bias of the plug-in TV.  This module owns that simulation:

* :func:`simulate_chain_states`: R independent series per user from row-stochastic matrices;
* :func:`chain_statistic_draws`: Δ̂(t) = max_u Δ̂_u(t) on each simulated data set;
* :func:`user_streams`: one generator per user, keyed by the user's name, so a user's draws (the simulated series,
  and the block resampling of :func:`~policyopt.models.empirical.max_tv_part`) do not depend on which other users
  are processed with it (the parts of disjoint user groups combine exactly).

All randomness here is simulation, never released noise.
"""

from __future__ import annotations

import numpy as np

from policyopt.errors import InvalidInputError, check_int
from policyopt.models.lag_counts import check_lag, states_matrix
from policyopt.models.row_tv import DEFAULT_MIN_PAIRS, user_max_tv

__all__ = [
    "simulate_chain_states",
    "chain_statistic_draws",
    "user_streams",
]

def simulate_chain_states(matrices, lengths, initial, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Simulate each user's first-order chain: `draws` independent series per user.

    Parameters
    ----------
    matrices : sequence of U array_like, shape (K, K)
        Row-stochastic transition matrices P_u.
    lengths : array_like of int, shape (U,)
        Slots to simulate per user (the series is padded with −1 up to the longest).
    initial : array_like of int, shape (U,)
        State at slot 0 of every draw of each user.
    draws : int
        R ≥ 1.
    rng : numpy.random.Generator or sequence of U numpy.random.Generator
        Simulation randomness (seeded by the caller), never released noise.  One generator per user
        (:func:`user_streams`): user u's draws use only its own stream, (R, lengths[u] − 1) uniforms in draw-major
        order, so they do not depend on which other users are simulated with it or on how draws are batched.

    Returns
    -------
    numpy.ndarray of int64, shape (R, U, max(lengths))

    Raises
    ------
    InvalidInputError
        A sequence of generators whose length is not U.
    """
    P = np.stack([np.asarray(m, dtype=float) for m in matrices])
    U, K, _ = P.shape
    n = np.asarray(lengths, dtype=np.int64)
    T = int(n.max())
    R = int(draws)
    cum = np.cumsum(P, axis=2)
    cum[:, :, -1] = np.inf  # a uniform draw always lands in some state
    # state at s = #{k : u ≥ cum[u, previous, k]}; column K − 1 (inf) never counts.  Entry k of every row, flat
    # over (user, previous state), so one step is K − 1 gathers and comparisons on (R, U) (time-major buffers).
    cum_k = [np.ascontiguousarray(cum[:, :, k]).ravel() for k in range(K - 1)]
    out_t = np.empty((T, R, U), dtype=np.int8 if K <= 127 else np.int64)
    cur = np.broadcast_to(np.asarray(initial, dtype=np.int64), (R, U)).copy()
    out_t[0] = cur
    base = (np.arange(U, dtype=np.int64) * K)[None, :]
    per_user = isinstance(rng, (list, tuple))
    if per_user:
        if len(rng) != U:
            raise InvalidInputError(f"`rng` has {len(rng)} generators for {U} users")
        uniforms = np.zeros((T, R, U))
        for u, g in enumerate(rng):
            if n[u] > 1:
                uniforms[1 : n[u], :, u] = g.random((R, int(n[u]) - 1)).T
    row = np.empty((R, U), dtype=np.int64)
    cur = cur.astype(out_t.dtype)
    for s in range(1, T):
        u01 = uniforms[s] if per_user else rng.random((R, U))
        np.add(base, cur, out=row)
        nxt = out_t[s]
        nxt[...] = 0
        for ck in cum_k:
            nxt += u01 >= ck[row]
        cur = nxt
    out = out_t.transpose(1, 2, 0).astype(np.int64, order="C")
    out[:, np.arange(T)[None, :] >= n[:, None]] = -1
    return out


def chain_statistic_draws(matrices, observed_states, n_states: int, max_lag: int, *,
                          min_pairs: int = DEFAULT_MIN_PAIRS, draws: int = 99, rng: np.random.Generator) -> np.ndarray:
    """The statistic Δ̂(t) = max_u Δ̂_u(t) on series simulated from fitted chains (parametric bootstrap).

    Each user's chain is started in the user's first observed state and run for the user's span; the slots
    missing in the observed series are masked in the simulated one, so the statistic sees the same pattern of
    pairs.  Comparing the observed Δ̂(t) with these draws is a Monte Carlo test of the chain model that carries
    the same upward bias of the plug-in TV (Davison & Hinkley 1997, Sec. 4.2.5).

    Parameters
    ----------
    matrices : sequence of U array_like, shape (K, K)
        The fitted chains P_u, in the order of the rows of `observed_states`.
    observed_states : array_like, shape (U, T)
        As :func:`~policyopt.models.lag_counts.states_matrix`.
    n_states : int
        K.
    max_lag : int
        L.
    min_pairs : int
        As :func:`~policyopt.models.empirical.estimate_max_tv`.
    draws : int
        Simulated data sets R ≥ 1.
    rng : numpy.random.Generator or sequence of U numpy.random.Generator
        Simulation randomness (seeded), never released noise; one generator per user (:func:`user_streams`) makes
        each user's simulated series, and so the max over users, independent of how users are grouped: the
        statistic of a union of user groups is then the maximum of the groups' statistics, draw by draw.

    Returns
    -------
    numpy.ndarray, shape (R, L)
        Row r: the statistic on simulated data set r.
    """
    x = states_matrix(observed_states, n_states)
    U, T = x.shape
    L = check_lag(max_lag, T)
    K = int(n_states)
    R = check_int(draws, "draws", 1)
    mp = check_int(min_pairs, "min_pairs", 1)
    if len(matrices) != U:
        raise InvalidInputError(f"`matrices` has {len(matrices)} chains for {U} users")
    present = x >= 0
    first = np.array([int(r[r >= 0][0]) if np.any(r >= 0) else 0 for r in x])
    lengths = np.array([int(np.flatnonzero(r >= 0)[-1]) + 1 if np.any(r >= 0) else 1 for r in x])
    out = np.zeros((R, L))
    # batch draws so that one batch's counts stay small (R_b·U·L·K² int64)
    per_draw = U * T * 8 * 3 + U * L * (K + 1) * 8
    rb = max(1, int((256 * 2**20) // max(1, per_draw)))
    for r0 in range(0, R, rb):
        nb = min(rb, R - r0)
        sim = simulate_chain_states(matrices, lengths, first, nb, rng)
        sim[:, ~present[:, : sim.shape[2]]] = -1
        per_user, _ = user_max_tv(sim.reshape(nb * U, -1), K, L, mp, with_rows=False)
        out[r0 : r0 + nb] = per_user.reshape(nb, U, L).max(axis=1)
    return out


def user_streams(users, seed: int, stream: int = 1) -> list:
    """One generator per user, keyed by the user's name: ``default_rng([seed, stream, hash(user)])``.

    The hash is pandas' ``hash_array`` of the user text (64 bits, fixed key, the same in every process), so a
    user's draws are the same whichever process or partition makes them (simulation only, never released noise).

    Parameters
    ----------
    users : sequence of str
    seed : int
        ≥ 0.
    stream : int
        Which of the user's independent streams (≥ 1): 1 simulates the chains (:func:`chain_statistic_draws`),
        2 resamples the blocks of the band (:func:`~policyopt.models.empirical.max_tv_part`).

    Returns
    -------
    list of numpy.random.Generator
    """
    import pandas as pd

    sd = check_int(seed, "seed", 0)
    st = check_int(stream, "stream", 1)
    names = np.array([str(u) for u in users], dtype=object)
    keys = pd.util.hash_array(names) if names.size else np.zeros(0, dtype=np.uint64)
    return [np.random.default_rng([sd, st, int(k)]) for k in keys]
