"""Age-dependent privacy accounting: Theorem 1, composition Theorem 3, peak risk Proposition 3.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024.  Privacy is in nats, time in slots.

Every risk is computed in log space, as ln(1 + Δ(e^ε − 1)) = logaddexp(0, ln Δ + ln(e^ε − 1)),
so ε_C = 50 (or 5000) and Δ = 0 work.  Where Δ(t) may fall below the float range (≈1e-308)
while ε_C ≳ 700, pass ln Δ (``risk_after_aging_log``, or a chain to :func:`compose`); the
schedule problem and its solver work with ln Δ throughout.

Paper errors handled here
-------------------------
* Proposition 3 claims that the map (32) is a contraction with a constant L < 1 on the
  whole half-line.  It is not: F'(ε) → 1 as ε → ∞.  The iteration converges because F is
  increasing with F'(ε) ≤ Δ(S̄)e^{ε_C} < 1 on [0, ε'] below the fixed point ε', which is
  condition (31); :func:`peak_risk_iteration` uses that constant for its stopping rule.
* The map (67) in the proof of Theorem 4 is misprinted (it mixes Δ(S̄ + A) with Δ(A)·(ε − 1));
  it is not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import UNIT_ROUNDOFF, round_up
from policyopt.models.markov import as_slots
from policyopt.result import result_repr

__all__ = [
    "risk_after_aging",
    "risk_after_aging_log",
    "risk_after_aging_upper",
    "compose",
    "compose_schedule",
    "Composition",
    "peak_risk",
    "PeakRisk",
    "peak_risk_iteration",
    "PeakRiskIteration",
    "max_tv_rel_error",
    "peak_risk_margin",
    "peak_risk_upper",
]

def log_expm1(x):
    """ln(e^x − 1) for x ≥ 0 (−inf at 0), stable for large x."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(x > 30.0, x + np.log1p(-np.exp(-x)), np.log(np.expm1(np.minimum(x, 30.0))))


def _leak_log(log_max_tv, eps):
    """ln(1 + Δ·(e^ε − 1)) = logaddexp(0, ln Δ + ln(e^ε − 1)), from ln Δ (−inf for Δ = 0).

    Stable for any ε ≥ 0 and any ln Δ ≤ 0, including Δ below the float range.
    """
    with np.errstate(invalid="ignore"):
        return np.logaddexp(0.0, np.asarray(log_max_tv, dtype=float) + log_expm1(eps))


def _log(d):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(d, dtype=float))


def _leak(max_tv, eps):
    """ln(1 + Δ·(e^ε − 1)) elementwise from Δ in [0, 1]."""
    return _leak_log(_log(max_tv), eps)


def _check_max_tv(values, name="max_tv"):
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise InvalidInputError(f"`{name}` must lie in [0, 1] (a total variation distance), got {fmt(values)}")
    return arr


def _check_epsilon(values, name="epsilon_c"):
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"`{name}` must be a non-negative number (nats), got {fmt(values)}") from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidInputError(f"`{name}` must be a finite non-negative number (nats), got {fmt(values)}")
    return arr


def risk_after_aging(max_tv, epsilon_c):
    """Age-dependent risk ε(t) of an ε_C-DP single-query mechanism, Theorem 1 (eq. 14).

    ε(t) = ln(1 + Δ(t)·(e^{ε_C} − 1)).

    Parameters
    ----------
    max_tv : float or array_like
        Δ(t) in [0, 1] (e.g. ``chain.max_tv(t)``).
    epsilon_c : float or array_like
        Classical DP budget ε_C ≥ 0 (nats); broadcast against `max_tv`.

    Returns
    -------
    float or numpy.ndarray
        ε(t) in nats, broadcast shape of the inputs.  Equals ε_C when Δ = 1 and 0 when Δ = 0.

    Raises
    ------
    InvalidInputError
        If `max_tv` is outside [0, 1] or `epsilon_c` is negative or not finite.

    References
    ----------
    Zhang et al. (2024), Theorem 1, eq. (14).

    Examples
    --------
    >>> round(float(risk_after_aging(0.5, 50.0)), 6)  # ≈ 50 − ln 2
    49.306853
    """
    out = _leak(_check_max_tv(max_tv), _check_epsilon(epsilon_c))
    return float(out) if out.ndim == 0 else out


def risk_after_aging_log(log_max_tv, epsilon_c):
    """Theorem 1 (eq. 14) from ln Δ(t): use it when Δ(t) may underflow (ε_C ≳ 700).

    Parameters
    ----------
    log_max_tv : float or array_like
        ln Δ(t) ≤ 0 (−inf for Δ = 0), e.g. ``chain.log_max_tv(t)``.
    epsilon_c : float or array_like
        ε_C ≥ 0 (nats).

    Returns
    -------
    float or numpy.ndarray
        ε(t) in nats.

    Raises
    ------
    InvalidInputError
        If `log_max_tv` is positive or NaN, or `epsilon_c` is negative or not finite.
    """
    ld = np.asarray(log_max_tv, dtype=float)
    if np.any(np.isnan(ld)) or np.any(ld > 0):
        raise InvalidInputError(f"`log_max_tv` must be ≤ 0 (ln of a total variation distance), got {fmt(log_max_tv)}")
    out = _leak_log(ld, _check_epsilon(epsilon_c))
    return float(out) if out.ndim == 0 else out


def risk_after_aging_upper(log_max_tv, epsilon_c, age=0.0, *, exact_max_tv: bool = False):
    """An upper bound on Theorem 1 (eq. 14) from a computed ln Δ(age): ≥ ln(1 + Δ(e^{ε_C} − 1)) exactly.

    ln Δ is first raised by 2δ, δ = :func:`max_tv_rel_error` (``age``) the relative error of a
    computed Δ (0 with ``exact_max_tv``; the result is capped at ln 1 = 0), and the log-space
    value ε is then raised by the rounding of its evaluation, at most
    16·[(8 + ``|ln Δ|`` + ε_C + ``|ln(e^{ε_C} − 1)|``)·min(1, ε) + ε]·u (a few u per operation of
    ``logaddexp(0, y)``, y = ln Δ + ln(e^{ε_C} − 1), times the magnitudes it handles; an error of y moves
    the result by at most its derivative 1 − e^{−ε} ≤ min(1, ε) times it; u = 2⁻⁵³, a factor 4 to
    spare), and by one float step towards +∞.  Eq. (14) is increasing in ε_C and in Δ, so an
    upper bound on either input gives an upper bound on the output: a recursion (Theorem 3) stays
    an upper bound when each step is fed the previous step's upper bound (see :func:`compose`).

    Parameters
    ----------
    log_max_tv : float or array_like
        Computed ln Δ(age) ≤ 0 (−inf for Δ = 0, which gives exactly 0).
    epsilon_c : float or array_like
        ε_C ≥ 0 (nats), taken as exact (pass an upper bound, e.g. ``round_up(a + b)`` of a sum).
    age : float or array_like
        Age (slots) at which Δ was computed, for its error bound.
    exact_max_tv : bool, keyword-only
        Δ is exact (a user's table), no margin for it.

    Returns
    -------
    float or numpy.ndarray
        Upper bound on ε(t), nats.

    Raises
    ------
    InvalidInputError
        As :func:`risk_after_aging_log`.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
    Theorem 1 (eq. 14) and Theorem 3 (eq. 25).
    """
    ld = np.asarray(log_max_tv, dtype=float)
    if np.any(np.isnan(ld)) or np.any(ld > 0):
        raise InvalidInputError(f"`log_max_tv` must be ≤ 0 (ln of a total variation distance), got {fmt(log_max_tv)}")
    eps = _check_epsilon(epsilon_c)
    age = np.asarray(age, dtype=float)
    ld_up = np.minimum(ld + 2.0 * _max_tv_margin(age, exact_max_tv), 0.0)
    value = _leak_log(ld_up, eps)
    le = log_expm1(eps)
    with np.errstate(invalid="ignore"):
        up = _rounded_up(value, np.where(np.isfinite(ld), np.abs(ld), 0.0), eps,
                         np.where(np.isfinite(le), np.abs(le), 0.0))
    # a positive exact value (ε > 0 and Δ > 0) that underflows to 0 is below half the least subnormal: bounded by it
    positive = (value > 0) | ((eps > 0) & np.isfinite(ld_up))
    out = np.where(positive, up, value)
    return float(out) if out.ndim == 0 else out


def _max_tv_margin(age, exact_max_tv: bool):
    """:func:`max_tv_rel_error` of a float or an array of ages (0 when Δ is exact): the one place of that margin
    for :func:`risk_after_aging_upper` and its scalar path :func:`_upper_1`."""
    return 0.0 if exact_max_tv else MAX_TV_ERROR_FACTOR * (age + 1.0) * UNIT_ROUNDOFF


def _rounded_up(value, abs_log_max_tv, epsilon_c, abs_log_expm1):
    """value = logaddexp(0, y), y = ln Δ + ln(e^{ε_C} − 1), raised by the bound on its rounding and one float step
    (floats or arrays; ``abs_*`` are the magnitudes, 0 where infinite): the one place of that bound for
    :func:`risk_after_aging_upper` and :func:`_upper_1`.  An absolute error e of y moves logaddexp(0, y) by
    ≤ e·(1 − e^{−value}) ≤ e·min(1, value)."""
    mag = (8.0 + abs_log_max_tv + epsilon_c + abs_log_expm1) * np.minimum(1.0, value) + value
    return np.nextafter(value + 16.0 * UNIT_ROUNDOFF * mag, np.inf)


def _log_expm1_1(x):
    """:func:`log_expm1` of one float x ≥ 0: the branch ``np.where`` selects, by the same ufuncs (bit for bit)."""
    return x + np.log1p(-np.exp(-x)) if x > 30.0 else np.log(np.expm1(np.minimum(x, 30.0)))


def _leak_log_1(log_max_tv, eps):
    """:func:`_leak_log` of one ln Δ and one ε (floats), bit for bit; call under ``np.errstate`` ignoring divide,
    over and invalid (what :func:`log_expm1` and :func:`_leak_log` ignore)."""
    return np.logaddexp(0.0, log_max_tv + _log_expm1_1(eps))


def _upper_1(log_max_tv, epsilon_c, age, exact_max_tv: bool) -> float:
    """:func:`risk_after_aging_upper` of one ln Δ, one ε_C and one age (floats): the same operations in the same order
    without the array conversions, bit for bit (Theorem 3's recursion calls it once per publication).  Inputs the
    checks refuse go to :func:`risk_after_aging_upper` (its error).  Call under ``np.errstate`` as
    :func:`_leak_log_1`."""
    ld, eps = log_max_tv, epsilon_c
    if not (ld <= 0.0) or not (0.0 <= eps < math.inf):
        return risk_after_aging_upper(ld, eps, age, exact_max_tv=exact_max_tv)
    ld_up = np.minimum(ld + 2.0 * _max_tv_margin(float(age), exact_max_tv), 0.0)
    le = _log_expm1_1(eps)
    value = np.logaddexp(0.0, ld_up + le)
    if value > 0 or (eps > 0 and math.isfinite(ld_up)):
        return float(_rounded_up(value, abs(ld) if math.isfinite(ld) else 0.0, eps,
                                 abs(le) if math.isfinite(le) else 0.0))
    return float(value)


@dataclass(frozen=True)
class Composition:
    """Risk and AoI trajectories of a multi-query mechanism (Theorem 3).

    Attributes
    ----------
    times : numpy.ndarray, shape (T+1,)
        Slots 0..T.
    risk : numpy.ndarray, shape (T+1,)
        ε(t) of eq. (25) in nats; 0 before the first publication.
    aoi : numpy.ndarray, shape (T+1,)
        AoI(t) of eq. (24) in slots; NaN before the first publication.
    epoch_peaks : numpy.ndarray, shape (N,)
        In-epoch peaks ε(S_n) (the value at each publication).
    prior_risk : numpy.ndarray, shape (N,)
        ε(S_n − A_n): leakage about the n-th input X_{S_n−A_n} from queries 1..n−1.
    risk_upper, epoch_peaks_upper, prior_risk_upper : numpy.ndarray
        The same three rounded outward: each step of the recursion evaluated by
        :func:`risk_after_aging_upper` on the upper bound of the previous step (eq. (25) is increasing
        in ε(S_n − A_n)), so each entry is ≥ the exact value for the given budgets and Δ.  These are
        the numbers to report.
    """

    times: np.ndarray
    risk: np.ndarray
    aoi: np.ndarray
    epoch_peaks: np.ndarray
    prior_risk: np.ndarray
    risk_upper: np.ndarray | None = None
    epoch_peaks_upper: np.ndarray | None = None
    prior_risk_upper: np.ndarray | None = None

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)

    @property
    def peak_risk(self) -> float:
        """max_n ε(S_n) over the publications, nats."""
        return float(np.max(self.epoch_peaks))


def log_max_tv_table(max_tv, n: int) -> np.ndarray:
    """ln Δ(0..n-1) from a chain/population (exact logs), a callable or a table."""
    owner = max_tv if hasattr(max_tv, "log_max_tv") else getattr(max_tv, "__self__", None)
    if owner is not None and hasattr(owner, "log_max_tv"):
        return np.asarray(owner.log_max_tv(np.arange(n)), dtype=float)
    return _log(_max_tv_table(max_tv, n))


def _max_tv_table(max_tv, n: int) -> np.ndarray:
    """Δ(0..n-1) from a callable or a table."""
    if callable(max_tv):
        table = np.asarray(max_tv(np.arange(n)), dtype=float)
    else:
        table = np.asarray(max_tv, dtype=float).reshape(-1)
        if table.size < n:
            raise InvalidInputError(
                f"`max_tv` table has {table.size} entries but ages up to {n - 1} slots are needed; "
                "pass a longer table or a callable such as `chain.max_tv`"
            )
        table = table[:n]
    return _check_max_tv(table)


def compose_schedule(publish_times, ages, epsilon_c, horizon=None):
    """Validated inputs of Theorem 3: times, agings, budgets, input time stamps and horizon of :func:`compose`.

    Parameters
    ----------
    publish_times : array_like of int, shape (N,)
        Publishing times S_1 < S_2 < ... (slots).
    ages : int or array_like of int, shape (N,)
        Agings A_n ≥ 0 (slots), a scalar broadcast to every publication.
    epsilon_c : float or array_like, shape (N,)
        Per-query classical budgets ε_{C,n} ≥ 0 (nats), a scalar broadcast to every publication.
    horizon : int, optional
        Last slot T of the trajectory (default: the last publishing time).

    Returns
    -------
    S : numpy.ndarray of int, shape (N,)
        Publishing times.
    A : numpy.ndarray of int, shape (N,)
        Agings.
    eps : numpy.ndarray of float, shape (N,)
        Budgets ε_{C,n} (nats).
    tau : numpy.ndarray of int, shape (N,)
        Input time stamps S_n − A_n (slots), ≥ 0 and non-decreasing.
    T : int
        Last slot of the trajectory, ≥ S_N.

    Raises
    ------
    InvalidInputError
        If the times are not strictly increasing non-negative integers, if an input time stamp
        S_n − A_n is negative or smaller than the previous one (Theorem 3's proof needs them
        non-decreasing), if shapes disagree or if `horizon` precedes the last publication.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory,
    2024, Theorem 3.
    """
    S = as_slots(np.atleast_1d(publish_times), "publish_times")
    if S.ndim != 1 or S.size == 0:
        raise InvalidInputError(f"`publish_times` must be a non-empty 1-D sequence, got {fmt(publish_times)}")
    if np.any(np.diff(S) <= 0):
        raise InvalidInputError(f"`publish_times` must be strictly increasing, got {fmt(S.tolist())}")
    n = S.size
    A = np.broadcast_to(as_slots(ages, "ages"), (n,)) if np.ndim(ages) == 0 else as_slots(ages, "ages")
    if A.shape != (n,):
        raise InvalidInputError(f"`ages` must have one entry per publication ({n}), got {fmt(ages)}")
    eps = _check_epsilon(epsilon_c)
    eps = np.broadcast_to(eps, (n,)) if eps.ndim == 0 else eps
    if eps.shape != (n,):
        raise InvalidInputError(f"`epsilon_c` must have one entry per publication ({n}), got {fmt(epsilon_c)}")
    tau = S - A
    if np.any(tau < 0):
        k = int(np.flatnonzero(tau < 0)[0])
        raise InvalidInputError(
            f"input time stamp S_n − A_n = {int(tau[k])} of publication {k} is negative "
            f"(`publish_times`[{k}]={int(S[k])}, `ages`[{k}]={int(A[k])}); the process starts at slot 0"
        )
    if np.any(np.diff(tau) < 0):
        k = int(np.flatnonzero(np.diff(tau) < 0)[0]) + 1
        raise InvalidInputError(
            f"input time stamps S_n − A_n must be non-decreasing (Theorem 3), but publication {k} "
            f"uses slot {int(tau[k])} after publication {k - 1} used slot {int(tau[k - 1])}"
        )
    T = int(S[-1]) if horizon is None else int(as_slots([horizon], "horizon")[0])
    if T < S[-1]:
        raise InvalidInputError(f"`horizon`={T} is before the last publication at slot {int(S[-1])}")
    return S, A, eps, tau, T


def compose(
    publish_times,
    ages,
    epsilon_c,
    max_tv: Callable | np.ndarray,
    horizon: int | None = None,
) -> Composition:
    """Risk trajectory of arbitrary publishing times, agings and budgets (Theorem 3, eq. 25).

    For t in the n-th epoch [S_n, S_{n+1}),
    ε(t) = ln(1 + Δ(t − S_n + A_n)·(exp(ε_{C,n} + ε(S_n − A_n)) − 1)), where ε(S_n − A_n) is
    the leakage about the n-th input X_{S_n − A_n} of queries 1..n−1, i.e. the previous
    epoch's formula evaluated at S_n − A_n (0 for the first query).  This definition also
    covers A_n > S̄, where S_n − A_n lies before S_{n−1}.

    Parameters
    ----------
    publish_times : array_like of int, shape (N,)
        Publishing times S_1 < S_2 < ... (slots).
    ages : int or array_like of int, shape (N,)
        Agings A_n ≥ 0 (slots); input time stamps S_n − A_n must be ≥ 0 and non-decreasing.
    epsilon_c : float or array_like, shape (N,)
        Per-query classical budgets ε_{C,n} ≥ 0 (nats).
    max_tv : MarkovChain, Population, callable or array_like
        Δ as a function of age or a table Δ(0), Δ(1), ... of length ≥ horizon + 1.  A chain or
        population (or its bound ``max_tv`` method) is evaluated through ``log_max_tv``, so
        Δ below the float range still counts.  Must be non-increasing for ε(S_n) to be the
        in-epoch peak.  A chain, population or callable is evaluated only at the ages
        0, 1, ..., L, L the largest lag Theorem 3 looks up (see Notes), not up to the horizon.
    horizon : int, optional
        Last slot T of the trajectory (default: the last publishing time).

    Returns
    -------
    Composition

    Raises
    ------
    InvalidInputError
        If the times are not strictly increasing non-negative integers, if an input time
        stamp S_n − A_n is negative or smaller than the previous one (Theorem 3's proof
        needs them non-decreasing), if shapes disagree, if `horizon` precedes the last
        publication, or if a table is too short.

    Notes
    -----
    Eq. (25) needs Δ only at the lags t − (S_n − A_n) of the slots t of each epoch (A_n at the
    publication), and at (S_k − A_k) − (S_{k−1} − A_{k−1}) for the prior risks; the largest, L,
    is A + S̄ − 1 for an equal-spacing schedule however long the horizon.  Δ is evaluated on
    0..L rather than only at those lags because the exact evaluation of a chain steps age by
    age: a prefix of the ages gives every value bit for bit as the evaluation up to the horizon
    does (the test suite checks this against that evaluation).  A table is still validated
    up to the horizon.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory,
    2024, Theorem 3 (eq. 25), AoI Definition 11 (eq. 24).
    """
    S, A, eps, tau, T = compose_schedule(publish_times, ages, epsilon_c, horizon)
    n = S.size
    times = np.arange(T + 1)
    epoch = np.searchsorted(S, times, side="right") - 1  # index n with S_n ≤ t < S_{n+1}
    live = epoch >= 0
    lag = times[live] - tau[epoch[live]]
    # Theorem 3 looks Δ up only at the lags t − (S_n − A_n) inside each epoch, at A_n and at
    # τ_k − τ_{k−1}; the largest of them is usually far below the horizon (A + S̄ − 1 for an
    # equal-spacing schedule).  Δ is evaluated on the ages 0..max_lag: a table is validated in full
    # as before, a chain or population steps age by age exactly as over 0..T, so every value is
    # bit for bit the one an evaluation at every age up to the horizon gives.
    max_lag = max(int(lag.max()), int(A.max()), int(np.diff(tau).max()) if n > 1 else 0)
    if callable(max_tv) or hasattr(max_tv, "log_max_tv"):
        table = log_max_tv_table(max_tv, max_lag + 1)
    else:
        table = log_max_tv_table(max_tv, T + 1)  # a table: checked up to the horizon, as documented

    exact_tv = not (callable(max_tv) or hasattr(max_tv, "log_max_tv"))  # a user's table is taken as exact
    prior = np.zeros(n)
    prior_up = np.zeros(n)
    for k in range(1, n):
        # ε(S_k − A_k): previous epoch's eq. (25) at t = S_k − A_k
        d = tau[k] - tau[k - 1]
        if (k >= 2 and d == tau[k - 1] - tau[k - 2] and eps[k - 1] == eps[k - 2] and prior[k - 1] == prior[k - 2]
                and prior_up[k - 1] == prior_up[k - 2]):
            # the same inputs as step k − 1 (a float fixed point of an equal-spacing run): the same values, bit for bit
            prior[k], prior_up[k] = prior[k - 1], prior_up[k - 1]
            continue
        e_k, e_up = eps[k - 1] + prior[k - 1], round_up(eps[k - 1] + prior_up[k - 1])
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # one float each: the array code's values
            prior[k] = _leak_log_1(table[d], e_k)
            prior_up[k] = _upper_1(table[d], e_up, d, exact_tv)
    total = eps + prior  # ε_{C,n} + ε(S_n − A_n)
    total_up = np.nextafter(eps + prior_up, np.inf)

    risk = np.zeros(T + 1)
    risk_up = np.zeros(T + 1)
    aoi = np.full(T + 1, np.nan)
    risk[live] = _leak_log(table[lag], total[epoch[live]])  # eq. (25)
    risk_up[live] = risk_after_aging_upper(table[lag], total_up[epoch[live]], lag, exact_max_tv=exact_tv)
    aoi[live] = lag  # eq. (24): A_n at S_n, +1 per slot
    peaks = _leak_log(table[A], total)
    peaks_up = risk_after_aging_upper(table[A], total_up, A, exact_max_tv=exact_tv)
    return Composition(times=times, risk=risk, aoi=aoi, epoch_peaks=np.asarray(peaks), prior_risk=prior,
                       risk_upper=risk_up, epoch_peaks_upper=np.atleast_1d(peaks_up), prior_risk_upper=prior_up)


@dataclass(frozen=True)
class PeakRisk:
    """Peak risk ε* of an equal-spacing policy (Proposition 3).

    Attributes
    ----------
    status : str
        ``"finite"`` when condition (31) Δ(S̄)e^{ε_C} < 1 holds, ``"divergent"`` otherwise.
    value : float or None
        ε* in nats (eq. 30); ``None`` when divergent.
    message : str
    """

    status: str
    value: float | None
    message: str

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


def log_condition_log(log_max_tv_s, epsilon_c):
    """ln(Δ(S̄) e^{ε_C}) from ln Δ(S̄); condition (31) is that this is < 0."""
    return np.asarray(log_max_tv_s, dtype=float) + np.asarray(epsilon_c, dtype=float)


def _log_condition(max_tv_s, epsilon_c):
    """ln(Δ(S̄) e^{ε_C}); condition (31) is that this is < 0."""
    return log_condition_log(_log(max_tv_s), epsilon_c)


def peak_risk_values_log(log_max_tv_a, log_max_tv_s, epsilon_c):
    """Vectorised eq. (30) from ln Δ(A), ln Δ(S̄); NaN where condition (31) fails.  Inputs broadcast."""
    eps = np.asarray(epsilon_c, dtype=float)
    u = log_condition_log(log_max_tv_s, eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_num = np.asarray(log_max_tv_a, dtype=float) + log_expm1(eps)  # ln(Δ(A)(e^{ε_C} − 1))
        log_den = np.log(-np.expm1(np.minimum(u, 0.0)))  # ln(1 − Δ(S̄)e^{ε_C})
        value = np.logaddexp(0.0, log_num - log_den)  # eq. (30)
    value = np.where(np.isnan(value) & np.isneginf(log_num), 0.0, value)
    return np.where(u < 0, value, np.nan)


def _peak_risk_values(max_tv_a, max_tv_s, epsilon_c):
    """Vectorised eq. (30) from Δ(A), Δ(S̄); NaN where condition (31) fails."""
    return peak_risk_values_log(_log(max_tv_a), _log(max_tv_s), epsilon_c)


def peak_risk(max_tv_a: float, max_tv_s: float, epsilon_c: float) -> PeakRisk:
    """Closed-form peak risk (30) of the equal-spacing policy (A, S̄, ε_C), with condition (31).

    ε* = ln(1 + Δ(A)(e^{ε_C} − 1) / (1 − Δ(S̄)e^{ε_C})) whenever Δ(S̄)e^{ε_C} < 1.

    Parameters
    ----------
    max_tv_a : float
        Δ(A), A the aging (slots).
    max_tv_s : float
        Δ(S̄), S̄ the inter-publish time (slots).
    epsilon_c : float
        Per-release classical budget ε_C ≥ 0 (nats).

    Returns
    -------
    PeakRisk
        ``status="divergent"`` and ``value=None`` when (31) fails: the in-epoch peaks
        ε(S_n) then grow without bound.

    Raises
    ------
    InvalidInputError
        If a Δ is outside [0, 1] or `epsilon_c` is negative or not finite.

    References
    ----------
    Zhang et al. (2024), Proposition 3, eqs. (30)–(31); Theorem 4.
    """
    dA = float(_check_max_tv(max_tv_a, "max_tv_a"))
    dS = float(_check_max_tv(max_tv_s, "max_tv_s"))
    eps = float(_check_epsilon(epsilon_c))
    if eps == 0.0:
        return PeakRisk("finite", 0.0, "ε_C = 0: the releases carry no information")
    u = float(_log_condition(dS, eps))
    if not u < 0:
        return PeakRisk(
            "divergent",
            None,
            f"condition (31) fails: Δ(S̄)·e^ε_C = {math.exp(min(u, 700)):.6g} ≥ 1, so the peak risk diverges; "
            "publish less often (larger S̄) or use a smaller ε_C",
        )
    value = float(_peak_risk_values(dA, dS, eps))
    return PeakRisk("finite", value, f"peak risk ε* = {value:.6g} nats (eq. 30)")


@dataclass(frozen=True)
class PeakRiskIteration:
    """Result of the fixed-point iteration (32).

    Attributes
    ----------
    status : str
        ``"converged"``, ``"divergent"`` (condition (31) fails) or ``"max_iter"``.
    value : float or None
        Proven upper bound on the limit of the in-epoch peaks ε(S_n) (nats): ε(S) evaluated
        at the last prior iterate plus its error bound; ``None`` when divergent.
    epoch_peaks : numpy.ndarray
        ε(S_n) for n = 1, 2, ... as iterated (empty when divergent); they increase to ε*.
    error_bound : float
        Proven bound on ε' − ε'_n for the prior risk at the last iterate (nats).
    """

    status: str
    value: float | None
    epoch_peaks: np.ndarray
    error_bound: float

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


def peak_risk_iteration(
    max_tv_a: float, max_tv_s: float, epsilon_c: float, *, tol: float = 1e-13, max_iter: int = 1_000_000
) -> PeakRiskIteration:
    """Peak risk by the fixed-point iteration (32), starting from ε(S_1 − A) = 0.

    ε(S_{n+1} − A) = ln(1 + Δ(S̄)(e^{ε_C} e^{ε(S_n − A)} − 1)),  ε(S_n) = ln(1 + Δ(A)(e^{ε_C + ε(S_n − A)} − 1)).

    The paper claims (32) is a contraction with constant < 1 everywhere; that is false
    (F'(ε) → 1 as ε → ∞).  Below the fixed point ε' the iterates increase and
    F' ≤ r = Δ(S̄)e^{ε_C}, which is < 1 exactly under (31); the stopping rule
    r/(1 − r)·``|step|`` ≤ tol therefore bounds the remaining error.

    Parameters
    ----------
    max_tv_a, max_tv_s : float
        Δ(A) and Δ(S̄).
    epsilon_c : float
        ε_C ≥ 0 (nats).
    tol : float
        Target relative error on the fixed point.
    max_iter : int
        Iteration cap.

    Returns
    -------
    PeakRiskIteration

    Raises
    ------
    InvalidInputError
        If a Δ is outside [0, 1], `epsilon_c` is negative, or `tol`/`max_iter` is not positive.

    References
    ----------
    Zhang et al. (2024), Proposition 3, eqs. (32)–(34).
    """
    dA = float(_check_max_tv(max_tv_a, "max_tv_a"))
    dS = float(_check_max_tv(max_tv_s, "max_tv_s"))
    eps = float(_check_epsilon(epsilon_c))
    if not (tol > 0 and max_iter >= 1):
        raise InvalidInputError(f"`tol` and `max_iter` must be positive, got tol={tol!r}, max_iter={max_iter!r}")
    u = float(_log_condition(dS, eps))
    if not u < 0:
        return PeakRiskIteration("divergent", None, np.empty(0), math.inf)
    r = math.exp(u)
    prior = 0.0
    peaks = []
    bound = math.inf
    status = "max_iter"
    for _ in range(max_iter):
        peaks.append(float(_leak(dA, eps + prior)))
        nxt = float(_leak(dS, eps + prior))  # eq. (32)
        step = nxt - prior
        prior = nxt
        bound = r / (1.0 - r) * abs(step) if r > 0 else 0.0
        if bound <= tol * max(prior, 1e-300):
            status = "converged"
            break
    peaks.append(float(_leak(dA, eps + prior)))
    # The iterates approach the fixed point from below; report the proven upper end.
    upper = float(_leak(dA, eps + prior + bound)) if math.isfinite(bound) else math.inf
    return PeakRiskIteration(status, upper, np.asarray(peaks), bound)


# ----------------------------------------------------------------------------------------
# outward rounding of the reported peak risk
# ----------------------------------------------------------------------------------------


MAX_TV_ERROR_FACTOR = 128.0  # c of the relative error c·(t + 1)·u assumed for a computed Δ(t); see max_tv_rel_error


def max_tv_rel_error(t) -> float:
    """Relative error bound 128·(t + 1)·u assumed for Δ(t) as computed by ``Population.log_max_tv``.

    u = 2⁻⁵³.  Measured against a 60-digit mpmath evaluation of eq. (12) of Zhang et al. (2024, reversed
    chain, exactly normalised rows, working precision raised until Δ(t) has 40 correct digits) on
    30 random chains with K ∈ {2, 3, 5, 8, 12} states (a third of them slowly mixing) at
    t ∈ {1, 3, 10, 30, 60, 100, 168}: the largest error was 7.2·(t + 1)·u; on 600 chains with
    K ∈ {2, …, 5} at t ∈ {1, 2, 3, 10, 30, 60, 100, 168}, a third of them with rows that nearly agree
    (Δ(1) down to 1e-6), it was 38.8·(t + 1)·u, so the factor 128 leaves a margin of about 3.3.  Those
    nearly independent chains need the reversed kernel's deviation P̂ − 1π without cancellation
    (:func:`policyopt.models.markov.reversed_deviation`): computed as a difference it had an absolute error
    of about u, i.e. a relative error of Δ(t) up to 1.6·10⁵·(t + 1)·u on the same chains.  This is a
    measured bound, not a proof, and the tests (``tests/privacy/test_outward_rounding.py``) keep checking it
    on generated chains.

    Parameters
    ----------
    t : float
        Age in slots (≥ 0; a relaxed, non-integer age is allowed).
    """
    return _max_tv_margin(float(t), False)


def peak_risk_margin(log_max_tv_a: float, log_max_tv_s: float, epsilon_c: float, A: float, S_bar: float) -> float:
    """Relative error bound of a computed eq. (30) value, for :func:`peak_risk_upper`.

    With x = Δ(A)(e^{ε_C} − 1)/(1 − r), r = Δ(S̄)e^{ε_C} < 1, and ε* = ln(1 + x), a relative error
    δ_A of Δ(A) and δ_S of Δ(S̄) give, to first order, a relative error of x of at most
    δ_A + δ_S·r/(1 − r), and x/((1 + x) ln(1 + x)) ≤ 1 carries it to ε*.  The log-space evaluation
    (:func:`peak_risk_values_log`) adds at most a few u per operation, times the magnitude of the
    logarithms it handles (ln Δ, ε_C).  The margin returned is the generous

        m = [128(A + 1) + 128(S̄ + 1) + 16·(8 + ``|ln Δ(A)|`` + ``|ln Δ(S̄)|`` + 2ε_C)] · u / (1 − r),

    (δ from :func:`max_tv_rel_error`, every term divided by 1 − r ≤ 1), which grows as condition (31)
    approaches equality, as the true error does.  Infinite (no finite bound) when r ≥ 1.

    Parameters
    ----------
    log_max_tv_a, log_max_tv_s : float
        ln Δ(A), ln Δ(S̄) (−inf for Δ = 0), or the envelope's ln c + t ln ρ for problem (39).
    epsilon_c : float
        ε_C (nats).
    A, S_bar : float
        The ages (slots) at which the Δ were computed.

    Returns
    -------
    float
        The relative margin m (dimensionless).

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
    eqs. (30)–(31).
    """
    u = UNIT_ROUNDOFF
    la = abs(log_max_tv_a) if math.isfinite(log_max_tv_a) else 0.0
    ls = abs(log_max_tv_s) if math.isfinite(log_max_tv_s) else 0.0
    log_r = log_max_tv_s + epsilon_c if math.isfinite(log_max_tv_s) else -math.inf
    if not log_r < 0:
        return math.inf
    one_minus_r = -math.expm1(log_r)
    terms = max_tv_rel_error(A) + max_tv_rel_error(S_bar) + 16.0 * (8.0 + la + ls + 2.0 * abs(epsilon_c)) * u
    return terms / one_minus_r


def peak_risk_upper(value, log_max_tv_a: float, log_max_tv_s: float, epsilon_c: float, A: float, S_bar: float):
    """The reported peak risk: a computed eq. (30) `value` rounded up by :func:`peak_risk_margin`.

    Returns ``None`` for ``None`` and `value` itself when it is not finite or exactly 0 (Δ(A) = 0 or
    ε_C = 0: then ε* = 0 exactly).

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
    eq. (30).
    """
    if value is None:
        return None
    return round_up(value, peak_risk_margin(log_max_tv_a, log_max_tv_s, epsilon_c, A, S_bar))
