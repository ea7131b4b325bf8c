"""The model-free design problem: the schedule whose releases compose to the smallest (ε, δ), no Markov model.

A stationary schedule (A, S̄, ε_C) releases every S̄ slots the mean of I users' readings taken A slots earlier plus
Laplace noise of budget ε_C; over a horizon of H slots one user's series is read by k(S̄) = ⌈H/S̄⌉ releases, each
ε_C-DP with respect to it, so the guarantee for the whole series — whatever its correlation — is the composition of
k(S̄) Laplace mechanisms (:mod:`policyopt.privacy.model_free`)::

    minimise    ε(δ; ε_C, k(S̄))   (PLD accountant of dp_accounting, pessimistic; ≤ k(S̄)·ε_C)     (M1)
    subject to  max_{a = A..A+S̄−1} f(a, ε_C) ≤ f̄                                                 (M2)
                A ∈ {0..A_max},  S̄ ∈ {1..S_max} (slots),  ε_C > 0 (nats),  k(S̄) = ⌈H/S̄⌉

with f the penalty of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2),
2024, eq. (27) (the max over the ages an epoch goes through, as in :class:`~policyopt.problems.ScheduleProblem`).

Proof that enumeration solves it
--------------------------------
(i) k depends on S̄ alone, not on A, so for each S̄ only the smallest ε_C over A ∈ {0..A_max} that meets (M2)
matters, by (ii); the smallest A attaining it is taken (aging buys nothing of its own here: unlike the age-dependent
risk of Zhang et al., the model-free ε does not decay with the age of the data).

(ii) For fixed k the exact ε(δ) is non-decreasing in ε_C.  With b = Δf/ε_C and b' > b, the characteristic function of
Lap(b') divided by that of Lap(b) is

    (1 + b²ω²)/(1 + b'²ω²) = (b/b')² + (1 − (b/b')²)/(1 + b'²ω²),

the characteristic function of the mixture (b/b')²·δ₀ + (1 − (b/b')²)·Lap(b'); so Lap(b') = Lap(b) + independent
noise, i.e. a release with the smaller budget is a post-processing (garbling) of the release with the larger one,
and a composition of garblings is a garbling of the composition, which cannot increase any hockey-stick divergence
(C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Proposition 2.1).  Hence for each
(A, S̄) the smallest ε_C meeting (M2) — the penalty's ``min_epsilon_c_table(A_max, S_max, f̄)``, exact for
penalties proven non-increasing in ε_C — is optimal.

(iii) Every S̄ ∈ {1..S_max} is accounted for: each is either evaluated or discarded by a proven lower bound
(:func:`~policyopt.privacy.model_free.laplace_epsilon_lower_bound`, the exact ε(δ) of two binary garblings of the
k releases) that exceeds an evaluated objective.  So the enumeration is exhaustive.

The objective reported is the accountant's certified upper bound (pessimistic PLD on the adaptive grid of
:func:`~policyopt.privacy.model_free.pld_discretization`, within a measured 0.1 % of the default grid), which is what
the search minimises; (ii) is a statement about the exact ε(δ), which that bound tracks within its looseness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.privacy.model_free import ModelFreeGuarantee, check_delta, check_windows, model_free_guarantee
from policyopt.problems.age_dependent import Schedule, ScheduleBox
from policyopt.result import result_repr
from policyopt.utility.penalty import Penalty, check_epsilon_c, check_max_penalty

__all__ = ["ModelFreeProblem", "ModelFreeEvaluation"]


@dataclass(frozen=True)
class ModelFreeEvaluation:
    """A candidate schedule of :class:`ModelFreeProblem` evaluated (numpy and the accountant, no solver).

    Attributes
    ----------
    schedule : Schedule
        (A, S̄, ε_C).
    guarantee : ModelFreeGuarantee
        The model-free guarantee of its ⌈H/S̄⌉ releases over the horizon.
    epsilon : float
        The objective (M1): ``guarantee.epsilon`` (nats, rounded up).
    penalty : float
        max over the epoch's ages of f(a, ε_C), in the penalty's unit.
    peak_aoi : int
        A + S̄ − 1 (slots).
    feasible : bool
    violations : tuple of str
        The constraints that fail, in words.
    """

    schedule: Schedule
    guarantee: ModelFreeGuarantee
    epsilon: float
    penalty: float
    peak_aoi: int
    feasible: bool
    violations: tuple[str, ...]

    def __repr__(self) -> str:
        """A short multi-line summary."""
        return result_repr(self)


class ModelFreeProblem(ScheduleBox):
    """Smallest model-free (ε, δ) over stationary schedules meeting a utility bound: problem (M1)–(M2).

    Parameters
    ----------
    penalty : Penalty
        Utility penalty f(t, ε_C), non-increasing in ε_C (e.g. :class:`~policyopt.utility.penalty.MSEPenalty` or
        :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty`).
    max_penalty : float
        f̄ > 0, in the penalty's unit.
    horizon : int
        H ≥ 1 (slots): the releases over H slots are composed.
    delta : float
        0 ≤ δ < 1 (e.g. :func:`~policyopt.privacy.model_free.default_delta` of the deployment size); δ = 0 gives
        the pure k·ε_C.
    A_max : int
        Largest aging considered (slots, ≥ 0; default 0: aging never lowers this objective, see the module docstring).
    S_max : int
        Largest inter-publish time considered (slots, ≥ 1).
    windows : sequence of int
        w-event windows (slots) reported with the guarantee (e.g. (24, 168)); they do not change the objective.

    Raises
    ------
    InvalidInputError
        If `penalty` is not a Penalty, `max_penalty` is not a positive finite number, `horizon` < 1, δ is not in
        [0, 1), `A_max` < 0, `S_max` < 1 or a window is not an integer ≥ 1.

    Notes
    -----
    Nonconvex and mixed-integer (``is_convex`` is False); ``solve(method="exact")`` enumerates S̄ with the proof of
    the module docstring.

    References
    ----------
    Dwork & Roth (2014), Theorem 3.16; Zhang et al. (2024), eq. (27), Proposition 2; Kellaris, Papadopoulos, Xiao,
    Papadias, "Differentially Private Event Sequences over Infinite Streams", PVLDB 7(12), 2014.
    """

    solver_family = "model-free"
    objective = "ε(δ) of the ⌈H/S̄⌉ Laplace releases over the horizon (PLD accountant, ≤ k·ε_C), nats"
    constraints = ("(M2) max_{a=A..A+S̄−1} f(a, ε_C) ≤ f̄",)

    def __init__(self, penalty: Penalty, max_penalty: float, *, horizon: int, delta: float, A_max: int = 0,
                 S_max: int = 168, windows=()):
        if not isinstance(penalty, Penalty):
            raise InvalidInputError(f"`penalty` must be a Penalty (e.g. MSEPenalty), got {fmt(penalty)}")
        self.penalty = penalty
        self.max_penalty = check_max_penalty(max_penalty)
        self.horizon = check_int(horizon, "horizon", 1, "slots")
        self.delta = check_delta(delta)
        self.A_max = check_int(A_max, "A_max", 0, "slots")
        self.S_max = check_int(S_max, "S_max", 1, "slots")
        self.windows = check_windows(windows)

    def __repr__(self) -> str:
        return (f"ModelFreeProblem(penalty={self.penalty.name}, max_penalty={self.max_penalty!r}, "
                f"horizon={self.horizon}, delta={self.delta!r}, A_max={self.A_max}, S_max={self.S_max})")

    def releases(self, S_bar) -> int | np.ndarray:
        """k(S̄) = ⌈H/S̄⌉ releases over the horizon, for one S̄ or an array of them (slots ≥ 1)."""
        s = np.asarray(S_bar)
        if s.dtype == bool or not np.issubdtype(s.dtype, np.integer) or np.any(s < 1):
            raise InvalidInputError(f"`S_bar` must be integers ≥ 1 (slots), got {fmt(S_bar)}")
        k = -(-self.horizon // s)  # ⌈H/S̄⌉
        return int(k) if k.ndim == 0 else k

    def evaluate(self, A: int, S_bar: int, epsilon_c: float) -> ModelFreeEvaluation:
        """Evaluate a candidate schedule: its penalty (numpy) and its model-free guarantee (the accountant).

        Parameters
        ----------
        A : int
            Aging (slots), ≥ 0.
        S_bar : int
            Inter-publish time (slots), ≥ 1.
        epsilon_c : float
            Budget per release (nats), > 0 and finite.

        Returns
        -------
        ModelFreeEvaluation

        Raises
        ------
        InvalidInputError
            If a value is outside the ranges above.
        """
        A = check_int(A, "A", 0, "slots")
        S_bar = check_int(S_bar, "S_bar", 1, "slots")
        eps = check_epsilon_c(epsilon_c)
        pen = self.epoch_penalty(A, S_bar, eps)  # (M2): max over the epoch's ages
        guarantee = model_free_guarantee(eps, horizon=self.horizon, delta=self.delta, S_bar=S_bar, windows=self.windows)
        violations = self.penalty_violations("(M2)", pen) + self.box_violations(A, S_bar)
        return ModelFreeEvaluation(
            schedule=Schedule(A, S_bar, eps),
            guarantee=guarantee,
            epsilon=guarantee.epsilon,
            penalty=pen,
            peak_aoi=A + S_bar - 1,
            feasible=not violations,
            violations=tuple(violations),
        )
