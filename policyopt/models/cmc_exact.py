"""The aged correlation distance Δ_k of a coupling Markov chain in exact rational arithmetic.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025,
Definition 9, eq. (14), on the joint snapshot chain of :class:`policyopt.models.cmc.CouplingMarkovChain`.

A tiny Δ_k is a difference of nearly equal rows, which floats get wrong by about one unit in the last place
absolutely (issue 26: 1.4 % below the exact value at Δ_k ≈ 1e-16), so small models take it here: the float inputs
(P^(jk), λ) are read as exact :class:`fractions.Fraction` values with each row renormalised to sum exactly to 1, and
the joint chain, its stationary law (Gaussian elimination), the aged joint law, the kernel and the total variations
are exact.  :func:`exact_aged_distance` returns the smallest float ≥ the exact Δ_k.

Δ_k is a function of the model's numbers and (ages, neighbours) alone, so values are kept (least recently used
first out) for every chain with the same numbers: a sweep of problem P1 over the MSE bound, or identical groups,
compute each Δ_k once (:data:`_RATIONAL_DELTA`); the exact joint chain and its stationary law likewise
(:data:`_RATIONAL_JOINT`).
"""

from __future__ import annotations

import collections
import math
from fractions import Fraction

import numpy as np

from policyopt.errors import InvalidModelError

__all__ = ["exact_aged_distance", "exact_aged_distance_uncached", "content_key"]

#: Exact Δ_k values kept by :func:`exact_aged_distance`, by (model content, ages, neighbours).
_RATIONAL_DELTA: "collections.OrderedDict[tuple, float]" = collections.OrderedDict()
_RATIONAL_CACHE_SIZE = 200_000
#: Exact joint chains and stationary laws by model content (:func:`_rational_joint`).
_RATIONAL_JOINT: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_RATIONAL_JOINT_SIZE = 64


def content_key(cmc) -> tuple:
    """What the exact Δ_k of `cmc` (a :class:`~policyopt.models.cmc.CouplingMarkovChain`) depends on: the states,
    the sequences and the bytes of λ and the P^(jk)."""
    lam, T = cmc.coupling, cmc.transitions
    return (cmc.n_states, cmc.n_sequences, lam.shape, lam.tobytes(), T.shape, T.tobytes())


def exact_aged_distance(cmc, ages, neighbours: str) -> float:
    """Δ_k(Λ, A_t) of `cmc` in exact rational arithmetic, rounded up to a float (kept by model content).

    Parameters
    ----------
    cmc : policyopt.models.cmc.CouplingMarkovChain
        The model (its m^s snapshots small enough for exact work: the caller checks
        :data:`~policyopt.models.cmc.EXACT_RATIONAL_WORK`).
    ages : tuple of int, shape (s,)
        The AoI vector A_t, slots, checked.
    neighbours : {"one", "any"}
        Row pairs compared (:meth:`~policyopt.models.cmc.CouplingMarkovChain.aged_distance`).

    Returns
    -------
    float in [0, 1]
        The smallest float ≥ the exact Δ_k (capped at 1).

    Raises
    ------
    InvalidModelError
        If the joint chain is reducible (its stationary law is not unique).
    """
    key = (content_key(cmc), tuple(ages), neighbours)
    hit = _RATIONAL_DELTA.get(key)
    if hit is not None:
        _RATIONAL_DELTA.move_to_end(key)
        return hit
    value = exact_aged_distance_uncached(cmc, ages, neighbours)
    _RATIONAL_DELTA[key] = value
    while len(_RATIONAL_DELTA) > _RATIONAL_CACHE_SIZE:
        _RATIONAL_DELTA.popitem(last=False)
    return value


def _rational_joint(cmc):
    """The exact joint chain P (N × N Fractions) of `cmc` and its stationary law π, kept per model content."""
    key = content_key(cmc)
    hit = _RATIONAL_JOINT.get(key)
    if hit is not None:
        _RATIONAL_JOINT.move_to_end(key)
        return hit
    s, N = cmc.n_sequences, cmc.n_snapshots
    X = cmc.snapshots.tolist()

    def rows(mat):
        """A float matrix as exact rationals, each row renormalised to sum to exactly 1 (list of lists of Fraction)."""
        out = [[Fraction(float(v)) for v in row] for row in np.asarray(mat)]
        return [[v / sum(row) for v in row] for row in out]

    lam = rows(cmc.coupling)
    T = [[rows(cmc.transitions[j, k]) for k in range(s)] for j in range(s)]
    P = [[Fraction(1)] * N for _ in range(N)]
    for x in range(N):
        for y in range(N):
            v = Fraction(1)
            for j in range(s):
                v *= sum(lam[j][k] * T[j][k][X[x][k]][X[y][j]] for k in range(s))
            P[x][y] = v
    pi = _rational_stationary(P)
    _RATIONAL_JOINT[key] = (P, pi)
    while len(_RATIONAL_JOINT) > _RATIONAL_JOINT_SIZE:
        _RATIONAL_JOINT.popitem(last=False)
    return P, pi


def exact_aged_distance_uncached(cmc, ages, neighbours: str) -> float:
    """:func:`exact_aged_distance` computed without the Δ_k cache (the joint chain's is used)."""
    m, s, N = cmc.n_states, cmc.n_sequences, cmc.n_snapshots
    X = cmc.snapshots.tolist()
    P, pi = _rational_joint(cmc)

    def step(W):
        """One step of the joint chain P (N × N, exact) applied to every row of W (rows of N Fractions)."""
        return [[sum(r[i] * P[i][y] for i in range(N) if r[i]) for y in range(N)] for r in W]

    W, order = [list(pi)], []
    levels = sorted(set(ages), reverse=True)
    for idx, a in enumerate(levels):
        for c in [i for i in range(s) if ages[i] == a]:
            W = [[r[x] if X[x][c] == b else Fraction(0) for x in range(N)] for r in W for b in range(m)]
            order.append(c)
        nxt = levels[idx + 1] if idx + 1 < len(levels) else 0
        for _ in range(a - nxt):
            W = step(W)

    # row r of W is z in recording order: digit i (base m, most significant first) is sequence order[i]
    def z_index(r):
        """Joint-state index z (base m, sequence 0 most significant) of row r of W, whose digits are in ``order``."""
        digits = [(r // m ** (s - 1 - i)) % m for i in range(s)]
        seq = [0] * s
        for i, c in enumerate(order):
            seq[c] = digits[i]
        return sum(v * m ** (s - 1 - j) for j, v in enumerate(seq))

    C = [[Fraction(0)] * N for _ in range(N)]
    for r in range(N):
        z = z_index(r)
        for x in range(N):
            C[x][z] = W[r][x] / pi[x]
    pairs = (cmc.neighbour_pairs().tolist() if neighbours == "one"
             else [(a, b) for a in range(N) for b in range(a + 1, N)])
    best = max((sum(abs(C[a][z] - C[b][z]) for z in range(N)) / 2 for a, b in pairs), default=Fraction(0))
    f = float(best)
    if Fraction(f) < best:
        f = math.nextafter(f, math.inf)
    return min(1.0, f)


def _rational_stationary(P) -> list:
    """The stationary law of an exactly stochastic rational matrix `P` (list of lists of Fractions).

    Solves π(P − I) = 0, Σπ = 1 by Gaussian elimination in exact arithmetic.

    Raises
    ------
    InvalidModelError
        If the solution is not unique (a reducible chain).
    """
    n = len(P)
    # equations: columns y of (P − I)ᵀ for y < n−1, and Σπ = 1
    A = [[P[x][y] - (1 if x == y else 0) for x in range(n)] + [Fraction(0)] for y in range(n - 1)]
    A.append([Fraction(1)] * n + [Fraction(1)])
    for col in range(n):
        piv = next((r for r in range(col, n) if A[r][col] != 0), None)
        if piv is None:
            raise InvalidModelError("the joint chain is reducible: its stationary distribution is not unique")
        A[col], A[piv] = A[piv], A[col]
        inv = 1 / A[col][col]
        A[col] = [v * inv for v in A[col]]
        for r in range(n):
            if r != col and A[r][col] != 0:
                f = A[r][col]
                A[r] = [a - f * b for a, b in zip(A[r], A[col])]
    return [A[r][n] for r in range(n)]
