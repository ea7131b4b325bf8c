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
