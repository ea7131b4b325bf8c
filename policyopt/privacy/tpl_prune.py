"""Which row pairs can attain the TPL loss function at some α: bound and prune on a grid of λ (beyond the paper).

The piecewise L(α) of Cao et al. (2019) (Algorithms 2 and 4; eqs. 24–25) is the upper envelope of the
prefix sub-functions of all n(n − 1) ordered row pairs.  Building it sorts the likelihood ratios of
every pair: O(n³ log n), 22 s at n = 1000.  Only the pairs owning a vertex of the candidate chain
(see ``tpl_envelope._upper_chain``) matter, 18 of the 999,000 pairs of a random 1000-state matrix.  This
module finds a superset of them without sorting.

Why it is exact
---------------
For u = e^α − 1 the value of a pair is λ* = max_S (1 + uQ_S)/(1 + uD_S) (Theorem 5), and λ* = e^{L(α)}
solves Φ(λ) = (λ − 1)/u, where

    φ_p(λ) = Σ_k (q_k − λd_k)⁺ = max_S (Q_S − λD_S)     and     Φ(λ) = max_p φ_p(λ),    λ ≥ 1.

A pair matters only if φ_p(λ) = Φ(λ) > 0 for some λ ≥ 1 (at the maximiser's λ* it supports the chain).
φ_p is convex and non-increasing, so on [a, b] it lies below the chord of its values at a and b.
Any set of prefix points (x, y) = (D_S, Q_S − D_S) of any pairs gives a lower bound
LB(λ) = max(0, max y − (λ − 1)x) ≤ Φ(λ), convex and piecewise linear.  The chord minus LB is concave
on [a, b], so if it is negative at a, at b and at every breakpoint of LB in between, the pair is
below Φ on all of [a, b].  A pair below Φ on every interval of a grid covering [1, λ_top] (λ_top
above every finite ratio P_ik/P_jk, where φ_p = Σ_{k: d_k = 0} q_k stays constant) owns no vertex
of the chain and is dropped.  Every comparison carries a margin covering its rounding (upper
values computed from P inflated and λP deflated by 8 ulps, sums inflated by (n + 2) ulps; lower
values deflated likewise), so a pair is dropped only if it provably cannot attain L(α).

How it is fast
--------------
φ_p at a grid of λ for all pairs is one compiled pass over the n³ entries for λ ≤ 8, and a sparse
pass for larger λ (an entry (j, k) with λP_jk ≥ max_i P_ik contributes to no pair).  The lower
bound is the chain of a few seed pairs (the largest φ_p at each grid point).  The pairs left are
bisected on their open intervals (φ_p at the midpoint for those pairs only), until few are left or two
levels in a row drop none, and the pairs left after that are sorted (Algorithm 2, line 7) as before.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_EPS = float(np.finfo(float).eps)
#: Elements of one (λ, line) table in :meth:`_LowerBound.__call__` (the bisection asks for millions of λ at once).
_BLOCK_ELEMENTS = 1 << 16
#: λ values at which φ_p is computed for every pair by the dense pass (all n³ entries per λ).
_DENSE_GRID = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.5, 8.0)
_SPARSE_RATIO = 4.0  # beyond the dense grid, λ grows by this factor (at most _SPARSE_POINTS points)
_SPARSE_POINTS = 20
#: Fractions of the largest finite ratio r_f added as grid points: only pairs with a ratio above the
#: last one can be positive on the last interval, where the lower bound of Φ reaches 0.
_TOP_FRACTIONS = (0.5, 0.75, 0.9375, 0.99609375)
_SEEDS_PER_POINT = 4  # pairs of largest φ at each grid point whose chains form the lower bound
_MAX_ALIVE_FRACTION = 0.05  # more pairs than this left after the grid test: the plain scan is cheaper
_REFINE_LEVELS = 12
_REFINE_STOP = 48  # bisection stops once this few pairs are left
#: Bisection also stops after this many levels in a row that drop no pair: a pair that equals Φ on part of an interval
#: (tied or duplicate rows) is never dropped, and each level doubles its intervals (12 levels made 4.4 million items
#: of 91 pairs of a 20-state matrix, 5 s, where the plain scan takes 1 ms).
_REFINE_IDLE = 2
#: Entries below this make the plain scan's exact arithmetic necessary (see tpl_envelope.TINY_X).
_TINY = 1e-290


_THREADS_FROM = 4 << 20  # n³ above which the O(n³) passes run on 2 threads


def in_threads(work, items, n: int) -> None:
    """Run ``work(part)`` on interleaved parts of `items` (a range or an array of row indices), on 2
    threads when n³ is large (numpy's minimum and BLAS, and the compiled loops of
    :mod:`policyopt.privacy.tpl_kernels`, release the GIL), else in this thread."""
    workers = min(2, os.cpu_count() or 1) if n * n * n > _THREADS_FROM else 1
    if workers == 1:
        work(items)
        return
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(work, [items[w::workers] for w in range(workers)]))


def _grid(P: np.ndarray):
    """The λ grid (the dense points, then ×4 steps, then fractions of r_f, then λ_top > r_f), the
    number of dense points, and the id i·n + j of a pair attaining the largest finite ratio r_f
    (None if that ratio is 1)."""
    pos = np.where(P > 0, P, np.inf)
    colmin = pos.min(axis=0)
    colmax = P.max(axis=0)
    ok = np.isfinite(colmin)
    ratio = np.where(ok, colmax / np.where(ok, colmin, 1.0), 0.0)
    col = int(np.argmax(ratio))
    r_f = float(ratio[col]) if ok.any() else 1.0
    i_max, j_min = int(np.argmax(P[:, col])), int(np.argmin(pos[:, col]))
    top_pair = i_max * P.shape[0] + j_min if i_max != j_min else None
    lam_top = max(r_f, 1.0) * (1.0 + 1e-6)  # strictly above every finite P_ik/P_jk (with rounding)
    pts = [g for g in _DENSE_GRID if g < lam_top]
    top = [f * r_f for f in _TOP_FRACTIONS if f * r_f > pts[-1] * 1.0001]
    lo = pts[-1] * _SPARSE_RATIO
    hi = top[0] if top else lam_top
    if lo < hi:
        steps = max(1, math.ceil(math.log(hi / lo) / math.log(_SPARSE_RATIO)))
        steps = min(steps, _SPARSE_POINTS)
        mids = np.geomspace(lo, hi, steps + 1)[:-1]
        pts += [float(v) for v in mids]
    pts += top + [lam_top]
    grid = np.array(sorted(set(pts)))
    n_dense = sum(1 for g in grid if g in _DENSE_GRID)
    return grid, n_dense, top_pair


def _upper_values(Ph: np.ndarray, Pl: np.ndarray, grid: np.ndarray, n_dense: int) -> np.ndarray:
    """U[g, i, j] ≥ φ_ij(grid[g]) for all ordered pairs (the rounding of the sums covered).

    ``Ph``, ``Pl``: P inflated and deflated by 8 ulps (see :func:`_outward`)."""
    from policyopt.privacy import tpl_kernels as K

    n = Ph.shape[0]
    U = np.empty((grid.size, n, n))
    dense = np.ascontiguousarray(grid[:n_dense])
    sparse = np.ascontiguousarray(grid[n_dense:])
    PhT = np.ascontiguousarray(Ph.T)
    colmax = Ph.max(axis=0)
    rows = np.arange(n, dtype=np.int64)
    in_threads(lambda part: K.phi_dense(Ph, Pl, part, dense, U[:n_dense]), rows, n)
    if sparse.size:
        in_threads(lambda part: K.phi_sparse(PhT, colmax, Pl, part, sparse, U[n_dense:]), rows, n)
    U *= 1.0 + (n + 2) * _EPS
    return U


def _outward(P: np.ndarray):
    """(P inflated, P deflated) by 8 ulps: fl(Ph_ik − λ·Pl_jk) ≥ the exact P_ik − λP_jk."""
    return P * (1.0 + 8.0 * _EPS), P * (1.0 - 8.0 * _EPS)


def _seed_points(P: np.ndarray, pairs: np.ndarray, scan):
    """Prefix points (x, y) of the listed pairs' chains, x rounded up and y down (lower-bound lines).

    ``scan(P, pi, pj)`` returns the candidate chain (x, y, pair ids, ...) of the listed pairs
    (``tpl_envelope.scan_list``, passed in by the caller)."""
    n = P.shape[0]
    cx, cy = scan(P, pairs // n, pairs % n)[:2]
    m = (n + 4) * _EPS
    return cx * (1.0 + m), np.maximum(cy - 2.0 * m * (cy + 2.0 * cx), 0.0)


class _LowerBound:
    """LB(λ) = max(0, max_v y_v − (λ − 1)x_v) over a few chosen lines, a lower bound of Φ."""

    def __init__(self, x: np.ndarray, y: np.ndarray, at: np.ndarray):
        # the lines supporting the chain at the points `at` (a subset of lines is still a lower bound)
        mu = np.asarray(at) - 1.0
        best = np.argmax(y[None, :] - mu[:, None] * x[None, :], axis=1)
        sel = np.unique(best)
        x, y = x[sel], y[sel]
        keep = y > 0
        self.x, self.y = x[keep], y[keep]
        if self.x.size:
            # breakpoints: the crossings of two lines that lie on the envelope (few lines: all pairs)
            with np.errstate(divide="ignore", invalid="ignore"):
                mu = (self.y[:, None] - self.y[None, :]) / (self.x[:, None] - self.x[None, :])
                lam = 1.0 + mu[np.triu_indices(self.x.size, 1)]
                lam = lam[np.isfinite(lam) & (lam > 1.0)]
                # LB reaches 0 where the line of largest y/x does: a test point too
                lam = np.append(lam, 1.0 + np.max(np.where(self.x > 0, self.y / self.x, -np.inf)))
            lam = lam[np.isfinite(lam) & (lam > 1.0)]
            if lam.size:
                vals = self.y[None, :] - (lam[:, None] - 1.0) * self.x[None, :]
                top = vals.max(axis=1)
                on = np.sum(vals >= top[:, None] - 1e-12 * np.abs(top[:, None]) - 1e-300, axis=1) >= 2
                lam = lam[on | (top <= 0)]
            self.breaks = np.unique(lam)
        else:
            self.breaks = np.zeros(0)

    def __call__(self, lam) -> np.ndarray:
        lam = np.atleast_1d(np.asarray(lam, dtype=float))
        if not self.x.size:
            return np.zeros(lam.shape)
        mu = lam - 1.0
        step = max(1, _BLOCK_ELEMENTS // self.x.size)  # λ per block: each λ's value is its own row of the table
        if mu.size <= step:
            return self._at(mu)
        return np.concatenate([self._at(mu[i:i + step]) for i in range(0, mu.size, step)])

    def _at(self, mu: np.ndarray) -> np.ndarray:
        """LB at λ = 1 + `mu` (1-D) from the (λ, line) table of the lines' values."""
        v = self.y[None, :] - mu[:, None] * self.x[None, :]
        v -= 4.0 * _EPS * (self.y[None, :] + mu[:, None] * self.x[None, :])
        return np.maximum(v.max(axis=1), 0.0)


def _test_points(grid_a: np.ndarray, grid_b: np.ndarray, lb: _LowerBound):
    """(interval index, weight (t − a)/(b − a), LB(t)) of the test points of each interval [a, b]."""
    ints, ws, ts = [], [], []
    for g, (a, b) in enumerate(zip(grid_a.tolist(), grid_b.tolist())):
        inner = lb.breaks[(lb.breaks > a) & (lb.breaks < b)]
        pts = [a] + inner.tolist() + [b]
        for t in pts:
            ints.append(g)
            ws.append(0.0 if t == a else (1.0 if t == b else (t - a) / (b - a)))
            ts.append(t)
    return np.array(ints, dtype=np.int64), np.array(ws), lb(np.array(ts))


def _alive_items(a, b, ua, ub, lb: _LowerBound, last_zero_b: np.ndarray) -> np.ndarray:
    """Mask of items (pair on [a, b] with upper values ua, ub) whose chord may reach LB (numpy)."""
    alive = np.zeros(a.size, dtype=bool)
    tol = 8.0 * _EPS * np.maximum(ua, ub)
    alive |= _reaches(ua + tol, lb(a))
    alive |= ~last_zero_b & _reaches(ub + tol, lb(b))
    for t in lb.breaks.tolist():
        inside = (a < t) & (t < b)
        if inside.any():
            idx = np.flatnonzero(inside)
            w = (t - a[idx]) / (b[idx] - a[idx])
            c = ua[idx] * (1.0 - w) + ub[idx] * w + tol[idx]
            alive[idx] |= (c > 0.0) & (c >= lb(t)[0])
    return alive


def _reaches(c: np.ndarray, lbv: np.ndarray) -> np.ndarray:
    """Whether an upper value c > 0 reaches the lower bound LB."""
    return (c > 0.0) & (c >= lbv)


def _top_pairs(V: np.ndarray, k: int) -> np.ndarray:
    """Ids i·n + j (i ≠ j) of k off-diagonal entries of largest value of V (n × n), without sorting n² values.

    The k largest off-diagonal entries lie in the k rows of largest off-diagonal row maximum."""
    n = V.shape[0]
    k = min(k, n - 1)
    d = V.diagonal().copy()
    np.fill_diagonal(V, -np.inf)
    try:
        rows = np.argpartition(-V.max(axis=1), k - 1)[:k]
        top = np.argpartition(-V[rows].reshape(-1), k - 1)[:k]
    finally:
        np.fill_diagonal(V, d)
    return rows[top // n] * n + top % n


def prune_pairs(P: np.ndarray, scan, max_alive: float = _MAX_ALIVE_FRACTION):
    """Ids i·n + j of the ordered row pairs that may own a vertex of the candidate chain, or None.

    None where the plain scan is the better (or the only exact) choice: entries below 1e-290, or
    more than the fraction `max_alive` of the pairs left after the grid test.  ``scan`` forms the
    candidate chain of a list of pairs by sorting (``tpl_envelope.scan_list``; passed in, since
    :mod:`policyopt.privacy.temporal` imports this module).  Every pair owning a vertex supporting a
    direction λ − 1 with Φ(λ) > 0 (all that L(α) ever uses) is returned.
    """
    from policyopt.privacy import tpl_kernels as K

    n = P.shape[0]
    if np.any((P > 0) & (P < _TINY)):
        return None
    grid, n_dense, top_pair = _grid(P)
    Ph, Pl = _outward(P)
    U = _upper_values(Ph, Pl, grid, n_dense)
    last_zero = not bool(np.any(P == 0.0))  # then φ_p(λ_top) = 0 exactly for every pair
    diag = np.arange(n) * (n + 1)
    # seeds: the pairs of largest φ at each grid point, and the pair of the largest ratio
    seeds = [_top_pairs(U[g], _SEEDS_PER_POINT) for g in range(grid.size)]
    if top_pair is not None:
        seeds.append(np.array([top_pair]))
    seeds = np.unique(np.concatenate(seeds))
    sx, sy = _seed_points(P, seeds, scan)
    probe = np.unique(np.concatenate([grid, np.sqrt(grid[:-1]) * np.sqrt(grid[1:]),
                                      grid[:-1] + (grid[1:] - grid[:-1]) / 3, grid[:-1] + 2 * (grid[1:] - grid[:-1]) / 3]))
    lb = _LowerBound(sx, sy, probe)
    tp_int, tp_w, tp_lb = _test_points(grid[:-1], grid[1:], lb)
    masks = np.empty((n, n), dtype=np.uint64)
    in_threads(lambda part: K.chord_test(U, part, grid, tp_int, tp_w, tp_lb, last_zero, masks), np.arange(n, dtype=np.int64), n)
    masks.reshape(-1)[diag] = 0
    alive = np.flatnonzero(masks.reshape(-1))
    if alive.size > max_alive * n * (n - 1):
        return None
    # items: (pair, interval) for every set bit
    bits = masks.reshape(-1)[alive]
    G = grid.size - 1
    has = ((bits[:, None] >> np.arange(G, dtype=np.uint64)[None, :]) & np.uint64(1)).astype(bool)
    pi_idx, g_idx = np.nonzero(has)
    item_p = alive[pi_idx]
    Uf = U.reshape(grid.size, -1)
    ia, ib = grid[g_idx], grid[g_idx + 1]
    ua, ub = Uf[g_idx, item_p], Uf[g_idx + 1, item_p]
    lastb = last_zero & (g_idx == G - 1)
    del U, Uf
    pairs, idle = np.unique(item_p).size, 0
    for _ in range(_REFINE_LEVELS):
        if pairs <= _REFINE_STOP or idle >= _REFINE_IDLE:
            break
        mid = np.sqrt(ia) * np.sqrt(ib)
        um = np.empty(item_p.size)
        K.phi_items(Ph, Pl, item_p // n, item_p % n, mid, um)
        um *= 1.0 + (n + 2) * _EPS
        # new seeds: the pair of largest φ at each distinct midpoint
        order = np.lexsort((-um, mid))
        first = order[np.r_[True, mid[order][1:] != mid[order][:-1]]]
        nx, ny = _seed_points(P, np.unique(item_p[first]), scan)
        sx, sy = np.concatenate([sx, nx]), np.concatenate([sy, ny])
        probe = np.unique(np.concatenate([probe, mid, np.sqrt(ia) * np.sqrt(mid), np.sqrt(mid) * np.sqrt(ib)]))
        lb = _LowerBound(sx, sy, probe)
        a2, b2 = np.concatenate([ia, mid]), np.concatenate([mid, ib])
        ua2, ub2 = np.concatenate([ua, um]), np.concatenate([um, ub])
        p2 = np.concatenate([item_p, item_p])
        l2 = np.concatenate([np.zeros(item_p.size, dtype=bool), lastb])
        keep = _alive_items(a2, b2, ua2, ub2, lb, l2)
        new = (p2[keep], a2[keep], b2[keep], ua2[keep], ub2[keep], l2[keep])
        if new[0].size >= item_p.size * 2:  # no progress
            break
        item_p, ia, ib, ua, ub, lastb = new
        left = np.unique(item_p).size
        idle = idle + 1 if left == pairs else 0
        pairs = left
    return np.unique(item_p)
