"""Discounted differential privacy of a Laplace reporting mechanism (Farokhi 2020).

Source: F. Farokhi, "Temporally Discounted
Differential Privacy for Evolving Datasets on an Infinite Horizon", ICCPS 2020.

The curator releases y(t) = f_t(X(t)) + w(t), w(t) ~ Lap(b_t) (eq. 5).  The privacy loss of
entry k is bounded by ρ(k) ≤ Δf_k / b_k (Theorem 6).  Three notions are accounted for
(privacy in nats, time in slots, t = 1, 2, ...):

* ``"dp"``          Σ_{k≤t} ρ(k) ≤ ε                          (Theorems 5, 6, eqs. 4, 6)
* ``"exponential"`` Σ_{k≤t} α^{t−k} ρ(k) ≤ ε,  α ∈ (0, 1]       (Definition 10, Theorem 11, eqs. 9, 10)
* ``"hyperbolic"``  Σ_{k≤t} ρ(k) / (1 + β(t−k)) ≤ ε,  β ≥ 0     (Definition 14, Theorem 15, eqs. 12, 13)

(ε, 1)-exponential and (ε, 0)-hyperbolic discounted DP are ε-DP (the text after Definitions
10 and 14); the accounting reproduces both identities exactly (same summation).

The schedules of Corollaries 8, 12 and 16 are in :mod:`policyopt.privacy.discounted_schedules`.

Every running sum is returned with a rigorous bound on its floating-point error, and the
checks ("the notion holds up to horizon t") use value + error bound, so a reported worst
loss is an upper bound on the exact sum for the floating-point schedule that is released.

"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_positive, fmt
from policyopt.result import result_repr

__all__ = [
    "check_vector",
    "check_notion",
    "check_horizon",
    "check_beta",
    "check_alpha",
    "NOTIONS",
    "DiscountedLoss",
    "privacy_losses",
    "dp_loss",
    "exponential_loss",
    "hyperbolic_loss",
    "discounted_loss",
    "discount_kernel",
    "discount_matrix",
    "discounted_sum",
    "discounted_sum_transpose",
    "solve_discounted_transpose",
    "inverse_discount_kernel",
    "expected_relative_error",
    "total_variance",
    "DIRECT_MAX_T",
    "ROUND_UP",
]

NOTIONS = ("dp", "exponential", "hyperbolic")

#: Unit round-off of float64 and of numpy's longdouble (x87 80-bit on x86-64).
_U64 = float(np.finfo(np.float64).eps) / 2
_ULD = float(np.finfo(np.longdouble).eps) / 2
#: Largest horizon for which ``method="auto"`` uses the direct O(T²) hyperbolic sum.
DIRECT_MAX_T = 20_000
#: Corollary schedules are multiplied by this factor (1 + 16u) so that the released float64 scales
#: meet ε after rounding (the printed formulas hit ε in the limit and can exceed it by a few ulps).
ROUND_UP = 1.0 + 16 * float(np.finfo(np.float64).eps) / 2
#: Daily consumption clip bound of the data study, kWh per home and day (> observed max 96.8).


def _gamma(n, u):
    """γ_n = n u / (1 − n u) (Higham, Accuracy and Stability, Lemma 3.1); elementwise."""
    nu = np.asarray(n, dtype=float) * u
    return nu / (1.0 - nu)


# ----------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------


def check_alpha(alpha, *, allow_one: bool = True) -> float:
    """Validate an exponential discount factor α ∈ (0, 1] (or (0, 1) when `allow_one` is False); return it as float."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise InvalidInputError(f"`alpha` must be a discount factor in (0, 1], got {fmt(alpha)}")
    a = float(alpha)
    if not (0.0 < a <= 1.0) or (not allow_one and a == 1.0):
        rng = "(0, 1]" if allow_one else "(0, 1) (α = 1 is ε-DP: use Corollary 8)"
        raise InvalidInputError(f"`alpha` must be a discount factor in {rng}, got {fmt(alpha)}")
    return a


def check_beta(beta, *, allow_zero: bool = True) -> float:
    """Validate a hyperbolic discount rate β ≥ 0 (or > 0 when `allow_zero` is False); return it as float."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise InvalidInputError(f"`beta` must be a finite discounting coefficient {'≥' if allow_zero else '>'} 0, got {fmt(beta)}")
    b = float(beta)
    if not (math.isfinite(b) and b >= 0) or (not allow_zero and b == 0.0):
        what = "≥ 0" if allow_zero else "> 0 (β = 0 is ε-DP, where Σ 1/√k diverges: use Corollary 8)"
        raise InvalidInputError(f"`beta` must be a finite discounting coefficient {what}, got {fmt(beta)}")
    return b


def check_horizon(horizon) -> int:
    """Validate a horizon T ≥ 1 (integer, slots); return it as int.  Raises InvalidInputError naming `horizon`."""
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise InvalidInputError(f"`horizon` must be an integer T ≥ 1 (slots), got {fmt(horizon)}")
    return int(horizon)


def check_vector(x, name: str, T: int | None, *, allow_zero: bool, unit: str) -> np.ndarray:
    """Validate a finite, non-negative (positive unless `allow_zero`) 1-D vector named `name` of length `T` (any if None)."""
    try:
        v = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"`{name}` must be a 1-D array of numbers ({unit}), got {fmt(x)}") from None
    if v.ndim == 0 and T is not None:
        v = np.full(T, float(v))
    if v.ndim != 1 or v.size == 0:
        raise InvalidInputError(f"`{name}` must be a non-empty 1-D array ({unit}), got shape {v.shape}: {fmt(x)}")
    if T is not None and v.size != T:
        raise InvalidInputError(f"`{name}` must have length {T}, got {v.size}: {fmt(x)}")
    bad = ~np.isfinite(v) | ((v < 0) if allow_zero else (v <= 0))
    if bad.any():
        i = int(np.argmax(bad))
        cond = "≥ 0" if allow_zero else "> 0"
        raise InvalidInputError(f"`{name}` must be finite and {cond} ({unit}); entry {i} is {float(v[i])!r}")
    return v


def check_notion(notion, alpha, beta) -> tuple[str, float | None]:
    """Validate a discount notion ("dp", "exponential", "hyperbolic") and its parameter; return (notion, parameter)."""
    if notion not in NOTIONS:
        raise InvalidInputError(f"unknown `notion` {fmt(notion)}; choose one of {list(NOTIONS)}")
    if notion == "dp":
        if alpha is not None or beta is not None:
            raise InvalidInputError(
                f"notion 'dp' takes neither `alpha` nor `beta`, got alpha={fmt(alpha)}, beta={fmt(beta)}"
            )
        return notion, None
    if notion == "exponential":
        if beta is not None:
            raise InvalidInputError(f"notion 'exponential' takes `alpha`, not `beta` (got beta={fmt(beta)})")
        if alpha is None:
            raise InvalidInputError("notion 'exponential' needs `alpha`, the discount factor in (0, 1]")
        return notion, check_alpha(alpha)
    if alpha is not None:
        raise InvalidInputError(f"notion 'hyperbolic' takes `beta`, not `alpha` (got alpha={fmt(alpha)})")
    if beta is None:
        raise InvalidInputError("notion 'hyperbolic' needs `beta`, the discounting coefficient ≥ 0")
    return notion, check_beta(beta)


# ----------------------------------------------------------------------------------------
# accounting
# ----------------------------------------------------------------------------------------


def privacy_losses(schedule, sensitivity=1.0) -> np.ndarray:
    """Per-release privacy loss bounds ρ(k) ≤ Δf_k / b_k of the Laplace mechanism (5).

    Parameters
    ----------
    schedule : array_like, shape (T,)
        Laplace scales b_1..b_T ≥ 0 (query units).
    sensitivity : float or array_like, shape (T,)
        Δf_k ≥ 0 (eq. 7), query units; a scalar is used at every step.

    Returns
    -------
    numpy.ndarray, shape (T,)
        ρ(k) in nats: Δf_k/b_k; 0 where Δf_k = 0 (the release does not depend on the data,
        whatever b_k); ``inf`` where b_k = 0 < Δf_k.

    Raises
    ------
    InvalidInputError
        If `schedule` or `sensitivity` is not finite and ≥ 0, or their lengths differ.

    References
    ----------
    Farokhi (2020), Theorem 6 and its proof (exp ρ(k) ≤ exp(Δf_k/b_k)).
    """
    b = check_vector(schedule, "schedule", None, allow_zero=True, unit="Laplace scales")
    d = check_vector(sensitivity, "sensitivity", b.size, allow_zero=True, unit="query units")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(d == 0, 0.0, d / b)  # Theorem 6: ρ(k) ≤ Δf_k / b_k
    return r


@dataclass(frozen=True)
class DiscountedLoss:
    """Running (discounted) privacy-loss sums of a schedule.

    Attributes
    ----------
    notion : {"dp", "exponential", "hyperbolic"}
    parameter : float or None
        α (exponential), β (hyperbolic) or None (dp).
    values : numpy.ndarray, shape (T,)
        Computed sums S_t, t = 1..T, nats (float64).
    error_bound : numpy.ndarray, shape (T,)
        Bound on ``|S_t(computed) − S_t(exact)|``, nats, covering the rounding of ρ(k), of the
        discount weights and of the summation (see the function that made it).
    method : str
        ``"cumsum"``, ``"recursion"``, ``"direct"`` or ``"fft"``.
    """

    notion: str
    parameter: float | None
    values: np.ndarray
    error_bound: np.ndarray

    method: str

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)

    @property
    def certified(self) -> bool:
        """True when :attr:`error_bound` is proved (every method but ``"fft"``, whose bound is an estimate)."""
        return self.method != "fft"

    @property
    def upper(self) -> np.ndarray:
        """values + error_bound rounded up one float step, shape (T,): upper bounds on the exact sums, nats
        (proved iff :attr:`certified`; the step covers the rounding of this addition)."""
        total = self.values + self.error_bound
        return np.where(self.error_bound > 0, np.nextafter(total, np.inf), total)  # a zero bound: exact

    @property
    def worst(self) -> float:
        """max_t of :attr:`upper` (nats): an upper bound on the worst discounted loss up to T."""
        return float(np.max(self.upper))

    @property
    def worst_t(self) -> int:
        """Slot t (1-based) where :attr:`worst` is attained."""
        return int(np.argmax(self.upper)) + 1

    def holds_until(self, epsilon, rtol: float = 0.0) -> int:
        """Largest t such that the notion holds at every slot 1..t.

        Parameters
        ----------
        epsilon : float
            ε > 0, nats.
        rtol : float
            Relative slack: holds at t when ``upper[t] ≤ ε (1 + rtol)``; 0 by default (proven).

        Returns
        -------
        int
            0..T; T means "(ε, ·)-discounted DP holds up to the horizon".

        Raises
        ------
        InvalidInputError
            If `epsilon` is not finite and > 0.
        """
        eps = check_positive(epsilon, "epsilon", "nats")
        ok = self.upper <= eps * (1.0 + rtol)
        return int(ok.size if ok.all() else np.argmin(ok))

    def holds(self, epsilon, rtol: float = 0.0) -> bool:
        """True when the notion holds at every slot up to the horizon (see :meth:`holds_until`)."""
        return self.holds_until(epsilon, rtol) == self.values.size


def dp_loss(losses) -> DiscountedLoss:
    """Undiscounted running sum S_t = Σ_{k≤t} ρ(k) (Theorems 5–6, eqs. 4, 6).

    Parameters
    ----------
    losses : array_like, shape (T,)
        ρ(1..T) ≥ 0, nats (``inf`` allowed).

    Returns
    -------
    DiscountedLoss
        Summed sequentially in longdouble (u_ld = 2⁻⁶⁴ on x86-64); error bound
        (γ_{t}^{ld} + 2u)·S_t with u = 2⁻⁵³ (Higham, Lemma 3.1; all terms ≥ 0; one u for ρ's own rounding,
        one for the final rounding to float64).

    Raises
    ------
    InvalidInputError
        If `losses` is not 1-D with entries ≥ 0.
    """
    r = _losses_iv(losses)
    s = np.cumsum(r.astype(np.longdouble))
    v = s.astype(float)
    t = np.arange(1, r.size + 1)
    err = (_gamma(t, _ULD) + 2 * _U64) * v * (1 + 4 * _U64)
    return DiscountedLoss("dp", None, v, _nan_safe(err, v), "cumsum")


def _losses_iv(losses) -> np.ndarray:
    try:
        r = np.asarray(losses, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"`losses` must be a 1-D array of numbers ≥ 0 (nats), got {fmt(losses)}") from None
    if r.ndim != 1 or r.size == 0:
        raise InvalidInputError(f"`losses` must be a non-empty 1-D array (nats), got shape {r.shape}")
    bad = np.isnan(r) | (r < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidInputError(f"`losses` must be ≥ 0 (nats); entry {i} is {float(r[i])!r}")
    return r


def _nan_safe(err, v):
    """Error bound ``inf`` where the sum itself is infinite (inf·0 would give nan)."""
    return np.where(np.isfinite(v), err, np.inf)


def exponential_loss(losses, alpha) -> DiscountedLoss:
    """Exponentially discounted running sum S_t = Σ_{k≤t} α^{t−k} ρ(k) (Definition 10, eq. 9).

    Computed by the recursion S_t = α S_{t−1} + ρ(t) (``scipy.signal.lfilter``) in longdouble.

    Parameters
    ----------
    losses : array_like, shape (T,)
        ρ(1..T) ≥ 0, nats.
    alpha : float
        Discount factor α ∈ (0, 1]; α = 1 gives :func:`dp_loss` (identical sums).

    Returns
    -------
    DiscountedLoss
        Error bound 2.01·u_ld·min(t, 1/(1 − α))·max_{k≤t} Ŝ_k + 2u·Ŝ_t (u_ld = 2⁻⁶⁴, u = 2⁻⁵³):
        each step Ŝ_t = fl(fl(α Ŝ_{t−1}) + ρ(t)) rounds twice, so the error e_t obeys
        e_t ≤ α e_{t−1} + 2.01 u_ld max(Ŝ_{t−1}, Ŝ_t), hence e_t ≤ 2.01 u_ld max_{k≤t} Ŝ_k Σ_{j<t} α^j;
        2u covers the rounding of ρ(t) = Δf/b and of the result to float64.

    Raises
    ------
    InvalidInputError
        If `losses` is bad or `alpha` ∉ (0, 1].

    References
    ----------
    Farokhi (2020), Definition 10, Theorem 11 (eqs. 9–10).
    """
    from scipy.signal import lfilter

    r = _losses_iv(losses)
    a = check_alpha(alpha)
    if a == 1.0:
        out = dp_loss(r)
        return DiscountedLoss("exponential", 1.0, out.values, out.error_bound, out.method)
    ld = np.longdouble
    with np.errstate(invalid="ignore"):
        s = lfilter(np.array([1.0], dtype=ld), np.array([1.0, -a], dtype=ld), r.astype(ld))  # eq. (9)
    v = s.astype(float)
    t = np.arange(1, r.size + 1)
    with np.errstate(invalid="ignore"):
        run_max = np.maximum.accumulate(v)
        err = (2.01 * _ULD * np.minimum(t, 1.0 / (1.0 - a)) * run_max + 2 * _U64 * v) * (1 + 4 * _U64)
    return DiscountedLoss("exponential", a, v, _nan_safe(err, v), "recursion")


def discount_kernel(notion: str, T: int, *, alpha=None, beta=None) -> np.ndarray:
    """Discount weights d_j of a loss j = t − k slots old, j = 0..T−1.

    Parameters
    ----------
    notion : {"dp", "exponential", "hyperbolic"}
    T : int
        Number of weights (slots).
    alpha, beta : float, optional
        α for ``"exponential"`` (d_j = α^j, Definition 9), β for ``"hyperbolic"``
        (d_j = 1/(1 + βj), Definition 13); neither for ``"dp"`` (d_j = 1).

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        If the notion/parameter combination is invalid or `T` < 1.
    """
    notion, p = check_notion(notion, alpha, beta)
    T = check_horizon(T)
    j = np.arange(T, dtype=float)
    if notion == "dp":
        return np.ones(T)
    if notion == "exponential":
        return np.exp(j * math.log(p))  # α^j (Definition 9), no overflow/underflow trouble
    return 1.0 / (1.0 + p * j)  # Definition 13


def discount_matrix(notion: str, T: int, *, alpha=None, beta=None) -> np.ndarray:
    """Dense lower-triangular A (T, T) with (A ρ)_t the discounted sum at t: A[t, k] = d_{t−k}.

    Parameters and raises as :func:`discount_kernel`.  Memory 8T² bytes: meant for T ≲ 10⁴.

    Returns
    -------
    numpy.ndarray, shape (T, T)
    """
    d = discount_kernel(notion, T, alpha=alpha, beta=beta)
    i = np.arange(T)
    diff = i[:, None] - i[None, :]
    return np.where(diff >= 0, d[np.clip(diff, 0, None)], 0.0)


def _toeplitz_direct(r: np.ndarray, g: np.ndarray, block: int = 512) -> np.ndarray:
    """y_t = Σ_{k≤t} g_{t−k} r_k exactly as dot products (float64 BLAS), O(T²)."""
    from numpy.lib.stride_tricks import sliding_window_view

    T = r.size
    a = np.concatenate([g[::-1], np.zeros(T)])  # a[T−1−t+k] = g[t−k] for k ≤ t, 0 for k > t
    win = sliding_window_view(a, T)  # win[T−1−t] is row t of the Toeplitz matrix
    y = np.empty(T)
    for i0 in range(0, T, block):
        i1 = min(T, i0 + block)
        rows = win[T - 1 - np.arange(i0, i1)][:, :i1]
        y[i0:i1] = rows @ r[:i1]
    return y


def _fft_error(r, g, y_hat, N: int) -> np.ndarray:
    """A-priori bound on ``|ŷ − y|_∞`` of an FFT convolution of length N (see :func:`hyperbolic_loss`)."""
    L = max(1.0, math.log2(N))
    eta = _U64 + _gamma(4, _U64) * (math.sqrt(2) + _U64)  # Higham Thm 24.2, μ = u
    eN = float(L * eta / (1 - L * eta))
    n2r, n1r = float(np.linalg.norm(r)), float(np.sum(r))
    n2g, n1g = float(np.linalg.norm(g)), float(np.sum(g))
    bound = 1.1 * eN * (n2r * n1g + n1r * n2g + 2.0 * float(np.linalg.norm(y_hat))) + 2 * math.sqrt(2) * _gamma(2, _U64) * n2r * n2g
    return np.full(y_hat.size, bound)


def hyperbolic_loss(losses, beta, *, method: str = "auto") -> DiscountedLoss:
    """Hyperbolically discounted running sum S_t = Σ_{k≤t} ρ(k)/(1 + β(t−k)) (Definition 14, eq. 12).

    Parameters
    ----------
    losses : array_like, shape (T,)
        ρ(1..T) ≥ 0, nats (finite for ``method="fft"``).
    beta : float
        β ≥ 0; β = 0 gives :func:`dp_loss` (identical sums).
    method : {"auto", "direct", "fft"}
        ``"direct"``: every S_t as a dot product (O(T²) time, blocks of 512 rows); error bound
        (γ_t + 6u)·S_t (all terms ≥ 0; 4u for the computed weights 1/(1+βj), u for ρ, u for the
        result).  ``"fft"``: ``scipy.signal.fftconvolve`` (O(T log T)); error bound, uniform in t,
        1.1·e_N·(‖ρ‖₂‖d‖₁ + ‖ρ‖₁‖d‖₂ + 2‖S‖₂) + 2√2γ₂‖ρ‖₂‖d‖₂ + (γ_2 + 6u)·S_t, with
        e_N = log₂N·η/(1 − log₂N·η), η = u + γ₄(√2 + u), from Higham (Accuracy and Stability,
        2nd ed., Thm 24.2) for the forward and inverse transforms.  That theorem is proved for
        radix-2 Cooley–Tukey with accurate twiddle factors; pocketfft (mixed radix) is assumed to
        obey it, so ``"fft"`` is an a-priori estimate, not a certificate.  ``"auto"``: direct for
        T ≤ ``DIRECT_MAX_T`` (20 000), else fft.

    Returns
    -------
    DiscountedLoss

    Raises
    ------
    InvalidInputError
        If `losses` is bad, `beta` < 0, `method` unknown, or ``method="fft"`` with an infinite loss.

    References
    ----------
    Farokhi (2020), Definitions 13–14, Theorem 15 (eqs. 12–13).
    """
    r = _losses_iv(losses)
    b = check_beta(beta)
    if method not in ("auto", "direct", "fft"):
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose 'auto', 'direct' or 'fft'")
    if b == 0.0:
        out = dp_loss(r)
        return DiscountedLoss("hyperbolic", 0.0, out.values, out.error_bound, out.method)
    T = r.size
    g = discount_kernel("hyperbolic", T, beta=b)  # d_j = 1/(1 + βj), Definition 13
    if method == "auto":
        method = "direct" if T <= DIRECT_MAX_T or not np.all(np.isfinite(r)) else "fft"
    if method == "direct":
        with np.errstate(invalid="ignore"):
            if np.all(np.isfinite(r)):
                y = _toeplitz_direct(r, g)  # eq. (12)
            else:
                y = _toeplitz_direct(np.where(np.isfinite(r), r, 0.0), g)
                first_inf = int(np.argmax(~np.isfinite(r)))
                y[first_inf:] = np.inf
        t = np.arange(1, T + 1)
        err = (_gamma(t, _U64) + 6 * _U64) * y * (1 + 4 * _U64)
        return DiscountedLoss("hyperbolic", b, y, _nan_safe(err, y), "direct")
    if not np.all(np.isfinite(r)):
        raise InvalidInputError("`losses` must be finite for method 'fft' (a schedule has b_k = 0 < Δf_k); use 'direct'")
    from scipy.fft import next_fast_len
    from scipy.signal import fftconvolve

    y = fftconvolve(r, g)[:T]  # eq. (12) as a causal convolution
    N = next_fast_len(2 * T - 1)
    err = _fft_error(r, g, y, N) + (_gamma(2, _U64) + 6 * _U64) * np.abs(y)
    return DiscountedLoss("hyperbolic", b, y, err, "fft")


def discounted_loss(schedule, sensitivity=1.0, notion: str = "dp", *, alpha=None, beta=None,
                    method: str = "auto") -> DiscountedLoss:
    """Running privacy-loss sums of a Laplace schedule under a notion (Theorems 6, 11, 15).

    Parameters
    ----------
    schedule : array_like, shape (T,)
        Laplace scales b_1..b_T ≥ 0.
    sensitivity : float or array_like, shape (T,)
        Δf_k ≥ 0.
    notion : {"dp", "exponential", "hyperbolic"}
    alpha, beta : float, optional
        α ∈ (0, 1] for ``"exponential"``, β ≥ 0 for ``"hyperbolic"``.
    method : str
        Hyperbolic summation method (see :func:`hyperbolic_loss`).

    Returns
    -------
    DiscountedLoss

    Raises
    ------
    InvalidInputError
        On a bad schedule, sensitivity, notion or parameter.

    Examples
    --------
    >>> discounted_loss([2.0, 2.0], 1.0, "exponential", alpha=0.5).values
    array([0.5 , 0.75])
    """
    notion, p = check_notion(notion, alpha, beta)
    r = privacy_losses(schedule, sensitivity)
    if notion == "dp":
        return dp_loss(r)
    if notion == "exponential":
        return exponential_loss(r, p)
    return hyperbolic_loss(r, p, method=method)


def discounted_sum(x, notion: str, *, alpha=None, beta=None) -> np.ndarray:
    """(A x)_t = Σ_{k≤t} d_{t−k} x_k for any real x (no error bound), shape (T,).

    Used for constraint values and KKT checks; float64, recursion for dp/exponential,
    direct (T ≤ ``DIRECT_MAX_T``) or FFT convolution for hyperbolic.

    Raises
    ------
    InvalidInputError
        On a bad notion/parameter.
    """
    from scipy.signal import fftconvolve, lfilter

    notion, p = check_notion(notion, alpha, beta)
    x = np.asarray(x, dtype=float)
    if notion == "dp" or (notion == "exponential" and p == 1.0) or (notion == "hyperbolic" and p == 0.0):
        return np.cumsum(x)
    if notion == "exponential":
        return lfilter([1.0], [1.0, -p], x)
    g = discount_kernel("hyperbolic", x.size, beta=p)
    return _toeplitz_direct(x, g) if x.size <= DIRECT_MAX_T else fftconvolve(x, g)[: x.size]


def discounted_sum_transpose(y, notion: str, *, alpha=None, beta=None) -> np.ndarray:
    """(Aᵀ y)_k = Σ_{t≥k} d_{t−k} y_t, shape (T,) (the adjoint of :func:`discounted_sum`).

    Raises
    ------
    InvalidInputError
        On a bad notion/parameter.
    """
    y = np.asarray(y, dtype=float)
    return discounted_sum(y[::-1], notion, alpha=alpha, beta=beta)[::-1]


def solve_discounted_transpose(x, notion: str, *, alpha=None, beta=None) -> np.ndarray:
    """Solve Aᵀ λ = x for λ, A the discount matrix of :func:`discount_matrix` (unit diagonal).

    dp / exponential: λ_k = x_k − α x_{k+1} (A⁻¹ is bidiagonal).  Hyperbolic: A is lower-
    triangular Toeplitz with kernel d_j = 1/(1 + βj), a moment sequence (d_j = ∫₀¹ s^{βj} ds), so
    by Kaluza's theorem its inverse kernel h (h₀ = 1, h_n = −Σ_{j=1}^n d_j h_{n−j}) has h_n ≤ 0
    for n ≥ 1 and Σ_{n≥1} ``|h_n|`` ≤ 1: A⁻¹ is well conditioned (‖A⁻¹‖_∞ ≤ 2).  O(T²) time.

    Parameters
    ----------
    x : array_like, shape (T,)
    notion : {"dp", "exponential", "hyperbolic"}
    alpha, beta : float, optional

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        On a bad notion/parameter.
    """
    notion, p = check_notion(notion, alpha, beta)
    x = np.asarray(x, dtype=float)
    T = x.size
    if notion != "hyperbolic" or p == 0.0:
        a = 1.0 if notion != "exponential" else p
        lam = x.copy()
        lam[:-1] -= a * x[1:]
        return lam
    if T > DIRECT_MAX_T:  # O(T log T): inverse kernel by Newton's iteration, product by FFT
        from scipy.signal import fftconvolve

        h = inverse_discount_kernel("hyperbolic", T, beta=p)
        return fftconvolve(x[::-1], h)[:T][::-1]
    h = inverse_discount_kernel("hyperbolic", T, beta=p, method="direct")
    return _toeplitz_direct(x[::-1], h)[::-1]


def inverse_discount_kernel(notion: str, T: int, *, alpha=None, beta=None, method: str = "auto") -> np.ndarray:
    """Kernel h of A⁻¹ (lower-triangular Toeplitz): Σ_{j≤n} d_j h_{n−j} = [n = 0] for n < T, shape (T,).

    dp: h = (1, −1, 0, …); exponential: (1, −α, 0, …).  Hyperbolic: the power-series reciprocal of
    d_j = 1/(1 + βj); by Kaluza's theorem (d is log-convex) h_0 = 1, h_n ≤ 0 and Σ_{n≥1} ``|h_n|`` ≤ 1.
    ``"direct"``: the recursion h_n = −Σ_{j=1}^n d_j h_{n−j} (O(T²)); ``"fft"``: Newton's iteration
    h ← h (2 − d h) mod z^{2k}, doubling k, with FFT products (O(T log T)); the two agree to ~1e-16
    absolute (tested).  ``"auto"``: direct for T ≤ ``DIRECT_MAX_T``, else fft.

    Parameters
    ----------
    notion : {"dp", "exponential", "hyperbolic"}
    T : int
        Length (≥ 1).
    alpha, beta : float, optional
    method : {"auto", "direct", "fft"}

    Returns
    -------
    numpy.ndarray, shape (T,)

    Raises
    ------
    InvalidInputError
        On a bad notion/parameter, T < 1, or an unknown `method`.
    """
    notion, p = check_notion(notion, alpha, beta)
    T = check_horizon(T)
    if method not in ("auto", "direct", "fft"):
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose 'auto', 'direct' or 'fft'")
    h = np.zeros(T)
    h[0] = 1.0
    if notion != "hyperbolic" or p == 0.0:
        if T > 1:
            h[1] = -(1.0 if notion != "exponential" else p)
        return h
    d = discount_kernel("hyperbolic", T, beta=p)
    if method == "direct" or (method == "auto" and T <= DIRECT_MAX_T):
        for n in range(1, T):
            h[n] = -np.dot(d[1 : n + 1], h[n - 1 :: -1])  # series inverse of d
        return h
    from scipy import fft as sfft

    h = np.ones(1)
    k = 1
    while k < T:
        k2 = min(2 * k, T)
        N = sfft.next_fast_len(2 * k2)
        Hf = sfft.rfft(h, N)
        e = -sfft.irfft(sfft.rfft(d[:k2], N) * Hf, N)[:k2]  # 2 − d h (mod z^{k2})
        e[0] += 2.0
        h = sfft.irfft(Hf * sfft.rfft(e, N), N)[:k2]
        k = k2
    return h


# ----------------------------------------------------------------------------------------
# utility and data
# ----------------------------------------------------------------------------------------


def total_variance(schedule, weights=None) -> float:
    """Σ_t w_t · 2 b_t², the (weighted) total Laplace noise variance (squared query units).

    Raises
    ------
    InvalidInputError
        On negative/non-finite entries or mismatched lengths.
    """
    b = check_vector(schedule, "schedule", None, allow_zero=True, unit="Laplace scales")
    w = np.ones_like(b) if weights is None else check_vector(weights, "weights", b.size, allow_zero=True, unit="weights")
    return float(np.sum(w * 2.0 * b * b))


def expected_relative_error(schedule, truth) -> np.ndarray:
    """E|y(t) − f_t| / ``|f_t|`` = b_t / ``|f_t|`` for Laplace noise (Farokhi 2020, Section IV-B).

    Parameters
    ----------
    schedule : array_like, shape (T,)
        b_t ≥ 0.
    truth : array_like, shape (T,)
        The exact query values f_t(X(t)) (≠ 0).

    Returns
    -------
    numpy.ndarray, shape (T,)
        Dimensionless (E|Lap(b)| = b).

    Raises
    ------
    InvalidInputError
        On mismatched lengths, bad scales or a zero/non-finite true value.
    """
    b = check_vector(schedule, "schedule", None, allow_zero=True, unit="Laplace scales")
    f = np.asarray(truth, dtype=float)
    if f.shape != b.shape:
        raise InvalidInputError(f"`truth` must have the shape of `schedule` {b.shape}, got {f.shape}")
    bad = ~np.isfinite(f) | (f == 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidInputError(f"`truth` must be finite and ≠ 0; entry {i} is {float(f[i])!r}")
    return b / np.abs(f)
