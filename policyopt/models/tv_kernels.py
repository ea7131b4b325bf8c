"""Kernels of Δ(t), eq. (12) of Zhang et al. (2024): propagated differences of reversed rows, without underflow.

Δ(t) is the largest total variation distance between two t-step rows of the reversed chain.  The rows are never
formed: their differences D_x(t) = (e_x − e_0) P̂^t are propagated through the deviation Q = P̂ − 1π of the reversed
kernel (computed without cancellation by :func:`reversed_deviation`), rescaled by powers of two (exact) and kept
with their scale as a logarithm, so ln Δ(t) keeps its relative accuracy far below the smallest float.  Used by
:meth:`policyopt.models.markov.Population.log_max_tv` and, block by block, by the phase chains
(:func:`policyopt.models.phase_chain.phase_log_max_tv`).

Reference: Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
eqs. (1), (11), (12).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "RESCALE_EVERY",
    "RESCALE_FLOOR",
    "exact_max_by_bounds",
    "log_max_tv_stack",
    "normalise_blocks",
    "pairwise_max_tv",
    "reversed_deviation",
    "scaled_power",
]

_LN2 = math.log(2.0)


def reversed_deviation(P: np.ndarray, mu_from: np.ndarray, mu_to: np.ndarray) -> np.ndarray:
    """Q(x, y) = P̂(x, y) − μ_from(y) of the reversed kernel, computed without cancellation.

    P̂(x, y) = μ_from(y) P(y, x) / μ_to(x) is the reversed kernel of a step P from the marginal μ_from to
    μ_to = μ_from P (eq. (1) of Zhang et al. (2024) when μ_from = μ_to = π).  Subtracting μ_from(y) from a
    computed P̂(x, y) loses every digit the two share: when the rows of P nearly agree, Q is small and
    ``P̂ − 1 μ_from`` has only an absolute accuracy of about 1e-16, so Δ(t) would have a relative error of
    about 1e-16 / Δ(1) (measured: 560 u at Δ(1) = 8.5e-4).  Here the identity

        P(y, x) − μ_to(x) = R(y, x) − Σ_z μ_from(z) R(z, x),   R(y, x) = P(y, x) − P(0, x),

    is used instead: the row differences R are exact for nearby entries (Sterbenz) and everything after
    them is at their scale, so Q keeps a relative accuracy of a few u whatever the size of Δ(1).

    Parameters
    ----------
    P : numpy.ndarray, shape (B, K, K)
        Row-stochastic one-step kernels.
    mu_from, mu_to : numpy.ndarray, shape (B, K)
        Marginal before the step (positive, sums to 1) and after it (μ_from P, positive).

    Returns
    -------
    numpy.ndarray, shape (B, K, K)
        Q, whose rows sum to 0 up to rounding.
    """
    R = P - P[:, :1, :]  # R(y, x) = P(y, x) − P(0, x)
    col = R - np.einsum("bz,bzx->bx", mu_from, R)[:, None, :]  # P(y, x) − μ_to(x), indexed [y, x]
    return np.transpose(col, (0, 2, 1)) * mu_from[:, None, :] / mu_to[:, :, None]


def pairwise_max_tv(diff: np.ndarray, chunk: int = 512) -> np.ndarray:
    """Max over state pairs of the TV distance, from row differences.

    ``diff[u, x-1] = row_x − row_0`` (shape (U, K-1, K)); row 0's difference is 0.
    Returns shape (U,).
    """
    U, km1, _ = diff.shape
    out = np.zeros(U)
    for s in range(0, U, chunk):
        d = diff[s : s + chunk]
        best = np.abs(d).sum(axis=-1).max(axis=-1)  # pairs (0, x)
        for i in range(km1 - 1):
            tv = np.abs(d[:, i + 1 :, :] - d[:, i : i + 1, :]).sum(axis=-1).max(axis=-1)
            np.maximum(best, tv, out=best)
        out[s : s + chunk] = 0.5 * best  # TV = half the l1 distance, eq. (11)
    return out


def normalise_blocks(stack: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
    """Divide each user's block of `stack` by its largest magnitude, adding ln(scale) to `log_scale`.

    Returns the magnitudes (shape (U,)).  The division is by a power of two, so it is exact.

    Users whose block is exactly zero get log_scale = −inf (their Δ is exactly 0 from then on).
    In place; stack shape (U, ...), log_scale shape (U,).
    """
    flat = stack.reshape(stack.shape[0], -1)
    scale = np.maximum(flat.max(axis=1), -flat.min(axis=1))  # largest magnitude, no |·| copy
    zero = scale == 0
    # Divide by a power of two: exact, so the scaled stack is the unscaled one bit for bit.
    mant, expo = np.frexp(np.where(zero, 1.0, scale))
    stack *= np.ldexp(1.0, -expo).reshape((-1,) + (1,) * (stack.ndim - 1))
    log_scale += np.where(zero, -np.inf, expo * _LN2)
    return scale


def scaled_power(mat: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """mat^n for a stack (U, K, K) as (scaled stack, ln scale per user), without underflow."""
    U = mat.shape[0]
    result = np.broadcast_to(np.eye(mat.shape[1]), mat.shape).copy()
    res_log = np.zeros(U)
    base = mat.copy()
    base_log = np.zeros(U)
    normalise_blocks(base, base_log)
    while n:
        if n & 1:
            result = np.matmul(result, base)
            res_log = res_log + base_log
            normalise_blocks(result, res_log)
        n >>= 1
        if n:
            base = np.matmul(base, base)
            base_log = 2 * base_log
            normalise_blocks(base, base_log)
    return result, res_log


#: From this many states on, the largest row pair is found by :mod:`policyopt.models.tv_pairs` (compiled, pairs
#: pruned by their earlier distances; the same floats): below it numpy's loop is as fast and numba is not imported.
COMPILED_PAIRS_MIN_STATES = 32

RESCALE_EVERY = 4  # unit steps between rescalings of the propagated row differences
RESCALE_FLOOR = -900  # binary exponent below which a block is rescaled every step instead


def log_max_tv_stack(dev: np.ndarray, pi: np.ndarray, ts: np.ndarray, every: int = RESCALE_EVERY) -> np.ndarray:
    """Exact ln of the max over users of Δ_u(t) for sorted unique ages `ts`.

    dev: (U, K, K) deviations Q = P̂ − 1π of the reversed transition matrices (:func:`reversed_deviation`);
    pi: (U, K) stationary distributions.
    The row differences D_x(t) = (e_x − e_0) P̂^t are kept as (scaled stack, ln scale).

    The stack is rescaled (by powers of two: exact) every `every` unit steps rather than after
    every product, which saves a reduction per step without changing a single bit: one step
    multiplies a row's ℓ1 norm by at most ‖Q'‖ ≤ 2 + 1e-15, so a block whose largest magnitude is
    ≥ 2^-900 at a rescaling was ≥ 2^-900 / (K·2^every) — far from the subnormal range — at every
    step in between, and no overflow is possible.  If some block ends below 2^-900 (or became
    exactly 0) the whole computation is redone rescaling after every step.
    """
    U, K, _ = dev.shape
    out = np.full(ts.shape, -np.inf)
    if K == 1:
        return out
    diff = np.zeros((U, K - 1, K))
    diff[:, :, 0] = -1.0
    diff[:, np.arange(K - 1), np.arange(1, K)] = 1.0
    log_scale = np.zeros(U)
    # Zero-sum rows only see the deviation Q = P̂ − 1π (D·1π = 0), and Q^n = P̂^n − 1π has
    # entries of the size of the answer, so powers of Q keep relative accuracy where
    # powers of P̂ (entries ≈ π) would not; Q itself comes without cancellation (reversed_deviation).
    # One step also removes the rows' drift along π (their sums, which are 0 exactly but not in
    # floating point): D ← D Q (I − 1π) = D Q', with Q' = Q − (Q1)π formed once, instead of
    # subtracting (D Q 1)π after every product.
    step1 = dev - (dev @ np.ones(K))[:, :, None] * pi[:, None, :]
    pairs = None
    everyone = np.arange(U, dtype=np.int64)
    if K >= COMPILED_PAIRS_MIN_STATES:
        from policyopt.models.tv_pairs import PairState, max_pair_l1

        pairs = PairState(U, K - 1)
    log_one = None  # ln Δ_u(1)
    if U > 1:
        one = np.matmul(diff, dev)
        if pairs is not None:  # every pair evaluated (no floor): numpy's floats, and each pair's bound for t ≥ 1
            l1, upper = max_pair_l1(one, everyone, np.zeros(U), pairs, -np.inf)
            if not np.isnan(upper).any():
                with np.errstate(divide="ignore"):
                    log_one = np.log(0.5 * l1)
            else:
                pairs = PairState(U, K - 1)
        if log_one is None:
            with np.errstate(divide="ignore"):
                log_one = np.log(pairwise_max_tv(one))
    log_bound = np.zeros(U)  # upper bound on ln Δ_u at the current time (exact where evaluated)
    leader = 0
    t_cur = 0

    def log_tv(idx, floor=-np.inf):
        """ln Δ_u at the current time for users `idx` (scaled TV plus the kept log scale): exact, or for a user below
        `floor` (a lower bound on the maximum over users) possibly an upper bound (:mod:`policyopt.models.tv_pairs`)."""
        if pairs is not None:
            users = everyone[idx]
            if t_cur == 0:  # the unit differences e_x − e_0: every pair is 2 apart, ln Δ(0) = ln 1, as numpy finds
                return np.zeros(users.size)  # (and the pairs' bounds, distances at age 1, do not hold at age 0)
            l1, upper = max_pair_l1(diff, users, log_scale, pairs, floor)
            if not np.isnan(upper).any():
                with np.errstate(divide="ignore", invalid="ignore"):
                    exact = np.log(0.5 * l1) + log_scale[users]  # as below, bit for bit
                return np.where(np.isnan(l1), upper, exact)
        with np.errstate(divide="ignore"):
            return np.log(pairwise_max_tv(diff[idx])) + log_scale[idx]

    pending = 0  # unit steps since the last rescaling
    for k, t in enumerate(ts):
        gap = int(t) - t_cur
        if gap > 0:
            if gap == 1:
                diff = np.matmul(diff, step1)  # rows stay zero-sum (see step1)
                pending += 1
            else:
                step, step_log = scaled_power(dev, gap)
                diff = np.matmul(diff, step)
                log_scale = log_scale + step_log
                diff -= diff.sum(axis=-1, keepdims=True) * pi[:, None, :]  # keep rows zero-sum
                pending = every
            if pending >= every:
                alive = np.isfinite(log_scale)
                scale = normalise_blocks(diff, log_scale)
                if every > 1 and np.any(alive & ((scale == 0) | (scale < 2.0**RESCALE_FLOOR))):
                    return log_max_tv_stack(dev, pi, ts, every=1)  # see the docstring
                pending = 0
            if log_one is not None:
                log_bound = log_bound + gap * log_one  # Δ(t+s) ≤ Δ(t)Δ(s)
            t_cur = int(t)
        if U == 1:
            out[k] = log_tv(slice(0, 1))[0]
            continue
        out[k], leader = exact_max_by_bounds(log_tv, log_bound, leader)
    return out


def exact_max_by_bounds(log_tv, bound: np.ndarray, leader: int) -> tuple[float, int]:
    """The largest ln Δ over blocks, evaluating only the blocks whose upper bound reaches the leader's value.

    Parameters
    ----------
    log_tv : callable
        ``log_tv(idx, floor)`` gives ln Δ of the blocks `idx` (a slice or an index array): exact, except that a block
        below `floor` (a lower bound on the maximum) may get an upper bound instead.
    bound : numpy.ndarray, shape (B,)
        Upper bounds on each block's ln Δ (e.g. Δ(t + s) ≤ Δ(t)Δ(s)); the evaluated entries are replaced by their
        exact values, in place.
    leader : int
        The block expected to be largest (the last maximiser).

    Returns
    -------
    (float, int)
        The exact maximum (a block whose bound is below the leader's value cannot exceed it; 1e-9 of slack covers
        the bounds' rounding) and the block that attains it, the next leader.
    """
    lead = log_tv(slice(leader, leader + 1), -np.inf)[0]
    bound[leader] = lead
    cand = np.flatnonzero(bound + 1e-9 >= lead)
    vals = log_tv(cand, lead)
    bound[cand] = vals
    j = int(np.argmax(vals))
    return float(vals[j]), int(cand[j])
