"""Noise schedules b_1, b_2, ... meeting discounted DP over an infinite horizon: Corollaries 8 (ε-DP), 12
(exponential) and 16 (hyperbolic, with a corrected constant) of Farokhi, "Temporally Discounted Differential
Privacy for Evolving Datasets on an Infinite Horizon", ICCPS 2020.

The accounting that checks them (losses, discounted sums with error bounds) is in
:mod:`policyopt.privacy.discounted`.

Paper errors handled here
-------------------------
* Corollary 16 (eq. 14) is not valid as printed: its discounted sum exceeds ε at t = 1 for
  β > 3.654 (e.g. β = 4: the constant is 0.940 < 1 = the sum at t = 1) because the proof's
  integral comparison drops the end-point term Δf/(b√t) of the increasing part, and it
  exceeds ε slightly for small β (β ≲ 1e−5) over long horizons because the function
  asinh(√(βt))/√(β(1 + βt)) the proof claims to be decreasing in t is increasing for
  βt < 2.277 (the printed derivative has s − atanh(s) where 1/s − atanh(s) is right,
  s = √(βt/(1 + βt))).  :func:`corollary16_constant` gives a proved constant H(β);
  :func:`corollary16_paper_schedule` keeps the printed one only to reproduce the paper.
* The text after Definition 13 writes Σ_k ρ(k)/(1 + βk); Definition 14 and Theorem 15 use
  1 + β(t − k), which is what is implemented.
* Corollary 16 is stated for β ≥ 0, but its constant divides by √β: β = 0 (ε-DP) has no
  √k schedule (Σ 1/√k diverges); use Corollary 8.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from policyopt.errors import InvalidInputError, check_positive, fmt
from policyopt.privacy.discounted import (
    ROUND_UP,
    check_alpha,
    check_beta,
    check_horizon,
    check_notion,
    hyperbolic_loss,
)

__all__ = [
    "corollary8_schedule",
    "corollary12_schedule",
    "corollary16_constant",
    "corollary16_paper_constant",
    "corollary16_schedule",
    "corollary16_paper_schedule",
    "corollary16_check",
    "corollary_schedule",
]


def corollary8_schedule(epsilon, horizon, sensitivity=1.0, *, printed: bool = False) -> np.ndarray:
    """ε-DP over an infinite horizon: b_k = Δf π² k² / (6ε) (Corollary 8, eq. 8).

    Σ_k Δf/b_k = (6ε/π²) Σ 1/k² < ε for every t.  Multiplied by ``ROUND_UP`` (1 + 16u)
    unless `printed`.

    Parameters
    ----------
    epsilon : float
        ε > 0, nats.
    horizon : int
        T ≥ 1, number of scales returned (the schedule is valid for every T).
    sensitivity : float
        Δf ≥ 0 (constant over time, as the corollary assumes).
    printed : bool
        True: eq. (8) exactly, without the (1 + 16u) round-up.

    Returns
    -------
    numpy.ndarray, shape (T,)
        b_1..b_T (query units).

    Raises
    ------
    InvalidInputError
        If `epsilon` ≤ 0, `horizon` < 1 or `sensitivity` < 0.
    """
    eps = check_positive(epsilon, "epsilon", "nats")
    T = check_horizon(horizon)
    d = _sensitivity_iv(sensitivity)
    k = np.arange(1, T + 1, dtype=float)
    return d * (math.pi**2 / (6.0 * eps)) * k * k * (1.0 if printed else ROUND_UP)  # eq. (8)


def _sensitivity_iv(sensitivity) -> float:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, float, np.integer, np.floating)):
        raise InvalidInputError(f"`sensitivity` must be a number Δf ≥ 0 (query units), got {fmt(sensitivity)}")
    d = float(sensitivity)
    if not (math.isfinite(d) and d >= 0):
        raise InvalidInputError(f"`sensitivity` must be finite and ≥ 0 (query units), got {fmt(sensitivity)}")
    return d


def corollary12_schedule(epsilon, alpha, horizon, sensitivity=1.0, *, printed: bool = False) -> np.ndarray:
    """(ε, α)-exponentially discounted DP: constant b_k = Δf / (ε(1 − α)) (Corollary 12, eq. 11).

    The discounted sum ε(1 − α^t) reaches ε in floating point for large t, and the rounded
    b_k can put it a few ulps above ε; the schedule is therefore multiplied by ``ROUND_UP``
    (1 + 16u) unless `printed` (eq. 11 exactly, which holds only to ~1e−15 relative).

    Parameters
    ----------
    epsilon : float
        ε > 0, nats.
    alpha : float
        α ∈ (0, 1) (α = 1 is ε-DP, which no constant schedule meets: Corollary 7).
    horizon : int
        T ≥ 1.
    sensitivity : float
        Δf ≥ 0.
    printed : bool
        True: eq. (11) exactly.

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        If `alpha` ∉ (0, 1) or another argument is out of range.
    """
    eps = check_positive(epsilon, "epsilon", "nats")
    a = check_alpha(alpha, allow_one=False)
    T = check_horizon(horizon)
    d = _sensitivity_iv(sensitivity)
    return np.full(T, d / (eps * (1.0 - a)) * (1.0 if printed else ROUND_UP))  # eq. (11)


def corollary16_paper_constant(beta) -> float:
    """The constant of Corollary 16 as printed (eq. 14): b_k = Δf √k · H_paper(β) / ε.

    H_paper(β) = 2 (atanh(1/√3) + atanh(√(β/(1+β)))) / √(β(β + 1)).

    **Not valid**: H_paper(β) < 1 for β > 3.654, while the discounted sum at t = 1 is
    Δf/b_1 = ε / H_paper(β) > ε; for β ≲ 1e−5 it is also below sup_t of the sum (see the
    module docstring).  Kept to reproduce the paper; use :func:`corollary16_constant`.

    Raises
    ------
    InvalidInputError
        If `beta` is not finite and > 0.
    """
    b = check_beta(beta, allow_zero=False)
    return 2.0 * (math.atanh(1.0 / math.sqrt(3.0)) + math.asinh(math.sqrt(b))) / math.sqrt(b * (b + 1.0))  # eq. (14)
    # atanh(√(β/(1+β))) = asinh(√β), computed without cancellation near 1


#: φ(z) = asinh(√z)/√(1+z) increases on (0, z_c] and decreases on [z_c, ∞), 2.27 < z_c < 2.28.
_Z_LO, _Z_HI = 2.27, 2.28
#: max φ = φ(z_c) = 1/√z_c < 1/√2.27.
_PHI_MAX = 1.0 / math.sqrt(_Z_LO)
#: Number of slots summed exactly in :func:`corollary16_constant`.
_EXACT_T = 64
#: Relative safety factor covering the rounding of the few-ulp evaluations behind H(β).
_H_SAFETY = 1.0 + 1e-9
#: Above this many candidate slots the closed-form tail bound is used.
_H_GRID_MAX = 5_000_000


def corollary16_constant(beta) -> float:
    """Proved constant H(β) of the corrected Corollary 16: b_k = Δf √k H(β)/ε is (ε, β)-hyperbolic DP.

    H(β) ≥ sup_{t ≥ 1} G_t(β) with G_t(β) = Σ_{k=1}^t 1/((1 + β(t−k))√k), so that the
    discounted sum of Theorem 15, (ε/H) G_t, is ≤ ε at every t (infinite horizon).

    Parameters
    ----------
    beta : float
        β > 0.

    Returns
    -------
    float
        H(β) (dimensionless).  Examples: H(1e−6) ≈ 1325.5, H(1e−3) ≈ 41.94, H(1) ≈ 1.2744
        (= G_4(1)), H(β) = 1 + 1e−9 (= G_1) for β ≳ 3.

    Raises
    ------
    InvalidInputError
        If `beta` is not finite and > 0 (β = 0 is ε-DP, where G_t = Σ 1/√k → ∞).

    Notes
    -----
    **Proof.**  Fix t ≥ 1 and let f(x) = 1/((1 + β(t−x))√x) on (0, t], so G_t = Σ_{k=1}^t f(k).
    (a) log f has derivative β/(1 + β(t−x)) − 1/(2x), which is negative for x < x* and positive
    for x > x*, x* = (1 + βt)/(3β): f decreases on (0, x*] and increases on [x*, t].
    (b) Every k ≤ x* has f(k) ≤ ∫_{k−1}^k f (f decreasing there); every k with x* < k < t has
    f(k) ≤ ∫_k^{k+1} f (f increasing there).  The intervals are disjoint subsets of [0, t]
    and f > 0, so G_t ≤ I_t + [x* < t]·f(t), where f(t) = 1/√t, [x* < t] ⇔ t > 1/(2β), and
    I_t = ∫_0^t f = 2 atanh(√(βt/(1+βt)))/√(β(1+βt)) = (2/√β)·φ(βt),
    φ(z) = asinh(√z)/√(1 + z).  Call this bound B_t.
    (c) φ'(z) = (√(1 + 1/z) − asinh(√z)) / (2(1+z)^{3/2}); the bracket decreases strictly in z,
    is > 0 at z = 2.27 and < 0 at z = 2.28 (checked in the tests), so φ increases up to a
    unique z_c ∈ (2.27, 2.28) and decreases after it.  At z_c, asinh(√z_c) = √(1 + 1/z_c),
    hence max φ = φ(z_c) = 1/√z_c < 1/√2.27.
    (d) For t ≥ t₁ = ⌈2.28/β⌉ we have βt ≥ 2.28 > 1/2, so [x* < t] = 1 and both I_t and 1/√t
    are non-increasing in t; therefore sup_{t > N} B_t = max_{N < t ≤ max(N+1, t₁)} B_t.
    (e) H(β) = (1 + 1e−9)·max( max_{t ≤ 64} G_t (summed exactly; the relative rounding error
    of these sums and of the B_t evaluations is a few ulps ≪ 1e−9),  max_{64 < t ≤ max(65, t₁)} B_t ),
    where the second maximum is replaced by the bound 2/√(2.27β) + 1/√65 (from (c)) when
    t₁ > 5·10⁶ (β ≲ 4.6e−7).  ∎

    The paper's proof (eq. 14) (i) omits the end-point term f(t), which is what makes its
    constant < G_1 = 1 for β > 3.654, and (ii) claims I_t decreasing in t by a derivative with
    s − atanh(s) in place of 1/s − atanh(s) (s = √(βt/(1+βt))), while I_t increases up to
    βt = z_c ≈ 2.277; its bound 2(atanh(1/√3) + asinh(√β))/√(β(1+β)) ≈ 1.317/√β is below
    sup_t I_t ≈ 2φ(z_c)/√β ≈ 1.3254/√β for small β.
    """
    return _corollary16_constant(check_beta(beta, allow_zero=False))


@lru_cache(maxsize=256)
def _corollary16_constant(b: float) -> float:
    """H(β) for a validated β > 0 (cached); see :func:`corollary16_constant`."""
    N = _EXACT_T
    # (e), first part: G_t for t ≤ N exactly (k = 1..t, weight 1/(1 + β(t−k)))
    k = np.arange(1, N + 1, dtype=float)
    with np.errstate(over="ignore"):
        M = np.where(k[:, None] >= k[None, :], 1.0 / (1.0 + b * np.maximum(k[:, None] - k[None, :], 0.0)), 0.0)
    G = M @ (1.0 / np.sqrt(k))  # G_t, t = 1..N
    head = float(G.max())
    # (e), second part: sup_{t > N} B_t
    ratio = _Z_HI / b  # inf for a subnormal β (e.g. 1e-320): then the bound (c) applies, as for any small β
    if not math.isfinite(ratio) or ratio - N > _H_GRID_MAX:
        tail = 2.0 * _PHI_MAX / math.sqrt(b) + 1.0 / math.sqrt(N + 1)  # (c)
    else:
        t1 = max(N + 1, math.ceil(ratio))
        t = np.arange(N + 1, t1 + 1, dtype=float)
        with np.errstate(over="ignore"):
            integral = 2.0 * np.arcsinh(np.sqrt(b * t)) / np.sqrt(b * (1.0 + b * t))  # I_t, step (b)
        tail = float(np.max(integral + np.where(t > 1.0 / (2.0 * b), 1.0 / np.sqrt(t), 0.0)))
    return max(head, tail) * _H_SAFETY


def corollary16_schedule(epsilon, beta, horizon, sensitivity=1.0) -> np.ndarray:
    """Corrected Corollary 16: b_k = Δf √k H(β) / ε, (ε, β)-hyperbolic DP for every horizon.

    H(β) is :func:`corollary16_constant` (proved there).  The printed schedule is
    :func:`corollary16_paper_schedule`.

    Parameters
    ----------
    epsilon : float
        ε > 0, nats.
    beta : float
        β > 0.
    horizon : int
        T ≥ 1.
    sensitivity : float
        Δf ≥ 0.

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        If an argument is out of range (β = 0 included: use Corollary 8).
    """
    return _sqrt_schedule(corollary16_constant, epsilon, beta, horizon, sensitivity)


def corollary16_paper_schedule(epsilon, beta, horizon, sensitivity=1.0) -> np.ndarray:
    """Corollary 16 exactly as printed (eq. 14): b_k = Δf √k H_paper(β)/ε.  **Invalid** (see
    :func:`corollary16_paper_constant`): reproduce the paper only, check it with
    :func:`discounted_loss`.

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        If an argument is out of range.
    """
    return _sqrt_schedule(corollary16_paper_constant, epsilon, beta, horizon, sensitivity)


def _sqrt_schedule(constant, epsilon, beta, horizon, sensitivity) -> np.ndarray:
    """b_k = Δf √k · constant(β) / ε, k = 1..T (the form of Corollary 16, eq. 14), arguments validated."""
    eps = check_positive(epsilon, "epsilon", "nats")
    b = check_beta(beta, allow_zero=False)
    T = check_horizon(horizon)
    d = _sensitivity_iv(sensitivity)
    return d * constant(b) / eps * np.sqrt(np.arange(1, T + 1, dtype=float))


def corollary16_check(beta, horizon, *, constant: str = "corrected", method: str = "auto") -> dict:
    """Numerical check of a Corollary 16 constant: sup_{t≤T} G_t(β) against H(β).

    Parameters
    ----------
    beta : float
        β > 0.
    horizon : int
        T ≥ 1 (slots); T = 10⁶ takes about 0.3 s with the FFT.
    constant : {"corrected", "paper"}
    method : str
        Summation method of :func:`hyperbolic_loss`.

    Returns
    -------
    dict
        ``H`` (the constant), ``sup_G`` (max_t G_t, computed), ``sup_G_upper`` (plus the error
        bound), ``t_max`` (slot of the max), ``ratio`` (= sup_G_upper / H; ≤ 1 means the
        schedule is (ε, β)-hyperbolic DP up to T), ``holds`` (bool), ``first_violation``
        (first t with G_t > H by more than the error bound, or None), ``method``.

    Raises
    ------
    InvalidInputError
        If `beta` ≤ 0, `horizon` < 1 or `constant` is unknown.
    """
    b = check_beta(beta, allow_zero=False)
    T = check_horizon(horizon)
    if constant not in ("corrected", "paper"):
        raise InvalidInputError(f"unknown `constant` {fmt(constant)}; choose 'corrected' or 'paper'")
    H = corollary16_constant(b) if constant == "corrected" else corollary16_paper_constant(b)
    loss = hyperbolic_loss(1.0 / np.sqrt(np.arange(1, T + 1, dtype=float)), b, method=method)  # G_t
    up = loss.upper
    lo = loss.values - loss.error_bound
    viol = np.flatnonzero(lo > H)
    return {
        "beta": b,
        "horizon": T,
        "H": H,
        "sup_G": float(loss.values.max()),
        "sup_G_upper": float(up.max()),
        "t_max": int(np.argmax(up)) + 1,
        "ratio": float(up.max() / H),
        "holds": bool(up.max() <= H),
        "first_violation": int(viol[0]) + 1 if viol.size else None,
        "method": loss.method,
    }


def corollary_schedule(notion: str, epsilon, horizon, *, alpha=None, beta=None, sensitivity=1.0,
                       variant: str = "corollary") -> np.ndarray:
    """The corollary schedule of a notion: Corollary 8 (dp), 12 (exponential) or 16 (hyperbolic).

    Parameters
    ----------
    notion : {"dp", "exponential", "hyperbolic"}
    epsilon : float
        ε > 0, nats.
    horizon : int
        T ≥ 1.
    alpha, beta : float, optional
        The notion's parameter.
    sensitivity : float
        Δf ≥ 0.
    variant : {"corollary", "paper"}
        ``"paper"``: eqs. (8), (11), (14) exactly as printed (no round-up; for hyperbolic the
        invalid printed constant).

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        On a bad argument, α = 1 (use dp) or β = 0 (use dp).
    """
    notion, p = check_notion(notion, alpha, beta)
    if variant not in ("corollary", "paper"):
        raise InvalidInputError(f"unknown `variant` {fmt(variant)}; choose 'corollary' or 'paper'")
    printed = variant == "paper"
    if notion == "dp":
        return corollary8_schedule(epsilon, horizon, sensitivity, printed=printed)
    if notion == "exponential":
        return corollary12_schedule(epsilon, p, horizon, sensitivity, printed=printed)
    f = corollary16_paper_schedule if variant == "paper" else corollary16_schedule
    return f(epsilon, p, horizon, sensitivity)
