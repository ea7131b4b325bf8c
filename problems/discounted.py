"""The variance-optimal Laplace schedule under (discounted) differential privacy (beyond Farokhi (2020)).

Source of the constraints: F. Farokhi, "Temporally Discounted Differential Privacy for Evolving Datasets on an Infinite Horizon", ACM/IEEE ICCPS 2020, Theorems 6,
11, 15 (eqs. 6, 10, 13).  With r_t = Δf_t / b_t (the privacy-loss bound of Theorem 6)::

    minimise    Σ_t w_t · 2 b_t² = Σ_t w_t · 2 Δf_t² / r_t²      (total Laplace variance)
    subject to  (A r)_t = Σ_{k≤t} d_{t−k} r_k ≤ ε,   t = 1..T      (eq. 6 / 10 / 13)
                r_t > 0

with d_j = 1 (ε-DP), α^j (exponential, Definition 9) or 1/(1 + βj) (hyperbolic,
Definition 13).  The constraints are linear in r and the objective is convex on r > 0, so the
problem is convex and its KKT conditions are necessary and sufficient.  For exponential
discounting (and ε-DP, α = 1) A r is the one-step recursion s_t = α s_{t−1} + r_t (sparse);
for hyperbolic discounting A is a dense lower-triangular Toeplitz matrix.

Steps with Δf_t = 0 need no noise (b_t = 0, r_t = 0, no loss) and are left out of the
optimisation; steps with w_t = 0 get no variance weight and are given r_t → 0 (b_t = ∞) by
any optimum, so all weights must be > 0 where Δf_t > 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.privacy.discounted import (
    DiscountedLoss,
    check_horizon,
    check_notion,
    check_vector,
    discounted_loss,
    total_variance,
)
from policyopt.errors import InvalidInputError, check_positive, fmt
from policyopt.privacy.discounted_schedules import corollary_schedule
from policyopt.result import result_repr

__all__ = ["DiscountedScheduleProblem", "ScheduleEvaluation"]


@dataclass(frozen=True)
class ScheduleEvaluation:
    """A candidate schedule b_1..b_T evaluated with numpy alone.

    Attributes
    ----------
    worst_loss : float
        max_t of the discounted loss upper bound (nats, :attr:`DiscountedLoss.worst`).
    feasible : bool
        ``worst_loss ≤ ε`` (value + rigorous rounding bound) and every b_t ≥ 0.
    objective : float
        Σ_t w_t 2 b_t² (squared query units); ``inf`` if some b_t is infinite.
    loss : DiscountedLoss
        Running sums per slot.
    """

    worst_loss: float
    feasible: bool
    objective: float
    loss: DiscountedLoss

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


class DiscountedScheduleProblem:
    """Minimum-variance Laplace scales b_1..b_T meeting ε-DP or (ε, α)/(ε, β)-discounted DP.

    Parameters
    ----------
    notion : {"dp", "exponential", "hyperbolic"}
    epsilon : float
        ε > 0, nats.
    horizon : int
        T ≥ 1, slots.
    alpha : float, optional
        α ∈ (0, 1] (exponential only).
    beta : float, optional
        β ≥ 0 (hyperbolic only).
    sensitivity : float or array_like (T,)
        Δf_t ≥ 0, query units (default 1).
    weights : array_like (T,), optional
        w_t > 0 (default 1): weight of step t's variance.

    Raises
    ------
    InvalidInputError
        On a bad notion/parameter combination, ε ≤ 0, T < 1, negative sensitivities, or a
        weight ≤ 0 at a step with Δf_t > 0.

    Notes
    -----
    ``solve(method="cvxpy")`` compiles with :meth:`to_cvxpy` and solves with Clarabel;
    ``solve(method="dual")`` maximises the Lagrange dual with L-BFGS-B (FFT products); both in
    :mod:`policyopt.solvers.discounted_opt`.  The problem is never mutated.

    References
    ----------
    Farokhi (2020), Theorems 6, 11, 15 (eqs. 6, 10, 13); Corollaries 8, 12, 16 for the comparison.

    Examples
    --------
    >>> prob = DiscountedScheduleProblem("exponential", 1.0, 5, alpha=0.5)
    >>> prob.evaluate([2.0] * 5).feasible
    True
    """

    variables = ("schedule",)
    integrality = {"schedule": "continuous"}
    is_convex = True
    objective = "Σ_t w_t · 2 Δf_t² / r_t² (total Laplace variance, r_t = Δf_t / b_t)"
    constraints = ("Σ_{k≤t} d_{t−k} r_k ≤ ε for t = 1..T (eqs. 6, 10, 13)", "r_t > 0")
    methods = ("cvxpy", "dual", "reduced")

    def __init__(self, notion, epsilon, horizon, *, alpha=None, beta=None, sensitivity=1.0, weights=None):
        self.notion, p = check_notion(notion, alpha, beta)
        self.alpha = p if self.notion == "exponential" else None
        self.beta = p if self.notion == "hyperbolic" else None
        self.epsilon = check_positive(epsilon, "epsilon", "nats")
        self.horizon = T = check_horizon(horizon)
        self.sensitivity = check_vector(sensitivity, "sensitivity", T, allow_zero=True, unit="query units")
        w = np.ones(T) if weights is None else check_vector(weights, "weights", T, allow_zero=True, unit="weights")
        bad = (w <= 0) & (self.sensitivity > 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidInputError(
                f"`weights` must be > 0 where the sensitivity is > 0; entry {i} is {float(w[i])!r} "
                "(a zero weight makes the optimal scale b_t infinite)"
            )
        self.weights = w
        self.sensitivity.setflags(write=False)
        self.weights.setflags(write=False)

    def __repr__(self) -> str:
        par = f", alpha={self.alpha!r}" if self.alpha is not None else (f", beta={self.beta!r}" if self.beta is not None else "")
        return f"DiscountedScheduleProblem({self.notion!r}, epsilon={self.epsilon!r}, horizon={self.horizon}{par})"

    @property
    def parameter(self) -> dict:
        """``{"alpha": α}``, ``{"beta": β}`` or ``{}``: the notion's keyword arguments."""
        if self.alpha is not None:
            return {"alpha": self.alpha}
        if self.beta is not None:
            return {"beta": self.beta}
        return {}

    @property
    def cost(self) -> np.ndarray:
        """c_t = 2 w_t Δf_t², shape (T,): the objective is Σ c_t / r_t²."""
        return 2.0 * self.weights * self.sensitivity**2

    def objective_value(self, schedule) -> float:
        """Σ_t w_t 2 b_t² of a schedule (numpy), squared query units.

        Raises
        ------
        InvalidInputError
            If `schedule` is not T entries ≥ 0.
        """
        b = self._schedule_iv(schedule)
        return total_variance(b, self.weights)

    def _schedule_iv(self, schedule) -> np.ndarray:
        return check_vector(schedule, "schedule", self.horizon, allow_zero=True, unit="Laplace scales")

    def evaluate(self, schedule) -> ScheduleEvaluation:
        """Evaluate a schedule with numpy alone (accounting of :mod:`policyopt.privacy.discounted`).

        Parameters
        ----------
        schedule : array_like, shape (T,)
            b_1..b_T ≥ 0.

        Returns
        -------
        ScheduleEvaluation

        Raises
        ------
        InvalidInputError
            If `schedule` is not T finite entries ≥ 0.
        """
        b = self._schedule_iv(schedule)
        loss = discounted_loss(b, self.sensitivity, self.notion, **self.parameter)
        worst = loss.worst
        return ScheduleEvaluation(worst, bool(worst <= self.epsilon), self.objective_value(b), loss)

    def corollary_schedule(self, variant: str = "corollary") -> np.ndarray:
        """The notion's corollary schedule (8, 12 or corrected 16) for the same ε, T and max Δf.

        Raises
        ------
        InvalidInputError
            For exponential with α = 1 or hyperbolic with β = 0 (no corollary; use dp).
        """
        return corollary_schedule(self.notion, self.epsilon, self.horizon, sensitivity=float(self.sensitivity.max()),
                                  variant=variant, **self.parameter)

    def reference_scale(self) -> float:
        """ρ_ref = ε / max_t Σ_{j<t} d_j: the largest constant r that is feasible (nats).

        Used to scale the compiled problem to r = ρ_ref·u with u ≈ 1.
        """
        from policyopt.privacy.discounted import discount_kernel

        d = discount_kernel(self.notion, self.horizon, **self.parameter)
        return self.epsilon / float(np.sum(d))

    def to_cvxpy(self):
        """Compile to cvxpy in scaled variables u = r / ρ_ref.

        Returns
        -------
        dict
            ``problem`` (cvxpy.Problem, DCP), ``u`` (Variable over the active steps, Δf_t > 0),
            ``active`` (bool mask (T,)), ``budget`` (the constraint A u ≤ ε/ρ_ref whose dual
            is μ), ``scale`` ρ_ref, ``normaliser`` N (objective = N · compiled objective),
            ``form`` (``"recursion"``, ``"dense"`` or ``"sum"``).

        Notes
        -----
        Exponential (α < 1): s_1 = u_1, s_t = α s_{t−1} + u_t, s ≤ ε/ρ_ref (O(T) nonzeros).
        ε-DP (and α = 1, β = 0): the single constraint Σ_t u_t ≤ ε/ρ_ref (the others are implied
        since u ≥ 0); its multiplier is λ_T, the other λ_t are 0.
        Hyperbolic: dense lower-triangular A (T² / 2 nonzeros).  Steps with Δf_t = 0 keep
        r_t = 0 (they are fixed, not variables).  Original multipliers: λ = N μ / ρ_ref.
        """
        import cvxpy as cp

        active = self.sensitivity > 0
        rho = self.reference_scale()
        c = self.cost
        N = float(np.sum(c[active])) / rho**2 if active.any() else 1.0
        chat = c / (rho**2 * N)
        T = self.horizon
        M = self.epsilon / rho
        u_full_idx = np.flatnonzero(active)
        n = u_full_idx.size
        u = cp.Variable(n, pos=True, name="u")
        # embed u into the full horizon (r_t = 0 where Δf_t = 0)
        if n == T:
            ufull = u
        else:
            import scipy.sparse as sp

            E = sp.csr_matrix((np.ones(n), (u_full_idx, np.arange(n))), shape=(T, n))
            ufull = E @ u
        obj = cp.sum(cp.multiply(chat[active], cp.power(u, -2)))  # Σ c_t/r_t², scaled
        a = {"dp": 1.0, "exponential": self.alpha, "hyperbolic": 1.0 if self.beta == 0 else None}[self.notion]
        if a is None:
            from policyopt.privacy.discounted import discount_matrix

            A = discount_matrix("hyperbolic", T, beta=self.beta)  # eq. (13)
            budget = A @ ufull <= M
            cons = [budget]
            form = "dense"
        elif a == 1.0:
            # ε-DP (eq. 6): with r ≥ 0 the partial sums increase, so t = T implies every t < T
            budget = cp.sum(ufull) <= M
            cons = [budget]
            form = "sum"
        else:
            s = cp.Variable(T, name="s")
            cons = [s[0] == ufull[0]]
            if T > 1:
                cons.append(s[1:] == a * s[:-1] + ufull[1:])  # eq. (10): s_t = α s_{t−1} + r_t
            budget = s <= M
            cons.append(budget)
            form = "recursion"
        prob = cp.Problem(cp.Minimize(obj), cons)
        return {"problem": prob, "u": u, "active": active, "budget": budget, "scale": rho,
                "normaliser": N, "form": form}

    def dual_bound(self, lam) -> float:
        """Lagrange dual value g(λ) = Σ_t 3 (c_t a_t² / 4)^{1/3} − ε Σ_t λ_t, a = Aᵀλ.

        A lower bound on the optimal objective for every λ ≥ 0 (weak duality); negative entries
        of `lam` are clipped to 0.  min_r c/r² + a r = 3(c a²/4)^{1/3} at r = (2c/a)^{1/3}.

        Parameters
        ----------
        lam : array_like, shape (T,)
            Multipliers of the T loss constraints (squared query units per nat).

        Returns
        -------
        float
            Squared query units; ``-inf`` if some active step has a_t = 0.
        """
        from policyopt.privacy.discounted import discounted_sum_transpose

        lam = np.maximum(np.asarray(lam, dtype=float), 0.0)
        a = discounted_sum_transpose(lam, self.notion, **self.parameter)
        active = self.sensitivity > 0
        c = self.cost[active]
        a = a[active]
        if np.any(a <= 0):
            return -math.inf
        return float(np.sum(3.0 * np.cbrt(c * a * a / 4.0)) - self.epsilon * np.sum(lam))

    def solve(self, method: str = "cvxpy", **options):
        """Solve for the variance-optimal schedule.

        Parameters
        ----------
        method : {"cvxpy", "dual", "reduced"}
            ``"cvxpy"``: the compiled model (:meth:`to_cvxpy`) with Clarabel; ``"dual"``: L-BFGS-B
            on the Lagrange dual with FFT products (scales to large hyperbolic T); ``"reduced"``:
            L-BFGS-B on the prefix of discounted losses before the budget is spent (T = 10⁵ in
            seconds).  All answers are verified and certified the same way (duality gap, KKT).
        **options
            Passed to the back end's ``solve`` (:mod:`policyopt.solvers.discounted_opt`).

        Returns
        -------
        policyopt.result.Solution
            ``decision["schedule"]`` is the list b_1..b_T.

        Raises
        ------
        InvalidInputError
            If `method` is unknown.
        """
        if method not in self.methods:
            raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {list(self.methods)}")
        from policyopt.registry import get_solver  # by name: a problem never imports a solver

        return get_solver(method, "discounted").solve(self, **options)

