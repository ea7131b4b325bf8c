"""Problem (28) of Zhang et al. reduced by Theorem 4 to a stationary policy (A, S̄, ε_C).

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, problem (28), Theorem 4,
Proposition 3 (30)–(31)::

    minimise    ε*(A, S̄, ε_C) = ln(1 + Δ(A)(e^{ε_C} − 1) / (1 − Δ(S̄)e^{ε_C}))      (30)
    subject to  Δ(S̄) e^{ε_C} < 1                                                   (31)
                max_{a = A..A+S̄−1} f(a, ε_C) ≤ f̄                                   (28b)
                A ∈ {0..A_max},  S̄ ∈ {1..S_max} (slots),  ε_C > 0 (nats)

with the *exact* Δ(t) table of the users' chains (not the geometric surrogate (38)).
The penalty is evaluated over the ages an epoch goes through, whose maximum is at the
discrete peak AoI A + S̄ − 1 when f increases in t; the paper's A + S̄ is the convention
of its continuous relaxation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from policyopt.privacy.age_dependent import log_condition_log, peak_risk_values_log
from policyopt.errors import InvalidInputError, fmt
from policyopt.models.markov import Population
from policyopt.utility.penalty import Penalty, check_epsilon_c, check_max_penalty
from policyopt.result import result_repr

__all__ = ["ScheduleProblem", "Schedule", "ScheduleEvaluation", "MaxTVSource", "ScheduleBox"]


@runtime_checkable
class MaxTVSource(Protocol):
    """Anything that supplies Δ(t) of eq. (12) for a population of users, not only a finite chain.

    :class:`~policyopt.models.markov.Population` is one; :class:`~policyopt.models.ar1.AR1Model` (Appendix I,
    continuous states) is another.  The exact solver needs only these two members.
    """

    n_users: int

    def log_max_tv(self, t):
        """ln Δ(t) for ages `t` (slots), same shape; −inf where Δ(t) = 0."""


@dataclass(frozen=True)
class Schedule:
    """A stationary aging/publishing policy (Definition 12).

    Attributes
    ----------
    A : int
        Aging: age of each published input, slots.
    S_bar : int
        Inter-publish time, slots (≥ 1).
    epsilon_c : float
        Per-release classical DP budget, nats.
    """

    A: int
    S_bar: int
    epsilon_c: float

    @property
    def peak_aoi(self) -> int:
        """Discrete peak AoI A + S̄ − 1 (slots)."""
        return self.A + self.S_bar - 1


@dataclass(frozen=True)
class ScheduleEvaluation:
    """A candidate schedule evaluated with numpy alone.

    Attributes
    ----------
    schedule : Schedule
    peak_risk : float or None
        ε* of eq. (30) in nats; ``None`` when (31) fails (the risk diverges).
    penalty : float
        max over the epoch's ages of f(a, ε_C).
    peak_aoi : int
    condition_31 : float
        Δ(S̄)·e^{ε_C}; (31) holds iff it is < 1 (``inf`` if it overflows).
    feasible : bool
    violations : tuple of str
        Which constraints fail, in words.
    """

    schedule: Schedule
    peak_risk: float | None
    penalty: float
    peak_aoi: int
    condition_31: float
    feasible: bool
    violations: tuple[str, ...]

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


class ScheduleBox:
    """What the problems over stationary schedules (A, S̄, ε_C) in an integer box share.

    :class:`ScheduleProblem`, :class:`~policyopt.problems.model_free.ModelFreeProblem` and
    :class:`~policyopt.problems.horizon.HorizonDesignProblem` optimise a stationary policy (Definition 12 of
    Zhang et al. 2024) over A ∈ {0..A_max}, S̄ ∈ {1..S_max} (slots) and ε_C > 0 (nats) under the utility
    bound max_{a = A..A+S̄−1} f(a, ε_C) ≤ f̄ of eq. (27) ((28b), (M2), (H2)).  A subclass sets ``penalty``
    (a :class:`~policyopt.utility.penalty.Penalty`), ``max_penalty`` (f̄), ``A_max`` and ``S_max``, and names its
    back ends' family in :mod:`policyopt.registry` by ``solver_family``.
    """

    variables = ("A", "S_bar", "epsilon_c")
    integrality = {"A": "integer", "S_bar": "integer", "epsilon_c": "continuous"}
    is_convex = False
    #: The problem's key of ``policyopt.registry.BACKENDS``.
    solver_family = "schedule"

    def solve(self, method: str = "exact", **options):
        """Solve with a back end of the problem's ``solver_family``; the problem is not modified.

        Parameters
        ----------
        method : str
            A back end registered for the family.  ``"exact"`` (default) is the enumeration that proves the global
            optimum over the integer box: :class:`policyopt.solvers.exact.ExactScheduleSolver`,
            :class:`policyopt.solvers.model_free.ModelFreeSolver` (over S̄, with proven pruning) or
            :class:`policyopt.solvers.horizon.HorizonEnumeration`.
        **options
            Passed to the back end.

        Returns
        -------
        :class:`~policyopt.result.Solution`

        Raises
        ------
        InvalidInputError
            If `method` is not a back end of the family.
        """
        from policyopt.registry import get_solver  # by name: a problem never imports a solver

        return get_solver(method, self.solver_family).solve(self, **options)

    @property
    def bounds(self) -> dict:
        """Variable bounds: A in [0, A_max], S_bar in [1, S_max], epsilon_c in (0, inf)."""
        return {"A": (0, self.A_max), "S_bar": (1, self.S_max), "epsilon_c": (0.0, math.inf)}

    def epoch_penalty(self, A: int, S_bar: int, epsilon_c: float) -> float:
        """The largest penalty over the ages an epoch goes through, max_{a = A..A+S̄−1} f(a, ε_C).

        The left side of the utility bound of Zhang et al. (2024), eq. (27) / constraint (28b).

        Parameters
        ----------
        A : int
            Aging, slots (≥ 0, already checked).
        S_bar : int
            Inter-publish time, slots (≥ 1, already checked).
        epsilon_c : float
            Budget per release, nats (> 0, already checked).

        Returns
        -------
        float
            In the penalty's unit.
        """
        return float(np.max(self.penalty.value(np.arange(A, A + S_bar), epsilon_c)))

    def penalty_violations(self, label: str, penalty: float) -> list[str]:
        """``[]`` when `penalty` ≤ f̄, else the one violation ``"<label> fails: penalty … > f̄ = …"``.

        Parameters
        ----------
        label : str
            The constraint's number in its source, e.g. ``"(28b)"``.
        penalty : float
            :meth:`epoch_penalty` of the candidate, in the penalty's unit.

        Returns
        -------
        list of str
        """
        if not penalty <= self.max_penalty:
            return [f"{label} fails: penalty {penalty:.6g} > f̄ = {self.max_penalty:.6g}"]
        return []

    def box_violations(self, A: int, S_bar: int) -> list[str]:
        """``[]`` when A ≤ A_max and S̄ ≤ S_max, else the one violation ``"outside the box: …"``.

        Parameters
        ----------
        A, S_bar : int
            The candidate's aging and inter-publish time, slots.

        Returns
        -------
        list of str
        """
        if A > self.A_max or S_bar > self.S_max:
            return [f"outside the box: A = {A} (A_max = {self.A_max}), S̄ = {S_bar} (S_max = {self.S_max})"]
        return []


def _check_bound(value, name: str, lower: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lower:
        raise InvalidInputError(f"`{name}` must be an integer ≥ {lower} (slots), got {fmt(value)}")
    return int(value)


class ScheduleProblem(ScheduleBox):
    """Peak age-dependent risk minimisation over stationary schedules, problem (28) via Theorem 4.

    Parameters
    ----------
    population : Population or MaxTVSource
        Users' Markov chains; Δ(t) is their exact maximal TV distance, eq. (12).  Any object
        with ``n_users`` and ``log_max_tv(t)`` (e.g. :class:`~policyopt.models.ar1.AR1Model`) is accepted.
    penalty : Penalty
        Utility penalty f(t, ε_C), non-increasing in ε_C (e.g. :class:`~policyopt.utility.penalty.MSEPenalty`).
    max_penalty : float
        f̄ > 0, in the penalty's unit.
    A_max : int
        Largest aging considered (slots, ≥ 0).  ``A_max = 0`` is the no-aging setting of (42).
    S_max : int
        Largest inter-publish time considered (slots, ≥ 1).

    Raises
    ------
    InvalidInputError
        If `max_penalty` is not a positive finite number, `A_max` < 0, `S_max` < 1, or
        `population` / `penalty` have the wrong type.

    Notes
    -----
    The problem is nonconvex and mixed-integer (``is_convex`` is False): it is solved by
    exact enumeration over the integer box (``solve(method="exact")``), which is
    globally optimal because ε* increases in ε_C for fixed (A, S̄), so the smallest
    ε_C that meets f̄ is optimal for each pair.  Theorem 4 needs Δ(t) non-increasing,
    which holds for every Markov chain (total variation contracts under a kernel).

    References
    ----------
    Zhang et al. (2024), (28), Theorem 4, Proposition 3.
    """

    objective = "peak risk ε* of eq. (30), nats"
    constraints = (
        "(31) Δ(S̄)·exp(ε_C) < 1",
        "(28b) max_{a=A..A+S̄−1} f(a, ε_C) ≤ f̄",
    )

    def __init__(self, population: Population, penalty: Penalty, max_penalty: float, A_max: int = 168, S_max: int = 168):
        if not isinstance(population, (Population, MaxTVSource)):
            raise InvalidInputError(
                f"`population` must be a Population or provide `n_users` and `log_max_tv(t)`, got {fmt(population)}"
            )
        if not isinstance(penalty, Penalty):
            raise InvalidInputError(f"`penalty` must be a Penalty, got {fmt(penalty)}")
        self.population = population
        self.penalty = penalty
        self.max_penalty = check_max_penalty(max_penalty)
        self.A_max = _check_bound(A_max, "A_max", 0)
        self.S_max = _check_bound(S_max, "S_max", 1)
        # ln Δ(0..max+1): one extra slot lets a solver probe A_max + 1 and S_max + 1.  Logs, so
        # that Δ below the float range still counts when ε_C is large.
        self._log_max_tv = np.asarray(population.log_max_tv(np.arange(max(self.A_max, self.S_max) + 2)), dtype=float)
        self._log_max_tv.setflags(write=False)

    def __repr__(self) -> str:
        return (
            f"ScheduleProblem(users={self.population.n_users}, penalty={self.penalty.name}, "
            f"max_penalty={self.max_penalty!r}, A_max={self.A_max}, S_max={self.S_max})"
        )

    @property
    def max_tv_table(self) -> np.ndarray:
        """Exact Δ(t) for t = 0..max(A_max, S_max) + 1 (may underflow to 0; see ``log_max_tv_table``)."""
        return np.exp(self._log_max_tv)

    @property
    def log_max_tv_table(self) -> np.ndarray:
        """ln Δ(t) for t = 0..max(A_max, S_max) + 1, read-only (−inf where Δ = 0 exactly)."""
        return self._log_max_tv

    def restrict(self, *, A_max: int | None = None, S_max: int | None = None) -> "ScheduleProblem":
        """A new problem with a smaller box (this one is not changed)."""
        A_new = self.A_max if A_max is None else _check_bound(A_max, "A_max", 0)
        S_new = self.S_max if S_max is None else _check_bound(S_max, "S_max", 1)
        if A_new > self.A_max or S_new > self.S_max:
            raise InvalidInputError(
                f"`restrict` can only shrink the box (A_max ≤ {self.A_max}, S_max ≤ {self.S_max}), "
                f"got A_max={A_new}, S_max={S_new}"
            )
        new = object.__new__(ScheduleProblem)
        new.__dict__.update(self.__dict__)
        new.A_max, new.S_max = A_new, S_new
        return new

    def evaluate(self, A: int, S_bar: int, epsilon_c: float) -> ScheduleEvaluation:
        """Evaluate a candidate schedule with numpy alone.

        Parameters
        ----------
        A : int
            Aging (slots), 0 ≤ A ≤ A_max + 1.
        S_bar : int
            Inter-publish time (slots), 1 ≤ S_bar ≤ S_max + 1.
        epsilon_c : float
            Budget per release (nats), > 0.

        Returns
        -------
        ScheduleEvaluation

        Raises
        ------
        InvalidInputError
            If a value is outside the ranges above.
        """
        top = len(self._log_max_tv) - 1
        A = _check_bound(A, "A", 0)
        S_bar = _check_bound(S_bar, "S_bar", 1)
        if A > top or S_bar > top:
            raise InvalidInputError(f"`A`={A} / `S_bar`={S_bar} beyond the problem's table (max {top} slots)")
        eps = check_epsilon_c(epsilon_c)
        pen = self.epoch_penalty(A, S_bar, eps)
        u = float(log_condition_log(self._log_max_tv[S_bar], eps))
        cond = math.exp(u) if u < 709 else math.inf
        risk = float(peak_risk_values_log(self._log_max_tv[A], self._log_max_tv[S_bar], eps)) if u < 0 else None
        violations = [] if u < 0 else [f"(31) fails: Δ(S̄)·e^ε_C = {cond:.6g} ≥ 1"]
        violations += self.penalty_violations("(28b)", pen)
        return ScheduleEvaluation(
            schedule=Schedule(A, S_bar, eps),
            peak_risk=risk,
            penalty=pen,
            peak_aoi=A + S_bar - 1,
            condition_31=cond,
            feasible=not violations,
            violations=tuple(violations),
        )
