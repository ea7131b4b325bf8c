"""Reference first-order chain fits shared by the Markov-test tests and benchmark (independent of policyopt)."""

from __future__ import annotations

import numpy as np


def fit_chains(x, K, smoothing=0.01):
    """First-order chains per user from transition counts + additive smoothing, row-normalised.

    The estimate of ``policyopt.models.estimation.fit_population`` written out independently: eq. (28) of Cao et al.
    (2019), counting only transitions between two consecutive observed slots.

    Parameters
    ----------
    x : numpy.ndarray of int, shape (U, T)
        States 0..K−1 per user and slot, −1 for a missing slot.
    K : int
        Number of states.
    smoothing : float
        Pseudo-count added to every cell of each user's count matrix.

    Returns
    -------
    list of numpy.ndarray, each shape (K, K)
        One row-stochastic transition matrix per user.
    """
    out = []
    for row in x:
        c = np.zeros((K, K))
        ok = (row[:-1] >= 0) & (row[1:] >= 0)
        np.add.at(c, (row[:-1][ok], row[1:][ok]), 1.0)
        c += smoothing
        out.append(c / c.sum(axis=1, keepdims=True))
    return out


def user_chains_readings(seed: int, *, stickier: float = 0.0, users: int = 17, slots: int = 2000, K: int = 3) -> pd.DataFrame:
    """Readings = states 0..K−1 of a first-order chain per user (random rows, 0.7 on the diagonal); from slot
    slots/2 on, each chain is (1 − stickier)·P + stickier·I (simulation only): a long table user, time, value with
    users ``u0``, ``u1``, …, for the backtest's held-out Δ(t) comparison (test and benchmark)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    frames = []
    for u in range(users):
        P = rng.dirichlet(np.ones(K), size=K) * 0.3 + np.eye(K) * 0.7
        cum = [np.cumsum(P, axis=1), np.cumsum((1 - stickier) * P + stickier * np.eye(K), axis=1)]
        x = np.empty(slots, dtype=int)
        x[0] = rng.integers(K)
        draws = rng.random(slots)
        for t in range(1, slots):
            x[t] = min(int(np.searchsorted(cum[t >= slots // 2][x[t - 1]], draws[t])), K - 1)
        frames.append(pd.DataFrame({"user": f"u{u}", "time": np.arange(slots), "value": x.astype(float)}))
    return pd.concat(frames, ignore_index=True)
