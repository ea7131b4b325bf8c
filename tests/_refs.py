"""Independent reference computations used by the tests (high precision, straight from definitions)."""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np



def dec_leak(max_tv: float, eps: float) -> float:
    """ln(1 + Δ(e^ε − 1)) in 400-digit decimal arithmetic (independent reference)."""
    with localcontext() as ctx:
        ctx.prec = 400
        d, e = Decimal(max_tv), Decimal(eps)
        return float((1 + d * (e.exp() - 1)).ln())


def dec_peak_risk(dA: float, dS: float, eps: float) -> float:
    """Eq. (30) in 400-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 400
        a, s, e = Decimal(dA), Decimal(dS), Decimal(eps)
        return float((1 + a * (e.exp() - 1) / (1 - s * e.exp())).ln())


def brute_max_tv(P, t: int) -> float:
    """Δ(t) straight from definitions (1), (11), (12): reversed t-step rows, all pairs."""
    P = np.asarray(P, dtype=float)
    w, v = np.linalg.eig(P.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    pi = pi / pi.sum()
    Pt = np.linalg.matrix_power(P, t)
    phat_t = (Pt.T * pi[None, :]) / pi[:, None]  # eq. (1) with P_t
    k = len(pi)
    return max(0.5 * np.abs(phat_t[i] - phat_t[j]).sum() for i in range(k) for j in range(k))


def geometric_reference(problem, n_grid: int = 20001):
    """Independent optimum of a continuous (39)/(41)/(42) problem: (objective, A, S_bar, eps).

    Outer: dense grid over ε_C then bounded Brent.  Inner, for fixed ε_C (f non-decreasing in
    the peak age T): with T_max = f's largest admissible age, the best A for a given S̄ is
    min(A_max, T_max + o − S̄) ((39a) decreases in A); the remaining 1-D problem in S̄ is
    minimised numerically over its feasible interval (no closed form used).
    """
    import math

    from scipy.optimize import minimize_scalar

    o = problem.aoi_offset
    log_cap = math.log1p(-problem.margin) - math.log(problem.c)

    def inner(e):
        tmax = float(problem.penalty.max_age(e, problem.max_penalty))
        if tmax == -math.inf:
            return math.inf, None
        s_lo = max(1.0, (e - log_cap) / problem.L)
        if problem.formulation == "41":
            s = (math.log(2 * problem.c) + e) / problem.L
            a = min(problem.A_max, tmax + o - s)
            if not (s_lo <= s <= problem.S_max) or a < 0:
                return math.inf, None
            return float(problem.risk(a, s, e)), (a, s)
        a_max = 0.0 if problem.formulation == "42" else problem.A_max
        s_hi = min(problem.S_max, tmax + o)
        if s_lo > s_hi:
            return math.inf, None

        def f(s):
            a = min(a_max, tmax + o - s)
            return float(problem.risk(a, s, e))

        cands = [s_lo, s_hi]
        if s_hi > s_lo:
            res = minimize_scalar(f, bounds=(s_lo, s_hi), method="bounded", options={"xatol": 1e-12 * s_hi})
            cands.append(float(res.x))
        s = min(cands, key=f)
        return f(s), (min(a_max, tmax + o - s), s)

    def coarse(eps):
        # vectorised first pass: S̄ on a 400-point grid of its feasible interval for every ε_C
        eps = np.asarray(eps, dtype=float)
        tmax = np.asarray(problem.penalty.max_age(eps, problem.max_penalty), dtype=float)
        s_lo = np.maximum(1.0, (eps - log_cap) / problem.L)
        if problem.formulation == "41":
            s = (math.log(2 * problem.c) + eps) / problem.L
            a = np.minimum(problem.A_max, tmax + o - s)
            ok = (s >= s_lo) & (s <= problem.S_max) & (a >= 0)
            return np.where(ok, problem.risk(np.where(ok, a, 0), s, eps), np.inf)
        a_max = 0.0 if problem.formulation == "42" else problem.A_max
        s_hi = np.minimum(problem.S_max, np.where(np.isfinite(tmax), tmax + o, np.where(tmax > 0, problem.S_max, 0.0)))
        tmax = np.where(np.isneginf(tmax), -1e300, tmax)
        frac = np.linspace(0.0, 1.0, 400)[None, :]
        s = s_lo[:, None] + (s_hi - s_lo)[:, None] * frac
        a = np.minimum(a_max, tmax[:, None] + o - s)
        ok = (s_hi >= s_lo)[:, None] & np.isfinite(s) & (a >= 0)
        with np.errstate(invalid="ignore"):
            r = np.where(ok, problem.risk(np.where(ok, a, 0), np.where(ok, s, problem.S_max), eps[:, None]), np.inf)
        r = np.where(np.isnan(r), np.inf, r)
        return r.min(axis=1)

    grid = np.linspace(problem.epsilon_min, problem.epsilon_max, n_grid)
    vals = coarse(grid)
    if not np.isfinite(vals).any():
        return math.inf, None, None, None
    k = int(np.argmin(vals))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, n_grid - 1)]
    res = minimize_scalar(lambda e: min(inner(e)[0], 1e300), bounds=(lo, hi), method="bounded", options={"xatol": 1e-13 * hi})
    e = float(res.x) if res.fun < vals[k] else float(grid[k])
    val, (a, s) = inner(e)
    return val, a, s, e


def theorem5_loss(P, alpha: float) -> float:
    """L(α) of Cao et al. (2019, IEEE TKDE 2019) eq. (24), paper-literal: Theorem 5 by full sorting per row pair.

    For every ordered pair of distinct rows (q, d): sort all n ratios q_k/d_k in decreasing
    order (a full sort of d_k/q_k, ascending, so that subnormal entries cannot overflow), form the prefix sums Q, D over the entries with
    q_k > d_k (Corollary 2) and take the largest log[(Q(e^α − 1) + 1)/(D(e^α − 1) + 1)] over
    the prefixes (the optimal index set of Theorem 5 is one of them); the maximum over pairs,
    clipped to [0, α] (Remark 1), is L(α).  Evaluated as log(Q + (1 − Q)e^{−α}) −
    log(D + (1 − D)e^{−α}) with logaddexp so that α = 1000 works.  Plain numpy, one sort per row q against all
    rows d at once; no pruning.  The baseline of the L(α) benchmark and of the cross-check tests.
    """
    P = np.asarray(P, dtype=float)
    n = P.shape[0]
    best = 0.0
    for i in range(n):
        q = np.broadcast_to(P[i], P.shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inverse = P / q  # d_k/q_k < 1 where q_k > d_k: no overflow even for subnormal entries
        inverse[q <= P] = np.inf  # Corollary 2: only q_k > d_k can be in the optimal set
        o = np.argsort(inverse, axis=1)  # full sort, decreasing ratio q_k/d_k
        Q = np.cumsum(np.take_along_axis(q, o, axis=1), axis=1)
        D = np.cumsum(np.take_along_axis(P, o, axis=1), axis=1)
        valid = np.take_along_axis(inverse, o, axis=1) < np.inf
        valid[i] = False  # d = q: not a pair of distinct rows
        with np.errstate(divide="ignore", invalid="ignore"):  # log 0 = −inf for D = 0 or 1 − Q = 0
            val = (np.logaddexp(np.log(Q), np.log(np.maximum(1.0 - Q, 0.0)) - alpha)
                   - np.logaddexp(np.log(D), np.log(np.maximum(1.0 - D, 0.0)) - alpha))  # eq. (24)
        if valid.any():
            best = max(best, float(val[valid].max()))
    return min(best, float(alpha))
