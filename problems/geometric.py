"""Formulations (39), (41) and (42) of Zhang et al. with the geometric surrogate Δ(t) = c·ρ^t (38).

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Section V-C, Proposition 4 (40),
Appendix F, Algorithms 1–2.  Privacy in nats, time in slots.

The formulations::

    (39)  min  ln(1 + cρ^A (e^{ε_C} − 1) / (1 − cρ^{S̄} e^{ε_C}))
          s.t. cρ^{S̄} e^{ε_C} < 1                        (39b), written u = c·e^{ε_C − L S̄} ≤ 1 − margin
               f(A + S̄ − o, ε_C) ≤ f̄                     (39c), o = 1 (discrete peak AoI, default) or 0 (paper)
               0 ≤ A ≤ A_max, 1 ≤ S̄ ≤ S_max, 0 < ε_C ≤ ε_max  (L = ln(1/ρ))
    (41)  (39) with (40) imposed, L·S̄ = ln(2c) + ε_C: the branch where A ≥ 0 does not bind;
          min ρ^A (e^{ε_C} − 1), reported in the units of (39a) as ln(1 + 2cρ^A(e^{ε_C} − 1)).
    (42)  (39) with A = 0: min (e^{ε_C} − 1)/(1 − cρ^{S̄} e^{ε_C}), reported as ln(1 + that).

Convexity (what is and is not)
------------------------------
None of (39), (41), (42) is jointly convex.  The paper states that (41) is convex whenever f
is; it is not: the Hessian of ρ^A(e^{ε_C} − 1) in (A, ε_C) has determinant
−L²ρ^{2A}e^{ε_C} < 0 (indefinite) everywhere.  What *is* convex: for a fixed
ε_C, the log of (39a)'s ratio, const − L·A − ln(1 − c e^{ε_C} e^{−L S̄}), is convex in (A, S̄),
and (39c) becomes the linear constraint A + S̄ − o ≤ T_max(ε_C) through the monotone inverse of f
in the peak age (the MSE is concave in t, so f itself is not a convex constraint).  That inner
problem is DCP with the exponential cone; the cvxpy back end searches ε_C outside it.

When the envelope dominates the exact Δ(t) over the horizon (``GeometricEnvelope``), the
objective of (39) is an upper bound on the exact peak risk (30) of the same schedule, because
(30) increases in Δ(A) and Δ(S̄).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.search import grid_then_brent
from policyopt.errors import InvalidInputError, fmt
from policyopt.models.markov import GeometricEnvelope
from policyopt.utility.continuous_penalty import ContinuousPenalty
from policyopt.utility.penalty import check_max_penalty
from policyopt.result import result_repr

__all__ = [
    "GeometricScheduleProblem",
    "PeakRiskProblem",
    "KKTBranchProblem",
    "NoAgingProblem",
    "GeometricEvaluation",
]

#: Default margin in (39b): u = c·e^{ε_C − L S̄} ≤ 1 − margin.
DEFAULT_MARGIN = 1e-9


@dataclass(frozen=True)
class GeometricEvaluation:
    """A candidate (A, S̄, ε_C) evaluated with numpy alone.

    Attributes
    ----------
    A, S_bar : float
        Aging and inter-publish time (slots; real in the relaxation).
    epsilon_c : float
        Budget per release (nats).
    objective : float or None
        (39a) in nats (``None`` when (39b) fails).
    native_objective : float or None
        The formulation's own objective: (39a), (41a) or (42a).
    penalty : float
        f(A + S̄ − o, ε_C).
    peak_age : float
        A + S̄ − o.
    condition : float
        u = c ρ^{S̄} e^{ε_C}; (39b) needs u < 1.
    kkt_40_residual : float
        ``|2c ρ^{S̄} e^{ε_C} − 1|``, the relative residual of (40) (meaningful when A > 0).
    feasible : bool
    violations : tuple of str
    """

    A: float
    S_bar: float
    epsilon_c: float
    objective: float | None
    native_objective: float | None
    penalty: float
    peak_age: float
    condition: float
    kkt_40_residual: float
    feasible: bool
    violations: tuple[str, ...]

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


def _positive(value, name, *, lower=0.0, strict=True, upper=None):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        raise InvalidInputError(f"`{name}` must be a finite number, got {fmt(value)}")
    v = float(value)
    if (strict and not v > lower) or (not strict and not v >= lower) or (upper is not None and not v < upper):
        rng = f"{'>' if strict else '≥'} {lower:g}" + (f" and < {upper:g}" if upper is not None else "")
        raise InvalidInputError(f"`{name}` must be {rng}, got {fmt(value)}")
    return v


class GeometricScheduleProblem:
    """Common part of (39), (41), (42): data, bounds, numpy evaluation.

    Parameters
    ----------
    c : float
        Envelope constant c ≥ 1 of (38).
    rho : float
        Envelope rate ρ in (0, 1).
    penalty : ContinuousPenalty
        f(T, ε_C), non-decreasing in T, non-increasing in ε_C.
    max_penalty : float
        f̄ > 0.
    A_max : float
        Upper bound on A (slots, ≥ 0); needed for finite solver bounds.
    S_max : float
        Upper bound on S̄ (slots, ≥ 1).
    integer : bool
        Integer A and S̄ (default: the continuous relaxation).
    epsilon_max : float, optional
        Upper bound on ε_C; default ln(1/c) + L·S_max, the largest value (39b) allows.
    margin : float
        (39b) is imposed as c ρ^{S̄} e^{ε_C} ≤ 1 − margin.
    aoi_offset : {1, 0}
        Peak age T = A + S̄ − aoi_offset: 1 is the discrete peak AoI of the main job (so the
        relaxation bounds the integer problem), 0 the paper's A + S̄.

    Raises
    ------
    InvalidInputError
        If a parameter is out of range (the message names it and shows the value).
    """

    formulation = "39"
    is_convex = False
    convex_parts = (
        "for fixed epsilon_c: minimise -L*A - log(1 - c*exp(epsilon_c)*exp(-L*S_bar)) "
        "s.t. A + S_bar - o <= T_max(epsilon_c), box bounds (DCP, exponential cone)"
    )

    def __init__(
        self,
        c: float,
        rho: float,
        penalty: ContinuousPenalty,
        max_penalty: float,
        *,
        A_max: float = 168,
        S_max: float = 168,
        integer: bool = False,
        epsilon_max: float | None = None,
        margin: float = DEFAULT_MARGIN,
        aoi_offset: int = 1,
    ):
        self.c = _positive(c, "c", lower=1.0, strict=False)
        self.rho = _positive(rho, "rho", lower=0.0, upper=1.0)
        if not isinstance(penalty, ContinuousPenalty):
            raise InvalidInputError(f"`penalty` must be a ContinuousPenalty, got {fmt(penalty)}")
        self.penalty = penalty
        self.max_penalty = check_max_penalty(max_penalty)
        self.A_max = _positive(A_max, "A_max", lower=0.0, strict=False)
        self.S_max = _positive(S_max, "S_max", lower=1.0, strict=False)
        if not isinstance(integer, bool):
            raise InvalidInputError(f"`integer` must be True or False, got {fmt(integer)}")
        self.integer = integer
        self.margin = _positive(margin, "margin", lower=0.0, upper=1.0)
        if aoi_offset not in (0, 1) or isinstance(aoi_offset, bool):
            raise InvalidInputError(f"`aoi_offset` must be 1 (peak AoI A + S̄ − 1) or 0 (the paper's A + S̄), got {fmt(aoi_offset)}")
        self.aoi_offset = int(aoi_offset)
        self.L = -math.log(self.rho)
        cap = math.log1p(-self.margin) - math.log(self.c) + self.L * self.S_max
        self.epsilon_max = cap if epsilon_max is None else _positive(epsilon_max, "epsilon_max")
        self.epsilon_min = 1e-12

    @classmethod
    def from_envelope(cls, envelope: GeometricEnvelope, penalty: ContinuousPenalty, max_penalty: float, **kwargs):
        """Build the problem with (c, ρ) from a model's envelope (38); A_max, S_max default to its horizon.

        Raises
        ------
        InvalidInputError
            If `envelope` is not a GeometricEnvelope or its ρ is not in (0, 1).
        """
        if not isinstance(envelope, GeometricEnvelope):
            raise InvalidInputError(f"`envelope` must be a GeometricEnvelope, got {fmt(envelope)}")
        if cls.formulation != "42":  # (42) fixes A = 0
            kwargs.setdefault("A_max", envelope.horizon)
        kwargs.setdefault("S_max", max(1, envelope.horizon))
        return cls(envelope.c, envelope.rho, penalty, max_penalty, **kwargs)

    def __repr__(self) -> str:
        kind = "integer" if self.integer else "relaxed"
        return (
            f"{type(self).__name__}(({self.formulation}), c={self.c:.6g}, rho={self.rho:.6g}, "
            f"penalty={self.penalty.name}, max_penalty={self.max_penalty:g}, {kind})"
        )

    # --- description -----------------------------------------------------------------
    @property
    def variables(self) -> tuple[str, ...]:
        """Decision variables of this formulation."""
        return ("A", "S_bar", "epsilon_c")

    @property
    def integrality(self) -> dict:
        """Variable kinds: integer A, S̄ when ``integer``, else continuous."""
        kind = "integer" if self.integer else "continuous"
        return {"A": kind, "S_bar": kind, "epsilon_c": "continuous"}

    @property
    def bounds(self) -> dict:
        """Finite variable bounds (those a global solver needs)."""
        return {"A": (0.0, self.A_max), "S_bar": (1.0, self.S_max), "epsilon_c": (self.epsilon_min, self.epsilon_max)}

    @property
    def constraints(self) -> tuple[str, ...]:
        """The constraints in words."""
        return (
            f"(39b) c*rho^S_bar*exp(epsilon_c) <= 1 - {self.margin:g}",
            f"(39c) f(A + S_bar - {self.aoi_offset}, epsilon_c) <= {self.max_penalty:g}",
        )

    # --- numpy evaluation ------------------------------------------------------------
    def log_condition(self, S_bar, epsilon_c):
        """ln(c ρ^{S̄} e^{ε_C}) = ln c − L·S̄ + ε_C (vectorised)."""
        return math.log(self.c) - self.L * np.asarray(S_bar, dtype=float) + np.asarray(epsilon_c, dtype=float)

    def log_ratio(self, A, S_bar, epsilon_c):
        """ln of cρ^A(e^{ε_C} − 1)/(1 − cρ^{S̄}e^{ε_C}); NaN where (39b) fails (vectorised)."""
        from policyopt.privacy.age_dependent import log_expm1

        u = self.log_condition(S_bar, epsilon_c)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = (
                math.log(self.c)
                - self.L * np.asarray(A, dtype=float)
                + log_expm1(epsilon_c)
                - np.log(-np.expm1(np.minimum(u, 0.0)))
            )
        return np.where(u < 0, val, np.nan)

    def risk(self, A, S_bar, epsilon_c):
        """(39a) in nats: ln(1 + ratio), NaN where (39b) fails (vectorised)."""
        with np.errstate(invalid="ignore"):
            return np.logaddexp(0.0, self.log_ratio(A, S_bar, epsilon_c))

    def peak_age(self, A, S_bar):
        """A + S̄ − o (slots)."""
        return np.asarray(A, dtype=float) + np.asarray(S_bar, dtype=float) - self.aoi_offset

    def native_objective(self, A, S_bar, epsilon_c):
        """The formulation's own objective value ((39a) here)."""
        return self.risk(A, S_bar, epsilon_c)

    def _formulation_violations(self, A, S_bar, epsilon_c, tol) -> list[str]:
        return []

    def evaluate(self, A: float, S_bar: float, epsilon_c: float, *, tol: float = 1e-9) -> GeometricEvaluation:
        """Evaluate a candidate with numpy alone.

        Parameters
        ----------
        A, S_bar : float
            Slots (integers when ``integer``).
        epsilon_c : float
            Nats, > 0.
        tol : float
            Absolute tolerance on bounds and equality constraints.

        Returns
        -------
        GeometricEvaluation

        Raises
        ------
        InvalidInputError
            If a value is not a finite number or `epsilon_c` ≤ 0.
        """
        A = _positive(A, "A", strict=False, lower=-math.inf)
        S_bar = _positive(S_bar, "S_bar", strict=False, lower=-math.inf)
        eps = _positive(epsilon_c, "epsilon_c")
        u = float(self.log_condition(S_bar, eps))
        cond = math.exp(min(u, 700.0))
        risk = float(self.risk(A, S_bar, eps))
        native = float(self.native_objective(A, S_bar, eps))
        T = float(self.peak_age(A, S_bar))
        pen = float(self.penalty.value(T, eps))
        v = []
        if not (-tol <= A <= self.A_max + tol):
            v.append(f"A = {A:g} outside [0, {self.A_max:g}]")
        if not (1 - tol <= S_bar <= self.S_max + tol):
            v.append(f"S_bar = {S_bar:g} outside [1, {self.S_max:g}]")
        if self.integer and (abs(A - round(A)) > tol or abs(S_bar - round(S_bar)) > tol):
            v.append(f"A = {A:g} and S_bar = {S_bar:g} must be integers")
        if not cond <= 1 - self.margin * (1 - 1e-6):
            v.append(f"(39b) fails: c·ρ^S̄·e^ε_C = {cond:.6g} > 1 − {self.margin:g}")
        if not pen <= self.max_penalty * (1 + tol):
            v.append(f"(39c) fails: f = {pen:.6g} > f̄ = {self.max_penalty:.6g}")
        v += self._formulation_violations(A, S_bar, eps, tol)
        return GeometricEvaluation(
            A=A,
            S_bar=S_bar,
            epsilon_c=eps,
            objective=None if math.isnan(risk) else risk,
            native_objective=None if math.isnan(native) else native,
            penalty=pen,
            peak_age=T,
            condition=cond,
            kkt_40_residual=abs(2.0 * cond - 1.0),
            feasible=not v,
            violations=tuple(v),
        )

    def min_penalty(self) -> tuple[float, float, float]:
        """Smallest achievable penalty under (39b) and the box, as (value, S_bar, epsilon_c).

        It is an infimum (not attained when the margin of (39b) → 0); ``(inf, nan, nan)``
        when no S̄ ≤ S_max satisfies (39b).
        """
        return _min_penalty(self)

    def solve(self, method: str = "heuristic", **options):
        """Solve with a back end from :mod:`policyopt.solvers` (the problem is not modified).

        Parameters
        ----------
        method : str
            ``"heuristic"``, ``"cvxpy"``, ``"pyomo"`` or ``"exact"`` (integer problems).

        Returns
        -------
        policyopt.result.Solution
        """
        from policyopt.registry import get_solver

        return get_solver(method).solve(self, **options)


class PeakRiskProblem(GeometricScheduleProblem):
    """Problem (39): peak risk with the geometric Δ(t) = cρ^t over (A, S̄, ε_C).  See the module docstring."""

    formulation = "39"


class KKTBranchProblem(GeometricScheduleProblem):
    """Problem (41): (39) on the branch where A ≥ 0 does not bind, with (40) L·S̄ = ln(2c) + ε_C imposed.

    The native objective is (41a) ρ^A(e^{ε_C} − 1); ``risk`` reports it in the units of (39a),
    ln(1 + 2cρ^A(e^{ε_C} − 1)), which equals (39a) when (40) holds.  Only the continuous
    relaxation is defined (S̄ is a function of ε_C).
    """

    formulation = "41"
    convex_parts = "for fixed epsilon_c, S_bar is fixed by (40) and the problem in A is a linear program"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.integer:
            raise InvalidInputError("(41) fixes S̄ = (ln 2c + ε_C)/L, so `integer`=True is not defined for it; use (39)")

    @property
    def variables(self) -> tuple[str, ...]:
        """A and ε_C; S̄ follows from (40)."""
        return ("A", "epsilon_c")

    def s_bar_of(self, epsilon_c):
        """S̄ = (ln(2c) + ε_C)/L, eq. (40)/(41b)."""
        return (math.log(2.0 * self.c) + np.asarray(epsilon_c, dtype=float)) / self.L

    def native_objective(self, A, S_bar, epsilon_c):
        """(41a) ρ^A (e^{ε_C} − 1)."""
        return np.exp(-self.L * np.asarray(A, dtype=float)) * np.expm1(np.asarray(epsilon_c, dtype=float))

    def min_penalty(self) -> tuple[float, float, float]:
        """Smallest penalty on the branch (41): A = 0, S̄ = (ln 2c + ε_C)/L in [1, S_max], minimised over ε_C.

        Returns (value, S_bar, epsilon_c); ``(inf, nan, nan)`` when no ε_C puts S̄ in the box.
        """
        lo = max(self.epsilon_min, self.L - math.log(2.0 * self.c))  # S̄ ≥ 1
        hi = self.L * self.S_max - math.log(2.0 * self.c)  # S̄ ≤ S_max
        if not hi >= lo:
            return math.inf, math.nan, math.nan

        def at(eps):
            """Penalty at A = 0 and S̄ = S̄(ε_C) of (40)."""
            return np.asarray(self.penalty.value(self.s_bar_of(eps) - self.aoi_offset, eps), dtype=float)

        best_eps, best = grid_then_brent(at, lambda e: float(at(e)), np.linspace(lo, hi, 4001))
        return best, float(self.s_bar_of(best_eps)), best_eps

    def _formulation_violations(self, A, S_bar, epsilon_c, tol):
        target = float(self.s_bar_of(epsilon_c))
        if abs(S_bar - target) > tol * max(1.0, target):
            return [f"(41b) fails: S_bar = {S_bar:g} but (ln 2c + ε_C)/L = {target:g}"]
        return []


class NoAgingProblem(GeometricScheduleProblem):
    """Problem (42): (39) with A = 0 (the aging constraint binds).

    Native objective (42a) (e^{ε_C} − 1)/(1 − cρ^{S̄}e^{ε_C}); ``risk`` is ln(1 + that), i.e. (39a) at A = 0.
    """

    formulation = "42"
    convex_parts = (
        "for fixed epsilon_c: minimise -log(1 - c*exp(epsilon_c)*exp(-L*S_bar)) s.t. S_bar - o <= T_max(epsilon_c)"
    )

    def __init__(self, *args, **kwargs):
        if kwargs.get("A_max", 0.0) != 0.0:
            raise InvalidInputError(f"(42) fixes A = 0; `A_max` must be 0 or omitted, got {fmt(kwargs['A_max'])}")
        kwargs["A_max"] = 0.0
        super().__init__(*args, **kwargs)

    @property
    def variables(self) -> tuple[str, ...]:
        """S̄ and ε_C (A = 0)."""
        return ("S_bar", "epsilon_c")

    def native_objective(self, A, S_bar, epsilon_c):
        """(42a) = exp(log ratio at A = 0) / c."""
        return np.exp(self.log_ratio(0.0, S_bar, epsilon_c)) / self.c

    def _formulation_violations(self, A, S_bar, epsilon_c, tol):
        return [] if abs(A) <= tol else [f"(42) needs A = 0, got {A:g}"]


def _min_penalty(problem: GeometricScheduleProblem, n_grid: int = 4001) -> tuple[float, float, float]:
    """Smallest penalty compatible with (39b) and the box: (value, S_bar, epsilon_c).

    For each ε_C the smallest S̄ allowed by (39b) and A = 0 minimise the peak age, so the
    infimum is a 1-D minimisation over ε_C (dense grid, then bounded Brent refinement).
    """
    log_cap = math.log1p(-problem.margin) - math.log(problem.c)

    def at(eps):
        """Penalty at the smallest S̄ that (39b) allows (A = 0), and that S̄."""
        s = np.maximum(1.0, (np.asarray(eps, dtype=float) - log_cap) / problem.L)
        val = np.asarray(problem.penalty.value(s - problem.aoi_offset, eps), dtype=float)
        return np.where(s <= problem.S_max, val, np.inf), s

    grid = np.linspace(problem.epsilon_min, problem.epsilon_max, n_grid) if problem.epsilon_max > problem.epsilon_min else np.array([problem.epsilon_min])
    best_eps, best = grid_then_brent(lambda e: at(e)[0], lambda e: float(at(e)[0]), grid)
    if not np.isfinite(best):
        return math.inf, math.nan, math.nan
    return best, float(at(best_eps)[1]), best_eps

