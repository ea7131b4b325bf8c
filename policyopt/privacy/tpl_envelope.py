"""The geometry behind the privacy loss function L(α): row pairs, their sorted prefixes and the upper envelope.

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019 (cited below as *Cao et al. (2019)*).  For an ordered pair (q, d) of rows of a transition matrix, Theorem 5 takes the
index sets of eq. (24) among the prefixes of the likelihood ratios q_k/d_k sorted in decreasing order; Algorithm 2
tabulates them (:func:`pair_table`), and Algorithm 4 builds the upper envelope of the sub-functions
log f_{Q,D}(α) = log(Q + Q̄e^{−α}) − log(D + D̄e^{−α}) (:func:`envelope`).  Beyond the paper, the prefixes of all
pairs are first reduced to the candidate chain (the upper hull of the points (D, Q − D), :func:`scan_list`,
:func:`scan_pairs`): only its vertices can attain the maximum of eq. (24) at any α.  :class:`PairBounds` answers a
single L(α) without sorting (bounds by total variation, Dinkelbach's test).  The function itself is
:class:`policyopt.privacy.tpl_loss.LossFunction`.

Paper errors and pitfalls handled here
--------------------------------------
* Algorithm 2, line 11, prints the transition point as log[(q_i − d_i)/(Q d_i − D q_i)]; the
  "+1" of Theorem 9 (and of the paper's own example value 1.47 = log(1 + 0.1/0.03)) is missing.
  The code uses α_i = log(1 + (q_i − d_i)/(Q d_i − D q_i)) (Theorem 9 / Appendix I).
* Algorithm 2's text says "Line 7 results in q = [0.3, 0.2, 0] and q = [0, 0.1, 0]"; the second
  vector is d.
* Algorithm 4 needs a finite right end a_m of the domain.  :func:`envelope` instead builds
  the upper envelope on the whole half-line [0, ∞) by a sweep that uses the fact behind
  Theorem 10 (two sub-functions cross at most once for α > 0, at u = e^α − 1 =
  (Q' + D − Q − D')/(Q D' − Q' D), Algorithm 4 line 4).
* Subnormal entries (not in the paper): with d_k ≈ 1e-318 the ratio q_k/d_k overflows to inf and
  ties with a true d_k = 0, and products of entries with e^{−α} underflow; sorting or testing in
  that arithmetic loses the best index set (the envelope printed 731.24 for a true L(741) =
  740.10).  Ratios are sorted by (d_k/q_k)·2^600, which is exact to 2^−53 for all entries,
  inequality (22) is tested in logs, and Theorem 9's transition points are summed in logs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.privacy.tpl_prune import in_threads

__all__ = [
    "PairBounds",
    "all_zero_prefixes",
    "check_budgets",
    "check_nonneg",
    "envelope",
    "envelope_small",
    "log_f",
    "logaddexp",
    "pair_table",
    "scan_list",
    "scan_pairs",
]

_TIE_RTOL = 1e-12


# ----------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------


def check_nonneg(values, name: str, *, scalar: bool = False) -> np.ndarray:
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


def check_budgets(budgets) -> np.ndarray:
    """The budgets ε_1..ε_T of a release as a float array, shape (T,), nats (Cao et al. 2019, eqs. (13), (15)).

    Raises
    ------
    InvalidInputError
        If `budgets` is not a non-empty 1-D sequence of finite, non-negative numbers.
    """
    arr = check_nonneg(budgets, "budgets")
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(
            f"`budgets` must be a non-empty 1-D sequence ε_1..ε_T (nats), got {fmt(budgets)}"
        )
    return arr


# ----------------------------------------------------------------------------------------
# log-space sub-function of eq. (24)
# ----------------------------------------------------------------------------------------


def log_f(Q, Qc, D, Dc, alpha):
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


def pair_table(P: np.ndarray, i: int, j: int, with_points: bool = True) -> _PairTable | None:
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
_SEED_PAIRS = 8  # pairs of largest T whose whole chains seed the first block's filter
_SEED_MIN_POINTS = 4096  # smaller blocks go straight to the hull (the filter would cost more than it saves)
#: Below this x = D every point is kept by the filter: np.interp's slope Δy/Δx would overflow
#: across subnormal abscissae, and these points matter only at huge α (μ beyond 1e290).
TINY_X = 1e-290


def _above_chain(x, y, cx, cy) -> np.ndarray:
    """Mask of the points (x, y) not on or below the chain (cx, cy) (x increasing, y increasing).

    A point left of the chain, or at x < 1e-290, is always kept; right of it, the chain continues
    flat at its top (such points lose to the top vertex for every μ ≥ 0).
    """
    if cx.size == 0:
        return np.ones(x.size, dtype=bool)
    return (x < cx[0]) | (x < TINY_X) | (y > np.interp(x, cx, cy))


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


def scan_list(P: np.ndarray, pi: np.ndarray, pj: np.ndarray):
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


def all_zero_prefixes(P: np.ndarray) -> np.ndarray:
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


def scan_pairs(P: np.ndarray):
    """Pairs (i, j) owning a vertex of the candidate chain of all ordered pairs, and D = 0 rows."""
    n = P.shape[0]
    ii, jj = np.nonzero(~np.eye(n, dtype=bool))
    parts = []  # (first index, its scan): numpy releases the GIL in sort, take and cumsum
    in_threads(lambda part: parts.append((int(part[0]) if part.size else 0, scan_list(P, ii[part], jj[part]))), np.arange(ii.size), n)
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
PRUNE_SEEDS = 8  # pairs evaluated per round before pruning


def _log_sentinel(P: np.ndarray) -> np.ndarray:
    """log P with −1e300 for zero entries (differences then stay finite: ±1e300 means ±∞)."""
    with np.errstate(divide="ignore"):
        return np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), -1e300)


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
    v = log_f(Q, np.where(Q < 0.5, 1.0 - Q, tq), D, np.where(D < 0.5, 1.0 - D, td), alpha)  # eq. (24)
    v[np.arange(n)[None, :] >= plus.sum(axis=1)[:, None]] = 0.0  # only the K prefixes of q_k > d_k entries
    return v.max(axis=1) if n else np.zeros(pi.size)


class PairBounds:
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

        k = min(PRUNE_SEEDS, flat.size)
        seeds = np.argpartition(-tv, k - 1)[:k] if k < flat.size else np.arange(flat.size)
        # A lower bound without sorting: for the pairs of largest T (the best for small α), the
        # whole set {k : q_k > d_k} is feasible in (19)–(21); Q̄, D̄ summed from the complement.
        f = flat[seeds]
        q, d = P[f // n], P[f % n]
        plus = q > d
        best = max(0.0, float(np.max(log_f((q * plus).sum(axis=1), (q * ~plus).sum(axis=1),
                                            (d * plus).sum(axis=1), (d * ~plus).sum(axis=1), alpha))))
        # e^{value} ≤ 1 + uT: only pairs with T > (e^best − 1)/u can do better
        thr = best * (1.0 - _PRUNE_RTOL)
        t_min = math.exp(min(_log_u(thr) - lu, 700.0)) if thr > 0 else 0.0  # (e^thr − 1)/u
        cand = np.flatnonzero(tv > t_min)
        eps = np.finfo(float).eps
        tiny = 2.0 ** -1074  # absolute rounding of a subnormal term
        while cand.size > 4 * PRUNE_SEEDS:
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
            if cand.size <= 4 * PRUNE_SEEDS:
                break
            top = np.argpartition(-psi, PRUNE_SEEDS)[:PRUNE_SEEDS]
            best = max(best, evaluate(cand[top]))
            cand = np.delete(cand, top)
        return max(best, evaluate(cand))


# Algorithm 4: upper envelope of the sub-functions on [0, ∞)
def envelope(C: np.ndarray, stop: float = math.inf):
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
            c = int(idx[np.argmax(log_f(Q[idx], Qc[idx], D[idx], Dc[idx], a_cur + 1.0))])
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


def _flog(v: float) -> float:
    return math.log(v) if v > 0.0 else -math.inf


def envelope_small(C: np.ndarray, stop: float = math.inf):
    """:func:`envelope` for a few candidates, the same steps in plain Python floats."""
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

    def cand_log_f(i, a):
        """log f of candidate i at α = a, eq. (24) in log space (as log_f)."""
        return logaddexp(lQ[i], lQc[i] - a) - logaddexp(lD[i], lDc[i] - a)

    def cand_log_slope(i, a):
        """log of d/dα log f of candidate i at α = a (as _log_slope)."""
        return _flog(Q[i] - D[i]) - a - logaddexp(lQ[i], lQc[i] - a) - logaddexp(lD[i], lDc[i] - a)

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
                a = logaddexp(0.0, math.log(-b) - log_a)  # log(1 − B/A)
                if a > a_cur:
                    a_star.append((a, i))
        if dom:
            c = max(dom, key=lambda i: (cand_log_f(i, a_cur + 1.0), -i))
            segs[-1] = c
            continue
        if not a_star:
            break
        a_next = min(a for a, _ in a_star)
        if not math.isfinite(a_next) or a_next > stop:
            break
        tied = [i for a, i in a_star if a <= a_next * (1 + _TIE_RTOL)]
        c = max(tied, key=lambda i: (cand_log_slope(i, a_next), -i))
        a_cur = a_next
        starts.append(a_next)
        segs.append(c)
    return np.asarray(starts), np.asarray(segs, dtype=int)


def logaddexp(x: float, y: float) -> float:
    """numpy.logaddexp for Python floats (same formula, so the same rounding)."""
    if x == y:
        return x + 0.6931471805599453  # log 2
    t = x - y
    if t > 0:
        return x + math.log1p(math.exp(-t))
    return y + math.log1p(math.exp(t))
