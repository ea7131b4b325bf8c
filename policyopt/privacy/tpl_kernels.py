"""Compiled loops (numba) of the TPL loss function: φ_ij(λ) on a grid of λ for pruning the row pairs,
the total variations T_ij of all pairs, and Theorem 5's sorted-prefix value of listed pairs.

φ_ij(λ) = Σ_k (P_ik − λ P_jk)⁺ is the support function of the prefix points of the ordered row pair
(i, j) (Cao et al. (2019), Theorem 5; see :mod:`policyopt.privacy.tpl_prune`).  These loops fill it for
all ordered pairs at several λ in one pass over the n³ entries, which numpy can only do one λ at a time.

Rounding: the callers pass ``Ph`` = P inflated by 8 ulps and ``Pl`` = P deflated by 8 ulps, so each
computed term fl(Ph_ik − λ·Pl_jk) is ≥ the exact (P_ik − λP_jk) (see the caller); the sums of n
non-negative terms are then inflated by (n + 2) ulps by the caller, whatever the summation order
(``fastmath`` lets LLVM reassociate the sums into SIMD lanes and fuse multiply-adds).

The functions release the GIL and are meant to be called on disjoint row sets from a thread pool
(the numba ``parallel`` threading layers are not all safe when called from several Python threads).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_FAST = {"reassoc", "contract"}


@njit(nogil=True, cache=True, fastmath=_FAST)
def phi_dense(Ph, Pl, rows, lams, out):  # pragma: no cover - compiled
    """out[g, i, j] = Σ_k max(Ph[i, k] − lams[g]·Pl[j, k], 0) for i in `rows`, all j, all g."""
    n = Ph.shape[1]
    G = lams.size
    for t in range(rows.size):
        i = rows[t]
        q = Ph[i]
        for j in range(Pl.shape[0]):
            d = Pl[j]
            for g in range(G):
                lam = lams[g]
                s = 0.0
                for k in range(n):
                    s += max(q[k] - lam * d[k], 0.0)
                out[g, i, j] = s


@njit(nogil=True, cache=True, fastmath=_FAST)
def phi_sparse(PhT, colmax, Pl, jrows, lams, out):  # pragma: no cover - compiled
    """out[g, i, j] = Σ_k max(Ph[i, k] − lams[g]·Pl[j, k], 0) for j in `jrows`, all i, all g, skipping exact zeros.

    ``PhT`` is Ph transposed (row k = column k of Ph) and ``colmax[k]`` ≥ max_i Ph[i, k]: an entry
    (j, k) with lams[g]·Pl[j, k] ≥ colmax[k] contributes 0 to every i at that λ and all larger ones
    (``lams`` increasing), so it is skipped.  For large λ few entries remain: about n²/λ for rows
    of comparable entries, instead of n³ per λ.
    """
    n = PhT.shape[1]
    G = lams.size
    acc = np.empty((G, n))
    for t in range(jrows.size):
        j = jrows[t]
        acc[:, :] = 0.0
        for k in range(Pl.shape[1]):
            dk = Pl[j, k]
            col = PhT[k]
            for g in range(G):
                ld = lams[g] * dk
                if ld >= colmax[k]:
                    break
                a = acc[g]
                for i in range(n):
                    a[i] += max(col[i] - ld, 0.0)
        for g in range(G):
            for i in range(n):
                out[g, i, j] = acc[g, i]


@njit(nogil=True, cache=True, fastmath=_FAST)
def phi_items(Ph, Pl, pi, pj, lams, out):  # pragma: no cover - compiled
    """out[m] = Σ_k max(Ph[pi[m], k] − lams[m]·Pl[pj[m], k], 0) for each listed (pair, λ)."""
    n = Ph.shape[1]
    for m in range(pi.size):
        q = Ph[pi[m]]
        d = Pl[pj[m]]
        lam = lams[m]
        s = 0.0
        for k in range(n):
            s += max(q[k] - lam * d[k], 0.0)
        out[m] = s


@njit(nogil=True, cache=True, fastmath=_FAST)
def pair_tv(P, rows, out):  # pragma: no cover - compiled
    """out[i, j] = Σ_k (P[i, k] − P[j, k])⁺ and out[j, i] = Σ_k (P[j, k] − P[i, k])⁺ for i in `rows`, j > i.

    Both orientations in one pass over the two rows (the total variations behind the bound
    Q − D ≤ T of ``tpl_envelope.PairBounds``; Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying
    Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl.
    Data Eng. 31(7), 2019, Theorem 5).  Each term is
    rounded by at most half an ulp of itself and the sum of n non-negative terms by (n − 1) ulps in
    any order, so the caller's slack covers the rounding.

    Parameters
    ----------
    P : numpy.ndarray, shape (n, n), float64, C-contiguous
        Transition matrix (rows need not sum to exactly 1).
    rows : numpy.ndarray, shape (r,), int64
        The rows i handled by this call (disjoint sets of rows may run in parallel threads).
    out : numpy.ndarray, shape (n, n), float64
        Filled above and below the diagonal for the rows given; nothing is raised (numba).
    """
    n = P.shape[1]
    for t in range(rows.size):
        i = rows[t]
        a = P[i]
        for j in range(i + 1, P.shape[0]):
            b = P[j]
            s1 = 0.0
            s2 = 0.0
            for k in range(n):
                x = a[k] - b[k]
                s1 += max(x, 0.0)
                s2 += max(-x, 0.0)
            out[i, j] = s1
            out[j, i] = s2


@njit(nogil=True, cache=True)
def _logaddexp(x, y):  # pragma: no cover - compiled
    """log(e^x + e^y) as numpy's ``logaddexp`` forms it (−inf for two −inf)."""
    if x == y:
        return x + 0.6931471805599453
    t = x - y
    if t > 0.0:
        return x + np.log1p(np.exp(-t))
    return y + np.log1p(np.exp(t))


@njit(nogil=True, cache=True)
def pair_values(P, pi, pj, alpha, out):  # pragma: no cover - compiled
    """out[m] = max(0, max over the prefixes of Theorem 5 of log f_{Q,D}(α)) for the ordered pair (pi[m], pj[m]).

    Cao et al. (2019), Theorem 5 and Algorithm 2 lines 7–9, eq. (24) in log space: the entries with
    q_k > d_k (Corollary 2) sorted by decreasing q_k/d_k, i.e. by increasing (d_k·2^600)/q_k (the
    scaled inverse ratio keeps 53 bits for subnormal entries, see ``tpl_envelope._inverse_ratio_key``);
    prefix sums Q, D, and Q̄ = 1 − Q summed from the complement when Q ≥ 1/2 (no cancellation);
    log f = log(Q + Q̄e^{−α}) − log(D + D̄e^{−α}).  IEEE arithmetic throughout (no fastmath: the
    keys and logs must see subnormals and infinities).

    Parameters
    ----------
    P : numpy.ndarray, shape (n, n), float64, C-contiguous
        Transition matrix.
    pi, pj : numpy.ndarray, shape (m,), int64
        Rows q = P[pi[m]] and d = P[pj[m]] of each ordered pair.
    alpha : float
        α ≥ 0, nats.
    out : numpy.ndarray, shape (m,), float64
        Each pair's L(α) in nats (0 for a pair with no q_k > d_k, Theorem 6); nothing is raised (numba).
    """
    n = P.shape[1]
    key = np.empty(n)
    idx = np.empty(n, dtype=np.int64)
    tq = np.empty(n)
    td = np.empty(n)
    for m in range(pi.size):
        q = P[pi[m]]
        d = P[pj[m]]
        K = 0
        rest_q = 0.0
        rest_d = 0.0
        for k in range(n):
            if q[k] > d[k]:
                idx[K] = k
                key[K] = (d[k] * 4.149515568880993e180) / q[k]  # 2^600
                K += 1
            else:
                rest_q += q[k]
                rest_d += d[k]
        best = 0.0
        if K > 0:
            o = np.argsort(key[:K])
            sq = rest_q
            sd = rest_d
            for r in range(K - 1, -1, -1):  # Σ_{l > r} over the sorted entries, then the rest
                tq[r] = sq
                td[r] = sd
                k = idx[o[r]]
                sq += q[k]
                sd += d[k]
            Q = 0.0
            D = 0.0
            for r in range(K):
                k = idx[o[r]]
                Q += q[k]
                D += d[k]
                Qc = 1.0 - Q if Q < 0.5 else tq[r]
                Dc = 1.0 - D if D < 0.5 else td[r]
                v = _logaddexp(np.log(Q), np.log(Qc) - alpha) - _logaddexp(np.log(D), np.log(Dc) - alpha)
                if v > best:
                    best = v
        out[m] = best


@njit(nogil=True, cache=True)
def chord_test(U, rows, grid, tp_int, tp_w, tp_lb, last_zero, out):  # pragma: no cover - compiled
    """Bitmask of the grid intervals on which a pair may reach the lower bound of Φ.

    For i in `rows` and every j: interval g = [grid[g], grid[g+1]] is marked in out[i, j] (bit g)
    when the chord of the pair's upper values U[g, i, j], U[g+1, i, j] is positive and at least the
    lower bound ``tp_lb`` at one of the interval's test points (weight ``tp_w`` = (t − a)/(b − a);
    the test points of interval g are those with ``tp_int`` = g, sorted by interval).  The chord is
    inflated by 8 ulps of its larger end for its own rounding.  ``last_zero``: the pair values at
    the last grid point are known to be exactly 0 (no zero entries), so that end is no test point.
    """
    G = grid.size
    m = tp_int.size
    for t in range(rows.size):
        i = rows[t]
        for j in range(U.shape[2]):
            mask = np.uint64(0)
            for e in range(m):
                g = tp_int[e]
                ua = U[g, i, j]
                ub = U[g + 1, i, j]
                w = tp_w[e]
                if last_zero and g == G - 2 and w == 1.0:
                    continue
                c = ua * (1.0 - w) + ub * w
                c += 8.0 * 2.220446049250313e-16 * max(ua, ub)
                if c > 0.0 and c >= tp_lb[e]:
                    mask |= np.uint64(1) << np.uint64(g)
            out[i, j] = mask
