"""The supremum of BPL / FPL under a constant budget (Cao et al. (2019), Theorem 11).

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019 (cited below as *Cao et al. (2019)*).  Privacy is in nats.

Paper errors handled here
-------------------------
* Appendix K, eq. (39): the quadratic for F = e^{sup} is printed as
  dF² + (qe^ε + d − 1)F + (qe^ε − e^ε) = 0.  Substituting α = log f(α) + ε gives
  F(d(F − 1) + 1) = e^ε (q(F − 1) + 1), i.e. dF² − (qe^ε + d − 1)F − (1 − q)e^ε = 0: the
  linear term has the wrong sign (and so has the constant, up to the overall sign).  The closed
  form stated in Theorem 11 is the positive root of the correct equation.
* Theorem 11, case 2, allows ε ≤ log(1/q) when d = 0; at ε = log(1/q) the fixed point is
  infinite and the recursion diverges.  The finite case needs ε < log(1/q) strictly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.formatting import UNIT_ROUNDOFF
from policyopt.privacy.tpl_envelope import check_nonneg
from policyopt.privacy.tpl_loss import LossFunction

__all__ = ["Supremum", "supremum", "supremum_upper"]

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
    eps = float(check_nonneg(epsilon, "epsilon", scalar=True))
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
    if q <= d:
        one_minus_slope = 1.0  # ℓ ≤ 0: 1 − ℓ ≥ 1, and 1 only enlarges E
    else:
        # ln ℓ = ln(q − d) + α − ln(q(e^α − 1) + 1) − ln(d(e^α − 1) + 1), in log space so that α* > 709 (ε ≳ 700)
        # does not overflow e^α (issue 26: the old e^α capped at 700 gave 1 − ℓ ≤ 0, hence E = ∞)
        lem1 = a + math.log1p(-math.exp(-a)) if a > 30.0 else math.log(math.expm1(a))

        def log_affine(c):
            """ln(c(e^α − 1) + 1) for c ∈ [0, 1], from ln(e^α − 1) (no overflow of e^α)."""
            return 0.0 if c == 0.0 else float(np.logaddexp(0.0, math.log(c) + lem1))

        log_slope = math.log(q - d) + a - log_affine(q) - log_affine(d)
        # less a few u per operation times the magnitudes handled, so that rounding can only enlarge E
        one_minus_slope = -math.expm1(log_slope) - 16.0 * UNIT_ROUNDOFF * (4.0 + a + abs(log_slope))
    if not one_minus_slope > 0:
        return math.inf
    E = 32.0 * (n + 8) * UNIT_ROUNDOFF * (1.0 + a + eps) / one_minus_slope
    return math.nextafter(a + E, math.inf)
