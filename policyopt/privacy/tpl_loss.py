"""Temporal privacy leakage (BPL / FPL / TPL) of continuous releases under Markov correlations.

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019 (cited below as *Cao et al. (2019)*).  Privacy is in nats,
time in steps (t = 1..T).  ``tpl_level`` (α of α-DP_T, Definition 8) is a leakage level in
nats, not a Rényi order.

The privacy loss function of eq. (24) is::

    L(α) = max over ordered pairs (q, d) of distinct rows of P of
           max over x with e^{−α} ≤ x_j / x_k ≤ e^{α} of log (q·x)/(d·x)        (18)–(21)
         = max_{q,d} log [q⁺(e^α − 1) + 1] / [d⁺(e^α − 1) + 1]                  (24)

where q⁺, d⁺ are sums over the optimal index set of Theorem 5.  Every value is computed in log
space as log(Q + Q̄e^{−α}) − log(D + D̄e^{−α}) (Q̄ = 1 − Q, D̄ = 1 − D summed from the
complement), which is exact for any α ≥ 0: α = 1000 works, and a pair with D = 0, Q = 1 gives
exactly α (Theorem 7).

Paper errors and pitfalls handled here
--------------------------------------
* Algorithm 1, line 10, tests q_j/d_j ≤ f(α) in floating point.  For Example 4's matrix at
  α = 40 the ratio f(40) rounds to exactly q_1/d_1 = 5, the last index is removed and the
  public MATLAB code returns 0 instead of ≈ log 5; it returns NaN for α ≥ 710 (e^α overflows).
  Here the test is made in logs, log q_j − log d_j > log f(α), the index of largest ratio is never
  removed (f(S) is a mediant of the ratios in S and of (1 − Q)/(1 − D) < 1, so it is strictly
  below the largest ratio in S), and the value returned is the largest over all index sets the
  loop visits (each is a feasible point of (19)–(21), so this never overshoots).
* Algorithm 2, line 11, prints the transition point as log[(q_i − d_i)/(Q d_i − D q_i)]; the
  "+1" of Theorem 9 (and of the paper's own example value 1.47 = log(1 + 0.1/0.03)) is missing.
  The code uses α_i = log(1 + (q_i − d_i)/(Q d_i − D q_i)) (Theorem 9 / Appendix I).
* Algorithm 2's text says "Line 7 results in q = [0.3, 0.2, 0] and q = [0, 0.1, 0]"; the second
  vector is d.
* Algorithm 4 needs a finite right end a_m of the domain.  :class:`LossFunction` instead builds
  the upper envelope on the whole half-line [0, ∞) by a sweep that uses the fact behind
  Theorem 10 (two sub-functions cross at most once for α > 0, at u = e^α − 1 =
  (Q' + D − Q − D')/(Q D' − Q' D), Algorithm 4 line 4).
* Eq. (11) states TPL = max_i BPL_i + max_i FPL_i − ε.  By definition (3) TPL is
  max_i (BPL_i + FPL_i − ε), which is ≤ the printed sum (equal when one user attains both
  maxima).  :func:`leakage` reports the definition (3); the sum (11) is an upper bound.
* Appendix K, eq. (39): the quadratic for F = e^{sup} is printed as
  dF² + (qe^ε + d − 1)F + (qe^ε − e^ε) = 0.  Substituting α = log f(α) + ε gives
  F(d(F − 1) + 1) = e^ε (q(F − 1) + 1), i.e. dF² − (qe^ε + d − 1)F − (1 − q)e^ε = 0: the
  linear term has the wrong sign (and so has the constant, up to the overall sign).  The closed
  form stated in Theorem 11 is the positive root of the correct equation.
* Theorem 11, case 2, allows ε ≤ log(1/q) when d = 0; at ε = log(1/q) the fixed point is
  infinite and the recursion diverges.  The finite case needs ε < log(1/q) strictly.

* Subnormal entries (not in the paper): with d_k ≈ 1e-318 the ratio q_k/d_k overflows to inf and
  ties with a true d_k = 0, and products of entries with e^{−α} underflow; sorting or testing in
  that arithmetic loses the best index set (the envelope printed 731.24 for a true L(741) =
  740.10).  Ratios are sorted by (d_k/q_k)·2^600, which is exact to 2^−53 for all entries,
  inequality (22) is tested in logs, and Theorem 9's transition points are summed in logs.

Beyond the paper: one L(α) on a fresh matrix
--------------------------------------------
Algorithm 1 sorts the likelihood ratios of every ordered row pair (O(n³ log n)), and so does
the construction of the piecewise function (Algorithms 2 and 4).  :class:`LossFunction` builds
nothing until it is needed: :meth:`LossFunction.exact` on a fresh object bounds every pair's
value by 1 + uT (T its total variation, one pass of min and sum over the pairs i < j), rules
pairs out with Dinkelbach's test 1 − λ + u Σ(q_k − λd_k)⁺ ≤ 0 (one pass per pair, no sort),
and applies Theorem 5 (sorted prefixes) only to the pairs left, with the same result.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import UNIT_ROUNDOFF, fmt_upper, fmt_value
from policyopt.models.markov import validate_transition_matrix
from policyopt.privacy.tpl_prune import in_threads, prune_pairs

__all__ = [
    "format_leakage",
    "paired_users",
    "LossFunction",
    "TemporalLeakage",
    "leakage",
    "leakage_upper",
    "leakage_rounding_error",
    "window_leakage",
    "Supremum",
    "supremum",
    "supremum_upper",
]

_TIE_RTOL = 1e-12


# ----------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------


def _check_nonneg(values, name: str, *, scalar: bool = False) -> np.ndarray:
    """Finite, non-negative float array (nats); raises InvalidInputError naming `name`."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"`{name}` must be non-negative numbers (nats), got {fmt(values)}") from None
    if scalar and arr.ndim != 0:
        raise InvalidInputError(f"`{name}` must be a single non-negative number (nats), got {fmt(values)}")
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr < 0)):
        raise InvalidInputError(f"`{name}` must be finite and non-negative (nats), got {fmt(values)}")
    return arr


def _check_budgets(budgets) -> np.ndarray:
    arr = _check_nonneg(budgets, "budgets")
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(
            f"`budgets` must be a non-empty 1-D sequence ε_1..ε_T (nats), got {fmt(budgets)}"
        )
    return arr


# ----------------------------------------------------------------------------------------
# log-space sub-function of eq. (24)
# ----------------------------------------------------------------------------------------


def _log_f(Q, Qc, D, Dc, alpha):
    """log f_{Q,D}(α) = log[(Q(e^α − 1) + 1)/(D(e^α − 1) + 1)], eq. (24), in log space.

    Written as log(Q + Q̄e^{−α}) − log(D + D̄e^{−α}) with Q̄ = 1 − Q, D̄ = 1 − D given
    separately, so it is exact for large α and for D = 0 (then it is α + log(Q + Q̄e^{−α}) − log D̄).
    Broadcasts over all arguments.
    """
    with np.errstate(divide="ignore"):
        lQ, lQc, lD, lDc = np.log(Q), np.log(Qc), np.log(D), np.log(Dc)
    return np.logaddexp(lQ, lQc - alpha) - np.logaddexp(lD, lDc - alpha)  # eq. (24)


def _log_slope(Q, Qc, D, Dc, alpha):
    """log of d/dα log f_{Q,D}(α) = (Q − D)e^{−α} / ((Q + Q̄e^{−α})(D + D̄e^{−α})), for Q > D."""
    with np.errstate(divide="ignore"):
        lQ, lQc, lD, lDc = np.log(Q), np.log(Qc), np.log(D), np.log(Dc)
        return np.log(Q - D) - alpha - np.logaddexp(lQ, lQc - alpha) - np.logaddexp(lD, lDc - alpha)


def _complements(total_rest: float, sorted_vals: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    """1 − prefix sums, accurately: summed from the complement when the prefix is near 1."""
    tail = np.concatenate([np.cumsum(sorted_vals[::-1])[::-1][1:], [0.0]]) + total_rest
    return np.where(prefix < 0.5, 1.0 - prefix, tail)


#: 2^600: d_k·2^600 is exact (a power-of-two scaling of a number ≤ 1), and (d_k·2^600)/q_k ≥ 2^−474
#: is a normal float whenever d_k > 0, so the key below keeps 53 bits even for subnormal entries.
_KEY_SCALE = 2.0 ** 600
_LOG_KEY_SCALE = 600 * math.log(2.0)


def _has_subnormal(P: np.ndarray) -> bool:
    """Whether some entry of `P` is positive and below the smallest normal float (2.2e-308)."""
    return bool(np.any((P > 0) & (P < np.finfo(float).tiny)))


def _inverse_ratio_key(q: np.ndarray, d: np.ndarray, plus: np.ndarray, scale: bool = True) -> np.ndarray:
    """Sort key of Algorithm 2, line 7: (d_k/q_k)·2^600 where q_k > d_k, +inf elsewhere; ascending = ratio descending.

    Sorting by q_k/d_k itself fails with subnormal entries: 0.48/2.4e-318 overflows to inf and ties
    with a true d_k = 0, and plain d_k/q_k is then subnormal with a few significant bits.  The
    scaled inverse ratio is correctly rounded (relative error 2^−53) for every q_k > d_k ≥ 0 and
    is 0 exactly when d_k = 0.  ``scale=False`` (allowed when no entry is subnormal, see
    :func:`_has_subnormal`: then d_k/q_k ≥ d_k is normal) gives d_k/q_k, one pass cheaper.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        key = np.divide(d * _KEY_SCALE if scale else d, q)
    np.copyto(key, np.inf, where=~plus)
    return key


@dataclass(frozen=True)
class _PairTable:
    """Algorithm 2 output for one ordered pair (q, d): coefficients and transition points.

    ``Q[k], D[k]`` (k = 0..K−1) are q^{k+1}, d^{k+1} of eq. (25): sums over the k + 1 indices
    with the largest ratio q_j/d_j (only indices with q_j > d_j, Corollary 2); ``Qc``, ``Dc``
    are 1 − Q, 1 − D.  ``q``, ``d`` are the entries with q_j > d_j, sorted by decreasing ratio.  ``points[k]`` is the α
    at which prefix k + 1 stops being optimal (Theorem 9), non-increasing in k, ``points[0] = inf``.
    """

    row_q: int
    row_d: int
    q: np.ndarray
    d: np.ndarray
    Q: np.ndarray
    Qc: np.ndarray
    D: np.ndarray
    Dc: np.ndarray
    points: np.ndarray


def _pair_table(P: np.ndarray, i: int, j: int, with_points: bool = True) -> _PairTable | None:
    """Algorithm 2 (lines 2–11) for rows q = P[i], d = P[j]; None if no q_k > d_k (Theorem 6).

    ``with_points=False`` leaves Theorem 9's transition points (used by Algorithm 3 only) as inf."""
    q, d = P[i], P[j]
    plus = q > d  # Corollary 2: only q_k > d_k can be in q⁺
    if not np.any(plus):
        return None
    qp, dp = q[plus], d[plus]
    key = _inverse_ratio_key(qp, dp, np.ones(qp.size, dtype=bool))
    order = np.lexsort((-qp, key))  # Algorithm 2 line 7: q_1/d_1 ≥ ... ≥ q_K/d_K, ties by larger q
    qs, ds = qp[order], dp[order]
    Q, D = np.cumsum(qs), np.cumsum(ds)  # Algorithm 2 lines 8–9: qArr, dArr
    Qc = _complements(float(q[~plus].sum()), qs, Q)
    Dc = _complements(float(d[~plus].sum()), ds, D)
    K = qs.size
    points = np.full(K, np.inf)
    if K > 1 and with_points:
        # Theorem 9: f_{Q_k,D_k}(α) = q_k/d_k at α = log(1 + (q_k − d_k)/(Q_k d_k − D_k q_k));
        # Algorithm 2 line 11 omits the "+1".  The denominator is Σ_{i ≤ k} (q_i d_k − d_i q_k)
        # = q_k Σ_i q_i (r_k − r_i) with r = d/q (each term ≥ 0 since the ratios are sorted),
        # summed in logs from the scaled r: products of subnormal entries must not underflow.
        r = key[order]  # (d_k/q_k)·2^600, ascending
        with np.errstate(divide="ignore"):
            lq = np.log(qs)
            lgap = np.log(qs - ds) - lq  # log((q_k − d_k)/q_k) = log(1 − d_k/q_k), no cancellation
            terms = lq[None, :] + np.log(np.maximum(r[:, None] - r[None, :], 0.0))  # [k, i]; 0 for i ≥ k
        log_den = np.logaddexp.reduce(terms, axis=1) - _LOG_KEY_SCALE  # log(den_k / q_k)
        ok = log_den > -np.inf
        ok[0] = False
        points[ok] = np.logaddexp(0.0, lgap[ok] - log_den[ok])  # log(1 + u), u may exceed 1e308
    points = np.minimum.accumulate(points)  # Theorem 9: sub-domains are nested; enforce in floats
    return _PairTable(i, j, qs, ds, Q, Qc, D, Dc, points)


def _upper_chain(x, y, pid):
    """Points (x, y) = (D, Q − D) that maximise y − μx for some μ ∈ [0, ∞], with their pair ids.

    For u = e^α − 1 > 0, f_{Q,D} = (1 + uQ)/(1 + uD) is the slope from (−1/u, −1/u) to (D, Q), so
    the maximiser over any candidate set is a vertex of its convex hull, one that maximises
    Q − λD = y − (λ − 1)x for the optimal ratio λ ≥ 1 (Theorem 5).  These vertices form the upper
    hull of the Pareto front (small x, large y), returned with x and y increasing.
    """
    o = np.lexsort((-y, x))
    x, y, pid = x[o], y[o], pid[o]
    prev = np.empty_like(y)
    prev[0] = -np.inf
    np.maximum.accumulate(y[:-1], out=prev[1:])
    keep = y > prev  # Pareto front: strictly above everything further left
    hx, hy, hp = [], [], []
    for a, b, p in zip(x[keep].tolist(), y[keep].tolist(), pid[keep].tolist()):
        while len(hx) >= 2:
            t1 = (hx[-1] - hx[-2]) * (b - hy[-2])
            t2 = (hy[-1] - hy[-2]) * (a - hx[-2])
            if t1 > 1e-290 and t2 > 1e-290:  # both terms are positive here (x and y increase)
                if t1 < t2:
                    break
            elif not _not_right_turn(hx[-2], hy[-2], hx[-1], hy[-1], a, b):  # tiny products: exactly
                break
            hx.pop(), hy.pop(), hp.pop()
        hx.append(a), hy.append(b), hp.append(p)
    return np.array(hx, dtype=float), np.array(hy, dtype=float), np.array(hp, dtype=np.int64)


def _not_right_turn(x0: float, y0: float, x1: float, y1: float, x2: float, y2: float) -> bool:
    """Whether (x1, y1) lies on or below the segment from (x0, y0) to (x2, y2) (x0 < x1 < x2), in exact rationals.

    :func:`_upper_chain` calls it when a product of its float orientation test falls below 1e-290: with abscissae
    near 1e-320 both products underflow to 0 and the float test would drop a vertex (an envelope 0.05 nats below
    the true L at α = 741 was seen).
    """
    from fractions import Fraction

    X0, Y0 = Fraction(x0), Fraction(y0)
    return (Fraction(x1) - X0) * (Fraction(y2) - Y0) - (Fraction(y1) - Y0) * (Fraction(x2) - X0) >= 0


_SCAN_CHUNK = 1 << 20  # matrix entries per block of ordered pairs (≈ 8 MiB per work array)
_PRUNE_N = 160  # from this many states the envelope's pairs are first pruned on a grid of λ (tpl_prune)
_SEED_PAIRS = 8  # pairs of largest T whose whole chains seed the first block's filter
_SEED_MIN_POINTS = 4096  # smaller blocks go straight to the hull (the filter would cost more than it saves)
#: Below this x = D every point is kept by the filter: np.interp's slope Δy/Δx would overflow
#: across subnormal abscissae, and these points matter only at huge α (μ beyond 1e290).
_TINY_X = 1e-290


def _above_chain(x, y, cx, cy) -> np.ndarray:
    """Mask of the points (x, y) not on or below the chain (cx, cy) (x increasing, y increasing).

    A point left of the chain, or at x < 1e-290, is always kept; right of it, the chain continues
    flat at its top (such points lose to the top vertex for every μ ≥ 0).
    """
    if cx.size == 0:
        return np.ones(x.size, dtype=bool)
    return (x < cx[0]) | (x < _TINY_X) | (y > np.interp(x, cx, cy))


def _seed_chain(x, y, p, K):
    """A chain from a cheap subset of one block's points: every pair's first and last prefix, and
    the whole chains of the pairs of largest T (the last prefix's y).  Filtering the block against
    it before the sort by (x, −y) leaves only the few points that can reach the final chain."""
    ends = np.cumsum(K) - 1  # index of each pair's last point in the flattened (x, y)
    firsts = ends - K + 1
    idx = [ends, firsts]
    if K.size > _SEED_PAIRS:
        top = np.argpartition(-y[ends], _SEED_PAIRS)[:_SEED_PAIRS]
        idx += [np.arange(firsts[t], ends[t] + 1) for t in top.tolist()]
    sub = np.concatenate(idx)
    return _upper_chain(x[sub], y[sub], p[sub])


def _scan_list(P: np.ndarray, pi: np.ndarray, pj: np.ndarray):
    """Candidate chain of the ordered pairs (pi[m], pj[m]) and their D = 0 candidates.

    Every pair's likelihood ratios q_k/d_k are sorted once (Algorithm 2 line 7, all pairs of a
    block at once); prefix sums give all its points (D_k, Q_k − D_k) of eq. (25), of which only
    those above the running chain are kept.  Returns (x, y, pair id = i·n + j, zero rows), the zero
    rows being (Q, Q̄) of the prefixes with D = 0 (for Theorem 11, cases 2–4).
    """
    n = P.shape[0]
    ar = np.arange(n)
    per = max(1, _SCAN_CHUNK // n)
    scale = _has_subnormal(P)
    cx = cy = np.zeros(0)
    cp = np.zeros(0, dtype=np.int64)
    zeros = []
    for s in range(0, len(pi), per):
        ii, jj = pi[s:s + per], pj[s:s + per]
        q = P[ii]  # rows q = P[i]
        d = P[jj]  # rows d = P[j]
        pid = ii.astype(np.int64) * n + jj
        plus = q > d  # Corollary 2
        K = plus.sum(axis=1)
        sel = (K > 0) & (ii != jj)
        if not sel.any():
            continue
        if not sel.all():
            q, d, plus, K, pid = q[sel], d[sel], plus[sel], K[sel], pid[sel]
        m = q.shape[0]
        key = _inverse_ratio_key(q, d, plus, scale)  # ascending = ratio q_k/d_k descending
        o = np.argsort(key, axis=1)
        o += (np.arange(m) * n)[:, None]
        qs = np.take(q, o)
        ds = np.take(d, o)
        Q = np.cumsum(qs, axis=1)
        D = np.cumsum(ds, axis=1)
        valid = ar[None, :] < K[:, None]
        x = D[valid]
        y = Q[valid] - x
        p = np.broadcast_to(pid[:, None], (m, n))[valid]
        if (x == 0.0).any():  # prefixes with D = 0 (entries d_k = 0, ratio ∞): Theorem 11 cases 2–4
            rows_z = np.flatnonzero((ds[:, 0] == 0.0))
            zeros.append(_zero_prefixes(q[rows_z], d[rows_z]))
        if not cx.size and x.size > _SEED_MIN_POINTS:
            cx, cy, cp = _seed_chain(x, y, p, K)
        if cx.size:
            keep = _above_chain(x, y, cx, cy)
            x, y, p = x[keep], y[keep], p[keep]
        if x.size:
            cx, cy, cp = _upper_chain(np.concatenate([cx, x]), np.concatenate([cy, y]), np.concatenate([cp, p]))
    z = np.concatenate(zeros) if zeros else np.zeros((0, 2))
    return cx, cy, cp, z


def _zero_prefixes(q: np.ndarray, d: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Rows (Q, Q̄) of the prefixes with D = 0 of the pairs (q[m], d[m]) (shape (m, n)), unique.

    These prefixes take the entries with d_k = 0 < q_k (ratio ∞) in decreasing q_k (Algorithm 2
    line 7, ties by larger q first); Q̄ = 1 − Q is summed from the complement when Q ≥ 1/2 and is 0
    exactly once the prefix holds every positive q_k.  `order`, if given, sorts every row of `q`
    by decreasing value (it saves the sort when many pairs share a row q).
    """
    if order is None:
        order = np.argsort(-q, axis=1, kind="stable")
    qs = np.take_along_axis(q, order, axis=1)
    qz = np.where((np.take_along_axis(d, order, axis=1) == 0.0) & (qs > 0.0), qs, 0.0)
    Qz = np.cumsum(qz, axis=1)  # at each entry with d = 0: the sum over the prefix up to it
    count = np.cumsum(qz > 0.0, axis=1)
    tot = q.sum(axis=1)[:, None]
    rest = np.where(Qz < 0.5, 1.0 - Qz, np.maximum(tot - Qz, 0.0))
    npos = (q > 0).sum(axis=1)[:, None]
    rest = np.where(count >= npos, 0.0, rest)  # all of q in the prefix: Q̄ = 0 exactly
    at = qz > 0.0
    if not at.any():
        return np.zeros((0, 2))
    return np.unique(np.stack([Qz[at], rest[at]], axis=1), axis=0)


def _all_zero_prefixes(P: np.ndarray) -> np.ndarray:
    """:func:`_zero_prefixes` of every ordered pair of distinct rows (only pairs with some d_k = 0 < q_k)."""
    n = P.shape[0]
    pos = (P > 0.0).astype(float)
    has = (pos @ (P == 0.0).astype(float).T) > 0.5  # counts, exact: some k with P_ik > 0 = P_jk
    np.fill_diagonal(has, False)
    if not has.any():
        return np.zeros((0, 2))
    order = np.argsort(-P, axis=1, kind="stable")
    out = []
    for i in np.flatnonzero(has.any(axis=1)).tolist():
        js = np.flatnonzero(has[i])
        per = max(1, _SCAN_CHUNK // n)
        for s in range(0, js.size, per):
            jb = js[s:s + per]
            out.append(_zero_prefixes(np.broadcast_to(P[i], (jb.size, n)), P[jb],
                                      np.broadcast_to(order[i], (jb.size, n))))
    return np.unique(np.concatenate(out), axis=0)


def _scan_pairs(P: np.ndarray):
    """Pairs (i, j) owning a vertex of the candidate chain of all ordered pairs, and D = 0 rows."""
    n = P.shape[0]
    ii, jj = np.nonzero(~np.eye(n, dtype=bool))
    parts = []  # (first index, its scan): numpy releases the GIL in sort, take and cumsum
    in_threads(lambda part: parts.append((int(part[0]) if part.size else 0, _scan_list(P, ii[part], jj[part]))), np.arange(ii.size), n)
    res = [r for _, r in sorted(parts, key=lambda t: t[0])]  # in a fixed order, whatever the threads' timing
    x = np.concatenate([r[0] for r in res])
    y = np.concatenate([r[1] for r in res])
    p = np.concatenate([r[2] for r in res])
    z = np.concatenate([r[3] for r in res])
    if z.shape[0]:
        z = np.unique(z, axis=0)
    if x.size:
        x, y, p = _upper_chain(x, y, p)
    return np.unique(p), z


# ----------------------------------------------------------------------------------------
# L(α) for one α without the envelope: bound and prune the row pairs (beyond the paper)
# ----------------------------------------------------------------------------------------
#
# For one α (u = e^α − 1 > 0) the value of a row pair (q, d) is λ* = max_S (1 + uQ_S)/(1 + uD_S)
# (Theorem 5: S is a prefix of the entries sorted by decreasing q_k/d_k).  Two facts prune:
# * Bound: Q_S − D_S ≤ T = Σ_k (q_k − d_k)⁺ for every S, and λ* − 1 = u(Q_S − λ* D_S) at the
#   optimum, so λ* ≤ 1 + uT.  T of all pairs is one O(n³) pass of min and sum, no sorting.
# * Test (Dinkelbach): g(λ) = 1 − λ + u Σ_k (q_k − λ d_k)⁺ is decreasing with root λ*, so a
#   pair beats a value λ iff g(λ) > 0: one O(n) pass per pair, no sorting.
# Only the pairs passing both are sorted (Algorithm 2 line 7), a handful on typical matrices:
# O(n³) cheap operations instead of O(n³ log n) sorting, and the same maximum.

_COMPILED_N = 32  # from this n the O(n³) passes use the compiled loops of tpl_kernels; below, numpy (the small
# chains of most uses then never import numba, which costs about 0.6 s and 100 MiB per process)
_PRUNE_RTOL = 1e-9  # a pair is dropped only if it misses the best value by this factor
_PRUNE_SEEDS = 8  # pairs evaluated per round before pruning


def _log_sentinel(P: np.ndarray) -> np.ndarray:
    """log P with −1e300 for zero entries (differences then stay finite: ±1e300 means ±∞)."""
    with np.errstate(divide="ignore"):
        return np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), -1e300)


def _disjoint_pair(P: np.ndarray) -> int | None:
    """Id i·n + j of an ordered pair of rows with disjoint supports (exact: counts of common positive entries), or None."""
    S = (P > 0.0).astype(float)
    common = S @ S.T  # integers below 2^53: exact
    np.fill_diagonal(common, 1.0)
    hit = np.flatnonzero(common.reshape(-1) < 0.5)
    return int(hit[0]) if hit.size else None


def _pair_tv(P: np.ndarray) -> np.ndarray:
    """T[i, j] = Σ_k (P_ik − P_jk)⁺ for all ordered pairs, shape (n, n), inflated; the diagonal is 0.

    From n = ``_COMPILED_N`` one compiled pass over the pairs i < j gives both orientations
    (:func:`tpl_kernels.pair_tv`), on 2 threads for large n; below, one numpy array of the n³
    differences.  Summed term by term (not as 1 − Σ_k min(P_ik, P_jk), which assumes row sums of
    exactly 1), and the rounding of n terms is covered by an added slack, so T is an upper bound
    of the exact total variation.
    """
    n = P.shape[0]
    if n < _COMPILED_N:
        T = np.maximum(P[:, None, :] - P[None, :, :], 0.0).sum(axis=2)
    else:
        from policyopt.privacy import tpl_kernels as K

        T = np.empty((n, n))
        Pc = np.ascontiguousarray(P, dtype=float)
        in_threads(lambda part: K.pair_tv(Pc, np.asarray(part, dtype=np.int64), T), np.arange(n - 1), n)
    T += 8.0 * (n + 2) * np.finfo(float).eps
    np.fill_diagonal(T, 0.0)
    return T


def _log_u(alpha: float) -> float:
    """log(e^α − 1) for α > 0, without overflow."""
    return math.log(math.expm1(alpha)) if alpha < 700 else alpha + math.log1p(-math.exp(-alpha))


def _pair_values(P: np.ndarray, pi: np.ndarray, pj: np.ndarray, alpha: float) -> np.ndarray:
    """max over the prefixes of Theorem 5 of log f_{Q,D}(α) (eq. 24) for each listed pair, shape (m,).

    Theorem 5: the optimal index set of eq. (19)–(21) for a pair is a prefix of the entries
    sorted by decreasing q_k/d_k, so the pair's value is the largest of its K prefix values
    (Algorithm 1 visits some of them and stops at the optimal one).  Pairs with no q_k > d_k
    get 0 (Theorem 6).  From n = ``_COMPILED_N`` one compiled loop per pair
    (:func:`tpl_kernels.pair_values`, O(n) memory); below, the same steps batched in numpy.
    """
    pi, pj = np.asarray(pi, dtype=np.int64), np.asarray(pj, dtype=np.int64)
    n = P.shape[1]
    if n >= _COMPILED_N:
        from policyopt.privacy import tpl_kernels as K

        out = np.empty(pi.size)
        K.pair_values(np.ascontiguousarray(P, dtype=float), pi, pj, float(alpha), out)
        return out
    q, d = P[pi], P[pj]
    plus = q > d  # Corollary 2
    o = np.argsort(_inverse_ratio_key(q, d, plus), axis=1)  # ratio descending (Algorithm 2 line 7)
    qs, ds = np.take_along_axis(q, o, axis=1), np.take_along_axis(d, o, axis=1)
    Q, D = np.cumsum(qs, axis=1), np.cumsum(ds, axis=1)
    tq, td = np.zeros_like(Q), np.zeros_like(D)  # Σ_{l > k}: Q̄ = 1 − Q from the complement when Q ≥ 1/2
    tq[:, :-1] = np.cumsum(qs[:, :0:-1], axis=1)[:, ::-1]
    td[:, :-1] = np.cumsum(ds[:, :0:-1], axis=1)[:, ::-1]
    v = _log_f(Q, np.where(Q < 0.5, 1.0 - Q, tq), D, np.where(D < 0.5, 1.0 - D, td), alpha)  # eq. (24)
    v[np.arange(n)[None, :] >= plus.sum(axis=1)[:, None]] = 0.0  # only the K prefixes of q_k > d_k entries
    return v.max(axis=1) if n else np.zeros(pi.size)


class _PairBounds:
    """T of every ordered pair of distinct rows, computed once per matrix, and L(α) from it."""

    def __init__(self, P: np.ndarray):
        n = P.shape[0]
        self.P = P
        self.n = n
        T = _pair_tv(P).reshape(-1)
        self.flat = np.flatnonzero(T > 0)  # pair ids i·n + j (the diagonal is 0: distinct pairs only)
        self.tv = T[self.flat]
        self._lP = None

    def _psi(self, idx: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Σ_k (A_ik − B_jk)⁺ for the pairs (i, j) numbered `idx` in ``flat`` (Dinkelbach's test, see loss).

        From n = ``_COMPILED_N`` one compiled loop (:func:`tpl_kernels.phi_items` with λ = 1), below
        numpy; the caller inflates the sums for their rounding."""
        f = self.flat[idx]
        if self.n < _COMPILED_N:
            return np.maximum(A[f // self.n] - B[f % self.n], 0.0).sum(axis=1)
        from policyopt.privacy import tpl_kernels as K

        out = np.empty(f.size)
        K.phi_items(np.ascontiguousarray(A, dtype=float), np.ascontiguousarray(B, dtype=float),
                    f // self.n, f % self.n, np.ones(f.size), out)
        return out

    def loss(self, alpha: float) -> float:
        """max over pairs of log max_S f (eq. 24) at one α > 0, by bound-and-prune (unclipped).

        Start: a lower bound from the pairs of largest T (their sets {q_k > d_k}, no sorting).
        Bound: e^{L_pair} ≤ 1 + uT rules out the pairs of small T.  Test (Dinkelbach): a pair
        beats the value λ = e^{best} found so far iff 1 − λ + u Σ_k (q_k − λ d_k)⁺ > 0 (the
        root of this decreasing function of λ is its value, Theorem 5), written as
        log Σ_k (q_k − λ d_k)⁺ > log((λ − 1)/u), so that α up to 1000 and subnormal entries
        work; the pairs passing it are cut down by evaluating the ones with the largest sum
        exactly and testing again.  A pair is dropped only when it fails the test by a margin that covers
        rounding, so the maximum is that of all pairs.
        """
        n, flat, tv = self.n, self.flat, self.tv
        if flat.size == 0:
            return 0.0
        lu = _log_u(alpha)
        P = self.P

        def evaluate(idx):
            """Largest L(α) of eq. (24) over the given row pairs (0 for none)."""
            f = flat[idx]
            return float(_pair_values(P, f // n, f % n, alpha).max()) if idx.size else 0.0

        k = min(_PRUNE_SEEDS, flat.size)
        seeds = np.argpartition(-tv, k - 1)[:k] if k < flat.size else np.arange(flat.size)
        # A lower bound without sorting: for the pairs of largest T (the best for small α), the
        # whole set {k : q_k > d_k} is feasible in (19)–(21); Q̄, D̄ summed from the complement.
        f = flat[seeds]
        q, d = P[f // n], P[f % n]
        plus = q > d
        best = max(0.0, float(np.max(_log_f((q * plus).sum(axis=1), (q * ~plus).sum(axis=1),
                                            (d * plus).sum(axis=1), (d * ~plus).sum(axis=1), alpha))))
        # e^{value} ≤ 1 + uT: only pairs with T > (e^best − 1)/u can do better
        thr = best * (1.0 - _PRUNE_RTOL)
        t_min = math.exp(min(_log_u(thr) - lu, 700.0)) if thr > 0 else 0.0  # (e^thr − 1)/u
        cand = np.flatnonzero(tv > t_min)
        eps = np.finfo(float).eps
        tiny = 2.0 ** -1074  # absolute rounding of a subnormal term
        while cand.size > 4 * _PRUNE_SEEDS:
            # φ = Σ_k (q_k − λ d_k)⁺ with q inflated by 8 ulp and λd deflated, then the sum
            # inflated by (n + 2) ulp plus n subnormal spacings: never below the exact φ.  The
            # comparison φ > (λ − 1)/u is made in logs (both sides may be far below 1e-308).
            if best < 600.0:
                lam_d = P * (math.exp(best) * (1.0 - 8.0 * eps))
            else:  # λ itself may overflow: λd = exp(log d + best)
                if self._lP is None:
                    self._lP = _log_sentinel(P)
                with np.errstate(over="ignore"):
                    lam_d = np.exp(self._lP + best) * (1.0 - 2048.0 * eps)
            psi = self._psi(cand, P * (1.0 + 8.0 * eps), lam_d) * (1.0 + (n + 2) * eps) + n * tiny
            log_c = _log_u(best) - lu if best > 0 else -math.inf  # log((λ − 1)/u)
            keep = np.log(psi) > log_c - _PRUNE_RTOL
            cand, psi = cand[keep], psi[keep]
            if cand.size <= 4 * _PRUNE_SEEDS:
                break
            top = np.argpartition(-psi, _PRUNE_SEEDS)[:_PRUNE_SEEDS]
            best = max(best, evaluate(cand[top]))
            cand = np.delete(cand, top)
        return max(best, evaluate(cand))


# ----------------------------------------------------------------------------------------
# The envelope on a bounded range [0, a_max] from the row pairs that can attain L there (beyond the paper)
# ----------------------------------------------------------------------------------------
#
# At α the maximiser of eq. (24) is a hull vertex supporting the direction λ* − 1, λ* = e^{L(α)}
# (Dinkelbach: it maximises Q − λ*D).  For α ≤ a_max, λ* ≤ Λ = e^{L(a_max)}, so only pairs whose
# φ_p(λ) = Σ_k (q_k − λd_k)⁺ = max over their prefixes of Q − λD reaches Φ(λ) = max_p φ_p(λ) for some
# λ ∈ [1, Λ] matter.  A lower bound Φ_S ≤ Φ comes from a few seed pairs (largest T); φ_p is convex
# and decreasing, so on [1, Λ] it lies below its chord from (1, T_p) to (Λ, φ_p(Λ)), and a pair whose
# chord is below Φ_S at 1, at Λ and at every breakpoint of Φ_S between them (the chord minus the
# piecewise-linear Φ_S is linear between breakpoints) cannot attain L on [0, a_max].  Two O(n³)
# passes without sorting (T, then φ_p(Λ) for the pairs whose T is not already below Φ_S(Λ)) leave a
# handful of pairs on typical matrices, whose tables give the same L as the full envelope there.

_RANGE_SLACK = 1e-6  # a range [0, a] is built for [0, a·(1 + slack)] (recursions overshoot by ulps)
_RANGE_MAX_LAMBDA = 4.0  # beyond Λ = e^{L(a_max)} ≈ 4 the range envelope is not tried (restrict builds the full one)
_RANGE_MAX_PAIRS = 256  # nor when more pairs than this (and than 2 % of all pairs) survive the tests


def _range_pairs(P: np.ndarray, bounds: _PairBounds, lam_max: float):
    """Ids i·n + j of the ordered row pairs that can attain L(α) at some α with e^{L(α)} ≤ `lam_max`.

    Every comparison is made with a margin that covers its rounding, so a pair is dropped only if
    it provably cannot attain the maximum of eq. (24) there.  Returns (ids, chain): ``chain`` is
    the candidate chain (x, y, pair id) of exactly those pairs when it was formed on the way
    (only the seed pairs survive), else None.
    """
    n, flat, tv = bounds.n, bounds.flat, bounds.tv
    if flat.size == 0 or not lam_max > 1.0:
        return flat[:0], None
    k = min(_PRUNE_SEEDS, flat.size)
    if k == flat.size:
        return flat, None
    seeds = np.argpartition(-tv, k - 1)[:k]
    f = flat[seeds]
    sx, sy, sp, _ = _scan_list(P, f // n, f % n)  # the seeds' hull: Φ_S(λ) = max(0, max_v y_v − (λ − 1)x_v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        hx, hy = np.concatenate([[0.0], sx]), np.concatenate([[0.0], sy])
        lam_b = 1.0 + np.diff(hy) / np.diff(hx)  # breakpoints of Φ_S (edge slopes + 1)
    lam = np.concatenate([[1.0], lam_b[(lam_b > 1.0) & (lam_b < lam_max)], [lam_max]])
    u = np.finfo(float).eps
    # Φ_S at the grid, minus its rounding (prefix sums: n + 2 ulps of each term; the subtraction: 4)
    phi_s = np.max(hy[None, :] - (lam[:, None] - 1.0) * hx[None, :], axis=1)
    phi_s -= 4.0 * (n + 8) * u * (1.0 + lam)
    # Pairs with T_p ≤ Φ_S(Λ) lie below Φ_S on all of [1, Λ] (φ_p ≤ T_p, Φ_S decreasing).
    is_seed = np.zeros(flat.size, dtype=bool)
    is_seed[seeds] = True
    cand = np.flatnonzero((tv > phi_s[-1]) & ~is_seed)
    if cand.size == 0:
        return f, (sx, sy, sp)
    # φ_p(Λ), an upper bound (rounding covered)
    if cand.size * n <= _PHI_DIRECT or cand.size * 4 <= flat.size:  # Σ(q − Λd)⁺ per listed pair, inflated as in _PairBounds.loss
        phi_l = bounds._psi(cand, P * (1.0 + 8.0 * u), P * (lam_max * (1.0 - 8.0 * u)))
        phi_l = phi_l * (1.0 + (n + 2) * u) + n * 2.0 ** -1074
    else:  # all ordered pairs by Σq − Σ min(q, Λd), row blocks and BLAS sums (no gathers)
        phi_l = _phi_all(P, lam_max)[flat[cand]]
    t = tv[cand]
    slope = (phi_l - t) / (lam_max - 1.0)
    if cand.size * lam.size <= _CHORD_BLOCK:  # chord > Φ_S somewhere on the grid, all at once
        chord = t[:, None] + (lam[None, :] - 1.0) * slope[:, None]
        keep = np.any(chord + 4.0 * u * (t[:, None] + np.abs(chord)) > phi_s[None, :], axis=1)  # chord's rounding
    else:  # one grid point at a time (O(pairs) memory)
        keep = np.zeros(cand.size, dtype=bool)
        for lam_e, phi_e in zip(lam.tolist(), phi_s.tolist()):
            chord = t + (lam_e - 1.0) * slope
            keep |= chord + 4.0 * u * (t + np.abs(chord)) > phi_e
    if not keep.any():
        return f, (sx, sy, sp)
    return np.concatenate([f, flat[cand[keep]]]), None


_PHI_DIRECT = 1 << 17  # up to this many entries (or a quarter of the pairs) φ_p(Λ) is summed per listed pair;
# beyond, for all pairs by row blocks (a gather per pair costs about 4 blocked entries)
_PHI_BLOCK = 1 << 18  # matrix entries per work block of _phi_all (2 MiB)
_CHORD_BLOCK = 1 << 18  # up to this many (pair, grid point) chord tests at once


def _phi_all(P: np.ndarray, lam: float) -> np.ndarray:
    """Upper bounds of φ_ij(λ) = Σ_k (P_ik − λP_jk)⁺ for all ordered pairs, flattened (index i·n + j).

    Computed as Σ_k P_ik − Σ_k min(P_ik, λP_jk) (one minimum and one BLAS sum per entry, in row
    blocks); the absolute rounding error of the two sums and of λP_jk, at most (2n + 8)·u·(1 + λ),
    is added.
    """
    n = P.shape[0]
    ones = np.ones(n)
    rows = P @ ones
    lp = P * lam
    out = np.empty((n, n))
    per = max(1, _PHI_BLOCK // n)

    def fill(part):
        """Σ_k min(P_ik, λP_jk) for the rows i of this part (each worker its own buffer)."""
        buf = np.empty((min(per, n), n))
        for i in part:
            for s in range(0, n, per):
                e = min(n, s + per)
                b = buf[: e - s]
                np.minimum(P[i], lp[s:e], out=b)
                out[i, s:e] = b @ ones

    in_threads(fill, range(n), n)
    np.subtract(rows[:, None], out, out=out)
    out += (2 * n + 8) * np.finfo(float).eps * (1.0 + lam)
    np.maximum(out, 0.0, out=out)
    return out.reshape(-1)


class _RangeEnvelope:
    """Algorithm 2's tables and Algorithm 4's envelope of the pairs that can attain L on [0, cap].

    Use :meth:`build`, which returns None where the full envelope is the better buy."""

    @classmethod
    def build(cls, loss: "LossFunction", a_max: float):
        """The range envelope, or None if [0, a_max] needs too many pairs (then build the full one)."""
        cap = a_max * (1.0 + _RANGE_SLACK) + 1e-300
        bounds = loss._bounds
        # Λ ≥ e^{L(cap)}: L(α) ≤ α (Remark 1) and e^{L(α)} ≤ 1 + (e^α − 1)·max T (see _PairBounds)
        t_max = float(bounds.tv.max()) if bounds.tv.size else 0.0
        if cap > 700.0:  # e^cap would overflow; Λ is far beyond _RANGE_MAX_LAMBDA anyway (unless T ≈ 0)
            return None
        lam_max = min(math.exp(cap), 1.0 + math.expm1(cap) * t_max) * (1.0 + 1e-9)
        if lam_max > _RANGE_MAX_LAMBDA:  # the chord test prunes little this far from λ = 1
            return None
        pairs, chain = _range_pairs(loss.P, bounds, lam_max)
        if pairs.size > max(_RANGE_MAX_PAIRS, bounds.flat.size // 50):
            return None
        return cls(loss, cap, lam_max, pairs, chain)

    def __init__(self, loss: "LossFunction", cap: float, lam_max: float, pairs: np.ndarray, chain):
        P, n = loss.P, loss.P.shape[0]
        self.cap = cap
        if pairs.size:
            cx, cy, cp = chain if chain is not None else _scan_list(P, pairs // n, pairs % n)[:3]
            # Only the vertices supporting a direction λ − 1 ≤ Λ − 1 can be a maximiser on [0, cap]:
            # a vertex supports the slopes between those of its right and left edges.
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                right = np.append(np.diff(cy) / np.diff(cx), 0.0)  # slope of the edge to the right
            need = right <= (lam_max - 1.0) * (1.0 + 1e-9)
            first = int(np.argmax(need))  # from the first such vertex on (slopes decrease)
            # the vertex before is kept too: its right edge's slope may be rounded just above Λ − 1
            rel = np.unique(cp[max(first - 1, 0):])
            x0 = cx[max(first - 1, 0)]
        else:
            rel = pairs
        self.tables = [t for p in rel.tolist() if (t := _pair_table(P, p // n, p % n, with_points=False))]
        cand = LossFunction._candidate_rows(self.tables, unique=False)  # duplicates are inert in _envelope
        if pairs.size and cand.shape[0]:
            # Prefixes below the chain (by more than rounding) are no maximiser for any λ, and those
            # left of the needed vertices only for λ > Λ: both dropped.
            x, y = cand[:, 2], cand[:, 4]
            on = (x < _TINY_X) | (y >= np.interp(x, cx, cy) * (1.0 - 1e-9))
            cand = cand[on & (x >= x0 * (1.0 - 1e-12))]
        self.cand = cand
        env = _envelope_small if cand.shape[0] <= _SMALL_ENVELOPE else _envelope
        self.breakpoints, self.seg = env(self.cand, stop=self.cap)


# Algorithm 4: upper envelope of the sub-functions on [0, ∞)
def _envelope(C: np.ndarray, stop: float = math.inf):
    """Algorithm 4 on [0, ∞): (breakpoints, candidate row of each segment) of the upper envelope of `C`.

    With a finite `stop`, the sweep ends at the first breakpoint beyond it: the segments returned
    are exact on [0, stop] (the last one is not continued to its true end)."""
    if C.shape[0] == 0:
        return np.zeros(0), np.zeros(0, dtype=int)
    Q, Qc, D, Dc, gap = C.T
    with np.errstate(divide="ignore"):
        lQ, lD = np.log(Q), np.log(D)
    # Top function at α = 0+: largest slope Q − D, ties (to rounding) by smaller Q + D
    # (second-order term); a wrong pick among near-ties is repaired by the domination step.
    near = np.flatnonzero(gap >= gap.max() * (1.0 - _TIE_RTOL))
    c = int(near[np.argmin((Q + D)[near])])
    starts, segs = [0.0], [c]
    a_cur = 0.0
    for _ in range(2 * C.shape[0] + 2):
        # Sub-functions c and c' cross once for u = e^α − 1 > 0 at u = −B/A (Theorem 10,
        # Algorithm 4 line 4), with A = Q'D − QD', B = (Q' − D') − (Q − D): f_{c'} − f_c has
        # the sign of u(Au + B).  c' overtakes c there if A > 0 and B < 0; it lies above c
        # for every u > 0 if A, B ≥ 0 (not both 0).  Domination is a strict partial order,
        # so replacing c by a dominating c' terminates; it guards against rounding in the
        # start-up tie-break.
        # A is formed in log space: products of tiny entries must not underflow, and
        # u = −B/A may exceed the float range while α = log(1 + u) does not.
        with np.errstate(invalid="ignore", divide="ignore"):
            l1, l2 = lQ + lD[c], lQ[c] + lD  # log(Q'D), log(QD')
            A_pos, A_neg = l1 > l2, l1 < l2
            logA = np.where(A_pos, l1 + np.log(-np.expm1(np.where(A_pos, l2 - l1, -1.0))), -np.inf)
        B = gap - gap[c]
        dom = (A_pos & (B >= 0)) | (~A_neg & (B > 0))
        if np.any(dom):
            idx = np.flatnonzero(dom)
            c = int(idx[np.argmax(_log_f(Q[idx], Qc[idx], D[idx], Dc[idx], a_cur + 1.0))])
            segs[-1] = c
            continue
        ok = A_pos & (B < 0)
        if not np.any(ok):
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            a_star = np.where(ok, np.logaddexp(0.0, np.log(-B) - logA), np.inf)  # log(1 − B/A)
        a_star[~(a_star > a_cur)] = np.inf
        a_next = float(np.min(a_star))
        if not np.isfinite(a_next) or a_next > stop:
            break
        tied = np.flatnonzero(a_star <= a_next * (1 + _TIE_RTOL))
        # Among the functions crossing c there, the top one just after has the largest slope.
        slopes = _log_slope(Q[tied], Qc[tied], D[tied], Dc[tied], a_next)
        c = int(tied[np.argmax(slopes)])
        a_cur = a_next
        starts.append(a_next)
        segs.append(c)
    return np.asarray(starts), np.asarray(segs, dtype=int)


_SMALL_ENVELOPE = 24  # up to this many candidates, Algorithm 4 runs in plain floats (no numpy overhead)


def _flog(v: float) -> float:
    return math.log(v) if v > 0.0 else -math.inf


def _envelope_small(C: np.ndarray, stop: float = math.inf):
    """:func:`_envelope` for a few candidates, the same steps in plain Python floats."""
    if C.shape[0] == 0:
        return np.zeros(0), np.zeros(0, dtype=int)
    rows = C.tolist()
    m = len(rows)
    Q = [r[0] for r in rows]
    Qc = [r[1] for r in rows]
    D = [r[2] for r in rows]
    Dc = [r[3] for r in rows]
    gap = [r[4] for r in rows]
    lQ, lQc, lD, lDc = ([_flog(v) for v in col] for col in (Q, Qc, D, Dc))

    def log_f(i, a):
        """log f of candidate i at α = a, eq. (24) in log space (as _log_f)."""
        return _logaddexp(lQ[i], lQc[i] - a) - _logaddexp(lD[i], lDc[i] - a)

    def log_slope(i, a):
        """log of d/dα log f of candidate i at α = a (as _log_slope)."""
        return _flog(Q[i] - D[i]) - a - _logaddexp(lQ[i], lQc[i] - a) - _logaddexp(lD[i], lDc[i] - a)

    top = max(gap)
    near = [i for i in range(m) if gap[i] >= top * (1.0 - _TIE_RTOL)]
    c = min(near, key=lambda i: (Q[i] + D[i], i))
    starts, segs = [0.0], [c]
    a_cur = 0.0
    for _ in range(2 * m + 2):
        dom, a_star = [], []
        for i in range(m):
            l1, l2 = lQ[i] + lD[c], lQ[c] + lD[i]  # log(Q'D), log(QD')
            b = gap[i] - gap[c]
            a_pos, a_neg = l1 > l2, l1 < l2
            if (a_pos and b >= 0) or (not a_neg and b > 0):
                dom.append(i)
            elif a_pos and b < 0:
                log_a = l1 + math.log(-math.expm1(l2 - l1))
                a = _logaddexp(0.0, math.log(-b) - log_a)  # log(1 − B/A)
                if a > a_cur:
                    a_star.append((a, i))
        if dom:
            c = max(dom, key=lambda i: (log_f(i, a_cur + 1.0), -i))
            segs[-1] = c
            continue
        if not a_star:
            break
        a_next = min(a for a, _ in a_star)
        if not math.isfinite(a_next) or a_next > stop:
            break
        tied = [i for a, i in a_star if a <= a_next * (1 + _TIE_RTOL)]
        c = max(tied, key=lambda i: (log_slope(i, a_next), -i))
        a_cur = a_next
        starts.append(a_next)
        segs.append(c)
    return np.asarray(starts), np.asarray(segs, dtype=int)


class LossFunction:
    """Temporal privacy loss function L(α) of a transition matrix (eq. 24).

    Parameters
    ----------
    P : array_like, shape (n, n)
        Backward (``P_B``, ``P[j, k] = Pr(l^{t−1} = k | l^t = j)``) or forward (``P_F``,
        ``Pr(l^{t+1} = k | l^t = j)``) transition matrix; rows must sum to 1 within 1e-9.
    name : str
        Argument name used in error messages (e.g. ``"P_B"``).

    Attributes
    ----------
    P : numpy.ndarray, shape (n, n)
        The validated matrix.
    pairs : list
        Algorithm 2's tables (``qM``, ``dM``, ``aM`` rows) for the ordered row pairs that have
        some q_k > d_k; empty when all rows are identical.  Built on first access (O(n^2) tables).
    breakpoints, segment_Q, segment_D : numpy.ndarray, shape (m,)
        The piecewise representation of L (Algorithm 4): on [breakpoints[s], breakpoints[s+1])
        L(α) = log f_{Q,D}(α) with Q = segment_Q[s], D = segment_D[s]; ``breakpoints[0] = 0``.
        Empty when L ≡ 0.  Built on first access, together with the tables of the pairs that
        can attain the maximum (as are :meth:`piecewise` and :meth:`per_pair`); a fresh object
        answers :meth:`exact` without building them.
    is_zero : bool
        Theorem 6: all rows identical, L ≡ 0.
    is_identity : bool
        Some two rows have disjoint supports, so L(α) = α: with S the support of q, Q = 1 and D = 0
        in eq. (24).  Theorem 7's condition q_i = 1, d_i = 0 is the case S = {i}; disjoint supports
        are also necessary (beyond the paper: L(α) = α at one α > 0 forces Q = 1, D = 0).

    Raises
    ------
    InvalidModelError
        If `P` is not a square stochastic matrix (see :class:`policyopt.models.markov.MarkovChain`).

    Notes
    -----
    Three evaluations are provided and agree to ~1e-12 (tests: 1e-9): :meth:`exact`
    (Theorem 5 / Algorithm 1), :meth:`piecewise` (Theorems 8–10 / Algorithms 2, 4, 5, binary
    search) and :meth:`lp` (the linear-fractional program (19)–(21) by Charnes–Cooper,
    solved by HiGHS; slow, for checks).  :meth:`per_pair` is Algorithm 3.  Remark 1:
    0 ≤ L(α) ≤ α; L is non-decreasing.

    References
    ----------
    Cao et al. (2019): eqs. (18)–(25), Theorems 5–10, Corollaries 2–3, Algorithms 1–5, Example 4.

    Examples
    --------
    >>> L = LossFunction([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]])
    >>> round(float(L.piecewise(40.0)), 12) == round(float(np.log(5.0)), 12)
    True
    """

    def __init__(self, P, name: str = "P"):
        self._name = name
        self.P = validate_transition_matrix(P, name)
        self.is_zero = bool(np.all(self.P == self.P[0]))  # Theorem 6: no pair has some q_k > d_k
        # Theorem 7, generalised: two rows with disjoint supports (S = supp q gives Q = 1, D = 0); the
        # id i·n + j of one such ordered pair, or None
        self._disjoint_pair = _disjoint_pair(self.P)
        self.is_identity = self._disjoint_pair is not None
        self._pairs = None
        # Built on first use: the pair bounds (one O(n³) pass, see _PairBounds) for a single
        # L(α), and Algorithm 2's tables plus the envelope (Algorithm 4) for everything else.
        self._bounds_cache = None
        self._env = None
        self._scalar_fn = None  # scalar_piecewise's plain-float evaluator, built on first use
        self._range = None  # envelope of the pairs that can attain L on [0, cap] (see restrict)

    @property
    def _bounds(self) -> _PairBounds:
        if self._bounds_cache is None:
            self._bounds_cache = _PairBounds(self.P)
        return self._bounds_cache

    def _built(self) -> dict:
        """Algorithm 2's tables of the chain-vertex pairs, the candidate rows and the envelope."""
        if self._env is None:
            env = {}
            n = self.P.shape[0]
            rel = None
            if self._disjoint_pair is not None:  # L(α) = α: one pair's sub-function (Q = 1, D = 0) is the envelope
                rel = np.array([self._disjoint_pair])  # (every other pair's φ_p ≤ Σ_k q_k = 1 = this pair's φ)
                env["zero_cand"] = None  # formed over all pairs when supremum() asks for it
            elif n >= _PRUNE_N:  # bound and prune the pairs on a grid of λ first (tpl_prune), no sorting
                rel = prune_pairs(self.P, _scan_list)
                if rel is not None:
                    rel = np.unique(_scan_list(self.P, rel // n, rel % n)[2])
                    env["zero_cand"] = None  # formed over all pairs when supremum() asks for it
            if rel is None:
                rel, env["zero_cand"] = _scan_pairs(self.P)
            # Algorithm 2's tables, only for the pairs that own a vertex of the candidate chain (the
            # others never attain the maximum of eq. 24 at any α; see _upper_chain); all pairs: `pairs`.
            env["tables"] = [t for p in rel.tolist() if (t := _pair_table(self.P, p // n, p % n))]
            env["cand"] = self._candidate_rows(env["tables"])  # (Q, Q̄, D, D̄, Q − D) of eq. (25): qM, dM
            env.update(zip(("breakpoints", "seg"), _envelope(env["cand"])))
            self._env = env
        return self._env

    @property
    def _tables(self) -> list:
        return self._built()["tables"]

    @property
    def _cand(self) -> np.ndarray:
        return self._built()["cand"]

    @property
    def _zero_cand(self) -> np.ndarray:
        env = self._built()
        if env["zero_cand"] is None:
            env["zero_cand"] = _all_zero_prefixes(self.P)
        return env["zero_cand"]

    @property
    def _seg(self) -> np.ndarray:
        return self._built()["seg"]

    @property
    def breakpoints(self) -> np.ndarray:
        """Start of each segment of the piecewise L (Algorithm 4), shape (m,), nats; built on first use."""
        return self._built()["breakpoints"]

    @property
    def segment_Q(self) -> np.ndarray:
        """q⁺ of the sub-function of each segment (eq. 25), shape (m,)."""
        env = self._built()
        return env["cand"][env["seg"], 0] if env["seg"].size else np.zeros(0)

    @property
    def segment_D(self) -> np.ndarray:
        """d⁺ of the sub-function of each segment (eq. 25), shape (m,)."""
        env = self._built()
        return env["cand"][env["seg"], 2] if env["seg"].size else np.zeros(0)

    def restrict(self, alpha_max: float) -> "LossFunction":
        """Declare that L will be evaluated on [0, `alpha_max`] by the recursions (a speed hint).

        Until the full envelope is built (by :meth:`piecewise`, :meth:`per_pair` or the envelope
        attributes), :func:`leakage` and the allocators evaluate L with the envelope of only the
        row pairs that can attain L(α) for some α ≤ `alpha_max` (two O(n³) passes without sorting
        select them; see ``_range_pairs``), which has the same values there.  Where that would
        keep many pairs (e^{L(alpha_max)} may exceed 4, or more than 2 % of the pairs survive), the
        full envelope is built instead.  A later α beyond the range builds the full envelope, so the
        hint never changes a value of L.  (The proven rounding margin of :func:`leakage_upper` counts
        the sub-functions actually evaluated, so it usually shrinks after the hint and may differ by a
        rounding-size amount either way.)

        Parameters
        ----------
        alpha_max : float
            Largest α (nats) expected, finite and ≥ 0.

        Returns
        -------
        LossFunction
            self.

        Raises
        ------
        InvalidInputError
            If `alpha_max` is negative, non-finite or not numeric.
        """
        a = float(_check_nonneg(alpha_max, "alpha_max", scalar=True))
        if self._env is None and not (self.is_identity or self.is_zero):
            if self._range is None or self._range.cap < a:
                self._range = _RangeEnvelope.build(self, a)
                if self._range is None:
                    self._built()  # the range needs most pairs: the full envelope (Algorithm 4)
                self._scalar_fn = None
        return self

    @staticmethod
    def _candidate_rows(tables, unique: bool = True) -> np.ndarray:
        if not tables:
            return np.zeros((0, 5))
        cand = np.concatenate([np.stack([t.Q, t.Qc, t.D, t.Dc, np.cumsum(t.q - t.d)], axis=1) for t in tables])
        return np.unique(cand, axis=0) if unique else cand

    @property
    def pairs(self) -> list:
        """Algorithm 2's tables of every ordered pair with some q_k > d_k (built on first use)."""
        if self._pairs is None:
            n = self.P.shape[0]
            self._pairs = [t for i in range(n) for j in range(n) if i != j if (t := _pair_table(self.P, i, j))]
        return self._pairs

    def __repr__(self) -> str:
        return f"LossFunction(n_states={self.P.shape[0]}, n_segments={self.breakpoints.size})"

    # -- evaluations ----------------------------------------------------------------------------
    def _alpha(self, alpha, name="tpl_level"):
        return _check_nonneg(alpha, name)

    def _finish(self, alpha, value):
        out = np.clip(value, 0.0, alpha)  # Remark 1: 0 ≤ L(α) ≤ α
        if self.is_identity:
            out = np.array(alpha, dtype=float, copy=True)  # Theorem 7: L(α) = α
        return float(out) if np.ndim(out) == 0 else out

    def exact(self, alpha):
        """L(α) by Theorem 5 / Algorithm 1, one linear-fractional program per row pair.

        Parameters
        ----------
        alpha : float or array_like
            Previous BPL α^B_{t−1} (or next FPL α^F_{t+1}), nats, finite and ≥ 0.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`
            L(α) in nats.

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.

        Notes
        -----
        Algorithm 1 (Cao et al. 2019) with a robust test: inequality (22) is checked in logs,
        log q_j − log d_j > log f(α) (log f formed as in eq. 24's log-space form), the index of largest ratio is never removed
        (Corollary 2 and the mediant argument in the module docstring), and the value is the
        largest over the index sets visited (all feasible for (19)–(21)).  Only the row pairs
        owning a vertex of the candidate chain (see ``_upper_chain``) are run: every other pair's
        value is at most theirs at every α, so the maximum of eq. (24) is unchanged.

        Before those tables exist (a fresh object: :meth:`piecewise`, :meth:`per_pair` and the
        envelope attributes build them), each α is evaluated directly, without building them:
        every ordered pair gets the bounds 1 + uT and (R − 1 + uRT)/(R − 1 + uT) on its value
        e^{L} (u = e^α − 1, T = Σ(q_k − d_k)⁺, R = max q_k/d_k; both follow from Q − D ≤ T and
        Q ≤ RD for every index set), and Theorem 5's maximum over the sorted prefixes is taken
        only for the pairs whose bound reaches the best value found so far.  Same result (the
        pruned pairs cannot attain the maximum), O(n³) without sorting instead of O(n³ log n).
        """
        if (type(alpha) is float and 0.0 < alpha < math.inf and self._env is None
                and not (self.is_identity or self.is_zero)):  # one α on a fresh object: the bounds' search only
            return min(max(self._bounds.loss(alpha), 0.0), alpha)  # Remark 1: 0 ≤ L(α) ≤ α
        a = self._alpha(alpha)
        flat = a.reshape(-1)
        best = np.zeros(flat.size)
        if self.is_identity or self.is_zero:  # Theorems 6–7: nothing to search
            return self._finish(a, best.reshape(a.shape))
        if self._env is None:  # no tables built: Theorem 5 directly on the pairs the bounds keep
            vals = {x: (self._bounds.loss(x) if x > 0 else 0.0) for x in set(flat.tolist())}
            best = np.array([vals[x] for x in flat.tolist()])
            return self._finish(a, best.reshape(a.shape))
        for t in self._tables:
            K = t.q.size
            with np.errstate(divide="ignore"):
                log_ratio = np.log(t.q) - np.log(t.d)  # +inf where d_j = 0
            m = np.full(flat.size, K)  # Algorithm 1 lines 3–4: start from all q_j > d_j
            val = _log_f(t.Q[m - 1], t.Qc[m - 1], t.D[m - 1], t.Dc[m - 1], flat)
            cur = val
            for _ in range(K):
                # Inequality (22), q_j/d_j > f(α), compared in logs: log f is formed in log space
                # (eq. 24), and products of subnormal entries with e^{−α} would underflow.
                keep = log_ratio[None, :] > cur[:, None]
                keep[:, 0] = True  # the largest ratio always satisfies (22)
                keep &= np.arange(K)[None, :] < m[:, None]
                new_m = np.maximum(keep.sum(axis=1), 1)  # Algorithm 1 line 11: drop the failing pairs
                if np.array_equal(new_m, m):
                    break
                m = new_m
                cur = _log_f(t.Q[m - 1], t.Qc[m - 1], t.D[m - 1], t.Dc[m - 1], flat)
                val = np.maximum(val, cur)
            best = np.maximum(best, val)  # eq. (24): max over pairs (Algorithm 1 line 13)
        return self._finish(a, best.reshape(a.shape))

    def per_pair(self, alpha):
        """L(α) by Algorithm 3: per-pair tables of Algorithm 2 and a binary search per pair.

        Parameters
        ----------
        alpha : float or array_like
            Nats, finite and ≥ 0.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`
            L(α) in nats.

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.

        Notes
        -----
        Algorithm 3 line 5 prints log[(qArr[k](e^α − 1) + 1)/(qArr[k](e^{α_{k−1}} − 1) + 1)];
        the denominator must be dArr[k](e^α − 1) + 1 (eq. 25), which is what is computed.
        The neighbouring sub-functions are also evaluated (every one is a feasible value), so
        rounding in the transition points cannot move the result.  As in :meth:`exact`, only
        the pairs owning a vertex of the candidate chain are searched.
        """
        a = self._alpha(alpha)
        flat = a.reshape(-1)
        best = np.zeros(flat.size)
        for t in self._tables:
            K = t.q.size
            asc = t.points[::-1]  # ascending transition points
            m = K - np.searchsorted(asc, flat, side="right")  # Theorem 9: prefix length in use
            for off in (-1, 0, 1):
                k = np.clip(m + off, 1, K) - 1
                best = np.maximum(best, _log_f(t.Q[k], t.Qc[k], t.D[k], t.Dc[k], flat))  # eq. (25)
        return self._finish(a, best.reshape(a.shape))

    def piecewise(self, alpha):
        """L(α) by Algorithm 5: binary search in the precomputed piecewise function.

        Parameters
        ----------
        alpha : float or array_like
            Nats, finite and ≥ 0.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`
            L(α) in nats; O(log m) per value after the one-off construction.

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.
        """
        a = self._alpha(alpha)
        if self.breakpoints.size == 0:  # Theorem 6 (Algorithm 5 line 1)
            return self._finish(a, np.zeros(a.shape))
        flat = a.reshape(-1)
        s = np.searchsorted(self.breakpoints, flat, side="right") - 1  # Algorithm 5 line 2
        best = np.zeros(flat.size)
        C = self._cand
        for off in (-1, 0, 1):  # neighbours too: robust at the breakpoints
            c = self._seg[np.clip(s + off, 0, self._seg.size - 1)]
            best = np.maximum(best, _log_f(C[c, 0], C[c, 1], C[c, 2], C[c, 3], flat))  # Algorithm 5 line 3
        return self._finish(a, best.reshape(a.shape))

    __call__ = piecewise

    def lp(self, alpha):
        """L(α) from the linear-fractional program (19)–(21), by Charnes–Cooper and HiGHS.

        For each ordered pair (q, d) of distinct rows: maximise q·y subject to d·y = 1,
        e^{−α} y_j − y_k ≤ 0 for all j ≠ k, y ≥ 0 (y = x / (d·x); the open bounds (21) are
        immaterial because the ratio is scale invariant).  The optimum is re-evaluated as
        log(q·x) − log(d·x) at the solution clipped into the feasible set and at the solution
        snapped to the two levels {m, m e^α} (Lemma 1); the larger is kept.

        Parameters
        ----------
        alpha : float or array_like
            Nats, finite and ≥ 0.  Agrees with :meth:`exact` to ~1e-9 for α ≲ 20 and entries of
            `P` that are 0 or ≳ 1e-6: HiGHS drops matrix coefficients below 1e-9 (e^{−α} and
            tiny entries of d), which scipy does not let us change.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.
        RuntimeError
            If HiGHS does not report an optimal solution.
        """
        from scipy.optimize import linprog

        a = self._alpha(alpha)
        flat = a.reshape(-1)
        P = self.P
        n = P.shape[0]
        jj, kk = np.nonzero(~np.eye(n, dtype=bool))
        best = np.zeros(flat.size)
        opts = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
        for ia, al in enumerate(flat):
            A_ub = np.zeros((jj.size, n))
            A_ub[np.arange(jj.size), jj] = np.exp(-al)  # (20): x_j ≤ e^{α} x_k
            A_ub[np.arange(jj.size), kk] -= 1.0
            for i in range(n):
                for j in range(n):
                    if i == j:
                        continue
                    q, d = P[i], P[j]
                    kw = dict(A_ub=A_ub, b_ub=np.zeros(jj.size), A_eq=d[None, :], b_eq=[1.0],
                              bounds=[(0, None)] * n, method="highs")
                    res = linprog(-q, options=opts, **kw)
                    if res.status != 0:  # tight tolerances occasionally stall HiGHS: retry with defaults
                        res = linprog(-q, **kw)
                    if res.status != 0:
                        raise RuntimeError(f"HiGHS failed on rows ({i}, {j}) at alpha={al!r}: {res.message}")
                    x = np.maximum(res.x, 0.0)
                    x = np.clip(x, x.max() * np.exp(-al), None)  # restore (20) exactly
                    # The LP's vertex, snapped to the two levels {m, m e^α} of Lemma 1 / eq. (34)
                    # so that its objective is evaluated without the solver's tolerances.
                    top = np.log(x) > np.log(x.max()) - al / 2
                    v = np.where(top, 1.0, np.exp(-al))
                    best[ia] = max(best[ia], np.log(q @ x) - np.log(d @ x),  # objective (19)
                                   np.log(q @ v) - np.log(d @ v))
        return self._finish(a, best.reshape(a.shape))

    def candidates(self):
        """All coefficient pairs (q, d) of eq. (25) over all row pairs, shape (C, 2) (Algorithm 2's qM, dM)."""
        return self._candidate_rows(self.pairs)[:, [0, 2]].copy()


# ----------------------------------------------------------------------------------------
# leakage over time
# ----------------------------------------------------------------------------------------


def _as_loss(P, name: str) -> LossFunction | None:
    if P is None or isinstance(P, LossFunction):
        return P
    return LossFunction(P, name)


def _as_users(P, name: str) -> list:
    """One user (None, a matrix or a LossFunction) or a list of them."""
    if P is None or isinstance(P, LossFunction):
        return [P]
    if isinstance(P, (list, tuple)) and P and (
        P[0] is None or isinstance(P[0], LossFunction) or np.ndim(P[0]) == 2
    ):
        return [_as_loss(p, f"{name}[{u}]") for u, p in enumerate(P)]
    return [_as_loss(P, name)]


def paired_users(P_B, P_F) -> tuple[list, list]:
    """Loss functions of each user for the backward and forward correlations, paired up.

    Parameters
    ----------
    P_B, P_F : None, array_like (n, n), LossFunction, or list of these
        A list is a population; a single ``None`` on one side is repeated for every user of
        the other side (that correlation is unknown to the adversary, L ≡ 0).

    Returns
    -------
    (backward, forward) : two lists of LossFunction or None, of equal length

    Raises
    ------
    InvalidInputError
        If an empty list is given, or the two lists have different lengths.
    InvalidModelError
        If a matrix is not square and row-stochastic.
    """
    for P, name in ((P_B, "P_B"), (P_F, "P_F")):
        if isinstance(P, (list, tuple)) and len(P) == 0:
            raise InvalidInputError(f"`{name}` must be a matrix, a LossFunction, None or a non-empty list of them, got {P!r}")
    ub, uf = _as_users(P_B, "P_B"), _as_users(P_F, "P_F")
    if len(ub) != len(uf):
        if len(ub) == 1 and ub[0] is None:
            ub = ub * len(uf)
        elif len(uf) == 1 and uf[0] is None:
            uf = uf * len(ub)
        else:
            raise InvalidInputError(f"`P_B` and `P_F` must list the same users, got {len(ub)} and {len(uf)} matrices")
    return ub, uf


@dataclass(frozen=True)
class TemporalLeakage:
    """BPL, FPL and TPL at each step of a finite release t = 1..T (eqs. 11, 13, 15).

    Attributes
    ----------
    bpl, fpl, tpl : numpy.ndarray, shape (T,)
        Maximum over users of BPL_t, FPL_t and TPL_t = BPL_t + FPL_t − ε_t (eq. 10), nats.
        ``tpl`` is definition (3), max_i TPL_i; eq. (11) as printed (max BPL + max FPL − ε)
        is an upper bound of it.
    budgets : numpy.ndarray, shape (T,)
        ε_t = PL_0(M^t), nats.
    bpl_users, fpl_users : numpy.ndarray, shape (U, T)
        Per-user values.
    margin : float
        0 for the computed values of :func:`leakage`; for :func:`leakage_upper` the largest amount
        (nats) added to a BPL/FPL value before rounding up, (T − 1)·c with c from
        :func:`leakage_rounding_error`.
    """

    bpl: np.ndarray
    fpl: np.ndarray
    tpl: np.ndarray
    budgets: np.ndarray
    bpl_users: np.ndarray
    fpl_users: np.ndarray
    margin: float = 0.0

    @property
    def tpl_users(self) -> np.ndarray:
        """Per-user TPL_t = BPL_t + FPL_t − ε_t (eq. 10), shape (U, T), nats."""
        return self.bpl_users + self.fpl_users - self.budgets[None, :]

    @property
    def tpl_level(self) -> float:
        """max_t TPL_t: the smallest α for which the release is α-DP_T (Definition 8), nats."""
        return float(np.max(self.tpl))

    def __str__(self) -> str:
        """The text ``policyopt tpl`` prints (:func:`format_leakage`; no model, supremum or time lines)."""
        return format_leakage(self)

    def _repr_html_(self) -> str:
        """A small HTML table for notebooks: max TPL, then t, ε_t, BPL, FPL, TPL (privacy rounded up)."""
        from html import escape

        T = self.budgets.size
        steps = sorted(set(list(range(min(T, 5))) + list(range(max(0, T - 3), T))))
        head = "".join(f"<th>{h}</th>" for h in ("t", "ε_t", "BPL", "FPL", "TPL"))
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(v)}</td>" for v in (
                str(t + 1), fmt_value(float(self.budgets[t])), fmt_upper(self.bpl[t]), fmt_upper(self.fpl[t]),
                fmt_upper(self.tpl[t]))) + "</tr>"
            for t in steps
        )
        caption = f"max TPL = {fmt_upper(self.tpl_level)} nats over {T} steps (nats; first and last steps shown)"
        return f"<table class='policyopt-leakage'><caption>{escape(caption)}</caption><tr>{head}</tr>{body}</table>"


def format_leakage(res: TemporalLeakage, *, source: str | None = None, supremum: dict | None = None,
                   wall_time_s: float | None = None) -> str:
    """The text of ``policyopt tpl`` for a :class:`TemporalLeakage`; privacy numbers rounded up.

    Parameters
    ----------
    res : TemporalLeakage
        The leakage of a release.
    source : str, optional
        Where P_B and P_F come from (the ``model`` line; omitted when ``None``).
    supremum : dict, optional
        ``bpl``, ``fpl``, ``tpl`` suprema (numbers or ``"divergent"``) for the constant budget max ε_t
        (Theorem 11 of Cao et al. (2019)); the ``supremum`` line is omitted when ``None``.
    wall_time_s : float, optional
        Seconds, for the last line (omitted when ``None``).

    Returns
    -------
    str
        One line per item and the first five and last three steps of the table.
    """
    budgets = res.budgets
    eps_sup = float(np.max(budgets))
    lines = ["policyopt tpl: temporal privacy leakage (Cao et al. 2019, eqs. (11), (13), (15); nats)"]
    if source is not None:
        lines.append(f"model    : {source}")
    lines += [
        f"steps    : {budgets.size}, budgets from {fmt_value(float(budgets.min()))} to {fmt_value(eps_sup)} nats",
        f"max TPL  : {fmt_upper(res.tpl_level)} nats (the release is α-DP_T for α ≥ this)",
    ]
    if supremum is not None:
        show = lambda v: v if isinstance(v, str) else fmt_upper(v)  # noqa: E731
        lines.append(f"supremum : BPL {show(supremum['bpl'])}, FPL {show(supremum['fpl'])}, TPL {show(supremum['tpl'])} "
                     f"(Theorem 11, constant budget {fmt_value(eps_sup)})")
    lines.append("   t        ε_t        BPL        FPL        TPL")
    T = budgets.size
    previous = -1
    for t in sorted(set(list(range(min(T, 5))) + list(range(max(0, T - 3), T)))):
        if t > previous + 1:
            lines.append(f"{'…':>4} ({t - previous - 1} steps not shown; all T in --json)")
        previous = t
        lines.append(f"{t + 1:>4} {budgets[t]:>10.6g} {fmt_upper(res.bpl[t]):>10} {fmt_upper(res.fpl[t]):>10} {fmt_upper(res.tpl[t]):>10}")
    if wall_time_s is not None:
        lines.append(f"wall time: {wall_time_s:.3f} s")
    return "\n".join(lines)


def _logaddexp(x: float, y: float) -> float:
    """numpy.logaddexp for Python floats (same formula, so the same rounding)."""
    if x == y:
        return x + 0.6931471805599453  # log 2
    t = x - y
    if t > 0:
        return x + math.log1p(math.exp(-t))
    return y + math.log1p(math.exp(t))


def scalar_piecewise(loss: LossFunction):
    """A plain-float version of LossFunction.piecewise for one α ≥ 0 (the recursions' fast path).

    Built once per LossFunction and cached on it.  After :meth:`LossFunction.restrict` and while
    the full envelope is not built, it evaluates the envelope of the pairs that can attain L on the
    declared range (same values there), and builds the full envelope on the first α beyond it."""
    if loss._scalar_fn is None:
        loss._scalar_fn = _ScalarLoss(loss)
    return loss._scalar_fn


class _ScalarLoss:
    """Callable L(a) for plain floats: Algorithm 5 on the full or on a range-limited envelope."""

    def __init__(self, loss: LossFunction):
        self.loss = loss
        self.cap = math.inf
        self.cand = None
        if loss.is_identity:
            self.f = lambda a: a
        elif loss._env is None and loss._range is not None:
            self.cap, self.cand = loss._range.cap, loss._range.cand
            self.f = _scalar_envelope(loss._range.breakpoints, loss._range.cand, loss._range.seg)
        else:
            self.f = self._full()

    def _full(self):
        loss = self.loss
        self.cap, self.cand = math.inf, None
        return _scalar_envelope(loss.breakpoints, loss._cand, loss._seg)

    def __call__(self, a: float) -> float:
        if a > self.cap:  # beyond the declared range: the full envelope from now on
            self.f = self._full()
        return self.f(a)


def _scalar_envelope(breakpoints: np.ndarray, cand: np.ndarray, seg: np.ndarray):
    if breakpoints.size == 0:
        return lambda a: 0.0
    bp = breakpoints.tolist()
    with np.errstate(divide="ignore"):
        logs = np.log(cand[seg][:, :4]).tolist()  # log Q, log Q̄, log D, log D̄ per segment
    last = len(logs) - 1
    exp, log1p, log2 = math.exp, math.log1p, 0.6931471805599453

    def f(a: float) -> float:
        """L(a) by Algorithm 5 with plain floats (same formula as LossFunction.piecewise)."""
        s = bisect_right(bp, a) - 1  # Algorithm 5 line 2
        best = 0.0
        for k in range(s - 1 if s > 0 else 0, (s + 1 if s < last else last) + 1):  # neighbours too, as piecewise
            lQ, lQc, lD, lDc = logs[k]
            # eq. (24), Algorithm 5 line 3: logaddexp(lQ, lQc − a) − logaddexp(lD, lDc − a), written out as
            # _logaddexp (same operations, so the same rounding)
            y = lQc - a
            num = lQ + log2 if lQ == y else (lQ + log1p(exp(y - lQ)) if lQ > y else y + log1p(exp(lQ - y)))
            y = lDc - a
            den = lD + log2 if lD == y else (lD + log1p(exp(y - lD)) if lD > y else y + log1p(exp(lD - y)))
            v = num - den
            if v > best:
                best = v
        return a if best > a else best  # Remark 1

    return f


def _run(loss: LossFunction | None, budgets: np.ndarray, method: str) -> np.ndarray:
    """α_t = L(α_{t−1}) + ε_t, α_1 = ε_1 (eq. 13; eq. 15 on the reversed budgets)."""
    if loss is None or method == "piecewise":
        f = (lambda a: 0.0) if loss is None else scalar_piecewise(loss)
        out = []
        prev = 0.0
        for t, eps in enumerate(budgets.tolist()):
            prev = (f(prev) if t else 0.0) + eps
            out.append(prev)
        return np.array(out, dtype=float)
    out = np.empty(budgets.size)
    prev = 0.0
    for t, eps in enumerate(budgets):
        if loss is None or t == 0:
            inc = 0.0
        else:
            inc = loss.exact(prev) if method == "exact" else loss.piecewise(prev)
        prev = out[t] = inc + eps
    return out


def leakage(P_B, P_F, budgets, *, method: str = "piecewise") -> TemporalLeakage:
    """BPL, FPL and TPL of a release with budgets ε_1..ε_T (eqs. 10–15).

    Parameters
    ----------
    P_B, P_F : None, array_like (n, n), LossFunction, or list of these
        Backward / forward transition matrix of each user (a list = a population; the
        lengths must agree when both are lists).  None means that correlation is unknown
        to the adversary (L ≡ 0).
    budgets : array_like, shape (T,)
        ε_t ≥ 0 of the ε_t-DP mechanism M^t, nats.
    method : {"piecewise", "exact"}
        Evaluation of L (Algorithm 5 or Algorithm 1).

    Returns
    -------
    TemporalLeakage
        BPL_1 = ε_1, BPL_t = L_B(BPL_{t−1}) + ε_t (13); FPL_T = ε_T, FPL_t = L_F(FPL_{t+1}) + ε_t
        (15); TPL_t = BPL_t + FPL_t − ε_t (10), each maximised over users (7), (9), (3).

    Raises
    ------
    InvalidInputError
        If `budgets` is empty, not 1-D, negative or non-finite; if `method` is unknown; if
        the two populations have different sizes.
    InvalidModelError
        If a matrix is not square stochastic.

    References
    ----------
    Cao et al. (2019): eqs. (3), (7), (9)–(15), Examples 2–3.
    """
    if method not in ("piecewise", "exact"):
        raise InvalidInputError(f"`method` must be 'piecewise' or 'exact', got {method!r}")
    eps = _check_budgets(budgets)
    ub, uf = paired_users(P_B, P_F)
    bpl_u = np.array([_run(lb, eps, method) for lb in ub])  # eq. (13)
    fpl_u = np.array([_run(lf, eps[::-1], method)[::-1] for lf in uf])  # eq. (15)
    tpl_u = bpl_u + fpl_u - eps[None, :]  # eq. (10)
    return TemporalLeakage(
        bpl=bpl_u.max(axis=0), fpl=fpl_u.max(axis=0), tpl=tpl_u.max(axis=0),  # eqs. (7), (9), (3)
        budgets=eps, bpl_users=bpl_u, fpl_users=fpl_u,
    )


def _log_magnitude(loss: LossFunction | None) -> tuple[float, int]:
    """(Λ, n): the largest |ln Q| + |ln Q̄| + |ln D| + |ln D̄| over L's candidate sub-functions
    (finite logs only) and the number of states; (0, 0) for L ≡ 0."""
    if loss is None:
        return 0.0, 0
    ev = scalar_piecewise(loss)
    cand = loss._cand if ev.cand is None else ev.cand  # the sub-functions the recursions evaluated
    if cand.shape[0] == 0:
        return 0.0, loss.P.shape[0]
    with np.errstate(divide="ignore"):
        logs = np.abs(np.log(cand[:, :4]))
    logs[~np.isfinite(logs)] = 0.0
    return float(logs.sum(axis=1).max()), loss.P.shape[0]


def leakage_rounding_error(P_B, P_F, result: TemporalLeakage) -> float:
    """Bound c (nats) on the rounding error that one step of the recursions (13), (15) adds.

    The recursion (13) computes B̂_1 = ε_1 exactly and B̂_t = fl(L̂(B̂_{t−1}) + ε_t).  L is
    non-decreasing with slope ≤ 1 (each sub-function of eq. (24) has derivative
    (Q − D)e^α/((Q(e^α − 1) + 1)(D(e^α − 1) + 1)) ≤ 1), so
    ``|B̂_t − B_t| ≤ |B̂_{t−1} − B_{t−1}| + e_L + u·B_t``: after k steps the error is at most
    k·(e_L + u·B_max).  One evaluation of L in log space (Algorithm 5 with
    log(Q + Q̄e^{−α}) − log(D + D̄e^{−α})) errs by e_L ≤ u·(4α + 2Λ + 2n + 16), Λ the largest sum of
    the magnitudes of the four logarithms of a sub-function and n the number of states (the prefix
    sums Q, D of non-negative entries carry ≤ n·u relative error).  The bound returned doubles the
    constants and covers BPL and FPL at once:

        c = 2u·(6(B_max + F_max) + 4Λ + 4n + 40),

    maximised over users; BPL_t then errs by ≤ (t − 1)·c, FPL_t by ≤ (T − t)·c and
    TPL_t = BPL_t + FPL_t − ε_t by ≤ (T − 1)·c plus the rounding of that sum.  The envelope itself (which
    sub-function is evaluated where) is taken as exact: the three neighbouring segments are
    evaluated at every α (see :meth:`LossFunction.piecewise`).  Measured against a 60-digit mpmath
    evaluation (tests/test_outward_rounding.py) the actual error is below 1 % of this bound.

    Parameters
    ----------
    P_B, P_F
        As given to :func:`leakage`.
    result : TemporalLeakage
        Its output.

    Returns
    -------
    float
        c in nats per step.

    References
    ----------
    Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release under
    Temporal Correlations", IEEE TKDE, 2019, eqs. (13), (15), (24).
    """
    ub, uf = paired_users(P_B, P_F)
    lam, n = 0.0, 0
    for lf in list(ub) + list(uf):
        a, b = _log_magnitude(lf)
        lam, n = max(lam, a), max(n, b)
    top = float(np.max(result.bpl)) + float(np.max(result.fpl))
    return 2.0 * UNIT_ROUNDOFF * (6.0 * top + 4.0 * lam + 4.0 * n + 40.0)


def leakage_upper(P_B, P_F, budgets) -> TemporalLeakage:
    """:func:`leakage` with every BPL, FPL and TPL rounded outward: proven ≥ the exact recursion's value.

    With c = :func:`leakage_rounding_error`, BPL_t is raised by (t − 1)·c, FPL_t by (T − t)·c and
    TPL_t (per user) by (T − 1)·c plus the exact rounding errors of BPL_t + FPL_t − ε_t (TwoSum), each
    then by one float step towards +∞; values with nothing to add (BPL_1 = ε_1, FPL_T = ε_T, an
    exact TPL_1 for T = 1) stay unchanged.  ``margin`` holds the largest BPL/FPL raise,
    (T − 1)·c.  Use it for every reported leakage; use :func:`leakage` inside solvers.

    Parameters, Raises: as :func:`leakage` (method ``"piecewise"``).

    References
    ----------
    Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release under
    Temporal Correlations", IEEE TKDE, 2019, eqs. (10)–(15).
    """
    res = leakage(P_B, P_F, budgets)
    c = leakage_rounding_error(P_B, P_F, res)
    T = res.budgets.size
    steps = np.arange(T, dtype=float)
    eb, ef = c * steps, c * steps[::-1]

    def up(a, e):
        """a + e rounded one float step up where the margin e is positive (exact values stay)."""
        return np.where(e > 0, np.nextafter(a + e, np.inf), a)

    # TPL_t = BPL_t + FPL_t − ε_t per user, with the two roundings of this sum recovered exactly
    # (Knuth's TwoSum), so an exact sum (e.g. T = 1: ε + ε − ε) is not enlarged.
    s, r1 = _two_sum(res.bpl_users, res.fpl_users)
    d, r2 = _two_sum(s, -res.budgets[None, :])
    tpl_users = up(d, (eb + ef)[None, :] + np.abs(r1) + np.abs(r2))
    return TemporalLeakage(
        bpl=up(res.bpl, eb), fpl=up(res.fpl, ef), tpl=tpl_users.max(axis=0), budgets=res.budgets,
        bpl_users=up(res.bpl_users, eb[None, :]), fpl_users=up(res.fpl_users, ef[None, :]), margin=(T - 1) * c,
    )


def _two_sum(a, b):
    """(fl(a + b), exact rounding error), elementwise (Knuth's TwoSum, exact in binary floating point)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def window_leakage(result: TemporalLeakage, w: int) -> np.ndarray:
    """TPL of every window of w consecutive releases (Theorem 3, eq. 16).

    Parameters
    ----------
    result : TemporalLeakage
        Output of :func:`leakage`.
    w : int
        Window length 1 ≤ w ≤ T (steps).  w = 1 is event level (TPL_t), w = T user level.

    Returns
    -------
    numpy.ndarray, shape (T − w + 1,)
        Entry t (0-based) bounds the leakage of {M^{t+1}, ..., M^{t+w}}, maximised over
        users: α^B_t + α^F_{t+j} + Σ_{k=t+1}^{t+j−1} ε_k with j = w − 1 ≥ 1 (eq. 16), and
        TPL_t for j = 0.  Its maximum is the w-event level; for w = T it equals Σ ε_t
        (Corollary 1).

    Raises
    ------
    InvalidInputError
        If `w` is not an integer in [1, T].

    References
    ----------
    Cao et al. (2019): Definition 9, Theorem 3 (eq. 16), Corollary 1, Table 2.
    """
    T = result.budgets.size
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 1 <= w <= T:
        raise InvalidInputError(f"`w` must be an integer window length in [1, T={T}] (steps), got {fmt(w)}")
    if w == 1:
        return result.tpl.copy()
    j = w - 1
    csum = np.concatenate([[0.0], np.cumsum(result.budgets)])
    starts = np.arange(T - j)
    inner = csum[starts + j] - csum[starts + 1]  # Σ_{k=t+1}^{t+j−1} ε_k
    per_user = result.bpl_users[:, starts] + result.fpl_users[:, starts + j] + inner[None, :]  # eq. (16)
    return per_user.max(axis=0)


# ----------------------------------------------------------------------------------------
# supremum over time (Theorem 11, Algorithm 6)
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Supremum:
    """Supremum over time of BPL (or FPL) under a constant budget ε (Theorem 11).

    Attributes
    ----------
    status : str
        ``"finite"`` or ``"divergent"`` (BPL_t → ∞).
    value : float or None
        The supremum in nats; None when divergent.
    case : int
        Case of Theorem 11 (1: d ≠ 0; 2: d = 0, q < 1, ε < log(1/q); 3: d = 0, q < 1,
        ε ≥ log(1/q); 4: d = 0, q = 1), or 0 when L ≡ 0 (Theorem 6: the value is ε).
    q, d : float or None
        The coefficients q⁺, d⁺ (eq. 25) that attain it (Algorithm 6); None for case 0.
    """

    status: str
    value: float | None
    case: int
    q: float | None
    d: float | None


def _fixed_point(Q, Qc, D, Dc, eps):
    """log F for the fixed point α = log f_{Q,D}(α) + ε, elementwise; inf where it diverges.

    α = log[(Q(F − 1) + 1)/(D(F − 1) + 1)] + ε with F = e^α gives F(D(F − 1) + 1) = e^ε(Q(F − 1) + 1):
        D F² − (Q e^ε + D − 1) F − (1 − Q) e^ε = 0            (corrected Appendix K, eq. 39).
    With F = e^ε G and x = e^{−ε}:  D G² − b G − (1 − Q) x = 0, b = Q − (1 − D) x, whose
    positive root is G = (b + s)/(2D) = 2(1 − Q)x/(s − b), s = √(b² + 4D(1 − Q)x) (Theorem 11,
    case 1; the second form avoids cancellation when b < 0).  For D = 0: G = (1 − Q)x/(x − Q)
    = (1 − Q)/(1 − Q e^ε), finite iff Q e^ε < 1 (case 2; strict).
    """
    x = np.exp(-eps)
    b = Q - Dc * x
    s = np.sqrt(b * b + 4.0 * D * Qc * x)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log G in logs: D may be tiny, so (b + s)/(2D) itself may overflow
        logG1 = np.where(b >= 0, np.log(b + s) - np.log(2.0 * np.where(D > 0, D, 1.0)),
                         np.log(2.0 * Qc) - eps - np.log(s - b))
        # D = 0: log G = log(1 − Q) − log(1 − Q e^ε), with log(1 − Q e^ε) = log(−expm1(ε + log Q))
        z = eps + np.log(Q)
        logG0 = np.where(z < 0, np.log(Qc) - np.log(-np.expm1(np.minimum(z, -1e-300))), np.inf)
    return eps + np.where(D > 0, logG1, logG0)


def supremum(P, epsilon) -> Supremum:
    """sup_t BPL_t (or FPL_t) when every M^t is ε-DP (Theorem 11, Algorithm 6).

    Parameters
    ----------
    P : array_like (n, n) or LossFunction
        ``P_B`` (for BPL) or ``P_F`` (for FPL).
    epsilon : float
        Constant per-step budget ε ≥ 0, nats.

    Returns
    -------
    Supremum
        ``status="divergent", value=None`` if some coefficient pair has d = 0 and
        ε ≥ log(1/q) (cases 3–4); otherwise the largest fixed point over all coefficient
        pairs of Algorithm 2 (Algorithm 6), which is the limit of the recursion (13).
        ε = 0 gives 0 (L(0) = 0), also in case 4.

    Raises
    ------
    InvalidInputError
        If `epsilon` is not a single finite non-negative number.
    InvalidModelError
        If `P` is not a square stochastic matrix.

    Notes
    -----
    Each sub-function h_c(α) = log f_c(α) + ε − α is positive at 0 and has one positive
    root α_c, so L(α) + ε − α > 0 exactly for α < max_c α_c: the increasing sequence (13)
    converges to max_c α_c.  See :func:`_fixed_point` for the closed forms and the
    correction to eq. (39).  Theorem 11's case 2 is printed with ε ≤ log(1/q); equality
    diverges.

    References
    ----------
    Cao et al. (2019): Theorem 11, Appendix K (eq. 39), Algorithm 6, Example 5.
    """
    eps = float(_check_nonneg(epsilon, "epsilon", scalar=True))
    loss = P if isinstance(P, LossFunction) else LossFunction(P, "P")
    C = loss._cand
    if C.shape[0] == 0:
        return Supremum("finite", eps, 0, None, None)  # Theorem 6: BPL_t = ε
    Q, Qc, D, Dc = C[:, 0], C[:, 1], C[:, 2], C[:, 3]
    if eps == 0.0:
        k = int(np.argmax(Q - D))
        case = 1 if D[k] > 0 else (4 if Qc[k] == 0.0 else 2)
        return Supremum("finite", 0.0, case, float(Q[k]), float(D[k]))
    # Divergence (cases 3–4) is decided over every D = 0 candidate of every pair; the report is
    # the smallest (Q, Q̄), as argmax over the sorted candidate list would pick.
    Z = np.concatenate([C[D == 0.0][:, :2], loss._zero_cand])
    with np.errstate(divide="ignore"):
        Z = Z[eps + np.log(Z[:, 0]) >= 0]
    if Z.shape[0]:
        zq, zqc = Z[np.lexsort((Z[:, 1], Z[:, 0]))[0]]
        return Supremum("divergent", None, 4 if zqc == 0.0 else 3, float(zq), 0.0)
    # The finite supremum max_c α_c is attained where L(α) = log f_c(α): by a vertex of the
    # candidate chain, all of which are in `_cand`.
    vals = _fixed_point(Q, Qc, D, Dc, eps)
    k = int(np.argmax(vals))  # Algorithm 6
    q, d = float(Q[k]), float(D[k])
    if np.isinf(vals[k]):
        return Supremum("divergent", None, 4 if Qc[k] == 0.0 else 3, q, d)
    return Supremum("finite", float(vals[k]), 1 if d > 0 else 2, q, d)


def supremum_upper(P, epsilon) -> float | None:
    """:func:`supremum`'s value rounded outward: proven ≥ the exact sup_t BPL_t (Theorem 11).

    The supremum α* solves α* = log f(α*) + ε for the attaining sub-function f = f_{q,d} of eq. (24).
    A perturbation δ of log f (relative errors ≤ n·u of the prefix sums q, d, and the few roundings
    of the closed form of :func:`_fixed_point`) moves the fixed point by δ/(1 − ℓ), where
    ℓ = (q − d)e^{α*}/((q(e^{α*} − 1) + 1)(d(e^{α*} − 1) + 1)) < 1 is the slope of log f at α*.
    The value is raised by

        E = 32·(n + 8)·u·(1 + α* + ε)/(1 − ℓ)

    (n states, u = 2⁻⁵³) and one float step; E grows without bound as the case-2/3 divergence
    threshold ε → log(1/q) is approached, as the true conditioning does.

    Parameters
    ----------
    P : array_like (n, n) or LossFunction
    epsilon : float
        Constant budget ε ≥ 0 (nats).

    Returns
    -------
    float or None
        The rounded-up supremum (nats), ``None`` when it diverges.

    Raises
    ------
    InvalidInputError, InvalidModelError
        As :func:`supremum`.

    References
    ----------
    Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release under
    Temporal Correlations", IEEE TKDE, 2019, Theorem 11, Algorithm 6.
    """
    loss = P if isinstance(P, LossFunction) else LossFunction(P, "P")
    sup = supremum(loss, epsilon)
    if sup.value is None:
        return None
    a, eps = sup.value, float(epsilon)
    if sup.case == 0 or a == 0.0:
        return a  # L ≡ 0: the supremum is ε itself; ε = 0: exactly 0
    n = loss.P.shape[0]
    q, d = sup.q, sup.d
    with np.errstate(over="ignore"):
        em1 = math.expm1(min(a, 700.0))
    # 1 − ℓ at α* = [(q(e^α − 1) + 1)(d(e^α − 1) + 1) − (q − d)e^α] / [(q(e^α − 1) + 1)(d(e^α − 1) + 1)]
    num = (q * em1 + 1.0) * (d * em1 + 1.0)
    # (less 4u, so that rounding in this difference can only enlarge E)
    one_minus_slope = (num - (q - d) * (em1 + 1.0)) / num - 4.0 * UNIT_ROUNDOFF if math.isfinite(num) and num > 0 else 0.0
    if not one_minus_slope > 0:
        return math.inf
    E = 32.0 * (n + 8) * UNIT_ROUNDOFF * (1.0 + a + eps) / one_minus_slope
    return math.nextafter(a + E, math.inf)
