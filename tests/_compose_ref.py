"""The all-ages baseline of :func:`policyopt.privacy.age_dependent.compose` (tests and benchmarks).

``compose_all_ages`` evaluates Theorem 3 of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE
Trans. Inf. Theory, 2024, eq. (25), the way ``compose`` did before it evaluated Δ only on the ages Theorem 3 looks
up: with Δ at every age 0..horizon.  Tests check the new ``compose`` against it bit for bit and the benchmarks time
both in the same run.

It is a second formulation, not a copy: ``compose`` maps every slot to its epoch at once (``searchsorted``) and
evaluates the trajectory in one vectorised pass from a table of ln Δ on 0..L, L the largest lag needed; this walks
the publications one by one, carries the prior risk ε(S_n − A_n) from epoch to epoch, fills each epoch's slots
[S_n, S_{n+1}) with eq. (25) written out from eq. (14) in log space, and reads Δ from a table of every age up to
the horizon.  Only the input checks are shared (:func:`policyopt.privacy.age_dependent.compose_schedule`): the
tests compare valid schedules, and the messages are tested on ``compose`` itself.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from policyopt.privacy.age_dependent import Composition, compose_schedule, log_expm1, log_max_tv_table


def _eq14_log(log_max_tv, eps):
    """ln(1 + Δ(e^ε − 1)) = logaddexp(0, ln Δ + ln(e^ε − 1)), Theorem 1 (eq. 14) from ln Δ."""
    with np.errstate(invalid="ignore"):
        return np.logaddexp(0.0, np.asarray(log_max_tv, dtype=float) + log_expm1(eps))


def compose_all_ages(publish_times, ages, epsilon_c, max_tv: Callable | np.ndarray, horizon: int | None = None
                     ) -> Composition:
    """Theorem 3 (eq. 25) epoch by epoch with Δ evaluated at every age 0..horizon; arguments as ``compose``."""
    S, A, eps, tau, T = compose_schedule(publish_times, ages, epsilon_c, horizon)
    table = log_max_tv_table(max_tv, T + 1)  # ln Δ(0..T): every age up to the horizon
    n = S.size
    times = np.arange(T + 1)
    risk = np.zeros(T + 1)  # 0 before the first publication
    aoi = np.full(T + 1, np.nan)
    prior = np.zeros(n)  # ε(S_n − A_n); 0 for the first query
    peaks = np.empty(n)
    for k in range(n):
        if k > 0:
            # the previous epoch's eq. (25) at its own lag S_k − A_k − (S_{k−1} − A_{k−1})
            prior[k] = _eq14_log(table[tau[k] - tau[k - 1]], eps[k - 1] + prior[k - 1])
        total = eps[k] + prior[k]  # ε_{C,k} + ε(S_k − A_k)
        stop = int(S[k + 1]) if k + 1 < n else T + 1
        lag = times[int(S[k]):stop] - tau[k]  # AoI, eq. (24): A_k at S_k, +1 per slot
        risk[int(S[k]):stop] = _eq14_log(table[lag], total)
        aoi[int(S[k]):stop] = lag
        peaks[k] = _eq14_log(table[A[k]], total)
    return Composition(times=times, risk=risk, aoi=aoi, epoch_peaks=peaks, prior_risk=prior)
