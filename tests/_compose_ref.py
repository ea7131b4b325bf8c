"""The all-ages baseline of :func:`policyopt.privacy.age_dependent.compose` (tests and benchmarks).

``compose_all_ages`` is the body of ``compose`` as it was on main at commit 4d09d05, before ``compose`` evaluated Δ
only on the ages Theorem 3 of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf.
Theory, 2024 looks up: it evaluates Δ at every age 0..horizon.  Kept verbatim (only the docstring dropped) so that
tests can check the new ``compose`` against it bit for bit and the benchmark can time both in the same run.  The
private helpers it used are re-created here from their definitions on that commit (so no private name is imported).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.models.markov import as_slots
from policyopt.privacy.age_dependent import Composition, log_expm1, log_max_tv_table


def _leak_log(log_max_tv, eps):
    with np.errstate(invalid="ignore"):
        return np.logaddexp(0.0, np.asarray(log_max_tv, dtype=float) + log_expm1(eps))


def _check_epsilon(values, name="epsilon_c"):
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"`{name}` must be a non-negative number (nats), got {fmt(values)}") from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidInputError(f"`{name}` must be a finite non-negative number (nats), got {fmt(values)}")
    return arr


def compose_all_ages(
    publish_times,
    ages,
    epsilon_c,
    max_tv: Callable | np.ndarray,
    horizon: int | None = None,
) -> Composition:
    """The implementation of compose before it evaluated only the needed ages (verbatim, docstring dropped)."""
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
    table = log_max_tv_table(max_tv, T + 1)

    prior = np.zeros(n)
    for k in range(1, n):
        # ε(S_k − A_k): previous epoch's eq. (25) at t = S_k − A_k
        prior[k] = _leak_log(table[tau[k] - tau[k - 1]], eps[k - 1] + prior[k - 1])
    total = eps + prior  # ε_{C,n} + ε(S_n − A_n)

    times = np.arange(T + 1)
    epoch = np.searchsorted(S, times, side="right") - 1  # index n with S_n ≤ t < S_{n+1}
    risk = np.zeros(T + 1)
    aoi = np.full(T + 1, np.nan)
    live = epoch >= 0
    lag = times[live] - tau[epoch[live]]
    risk[live] = _leak_log(table[lag], total[epoch[live]])  # eq. (25)
    aoi[live] = lag  # eq. (24): A_n at S_n, +1 per slot
    peaks = _leak_log(table[A], total)
    return Composition(times=times, risk=risk, aoi=aoi, epoch_peaks=np.asarray(peaks), prior_risk=prior)

