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
