"""The horizon design problem: the schedule whose largest age-dependent risk over a finite horizon is smallest.

When condition (31) of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024 (ε_C < −ln Δ(S̄)) fails for every schedule meeting the utility bound, no schedule has a finite peak risk
ε\\* over an infinite horizon; over a deployment of H slots the risk is still finite.  A stationary schedule
(A, S̄, ε_C) publishes at τ_n = A + (n − 1)·S̄ ≤ H, n = 1..N, and by Theorem 3 (eq. (25)) its risk just after the
last publication is the largest over the horizon::

    minimise    max_{t ≤ H} ε(t; A, S̄, ε_C)      (Theorem 3 over H slots, nats)                     (H1)
    subject to  max_{a = A..A+S̄−1} f(a, ε_C) ≤ f̄                                                  (H2)
                A ∈ {0..A_max},  S̄ ∈ {1..S_max} (slots),  ε_C > 0 (nats),  N = ⌊(H − A)/S̄⌋ + 1 ≥ 1

with f the penalty of eq. (27) (the max over the ages an epoch goes through, as in
:class:`~policyopt.problems.ScheduleProblem`).  Theorem 3 assumes the readings are a first-order Markov chain on the
slot grid with the Δ(t) given; the reports state this risk only under a model the data did not refute.

Proof that enumeration solves it
--------------------------------
(i) For a fixed (A, S̄) the recursion ε(τ_k) = ln(1 + Δ(S̄)·(e^{ε_C + ε(τ_{k−1})} − 1)) and the final step with Δ(A)
are increasing in ε_C (each map x ↦ ln(1 + d·(e^x − 1)), d ∈ [0, 1], is non-decreasing), so the smallest ε_C meeting
(H2) — the penalty's ``min_epsilon_c_table``, exact for penalties proven non-increasing in ε_C — is optimal per cell.

(ii) Every cell of the box is evaluated, so the minimum over the box is global; ties are broken by the smaller A,
then the smaller S̄.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.problems.age_dependent import Schedule, ScheduleBox
from policyopt.result import result_repr
from policyopt.utility.penalty import Penalty, check_epsilon_c, check_max_penalty

__all__ = ["HorizonDesignProblem", "HorizonEvaluation"]


@dataclass(frozen=True)
class HorizonEvaluation:
    """One schedule evaluated by :meth:`HorizonDesignProblem.evaluate`.

    Attributes
    ----------
    schedule : Schedule
        (A, S̄, ε_C).
    horizon_risk : float
        The largest risk over the horizon (nats): Theorem 3's ε(t) composed over the N publications.
    releases : int
        N, the publications τ_n = A + (n − 1)·S̄ ≤ H.
    penalty : float
        The largest penalty over the epoch's ages A..A + S̄ − 1.
    feasible : bool
        (H2) holds and the schedule lies in the box.
    violations : tuple of str
        Why not, when not feasible.
    """

    schedule: Schedule
    horizon_risk: float
    releases: int
    penalty: float
    feasible: bool
    violations: tuple = ()

    def __repr__(self) -> str:
        return result_repr(self, first=("schedule",))


class HorizonDesignProblem(ScheduleBox):
    """Smallest largest risk over H slots among stationary schedules meeting a utility bound: problem (H1)–(H2).

    Parameters
    ----------
    max_tv : MaxTVSource
        Δ(t) of the readings' Markov model (``n_users`` and ``log_max_tv``, e.g. a
        :class:`~policyopt.models.tabulated.TabulatedMaxTV`), tabulated at least to max(A_max, S_max).
    penalty : Penalty
        Utility penalty f(t, ε_C) with ``min_epsilon_c_table``, non-increasing in ε_C.
    max_penalty : float
        f̄ > 0, in the penalty's unit.
    A_max, S_max : int
        The box (slots): 0 ≤ A ≤ A_max, 1 ≤ S̄ ≤ S_max.
    horizon : int
        H ≥ 1, the last slot of the deployment.

    Raises
    ------
    InvalidInputError
        If `max_tv` has no ``log_max_tv``, `penalty` is not a Penalty, `max_penalty` is not positive and finite, or
        `horizon`, `A_max`, `S_max` are not integers in range.

    References
    ----------
    Zhang et al. (2024), Theorem 3 (eq. (25)), eqs. (27), (31).
    """

    solver_family = "horizon"
    objective = "the largest age-dependent risk over the horizon (Theorem 3), nats"
    constraints = ("(H2) max_{a=A..A+S̄−1} f(a, ε_C) ≤ f̄",)

    def __init__(self, max_tv, penalty: Penalty, max_penalty: float, *, A_max: int, S_max: int, horizon: int):
        if not callable(getattr(max_tv, "log_max_tv", None)):
            raise InvalidInputError(f"`max_tv` must supply log_max_tv(t) (e.g. a TabulatedMaxTV), got {fmt(max_tv)}")
        if not isinstance(penalty, Penalty):
            raise InvalidInputError(f"`penalty` must be a Penalty (e.g. MSEPenalty), got {fmt(penalty)}")
        self.horizon = check_int(horizon, "horizon", 1, "slots")
        self.max_tv = max_tv
        self.penalty = penalty
        self.max_penalty = check_max_penalty(max_penalty)
        self.A_max = check_int(A_max, "A_max", 0, "slots")
        self.S_max = check_int(S_max, "S_max", 1, "slots")

    def __repr__(self) -> str:
        return (f"HorizonDesignProblem(penalty={self.penalty.name}, max_penalty={self.max_penalty!r}, "
                f"horizon={self.horizon}, A_max={self.A_max}, S_max={self.S_max})")

    def releases(self, A: int, S_bar: int) -> int:
        """N, the publications A + (n − 1)·S̄ ≤ H (0 when A > H)."""
        return (self.horizon - int(A)) // int(S_bar) + 1 if int(A) <= self.horizon else 0

    def composition_source(self):
        """Δ(t) for :func:`~policyopt.privacy.age_dependent.compose`: a tabulated `max_tv` continued by Δ = 1 beyond
        its table (no claim there), else `max_tv` itself."""
        from policyopt.models.tabulated import TabulatedMaxTV

        src = self.max_tv
        if isinstance(src, TabulatedMaxTV) and not src.beyond_one:
            return TabulatedMaxTV(src.log_max_tv_table, src.n_users, 1.0, beyond_one=True)
        return src

    def evaluate(self, A: int, S_bar: int, epsilon_c: float) -> HorizonEvaluation:
        """Evaluate a candidate schedule: its largest risk over the horizon by
        :func:`~policyopt.privacy.age_dependent.compose` (Theorem 3) and its penalty.

        Raises
        ------
        InvalidInputError
            If A < 0, S̄ < 1, ε_C is not positive and finite, or the schedule publishes nothing within H.
        """
        from policyopt.privacy.age_dependent import compose

        A = check_int(A, "A", 0, "slots")
        S_bar = check_int(S_bar, "S_bar", 1, "slots")
        eps = check_epsilon_c(epsilon_c)
        n = self.releases(A, S_bar)
        if n < 1:
            raise InvalidInputError(f"A = {A} publishes nothing within the horizon H = {self.horizon} slots")
        times = A + S_bar * np.arange(n)
        risk = float(np.max(compose(times, A, eps, self.composition_source(), horizon=self.horizon).risk))
        pen = self.epoch_penalty(A, S_bar, eps)
        violations = self.penalty_violations("(H2)", pen) + self.box_violations(A, S_bar)
        return HorizonEvaluation(Schedule(A, S_bar, eps), risk, n, pen, not violations, tuple(violations))
