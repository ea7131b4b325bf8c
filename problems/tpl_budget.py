"""Privacy budget allocation for α-DP_T under temporal correlations (Cao et al. 2019).

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019, Definition 8, eqs. (10)–(15),
Theorem 11, Algorithms 7–8, eqs. (26)–(27), Fig. 8::

    minimise    Σ_t 2 (Δf / ε_t)²                       (Laplace noise variance, any t-scale)
    subject to  TPL_t = BPL_t + FPL_t − ε_t ≤ α,  t = 1..T   (Definition 8, eq. 10)
                BPL_1 = ε_1, BPL_t = L_B(BPL_{t−1}) + ε_t    (eq. 13)
                FPL_T = ε_T, FPL_t = L_F(FPL_{t+1}) + ε_t    (eq. 15)
                ε_t > 0 (nats)

The recursions are equality constraints through the non-decreasing, piecewise loss
functions L_B, L_F (eq. 24).  These are neither convex nor concave in general (each piece
is a difference of two convex functions; for Fig. 8's P_B, L is concave on [0, ∞)), so the
feasible set is not convex (``is_convex`` is False).  The paper gives two heuristics,
Algorithm 7 (constant budget bounded by the supremum of TPL, Theorem 11) and Algorithm 8
(TPL_t = α at every t); ``method="optimal"`` solves the problem above globally with SCIP,
after a local search and bound tightening (see :mod:`policyopt.solvers.tpl_optimal`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_positive, fmt
from policyopt.privacy.tpl_leakage import TemporalLeakage, leakage, leakage_upper, paired_users
from policyopt.privacy.tpl_loss import LossFunction
from policyopt.result import result_repr

__all__ = ["BudgetAllocationProblem", "BudgetEvaluation", "BudgetCertificate", "TPL_RTOL", "SHRINK_START", "SHRINK_MAX"]

#: Relative tolerance of the α-DP_T check inside the solvers: max_t TPL_t ≤ α·(1 + TPL_RTOL).
#: Returned budgets do not rely on it: they pass :meth:`BudgetAllocationProblem.certify`.
TPL_RTOL = 1e-9
#: First relative shrink κ tried by :meth:`BudgetAllocationProblem.certify` when the budgets as
#: computed are not certified (2⁻⁴⁶ ≈ 1.4e-14; then doubled).
SHRINK_START = 2.0**-46
#: Largest relative shrink κ :meth:`BudgetAllocationProblem.certify` tries before giving up (2⁻¹⁰).
SHRINK_MAX = 2.0**-10


@dataclass(frozen=True)
class BudgetCertificate:
    """Budgets whose exact max TPL is proven ≤ α (Definition 8), and how they were obtained.

    Attributes
    ----------
    budgets : numpy.ndarray, shape (T,)
        ε_t (nats) to deploy: the candidate's budgets times (1 − κ).
    shrink : float
        κ ≥ 0, the relative amount by which every budget was reduced (0 when the candidate was
        certified as it was).
    leakage : TemporalLeakage
        :func:`~policyopt.privacy.temporal.leakage_upper` of `budgets`: rounded-up BPL/FPL/TPL,
        ``leakage.tpl_level`` ≤ α.
    """

    budgets: np.ndarray
    shrink: float
    leakage: TemporalLeakage

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)

_METHODS = {
    "upper-bound": "UpperBoundAllocator",
    "quantification": "QuantificationAllocator",
    "optimal": "OptimalAllocator",
}


@dataclass(frozen=True)
class BudgetEvaluation:
    """A candidate allocation ε_1..ε_T evaluated with numpy alone.

    Attributes
    ----------
    max_tpl : float
        max_t TPL_t (nats), the smallest α for which the release is α-DP_T (Definition 8).
    feasible : bool
        All ε_t > 0 and ``max_tpl ≤ α·(1 + 1e-9)``.
    total_variance : float
        Σ_t 2(Δf/ε_t)², variance of the Laplace noise summed over the T releases
        (``inf`` if some ε_t = 0).
    leakage : TemporalLeakage
        BPL, FPL and TPL at every step (:func:`policyopt.privacy.temporal.leakage`).
    """

    max_tpl: float
    feasible: bool
    total_variance: float
    leakage: TemporalLeakage

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


class BudgetAllocationProblem:
    """Budgets ε_1..ε_T that make a continuous Laplace release α-DP_T (Cao et al. 2019, Definition 8).

    Parameters
    ----------
    P_B, P_F : None, array_like (n, n), LossFunction, or list of these
        Backward / forward transition matrices (a list is a population; see
        :func:`policyopt.privacy.temporal.leakage`).  None: that correlation is unknown to the adversary.
    tpl_level : float
        α > 0, the target TPL level of α-DP_T, nats.
    horizon : int
        Number of releases T ≥ 1 (steps).
    sensitivity : float, keyword-only
        Δf > 0 of the released query; the Laplace scale at step t is Δf/ε_t.

    Raises
    ------
    InvalidInputError
        If `tpl_level` or `sensitivity` is not a finite positive number, `horizon` is not an
        integer ≥ 1, or the populations of `P_B` and `P_F` differ in size.
    InvalidModelError
        If a matrix is not square stochastic.

    Notes
    -----
    ``solve(method)`` with ``"upper-bound"`` (Algorithm 7), ``"quantification"``
    (Algorithm 8) or ``"optimal"`` (global SCIP solve); the problem is never mutated.

    References
    ----------
    Cao et al. (2019): Definition 8, eqs. (10)–(15), (26)–(27), Theorem 11, Algorithms 7–8.

    Examples
    --------
    >>> prob = BudgetAllocationProblem([[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]], 1.0, 10)
    >>> prob.evaluate([0.1] * 10).feasible
    True
    """

    variables = ("budgets",)
    integrality = {"budgets": "continuous"}
    is_convex = False
    objective = "total Laplace noise variance Σ_t 2(Δf/ε_t)²"
    constraints = (
        "TPL_t = BPL_t + FPL_t − ε_t ≤ α for t = 1..T (Definition 8, eq. 10)",
        "BPL_t = L_B(BPL_{t−1}) + ε_t (eq. 13), FPL_t = L_F(FPL_{t+1}) + ε_t (eq. 15)",
        "ε_t > 0",
    )
    methods = tuple(_METHODS)

    def __init__(self, P_B, P_F, tpl_level, horizon, *, sensitivity=1.0):
        self.tpl_level = check_positive(tpl_level, "tpl_level", "nats")
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
            raise InvalidInputError(f"`horizon` must be an integer T ≥ 1 (steps), got {fmt(horizon)}")
        self.horizon = int(horizon)
        self.sensitivity = check_positive(sensitivity, "sensitivity", "query units")
        ub, uf = paired_users(P_B, P_F)  # raises InvalidModelError for a non-stochastic matrix
        #: Loss functions per user (None = L ≡ 0), built once.
        self.loss_B: tuple[LossFunction | None, ...] = tuple(ub)
        self.loss_F: tuple[LossFunction | None, ...] = tuple(uf)

    def __repr__(self) -> str:
        return (
            f"BudgetAllocationProblem(users={len(self.loss_B)}, tpl_level={self.tpl_level!r}, "
            f"horizon={self.horizon}, sensitivity={self.sensitivity!r})"
        )

    @property
    def alpha(self) -> float:
        """α of α-DP_T (= ``tpl_level``), nats."""
        return self.tpl_level

    def total_variance(self, budgets) -> float:
        """Σ_t 2(Δf/ε_t)² (Laplace variance 2b², b = Δf/ε_t); ``inf`` if some ε_t = 0."""
        eps = np.asarray(budgets, dtype=float)
        with np.errstate(divide="ignore"):
            return float(np.sum(2.0 * (self.sensitivity / eps) ** 2))

    def evaluate(self, budgets) -> BudgetEvaluation:
        """Evaluate an allocation with numpy alone.

        Parameters
        ----------
        budgets : array_like, shape (T,)
            ε_1..ε_T ≥ 0, nats; T must equal ``horizon``.

        Returns
        -------
        BudgetEvaluation

        Raises
        ------
        InvalidInputError
            If `budgets` is not a 1-D sequence of ``horizon`` finite non-negative numbers.
        """
        try:
            eps = np.asarray(budgets, dtype=float)
        except (TypeError, ValueError):
            raise InvalidInputError(f"`budgets` must be {self.horizon} non-negative numbers (nats), got {fmt(budgets)}") from None
        if eps.shape != (self.horizon,):
            raise InvalidInputError(
                f"`budgets` must have length horizon={self.horizon}, got shape {eps.shape}: {fmt(budgets)}"
            )
        key = eps.tobytes()
        last = getattr(self, "_last_evaluation", None)
        if last is not None and last[0] == key:  # the same budgets again (a solver's check, then certify): reuse
            return last[1]
        lk = leakage(list(self.loss_B), list(self.loss_F), eps)  # eqs. (10), (13), (15)
        max_tpl = lk.tpl_level
        feasible = bool(np.all(eps > 0)) and max_tpl <= self.tpl_level * (1.0 + TPL_RTOL)  # Definition 8
        result = BudgetEvaluation(max_tpl, feasible, self.total_variance(eps), lk)
        self._last_evaluation = (key, result)
        return result

    def certify(self, budgets) -> BudgetCertificate:
        """Shrink `budgets` until their exact max TPL is proven ≤ α.

        The rounded-up leakage (:func:`~policyopt.privacy.temporal.leakage_upper`, which adds a proven
        bound on the rounding error of the recursions (13), (15), (10)) is computed for
        (1 − κ)·budgets with κ = 0, then κ = max(``SHRINK_START`` = 2⁻⁴⁶, excess / min_t ε_t) (the
        excess of the rounded-up max TPL over α), doubled until its max TPL is ≤ α.  Shrinking every ε_t lowers every TPL_t by at least (1 − s)·ε_t (L is non-decreasing),
        so a few doublings suffice; Algorithm 8, whose TPL_t equals α to rounding, typically needs
        κ ≈ 1e-13.  The budgets then meet α-DP_T in exact arithmetic, not only to a tolerance.

        Parameters
        ----------
        budgets : array_like, shape (T,)
            Candidate ε_1..ε_T (nats), > 0.

        Returns
        -------
        BudgetCertificate

        Raises
        ------
        InvalidInputError
            If `budgets` is not ``horizon`` finite non-negative numbers.
        RuntimeError
            If even κ = ``SHRINK_MAX`` does not certify them (the candidate was far from feasible: a bug
            of the solver that produced it).
        """
        eps = self.evaluate(budgets).leakage.budgets  # validates shape and values
        kappa = 0.0
        while True:
            cand = eps * (1.0 - kappa) if kappa else eps.copy()
            lk = leakage_upper(list(self.loss_B), list(self.loss_F), cand)
            if lk.tpl_level <= self.tpl_level:
                return BudgetCertificate(cand, kappa, lk)
            if kappa == 0.0:
                # first guess: TPL_t falls by ≥ κ·ε_t, so κ = excess / min ε_t removes the excess
                # (to first order; the doubling below covers the rest)
                lo = float(np.min(eps))
                guess = (lk.tpl_level - self.tpl_level) / lo if lo > 0 else SHRINK_START
                kappa = min(max(SHRINK_START, guess), SHRINK_MAX)
            else:
                kappa = 2.0 * kappa
            if kappa > SHRINK_MAX:
                raise RuntimeError(
                    f"budgets could not be certified α-DP_T by shrinking them up to {SHRINK_MAX:g}: "
                    f"rounded-up max TPL {lk.tpl_level!r} > α = {self.tpl_level!r}"
                )

    def solve(self, method: str = "quantification", **options):
        """Allocate the budgets.

        Parameters
        ----------
        method : {"upper-bound", "quantification", "optimal"}
            Algorithm 7, Algorithm 8 (Cao et al. 2019) or the global optimum by SCIP.
        **options
            Passed to the back end's ``solve`` (e.g. ``time_limit`` for ``"optimal"``).

        Returns
        -------
        policyopt.result.Solution
            ``decision["budgets"]`` is the list ε_1..ε_T (nats), certified by :meth:`certify`
            (exact max TPL ≤ α); ``values["max_tpl"]`` is the rounded-up max TPL (≤ α),
            ``values["budget_shrink"]`` the κ applied and ``values["tpl_rounding_margin"]`` the
            absolute error bound E of the recursion (nats).

        Raises
        ------
        InvalidInputError
            If `method` is unknown.
        """
        if method not in _METHODS:
            raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {sorted(_METHODS)}")
        from policyopt.registry import get_solver  # by name: a problem never imports a solver

        return get_solver(method, "tpl").solve(self, **options)
