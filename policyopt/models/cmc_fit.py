"""Coupled Markov chains estimated from data: s aligned state sequences, or the readings of s meters.

Source: W. K. Ching, E. S. Fung, M. K. Ng, "A multivariate Markov chain model for categorical data sequences and
its applications in demand predictions", IMA J. Manag. Math. 13(3), 2002, as used in Luo et al. (2025), Sec.
III-B (the model: :class:`~policyopt.models.cmc.CouplingMarkovChain`).
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, check_int, fmt
from policyopt.models.cmc import CouplingMarkovChain

__all__ = ["fit_cmc", "fit_cmc_from_readings"]


def fit_cmc(states, n_states: int, *, smoothing: float = 0.01, state_values=None) -> CouplingMarkovChain:
    """Estimate a CMC from s aligned state sequences (Ching, Fung & Ng 2002, as used in Luo et al. (2025) §III-B).

    P^(jk) is the smoothed maximum-likelihood estimate from the lag-1 co-occurrences
    n^(jk)[a, b] = #{t : x^(k)_t = a, x^(j)_{t+1} = b}; the weights λ_j· minimise the squared error
    Σ_t ‖e_{x^(j)_{t+1}} − Σ_k λ_jk P^(jk)[x^(k)_t, :]‖² over the simplex (a convex QP, solved
    with cvxpy).  Ching et al. fit λ to the stationary frequencies instead; that fit is not
    identifiable when all sequences share a distribution, the conditional least squares is.

    Parameters
    ----------
    states : array_like of int, shape (T, s)
        Aligned state indices (T ≥ 2 slots).
    n_states : int
        m ≥ 2.
    smoothing : float, keyword-only
        Additive pseudo-count ≥ 0 per transition (default 0.01).
    state_values : array_like, shape (m,), optional

    Returns
    -------
    CouplingMarkovChain

    Raises
    ------
    InvalidInputError
        If `states` is not a (T ≥ 2, s ≥ 1) integer array with entries in 0..m−1, or
        `smoothing` is negative.
    InvalidModelError
        If a source state never occurs and `smoothing` is 0 (empty row).
    """
    check_int(n_states, "n_states", 2)
    X = np.asarray(states)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1 or not np.issubdtype(X.dtype, np.integer):
        raise InvalidInputError(f"`states` must be an integer array of shape (T ≥ 2, s), got {fmt(states)}")
    if X.min() < 0 or X.max() >= n_states:
        raise InvalidInputError(f"`states` entries must lie in 0..{n_states - 1}, got range {X.min()}..{X.max()}")
    if not (isinstance(smoothing, (int, float)) and math.isfinite(smoothing) and smoothing >= 0):
        raise InvalidInputError(f"`smoothing` must be a finite number ≥ 0, got {fmt(smoothing)}")
    import cvxpy as cp

    T, s = X.shape
    m = n_states
    P = np.zeros((s, s, m, m))
    for j in range(s):
        for k in range(s):
            counts = np.zeros((m, m))
            np.add.at(counts, (X[:-1, k], X[1:, j]), 1.0)
            counts += smoothing
            rows = counts.sum(axis=1)
            if np.any(rows == 0):
                raise InvalidModelError(
                    f"state {int(np.flatnonzero(rows == 0)[0])} of sequence {k} never occurs before slot T; "
                    "use `smoothing` > 0"
                )
            P[j, k] = counts / rows[:, None]
    lam = np.zeros((s, s))
    for j in range(s):
        Y = np.zeros((T - 1, m))
        Y[np.arange(T - 1), X[1:, j]] = 1.0
        cols = np.stack([P[j, k][X[:-1, k], :].reshape(-1) for k in range(s)], axis=1)
        G = cols.T @ cols
        h = cols.T @ Y.reshape(-1)
        w = cp.Variable(s, nonneg=True)
        prob = cp.Problem(cp.Minimize(cp.quad_form(w, cp.psd_wrap(G)) - 2 * h @ w), [cp.sum(w) == 1])
        prob.solve()
        lam[j] = np.clip(np.asarray(w.value, dtype=float), 0, None)
        lam[j] /= lam[j].sum()
    return CouplingMarkovChain(P, lam, state_values)


def fit_cmc_from_readings(df, users, n_states: int, *, smoothing: float = 0.01) -> CouplingMarkovChain:
    """Fit a CMC to the readings of several users (e.g. two CityLearn homes as coupled sequences).

    Readings are quantised with :class:`policyopt.models.estimation.Quantizer` fitted on the pooled
    readings of the chosen users (shared edges, so states mean the same kWh range in every
    sequence), aligned on common slots, and passed to :func:`fit_cmc`.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``user``, ``time`` (integer slots), ``value``.
    users : sequence of str
        The users forming the s sequences (s ≥ 1, all present in `df`).
    n_states : int
        m ≥ 2 quantile states.
    smoothing : float, keyword-only

    Returns
    -------
    CouplingMarkovChain
        With state values = mean reading of each quantile bin (kWh).

    Raises
    ------
    InvalidInputError
        If a user is missing, the users share fewer than 2 slots, or quantisation fails.
    """
    from policyopt.models.estimation import Quantizer

    users = list(users)
    if not users:
        raise InvalidInputError("`users` must name at least one user, got an empty list")
    known = set(df["user"].unique())
    missing = [u for u in users if u not in known]
    if missing:
        raise InvalidInputError(f"`users` not found in the data: {fmt(missing)}")
    wide = df[df["user"].isin(users)].pivot_table(index="time", columns="user", values="value").sort_index()
    wide = wide[users].dropna()
    if len(wide) < 2:
        raise InvalidInputError(f"`users` {fmt(users)} share fewer than 2 slots")
    quant = Quantizer.fit(wide.to_numpy().reshape(-1), n_states)
    states = quant.transform(wide.to_numpy()).astype(np.int64)
    return fit_cmc(states, n_states, smoothing=smoothing, state_values=quant.state_values)
